"""Semantic snapshots: the whole scheduler state as plain JSON, and back.

Rules this module keeps:

* A snapshot says what the state *means*, never how the core stores it:
  per host the report that rebuilds it (figures, enabled, zone, traits,
  the instances it listed) and when it was applied; per claim its uuid,
  host, resources, server group, creation time, whether a report confirmed
  it, and its selection; per released instance its credit. Rows, zone ids
  and trait bits never appear, so a snapshot outlives table changes.
* Restoring goes only through the core's own methods (``update_host``,
  ``restore_claims``, ``release``), so every index the core keeps is
  rebuilt by the code that keeps it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..core import SchedulerCore
from ..core.snapshot import CoreImage
from ..models import HostReport, RequestSpec, Selection, ServerGroup

__all__ = ["SNAPSHOT_FORMAT", "encode", "restore"]

log = logging.getLogger("actorsched.journal")

SNAPSHOT_FORMAT = 1


def encode(image: CoreImage) -> str:
    """The snapshot of ``image`` as JSON text (safe to call off the owner's thread)."""
    hosts = [
        {"report": h.report.model_dump(mode="json"), "reported_at": h.reported_at}
        for h in image.hosts()
    ]
    claims = [
        {
            "instance_uuid": c.instance_uuid,
            "host": c.host,
            "memory_mb": c.memory_mb,
            "vcpus": c.vcpus,
            "disk_gb": c.disk_gb,
            "group_id": c.group_id,
            "created_at": c.created_at,
            "confirmed": c.confirmed,
            "selection": c.selection.model_dump(mode="json"),
        }
        for c in image.claim_images()
    ]
    credits = [
        {
            "host": r.host,
            "instance_uuid": r.instance_uuid,
            "memory_mb": r.memory_mb,
            "vcpus": r.vcpus,
            "disk_gb": r.disk_gb,
        }
        for r in image.credits()
    ]
    return json.dumps(
        {"format": SNAPSHOT_FORMAT, "hosts": hosts, "claims": claims, "released": credits},
        separators=(",", ":"),
    )


def restore(core: SchedulerCore, text: str) -> None:
    """Rebuild the state ``text`` describes into ``core``, which must be empty.

    Raises ValueError (or a pydantic ValidationError, also a ValueError) for
    a snapshot that does not parse.
    """
    data: dict[str, Any] = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"unknown snapshot format {str(data)[:80]!r}")
    for host in data["hosts"]:
        report = HostReport.model_validate(host["report"])
        if not core.update_host(report, float(host["reported_at"])):
            raise ValueError(f"host {report.host!r} appears twice in the snapshot")
    # credits first: each is a confirmed claim released again, which is exactly
    # how the live core made it (the host lists the instance, so it is credited)
    for credit in data["released"]:
        spec = _spec(credit["instance_uuid"], credit, None)
        selection = Selection(instance_uuid=credit["instance_uuid"], host=credit["host"])
        core.restore_claims(spec, [selection], 0.0)
        core.release(credit["instance_uuid"], 0.0)
    for claim in data["claims"]:
        selection = Selection.model_validate(claim["selection"])
        core.restore_claims(
            _spec(claim["instance_uuid"], claim, claim["group_id"]),
            [selection],
            float(claim["created_at"]),
        )
        restored = core.ledger.claims.get(claim["instance_uuid"])
        if restored is None:
            raise ValueError(f"claim {claim['instance_uuid']!r} names an unknown host")
        if restored.confirmed != claim["confirmed"]:
            log.warning(
                "claim %s restored as %s but the snapshot says %s",
                claim["instance_uuid"],
                "confirmed" if restored.confirmed else "assumed",
                "confirmed" if claim["confirmed"] else "assumed",
            )


def _spec(uuid: str, figures: dict[str, Any], group_id: str | None) -> RequestSpec:
    # restore_claims reads only the resources and the group id of a spec; the
    # policy is not part of a claim, so any valid one carries the id
    group = None if group_id is None else ServerGroup(id=group_id, policy="affinity")
    return RequestSpec(
        instance_uuids=[uuid],
        memory_mb=figures["memory_mb"],
        vcpus=figures["vcpus"],
        disk_gb=figures["disk_gb"],
        group=group,
    )
