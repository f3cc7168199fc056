"""The claim ledger: which instance holds which claim on which host row.

Rules this module keeps:

* A claim is keyed by instance uuid; there is at most one per uuid. That is
  what makes a redelivered request harmless.
* A claim is *assumed* until a host report lists its instance, then
  *confirmed*: from then on the report's used figures carry it and the
  ledger keeps it only for idempotency, server groups and release.
* The ledger owns which instance is claimed, listed and credited where:
  claims by uuid, row and group; what each host's last report listed (and
  which row lists a uuid); the credits of released instances still listed.
* The ledger records; the engine decides. Moving resources in the host
  table is the engine's job, so the two always change in one step.
* A claim keeps the fingerprint of the request that made it
  (:func:`request_fingerprint`), so a repeat of its uuid can be told from
  another request that reuses the uuid. None means unknown (a claim
  restored from an older snapshot): any repeat is then accepted.
* A claim may keep its request's image properties (``image``, name and
  value pairs, sorted; the engine fills it while ImagePropertiesWeigher is
  built), and the ledger counts, per pair, the claims of each row that
  carry it (``image_rows``): what that weigher reads, as Nova's reads the
  images of a host's instances.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _json_string  # json.dumps' own, in C
from typing import Any

from ..models import RequestSpec, Selection

__all__ = [
    "NON_RESOURCE_FIELDS",
    "Claim",
    "ClaimLedger",
    "ImageProps",
    "Migration",
    "asks_resources_only",
    "fingerprint_differences",
    "request_fingerprint",
]

_NOTHING: frozenset[str] = frozenset()

# an instance's image properties, as (name, value) pairs sorted by name
ImageProps = tuple[tuple[str, str], ...]

# A list longer than this (as JSON) is fingerprinted by a digest of it, so a
# claim never keeps a request's 10,000-uuid hint list: the fingerprint stays
# a few hundred characters at most.
_MAX_LISTED_CHARS = 128
_DIGEST = "sha256:"


def _canonical_list(values: list[str]) -> str:
    """``values`` as a set, in JSON: the sorted names, or a digest of them when long."""
    text = "[" + ",".join(map(_json_string, sorted(set(values)))) + "]"
    if len(text) <= _MAX_LISTED_CHARS:
        return text
    return '"' + _DIGEST + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


def _canonical_map(values: dict[str, str]) -> str:
    """``values`` in JSON with sorted keys, or a digest of that when long."""
    text = (
        "{"
        + ",".join(_json_string(k) + ":" + _json_string(values[k]) for k in sorted(values))
        + "}"
    )
    if len(text) <= _MAX_LISTED_CHARS:
        return text
    return '"' + _DIGEST + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


def _counted_list(values: list[str]) -> str:
    """``values`` as a multiset (a name listed twice counts twice), as :func:`_canonical_list`."""
    text = "[" + ",".join(map(_json_string, sorted(values))) + "]"
    if len(text) <= _MAX_LISTED_CHARS:
        return text
    return '"' + _DIGEST + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


# The fields a request may ask for besides its resources (and its uuids), the
# ones asks_resources_only checks (a test holds the two together).
NON_RESOURCE_FIELDS = (
    "availability_zone",
    "group",
    "required_traits",
    "forbidden_traits",
    "ignore_hosts",
    "same_host",
    "different_host",
    "force_hosts",
    "force_nodes",
    "requested_destination",
    "flavor_name",
    "extra_specs",
    "project_id",
    "image_properties",
    "image_id",
    "query",
)
# The fields that say how to ask, not what: neither in the fingerprint nor a
# reason to leave the resources-only path (a test holds the three together).
NOT_ASKED_FIELDS = ("priority", "wait", "owner")


def asks_resources_only(spec: RequestSpec) -> bool:
    """True for a request with no zone, traits, server group, hints, ignore_hosts,
    forced hosts or nodes, requested destination, flavor name, extra specs,
    project, image properties, image id or query (most requests): its fingerprint is its
    resources, and the ranking's shortcut can answer it."""
    # read from the model's __dict__: a pydantic model's attribute access goes
    # through its __getattr__ hook, several times slower per field; the most
    # common of the others (a zone, then traits) come first, so they stop early
    d = spec.__dict__
    return (
        d["availability_zone"] is None
        and not (d["required_traits"] or d["forbidden_traits"])
        and d["group"] is None
        and not (d["ignore_hosts"] or d["same_host"] or d["different_host"])
        and not (d["force_hosts"] or d["force_nodes"])
        and d["requested_destination"] is None
        and d["flavor_name"] is None
        and d["project_id"] is None
        and not d["extra_specs"]
        and not d["image_properties"]
        and d["image_id"] is None
        and d["query"] is None
    )


