"""Host filters: each one a vectorized predicate over the whole host table.

The protocol (also how a user plugs in a filter)::

    class MyFilter:
        name = "MyFilter"
        def filter_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.bool_] | None:
            return table.column("free_ram") > 1024   # one bool per row [:table.n]

Return ``None`` when the filter does not apply to this request (no zone
asked for, no hints ...): it then costs nothing and removes no host. A
filter must not change the table. Semantics follow Nova's filters of the
same name (release 18.0.0), or Nova 34's where they differ when
``SchedulerConfig.nova_release`` is 34 (what a nova.conf sets): the
resources as Placement decides them, the zone as the request filter that
took AvailabilityZoneFilter's place, every ``filter_tenant_id*`` key, and
InvalidRequest for a numeric extra spec that meets no number. The resource
filters' rule is the table's headroom (see ``HostTable._derive``): the
capacity left with the allocation ratio, never more than the host's own
total (an instance may not overcommit against itself). Nova 18: a host that
reports 0 vCPUs passes CoreFilter. Nova 34 (Placement): a headroom is never
below 0, so a request asking 0 of a class asks nothing of it, and a host
that reports 0 of a class takes no request asking any.

The host aggregate filters (not enabled by default, as in Nova) decide once
per distinct set of aggregates (a *membership*, see :mod:`.aggregates`) and
answer per row with one gather over the table's ``agg_set`` column; the
Aggregate{Ram,Core,Disk}Filter ratios are the table's per-row ratios (the
engine writes a row's aggregate ratio there when such a filter is on), so
their rule is the resource filters' own. AggregateNumInstancesFilter's and
AggregateIoOpsFilter's limits are per membership too (one gather), against
the counts as claims leave them. The other opt-in filters
(:data:`~actorsched.models.OPTIONAL_FILTERS`): IsolatedHostsFilter reads
the configuration and the request's image id, JsonFilter (:mod:`.json_filter`)
the ``query`` hint, MetricsFilter (:mod:`.host_facts`) the metrics hosts
report. Where Nova 18 and 34 have one rule, it holds under both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidRequest
from ..models import HostState, RequestSpec, SchedulerConfig
from .aggregates import (
    TENANT_KEY,
    TYPE_KEY,
    AggregateBook,
    is_number,
    match_extra_spec,
    numeric_operand,
    scoped_extra_specs,
)
from .host_facts import ComputeCapabilitiesFilter, ImagePropertiesFilter, MetricsFilter
from .json_filter import JsonFilter
from .ledger import ClaimLedger
from .table import HEADROOM_COLUMNS, HostTable
from .views import host_state

# the metadata prefix of an aggregate's required traits (Nova's isolate_aggregates)
TRAIT_KEY_PREFIX = "trait:"

__all__ = [
    "AGGREGATE_RATIO_FILTERS",
    "BUILTIN_FILTER_CLASSES",
    "RESOURCE_RULES",
    "ComputeStatusRequestFilter",
    "HostFilter",
    "IsolatedAggregatesRequestFilter",
    "PerHostFilter",
    "PlacementContext",
    "ResourceFilter",
    "TenantAggregateRequestFilter",
    "group_members",
    "request_filters",
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
    + released; with Nova 34's rules a request of 0 MB passes any host."""

    name = "RamFilter"
    column = "ram_headroom"
    asks = "memory_mb"


class CoreFilter(ResourceFilter):
    """requested <= vcpus, and <= vcpus x cpu ratio - used - claimed + released.

    A host that reports 0 vCPUs: Nova 18 passes any request ("VCPUs not set;
    assuming CPU collection broken"); Nova 34 (``nova_release`` 34) has no VCPU
    inventory there, so it takes no request of one or more, and a request of 0
    vCPUs passes any host."""

    name = "CoreFilter"
    column = "cpu_headroom"
    asks = "vcpus"


