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

from .engine import SchedulerCore
from .ledger import Claim

__all__ = ["ClaimImage", "CoreImage", "CreditImage", "capture"]

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
class ClaimImage:
    """A live claim as a snapshot keeps it; its fields name the claim columns."""

    instance_uuid: str
    host: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    group_id: str | None
    created_at: float
    confirmed: bool
    alternates: tuple[str, ...]


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

    def host_columns(self) -> dict[str, list[Any]]:
        """Every host as the report that rebuilds it, in columns named as
        ``HostReport``'s fields, plus ``reported_at``; in row order."""
        empty: frozenset[str] = frozenset()
        rows = self.rows
        index = np.asarray(rows, dtype=np.intp)
        columns: dict[str, list[Any]] = {
            field: self.columns[col][index].tolist() for col, field in _REPORTED
        }
        zone_names = [*self.zone_names, None]  # zone id -1: none
        columns["host"] = [self.names[row] or "" for row in rows]
        columns["availability_zone"] = [zone_names[z] for z in self.zone[index].tolist()]
        columns["enabled"] = self.enabled[index].tolist()
        columns["traits"] = [list(self.host_traits[row]) for row in rows]
        columns["instances"] = [sorted(self.listed.get(row, empty)) for row in rows]
        columns["reported_at"] = self.reported_at[index].tolist()
        return columns

    def claim_columns(self) -> dict[str, list[Any]]:
        """Every live claim, in columns named as :class:`ClaimImage`'s fields."""
        claims = self.claims
        names = self.names
        return {
            "instance_uuid": [c.instance_uuid for c, _ in claims],
            "host": [names[c.row] or "" for c, _ in claims],
            "memory_mb": [c.memory_mb for c, _ in claims],
            "vcpus": [c.vcpus for c, _ in claims],
            "disk_gb": [c.disk_gb for c, _ in claims],
            "group_id": [c.group_id for c, _ in claims],
            "created_at": [c.created_at for c, _ in claims],
            "confirmed": [confirmed for _, confirmed in claims],
            "alternates": [c.alternates for c, _ in claims],
        }

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