def request_fingerprint(spec: RequestSpec, resources_only: bool | None = None) -> str:
    """What ``spec`` asks of each of its instances, as canonical JSON text.

    A repeat of a claimed uuid is the same request when its fingerprint is
    equal. The fingerprint holds every field that decides what an instance
    gets or where it may go: ``memory_mb``, ``vcpus`` and ``disk_gb``;
    ``availability_zone``; ``required_traits`` and ``forbidden_traits``;
    ``group`` (id and policy; its ``hosts``, a multiset, as
    ``group_hosts``, its ``max_server_per_host`` as
    ``group_max_server_per_host`` and its ``members``, a set, as
    ``group_members``); the ``same_host`` and ``different_host``
    hints; ``ignore_hosts`` and ``force_hosts`` (in lower case, as they are
    matched); ``force_nodes``; ``requested_destination``; and what the
    aggregate filters read: ``flavor_name``, ``extra_specs`` and
    ``project_id``; and ``image_properties``, ``image_id`` and ``query``. No field of a
    RequestSpec is retry-only, so none is left out: a repeat with other
    ``ignore_hosts`` asks to avoid other hosts, and answering it with the
    held claim could place it on one it ignores. Not ``instance_uuids``:
    they are the claims' keys (a repeat may name a subset of a request's
    uuids, or another order). Lists count as sets (order and repeats do not
    matter, except in a group's ``hosts``, where each entry is a member),
    fields at their defaults are left out, and a long list counts by a
    digest of it. The text is what ``json.dumps``
    with sorted keys and no spaces makes, built by hand (several times
    faster: every request computes it). ``resources_only`` is
    :func:`asks_resources_only` of ``spec`` when the caller knows it.

    >>> request_fingerprint(RequestSpec(instance_uuids=["a"], memory_mb=512, vcpus=1,
    ...                                 disk_gb=10, required_traits=["SSD", "AVX"]))
    '{"disk_gb":10,"memory_mb":512,"required_traits":["AVX","SSD"],"vcpus":1}'
    """
    if resources_only or (resources_only is None and asks_resources_only(spec)):
        return f'{{"disk_gb":{spec.disk_gb},"memory_mb":{spec.memory_mb},"vcpus":{spec.vcpus}}}'
    asked = spec.__dict__  # as asks_resources_only: faster than pydantic's attributes
    parts: list[str] = []  # in the order of their keys
    if asked["availability_zone"] is not None:
        parts.append('"availability_zone":' + _json_string(asked["availability_zone"]))
    if asked["different_host"]:
        parts.append('"different_host":' + _canonical_list(asked["different_host"]))
    parts.append(f'"disk_gb":{asked["disk_gb"]}')
    if asked["extra_specs"]:
        parts.append('"extra_specs":' + _canonical_map(asked["extra_specs"]))
    if asked["flavor_name"] is not None:
        parts.append('"flavor_name":' + _json_string(asked["flavor_name"]))
    if asked["forbidden_traits"]:
        parts.append('"forbidden_traits":' + _canonical_list(asked["forbidden_traits"]))
    if asked["force_hosts"]:
        lowered = [host.lower() for host in asked["force_hosts"]]
        parts.append('"force_hosts":' + _canonical_list(lowered))
    if asked["force_nodes"]:
        parts.append('"force_nodes":' + _canonical_list(asked["force_nodes"]))
    if asked["group"] is not None:
        group = asked["group"]
        parts.append(f'"group":[{_json_string(group.id)},{_json_string(group.policy)}]')
        if group.hosts:
            parts.append('"group_hosts":' + _counted_list(group.hosts))
        if group.max_server_per_host is not None:
            parts.append(f'"group_max_server_per_host":{group.max_server_per_host}')
        if group.members:
            parts.append('"group_members":' + _canonical_list(group.members))
    if asked["ignore_hosts"]:
        lowered = [host.lower() for host in asked["ignore_hosts"]]
        parts.append('"ignore_hosts":' + _canonical_list(lowered))
    if asked["image_id"] is not None:
        parts.append('"image_id":' + _json_string(asked["image_id"]))
    if asked["image_properties"]:
        parts.append('"image_properties":' + _canonical_map(asked["image_properties"]))
    parts.append(f'"memory_mb":{asked["memory_mb"]}')
    if asked["project_id"] is not None:
        parts.append('"project_id":' + _json_string(asked["project_id"]))
    if asked["query"] is not None:
        parts.append('"query":' + _json_string(asked["query"]))
    destination = asked["requested_destination"]
    if destination is not None:
        named = [
            f'"{key}":{_json_string(value)}'
            for key, value in (("host", destination.host), ("node", destination.node))
            if value is not None
        ]
        parts.append('"requested_destination":{' + ",".join(named) + "}")
    if asked["required_traits"]:
        parts.append('"required_traits":' + _canonical_list(asked["required_traits"]))
    if asked["same_host"]:
        parts.append('"same_host":' + _canonical_list(asked["same_host"]))
    parts.append(f'"vcpus":{asked["vcpus"]}')
    return "{" + ",".join(parts) + "}"