class DiskFilter(ResourceFilter):
    """requested <= local_gb, and <= local_gb x disk ratio - used - claimed + released;
    with Nova 34's rules a request of 0 GB (a boot from volume) passes any host, one
    whose disk is used past its size too."""

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

    A numeric operator (``=``, ``==``, ``!=``, ``>=``, ``<=``) whose operand
    is not a number, or that meets a value that is not a number, is no
    match with ``nova_release`` 18. With 34, such an operand, or such a
    value in the metadata of a host that has reported, makes the request
    invalid: InvalidRequest naming the key and the value, nothing placed.
    Nova's ``float()`` raises ValueError out of the filter there and the
    request fails; Nova only when it gets to that value (on the hosts
    earlier filters left, the keys in the flavor's order, a host's values in
    set order), actorsched whenever such a value is on a host, so the same
    request never fails on one call and passes on the next.
    """

    name = "AggregateInstanceExtraSpecsFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        if not ctx.spec.extra_specs:
            return None
        pairs = scoped_extra_specs(ctx.spec.extra_specs)
        if not pairs:
            return None
        book = ctx.aggregates
        if ctx.config.nova_release == 34:
            _refuse_what_is_not_a_number(table, book, pairs)
        if book is None:
            return np.zeros(table.n, dtype=np.bool_)

        def decide(membership: int) -> bool:
            metadata = book.metadata_by_host(membership)
            return all(
                any(match_extra_spec(value, wanted) for value in metadata.get(key, ()))
                for key, wanted in pairs
            )

        return _by_membership(table, book.answers((self.name, pairs), decide))


def _refuse_what_is_not_a_number(
    table: HostTable, book: AggregateBook | None, pairs: tuple[tuple[str, str], ...]
) -> None:
    """Nova 34's AggregateInstanceExtraSpecsFilter raising ValueError: InvalidRequest
    when one of the extra specs ``pairs`` compares as a number with an operand that
    is not one, or when a host that reported is in an aggregate whose value of a
    key so compared is not a number."""
    numeric = [(key, wanted) for key, wanted in pairs if numeric_operand(wanted) is not None]
    if not numeric:
        return
    for key, wanted in numeric:
        operand = numeric_operand(wanted)
        if operand is not None and not is_number(operand):
            raise InvalidRequest(
                f"flavor extra spec {key!r} asks {wanted!r}, a numeric comparison with "
                f"{operand!r}, which is not a number (Nova's extra_specs_ops raises "
                "ValueError and the request fails); nothing was placed: give a number, "
                "or compare as strings (s==, s>= ...)"
            )
    if book is None:
        return
    keys = tuple(sorted({key for key, _ in numeric}))

    def not_numbers(membership: int) -> dict[str, list[str]]:
        metadata = book.metadata_by_host(membership)
        found = {k: sorted(v for v in metadata.get(k, ()) if not is_number(v)) for k in keys}
        return {k: values for k, values in found.items() if values}

    key_of_answers = ("AggregateInstanceExtraSpecsFilter", "not a number", keys)
    bad = book.answers(key_of_answers, lambda membership: bool(not_numbers(membership)))
    n = table.n
    rows = np.flatnonzero(bad[table.agg_set[:n]] & table.active[:n])
    if not rows.size:
        return
    row = int(rows[0])
    membership = int(table.agg_set[row])
    key, values = min(not_numbers(membership).items())
    named = [
        name
        for name in book.memberships[membership]
        if name in book.by_name
        and values[0] in {v.strip() for v in book.by_name[name].metadata.get(key, "").split(",")}
    ]
    raise InvalidRequest(
        f"flavor extra spec {key!r} asks {dict(numeric)[key]!r}, a numeric comparison, but "
        f"host aggregate {(named or ['?'])[0]!r} of host {table.name_of[row]!r} has "
        f"{key}={values[0]!r}, not a number (Nova's AggregateInstanceExtraSpecsFilter "
        "raises ValueError there and the request fails); nothing was placed: make the "
        "aggregate's value a number, or compare as strings in the flavor (s==, s>= ...)"
    )


class AggregateMultiTenancyIsolation:
    """A host in an aggregate with a ``filter_tenant_id`` key takes only those projects.

    The values are comma lists, over every aggregate of the host that has
    such a key; a host in no such aggregate takes every project. A request
    with no ``project_id`` is of no listed project. No aggregate has such a
    key: the filter does not apply. Which keys: Nova 18.0.0's
    ``filter_tenant_id`` only; with ``nova_release`` 34, as Nova 34
    (``aggregate_multitenancy_isolation.py``), every metadata key that
    starts with ``filter_tenant_id`` (``filter_tenant_id2``,
    ``filter_tenant_id_gr1`` ...: one value is limited in length, so a long
    list is split over several keys).
    """

    name = "AggregateMultiTenancyIsolation"

    def applies(self, ctx: PlacementContext) -> bool:
        """True when some aggregate has such a key (then every request is checked)."""
        book = ctx.aggregates
        return book is not None and book.has_tenant_key()

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        book = ctx.aggregates
        if book is None or not book.has_tenant_key():
            return None
        project = ctx.spec.project_id
        if ctx.config.nova_release == 34:

            def decide(membership: int) -> bool:
                metadata = book.metadata_by_host(membership)
                allowed = {
                    value
                    for key, values in metadata.items()
                    if key.startswith(TENANT_KEY)
                    for value in values
                }
                return not allowed or project in allowed

        else:

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
    the zone its report names. The rules differ only for a request of the
    default zone (``default_availability_zone``, ``nova``):

    * Nova 18's AvailabilityZoneFilter (``nova_release`` 18): a host in no
      zone is in the default zone, so the request passes those hosts with
      the hosts in it by name, and never a host of another zone.
    * Nova 34's request filter ``map_az_to_placement_aggregate``
      (``nova/scheduler/request_filter.py``; ``nova_release`` 34, which
      ``actorsched.nova.conf`` sets: there the name stands for that request
      filter): a zone some aggregate names, or some host reports, limits the
      request to its hosts (Placement's ``member_of``; none, when such an
      aggregate has no host that reported); a zone that nothing names, the
      default one or another, limits nothing: a host of another zone passes
      too (the request filter finds no aggregate of it and adds no
      ``member_of``; Nova's API lets the default zone through because the
      hosts in no zone aggregate make it up, and refuses another zone that
      is not available, which a move may still carry).

    Under Nova 18's rules another zone that nothing names passes no host (a
    host may still join it: a waiting request waits for one).
    """

    name = "AvailabilityZoneFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        zone = ctx.spec.availability_zone
        if zone is None:
            return None
        zones = table.zone[: table.n]
        # a zone never reported nor named by an aggregate has no id: -2 matches no row
        passed: BoolColumn = zones == table.zone_id(zone, create=False)
        if ctx.config.nova_release == 34:
            if not passed.any():
                book = ctx.aggregates
                if book is None or not book.names_zone(zone):
                    return None  # nothing names the zone: no member_of, it limits nothing
        elif zone == ctx.config.default_availability_zone:
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
    if group.members:
        return _members_where(table, ctx, group.members, group.hosts, policy)
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


