"""Host weighers: raw per-row figures that the engine normalizes and sums.

As in ``nova/weights.py``, each weigher's raw values over the hosts that
passed the filters are normalized to ``(value - lo) / (hi - lo)``,
multiplied by the weigher's multiplier, and summed; the highest total wins.
``hi`` is the highest value. A weigher may declare a ``minval``; Nova's
RAM, CPU, Disk and IoOps weighers set ``minval = 0`` (no Nova weigher sets
a ``maxval``), so with no negative value a weight is its value over the
highest (free RAM 20 and 50 MB weigh 0.4 and 1.0). Without one, ``lo`` is
the lowest value. With one, by ``SchedulerConfig.nova_release``:

* 18 (18.0.0): ``lo`` is the lowest value, or the minval when that is
  lower, so a negative value (over-committed RAM) lowers ``lo`` to itself;
* 34 (34.0.0): a raw value below the minval counts as the minval
  (``BaseWeigher.weigh_objects``: ``max(weight, minval)``) and ``lo`` is
  the minval (``normalize(minval=...)``), so a host over-committed past its
  size (free RAM -2048 MB) weighs 0, as one with none free.

When ``hi <= lo`` (one value, all equal with no minval, all 0; under 34 all
at or below the minval) every weight is 0. Nova 18 kept the extremes it
found on the weigher object across requests (its bug 1870096, fixed in
22.0.0); here they are found afresh for every instance placed.

The protocol (also how a user plugs in a weigher)::

    class MyWeigher:
        name = "MyWeigher"
        multiplier = 2.0
        minval = 0.0        # optional, as Nova's BaseWeigher.minval; None for plain min-max
        maxval = None       # optional, as Nova's BaseWeigher.maxval: the top of the range
        def weigh_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.float64] | None:
            return table.column("free_ram")     # one float per row [:table.n]

Return ``None`` when the weigher has nothing to say for this request.

HypervisorVersionWeigher (Nova 34's; Nova 18 had none) weighs a host's
reported ``hypervisor_version`` (0 when it reports none), plain min-max:
newer first with the default multiplier. It is built under ``nova_release``
34, or with a multiplier that is not 0; it says nothing while every host
that reported has the same version (most fleets, and one that reports no
facts), so the ranking's shortcut still answers then.

BuildFailureWeigher (Nova's, 17.0.0 and later) weighs a host's reported
``failed_builds``, plain min-max, times the negated multiplier
(``multiplier_sign`` -1: Nova's ``weight_multiplier`` is ``-1 x`` the
configured or aggregate value), so with the default 1,000,000 a host with
failed builds goes after every host without (failed builds 0, 1, 10, 100
weigh 0, -10,000, -100,000, -1,000,000). It says nothing while every host
that reported has the same count (most of the time: none), as the
hypervisor weigher; both read the facts book (``FactsBook.figures``).

MetricsWeigher (Nova's) weighs the sum of ``value x ratio`` over
``metrics_weight_setting`` of the metrics a host reports, plain min-max.
A host without one of them weighs ``metrics_weight_of_unavailable`` when
that metric's ratio and the host's multiplier are not 0, else the sum of
those it has; with ``metrics_required`` (Nova's default), a weighed host
without one (when more than one host is weighed, as Nova weighs nothing
then) fails the request with InvalidRequest, as Nova's weigher raises
ComputeHostMetricNotFound (:meth:`MetricsWeigher.check_weighed`; the
MetricsFilter keeps such hosts out). No setting: it says nothing.

ImagePropertiesWeigher (Nova's, 31.0.0 and later) weighs, per host, the
image properties (name and value) the request's image shares with the
images of the instances the host holds: each shared property counts the
instances that have it, times its ratio in ``image_props_weight_setting``
(1 each when the setting is empty; a property the setting does not name
weighs 0 then), plain min-max. What a host holds is the claims the ledger
counts per property (``ClaimLedger.image_rows``): the instances actorsched
placed there, from the moment of their claim (Nova counts an instance from
its compute's next instance cast), and not the earlier instances of the
same request (Nova's multi-create does not add them to a HostState's
instances either). An instance a host reports that actorsched did not place
counts no property (Nova reads its image from its database, which
actorsched does not read). Built only when its multiplier is not 0: Nova's
weigher weighs nothing with a configured 0, whatever an aggregate's
``image_props_weight_multiplier`` says.

A weigher may also name a ``multiplier_key``: an aggregate metadata key
that overrides its multiplier for the hosts of that aggregate, as Nova's
weighers read theirs through ``utils.get_weight_multiplier`` (19.0.0 and
later; see :func:`row_multipliers`). Each built-in weigher names its
config option's, ``ram_weight_multiplier`` and so on (and an optional
``multiplier_sign``, -1 for BuildFailureWeigher, by which the metadata's
value is multiplied). Normalization is
over the hosts as before; only the multiplier is per host, so a host's
weight is ``multiplier(host) x (value - lo) / (hi - lo)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidRequest
from ..models import SchedulerConfig
from .aggregates import AggregateBook
from .filters import PlacementContext, group_members
from .host_facts import HostFacts
from .table import HostTable

__all__ = [
    "BuildFailureWeigher",
    "ColumnWeigher",
    "HostWeigher",
    "HypervisorVersionWeigher",
    "ImagePropertiesWeigher",
    "MetricsWeigher",
    "SoftGroupWeigher",
    "builtin_weighers",
    "multiplier_key",
    "row_multipliers",
    "weigher_ceiling",
    "weigher_floor",
]

FloatColumn = NDArray[np.float64]


@runtime_checkable
class HostWeigher(Protocol):
    """A weigher: raw values per row ``[:table.n]`` (higher is better before the multiplier)."""

    name: str
    multiplier: float

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> FloatColumn | None: ...


def weigher_floor(weigher: HostWeigher) -> float:
    """A weigher's ``minval``, +inf if none: the lowest ``lo`` its normalization may
    use (Nova 18), or where it starts, its values clamped to it (Nova 34); with
    +inf, at its lowest value.

    ``minval`` is optional in the protocol (a plug-in without it is
    normalized between its lowest and highest values).
    """
    minval: float | None = getattr(weigher, "minval", None)
    return np.inf if minval is None else float(minval)


def weigher_ceiling(weigher: HostWeigher) -> float | None:
    """A weigher's ``maxval``, None if none (optional in the protocol, as Nova's
    ``BaseWeigher.maxval``; no built-in weigher has one, as no Nova 34 weigher):
    the top of its normalization, its values above it clamped to it (Nova 34)."""
    maxval: float | None = getattr(weigher, "maxval", None)
    return None if maxval is None else float(maxval)


def multiplier_key(weigher: HostWeigher) -> str | None:
    """The aggregate metadata key that overrides ``weigher``'s multiplier, or None
    (``multiplier_key`` is optional in the protocol, as ``minval`` is)."""
    key: str | None = getattr(weigher, "multiplier_key", None)
    return key


def row_multipliers(
    weigher: HostWeigher, table: HostTable, aggregates: AggregateBook | None
) -> float | FloatColumn:
    """``weigher``'s multiplier for each row ``[:table.n]``, or its own multiplier
    when that is every row's (no aggregate has its key: the common case).

    Nova's ``utils.get_weight_multiplier``: the ``multiplier_key`` values of
    the host's aggregates, the smallest when several name one, else (none,
    or one that is not a number) the configured multiplier.
    """
    key = multiplier_key(weigher)
    if aggregates is None or key is None or not aggregates.has(key):
        return weigher.multiplier
    sign: float = getattr(weigher, "multiplier_sign", 1.0)
    by_membership = aggregates.multipliers(key, sign * weigher.multiplier)
    per_row: FloatColumn = by_membership[table.agg_set[: table.n]]
    return per_row if sign == 1.0 else sign * per_row


class ColumnWeigher:
    """A weigher whose raw values are one of the table's weigher columns.

    ``minval`` is 0, as for Nova's RAM, CPU, Disk and IoOps weighers.
    """

    column = ""
    minval: float | None = 0.0
    multiplier_key: str | None = None

    def __init__(self, name: str, multiplier: float) -> None:
        self.name = name
        self.multiplier = multiplier

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> FloatColumn | None:
        return table.floats[self.column][: table.n]


class RAMWeigher(ColumnWeigher):
    """Free RAM (Nova's ``free_ram_mb``, no ratio): spread by default, stack with a
    negative multiplier."""

    column = "free_ram"
    multiplier_key = "ram_weight_multiplier"


class CPUWeigher(ColumnWeigher):
    """Free vCPUs with the host's own allocation ratio applied, as Nova's CPUWeigher
    (``vcpus_total x cpu_allocation_ratio - vcpus_used``): the ratio its report
    gives, else the configured one, never an aggregate's (AggregateCoreFilter's
    ratio is the filter's alone)."""

    column = "vcpu_headroom"
    multiplier_key = "cpu_weight_multiplier"


class DiskWeigher(ColumnWeigher):
    """Free local disk (no ratio), as Nova's DiskWeigher."""

    column = "free_disk"
    multiplier_key = "disk_weight_multiplier"


class IoOpsWeigher(ColumnWeigher):
    """Concurrent I/O operations; the default multiplier -1.0 prefers idle hosts."""

    column = "num_io_ops"
    multiplier_key = "io_ops_weight_multiplier"


class NumInstancesWeigher(ColumnWeigher):
    """Instance count; default multiplier 0.0 (off), as in Nova (28.0.0 and later).

    Nova's has no ``minval``: plain min-max between the fewest and the most.
    """

    column = "num_instances"
    minval = None
    multiplier_key = "num_instances_weight_multiplier"


class SoftGroupWeigher:
    """Base of the server-group weighers: they weigh only requests of their policy."""

    policy = ""
    sign = 1.0
    multiplier_key: str | None = None

    def __init__(self, name: str, multiplier: float) -> None:
        self.name = name
        self.multiplier = multiplier

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> FloatColumn | None:
        group = ctx.spec.group
        if group is None or group.policy != self.policy:
            return None  # (group_members says so too: this spares most requests the call)
        members = group_members(table, ctx, self.policy)
        if members is None:
            return None
        rows, counts = members
        raw = np.zeros(table.n, dtype=np.float64)
        np.add.at(raw, rows, self.sign * counts)
        return raw


class ServerGroupSoftAffinityWeigher(SoftGroupWeigher):
    """More group members on a host -> higher weight."""

    policy = "soft-affinity"
    multiplier_key = "soft_affinity_weight_multiplier"


class ServerGroupSoftAntiAffinityWeigher(SoftGroupWeigher):
    """More group members on a host -> lower weight."""

    policy = "soft-anti-affinity"
    sign = -1.0
    multiplier_key = "soft_anti_affinity_weight_multiplier"


class FactsWeigher:
    """A weigher of one figure of the host's facts (0 for a host that reports none):
    no ``minval``, plain min-max; ``None`` (nothing to say) while every host that
    reported has the same figure, so the ranking's shortcut still answers then."""

    minval: float | None = None
    multiplier_key: str | None = None

    def __init__(self, name: str, multiplier: float) -> None:
        self.name = name
        self.multiplier = multiplier

    def figures(self, table: HostTable) -> FloatColumn:
        """The figure of every facts id."""
        raise NotImplementedError

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> FloatColumn | None:
        if not table.host_facts.held:
            return None  # no host reports facts: every figure is 0
        figures = self.figures(table)
        if figures.min() == figures.max():
            return None  # every facts held has one figure (0 failed builds ...)
        n = table.n
        values: FloatColumn = figures[table.facts_id[:n]]
        live = values[table.active[:n]]
        if not live.size or live.min() == live.max():
            return None  # one figure: every host weighs the same
        return values


class HypervisorVersionWeigher(FactsWeigher):
    """Newer hypervisors weigh more: the host's ``hypervisor_version``, Nova 34's
    HypervisorVersionWeigher."""

    multiplier_key = "hypervisor_version_weight_multiplier"

    def figures(self, table: HostTable) -> FloatColumn:
        return table.host_facts.versions()


def _failed_builds(facts: HostFacts) -> float:
    return facts.builds or 0  # a stat that is no whole number: Nova fails the host


class BuildFailureWeigher(FactsWeigher):
    """Hosts with recent failed builds weigh less: the host's ``failed_builds``
    times the negated multiplier, Nova's BuildFailureWeigher (``multiplier`` here
    is Nova's ``weight_multiplier``, ``-1 x`` the configured value)."""

    multiplier_key = "build_failure_weight_multiplier"
    multiplier_sign = -1.0

    def __init__(self, name: str, multiplier: float) -> None:
        super().__init__(name, self.multiplier_sign * multiplier)

    def figures(self, table: HostTable) -> FloatColumn:
        return table.host_facts.figures(self.multiplier_key, _failed_builds)


MetricsSetting = tuple[tuple[str, float], ...]


class MetricsWeigher:
    """The weighted sum of the metrics a host reports, Nova's MetricsWeigher (see
    the module's rules); plain min-max."""

    minval: float | None = None
    multiplier_key = "metrics_weight_multiplier"

    def __init__(
        self,
        name: str,
        multiplier: float,
        setting: MetricsSetting,
        required: bool,
        weight_of_unavailable: float,
    ) -> None:
        self.name = name
        self.multiplier = multiplier
        self.setting = setting
        self.required = required
        self.weight_of_unavailable = weight_of_unavailable

    def _sum(self, facts: HostFacts) -> float:
        have = facts.metrics_map
        value = 0.0
        for name, ratio in self.setting:  # Nova's order: the same sum to the last bit
            if name in have:
                value += have[name] * ratio
        return value

    def _unavailable(self, facts: HostFacts) -> float:
        have = facts.metrics_map
        return float(any(ratio != 0 and name not in have for name, ratio in self.setting))

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> FloatColumn | None:
        if not self.setting:
            return None
        book = table.host_facts
        n = table.n
        ids = table.facts_id[:n]
        values: FloatColumn = book.figures((self.name, self.setting), self._sum)[ids]
        unavailable = book.figures((self.name, self.setting, "unavailable"), self._unavailable)
        missing = unavailable[ids] != 0
        if missing.any():
            multiplier = row_multipliers(self, table, ctx.aggregates)
            missing &= np.asarray(multiplier) != 0  # Nova: ratio x multiplier != 0
            values = np.where(missing, self.weight_of_unavailable, values)
        live = values[table.active[:n]]
        if not live.size or live.min() == live.max():
            return None  # every host weighs the same
        return values

    def check_weighed(self, table: HostTable, rows: NDArray[np.intp]) -> None:
        """With ``required``: InvalidRequest when one of ``rows`` (the hosts weighed,
        more than one) reports not every metric of the setting."""
        if not (self.required and self.setting) or rows.size < 2:
            return
        names = frozenset(name for name, _ in self.setting)
        lacks = table.host_facts.answers(
            (self.name, names, "lacks"), lambda facts: not names.issubset(facts.metrics_map)
        )
        found = lacks[table.facts_id[rows]]
        if found.any():
            row = int(rows[int(found.argmax())])
            facts = table.host_facts.values[int(table.facts_id[row])]
            name = next(n for n, _ in self.setting if n not in facts.metrics_map)
            raise InvalidRequest(
                f"MetricsWeigher: host {table.name_of[row]!r} reports no metric {name!r} "
                "and [metrics] required is true (Nova's weigher raises "
                "ComputeHostMetricNotFound): enable MetricsFilter, or set required false"
            )


class ImagePropertiesWeigher:
    """Hosts holding instances of the request's image properties weigh more (see
    the module's rules): Nova's ImagePropertiesWeigher; plain min-max."""

    minval: float | None = None
    multiplier_key = "image_props_weight_multiplier"

    def __init__(
        self, name: str, multiplier: float, setting: Sequence[tuple[str, float]] = ()
    ) -> None:
        self.name = name
        self.multiplier = multiplier
        self.setting = dict(setting)  # Nova's dict: a name given twice, its last ratio

    def _ratio(self, key: str) -> float:
        return self.setting.get(key, 0.0) if self.setting else 1.0

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> FloatColumn | None:
        props = ctx.spec.image_properties
        held = ctx.ledger.image_rows
        # each property the request shares with a held instance's image, by its ratio;
        # in one order (the keys sorted), so the sum is the same every time
        shared = [
            (ratio, rows)
            for key in sorted(props)
            if (rows := held.get((key, props[key]))) and (ratio := self._ratio(key))
        ]
        if not shared:
            return None
        n = table.n
        raw = np.zeros(n, dtype=np.float64)
        for ratio, rows in shared:
            at = np.fromiter(rows.keys(), dtype=np.intp, count=len(rows))
            raw[at] += ratio * np.fromiter(rows.values(), dtype=np.float64, count=len(rows))
            # this request's earlier instances (they carry its image) do not count
            for row in ctx.chosen_rows:
                raw[row] -= ratio
        live = raw[table.active[:n]]
        if not live.size or live.min() == live.max():
            return None  # every host weighs the same
        return raw


def builtin_weighers(config: SchedulerConfig) -> list[HostWeigher]:
    """Nova's weighers that actorsched builds, with the multipliers from ``config``
    (HypervisorVersionWeigher under ``nova_release`` 34 or with a multiplier set:
    Nova 18 has none; MetricsWeigher with a ``metrics_weight_setting``: without
    one it weighs nothing; ImagePropertiesWeigher with a multiplier that is not 0)."""
    facts: list[HostWeigher] = [
        BuildFailureWeigher("BuildFailureWeigher", config.build_failure_weight_multiplier)
    ]
    if config.nova_release == 34 or config.hypervisor_version_weight_multiplier != 0:
        facts.append(
            HypervisorVersionWeigher(
                "HypervisorVersionWeigher", config.hypervisor_version_weight_multiplier
            )
        )
    if config.image_props_weight_multiplier != 0:
        facts.append(
            ImagePropertiesWeigher(
                "ImagePropertiesWeigher",
                config.image_props_weight_multiplier,
                config.image_props_weight_setting,
            )
        )
    if config.metrics_weight_setting:
        facts.append(
            MetricsWeigher(
                "MetricsWeigher",
                config.metrics_weight_multiplier,
                tuple(config.metrics_weight_setting),
                config.metrics_required,
                config.metrics_weight_of_unavailable,
            )
        )
    return [
        RAMWeigher("RAMWeigher", config.ram_weight_multiplier),
        CPUWeigher("CPUWeigher", config.cpu_weight_multiplier),
        DiskWeigher("DiskWeigher", config.disk_weight_multiplier),
        IoOpsWeigher("IoOpsWeigher", config.io_ops_weight_multiplier),
        NumInstancesWeigher("NumInstancesWeigher", config.num_instances_weight_multiplier),
        ServerGroupSoftAffinityWeigher(
            "ServerGroupSoftAffinityWeigher", config.soft_affinity_weight_multiplier
        ),
        ServerGroupSoftAntiAffinityWeigher(
            "ServerGroupSoftAntiAffinityWeigher", config.soft_anti_affinity_weight_multiplier
        ),
        *facts,
    ]