def fingerprint_differences(held: str, asked: str) -> list[str]:
    """The fields in which two fingerprints differ, each as ``name: held then, asked now``."""
    before: dict[str, Any] = json.loads(held)
    now: dict[str, Any] = json.loads(asked)

    def shown(value: Any) -> str:
        if value is None:
            return "none"
        if isinstance(value, str) and value.startswith(_DIGEST):
            return "a long list"
        return json.dumps(value)

    return [
        f"{name} {shown(before.get(name))} then, {shown(now.get(name))} now"
        for name in sorted(before.keys() | now.keys())
        if before.get(name) != now.get(name)
    ]


@dataclass(slots=True)
class Claim:
    """One instance's claim on one host row.

    Only strings, numbers and a tuple of host names are kept, no pydantic
    model: a ledger of many thousand claims then costs the garbage collector
    one object per claim. :attr:`selection` is built when asked for.
    """

    instance_uuid: str
    row: int
    memory_mb: int
    vcpus: int
    disk_gb: int
    group_id: str | None
    created_at: float
    host: str
    alternates: tuple[str, ...]
    fingerprint: str | None = None  # request_fingerprint of its request; None: unknown
    confirmed: bool = False
    priority: int = 0  # its request's priority: what a preemption compares
    preempted: tuple[str, ...] = ()  # the claims its placement released to make room
    owner: str | None = None  # its request's owner (the broker user); None: anyone's
    image: ImageProps = ()  # its request's image properties (ImagePropertiesWeigher)

    @property
    def selection(self) -> Selection:
        """The answer this claim gave: host, alternates and victims, as first chosen."""
        if self.preempted:
            return Selection(
                instance_uuid=self.instance_uuid,
                host=self.host,
                alternates=list(self.alternates),
                preempted=list(self.preempted),
            )
        return Selection(
            instance_uuid=self.instance_uuid, host=self.host, alternates=list(self.alternates)
        )


@dataclass(frozen=True, slots=True)
class Migration:
    """An open move: the source's resources held under ``migration_uuid``.

    The hold itself is a :class:`Claim` keyed by the migration uuid on the
    source row (so it counts against max_claims, shows in the source's
    figures and is kept by snapshots as a claim); this records what else a
    move needs: which instance moves, the request it was asked with (for
    redeliveries), whether it is an evacuation, the server group of the
    instance's source claim (given back on revert) and the answer.
    """

    migration_uuid: str
    instance_uuid: str
    request: str  # canonical JSON of what was asked (spec, allow_same_host, evacuate)
    evacuate: bool
    group_id: str | None
    host: str  # the destination chosen
    alternates: tuple[str, ...]

    @property
    def selection(self) -> Selection:
        """The answer the move gave: the destination and its alternates."""
        return Selection(
            instance_uuid=self.instance_uuid, host=self.host, alternates=list(self.alternates)
        )


def _relist(
    listed: dict[int, frozenset[str]], index: dict[str, int], row: int, now: frozenset[str]
) -> None:
    """``row`` lists ``now`` in ``listed`` (rows listing nothing have no entry: memory
    at 100k hosts), and ``index`` (uuid -> row) follows."""
    old = listed.get(row, _NOTHING)
    if now == old:
        return
    for uuid in old - now:
        if index.get(uuid) == row:
            del index[uuid]
    for uuid in now - old:
        index[uuid] = row
    if now:
        listed[row] = now
    else:
        del listed[row]


