"""Semantic snapshots: the whole scheduler state as plain JSON, and back.

Rules this module keeps:

* A snapshot says what the state *means*, never how the core stores it:
  per host the report that rebuilds it (figures, enabled, zone, traits,
  node, the instances it listed) and when it was applied; per claim its uuid,
  host, resources, server group, creation time, whether a report confirmed
  it, its selection (with the claims its placement preempted), its request's
  fingerprint and priority (format 6), its owner (format 10) and its image's
  properties (format 11: each distinct set once, in ``images``, and per claim
  the index of its own, or None); per released instance
  its credit; per host aggregate its name, hosts and metadata. Rows, zone
  ids and trait bits never appear, so a snapshot outlives table changes.
  Per open move (format 5) its migration and instance uuids, what was
  asked, whether it evacuates, the source claim's server group and the
  destination's selection; its hold is a claim keyed by the migration uuid.
  A host's zone and ratios are those its report carried: the aggregates'
  zone and ratios come back with the aggregates. The requests the core keeps
  for a reschedule or move (format 6): each once, as its JSON, with the uuids
  it is kept for in the order they were kept (so the bound drops the same
  ones first). A host's facts (format 7: its report's hypervisor_type,
  hypervisor_version, supported_instances, cpu_info and stats): each
  distinct set once, in ``host_facts``, and per host the index of its own.
  A host's reserved vCPUs and disk and its Placement units (format 8: its
  report's ``vcpus_reserved``, ``local_gb_reserved`` and ``*_units``
  columns, a units entry None for Placement's defaults). A host's failed
  builds and metrics (format 9: its report's ``failed_builds`` and
  ``metrics``, facts like the others, in ``host_facts``).
* A fingerprint is ``request_fingerprint``'s text: a change to what that
  holds must bump :data:`SNAPSHOT_FORMAT`. Older formats carry none, and
  their claims come back with an unknown fingerprint (any repeat of the
  uuid is accepted, as it was when they were written).
* Restoring goes only through the core's own methods (``update_host``,
  ``restore_claims``, ``release``, ``restore_migration``,
  ``restore_requests``), so every index the core keeps is rebuilt by the
  code that keeps it. A claim's preempted claims are named again, never
  released again: the snapshot was taken after their release.
* Formats 1 to 8 are still read: before 9 no host has failed builds or
  metrics (a format 8 ``host_facts`` entry naming them is refused); before 8
  no host reserves vCPUs or disk or has units (Placement's defaults); before
  7 no host has facts; before 6
  claims come back with priority 0 and no preempted claims, and no request
  is kept (a reschedule or move of a claim they hold asks its resources
  and group alone).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError

from ..core import SchedulerCore
from ..core.host_facts import FACT_FIELDS
from ..core.image import CLAIM_COLUMNS, CREDIT_COLUMNS, REQUEST_COLUMNS, CoreImage
from ..core.inventory import UNIT_FIELDS
from ..core.ledger import Migration
from ..models import Aggregate, HostReport, RequestSpec, Selection, ServerGroup

__all__ = ["SNAPSHOT_FORMAT", "encode", "restore"]

log = logging.getLogger("actorsched.journal")

# 11: as 10, and each claim's image properties (the distinct sets once, in
# images; a claims column image names each one's, None for none);
# 10: as 9, and each claim's owner (the broker user that placed it, or None);
# 9: as 8, and host_facts entries may give failed_builds and metrics;
# 8: as 7, and each host's vcpus_reserved, local_gb_reserved and Placement
# units (memory_mb_units, vcpus_units, local_gb_units: an object or None);
# 7: as 6, and each host's facts (the distinct ones once, in host_facts; a
# host_facts column of the hosts names each one's); 6: as 5, and each claim's
# priority and preempted claims, and the requests kept for a reschedule or
# move; 5: as 4, and the open moves (their holds are claims keyed by migration
# uuid); 4: as 3, and the host aggregates, and each host's reported allocation
# ratios (HostReport's *_allocation_ratio columns) and node; 3: as 2, and each
# claim's request fingerprint; 2: hosts, claims and credits as columns (one
# JSON list per field); 1: one object per host, claim and credit. 1 to 6 are
# still read (before 7: no host facts; before 6: priority 0, no preempted
# claims, no kept requests; before 5: no moves; before 4: no aggregates, no
# host ratios, nodes named as their hosts; 1 and 2 have no fingerprints; before
# 8: no reserved vCPUs or disk, no units; before 10: no claim has an owner, so
# only an unscoped caller, an admin, may act on those claims; before 11: no claim
# keeps its image, so ImagePropertiesWeigher counts none of them).
SNAPSHOT_FORMAT = 11
_READ = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, SNAPSHOT_FORMAT)
# the facts a host_facts entry may give before format 9
_FACT_FIELDS_8 = tuple(f for f in FACT_FIELDS if f not in ("failed_builds", "metrics"))
# a host's columns (format 8): its report's fields but the facts, and the
# index of its facts in host_facts
_HOST_FIELDS = (*(f for f in HostReport.model_fields if f not in FACT_FIELDS), "host_facts")
_NEW_IN_8 = ("vcpus_reserved", "local_gb_reserved", *UNIT_FIELDS)
_HOST_FIELDS_7 = tuple(f for f in _HOST_FIELDS if f not in _NEW_IN_8)
_HOST_FIELDS_6 = _HOST_FIELDS_7[:-1]
_RATIO_FIELDS = ("ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio")
_HOST_FIELDS_3 = tuple(f for f in _HOST_FIELDS_6 if f not in (*_RATIO_FIELDS, "node"))
_CLAIM_COLUMNS_10 = tuple(c for c in CLAIM_COLUMNS if c != "image")
_CLAIM_COLUMNS_9 = tuple(c for c in _CLAIM_COLUMNS_10 if c != "owner")
_CLAIM_COLUMNS_5 = tuple(c for c in _CLAIM_COLUMNS_9 if c not in ("priority", "preempted"))
_CLAIM_COLUMNS_2 = tuple(c for c in _CLAIM_COLUMNS_5 if c != "fingerprint")
# RequestSpec.priority's bounds (a test holds the two together)
_PRIORITIES = (-1_000_000, 1_000_000)


def encode(image: CoreImage) -> str:
    """The snapshot of ``image`` as JSON text (safe to call off the owner's thread).

    Columns, not one object per host: at 100,000 hosts a snapshot is then a
    few whole-column conversions and one ``json.dumps`` of plain lists.
    """
    return json.dumps(
        {
            "format": SNAPSHOT_FORMAT,
            "hosts": image.host_columns(),
            "claims": image.claim_columns(),
            "released": image.credit_columns(),
            "aggregates": image.aggregate_list(),
            "moves": image.migration_list(),
            "requests": image.request_section(),
            "host_facts": image.facts_section(),
            "images": image.image_section(),
        },
        separators=(",", ":"),
    )


def _rows(columns: Any, fields: tuple[str, ...], what: str) -> list[dict[str, Any]]:
    """Format 2's columns back into one dict per entry; ValueError if they do not line up."""
    if not isinstance(columns, dict) or set(columns) != set(fields):
        raise ValueError(f"snapshot {what} must have exactly the columns {list(fields)}")
    lengths = {len(v) if isinstance(v, list) else -1 for v in columns.values()}
    if len(lengths) != 1 or -1 in lengths:
        raise ValueError(f"snapshot {what} columns must be lists of one length")
    lists = [columns[field] for field in fields]
    return [dict(zip(fields, values, strict=True)) for values in zip(*lists, strict=True)]


def restore(core: SchedulerCore, text: str) -> None:
    """Rebuild the state ``text`` describes into ``core``, which must be empty.

    Raises ValueError (or a pydantic ValidationError, also a ValueError) for
    a snapshot that does not parse.
    """
    data: dict[str, Any] = json.loads(text)
    if not isinstance(data, dict) or data.get("format") not in _READ:
        raise ValueError(f"unknown snapshot format {str(data)[:80]!r}")
    if data["format"] == 1:
        hosts = data["hosts"]
        credits = data["released"]
        claims = data["claims"]
    else:
        fmt = data["format"]
        fields = (
            _HOST_FIELDS
            if fmt >= 8
            else _HOST_FIELDS_7
            if fmt >= 7
            else _HOST_FIELDS_6
            if fmt >= 4
            else _HOST_FIELDS_3
        )
        rows = _rows(data["hosts"], (*fields, "reported_at"), "hosts")
        held = FACT_FIELDS if fmt >= 9 else _FACT_FIELDS_8
        facts = _host_facts(data.get("host_facts"), held) if fmt >= 7 else []
        hosts = [
            {"reported_at": r.pop("reported_at"), "report": _with_facts(r, facts)} for r in rows
        ]
        credits = _rows(data["released"], CREDIT_COLUMNS, "released")
        columns: tuple[str, ...] = (
            CLAIM_COLUMNS if fmt >= 11 else _CLAIM_COLUMNS_10 if fmt >= 10 else _CLAIM_COLUMNS_9
        )
        if data["format"] < 6:
            columns = _CLAIM_COLUMNS_5 if data["format"] >= 3 else _CLAIM_COLUMNS_2
        claims = _rows(data["claims"], columns, "claims")
        for claim in claims:
            claim["selection"] = {
                "instance_uuid": claim["instance_uuid"],
                "host": claim["host"],
                "alternates": claim.pop("alternates"),
                "preempted": _preempted(claim),
            }
    # aggregates first: each host then joins its aggregates as it is restored
    for entry in data.get("aggregates", []) if data["format"] >= 4 else []:
        aggregate = Aggregate.model_validate(entry)
        core.create_aggregate(aggregate.name, aggregate.metadata, aggregate.hosts)
    for host in hosts:
        report = HostReport.model_validate(host["report"])
        if not core.update_host(report, float(host["reported_at"])):
            raise ValueError(f"host {report.host!r} appears twice in the snapshot")
    # credits first: each is a confirmed claim released again, which is exactly
    # how the live core made it (the host lists the instance, so it is credited)
    for credit in credits:
        spec = _spec(credit["instance_uuid"], credit, None)
        selection = Selection(instance_uuid=credit["instance_uuid"], host=credit["host"])
        core.restore_claims(spec, [selection], 0.0, from_spec=False)
        core.release(credit["instance_uuid"], 0.0)
    images = _images(data.get("images")) if data["format"] >= 11 else []
    moves = data.get("moves", []) if data["format"] >= 5 else []
    # a move's hold and destination are settled by restore_migration, after
    moving = {
        uuid
        for entry in moves
        if isinstance(entry, dict)
        for uuid in (entry.get("migration_uuid"), entry.get("instance_uuid"))
    }
    for claim in claims:
        selection = Selection.model_validate(claim["selection"])
        fingerprint = claim.get("fingerprint")
        if fingerprint is not None and not isinstance(fingerprint, str):
            raise ValueError(f"claim {claim['instance_uuid']!r} has a fingerprint that is not text")
        core.restore_claims(
            _spec(
                claim["instance_uuid"],
                claim,
                claim["group_id"],
                _priority(claim),
                _owner(claim),
                _image(claim, images),
            ),
            [selection],
            float(claim["created_at"]),
            fingerprint=fingerprint,
            from_spec=False,
        )
        restored = core.ledger.claims.get(claim["instance_uuid"])
        if restored is None:
            raise ValueError(f"claim {claim['instance_uuid']!r} names an unknown host")
        if restored.confirmed != claim["confirmed"] and claim["instance_uuid"] not in moving:
            log.warning(
                "claim %s restored as %s but the snapshot says %s",
                claim["instance_uuid"],
                "confirmed" if restored.confirmed else "assumed",
                "confirmed" if claim["confirmed"] else "assumed",
            )
    _restore_moves(core, moves)
    if data["format"] >= 6:
        _restore_requests(core, data.get("requests"))


def _host_facts(section: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """The distinct host facts of a format 7 snapshot or later, each checked to be
    facts of ``fields`` (those its format holds)."""
    if not isinstance(section, list):
        raise ValueError("snapshot host_facts must be a list")
    for index, entry in enumerate(section):
        if not isinstance(entry, dict) or not set(entry) <= set(fields):
            raise ValueError(
                f"snapshot host_facts {index} must be an object of some of {list(fields)}"
            )
    return section


def _with_facts(row: dict[str, Any], facts: list[dict[str, Any]]) -> dict[str, Any]:
    """A host's columns as its report's fields: its facts (``host_facts``) merged in."""
    at = row.pop("host_facts", None)
    if at is None:
        return row
    if type(at) is not int or not 0 <= at < len(facts):
        raise ValueError(
            f"snapshot host {row.get('host')!r} names host_facts {at!r}, not an index of "
            f"the {len(facts)} host_facts"
        )
    return {**row, **facts[at]}


def _priority(claim: dict[str, Any]) -> int:
    """A claim's priority, checked (0 before format 6, which kept none)."""
    priority = claim.get("priority", 0)
    low, high = _PRIORITIES
    if type(priority) is not int or not low <= priority <= high:
        raise ValueError(
            f"claim {claim['instance_uuid']!r} has priority {priority!r}: "
            f"not a whole number from {low:,} to {high:,}"
        )
    return priority


def _preempted(claim: dict[str, Any]) -> list[str]:
    """A claim's preempted claims (its column's entry), checked; none before format 6."""
    preempted = claim.pop("preempted", [])
    if not isinstance(preempted, list) or not all(isinstance(u, str) for u in preempted):
        raise ValueError(
            f"claim {claim['instance_uuid']!r} has preempted {str(preempted)[:80]}: "
            "not a list of instance uuids"
        )
    return preempted


def _restore_requests(core: SchedulerCore, section: Any) -> None:
    """Keep again the requests a format 6 snapshot kept, in their order."""
    if not isinstance(section, dict) or set(section) != {"specs", *REQUEST_COLUMNS}:
        raise ValueError(
            f"snapshot requests must have exactly specs and the columns {list(REQUEST_COLUMNS)}"
        )
    if not isinstance(section["specs"], list):
        raise ValueError("snapshot requests' specs must be a list")
    specs: list[RequestSpec] = []
    for index, entry in enumerate(section["specs"]):
        try:
            specs.append(RequestSpec.model_validate(entry))
        except ValidationError as exc:
            raise ValueError(f"snapshot request spec {index} does not parse: {exc}") from exc
    rows = _rows({c: section[c] for c in REQUEST_COLUMNS}, REQUEST_COLUMNS, "requests")
    named: list[frozenset[str] | None] = [None] * len(specs)  # each spec's uuids, when asked
    kept: dict[str, RequestSpec] = {}
    for row in rows:
        uuid, at = row["instance_uuid"], row["spec"]
        if not isinstance(uuid, str):
            raise ValueError(f"snapshot requests: instance_uuid {uuid!r} is not text")
        if uuid in kept:
            raise ValueError(f"snapshot requests: {uuid!r} is kept twice")
        if type(at) is not int or not 0 <= at < len(specs):
            raise ValueError(
                f"snapshot requests: {uuid!r} is kept with spec {at!r}, "
                f"not an index of the {len(specs)} specs"
            )
        uuids = named[at]
        if uuids is None:
            uuids = named[at] = frozenset(specs[at].instance_uuids)
        if uuid not in uuids:
            raise ValueError(
                f"snapshot requests: {uuid!r} is kept with spec {at}, whose "
                "instance_uuids do not name it"
            )
        kept[uuid] = specs[at]
    if None in named:
        raise ValueError(f"snapshot request spec {named.index(None)} is kept for no instance")
    core.restore_requests(kept.items())


def _restore_moves(core: SchedulerCore, entries: Any) -> None:
    if not isinstance(entries, list):
        raise ValueError("snapshot moves must be a list")
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError("a snapshot move must be an object")
        alternates = entry["alternates"]
        texts = [entry[k] for k in ("migration_uuid", "instance_uuid", "request", "host")]
        if not all(isinstance(t, str) for t in [*texts, *alternates]) or not isinstance(
            entry["evacuate"], bool
        ):
            raise ValueError(f"snapshot move {str(entry)[:80]!r} does not parse")
        group_id = entry["group_id"]
        if group_id is not None and not isinstance(group_id, str):
            raise ValueError(f"snapshot move {entry['migration_uuid']!r}: group_id not text")
        if entry["migration_uuid"] not in core.ledger.claims:
            raise ValueError(f"snapshot move {entry['migration_uuid']!r} holds no claim")
        core.restore_migration(
            Migration(
                entry["migration_uuid"],
                entry["instance_uuid"],
                entry["request"],
                entry["evacuate"],
                group_id,
                entry["host"],
                tuple(alternates),
            )
        )


def _images(section: Any) -> list[dict[str, str]]:
    """The distinct claim images of a format 11 snapshot, each checked to be an
    object of texts."""
    if not isinstance(section, list):
        raise ValueError("snapshot images must be a list")
    for index, entry in enumerate(section):
        if not isinstance(entry, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in entry.items()
        ):
            raise ValueError(f"snapshot images {index} must be an object of texts")
    return section


def _image(claim: dict[str, Any], images: list[dict[str, str]]) -> dict[str, str]:
    """A claim's image properties (its ``image`` index into ``images``), checked;
    none before format 11."""
    at = claim.get("image")
    if at is None:
        return {}
    if type(at) is not int or not 0 <= at < len(images):
        raise ValueError(
            f"claim {claim['instance_uuid']!r} names image {at!r}, not an index of "
            f"the {len(images)} images"
        )
    return images[at]


def _owner(claim: dict[str, Any]) -> str | None:
    """A claim's owner, checked (None before format 10, which kept none)."""
    owner = claim.get("owner")
    if owner is not None and not isinstance(owner, str):
        raise ValueError(f"claim {claim['instance_uuid']!r} has an owner that is not text")
    return owner


def _spec(
    uuid: str,
    figures: dict[str, Any],
    group_id: str | None,
    priority: int = 0,
    owner: str | None = None,
    image: dict[str, str] | None = None,
) -> RequestSpec:
    # restore_claims reads only the resources, the group id, the priority, the owner
    # and the image of a spec; the policy is not part of a claim, so any valid one
    # carries the id
    group = None if group_id is None else ServerGroup(id=group_id, policy="affinity")
    return RequestSpec(
        instance_uuids=[uuid],
        memory_mb=figures["memory_mb"],
        vcpus=figures["vcpus"],
        disk_gb=figures["disk_gb"],
        group=group,
        priority=priority,
        owner=owner,
        image_properties=image or {},
    )