def _members_where(
    table: HostTable,
    ctx: PlacementContext,
    members: Sequence[str],
    hosts: Sequence[str],
    policy: str,
) -> tuple[NDArray[np.intp], NDArray[np.int64]] | None:
    """:func:`group_members` by the group's ``members`` (Nova's count: its members
    among the instances a host holds): each once, on the row of its claim or else
    of the report that lists it; this request's own instances by the rows its
    earlier ones took (the one placed now counts nowhere, as Nova lets a move's
    source keep it); and, for hard affinity, the group's ``hosts``."""
    own = set(ctx.spec.instance_uuids)
    rows = [r for m in set(members) - own if (r := ctx.locate(m)) is not None]
    rows += ctx.chosen_rows
    if policy == "affinity":
        if not rows and not hosts:
            return None  # Nova: no group host yet, any host passes
        rows += [r for r in map(table.row_of.get, hosts) if r is not None]
    elif not rows:
        return None
    return np.array(rows, dtype=np.intp), np.ones(len(rows), dtype=np.int64)


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


class _AggregateLimitFilter:
    """A host takes an instance while its count is below its limit: the smallest
    whole value of :attr:`key` in its aggregates' metadata, else the configured
    one (the :class:`~actorsched.models.SchedulerConfig` field of that name). A
    value that is not an integer anywhere among them: the configured one (Nova
    logs a warning). Nova's AggregateNumInstancesFilter and AggregateIoOpsFilter
    (the same in 18 and 34); it checks every request, as the limits apply to
    all of them."""

    name = ""
    key = ""  # the aggregate metadata key, and the SchedulerConfig field
    column = ""  # the table's count, claims included

    def applies(self, ctx: PlacementContext) -> bool:
        """Always: every request is checked (the ranking's shortcut is not taken)."""
        return True

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        configured: int = getattr(ctx.config, self.key)
        counts = table.column(self.column)
        book = ctx.aggregates
        if book is None or not book.has(self.key):
            below: BoolColumn = counts < configured
            return below
        limits = book.limits(self.key, configured)
        passed: BoolColumn = counts < limits[table.agg_set[: table.n]]
        return passed


