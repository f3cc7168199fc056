"""The host table: every host's figures as NumPy columns, one row per host.

Rules this module keeps:

* Only the engine writes here, and only from synchronous code.
* Raw columns hold what the last applied report said (``mem_used`` ...) and
  what the claim ledger adds on top (``claimed_*`` for claims not yet listed
  by a report, ``released_*`` for released instances a report still lists).
* Derived columns (``free_ram``, ``ram_headroom`` ...) are recomputed for a
  row whenever any of its raw figures change (:meth:`HostTable.refresh`), so
  a filter is one comparison over a whole column and never a Python loop.
* A row that is not ``active`` (never used, or its host removed) fails
  ``row_ok``, has ``enabled`` False and zero figures, so no filter chain
  that starts from ``row_ok`` (or ``active``) can pass it.
* Raw integer figures are stored row-major (``raw[row]`` is one host), so a
  refresh reads a host's figures in one call; the columns in ``ints`` are
  views of it. Derived figures are the rows of one float64 array
  (``derived``: one contiguous column per figure, for the filters), so a
  refresh writes all of a host's derived figures with one call.
* ``row_ok`` says, per row, whether it passes the filters whose answer
  depends on that row alone (active, fresh, enabled, instance and I/O
  limits); it is kept by refresh as ``base_penalty`` (0.0 or OUT_OF_REACH),
  so a request pays one comparison for all of them.
* Each weigher column in use has a *floor*, its weigher's ``minval`` (0.0
  for Nova's RAM, CPU, Disk and IoOps weighers; +inf for none). Nova 18
  (``nova_release`` 18): a weight is normalized between min(floor, lowest
  value) and the highest value. Nova 34 (``nova_release`` 34): a value
  below the floor weighs as the floor, and a weight is normalized between
  the floor (the lowest value, with none) and the highest value; the
  ranking clamps, the columns keep the figures themselves (a host's free
  RAM may be negative). :meth:`HostTable.extremes` keeps each lowest as
  min(floor, lowest view): while no value is below the floor it is the
  floor, whichever row changes, and only the maxima are ever scanned again.
* Headroom (:meth:`HostTable._derive`) follows the same setting, chosen
  once at construction: Nova 18's resource filters, or Placement's
  allocation candidates (Nova 34).
* What Placement's inventories add to a report's figures (its reserved
  vCPUs and disk, and each class's ``Units``) is rare, so it is kept sparse
  (:meth:`HostTable.set_inventory`): ``inventory`` holds the rows whose
  headroom bounds (a ``max_unit`` other than the total) or reserved vCPUs
  or disk are not the defaults, ``unit_steps`` those with a ``min_unit`` or
  ``step_size`` above 1 (the rule :mod:`.inventory` applies), ``units``
  the units of both, as the image shows them. A row in none of them costs
  a refresh one truth test of ``inventory``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..models import HostReport, Units
from .host_facts import FactsBook

__all__ = ["INT_COLUMNS", "HostTable"]

# Order matters: a report writes REPORTED in one slice; claims and releases
# add to CLAIMED and RELEASED (mem, vcpus, disk, count) in one slice each.
# The one mapping of a host report's figures to the table's columns:
# (column, HostReport field). reported_instances, after them, is the length of
# the report's instance list.
REPORT_COLUMNS: tuple[tuple[str, str], ...] = (
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
INT_COLUMNS = (
    *(column for column, _ in REPORT_COLUMNS),
    "reported_instances",
    "claimed_mem",
    "claimed_vcpus",
    "claimed_disk",
    "assumed_count",
    "released_mem",
    "released_vcpus",
    "released_disk",
    "released_count",
)
REPORTED = slice(0, len(REPORT_COLUMNS) + 1)
_REPORT_FIELDS = operator.attrgetter(*(field for _, field in REPORT_COLUMNS))
# a report's figures of REPORT_COLUMNS, in order (reported_figures adds its instance count)
report_values = _REPORT_FIELDS


def reported_figures(report: HostReport) -> tuple[int, ...]:
    """A report's figures in the order of the table's ``REPORTED`` columns."""
    figures: tuple[int, ...] = _REPORT_FIELDS(report)
    return (*figures, len(report.instances))


_CLAIMED = INT_COLUMNS.index("claimed_mem")
# the totals of the classes (RAM, vCPUs, disk): each headroom's bound unless a
# report's max_unit says otherwise
_TOTALS = [INT_COLUMNS.index(name) for name in ("mem_total", "vcpus_total", "disk_total")]
_RELEASED = INT_COLUMNS.index("released_mem")
_FLOAT_COLUMNS = ("reported_at",)
# The largest request each host can take now (the rules of RamFilter,
# CoreFilter and DiskFilter, written once in HostTable._derive): the three
# resource filters are one comparison over this (3, capacity) array.
HEADROOM_COLUMNS = ("ram_headroom", "cpu_headroom", "disk_headroom")
# Derived columns the built-in weighers read. The ones in use are rows of the
# table's ``score_matrix`` so that scoring every host is one matrix product.
WEIGH_COLUMNS = ("free_ram", "vcpu_headroom", "free_disk", "num_io_ops", "num_instances")
# The rows of ``HostTable.ratios``, each row's allocation ratios: those the
# resource filters use (an aggregate's when its Aggregate*Filter is on, else
# the host's own), then the host's own cpu ratio, the CPU weigher's (Nova's
# CPUWeigher reads host_state.cpu_allocation_ratio: its report's or the
# configured one, never an aggregate's).
RATIO_ROWS = ("ram", "cpu", "disk", "own_cpu")
# Subtracted from the scores (added to the minimum's candidates) of rows that
# must not win: far beyond any real figure, yet finite so sums stay ordered.
OUT_OF_REACH = 1e300
# More rows changed than this since the weigher extremes were found: find them
# again with one pass per column instead of checking each changed row.
_DIRTY_LIMIT = 16


_INF = float("inf")
# a row's allocation ratios, in RATIO_ROWS order
Ratios = tuple[float, float, float, float]
# a row's units per class (RAM, vCPUs, disk); None: Placement's defaults
RowUnits = tuple[Units | None, Units | None, Units | None]
# per class (RAM, vCPUs, disk): the most one allocation may ask (max_unit, else the
# total); then the reserved vCPUs and disk (the reserved RAM is a raw column)
Inventory = tuple[int, int, int, int, int]
# per class (RAM, vCPUs, disk): (min_unit, step_size)
Steps = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
_DEFAULT_STEPS: Steps = ((1, 1), (1, 1), (1, 1))
_NO_UNITS: RowUnits = (None, None, None)


# The headroom rules of HostTable._derive: (RAM, vCPUs, disk) from each class's
# bound for one allocation (its max_unit: the total unless a report says
# otherwise), what its capacity leaves, and the vCPU total (Nova 18's CoreFilter
# reads it). For one row's scalars (a refresh runs on every claim: builtin min()
# and max() parse their arguments more slowly than this compares them), and for
# many rows' arrays: the same operations in the same order.
Headroom = Callable[[Any, Any, Any, Any, Any, Any, Any], tuple[Any, Any, Any]]


def _headroom_nova18(
    mem: Any,
    mem_left: Any,
    vcpus_total: Any,
    vcpus: Any,
    vcpus_left: Any,
    disk: Any,
    disk_left: Any,
) -> tuple[Any, Any, Any]:
    return (
        mem if mem < mem_left else mem_left,
        _INF if vcpus_total == 0 else (vcpus if vcpus < vcpus_left else vcpus_left),
        disk if disk < disk_left else disk_left,
    )


def _headrooms_nova18(
    mem: Any,
    mem_left: Any,
    vcpus_total: Any,
    vcpus: Any,
    vcpus_left: Any,
    disk: Any,
    disk_left: Any,
) -> tuple[Any, Any, Any]:
    return (
        np.minimum(mem, mem_left),
        np.where(vcpus_total == 0, _INF, np.minimum(vcpus, vcpus_left)),
        np.minimum(disk, disk_left),
    )


def _room(bound: Any, left: Any) -> Any:
    room = bound if bound < left else left
    return room if room > 0.0 else 0.0


def _headroom_nova34(
    mem: Any,
    mem_left: Any,
    _vcpus_total: Any,
    vcpus: Any,
    vcpus_left: Any,
    disk: Any,
    disk_left: Any,
) -> tuple[Any, Any, Any]:
    return _room(mem, mem_left), _room(vcpus, vcpus_left), _room(disk, disk_left)


def _headrooms_nova34(
    mem: Any,
    mem_left: Any,
    _vcpus_total: Any,
    vcpus: Any,
    vcpus_left: Any,
    disk: Any,
    disk_left: Any,
) -> tuple[Any, Any, Any]:
    return (
        np.maximum(np.minimum(mem, mem_left), 0.0),
        np.maximum(np.minimum(vcpus, vcpus_left), 0.0),
        np.maximum(np.minimum(disk, disk_left), 0.0),
    )


# nova_release -> (the scalar rule, the array rule)
_HEADROOM_RULES: dict[int, tuple[Headroom, Headroom]] = {
    18: (_headroom_nova18, _headrooms_nova18),
    34: (_headroom_nova34, _headrooms_nova34),
}


def _effective(units: Units | None, total: int) -> Units | None:
    """``units`` as they act on a class of ``total``: None for Placement's defaults
    (a max_unit of the total is no max_unit)."""
    if units is None:
        return None
    if units.max_unit == total:
        units = units.model_copy(update={"max_unit": None})
    return None if units.min_unit == units.step_size == 1 and units.max_unit is None else units


def _bound(units: Units | None, total: int) -> int:
    """The most one allocation of a class may ask: its max_unit, else its total."""
    return total if units is None or units.max_unit is None else units.max_unit


def _steps(units: Units | None) -> tuple[int, int]:
    """A class's (min_unit, step_size)."""
    return (1, 1) if units is None else (units.min_unit, units.step_size)


