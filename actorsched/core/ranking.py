"""Ranking: which passing hosts are best for one instance, and why none passed.

Rules this module keeps (everything about filtering and weighing lives here;
nothing here changes host state):

* A host passes when it passes ``row_ok`` (the row-local filters, kept
  current by the table on every row change), fits the resources asked for,
  and passes every per-request filter. Each filter's rule lives in
  :mod:`.filters`; the fast paths below only decide *which rows to ask*,
  never a second version of a rule: the resource fit is the table's
  headroom (the filters' own column) against the request.
* Each weigher's values are normalized as ``nova/weights.py`` does, over
  the passing hosts, times its multiplier. A weigher's ``minval`` (its
  *floor*: 0 for the RAM, CPU, Disk and IoOps weighers) by
  ``SchedulerConfig.nova_release``: Nova 18 normalizes between min(floor,
  lowest value) and the highest value; Nova 34 first raises every value
  below the floor to it (``weigh_objects``) and normalizes from it
  (``normalize(minval=...)``, :func:`_span`, :func:`_clamped`). Without a
  minval both normalize from the lowest value. The built-in column
  weighers are summed in one matrix product, the others added one by one;
  under Nova 34 a column with a value below its floor (an over-committed
  host) is taken out of the product and added clamped. A multiplier is the
  same for every host unless an aggregate overrides it for its hosts
  (``weighers.row_multipliers``); only then is it an array per row.
* The fast paths (the shortcut from kept extremes, the gathered copy of few
  passing rows) give exactly the ranking of the full mask; the knobs that
  choose between them are constructor arguments, with their defaults here.
* Ties go to the lowest row.
* A later instance of a multi-create, under Nova 34 (``nova_release`` 34,
  all three resource filters on): Nova's ``SchedulerManager._schedule``
  filters and weighs, for every instance, the hosts Placement named for one
  instance before any was claimed, and claims on the first of them, in
  weighed order, that still has room. So the hosts an earlier instance of
  the request filled stay in the normalization (their figures after the
  claims, clamped to the floors), but are never picked: :meth:`Ranker.top`
  takes that path (:meth:`Ranker._weighing_mask`) only once a row is chosen,
  and the choice is made when the Ranker is built, so Nova 18's path does
  not pay for it.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, cast

import numpy as np
from numpy.typing import NDArray

from ..errors import NoValidHost
from ..models import SchedulerConfig
from .filters import (
    AGGREGATE_RATIO_FILTERS,
    BUILTIN_FILTER_CLASSES,
    RESOURCE_RULES,
    AggregateIoOpsFilter,
    AggregateMultiTenancyIsolation,
    AggregateNumInstancesFilter,
    AggregateTypeAffinityFilter,
    AvailabilityZoneFilter,
    ComputeFilter,
    ComputeStatusRequestFilter,
    CoreFilter,
    DiskFilter,
    ForbiddenTraitsFilter,
    HostFilter,
    IoOpsFilter,
    IsolatedAggregatesRequestFilter,
    IsolatedHostsFilter,
    NumInstancesFilter,
    PlacementContext,
    RamFilter,
    RequiredTraitsFilter,
    ResourceFilter,
    TenantAggregateRequestFilter,
    rows_mask,
)
from .table import HEADROOM_COLUMNS, OUT_OF_REACH, WEIGH_COLUMNS, HostTable
from .weighers import (
    ColumnWeigher,
    FactsWeigher,
    HostWeigher,
    ImagePropertiesWeigher,
    SoftGroupWeigher,
    builtin_weighers,
    multiplier_key,
    row_multipliers,
    weigher_ceiling,
    weigher_floor,
)

__all__ = [
    "COMPRESS_BELOW",
    "ROW_LOCAL_FILTERS",
    "SHORTCUT_MAX_MISFITS",
    "SHORTCUT_MAX_WANT",
    "Ranker",
    "RowMultipliers",
    "WeighLayout",
    "weigh_layout",
]

# Filters the table answers per row (``row_ok``), kept current on every row change.
ROW_LOCAL_FILTERS = (ComputeFilter, NumInstancesFilter, IoOpsFilter)
# the resource filters: their rule is the headroom (the Aggregate* ones too:
# the aggregate's ratio is in the row's own ratio)
_RESOURCE_FILTERS = (RamFilter, CoreFilter, DiskFilter, *AGGREGATE_RATIO_FILTERS)
# Filters that check every request (not only one naming a project, a flavor or
# an image) once some aggregate has their key, or always (the per-aggregate
# limits), or while the configuration isolates hosts: while one applies, the
# shortcut for a request of resources only is not taken.
_GUARD_FILTERS = (
    AggregateMultiTenancyIsolation,
    AggregateTypeAffinityFilter,
    AggregateNumInstancesFilter,
    AggregateIoOpsFilter,
    IsolatedHostsFilter,
    TenantAggregateRequestFilter,
    IsolatedAggregatesRequestFilter,
)
# What a request asks of each headroom row, in the table's headroom order: the
# resource filters' own rule (filters.RESOURCE_RULES), so the fused check
# below is that rule over all three rows at once, not a copy of it.
_HEADROOM_ROWS = tuple(row for row, _ in RESOURCE_RULES)
assert _HEADROOM_ROWS == (0, 1, 2), "the fused check reads headroom rows 0, 1 and 2"
_ASKED = operator.attrgetter(*(field for _, field in RESOURCE_RULES))
_RAM_LEFT, _CPU_LEFT, _DISK_LEFT = (operator.itemgetter(row) for row in _HEADROOM_ROWS)
# The other built-in filters return None (pass every host) for a request
# without a zone, traits, server group or host hints.
_HINT_FILTERS = frozenset(BUILTIN_FILTER_CLASSES.values()) - {
    *ROW_LOCAL_FILTERS,
    *_RESOURCE_FILTERS,
    *_GUARD_FILTERS,
}

# What a forced host is still checked for (the resource filters' rule, whatever
# filters are enabled): room for the request, as Placement's claim checks it.
_ROOM_FILTERS = (RamFilter(), CoreFilter(), DiskFilter())
# ... and under Nova 34's rules (nova_release 34) what Placement's query checks
# of every candidate, a forced one too: the zone's aggregates, the required and
# forbidden traits, and a disabled compute (force_hosts skips Nova's filters, not
# its allocation candidates)
_PLACEMENT_CHECKS = (
    AvailabilityZoneFilter(),
    RequiredTraitsFilter(),
    ForbiddenTraitsFilter(),
    ComputeStatusRequestFilter(),
)

# -- tuning knobs (same rankings whatever their values; only the speed differs) --
# Below this share of passing rows, weigh a gathered copy of just those rows.
COMPRESS_BELOW = 0.5
# The shortcut (and the argmax loops) are for short lists: past this many
# rows wanted, sort instead.
SHORTCUT_MAX_WANT = 16
# Top rows the shortcut may find that do not fit before it gives up and
# builds the mask (a nearly full cluster).
SHORTCUT_MAX_MISFITS = 16


@dataclass(frozen=True, slots=True)
class WeighLayout:
    """How the weighers map onto the table: its weigher rows, their order and floors,
    and which release's rule the floors follow."""

    order: tuple[str, ...]  # WEIGH_COLUMNS, the ones in use first
    multipliers: tuple[float, ...]  # summed per column in use, in order
    floors: tuple[float, ...]  # each column in use's floor (minval)
    others: tuple[HostWeigher, ...]  # weighed one by one
    other_floors: tuple[float, ...]
    # the weighers summed in each column in use (their multipliers are the sum)
    column_weighers: tuple[tuple[HostWeigher, ...], ...] = ()
    # weighers of multiplier 0 that an aggregate's multiplier_key may turn on
    # for its hosts, weighed one by one when one does
    dormant: tuple[HostWeigher, ...] = ()
    dormant_floors: tuple[float, ...] = ()
    # SchedulerConfig.nova_release: 34 clamps a value below its floor to the floor
    nova_release: Literal[18, 34] = 18


