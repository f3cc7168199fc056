"""Host filters: each one a vectorized predicate over the whole host table.

The protocol (also how a user plugs in a filter)::

    class MyFilter:
        name = "MyFilter"
        def filter_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.bool_] | None:
            return table.column("free_ram") > 1024   # one bool per row [:table.n]

Return ``None`` when the filter does not apply to this request (no zone
asked for, no hints ...): it then costs nothing and removes no host. A
filter must not change the table. Semantics follow Nova's filters of the
same name (release 18.0.0); the resource filters' rule is the table's
headroom (see ``HostTable._derive``): the capacity left with the allocation
ratio, never more than the host's own total (an instance may not overcommit
against itself), and CoreFilter passes a host that reports 0 vCPUs.

The host aggregate filters (not enabled by default, as in Nova) decide once
per distinct set of aggregates (a *membership*, see :mod:`.aggregates`) and
answer per row with one gather over the table's ``agg_set`` column; the
Aggregate{Ram,Core,Disk}Filter ratios are the table's per-row ratios (the
engine writes a row's aggregate ratio there when such a filter is on), so
their rule is the resource filters' own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..models import HostState, RequestSpec, SchedulerConfig
from .aggregates import TENANT_KEY, TYPE_KEY, AggregateBook, match_extra_spec, scoped_extra_specs
from .host_facts import ComputeCapabilitiesFilter, ImagePropertiesFilter
from .ledger import ClaimLedger
from .table import HEADROOM_COLUMNS, HostTable
from .views import host_state

__all__ = [
    "AGGREGATE_RATIO_FILTERS",
    "BUILTIN_FILTER_CLASSES",
    "RESOURCE_RULES",
    "HostFilter",
    "PerHostFilter",
    "PlacementContext",
    "ResourceFilter",
    "group_members",
]

BoolColumn = NDArray[np.bool_]


@dataclass(slots=True)
class PlacementContext:
    """What filters and weighers may read while one instance is placed."""

    spec: RequestSpec
    config: SchedulerConfig
    now: float
    ledger: ClaimLedger
    locate: Callable[[str], int | None]  # instance uuid -> row, or None when unknown
    chosen_rows: list[int] = field(default_factory=list)  # earlier instances of this request
    aggregates: AggregateBook | None = None  # the host aggregates (None: there are none)


@runtime_checkable
class HostFilter(Protocol):
    """A filter: ``filter_all`` returns one bool per row ``[:table.n]``, or None."""

    name: str

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None: ...


def rows_mask(table: HostTable, rows: object, value: bool) -> BoolColumn:
    """One bool per row: ``value`` on ``rows`` (ints), the opposite elsewhere."""
    mask = np.full(table.n, not value, dtype=np.bool_)
    idx = (
        rows if isinstance(rows, np.ndarray) else np.fromiter(rows, dtype=np.intp)  # type: ignore[call-overload]
    )
    if idx.size:
        mask[idx] = value
    return mask


class ComputeFilter:
    """Enabled hosts whose last report is within ``service_down_time``."""

    name = "ComputeFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        return table.row_local_part(self.name)  # freshness: the sweep's stale marks


class ResourceFilter:
    """A request fits a host when it asks for no more than the host's headroom.

    The rule of RamFilter, CoreFilter and DiskFilter, written once: the
    headroom column (derived by the table, see ``HostTable._derive``) against
    one field of the request. The fused check of all three in
    :mod:`.ranking` is built from these same pairs (:data:`RESOURCE_RULES`).
    """

    name = "ResourceFilter"
    column = ""  # the table's headroom column
    asks = ""  # the RequestSpec field

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        asked: int = getattr(ctx.spec, self.asks)
        return table.column(self.column) >= asked


class RamFilter(ResourceFilter):
    """requested <= memory_mb, and <= (memory_mb - reserved) x ram ratio - used - claimed
    + released."""

    name = "RamFilter"
    column = "ram_headroom"
    asks = "memory_mb"


class CoreFilter(ResourceFilter):
    """requested <= vcpus, and <= vcpus x cpu ratio - used - claimed + released; any
    request passes a host that reports 0 vCPUs (Nova: CPU collection broken)."""

    name = "CoreFilter"
    column = "cpu_headroom"
    asks = "vcpus"


class DiskFilter(ResourceFilter):
    """requested <= local_gb, and <= local_gb x disk ratio - used - claimed + released."""

    name = "DiskFilter"
    column = "disk_headroom"
    asks = "disk_gb"


# (headroom row, request field) of each resource filter, in the table's headroom order
RESOURCE_RULES: tuple[tuple[int, str], ...] = tuple(
    sorted((HEADROOM_COLUMNS.index(f.column), f.asks) for f in (RamFilter, CoreFilter, DiskFilter))
)


class AggregateRamFilter(RamFilter):
    """RamFilter with the smallest ``ram_allocation_ratio`` of the host's aggregates
    (Nova's AggregateRamFilter; "0" is 0: the host takes no RAM); a host in none,
    or with a value that is not a finite number, keeps its own ratio."""

    name = "AggregateRamFilter"


class AggregateCoreFilter(CoreFilter):
    """CoreFilter with the smallest ``cpu_allocation_ratio`` of the host's aggregates."""

    name = "AggregateCoreFilter"


class AggregateDiskFilter(DiskFilter):
    """DiskFilter with the smallest ``disk_allocation_ratio`` of the host's aggregates."""

    name = "AggregateDiskFilter"


# the ratio each Aggregate*Filter reads from aggregate metadata, in headroom order
AGGREGATE_RATIO_FILTERS: tuple[type[ResourceFilter], ...] = (
    AggregateRamFilter,
    AggregateCoreFilter,
    AggregateDiskFilter,
)


def _by_membership(table: HostTable, answers: BoolColumn) -> BoolColumn:
    passed: BoolColumn = answers[table.agg_set[: table.n]]
    return passed


class AggregateInstanceExtraSpecsFilter:
    """Hosts whose aggregates' metadata match the flavor's extra specs (Nova 18.0.0).

    Keys unscoped or of the ``aggregate_instance_extra_specs:`` scope are
    checked, keys of other scopes ignored; each must be in the metadata of
    one of the host's aggregates with a comma-separated value that matches
    (extra_specs_ops: ``<in>``, ``<all-in>``, ``<or>``, ``s==`` ..., ``>=`` ...,
    else equality). A host in no aggregate has no metadata: it fails any
    such key. No such key in the request: the filter does not apply.
    """

    name = "AggregateInstanceExtraSpecsFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        if not ctx.spec.extra_specs:
            return None
        pairs = scoped_extra_specs(ctx.spec.extra_specs)
        if not pairs:
            return None
        book = ctx.aggregates
        if book is None:
            return np.zeros(table.n, dtype=np.bool_)

        def decide(membership: int) -> bool:
            metadata = book.metadata_by_host(membership)
            return all(
                any(match_extra_spec(value, wanted) for value in metadata.get(key, ()))
                for key, wanted in pairs
            )

        return _by_membership(table, book.answers((self.name, pairs), decide))


class AggregateMultiTenancyIsolation:
    """A host in an aggregate with ``filter_tenant_id`` takes only those projects.

    Nova 18.0.0: the values are comma lists, over every aggregate of the
    host that has the key; a host in no such aggregate takes every project.
    A request with no ``project_id`` is of no listed project. Only the
    ``filter_tenant_id`` key counts (``filter_tenant_id_*`` keys came after
    18.0.0). No aggregate has the key: the filter does not apply.
    """

    name = "AggregateMultiTenancyIsolation"

    def applies(self, ctx: PlacementContext) -> bool:
        """True when some aggregate has the key (then every request is checked)."""
        return ctx.aggregates is not None and ctx.aggregates.has(TENANT_KEY)

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        book = ctx.aggregates
        if book is None or not book.has(TENANT_KEY):
            return None
        project = ctx.spec.project_id

        def decide(membership: int) -> bool:
            allowed = book.metadata_by_host(membership, TENANT_KEY).get(TENANT_KEY)
            return not allowed or project in allowed

        return _by_membership(table, book.answers((self.name, project), decide))


class AggregateTypeAffinityFilter:
    """A host in an aggregate with ``instance_type`` takes only those flavors.

    Nova 18.0.0: passes when one of the host's aggregates' ``instance_type``
    values (each a comma list) names the flavor, or none has the key. A
    request with no ``flavor_name`` names no flavor. No aggregate has the
    key: the filter does not apply.
    """

    name = "AggregateTypeAffinityFilter"

    def applies(self, ctx: PlacementContext) -> bool:
        """True when some aggregate has the key (then every request is checked)."""
        return ctx.aggregates is not None and ctx.aggregates.has(TYPE_KEY)

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        book = ctx.aggregates
        if book is None or not book.has(TYPE_KEY):
            return None
        flavor = ctx.spec.flavor_name

        def decide(membership: int) -> bool:
            values = book.values_from_key(membership, TYPE_KEY)
            return not values or any(
                flavor in [part.strip() for part in value.split(",")] for value in values
            )

        return _by_membership(table, book.answers((self.name, flavor), decide))


class AvailabilityZoneFilter:
    """Hosts in the requested availability zone, when one is requested.

    A host's zone is its aggregates' ``availability_zone`` (as Nova), else
    the zone its report names, else ``default_availability_zone``.
    """

    name = "AvailabilityZoneFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        zone = ctx.spec.availability_zone
        if zone is None:
            return None
        zones = table.zone[: table.n]
        passed: BoolColumn = zones == table.zone_id(zone, create=False)
        if zone == ctx.config.default_availability_zone:
            passed |= zones == table.zone_id(None, create=False)
        return passed


class RequiredTraitsFilter:
    """Hosts that have every required trait."""

    name = "RequiredTraitsFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        if not ctx.spec.required_traits:
            return None
        try:
            want = table.trait_mask(ctx.spec.required_traits, create=False)
        except KeyError:  # a trait no host ever reported: nobody has it
            return np.zeros(table.n, dtype=np.bool_)
        have = table.traits[: table.n]
        if want.size == 1:  # up to 64 traits known: one word per host, no reduction
            word = want[0]
            one: BoolColumn = (have[:, 0] & word) == word
            return one
        passed: BoolColumn = np.all((have & want) == want, axis=1)
        return passed


class ForbiddenTraitsFilter:
    """Hosts that have none of the forbidden traits."""

    name = "ForbiddenTraitsFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        known = [t for t in ctx.spec.forbidden_traits if t in table.trait_bits]
        if not known:
            return None
        deny = table.trait_mask(known, create=False)
        if deny.size == 1:
            none: BoolColumn = (table.traits[: table.n, 0] & deny[0]) == 0
            return none
        passed: BoolColumn = np.all((table.traits[: table.n] & deny) == 0, axis=1)
        return passed


class SameHostFilter:
    """Nova's ``same_host`` hint: hosts running at least one of the listed instances."""

    name = "SameHostFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        if not ctx.spec.same_host:
            return None
        rows = {r for r in map(ctx.locate, ctx.spec.same_host) if r is not None}
        return rows_mask(table, rows, True)


class DifferentHostFilter:
    """Nova's ``different_host`` hint: hosts running none of the listed instances."""

    name = "DifferentHostFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        if not ctx.spec.different_host:
            return None
        rows = {r for r in map(ctx.locate, ctx.spec.different_host) if r is not None}
        return rows_mask(table, rows, False)


def group_members(
    table: HostTable, ctx: PlacementContext, policy: str
) -> tuple[NDArray[np.intp], NDArray[np.int64]] | None:
    """Where the request's group has members, for a filter or weigher of ``policy``.

    None when the request has no group of that policy, or the group has no
    member anywhere. Else the rows holding members and how many each: the
    claims actorsched holds for the group (kept by the ledger per row) and
    the group's ``hosts`` (one entry per member it did not place; named
    exactly, as Nova compares ``instance_group.hosts``). A row may appear
    twice (once from each); a member on a host actorsched does not know
    counts nowhere, but still makes the group non-empty.
    """
    group = ctx.spec.group
    if group is None or group.policy != policy:
        return None
    claimed = ctx.ledger.group_members(group.id)
    if not claimed and not group.hosts:
        return None
    rows = np.fromiter(claimed.keys(), dtype=np.intp, count=len(claimed))
    counts = np.fromiter(claimed.values(), dtype=np.int64, count=len(claimed))
    if group.hosts:
        listed = [r for r in map(table.row_of.get, group.hosts) if r is not None]
        rows = np.concatenate((rows, np.array(listed, dtype=np.intp)))
        counts = np.concatenate((counts, np.ones(len(listed), dtype=np.int64)))
    return rows, counts


class ServerGroupAffinityFilter:
    """Hard affinity: once a group member is placed, the rest go to its host(s)."""

    name = "ServerGroupAffinityFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        group = ctx.spec.group
        if group is None or group.policy != "affinity":
            return None  # (group_members says so too: this spares most requests the call)
        members = group_members(table, ctx, "affinity")
        if members is None:
            return None
        return rows_mask(table, members[0], True)


class ServerGroupAntiAffinityFilter:
    """Hard anti-affinity: never a host that already holds ``max_server_per_host``
    members of the group (one when the group sets no such rule; Nova API 2.64)."""

    name = "ServerGroupAntiAffinityFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        group = ctx.spec.group
        if group is None or group.policy != "anti-affinity":
            return None  # (group_members says so too: this spares most requests the call)
        members = group_members(table, ctx, "anti-affinity")
        if members is None:
            return None
        rows, counts = members
        limit = group.max_server_per_host
        if limit is None or limit == 1:
            return rows_mask(table, rows, False)
        on_row = np.zeros(table.n, dtype=np.int64)
        np.add.at(on_row, rows, counts)
        passed: BoolColumn = on_row < limit
        return passed


class NumInstancesFilter:
    """Hosts running fewer than ``max_instances_per_host`` instances."""

    name = "NumInstancesFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        return table.row_local_part(self.name)


class IoOpsFilter:
    """Hosts with fewer than ``max_io_ops_per_host`` concurrent I/O-heavy operations."""

    name = "IoOpsFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        return table.row_local_part(self.name)


class PerHostFilter:
    """Adapter for a plain per-host predicate; it loops in Python, at its own cost.

    >>> big = PerHostFilter("BigHosts", lambda host, spec: host.memory_mb >= 65536)
    """

    def __init__(self, name: str, predicate: Callable[[HostState, RequestSpec], bool]) -> None:
        self.name = name
        self._predicate = predicate

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        mask = np.zeros(table.n, dtype=np.bool_)
        for row in np.flatnonzero(table.active[: table.n]):
            mask[row] = self._predicate(host_state(table, int(row)), ctx.spec)
        return mask


BUILTIN_FILTER_CLASSES: dict[str, type[HostFilter]] = {
    cls.name: cls
    for cls in (
        ComputeFilter,
        AvailabilityZoneFilter,
        RamFilter,
        CoreFilter,
        DiskFilter,
        RequiredTraitsFilter,
        ForbiddenTraitsFilter,
        SameHostFilter,
        DifferentHostFilter,
        ServerGroupAffinityFilter,
        ServerGroupAntiAffinityFilter,
        NumInstancesFilter,
        IoOpsFilter,
        AggregateInstanceExtraSpecsFilter,
        AggregateMultiTenancyIsolation,
        AggregateTypeAffinityFilter,
        AggregateRamFilter,
        AggregateCoreFilter,
        AggregateDiskFilter,
        ComputeCapabilitiesFilter,
        ImagePropertiesFilter,
    )
}