def _both(a: Any, b: Any) -> Any:
    return a and b


class HostTable:
    """Columns of host figures; ``n`` is the high-water mark of rows in use.

    Column arrays are sized to a capacity that doubles as hosts arrive; only
    ``[:n]`` is meaningful. Filters and weighers read ``column(name)``.
    """

    def __init__(
        self,
        ram_ratio: float,
        cpu_ratio: float,
        disk_ratio: float,
        weigh_columns: tuple[str, ...] = WEIGH_COLUMNS,
        in_use: int = len(WEIGH_COLUMNS),
        floors: tuple[float, ...] | None = None,
        *,
        nova_release: Literal[18, 34] = 18,
    ) -> None:
        if sorted(weigh_columns) != sorted(WEIGH_COLUMNS):
            raise ValueError(f"weigh_columns must order {WEIGH_COLUMNS}, got {weigh_columns}")
        if not 0 <= in_use <= len(WEIGH_COLUMNS):
            raise ValueError(f"in_use must be 0..{len(WEIGH_COLUMNS)}, got {in_use}")
        # The engine puts the weighers in use first; only those are scored.
        self.weigh_columns = weigh_columns
        self.in_use = in_use
        # the normalization floor of each column in use (its weigher's minval)
        self.floors: tuple[float, ...] = (0.0,) * in_use if floors is None else floors
        if len(self.floors) != in_use:
            raise ValueError(f"floors must give one value per column in use, got {floors}")
        self._weigh_order = [WEIGH_COLUMNS.index(name) for name in weigh_columns]
        self._in_order = operator.itemgetter(*self._weigh_order)  # figures -> this order
        w = len(WEIGH_COLUMNS)
        # A row with no host, or one the row-local filters reject: no headroom,
        # zero figures, out of reach of every extreme and every score.
        self._views_failed = [-np.inf] * in_use + [np.inf] * in_use
        self._derived_empty = [-np.inf] * 3 + [OUT_OF_REACH] + [0.0] * w + self._views_failed
        # The configured allocation ratios, and each row's (``ratios``: one
        # column per row, the RATIO_ROWS); ``custom_ratios`` holds the rows whose
        # ratios differ from the configured ones (a host's reported ratio, an
        # aggregate's), so a refresh of any other row reads no array for them.
        self.default_ratios: Ratios = (ram_ratio, cpu_ratio, disk_ratio, cpu_ratio)
        self.custom_ratios: dict[int, Ratios] = {}
        self.ratios: NDArray[np.float64] = np.zeros((len(RATIO_ROWS), 0), dtype=np.float64)
        # Placement's inventories (see the module's rules; set_inventory): the rows
        # whose bounds or reserved vCPUs or disk are not the defaults, the rows
        # with a min_unit or step_size above 1 (``steps_version`` changes with
        # them), and the units of both
        self.inventory: dict[int, Inventory] = {}
        self.unit_steps: dict[int, Steps] = {}
        self.steps_version = 0
        self.units: dict[int, RowUnits] = {}
        # the membership id of each row's host aggregates (aggregates.py; 0: none)
        self.agg_set: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        # membership id -> its aggregates' names (the engine's AggregateBook list;
        # append-only, replaced whole when renumbered, so a reader may keep it)
        self.membership_names: list[tuple[str, ...]] = [()]
        # -- host facts (host_facts.py): each row's facts id, 0 for none, and the
        # book of the distinct facts; the engine sets both from reports
        self.facts_id: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.host_facts = FactsBook()
        self.n = 0
        self.count = 0  # active rows
        self._capacity = 0
        self._free_rows: list[int] = []
        self.row_of: dict[str, int] = {}
        self.name_of: list[str | None] = []
        # rows of the hosts whose name has capitals, by the name in lower case
        # (rows_named); all-lower-case names, the usual ones, cost nothing here
        self._capitalized: dict[str, list[int]] = {}
        # the node of each row whose hypervisor node is not named as its host
        # (most rows: none, and no entry), and those rows by node name
        self.node_of: dict[int, str] = {}
        self._node_rows: dict[str, list[int]] = {}
        self.zone_ids: dict[str, int] = {}
        self.zone_names: list[str] = []
        self.trait_bits: dict[str, int] = {}
        self.trait_names: list[str] = []
        self.host_traits: list[tuple[str, ...]] = []
        # True while a reader holds name_of and host_traits themselves
        # (shared_lists): the next write copies both first
        self._lists_shared = False
        # one tuple per distinct set a row reported: every name in a known set is known
        self.trait_sets: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.active: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self.enabled: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        # ``zone`` is the zone a row is in (its aggregates' zone, else its
        # report's); ``reported_zone`` the one its last report named
        self.zone: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.reported_zone: NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.traits: NDArray[np.uint64] = np.zeros((0, 1), dtype=np.uint64)
        self.raw: NDArray[np.int64] = np.zeros((0, len(INT_COLUMNS)), dtype=np.int64)
        self.ints: dict[str, NDArray[np.int64]] = {}
        # row-local filter limits; the engine sets them from the enabled filters
        self.check_enabled = False
        self.max_instances: float = np.inf
        self.max_io_ops: float = np.inf
        self.floats: dict[str, NDArray[np.float64]] = {}
        # A row is ``stale`` once its last report is older than service_down_time
        # (the engine marks it); it fails row_ok until its next report.
        self.stale: NDArray[np.bool_] = np.zeros(0, dtype=np.bool_)
        self.derived: NDArray[np.float64] = np.zeros((len(self._derived_empty), 0))
        # The weigher columns in use, and the same after base_penalty as its
        # first row: ``coefs @ score_matrix`` with coefficient -1 for that row
        # scores every host and pushes the failed ones out of reach in one call.
        self.weigh_matrix: NDArray[np.float64] = np.zeros((in_use, 0))
        self.score_matrix: NDArray[np.float64] = np.zeros((in_use + 1, 0))
        self.headroom: NDArray[np.float64] = np.zeros((len(HEADROOM_COLUMNS), 0))
        # The weigher matrix as the row-local filters see it: rows that fail
        # them (disabled, stale, full, removed) are -inf in hi_view and +inf
        # in lo_view, so an argmax/argmin finds the extreme among the rest.
        self.hi_view: NDArray[np.float64] = np.zeros((in_use, 0))
        self.lo_view: NDArray[np.float64] = np.zeros((in_use, 0))
        # 0.0 for rows that pass the row-local filters, OUT_OF_REACH for the rest
        self.base_penalty: NDArray[np.float64] = np.zeros(0, dtype=np.float64)
        # Rows holding each column's highest (then lowest) view value, kept
        # across requests: a row change is checked against them, not rescanned.
        self._extremes: list[int] | None = None
        self._extreme_values: list[float] = []
        self._extreme_figures: dict[int, list[float]] = {}  # row -> its derived figures
        self._binding: list[list[float]] | None = None  # figures of the rows that bound
        # Nova 34 only: True when, as of the last extremes(), a row that passes row_ok
        # has a value below the floor of its column (the ranking clamps it then);
        # always False under Nova 18, which does not clamp
        self.below_floor = False
        self._dirty: list[int] = []
        self._use_nova_release(nova_release)
        self._grow(64)

    def _use_nova_release(self, nova_release: Literal[18, 34]) -> None:
        # which release's rules where Nova 18 and 34 differ (SchedulerConfig.nova_release):
        # the headroom rule of _derive, and whether a weight is clamped to its floor
        self.nova_release = nova_release
        self._headroom, self._headrooms = _HEADROOM_RULES[nova_release]
        self._clamps = nova_release == 34

    def adopt_nova_release(self, nova_release: Literal[18, 34]) -> None:
        """Take the rules of ``nova_release`` (the ranker's, from the same
        configuration) before any host is added; ValueError after, when they differ."""
        if nova_release == self.nova_release:
            return
        if self.n:
            raise ValueError(
                f"the table has {self.n} rows under Nova {self.nova_release}'s rules; "
                f"nova_release {nova_release} must be chosen before any host is added"
            )
        self._use_nova_release(nova_release)

    # -- rows -------------------------------------------------------------

    def _grow(self, capacity: int) -> None:
        old = self._capacity

        # Rows at or past ``n`` are never read (every reader slices ``[:n]``) and
        # a row is fully written when a host takes it, so new rows need no
        # fill: zeroed pages cost no memory until a host lands on them.
        def grown(arr: NDArray[np.generic]) -> NDArray[np.generic]:
            new = np.zeros((capacity, *arr.shape[1:]), dtype=arr.dtype)
            new[:old] = arr[:old]
            return new

        self.active = grown(self.active)  # type: ignore[assignment]
        self.enabled = grown(self.enabled)  # type: ignore[assignment]
        self.zone = grown(self.zone)  # type: ignore[assignment]
        self.reported_zone = grown(self.reported_zone)  # type: ignore[assignment]
        self.agg_set = grown(self.agg_set)  # type: ignore[assignment]
        self.facts_id = grown(self.facts_id)  # type: ignore[assignment]  # host facts
        ratios = np.empty((len(RATIO_ROWS), capacity), dtype=np.float64)
        ratios[:, :old] = self.ratios[:, :old]
        ratios[:, old:] = np.array(self.default_ratios)[:, None]
        self.ratios = ratios
        self.traits = grown(self.traits)  # type: ignore[assignment]
        self.stale = grown(self.stale)  # type: ignore[assignment]
        self.raw = grown(self.raw)  # type: ignore[assignment]
        for index, name in enumerate(INT_COLUMNS):
            self.ints[name] = self.raw[:, index]  # a view: writes land in raw
        for name in _FLOAT_COLUMNS:
            self.floats[name] = grown(self.floats.get(name, np.zeros(0, np.float64)))  # type: ignore[assignment]
        # Everything refresh() derives lives in two arrays, one row each, so
        # that refreshing a host is two writes, not one per figure.
        derived = np.zeros((len(self._derived_empty), capacity), dtype=np.float64)
        derived[:, :old] = self.derived[:, :old]
        self._bind(derived)
        self._own_lists()
        self.name_of.extend([None] * (capacity - old))
        self.host_traits.extend([()] * (capacity - old))
        self._capacity = capacity

    def _bind(self, derived: NDArray[np.float64]) -> None:
        self.derived = derived
        h = len(HEADROOM_COLUMNS)
        k = self.in_use
        w = len(WEIGH_COLUMNS)
        # rows: headroom, base_penalty, the weigher columns (those in use
        # first), then the hi and lo views of the ones in use
        self.headroom = derived[:h]
        self.base_penalty = derived[h]
        self.score_matrix = derived[h : h + 1 + k]
        self.weigh_matrix = derived[h + 1 : h + 1 + k]
        self.hi_view = derived[h + 1 + w : h + 1 + w + k]
        self.lo_view = derived[h + 1 + w + k : h + 1 + w + 2 * k]
        for index, name in enumerate(HEADROOM_COLUMNS):
            self.floats[name] = self.headroom[index]  # views: writes land in derived
        for index, name in enumerate(self.weigh_columns):
            self.floats[name] = derived[h + 1 + index]

    def add_row(self, host: str) -> int:
        """Give ``host`` a row (reusing a freed one) and return it."""
        if self._free_rows:
            row = self._free_rows.pop()
        else:
            if self.n == self._capacity:
                # double while small, then by a quarter, then by an eighth: less
                # slack at 100k hosts (each step copies every array once)
                capacity = self._capacity
                step = capacity if capacity < 4096 else capacity // (4 if capacity < 65536 else 8)
                self._grow(capacity + step)
            row = self.n
            self.n += 1
            # a fresh row is as a removed one until the host's figures land
            self.derived[:, row] = self._derived_empty
            self.zone[row] = self.reported_zone[row] = -1
            for name in _FLOAT_COLUMNS:
                self.floats[name][row] = -np.inf
        self.row_of[host] = row
        folded = host.lower()
        if folded != host:
            self._capitalized.setdefault(folded, []).append(row)
        self._own_lists()
        self.name_of[row] = host
        self.active[row] = True
        self.count += 1
        return row

    def remove_row(self, row: int) -> None:
        """Forget the host in ``row``; the row is reset and reused later."""
        host = self.name_of[row]
        assert host is not None
        del self.row_of[host]
        folded = host.lower()
        if folded != host:
            same = self._capitalized[folded]
            same.remove(row)
            if not same:
                del self._capitalized[folded]
        self.set_node(row, None)
        self._own_lists()
        self.name_of[row] = None
        self.host_traits[row] = ()
        self.active[row] = False
        self.enabled[row] = False
        self.zone[row] = self.reported_zone[row] = -1
        self.agg_set[row] = 0
        self.facts_id[row] = 0  # host facts: none
        if self.custom_ratios.pop(row, None) is not None:
            self.ratios[:, row] = self.default_ratios
        if row in self.inventory or row in self.units:
            self.set_inventory(row, _NO_UNITS, (0, 0, 0), 0, 0)
        self.traits[row] = 0
        self.stale[row] = False
        self.raw[row] = 0
        for name in _FLOAT_COLUMNS:
            self.floats[name][row] = -np.inf
        self.derived[:, row] = self._derived_empty
        self._changed(row)
        self._free_rows.append(row)
        self.count -= 1

    def rows_named(self, host: str) -> list[int]:
        """Rows of every host named ``host`` ignoring case, as Nova matches
        ``ignore_hosts`` and forced hosts (``str.lower`` on both sides)."""
        folded = host.lower()
        rows = list(self._capitalized.get(folded, ()))
        row = self.row_of.get(folded)
        if row is not None:
            rows.append(row)
        return rows

    def set_node(self, row: int, node: str | None) -> None:
        """Record the node ``row`` reports (None or its host's name: named as its host)."""
        old = self.node_of.get(row)
        if node == self.name_of[row]:
            node = None
        if node == old:
            return
        if old is not None:
            same = self._node_rows[old]
            same.remove(row)
            if not same:
                del self._node_rows[old]
            del self.node_of[row]
        if node is not None:
            self.node_of[row] = node
            self._node_rows.setdefault(node, []).append(row)

    def rows_of_node(self, node: str) -> list[int]:
        """Rows whose hypervisor node is named ``node`` exactly (as Nova's
        ``force_nodes`` and ``requested_destination`` match nodes)."""
        rows = list(self._node_rows.get(node, ()))
        row = self.row_of.get(node)
        if row is not None and row not in self.node_of:
            rows.append(row)
        return rows

    # -- vocabularies -----------------------------------------------------

    def zone_id(self, zone: str | None, *, create: bool) -> int:
        """Small int for a zone name; -1 for none, -2 for a name never reported."""
        if zone is None:
            return -1
        zid = self.zone_ids.get(zone)
        if zid is None:
            if not create:
                return -2
            zid = len(self.zone_names)
            self.zone_ids[zone] = zid
            self.zone_names.append(zone)
        return zid

    def trait_mask(
        self, traits: list[str] | tuple[str, ...], *, create: bool
    ) -> NDArray[np.uint64]:
        """Bitset of ``traits`` as an array of 64-bit words.

        With ``create`` a trait never seen gets the next bit; without it, an
        unknown trait raises KeyError (the caller decides what that means).
        """
        bits: list[int] = []
        for t in traits:
            bit = self.trait_bits.get(t)
            if bit is None:
                if not create:
                    raise KeyError(t)
                bit = len(self.trait_names)
                self.trait_bits[t] = bit
                self.trait_names.append(t)
            bits.append(bit)
        words = max(1, (len(self.trait_names) + 63) // 64)
        if words > self.traits.shape[1]:
            # double, not one word more: a growing vocabulary costs linear time
            words = max(words, 2 * self.traits.shape[1])
            wider = np.zeros((self._capacity, words), dtype=np.uint64)
            wider[:, : self.traits.shape[1]] = self.traits
            self.traits = wider
        mask = np.zeros(self.traits.shape[1], dtype=np.uint64)
        for bit in bits:
            mask[bit // 64] |= np.uint64(1 << (bit % 64))
        return mask

    def set_traits(self, row: int, traits: list[str]) -> None:
        """Record the traits ``row`` reports (as bits, and as the names for snapshots)."""
        names = tuple(traits)
        names = self.trait_sets.setdefault(names, names)
        mask = self.trait_mask(names, create=True)
        self.traits[row] = mask
        self._own_lists()
        self.host_traits[row] = names

    def shared_lists(self) -> tuple[list[str | None], list[tuple[str, ...]]]:
        """``name_of`` and ``host_traits`` themselves, not copies (copy-on-write).

        A million-entry list costs the owner about 20 ms to copy; handing it
        out costs nothing. The table copies both before its next write to
        either, so what the reader holds never changes. Index them only below
        the ``n`` of the moment they were taken.
        """
        self._lists_shared = True
        return self.name_of, self.host_traits

    def _own_lists(self) -> None:
        if self._lists_shared:
            self.name_of = list(self.name_of)
            self.host_traits = list(self.host_traits)
            self._lists_shared = False

    # -- figures ----------------------------------------------------------

    def column(self, name: str) -> NDArray[np.float64] | NDArray[np.int64]:
        """The live ``[:n]`` view of a numeric column (read it, never write it)."""
        if name in self.floats:
            return self.floats[name][: self.n]
        return self.ints[name][: self.n]

    def set_ratios(self, row: int, ratios: Ratios) -> bool:
        """Give ``row`` its own allocation ratios (the RATIO_ROWS); True when they
        changed. The caller refreshes the row."""
        if ratios == self.custom_ratios.get(row, self.default_ratios):
            return False
        if ratios == self.default_ratios:
            del self.custom_ratios[row]
        else:
            self.custom_ratios[row] = ratios
        self.ratios[:, row] = ratios
        return True

    def set_inventory(
        self,
        row: int,
        units: RowUnits,
        totals: tuple[int, int, int],
        vcpus_reserved: int,
        disk_reserved: int,
    ) -> bool:
        """Record what Placement's inventories say of ``row`` beyond its raw figures:
        the units its report gives (None for a class: Placement's defaults) with
        the report's totals (RAM, vCPUs, disk: a ``max_unit`` of None is the
        total), and its reserved vCPUs and disk. True when a ``min_unit`` or
        ``step_size`` changed. The caller refreshes the row."""
        mem_total, vcpus_total, disk_total = totals
        mem, vcpus, disk = units
        mem = _effective(mem, mem_total)
        vcpus = _effective(vcpus, vcpus_total)
        disk = _effective(disk, disk_total)
        if mem is None and vcpus is None and disk is None:
            self.units.pop(row, None)
            steps = _DEFAULT_STEPS
        else:
            self.units[row] = (mem, vcpus, disk)
            steps = (_steps(mem), _steps(vcpus), _steps(disk))
        bounds = (_bound(mem, mem_total), _bound(vcpus, vcpus_total), _bound(disk, disk_total))
        if bounds == totals and not vcpus_reserved and not disk_reserved:
            self.inventory.pop(row, None)
        else:
            self.inventory[row] = (*bounds, vcpus_reserved, disk_reserved)
        if steps == self.unit_steps.get(row, _DEFAULT_STEPS):
            return False
        if steps == _DEFAULT_STEPS:
            del self.unit_steps[row]
        else:
            self.unit_steps[row] = steps
        self.steps_version += 1
        return True

    def reserved(self, row: int) -> tuple[int, int]:
        """The vCPUs and disk ``row`` reserves (its memory's is a raw column)."""
        entry = self.inventory.get(row)
        return (0, 0) if entry is None else (entry[3], entry[4])

    def _inventories(self, index: NDArray[np.intp], raw: NDArray[np.int64]) -> Any:
        """The ``inventory`` figures of the rows in ``index`` (their raw figures
        ``raw``, rows by columns) as five int64 arrays, when one of them has an
        entry (the others: their totals, nothing reserved); else None."""
        inventory = self.inventory
        held = [(at, inventory[row]) for at, row in enumerate(index.tolist()) if row in inventory]
        if not held:
            return None
        figures = np.zeros((5, len(index)), dtype=np.int64)
        figures[:3] = raw[:, _TOTALS].T
        for at, entry in held:
            figures[:, at] = entry
        return tuple(figures)

    def _derive(
        self,
        raw: Any,
        ratios: tuple[Any, Any, Any, Any],
        inventory: Any,
        headroom_rule: Headroom,
    ) -> tuple[tuple[Any, Any, Any], tuple[Any, ...], Any, Any]:
        """Headroom, weigher figures (in this table's order), instance count and
        I/O count from one row's raw figures (a list of ints, its ratios as
        floats, its ``inventory`` entry or None, with the scalar ``_headroom``
        rule) or many rows' (an ``(18, m)`` int64 array, ratios as floats or
        float64 arrays, the inventory as five int64 arrays or None, with the
        array ``_headrooms`` rule): the same operations in the same order, so a
        row derived alone or in a batch is the same to the last bit. (No
        inventory is each total as its bound and nothing reserved: the
        subtraction of 0 is left out, which changes no figure.)

        Headroom is the largest amount of each class a request may ask of the
        row, as Placement allows an allocation: what its capacity leaves,
        (total - reserved) x ratio - used (Placement's capacity, for RAM,
        vCPUs and disk alike), and never more than the class's ``max_unit``:
        the host's own total before the ratio unless its report's units say
        otherwise (Nova's default ``max_unit``: an instance may not overcommit
        against itself). Then, by ``nova_release``:

        * 18, as Nova 18's resource filters decide: a host that reports 0
          vCPUs takes any number (CoreFilter fails safe: "VCPUs not set;
          assuming CPU collection broken");
        * 34, as Placement decides an allocation candidate: never below 0.
          So a request asking 0 of a class passes whatever the row has of
          it, a host used past its capacity too (Nova leaves a class asked
          0 of out of the query: ``ResourceRequest.strip_zeros``, a boot from
          volume's DISK_GB), and a host that reports 0 of a class (no
          inventory of it: the libvirt driver reports none with a total of
          0) takes no request asking any.

        The weigher figures have no ratio but the CPU weigher's, which is the
        host's own (the last of the RATIO_ROWS), as Nova's weighers read
        ``free_ram_mb`` and ``free_disk_mb`` (total - reserved - used) and
        ``vcpus_total x cpu_allocation_ratio - vcpus_used``: Nova's CPUWeigher
        counts no reserved vCPUs, so the CPU weigher's figure is not the vCPU
        headroom's capacity when a host reserves some."""
        (
            _generation,
            mem_total,
            mem_reserved,
            mem_used,
            vcpus_total,
            vcpus_used,
            disk_total,
            disk_used,
            io_ops,
            reported,
            claimed_mem,
            claimed_vcpus,
            claimed_disk,
            assumed,
            released_mem,
            released_vcpus,
            released_disk,
            released,
        ) = raw
        ram_ratio, cpu_ratio, disk_ratio, own_cpu_ratio = ratios
        if inventory is None:  # most rows: no bound but the totals, nothing reserved
            mem_cap = mem_total
            vcpus_cap = usable_vcpus = vcpus_total
            disk_cap = usable_disk = disk_total
        else:
            mem_cap, vcpus_cap, disk_cap, vcpus_reserved, disk_reserved = inventory
            usable_vcpus = vcpus_total - vcpus_reserved
            usable_disk = disk_total - disk_reserved
        usable_mem = mem_total - mem_reserved
        used_mem = mem_used + claimed_mem - released_mem
        used_vcpus = vcpus_used + claimed_vcpus - released_vcpus
        used_disk = disk_used + claimed_disk - released_disk
        num_instances = reported + assumed - released
        num_io_ops = io_ops + assumed
        vcpus_free = usable_vcpus * cpu_ratio - used_vcpus
        # the CPU weigher's figure counts no reserved vCPUs; with none reserved and
        # the same ratio object (most rows, the configured ratios) it is the same
        own_vcpus_free = (
            vcpus_free
            if own_cpu_ratio is cpu_ratio and usable_vcpus is vcpus_total
            else vcpus_total * own_cpu_ratio - used_vcpus
        )
        headroom = headroom_rule(
            mem_cap,
            usable_mem * ram_ratio - used_mem,
            vcpus_total,
            vcpus_cap,
            vcpus_free,
            disk_cap,
            usable_disk * disk_ratio - used_disk,
        )
        # the weigher figures, in WEIGH_COLUMNS order, then in this table's order
        figures = (
            usable_mem - used_mem,  # free_ram
            own_vcpus_free,  # vcpu_headroom, as Nova's CPUWeigher
            usable_disk - used_disk,  # free_disk
            num_io_ops,
            num_instances,
        )
        return headroom, self._in_order(figures), num_instances, num_io_ops

    def _row_local(
        self,
        active: Any,
        stale: Any,
        enabled: Any,
        num_instances: Any,
        num_io_ops: Any,
        both: Any = _both,
        negate: Any = operator.not_,
    ) -> Any:
        """The row-local filters' rule, written once: a live row (not removed, not
        stale: ComputeFilter's freshness half, kept by the sweep), enabled when
        ComputeFilter is on, under NumInstancesFilter's and IoOpsFilter's limits.

        For one row's scalars (``and``, ``not``) or, with ``np.logical_and`` and
        ``np.logical_not``, many rows' arrays, as :meth:`_derive`.
        """
        ok = both(active, negate(stale))
        if self.check_enabled:
            ok = both(ok, enabled)
        return both(both(ok, num_instances < self.max_instances), num_io_ops < self.max_io_ops)

    def row_local_part(self, name: str) -> NDArray[np.bool_]:
        """One row-local filter's share of :meth:`_row_local` over rows ``[:n]``:
        the one rule with the other filters' inputs set to pass (the rule is a
        conjunction), so the NoValidHost count of ``ComputeFilter``,
        ``NumInstancesFilter`` or ``IoOpsFilter`` is the rule ranking applied."""
        if name not in ("ComputeFilter", "NumInstancesFilter", "IoOpsFilter"):
            raise ValueError(f"{name!r} is not a row-local filter")
        n = self.n
        passing = np.ones(n, dtype=np.bool_)
        compute = name == "ComputeFilter"
        live = self.active[:n] if compute else passing
        stale = self.stale[:n] if compute else ~passing
        enabled = self.enabled[:n] if compute else passing
        instances = self.column("num_instances") if name == "NumInstancesFilter" else -_INF
        io_ops = self.column("num_io_ops") if name == "IoOpsFilter" else -_INF
        part: NDArray[np.bool_] = self._row_local(
            live, stale, enabled, instances, io_ops, np.logical_and, np.logical_not
        )
        return part

    def refresh(self, row: int, raw: list[int] | None = None) -> None:
        """Recompute the derived figures of ``row`` from its raw ones (given or read)."""
        headroom, ordered, num_instances, num_io_ops = self._derive(
            self.raw[row].tolist() if raw is None else raw,
            self.custom_ratios.get(row, self.default_ratios),
            self.inventory.get(row) if self.inventory else None,
            self._headroom,
        )
        k = self.in_use
        ok = self._row_local(
            self.active[row], self.stale[row], self.enabled[row], num_instances, num_io_ops
        )
        # derived rows: headroom, base penalty, weigher columns, hi and lo views
        if ok:
            self.derived[:, row] = [*headroom, 0.0, *ordered, *ordered[:k], *ordered[:k]]
        else:
            self.derived[:, row] = [*headroom, OUT_OF_REACH, *ordered, *self._views_failed]
        self._changed(row)

    @property
    def row_ok(self) -> NDArray[np.bool_]:
        """Per row: passes the row-local filters (a new array; slice it ``[:n]``)."""
        ok: NDArray[np.bool_] = self.base_penalty == 0.0
        return ok

    def set_reported_many(
        self,
        rows: list[int],
        figures: list[tuple[int, ...]],
        enabled: list[bool],
        zones: list[int],
        reported_at: float,
    ) -> None:
        """:meth:`set_reported` for many distinct rows at once, with their
        ``enabled`` flags and zone ids; the rows are fresh (not stale) again."""
        index = np.asarray(rows, dtype=np.intp)
        self.raw[index, REPORTED] = figures
        self.floats["reported_at"][index] = reported_at
        self.enabled[index] = enabled
        self.zone[index] = zones
        self.reported_zone[index] = self.zone[index]
        self.stale[index] = False
        self.refresh_many(index)

    def refresh_many(self, index: NDArray[np.intp]) -> None:
        """:meth:`refresh` of every row in ``index`` (distinct), in whole-array steps.

        The same arithmetic in the same order as :meth:`refresh` (int64 sums,
        then float64 products), so the figures are the same to the last bit.
        """
        ratios: tuple[Any, Any, Any, Any] = self.default_ratios
        if self.custom_ratios:
            ram, cpu, disk, own_cpu = self.ratios[:, index]
            ratios = (ram, cpu, disk, own_cpu)
        raw = self.raw[index]
        inventory = self._inventories(index, raw) if self.inventory else None
        headroom, ordered, num_instances, num_io_ops = self._derive(
            raw.T, ratios, inventory, self._headrooms
        )
        ok = self._row_local(
            self.active[index],
            self.stale[index],
            self.enabled[index],
            num_instances,
            num_io_ops,
            np.logical_and,
            np.logical_not,
        )
        k = self.in_use
        self.derived[:, index] = [
            *headroom,
            np.where(ok, 0.0, OUT_OF_REACH),
            *ordered,
            *(np.where(ok, figure, -np.inf) for figure in ordered[:k]),
            *(np.where(ok, figure, np.inf) for figure in ordered[:k]),
        ]
        if self._extremes is not None:
            if index.size > _DIRTY_LIMIT:
                self._extremes = None  # extremes() rebuilds them, and clears the dirty rows
            else:
                for row in index.tolist():
                    self._changed(row)

    def _changed(self, row: int) -> None:
        """Note that ``row``'s view values changed, for :meth:`extremes`."""
        if self._extremes is not None:
            dirty = self._dirty
            dirty.append(row)
            if len(dirty) > _DIRTY_LIMIT:
                self._extremes = None  # extremes() rebuilds them, and clears the dirty rows

    def extremes(self) -> tuple[list[int], list[float], list[list[float]]]:
        """Rows holding each weigher column's highest, then each one's lowest, view value.

        Over the rows that pass ``row_ok`` (the views put the others out of
        reach); a highest row that fails ``row_ok`` means no row passes.
        Also returns the values (the highest of each column in use, then
        the lowest, never above the column's floor: min(floor, lowest
        view)) and the ``derived`` figures (a list per row: headroom, base
        penalty, weigher columns ...) of the rows that bound the
        normalization, so a caller reads no array for them: every highest
        row, then each lowest row whose value is below its floor (Nova 18),
        or the lowest row of each column with no floor (Nova 34: a column
        with one normalizes from its floor whatever its lowest value is;
        :attr:`below_floor` then says whether a value is below one). A
        lowest value at the floor names no particular row (every row at or
        above the floor gives the same weights), so its row is then any row.

        Kept across calls: a changed row is compared with the kept extremes,
        and a column is scanned again only when its highest row fell back,
        or its lowest row below the floor rose, or after many changes (bulk
        reports). With every value at or above the floors (Nova's weighers
        with minval 0 over figures that are not negative), only the maxima
        are ever scanned.
        """
        n = self.n
        k = self.in_use
        derived = self.derived
        floors = self.floors
        v0 = len(HEADROOM_COLUMNS) + 1 + len(WEIGH_COLUMNS)  # first view row
        rows = self._extremes
        figures = self._extreme_figures
        if rows is None:
            rows = [int(v.argmax()) for v in self.hi_view[:, :n]]
            rows += [int(v.argmin()) for v in self.lo_view[:, :n]]
            self._extremes = rows
            self._extreme_figures = figures = {r: derived[:, r].tolist() for r in rows}
            values = [figures[r][v0 + j] for j, r in enumerate(rows)]
            values[k:] = map(min, values[k:], floors)
            self._extreme_values = values
            self._binding = None
            self._dirty.clear()
        elif self._dirty:
            values = self._extreme_values
            gt = operator.gt
            lt = operator.lt
            for row in self._dirty:
                now = derived[:, row].tolist()
                if row not in rows and not (
                    any(map(gt, now[v0 : v0 + k], values[:k]))
                    or any(map(lt, now[v0 + k : v0 + 2 * k], values[k:]))
                ):
                    continue  # neither an extreme before nor one now
                self._binding = None
                for j in range(2 * k):
                    v = now[v0 + j]
                    best = values[j]
                    if (v > best) if j < k else (v < best):
                        rows[j] = row
                        values[j] = v
                    elif rows[j] == row and v != best and (j < k or best < floors[j - k]):
                        # the extreme row fell back (a lowest value at the floor
                        # stays the floor whatever that row does)
                        view = derived[v0 + j, :n]
                        rows[j] = r = int(view.argmax() if j < k else view.argmin())
                        figures[r] = derived[:, r].tolist()
                        v = figures[r][v0 + j]
                        values[j] = v if j < k else min(v, floors[j - k])
                if row in rows:
                    figures[row] = now
            self._dirty.clear()
            if len(figures) > 4 * k:
                self._extreme_figures = figures = {r: figures[r] for r in rows}
        if self._binding is None:  # (the values changed since it was made)
            values = self._extreme_values
            lows = zip(rows[k:], values[k:], floors, strict=True)
            self._binding = [figures[r] for r in rows[:k]]
            if self._clamps:
                lows_kept = list(lows)
                self._binding += [figures[r] for r, _, f in lows_kept if f == _INF]
                self.below_floor = any(v < f for _, v, f in lows_kept if f != _INF)
            else:
                self._binding += [figures[r] for r, v, f in lows if v < f]
        return rows, self._extreme_values, self._binding

    def _add(self, row: int, start: int, mem: int, vcpus: int, disk: int, sign: int) -> None:
        raw = self.raw[row].tolist()
        raw[start] += sign * mem
        raw[start + 1] += sign * vcpus
        raw[start + 2] += sign * disk
        raw[start + 3] += sign
        self.raw[row] = raw
        self.refresh(row, raw)

    def room_after(
        self, row: int, freed: Sequence[tuple[int, int, int, bool]]
    ) -> tuple[tuple[float, float, float], bool]:
        """The headroom ``row`` would have, and whether it would pass the row-local
        filters, with the claims ``freed`` released, changing nothing: each is
        (mem, vcpus, disk, credited), credited when its release credits it back
        (a report lists it), else it is assumed and its claimed figures go.
        The rule is :meth:`_derive`'s and :meth:`_row_local`'s (a preemption
        asks it of the claims it might release)."""
        raw = self.raw[row].tolist()
        for mem, vcpus, disk, credited in freed:
            start, sign = (_RELEASED, +1) if credited else (_CLAIMED, -1)
            raw[start] += sign * mem
            raw[start + 1] += sign * vcpus
            raw[start + 2] += sign * disk
            raw[start + 3] += sign
        headroom, _, num_instances, num_io_ops = self._derive(
            raw,
            self.custom_ratios.get(row, self.default_ratios),
            self.inventory.get(row) if self.inventory else None,
            self._headroom,
        )
        ok = self._row_local(
            self.active[row], self.stale[row], self.enabled[row], num_instances, num_io_ops
        )
        return headroom, bool(ok)

    def add_claimed(self, row: int, mem: int, vcpus: int, disk: int, sign: int) -> None:
        """Add (sign=+1) or remove (sign=-1) one assumed claim's resources on ``row``."""
        self._add(row, _CLAIMED, mem, vcpus, disk, sign)

    def add_released(self, row: int, mem: int, vcpus: int, disk: int, sign: int) -> None:
        """Credit (sign=+1) or stop crediting (sign=-1) a released, still-listed instance."""
        self._add(row, _RELEASED, mem, vcpus, disk, sign)

    def set_reported(self, row: int, figures: tuple[int, ...]) -> None:
        """Write a report's figures (the ``REPORTED`` columns, in order) and refresh."""
        self.raw[row, REPORTED] = figures
        self.refresh(row, [*figures, *self.raw[row, REPORTED.stop :].tolist()])