@dataclass(slots=True)
class ClaimLedger:
    """Claims by uuid, with indexes by host row and by server group."""

    claims: dict[str, Claim] = field(default_factory=dict)
    by_row: dict[int, set[str]] = field(default_factory=dict)
    group_rows: dict[str, Counter[int]] = field(default_factory=dict)
    # released instances a report still lists: row -> uuid -> (mem, vcpus, disk)
    released: dict[int, dict[str, tuple[int, int, int]]] = field(default_factory=dict)
    # what each host's last report listed (rows listing nothing have no entry:
    # memory at 100k hosts), and the other way round
    listed: dict[int, frozenset[str]] = field(default_factory=dict)
    reported_row: dict[str, int] = field(default_factory=dict)
    # open moves by migration uuid (each holds a claim of that uuid), and the
    # migration uuid of each instance moving
    migrations: dict[str, Migration] = field(default_factory=dict)
    moving: dict[str, str] = field(default_factory=dict)
    # per image property (name, value): how many claims of each row carry it
    image_rows: dict[tuple[str, str], Counter[int]] = field(default_factory=dict)
    # what Nova's computes cast that each host runs (update_instance_info,
    # sync_instance_info, delete_instance_info), and the other way round: where an
    # instance is when no claim holds it and no report lists it (hints, a group's
    # members), never in a host's figures; not kept across a restart (the computes
    # sync again)
    nova_listed: dict[int, frozenset[str]] = field(default_factory=dict)
    nova_row: dict[str, int] = field(default_factory=dict)

    def listed_on(self, row: int) -> frozenset[str]:
        """The instances the last report of ``row`` listed."""
        return self.listed.get(row, _NOTHING)

    def credited_on_release(self, claim: Claim) -> bool:
        """Whether releasing ``claim`` credits it back to its host until a report
        drops it: it is confirmed and its host's last report still lists it."""
        return claim.confirmed and claim.instance_uuid in self.listed_on(claim.row)

    def set_listed(self, row: int, listed: frozenset[str]) -> None:
        """Record what a report of ``row`` lists now (both indexes)."""
        _relist(self.listed, self.reported_row, row, listed)

    def set_nova_listed(self, row: int, listed: frozenset[str]) -> None:
        """Record what Nova's compute says ``row`` runs now (both indexes)."""
        _relist(self.nova_listed, self.nova_row, row, listed)

    def forget_row(self, row: int) -> None:
        """Drop every claim, credit and listing of ``row`` (its host is removed)."""
        for uuid in list(self.by_row.get(row, ())):
            self.drop(uuid)
        self.released.pop(row, None)
        self.set_listed(row, _NOTHING)
        self.set_nova_listed(row, _NOTHING)

    def locate(self, uuid: str) -> int | None:
        """Row that holds a claim of ``uuid``, or else whose report lists it, or else
        that Nova's compute says runs it; None."""
        claim = self.claims.get(uuid)
        if claim is not None:
            return claim.row
        row = self.reported_row.get(uuid)
        return self.nova_row.get(uuid) if row is None else row

    def add(self, claim: Claim) -> None:
        self.claims[claim.instance_uuid] = claim
        on_row = self.by_row.get(claim.row)
        if on_row is None:
            self.by_row[claim.row] = on_row = set()
        on_row.add(claim.instance_uuid)
        if claim.group_id is not None:
            self.group_rows.setdefault(claim.group_id, Counter())[claim.row] += 1
        for pair in claim.image:
            self.image_rows.setdefault(pair, Counter())[claim.row] += 1

    def drop(self, uuid: str) -> Claim:
        claim = self.claims.pop(uuid)
        if self.migrations:
            migration = self.migrations.pop(uuid, None)
            if migration is not None:  # a hold dropped: its move is over
                del self.moving[migration.instance_uuid]
        on_row = self.by_row[claim.row]
        on_row.discard(uuid)
        if not on_row:
            del self.by_row[claim.row]
        if claim.group_id is not None:
            rows = self.group_rows[claim.group_id]
            rows[claim.row] -= 1
            if rows[claim.row] <= 0:
                del rows[claim.row]
            if not rows:
                del self.group_rows[claim.group_id]
        for pair in claim.image:
            counts = self.image_rows[pair]
            counts[claim.row] -= 1
            if counts[claim.row] <= 0:
                del counts[claim.row]
            if not counts:
                del self.image_rows[pair]
        return claim

    def group_members(self, group_id: str) -> Counter[int]:
        """Rows holding members of ``group_id``, with how many each."""
        return self.group_rows.get(group_id, Counter())

    def __len__(self) -> int:
        return len(self.claims)