class AggregateNumInstancesFilter(_AggregateLimitFilter):
    """Hosts running fewer instances than their aggregates' ``max_instances_per_host``
    (the smallest of them), else ``max_instances_per_host``.

    >>> AggregateNumInstancesFilter.key
    'max_instances_per_host'
    """

    name = "AggregateNumInstancesFilter"
    key = "max_instances_per_host"
    column = "num_instances"


class AggregateIoOpsFilter(_AggregateLimitFilter):
    """Hosts with fewer concurrent I/O operations than their aggregates'
    ``max_io_ops_per_host`` (the smallest of them), else ``max_io_ops_per_host``."""

    name = "AggregateIoOpsFilter"
    key = "max_io_ops_per_host"
    column = "num_io_ops"


class IsolatedHostsFilter:
    """Nova's IsolatedHostsFilter: the ``isolated_images`` go to the ``isolated_hosts``
    only; with ``restrict_isolated_hosts_to_isolated_images`` (the default) those
    hosts take those images only.

    A host is isolated when its name is in ``isolated_hosts`` (exactly, as Nova
    compares ``host_state.host``), an image when the request's ``image_id`` is in
    ``isolated_images`` (a request with no image id is of no isolated image).
    No isolated image: with the restriction, the isolated hosts take nothing,
    and every other host passes; without it every host passes. The same in
    Nova 18 and 34. While the configuration lists what can remove a host, every
    request is checked.
    """

    name = "IsolatedHostsFilter"

    def applies(self, ctx: PlacementContext) -> bool:
        """True when the configuration can remove a host (then every request is checked)."""
        config = ctx.config
        return bool(config.isolated_images) or (
            config.restrict_isolated_hosts_to_isolated_images and bool(config.isolated_hosts)
        )

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        if not self.applies(ctx):
            return None
        config = ctx.config
        restrict = config.restrict_isolated_hosts_to_isolated_images
        isolated = [r for r in map(table.row_of.get, config.isolated_hosts) if r is not None]
        if not config.isolated_images:  # (restricted, with isolated hosts: applies)
            return rows_mask(table, isolated, False)
        image = ctx.spec.image_id
        image_isolated = image is not None and image in config.isolated_images
        if image_isolated:
            return rows_mask(table, isolated, True)  # isolated hosts only, either way
        if not restrict:
            return None
        return rows_mask(table, isolated, False)


class AggregateImagePropertiesIsolation:
    """Hosts whose aggregates' metadata agree with the image's properties.

    Nova's AggregateImagePropertiesIsolation (the same in 18 and 34): for each
    metadata key of the host's aggregates (only those that start with
    ``aggregate_image_properties_isolation_namespace`` and the separator, when
    a namespace is set) that the image has as a property, the property's text
    must be one of the key's comma-separated values over those aggregates. A
    key the image does not have (or Nova's ImageMetaProps has no such field)
    restricts nothing; a host in no aggregate passes. Decided once per
    membership, for the image's properties that some aggregate has as a key.
    """

    name = "AggregateImagePropertiesIsolation"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        props = ctx.spec.image_properties
        book = ctx.aggregates
        if not props or book is None:
            return None
        config = ctx.config
        namespace = config.aggregate_image_properties_isolation_namespace
        prefix = (
            namespace + config.aggregate_image_properties_isolation_separator if namespace else ""
        )
        asked = tuple(
            sorted(
                (key, value)
                for key, value in props.items()
                if key.startswith(prefix) and book.has(key)
            )
        )
        if not asked:
            return None

        def decide(membership: int) -> bool:
            metadata = book.metadata_by_host(membership)
            return all(key not in metadata or value in metadata[key] for key, value in asked)

        return _by_membership(table, book.answers((self.name, asked), decide))