def weigh_layout(config: SchedulerConfig, extra: Sequence[HostWeigher]) -> WeighLayout:
    """The built-in weighers of ``config`` and ``extra``, laid out for one matrix product.

    Weighers of one column with one floor share its matrix row (their
    multipliers add up); a weigher with another floor, or of no column, is
    weighed on its own. A multiplier of 0 drops the weigher, unless it has
    a ``multiplier_key`` (an aggregate may give its hosts another
    multiplier): it then joins its column's row if that row is in use, and
    is dormant otherwise.
    """
    weighers = [*builtin_weighers(config), *extra]
    columns: dict[str, list[HostWeigher]] = {c: [] for c in WEIGH_COLUMNS}
    floors: dict[str, float] = {}
    others: list[HostWeigher] = []
    for w in weighers:
        if w.multiplier == 0:
            continue
        floor = weigher_floor(w)
        if (
            isinstance(w, ColumnWeigher)
            and weigher_ceiling(w) is None  # a maxval: weighed on its own
            and w.column in columns
            and floors.setdefault(w.column, floor) == floor
        ):
            columns[w.column].append(w)
        else:
            others.append(w)
    dormant: list[HostWeigher] = []
    for w in weighers:
        if w.multiplier != 0 or multiplier_key(w) is None:
            continue
        if (
            isinstance(w, ColumnWeigher)
            and weigher_ceiling(w) is None
            and columns.get(w.column)
            and floors[w.column] == weigher_floor(w)
        ):
            columns[w.column].append(w)
        else:
            dormant.append(w)
    order = tuple(sorted(WEIGH_COLUMNS, key=lambda c: not columns[c]))
    in_use = [c for c in order if columns[c]]
    return WeighLayout(
        order=order,
        multipliers=tuple(sum(w.multiplier for w in columns[c]) for c in in_use),
        floors=tuple(floors[c] for c in in_use),
        others=tuple(others),
        other_floors=tuple(weigher_floor(w) for w in others),
        column_weighers=tuple(tuple(columns[c]) for c in in_use),
        dormant=tuple(dormant),
        dormant_floors=tuple(weigher_floor(w) for w in dormant),
        nova_release=config.nova_release,
    )


# A weigher's multiplier: one for every row, or one per row (an aggregate's)
Multiplier = float | NDArray[np.float64]
# a weigher weighed on its own: (multiplier, values, floor, ceiling: its maxval or None)
_Raw = tuple[Multiplier, NDArray[np.float64], float, float | None]


@dataclass(frozen=True, slots=True)
class RowMultipliers:
    """The multipliers of one placement when some aggregate overrides one
    (:func:`~actorsched.core.weighers.row_multipliers`): per column in use,
    its weighers' sum per row (None: the layout's, every row's); per other
    weigher, its own; and the dormant weighers an aggregate turns on, with
    theirs and their floors."""

    columns: list[NDArray[np.float64] | None]
    others: list[Multiplier]
    dormant: list[tuple[HostWeigher, NDArray[np.float64], float]]


# weigher_floor of a weigher with no minval: no value is below it, none is clamped
_NO_FLOOR = np.inf


def _span(lowest: float, highest: float, floor: float) -> tuple[float, float]:
    """``(lo, hi)`` of Nova 34's ``nova/weights.py`` ``normalize`` for one weigher
    whose raw values over the passing hosts range from ``lowest`` to ``highest``
    (Nova 18's is ``(min(floor, lowest), highest)``).

    Without a minval (``floor`` is +inf) they are the lowest and highest
    value. With one, every value below it counts as the minval
    (``weigh_objects``: ``max(weight, minval)``, see :func:`_clamped`) and
    ``normalize`` is given the minval as its low end: ``lo`` is the floor,
    ``hi`` the highest value or the floor if that is higher. Every weight is
    0 when ``hi <= lo`` (Nova: ``minval == maxval``).

    >>> _span(-2048.0, 2048.0, 0.0), _span(-5.0, -1.0, 0.0), _span(2.0, 6.0, float("inf"))
    ((0.0, 2048.0), (0.0, 0.0), (2.0, 6.0))
    """
    if floor == _NO_FLOOR:
        return lowest, highest
    return floor, (highest if highest > floor else floor)


def _clamped(values: NDArray[np.float64], floor: float) -> NDArray[np.float64]:
    """``values`` with every value below ``floor`` raised to it (Nova's
    ``weigh_objects``: ``max(weight, minval)``); ``values`` itself with no floor."""
    return values if floor == _NO_FLOOR else np.maximum(values, floor)


def _weighted(
    multiplier: Multiplier, values: NDArray[np.float64], lo: float, hi: float
) -> NDArray[np.float64]:
    """One weigher's weights, ``multiplier x (values - lo) / (hi - lo)`` (hi > lo),
    up to a constant: a multiplier the same for every row drops the ``- lo``
    (it moves every score alike), a multiplier per row keeps it."""
    if isinstance(multiplier, np.ndarray):
        return multiplier * ((values - lo) / (hi - lo))
    return (multiplier / (hi - lo)) * values


def _weighed_alone(
    multiplier: Multiplier,
    values: NDArray[np.float64],
    lowest: float,
    highest: float,
    floor: float,
    clamps: bool,
    ceiling: float | None = None,
) -> NDArray[np.float64] | None:
    """The weights of a weigher weighed on its own (not a matrix column) over
    ``values``, whose lowest and highest over the passing rows are given; None
    when all are 0. Nova 18: from min(floor, lowest); Nova 34 (``clamps``):
    :func:`_span` over the :func:`_clamped` values. The two differ only when a
    value is below a floor. A weigher's ``maxval`` (``ceiling``) is the top of
    its range: Nova 34 clamps a value above it to it and normalizes up to it
    (``weigh_objects``, ``normalize(maxval=...)``); Nova 18 raised it to the
    highest value, clamping none."""
    if ceiling is not None:
        if clamps:
            values = np.minimum(values, ceiling)
            lowest = min(lowest, ceiling)
            highest = ceiling
        else:
            highest = max(highest, ceiling)
    lo = floor if floor < lowest else lowest
    hi = highest
    if lo < floor < _NO_FLOOR and clamps:
        lo, hi = _span(lowest, highest, floor)
        values = _clamped(values, floor)
    if hi <= lo:
        return None
    return _weighted(multiplier, values, lo, hi)


