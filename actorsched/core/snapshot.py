"""Read-only images of a :class:`SchedulerCore`, for journal snapshots.

Rules this module keeps:

* Nothing here changes the core.
* :func:`capture` is the only function that reads the core, and it is cheap
  (column copies and shallow dict copies, no per-host objects), so the owner
  can call it between two batches without a noticeable pause.
* A :class:`CoreImage` holds no reference to anything the core mutates
  later, so building the semantic views (:meth:`CoreImage.hosts` ...) may
  happen on another thread while the owner goes on.
* The views are semantic, not internal: per host the report that would
  rebuild it, per claim what the ledger holds, per released instance the
  credit. Rows, zone ids and trait bits are never exposed, so a snapshot
  survives any change of the table's layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..models import HostReport, Selection
from .engine import SchedulerCore
from .ledger import Claim

__all__ = ["ClaimImage", "CoreImage", "CreditImage", "HostImage", "capture"]

# raw table columns a host report sets: column -> HostReport field
_REPORTED = (
    ("generation", "generation"),
    ("mem_total", "memory_mb"),
    ("mem_reserved", "memory_mb_reserved"),
    ("mem_used", "memory_mb_used"),
    ("vcpus_total", "vcpus"),
    ("vcpus_used", "vcpus_used"),
    ("disk_total", "local_gb"),
    ("disk_used", "local_gb_used"),
    ("io_ops_reported", "num_io_ops"),
)


@dataclass(frozen=True, slots=True)
class HostImage:
    """A host as a report that rebuilds it, and when that report was applied."""

    report: HostReport
    reported_at: float


@dataclass(frozen=True, slots=True)
class ClaimImage:
    instance_uuid: str
    host: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    group_id: str | None
    created_at: float
    confirmed: bool
    selection: Selection


@dataclass(frozen=True, slots=True)
class CreditImage:
    """A released instance its host still lists, credited back until it does not."""

    host: str
    instance_uuid: str
    memory_mb: int
    vcpus: int
    disk_gb: int


@dataclass(frozen=True, slots=True)
class CoreImage:
    """Copies of the core's state at one instant; see :func:`capture`."""

    rows: list[int]
    names: list[str | None]
    columns: dict[str, NDArray[np.int64]]
    reported_at: NDArray[np.float64]
    enabled: NDArray[np.bool_]
    zone: NDArray[np.int32]
    zone_names: list[str]
    host_traits: list[tuple[str, ...]]
    listed: dict[int, frozenset[str]]
    claims: list[tuple[Claim, bool]]
    released: dict[int, dict[str, tuple[int, int, int]]]

    def hosts(self) -> list[HostImage]:
        """Every host as the report that rebuilds it (its last applied figures)."""
        empty: frozenset[str] = frozenset()
        images = []
        for row in self.rows:
            fields: dict[str, Any] = {
                field: int(self.columns[col][row]) for col, field in _REPORTED
            }
            zid = int(self.zone[row])
            report = HostReport.model_construct(
                host=self.names[row] or "",
                availability_zone=self.zone_names[zid] if zid >= 0 else None,
                enabled=bool(self.enabled[row]),
                traits=list(self.host_traits[row]),
                instances=sorted(self.listed.get(row, empty)),
                **fields,
            )
            images.append(HostImage(report, float(self.reported_at[row])))
        return images

    def claim_images(self) -> list[ClaimImage]:
        return [
            ClaimImage(
                c.instance_uuid,
                self.names[c.row] or "",
                c.memory_mb,
                c.vcpus,
                c.disk_gb,
                c.group_id,
                c.created_at,
                confirmed,
                c.selection,
            )
            for c, confirmed in self.claims
        ]

    def credits(self) -> list[CreditImage]:
        return [
            CreditImage(self.names[row] or "", uuid, mem, vcpus, disk)
            for row, by_uuid in self.released.items()
            for uuid, (mem, vcpus, disk) in by_uuid.items()
        ]


def capture(core: SchedulerCore) -> CoreImage:
    """Copy what a snapshot needs, in one synchronous step of the owner.

    Claims are shared, not copied: every field but ``confirmed`` is fixed at
    creation, and ``confirmed`` is copied beside each claim.
    """
    table = core.table
    n = table.n
    return CoreImage(
        rows=sorted(table.row_of.values()),
        names=list(table.name_of[:n]),
        columns={col: table.ints[col][:n].copy() for col, _ in _REPORTED},
        reported_at=table.floats["reported_at"][:n].copy(),
        enabled=table.enabled[:n].copy(),
        zone=table.zone[:n].copy(),
        zone_names=list(table.zone_names),
        host_traits=list(table.host_traits[:n]),
        listed=dict(core._listed),
        claims=[(c, c.confirmed) for c in core.ledger.claims.values()],
        released={row: dict(credits) for row, credits in core.ledger.released.items()},
    )