class TenantAggregateRequestFilter:
    """Nova 34's request filter ``require_tenant_aggregate`` (``[scheduler]
    limit_tenants_to_placement_aggregate``), applied before every filter.

    The project's aggregates are those with a metadata key that starts with
    ``filter_tenant_id`` whose value *is* the request's ``project_id`` (Nova's
    ``AggregateList.get_by_metadata(value=project_id)``: the whole value, not
    a comma list). When there are some, only their hosts pass (Placement's
    ``member_of`` any of them); when there are none, every host passes, or
    none with ``placement_aggregate_required_for_tenants`` (Nova's
    RequestFilterFailed, "No hosts available for tenant").
    """

    name = "require_tenant_aggregate"

    def applies(self, ctx: PlacementContext) -> bool:
        """True when some aggregate names a tenant, or one is required."""
        book = ctx.aggregates
        return ctx.config.placement_aggregate_required_for_tenants or (
            book is not None and book.has_prefix(TENANT_KEY)
        )

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        book = ctx.aggregates
        project = ctx.spec.project_id
        mine = (
            book.named(
                (self.name, project),
                lambda _, entry: any(
                    key.startswith(TENANT_KEY) and value == project
                    for key, value in entry.metadata.items()
                ),
            )
            if book is not None and project is not None and book.has_prefix(TENANT_KEY)
            else frozenset()
        )
        if not mine:
            if ctx.config.placement_aggregate_required_for_tenants:
                return np.zeros(table.n, dtype=np.bool_)
            return None
        assert book is not None

        def decide(membership: int) -> bool:
            return not mine.isdisjoint(book.memberships[membership])

        return _by_membership(table, book.answers((self.name, mine), decide))


class IsolatedAggregatesRequestFilter:
    """Nova 34's request filter ``isolate_aggregates`` (``[scheduler]
    enable_isolated_aggregate_filtering``), applied before every filter.

    An aggregate with a ``trait:X`` key of value ``required`` for a trait X
    the request does not require (``required_traits``: the flavor's and the
    image's) is isolated: its hosts do not pass (Placement's forbidden
    ``member_of``; Nova's ``get_non_matching_by_metadata_keys``).
    """

    name = "isolate_aggregates"

    def applies(self, ctx: PlacementContext) -> bool:
        """True when some aggregate has a ``trait:`` key."""
        book = ctx.aggregates
        return book is not None and book.has_prefix(TRAIT_KEY_PREFIX)

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        book = ctx.aggregates
        if book is None or not book.has_prefix(TRAIT_KEY_PREFIX):
            return None
        wanted = frozenset(ctx.spec.required_traits)
        isolated = book.named(
            (self.name, wanted),
            lambda _, entry: any(
                key.startswith(TRAIT_KEY_PREFIX)
                and value == "required"
                and key[len(TRAIT_KEY_PREFIX) :] not in wanted
                for key, value in entry.metadata.items()
            ),
        )
        if not isolated:
            return None

        def decide(membership: int) -> bool:
            return isolated.isdisjoint(book.memberships[membership])

        return _by_membership(table, book.answers((self.name, isolated), decide))


class ComputeStatusRequestFilter:
    """Nova 34's request filter ``compute_status_filter``, always on: a host whose
    compute service is disabled takes nothing (Placement is asked to forbid its
    ``COMPUTE_STATUS_DISABLED`` trait), whatever ``enabled_filters`` says. Built
    only where ComputeFilter is not enabled, which removes those hosts already."""

    name = "compute_status_filter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        enabled: BoolColumn = table.enabled[: table.n].copy()
        return enabled


def request_filters(config: SchedulerConfig) -> list[HostFilter]:
    """Nova 34's request filters that ``config`` turns on, in Nova's order (they run
    before the enabled filters; the zone's is AvailabilityZoneFilter's rule)."""
    found: list[HostFilter] = []
    if config.nova_release == 34 and "ComputeFilter" not in config.enabled_filters:
        found.append(ComputeStatusRequestFilter())
    if config.limit_tenants_to_placement_aggregate:
        found.append(TenantAggregateRequestFilter())
    if config.enable_isolated_aggregate_filtering:
        found.append(IsolatedAggregatesRequestFilter())
    return found


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
        AggregateNumInstancesFilter,
        AggregateIoOpsFilter,
        IsolatedHostsFilter,
        AggregateImagePropertiesIsolation,
        JsonFilter,
        MetricsFilter,
    )
}