def _of_rows(multiplier: Multiplier, rows: NDArray[np.intp]) -> Multiplier:
    """``multiplier`` for the gathered ``rows`` only."""
    return multiplier[rows] if isinstance(multiplier, np.ndarray) else multiplier


class _Guard(Protocol):
    """What may keep a request of resources only from the ranking's shortcut."""

    def applies(self, ctx: PlacementContext) -> bool: ...


@dataclass(frozen=True, slots=True)
class _WeighsSomething:
    """A weigher the shortcut skips as a guard: it applies when it weighs."""

    weigher: HostWeigher
    table: HostTable

    def applies(self, ctx: PlacementContext) -> bool:
        return self.weigher.weigh_all(self.table, ctx) is not None


class Ranker:
    """Filters and weighers over one host table: :meth:`top` and :meth:`no_valid_host`."""

    def __init__(
        self,
        table: HostTable,
        filters: Sequence[HostFilter],
        layout: WeighLayout,
        *,
        compress_below: float = COMPRESS_BELOW,
        shortcut: bool = True,
        shortcut_max_want: int = SHORTCUT_MAX_WANT,
        shortcut_max_misfits: int = SHORTCUT_MAX_MISFITS,
    ) -> None:
        self.table = table
        self.filters = list(filters)
        self._matrix_multipliers = list(layout.multipliers)
        self._other_weighers = list(layout.others)
        self._other_floors = list(layout.other_floors)
        # each other weigher with its floor and ceiling, as its raws carry them
        self._others = [
            (w, floor, weigher_ceiling(w))
            for w, floor in zip(self._other_weighers, self._other_floors, strict=True)
        ]
        self._column_weighers = list(layout.column_weighers)
        # Nova 34 (nova_release): a value below its weigher's floor counts as the floor;
        # the table keeps whether one is (below_floor) and whom the lows bind by it
        self._clamps = layout.nova_release == 34
        table.adopt_nova_release(layout.nova_release)
        # the matrix columns whose weighers have a minval, when a value below it is
        # clamped (Nova 34; none under Nova 18)
        self._floored = [
            j for j, floor in enumerate(layout.floors) if floor != _NO_FLOOR and self._clamps
        ]
        # the columns' min(floor, lowest) when no value is below a floor, if every
        # column has one: one list comparison says so (None: look at each column)
        self._floor_list: list[float] | None = (
            list(layout.floors) if len(self._floored) == len(layout.floors) else None
        )
        self._dormant = list(zip(layout.dormant, layout.dormant_floors, strict=True))
        # every aggregate metadata key that may override a multiplier: while no
        # aggregate has one, a placement never looks at them again
        keys = {
            multiplier_key(w)
            for w in (
                *(w for ws in layout.column_weighers for w in ws),
                *layout.others,
                *layout.dormant,
            )
        }
        self._multiplier_keys = frozenset(key for key in keys if key is not None)
        # 0 never gathers, above 1 always does
        self.compress_below = compress_below
        # With no request-specific filter or weigher in play, find the best
        # rows from the kept weigher extremes and one scoring pass, checking
        # only the rows it looks at against the resources (same result as the
        # full mask); False always builds the mask.
        self.shortcut = shortcut
        self.shortcut_max_want = shortcut_max_want
        self.shortcut_max_misfits = shortcut_max_misfits
        self._request_filters = [f for f in self.filters if not isinstance(f, ROW_LOCAL_FILTERS)]
        # With all three resource filters on, they are one comparison over
        # the table's headroom array instead of three.
        columns = {
            cast(ResourceFilter, f).column for f in self.filters if type(f) in _RESOURCE_FILTERS
        }
        self._fused_resources = columns == {RamFilter.column, CoreFilter.column, DiskFilter.column}
        if self._fused_resources:
            self._request_filters = [
                f for f in self._request_filters if type(f) not in _RESOURCE_FILTERS
            ]
        # Nova 34's multi-create (see the module's rules): chosen once, here, so the
        # Nova 18 path is the plain method
        self._weighs_filled = self._clamps and self._fused_resources
        if self._weighs_filled:
            self.top = self._top_nova34  # type: ignore[method-assign]
        # When every per-request filter and weigher left is a built-in that says
        # nothing (returns None) for a request with no zone, traits, group, host
        # hints or image properties, such a request need not even call them.
        self._guards: list[_Guard] = [
            f for f in self._request_filters if isinstance(f, _GUARD_FILTERS)
        ]
        # a weigher of the facts (HypervisorVersionWeigher, BuildFailureWeigher) says
        # nothing while every host has one figure (then the shortcut answers): a guard
        self._guards += [
            _WeighsSomething(w, table) for w in self._other_weighers if isinstance(w, FactsWeigher)
        ]
        # the weighers that may fail a request over the hosts weighed (MetricsWeigher's
        # required metrics), whatever their multiplier: the shortcut, which builds no
        # set of passing hosts, is not taken while one is built
        self._weighed_checks = [
            check
            for w in (*layout.others, *layout.dormant)
            if (check := getattr(w, "check_weighed", None)) is not None
        ]
        self._hints_only = (
            all(
                type(f) in _HINT_FILTERS or type(f) in _GUARD_FILTERS for f in self._request_filters
            )
            and all(
                isinstance(w, SoftGroupWeigher | FactsWeigher | ImagePropertiesWeigher)
                for w in self._other_weighers
            )
            and not self._weighed_checks
        )

    @property
    def fused_resources(self) -> bool:
        """All three resource filters are on: a host without the headroom for one
        instance of a request is never picked for it (waiting requests read it)."""
        return self._fused_resources

    def _ignored(self, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        """``ignore_hosts``: False for each host named there, ignoring case (as Nova)."""
        return self._named(ctx.spec.ignore_hosts, self.table.rows_named, False)

    def _named(
        self, names: Sequence[str], rows_of: Callable[[str], list[int]], value: bool
    ) -> NDArray[np.bool_] | None:
        """``value`` for the rows ``rows_of`` finds for each of ``names``, the
        opposite elsewhere; None (no say) when ``names`` is empty."""
        if not names:
            return None
        return rows_mask(self.table, [row for name in names for row in rows_of(name)], value)

    def _destination(self, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        """``requested_destination``: True for the host and/or node it names (exact
        names, as Nova's host manager compares them)."""
        destination = ctx.spec.requested_destination
        if destination is None:
            return None
        table = self.table
        rows: set[int] | None = None
        if destination.host is not None:
            row = table.row_of.get(destination.host)
            rows = set() if row is None else {row}
        if destination.node is not None:
            on_node = set(table.rows_of_node(destination.node))
            rows = on_node if rows is None else rows & on_node
        return rows_mask(table, sorted(rows or ()), True)

    def _forced_hosts(self, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        """``force_hosts``: True for each host named there, ignoring case (as Nova)."""
        return self._named(ctx.spec.force_hosts, self.table.rows_named, True)

    def _forced_nodes(self, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        """``force_nodes``: True for each row on a node named there (exact, as Nova)."""
        return self._named(ctx.spec.force_nodes, self.table.rows_of_node, True)

    def _forced(self, ctx: PlacementContext) -> NDArray[np.bool_]:
        """The rows a forcing request may take: those it names (:meth:`_forcing`)
        and, in place of every filter, room for the resources asked (the
        resource filters' rule, whichever filters are enabled: a forced host is
        never over-committed)."""
        table = self.table
        mask = self._forcing(ctx)
        for room in _ROOM_FILTERS:
            fits = room.filter_all(table, ctx)
            assert fits is not None  # a resource filter always answers
            mask &= fits
        return mask

    def _forced_checks(self) -> tuple[HostFilter, ...]:
        """The filters a forced host still passes besides room: Placement's
        (:data:`_PLACEMENT_CHECKS`) under Nova 34's rules, none under Nova 18's."""
        return _PLACEMENT_CHECKS if self._clamps else ()

    def _forcing(self, ctx: PlacementContext) -> NDArray[np.bool_]:
        """The live rows a forcing request names, by Nova's steps (the requested
        destination, then ignore_hosts, then force_hosts and force_nodes, a row
        matching both when both are given); no filter runs."""
        table = self.table
        mask = table.active[: table.n].copy()
        for step in (
            self._destination(ctx),
            self._ignored(ctx),
            self._forced_hosts(ctx),
            self._forced_nodes(ctx),
            *(f.filter_all(table, ctx) for f in self._forced_checks()),
        ):
            if step is not None:
                mask &= step
        return mask

    def _masks(self, ctx: PlacementContext, room: bool = True) -> list[NDArray[np.bool_]]:
        """The per-request filters' masks (but the resource filters' when not
        ``room``), ignore_hosts' and requested_destination's."""
        table = self.table
        masks = [
            m
            for f in self._request_filters
            if (room or type(f) not in _RESOURCE_FILTERS)
            and (m := f.filter_all(table, ctx)) is not None
        ]
        ignored = self._ignored(ctx)
        if ignored is not None:
            masks.append(ignored)
        destination = self._destination(ctx)
        if destination is not None:
            masks.append(destination)
        return masks

    def passing_but_room(self, ctx: PlacementContext) -> NDArray[np.bool_]:
        """Rows that pass every filter for ``ctx`` but the ones room decides (the
        resource filters, and the instance and I/O counts of the row-local
        ones); for a forced request, the live rows it names (as
        :meth:`_forced`): the hosts where releasing claims could make a request fit
        (preemption asks it; :meth:`room_rules` and ``HostTable.room_after``
        then judge the room)."""
        if ctx.spec.force_hosts or ctx.spec.force_nodes:
            return self._forcing(ctx)  # a forced host skips every filter, ComputeFilter's too
        table = self.table
        n = table.n
        mask: NDArray[np.bool_] = table.active[:n] & ~table.stale[:n]
        if table.check_enabled:
            mask &= table.enabled[:n]
        for passed in self._masks(ctx, room=False):
            mask &= passed
        return mask

    def room_rules(self, ctx: PlacementContext) -> list[tuple[int, int]]:
        """(headroom row, amount asked) of each resource the placement of ``ctx``
        checks: the enabled resource filters', all three for a forced host."""
        spec = ctx.spec
        if spec.force_hosts or spec.force_nodes:
            filters: Sequence[HostFilter] = _ROOM_FILTERS
        else:
            filters = [f for f in self.filters if type(f) in _RESOURCE_FILTERS]
        rows = {HEADROOM_COLUMNS.index(cast(ResourceFilter, f).column) for f in filters}
        return [(row, getattr(spec, field)) for row, field in RESOURCE_RULES if row in rows]

    def _row_multipliers(self, ctx: PlacementContext) -> RowMultipliers | None:
        """The multipliers of this placement when an aggregate overrides some
        weigher's for its hosts; None (the layout's) when none does."""
        book = ctx.aggregates
        if book is None or not book.has_any(self._multiplier_keys):
            return None
        table = self.table
        columns: list[NDArray[np.float64] | None] = []
        for weighers in self._column_weighers:
            each = [row_multipliers(w, table, book) for w in weighers]
            if any(isinstance(m, np.ndarray) for m in each):
                total = np.zeros(table.n, dtype=np.float64)
                for m in each:
                    total += m
                columns.append(total)
            else:
                columns.append(None)
        dormant = [
            (w, m, floor)
            for w, floor in self._dormant
            if isinstance(m := row_multipliers(w, table, book), np.ndarray)
        ]
        others = [row_multipliers(w, table, book) for w in self._other_weighers]
        return RowMultipliers(columns, others, dormant)

    def _raws(self, ctx: PlacementContext, per_row: RowMultipliers | None = None) -> list[_Raw]:
        """(multiplier, values, floor) of each weigher weighed on its own that has a
        say: the others, and the dormant ones an aggregate turns on."""
        table = self.table
        if per_row is None:
            return [
                (w.multiplier, raw, floor, ceiling)
                for w, floor, ceiling in self._others
                if (raw := w.weigh_all(table, ctx)) is not None
            ]
        raws: list[_Raw] = [
            (m, raw, floor, ceiling)
            for (w, floor, ceiling), m in zip(self._others, per_row.others, strict=True)
            if (raw := w.weigh_all(table, ctx)) is not None
        ]
        raws += [
            (m, raw, floor, weigher_ceiling(w))
            for w, m, floor in per_row.dormant
            if (raw := w.weigh_all(table, ctx)) is not None
        ]
        return raws

    def top(self, ctx: PlacementContext, want: int, resources_only: bool) -> list[int]:
        """The ``want`` best passing rows (fewer if fewer pass), best first.

        ``resources_only`` is :func:`~actorsched.core.ledger.asks_resources_only`
        of the request (worked out once per request).
        """
        table = self.table
        per_row = None if ctx.aggregates is None else self._row_multipliers(ctx)
        if (
            self._hints_only
            and self.shortcut
            and table.n
            and resources_only
            and not (self._guards and any(g.applies(ctx) for g in self._guards))
        ):
            if per_row is None:
                top = self._top_unfiltered(ctx, want, None)
                return top if top is not None else self._ranked(self._passing(ctx, ()), (), want)
            # the dormant weighers an aggregate turns on are weighed over the mask
            others = self._raws(ctx, per_row)
            top = None if others else self._top_unfiltered(ctx, want, per_row)
            if top is not None:
                return top
            return self._ranked(self._passing(ctx, ()), others, want, per_row)
        asked = ctx.spec.__dict__  # as asks_resources_only: faster than pydantic's attributes
        if asked["force_hosts"] or asked["force_nodes"]:
            rows = np.flatnonzero(self._forced(ctx))
            if not rows.size:
                return []
            return self._ranked_among(rows, self._raws(ctx, per_row), want, per_row)
        # _masks and _raws, written out: this runs for every filtered request
        masks = [m for f in self._request_filters if (m := f.filter_all(table, ctx)) is not None]
        ignored = self._ignored(ctx)
        if ignored is not None:
            masks.append(ignored)
        destination = None if asked["requested_destination"] is None else self._destination(ctx)
        if destination is not None:
            masks.append(destination)
        raws: list[_Raw]
        if per_row is None:
            raws = [
                (w.multiplier, raw, floor, ceiling)
                for w, floor, ceiling in self._others
                if (raw := w.weigh_all(table, ctx)) is not None
            ]
        else:
            raws = self._raws(ctx, per_row)
        if not masks and not raws and self.shortcut and table.n and not self._weighed_checks:
            top = self._top_unfiltered(ctx, want, per_row)
            if top is not None:
                return top
        return self._ranked(self._passing(ctx, masks), raws, want, per_row)

    def _top_nova34(self, ctx: PlacementContext, want: int, resources_only: bool) -> list[int]:
        """:meth:`top` under Nova 34: once an instance of the request is placed, the
        later ones are weighed over :meth:`_weighing_mask` and picked among the
        rows of it that have room (:meth:`_top_after_claims`)."""
        if ctx.chosen_rows and not (ctx.spec.force_hosts or ctx.spec.force_nodes):
            return self._top_after_claims(ctx, want, None)
        return Ranker.top(self, ctx, want, resources_only)

    def _weighing_mask(self, ctx: PlacementContext) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """The rows a later instance of a multi-create is weighed over under Nova 34,
        and those of them it may take (the rows with room for it).

        Nova weighs Placement's candidates for one instance (computed before the
        first claim) that pass every filter now: the rows that fit now and the
        rows chosen for earlier instances (each fitted when it was chosen, so
        before the first claim too; another row that fits now fitted then), that
        pass the row-local filters and the per-request ones now. Nova filters
        the hosts the previous instance's filters passed, so a host a filter
        removed stays removed; it is the same set with the built-in filters: a
        row's figures change only when an instance is placed on it, and it
        passed every filter then; a group's members only grow. (A plug-in
        filter whose answer for a row comes back without such a change would
        see the row again here.)
        """
        table = self.table
        n = table.n
        want = np.array([[asked] for asked in _ASKED(ctx.spec)], dtype=np.float64)
        room = table.headroom[:, :n] >= want
        fits = room[0] & room[1] & room[2]
        candidates = fits.copy()
        candidates[np.asarray(ctx.chosen_rows, dtype=np.intp)] = True
        weighed: NDArray[np.bool_] = (table.base_penalty[:n] == 0.0) & candidates
        for passed in self._masks(ctx):
            weighed &= passed
        return weighed, weighed & fits

    def _top_after_claims(
        self, ctx: PlacementContext, want: int, rng: random.Random | None
    ) -> list[int]:
        """The ``want`` best rows with room for a later instance of a multi-create
        (Nova 34), normalized over :meth:`_weighing_mask`; with ``rng``, the rows
        of equal best weight in random order (as :meth:`top_shuffled`)."""
        weighed, takes = self._weighing_mask(ctx)
        rows = np.flatnonzero(weighed)
        open_rows = takes[rows]
        if not open_rows.any():
            return []
        per_row = None if ctx.aggregates is None else self._row_multipliers(ctx)
        raws = self._raws(ctx, per_row)
        if rng is None:
            return self._ranked_among(rows, raws, want, per_row, open_rows)
        scores = self._scores_among(rows, raws, per_row, exact=True)
        scores[~open_rows] = -np.inf
        return self._shuffled_best(rows, scores, want, rng)

    def top_shuffled(
        self, ctx: PlacementContext, want: int, resources_only: bool, rng: random.Random
    ) -> list[int]:
        """:meth:`top` with the hosts of equal best weight in random order
        (``shuffle_best_same_weighed_hosts``, as Nova Rocky's filter scheduler).

        Every passing row is scored (no shortcut: the tie may be of thousands
        of hosts), with elementwise sums so that hosts of equal figures score
        exactly equal. The ``want`` rows are a random sample of the tied best,
        then (when fewer tie) the next best in order, ties to the lowest row.
        """
        spec = ctx.spec
        forcing = spec.force_hosts or spec.force_nodes
        if self._weighs_filled and ctx.chosen_rows and not forcing:
            return self._top_after_claims(ctx, want, rng)  # Nova 34's multi-create
        mask = self._forced(ctx) if forcing else self._passing(ctx, self._masks(ctx))
        rows = np.flatnonzero(mask)
        if not rows.size:
            return []
        per_row = None if ctx.aggregates is None else self._row_multipliers(ctx)
        scores = self._scores_among(rows, self._raws(ctx, per_row), per_row, exact=True)
        return self._shuffled_best(rows, scores, want, rng)

    @staticmethod
    def _shuffled_best(
        rows: NDArray[np.intp], scores: NDArray[np.float64], want: int, rng: random.Random
    ) -> list[int]:
        """The ``want`` best of ``rows`` by ``scores`` (-inf: never), the tied best in
        random order, then the next best, ties to the lowest row."""
        tied = np.flatnonzero(scores == scores.max()).tolist()
        picked = rng.sample(tied, min(want, len(tied))) if len(tied) > 1 else tied
        top = [int(rows[i]) for i in picked]
        if len(top) < want and rows.size > len(tied):
            scores[tied] = -np.inf
            order = np.lexsort((rows, -scores))[: want - len(top)]
            top += [int(rows[i]) for i in order if scores[i] != -np.inf]
        return top

    def _top_unfiltered(
        self, ctx: PlacementContext, want: int, per_row: RowMultipliers | None
    ) -> list[int] | None:
        """:meth:`_ranked` for a request with no request-specific filter, or None.

        The passing rows are then those that pass ``row_ok`` and fit. Each
        weigher's highest value over the ``row_ok`` rows (kept by the table)
        is its highest over the passing rows whenever that row fits; its
        lowest, min(floor, lowest value), likewise when it is below the floor
        and is the floor otherwise (Nova 18), or, under Nova 34, for a weigher
        with no floor only (one with a floor normalizes from it, whatever the
        values: :func:`_span`). The best scores among the ``row_ok`` rows are
        the best passing ones once the rows that do not fit are skipped.
        So only the rows looked at are checked; None (build the mask
        instead) when a bounding row does not fit or too many top rows do not.
        A multiplier per row (``per_row``, an aggregate's) changes only the
        scores, not which rows bound the normalization.
        """
        table = self.table
        n = table.n
        spec = ctx.spec
        ram, cpu, disk = _ASKED(spec)
        fused = self._fused_resources
        if want > self.shortcut_max_want:
            return None
        multipliers = self._matrix_multipliers
        if multipliers:
            k = len(multipliers)
            _, values, figures = table.extremes()
            if figures[0][3] != 0.0:  # its base penalty: no row passes row_ok
                return []
            if fused and (
                min(map(_RAM_LEFT, figures)) < ram
                or min(map(_CPU_LEFT, figures)) < cpu
                or min(map(_DISK_LEFT, figures)) < disk
            ):
                return None  # a bounding row does not fit: it may not bound the passing ones
            # Nova 18's lo is each column's min(floor, lowest); Nova 34's is too, unless
            # a value is below a floor (below_floor, never True under Nova 18)
            if per_row is None and not table.below_floor:  # the common case
                coefs = [-1.0]  # the base penalty row
                coefs += [
                    m / (hi - lo) if hi > lo else 0.0
                    for m, hi, lo in zip(multipliers, values[:k], values[k:], strict=True)
                ]
                scores = np.array(coefs) @ table.score_matrix[:, :n]
            else:
                floors = table.floors
                his = values[:k]
                los = values[k:]
                below = [j for j in self._floored if los[j] < floors[j]]
                if below:
                    spans = list(map(_span, los, his, floors))
                    los = [lo for lo, _ in spans]
                    his = [hi for _, hi in spans]
                scores = self._scored(his, los, below, per_row)
        else:
            scores = -table.base_penalty[:n]
        derived = table.derived
        top: list[int] = []
        taken: set[int] = set()
        misfits = 0
        while len(top) < want:
            best = int(scores.argmax())
            if best in taken:
                break  # every row is taken (their scores are all -inf)
            ram_left, cpu_left, disk_left, penalty = derived[:4, best].tolist()
            if penalty != 0.0:
                break  # every row left fails row_ok
            taken.add(best)
            scores[best] = -np.inf
            if fused and (ram_left < ram or cpu_left < cpu or disk_left < disk):
                misfits += 1
                if misfits > self.shortcut_max_misfits:
                    return None  # a nearly full cluster: the mask is cheaper
                continue
            top.append(best)
        return top

    def _passing(
        self, ctx: PlacementContext, masks: Sequence[NDArray[np.bool_]]
    ) -> NDArray[np.bool_]:
        """Rows that pass every filter: row_ok, the resources, and ``masks``."""
        table = self.table
        n = table.n
        mask: NDArray[np.bool_] = table.base_penalty[:n] == 0.0  # row_ok
        if self._fused_resources:
            spec = ctx.spec
            want = np.array([[asked] for asked in _ASKED(spec)], dtype=np.float64)
            fits = table.headroom[:, :n] >= want
            mask &= fits[0]
            mask &= fits[1]
            mask &= fits[2]
        for passed in masks:
            mask &= passed
        return mask

    def _check_weighed(self, weighed: NDArray[np.bool_] | NDArray[np.intp]) -> None:
        """The weighers' checks of the hosts ``weighed`` (a mask, or rows), which may
        fail the request (InvalidRequest), as Nova's weigher raises."""
        if self._weighed_checks:
            rows = np.flatnonzero(weighed) if weighed.dtype == np.bool_ else weighed
            for check in self._weighed_checks:
                check(self.table, rows)

    def _ranked(
        self,
        mask: NDArray[np.bool_],
        raws: Sequence[_Raw],
        want: int,
        per_row: RowMultipliers | None = None,
    ) -> list[int]:
        """The ``want`` best rows of ``mask``, best first.

        Each weigher's values are normalized over the passing rows and
        multiplied, as ``nova/weights.py`` does: between ``lo`` and ``hi``,
        the highest value; all 0 when ``hi <= lo``. ``lo`` is the lowest
        value, or the weigher's ``minval`` (0 for the RAM, CPU, Disk and
        IoOps weighers, so a weight is its value over the highest) when that
        is lower (Nova 18); under Nova 34 the ``minval`` whatever the values,
        a value below it counting as it (:func:`_span`).
        Normalizing is ``(raw - lo) / (hi - lo) * m``; the ``- lo`` part adds
        the same constant to every row, so only ``m / (hi - lo)`` matters for
        the order, and the built-in weighers are summed in one matrix
        product. ``raws`` are the other weighers' (multiplier, values, floor).
        A multiplier per row (an aggregate's, ``per_row`` for the matrix
        columns) keeps the ``- lo``: Nova multiplies each host's normalized
        value by that host's multiplier.
        """
        table = self.table
        n = table.n
        if n == 0:
            return []
        passing = int(np.count_nonzero(mask))
        if passing == 0:
            return []
        if passing < n * self.compress_below or want > self.shortcut_max_want:
            # a selective request (a zone, a trait ...), or a long list wanted:
            # weigh only the passing rows, and sort them
            return self._ranked_among(np.flatnonzero(mask), raws, want, per_row)
        self._check_weighed(mask)
        penalty: NDArray[np.float64] | None = None

        def penalized() -> NDArray[np.float64]:
            # rows that failed a filter, pushed out of reach of min, max and argmax
            nonlocal penalty
            if penalty is None:
                penalty = np.logical_not(mask) * OUT_OF_REACH
            return penalty

        multipliers = self._matrix_multipliers
        if multipliers:
            matrix = table.weigh_matrix[:, :n]
            rows, values, _ = table.extremes()
            k = len(multipliers)
            floors = table.floors
            coefs: list[float] = []
            his: list[float] = []
            los: list[float] = []
            below: list[int] = []  # Nova 34: the columns with a value below their floor
            for j, multiplier in enumerate(multipliers):
                # The extreme over the rows that pass the row-local filters is
                # the extreme over the passing rows whenever its row passed the
                # rest too, the common case; otherwise take it again with every
                # failed row out of reach. A lowest value at the floor is the
                # floor over any rows; below a floor, Nova 34 normalizes from
                # the floor (_span) whatever the lowest passing value is.
                column = matrix[j]
                row = rows[j]
                hi = float(column[row] if mask[row] else (column - penalized()).max())
                row = rows[k + j]
                lo = values[k + j]
                if lo < floors[j]:
                    if floors[j] != _NO_FLOOR and self._clamps:
                        below.append(j)
                        lo, hi = _span(lo, hi, floors[j])
                    elif not mask[row]:
                        lo = min(floors[j], float((column + penalized()).min()))
                coefs.append(multiplier / (hi - lo) if hi > lo else 0.0)
                his.append(hi)
                los.append(lo)
            if per_row is None and not below:
                coefs.insert(0, -1.0)  # the base penalty row
                scores = np.array(coefs) @ table.score_matrix[:, :n]
            else:
                scores = self._scored(his, los, below, per_row)
        else:
            scores = -table.base_penalty[:n]
        for factor, raw, floor, ceiling in raws:
            weights = _weighed_alone(
                factor,
                raw,
                float(raw.min(where=mask, initial=np.inf)),
                float(raw.max(where=mask, initial=-np.inf)),
                floor,
                self._clamps,
                ceiling,
            )
            if weights is not None:
                scores += weights
        top: list[int] = []
        pushed_out = False
        while len(top) < want:
            best = int(scores.argmax())
            if scores[best] == -np.inf:
                break
            if not mask[best]:
                if pushed_out:
                    break  # failed rows are out of reach: no passing row is left
                scores -= penalized()  # push every failed row out of reach at once
                pushed_out = True
                continue
            top.append(best)
            scores[best] = -np.inf
        return top

    def _ranked_among(
        self,
        rows: NDArray[np.intp],
        raws: Sequence[_Raw],
        want: int,
        per_row: RowMultipliers | None = None,
        takes: NDArray[np.bool_] | None = None,
    ) -> list[int]:
        """:meth:`_ranked` over the passing ``rows`` only, gathered into a small matrix.

        Same weights and ties (lowest row first); cheaper when few rows
        pass, since nothing has to be pushed out of reach. The matrix
        product may round a score's last bit unlike the full table's, so
        only hosts whose scores differ by about 1e-16 could swap places.
        ``takes`` (one bool per row of ``rows``): normalized over ``rows``, the
        best are taken from these only.
        """
        scores = self._scores_among(rows, raws, per_row)
        if takes is not None:  # Nova 34's multi-create: weighed over rows, taken from these
            scores[~takes] = -np.inf
            want = min(want, int(np.count_nonzero(takes)))
        if want <= self.shortcut_max_want:
            top: list[int] = []
            for _ in range(min(want, rows.size)):
                best = int(scores.argmax())
                top.append(int(rows[best]))
                scores[best] = -np.inf
            return top
        picked = np.arange(rows.size)
        if rows.size > want:
            picked = np.argpartition(-scores, want - 1)[:want]
        order = np.lexsort((rows[picked], -scores[picked]))
        return [int(r) for r in rows[picked][order]]

    def _scores_among(
        self,
        rows: NDArray[np.intp],
        raws: Sequence[_Raw],
        per_row: RowMultipliers | None = None,
        *,
        exact: bool = False,
    ) -> NDArray[np.float64]:
        """The weights of ``rows``, normalized over them (see :meth:`_ranked`).

        ``exact``: summed column by column (elementwise, so equal figures give
        equal weights to the last bit) instead of in one matrix product.
        """
        self._check_weighed(rows)
        table = self.table
        multipliers = self._matrix_multipliers
        if multipliers:
            floors = table.floors
            sub = table.weigh_matrix.take(rows, axis=1)
            lows = sub.min(axis=1).tolist()
            his = sub.max(axis=1).tolist()
            # min(floor, lowest): Nova 18's lo, and Nova 34's unless a value is below
            # its floor
            los = [lo if lo < floor else floor for lo, floor in zip(lows, floors, strict=True)]
            below: Sequence[int] = ()
            if self._clamps and los != self._floor_list:
                below = [j for j in self._floored if los[j] < floors[j]]
                if below:
                    spans = list(map(_span, lows, his, floors))
                    los = [lo for lo, _ in spans]
                    his = [hi for _, hi in spans]
            coefs = [
                m / (hi - lo) if hi > lo else 0.0
                for m, lo, hi in zip(multipliers, los, his, strict=True)
            ]
            terms = (
                self._apart(per_row, below, coefs, his, los, 0)
                if per_row is not None or below
                else []
            )
            if exact:
                scores = np.zeros(rows.size, dtype=np.float64)
                for coef, line in zip(coefs, sub, strict=True):
                    if coef:
                        scores += coef * line
            else:
                scores = np.array(coefs) @ sub
            for j, m, lo, hi in terms:
                line = _clamped(sub[j], floors[j]) if j in below else sub[j]
                scores += _weighted(_of_rows(m, rows), line, lo, hi)
        else:
            scores = np.zeros(rows.size, dtype=np.float64)
        for multiplier, raw, floor, ceiling in raws:
            values = raw[rows]
            weights = _weighed_alone(
                _of_rows(multiplier, rows),
                values,
                float(values.min()),
                float(values.max()),
                floor,
                self._clamps,
                ceiling,
            )
            if weights is not None:
                scores += weights
        return scores

    def _scored(
        self,
        his: Sequence[float],
        los: Sequence[float],
        below: Sequence[int],
        per_row: RowMultipliers | None,
    ) -> NDArray[np.float64]:
        """Every row's score (rows ``[:n]``, the base penalty in) from each matrix
        column's ``hi`` and ``lo`` over the passing rows, when some column cannot go
        through the one matrix product (:meth:`_apart`): it is added on its own,
        clamped to its floor when it is ``below`` (Nova 34), with its multiplier per
        row if it has one."""
        table = self.table
        n = table.n
        coefs = [-1.0]  # the base penalty row
        coefs += [
            m / (hi - lo) if hi > lo else 0.0
            for m, hi, lo in zip(self._matrix_multipliers, his, los, strict=True)
        ]
        terms = self._apart(per_row, below, coefs, his, los)
        scores = np.array(coefs) @ table.score_matrix[:, :n]
        floors = table.floors
        for j, m, lo, hi in terms:
            column = table.weigh_matrix[j, :n]
            scores += _weighted(m, _clamped(column, floors[j]) if j in below else column, lo, hi)
        return scores

    def _apart(
        self,
        per_row: RowMultipliers | None,
        below: Sequence[int],
        coefs: list[float],
        his: Sequence[float],
        los: Sequence[float],
        first: int = 1,
    ) -> list[tuple[int, Multiplier, float, float]]:
        """Take out of the matrix product the columns it cannot score: those whose
        multiplier is per row (``per_row``) and those with a value below their
        floor (``below``, Nova 34: they are scored clamped). Their coefficient in
        ``coefs``, from index ``first``, becomes 0; returned is each one's
        (column, multiplier, lo, hi) to add with :func:`_weighted` (over its
        :func:`_clamped` values when below; none when hi <= lo: every weight is
        0)."""
        terms: list[tuple[int, Multiplier, float, float]] = []
        columns = per_row.columns if per_row is not None else None
        for j, multiplier in enumerate(self._matrix_multipliers):
            m = columns[j] if columns is not None else None
            if m is None and j not in below:
                continue
            coefs[first + j] = 0.0
            hi = his[j]
            lo = los[j]
            if hi > lo:
                terms.append((j, multiplier if m is None else m, lo, hi))
        return terms

    def filter_counts(self, ctx: PlacementContext) -> tuple[int, dict[str, int]]:
        """The live hosts, and how many of them each filter removed (each host
        charged to the first filter, in order, that rejects it)."""
        table = self.table
        alive = table.active[: table.n].copy()
        total = int(alive.sum())
        counts: dict[str, int] = {}
        spec = ctx.spec
        forcing = bool(spec.force_hosts or spec.force_nodes)
        # in Nova's order: the requested destination, ignored hosts, forced ones
        steps: list[tuple[str, NDArray[np.bool_] | None]] = [
            ("RequestedDestination", self._destination(ctx)),
            ("IgnoreHosts", self._ignored(ctx)),
        ]
        if forcing:  # no filter runs: only Placement's checks and the room needed
            steps.append(("ForceHosts", self._forced_hosts(ctx)))
            steps.append(("ForceNodes", self._forced_nodes(ctx)))
            steps.extend((f.name, f.filter_all(table, ctx)) for f in self._forced_checks())
            steps.extend((f.name, f.filter_all(table, ctx)) for f in _ROOM_FILTERS)
        else:
            steps.extend((f.name, f.filter_all(table, ctx)) for f in self.filters)
        for name, passed in steps:
            if passed is None:
                continue
            removed = int(np.count_nonzero(alive & ~passed))
            if removed:
                counts[name] = removed
                alive &= passed
        return total, counts

    def no_valid_host(self, ctx: PlacementContext, uuid: str, index: int) -> NoValidHost:
        total, counts = self.filter_counts(ctx)
        forcing = bool(ctx.spec.force_hosts or ctx.spec.force_nodes)
        reasons = ", ".join(f"{n} removed {c}" for n, c in counts.items()) or "no host has reported"
        reasons += self._unknown_names(ctx)
        if forcing and total:
            reasons += "; forced hosts skip the filters but must have room for the resources asked"
            if self._clamps:
                reasons += " (and Placement's zone, traits and enabled checks)"
        where = ""
        if len(ctx.spec.instance_uuids) > 1:
            where = (
                f" (instance {index + 1} of {len(ctx.spec.instance_uuids)};"
                " no claim of this request was kept)"
            )
        return NoValidHost(
            f"0/{total} hosts are available for instance {uuid}{where}: {reasons}",
            instance_uuid=uuid,
            total_hosts=total,
            filter_counts=counts,
        )

    def explain(
        self, ctx: PlacementContext, weighers: Sequence[HostWeigher], rows: Sequence[int]
    ) -> tuple[int, list[dict[str, float]]]:
        """How many hosts pass every filter, and each weigher's weight (normalized,
        times its multiplier) on each of ``rows``.

        The reference statement of ``nova/weights.py``'s normalization that
        :meth:`_ranked` and the fast paths compute in their own ways: over
        the hosts that pass every filter, ``(value - lo) / (hi - lo)``, 0 for
        all when ``hi <= lo``, times the weigher's multiplier for that host
        (an aggregate's, else the configured one), ``hi`` the highest value.
        Nova 18 (18.0.0): ``lo`` the lowest value or the weigher's ``minval``
        when lower. Nova 34 (34.0.0, ``nova_release`` 34): a value below the
        ``minval`` is the minval (``weigh_objects``), and ``lo`` is the
        ``minval``, or the lowest value when the weigher has none
        (``normalize``). The weights of a row sum to the score it was ranked
        by, up to rounding and a constant. A later instance of a multi-create
        under Nova 34 is normalized over :meth:`_weighing_mask` (the hosts
        earlier instances filled too); the count is of those with room.
        """
        table = self.table
        spec = ctx.spec
        takes: NDArray[np.bool_] | None = None
        if spec.force_hosts or spec.force_nodes:
            passing = self._forced(ctx)  # the filters are skipped, as for the placement
        elif self._weighs_filled and ctx.chosen_rows:
            passing, takes = self._weighing_mask(ctx)  # Nova 34's multi-create
        else:
            passing = self._passing(ctx, self._masks(ctx))
        self._check_weighed(passing)
        counted = passing if takes is None else takes
        index = np.asarray(rows, dtype=np.intp)
        weights: list[dict[str, float]] = [{} for _ in rows]
        for w in weighers:
            multiplier = row_multipliers(w, table, ctx.aggregates)
            if not isinstance(multiplier, np.ndarray):
                if multiplier == 0:
                    continue
            elif not multiplier[index].any():
                continue
            raw = w.weigh_all(table, ctx)
            values = np.zeros(index.size) if raw is None else np.asarray(raw, dtype=np.float64)
            if raw is not None and passing.any():
                floor = weigher_floor(w)
                if self._clamps and floor != _NO_FLOOR:  # Nova 34, a weigher with a minval
                    values = np.maximum(values, floor)
                    lo = floor
                else:  # Nova 18 (or no minval: the lowest)
                    lo = min(floor, float(values[passing].min()))
                hi = float(values[passing].max())
                ceiling = weigher_ceiling(w)
                if ceiling is not None and self._clamps:  # Nova 34: the maxval is the top
                    values = np.minimum(values, ceiling)
                    lo, hi = min(lo, ceiling), ceiling
                elif ceiling is not None:  # Nova 18: raised to the highest value
                    hi = max(hi, ceiling)
                scaled = (values[index] - lo) / (hi - lo) if hi > lo else np.zeros(index.size)
            else:
                scaled = np.zeros(index.size)
            weighed = scaled * _of_rows(multiplier, index)
            for weight, value in zip(weights, weighed.tolist(), strict=True):
                weight[w.name] = weight.get(w.name, 0.0) + value
        return int(np.count_nonzero(counted)), weights

    def _unknown_names(self, ctx: PlacementContext) -> str:
        """What the forced hosts and nodes and the requested destination name that
        no host is (as " (force_hosts ['x'] name no known host)"), or ""."""
        table = self.table
        spec = ctx.spec
        notes: list[str] = []
        hosts = [h for h in spec.force_hosts if not table.rows_named(h)]
        if hosts:
            notes.append(f"force_hosts {sorted(hosts)[:10]} name no known host")
        nodes = [node for node in spec.force_nodes if not table.rows_of_node(node)]
        if nodes:
            notes.append(f"force_nodes {sorted(nodes)[:10]} name no known node")
        destination = spec.requested_destination
        if destination is not None:
            if destination.host is not None and destination.host not in table.row_of:
                notes.append(f"requested_destination host {destination.host!r} is not known")
            if destination.node is not None and not table.rows_of_node(destination.node):
                notes.append(f"requested_destination node {destination.node!r} is not known")
        return f" ({'; '.join(notes)})" if notes else ""
