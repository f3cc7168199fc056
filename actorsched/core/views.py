"""Host states as callers see them: copied in one cheap owner step, built outside it.

Rules this module keeps:

* :func:`capture_host_states` is the only function here that reads the
  table, and it copies columns (a slice of rows, or all of them), never
  builds a per-host object: at 1,000,000 hosts the owner pays for a few
  array copies, not for a million pydantic objects. The host names and
  trait lists are not copied at all: the table hands them out
  copy-on-write (:meth:`HostTable.shared_lists`).
* A :class:`HostStatesImage` holds nothing the table mutates later, so
  :meth:`HostStatesImage.states` may run on another thread (or task) while
  the owner goes on.
* A page is a range of rows, ``start`` up to ``start + limit``: rows, not
  hosts, so finding a page is O(page), whatever the host count. A host
  added or removed between two pages may be missed or not; each page is
  consistent in itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ..models import HostState
from .table import INT_COLUMNS, RATIO_ROWS, HostTable, Inventory

__all__ = ["HostStatesImage", "ImageBuffers", "capture_host_states", "host_state"]

_INTS = (
    "generation",
    "mem_total",
    "mem_reserved",
    "disk_total",
    "vcpus_total",
    "vcpus_used",
    "claimed_vcpus",
    "released_vcpus",
    "assumed_count",
)
_INT_INDEX = {name: INT_COLUMNS.index(name) for name in _INTS}
_FLOATS = ("free_ram", "free_disk", "num_instances", "num_io_ops", "reported_at")
# the ratios a HostState shows: the resource filters' (ram, cpu, disk), the
# first of the table's RATIO_ROWS
_SHOWN_RATIOS = 3
assert RATIO_ROWS[:_SHOWN_RATIOS] == ("ram", "cpu", "disk")


@dataclass(frozen=True, slots=True)
class ImageBuffers:
    """Room for an image of up to ``rows`` rows, allocated and touched by the caller.

    Fresh memory costs its first touch: at 1,000,000 hosts the page faults
    of a new 190 MB image take 70 to 100 ms, four times the copy itself. A
    caller that allocates the room *before* asking (:meth:`for_rows`, off
    the owner) leaves the owner only the copy into it.
    """

    raw: NDArray[np.int64]
    floats: NDArray[np.float64]
    enabled: NDArray[np.bool_]
    zone: NDArray[np.int32]
    ratios: NDArray[np.float64]
    agg_set: NDArray[np.int32]

    @property
    def rows(self) -> int:
        return len(self.enabled)

    @classmethod
    def for_rows(cls, rows: int) -> ImageBuffers:
        """Allocate room for ``rows`` rows and touch every page of it."""
        room = cls(
            raw=np.empty((rows, len(INT_COLUMNS)), dtype=np.int64),
            floats=np.empty((len(_FLOATS), rows), dtype=np.float64),
            enabled=np.empty(rows, dtype=np.bool_),
            zone=np.empty(rows, dtype=np.int32),
            ratios=np.empty((_SHOWN_RATIOS, rows), dtype=np.float64),
            agg_set=np.empty(rows, dtype=np.int32),
        )
        # written, not np.zeros: calloc'd pages are mapped lazily, on first write
        for array in (room.raw, room.floats, room.enabled, room.zone, room.ratios, room.agg_set):
            array.fill(0)
        return room


@dataclass(frozen=True, slots=True)
class HostStatesImage:
    """Copies of the figures of rows ``[start, start + len(names))``; ``next_row`` pages on."""

    start: int
    stop: int
    names_list: list[str | None]  # the table's own list (copy-on-write): read [start, stop)
    raw: NDArray[np.int64]  # the table's integer columns, rows by columns
    floats: dict[str, NDArray[np.float64]]
    enabled: NDArray[np.bool_]
    zone: NDArray[np.int32]
    zone_names: list[str]
    traits_list: list[tuple[str, ...]]  # as names_list
    ratios: NDArray[np.float64]  # (ram, cpu, disk) allocation ratios, one column per row
    agg_set: NDArray[np.int32]  # membership id of each row's aggregates
    membership_names: list[tuple[str, ...]]  # membership id -> aggregate names
    next_row: int | None  # the start of the next page, None after the last
    # row -> node of the rows whose node is not named as their host (a copy)
    nodes: dict[int, str]
    # row -> inventory entry of the rows that have one (HostTable.inventory; a copy)
    inventory: dict[int, Inventory] = field(default_factory=dict)

    @property
    def names(self) -> list[str | None]:
        """The host of each row of the image (None for a free row)."""
        return self.names_list[self.start : self.stop]

    @property
    def traits(self) -> list[tuple[str, ...]]:
        """The traits of each row of the image."""
        return self.traits_list[self.start : self.stop]

    def __len__(self) -> int:
        """Hosts in this image (free rows do not count)."""
        return sum(1 for name in self.names if name is not None)

    def states(self) -> dict[str, HostState]:
        """One :class:`HostState` per host, in row order (safe off the owner)."""
        i = {name: self.raw[:, _INT_INDEX[name]].tolist() for name in _INTS}
        f = {name: column.tolist() for name, column in self.floats.items()}
        zone_names = [*self.zone_names, None]  # zone id -1: none
        zones = self.zone.tolist()
        enabled = self.enabled.tolist()
        traits = self.traits
        ram_ratio, cpu_ratio, disk_ratio = self.ratios.tolist()
        memberships = self.membership_names
        agg_set = self.agg_set.tolist()
        nodes = self.nodes
        held = self.inventory
        start = self.start
        out: dict[str, HostState] = {}
        for k, host in enumerate(self.names):
            if host is None:
                continue
            entry = held.get(start + k) if held else None
            out[host] = HostState(
                host=host,
                node=nodes.get(start + k, host) if nodes else host,
                generation=i["generation"][k],
                enabled=enabled[k],
                availability_zone=zone_names[zones[k]],
                traits=list(traits[k]),
                memory_mb=i["mem_total"][k],
                memory_mb_reserved=i["mem_reserved"][k],
                vcpus_reserved=0 if entry is None else entry[3],
                local_gb_reserved=0 if entry is None else entry[4],
                free_ram_mb=int(f["free_ram"][k]),
                local_gb=i["disk_total"][k],
                free_disk_gb=int(f["free_disk"][k]),
                vcpus_total=i["vcpus_total"][k],
                vcpus_used=i["vcpus_used"][k] + i["claimed_vcpus"][k] - i["released_vcpus"][k],
                num_instances=int(f["num_instances"][k]),
                num_io_ops=int(f["num_io_ops"][k]),
                assumed_claims=i["assumed_count"][k],
                reported_at=f["reported_at"][k],
                ram_allocation_ratio=ram_ratio[k],
                cpu_allocation_ratio=cpu_ratio[k],
                disk_allocation_ratio=disk_ratio[k],
                aggregates=list(memberships[agg_set[k]]),
            )
        return out


def capture_host_states(
    table: HostTable,
    start: int = 0,
    limit: int | None = None,
    into: ImageBuffers | None = None,
) -> HostStatesImage:
    """Copy rows ``[start, start + limit)`` (every row when ``limit`` is None).

    With ``into`` large enough, the figures are copied into it (no fresh
    memory in this step); otherwise into new arrays.
    """
    if start < 0 or (limit is not None and limit < 1):
        raise ValueError(f"a page starts at row 0 or later and holds 1 or more: {start}, {limit}")
    n = table.n
    begin = min(start, n)
    stop = n if limit is None else min(n, begin + limit)
    rows = slice(begin, stop)
    count = stop - begin
    if into is None or into.rows < count:
        into = ImageBuffers(
            raw=np.empty((count, len(INT_COLUMNS)), dtype=np.int64),
            floats=np.empty((len(_FLOATS), count), dtype=np.float64),
            enabled=np.empty(count, dtype=np.bool_),
            zone=np.empty(count, dtype=np.int32),
            ratios=np.empty((_SHOWN_RATIOS, count), dtype=np.float64),
            agg_set=np.empty(count, dtype=np.int32),
        )
    raw = into.raw[:count]
    np.copyto(raw, table.raw[rows])  # one block copy: faster than a column at a time
    floats = {}
    for index, name in enumerate(_FLOATS):
        floats[name] = into.floats[index, :count]
        np.copyto(floats[name], table.floats[name][rows])
    enabled = into.enabled[:count]
    np.copyto(enabled, table.enabled[rows])
    zone = into.zone[:count]
    np.copyto(zone, table.zone[rows])
    ratios = into.ratios[:, :count]
    np.copyto(ratios, table.ratios[:_SHOWN_RATIOS, rows])
    agg_set = into.agg_set[:count]
    np.copyto(agg_set, table.agg_set[rows])
    names, traits = table.shared_lists()  # not copied: the table copies on its next write
    nodes = table.node_of  # usually empty: rows whose node is named as their host have none
    if nodes:
        nodes = {r: node for r, node in nodes.items() if begin <= r < stop}
    held = table.inventory  # usually empty too
    if held:
        held = {r: entry for r, entry in held.items() if begin <= r < stop}
    return HostStatesImage(
        start=begin,
        stop=stop,
        names_list=names,
        raw=raw,
        floats=floats,
        enabled=enabled,
        zone=zone,
        zone_names=list(table.zone_names),
        traits_list=traits,
        ratios=ratios,
        agg_set=agg_set,
        membership_names=table.membership_names,
        next_row=stop if stop < n else None,
        nodes=dict(nodes),
        inventory=dict(held),
    )


def host_state(table: HostTable, row: int) -> HostState:
    """The :class:`HostState` of one row, built by :meth:`HostStatesImage.states`.

    Read in place (views of the row, the table's own lists), not copied: for
    a caller inside the owner step that builds it at once.
    """
    rows = slice(row, row + 1)
    image = HostStatesImage(
        start=row,
        stop=row + 1,
        names_list=table.name_of,
        raw=table.raw[rows],
        floats={name: table.floats[name][rows] for name in _FLOATS},
        enabled=table.enabled[rows],
        zone=table.zone[rows],
        zone_names=table.zone_names,
        traits_list=table.host_traits,
        ratios=table.ratios[:_SHOWN_RATIOS, rows],
        agg_set=table.agg_set[rows],
        membership_names=table.membership_names,
        next_row=None,
        nodes=table.node_of,
        inventory=table.inventory,
    )
    [state] = image.states().values()
    return state
