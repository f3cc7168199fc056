"""Host facts: what each host's hypervisor is and runs, kept once per distinct value,
and the filters of Nova's that read them.

Rules this module keeps (Nova 34.0.0's meaning: ``nova/scheduler/filters/
compute_capabilities_filter.py`` and ``image_props_filter.py``; no code of theirs):

* A host's facts are its report's :data:`FACT_FIELDS` (what Nova's compute
  node says of its hypervisor). They change seldom and most hosts of a
  fleet share them, so the table keeps each distinct value once, in its
  :class:`FactsBook` (id 0: a host that reports none), and a facts id per
  row (``HostTable.facts_id``). Only the engine sets them, from reports.
* A filter over facts decides once per facts id and answers per row with
  one gather (``answers[table.facts_id[:n]]``), as the aggregate filters do
  per membership; the answers are kept per (filter, request key) until a
  facts value the book did not have appears, or the book is compacted.
* The book keeps what a filter or weigher works out per facts id (answers,
  figures) until the book is compacted; between compactions ids are only
  appended, so a kept array is extended for the new ids alone, never
  worked out again for the old ones (a fleet whose metrics make each
  report's facts distinct pays per new value, not per id held).
* MetricsFilter (Nova 34's ``metrics_filter.py``) passes the hosts that
  report every metric ``metrics_weight_setting`` names; the weighers of
  failed builds and metrics read their figures per facts id
  (:meth:`FactsBook.figures`).
* ComputeCapabilitiesFilter reads Nova's ``HostState`` by attribute name
  (:data:`HOST_STATE_ATTRIBUTES`). The host's figures among them
  (``free_ram_mb`` ...) change with each claim: they are read per row, once
  per distinct value, as they stood before this request's first instance
  (Nova runs the filter once per request). The facts are read per facts
  id. What actorsched does not hold (:data:`UNHELD_ATTRIBUTES`) reads as
  unset, so Nova's fallback to the host's ``stats`` applies.
* The extra-spec operators are :func:`~.aggregates.match_extra_spec`'s, the
  one evaluator of Nova's ``extra_specs_ops``; version predicates are
  :func:`~actorsched.models.version_predicate`'s, the one that validated them.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..models import HostReport, release, version_predicate
from .aggregates import match_extra_spec

if TYPE_CHECKING:
    from .filters import PlacementContext
    from .table import HostTable

__all__ = [
    "FACT_ATTRIBUTES",
    "FACT_FIELDS",
    "HOST_STATE_ATTRIBUTES",
    "NO_FACTS",
    "ROW_ATTRIBUTES",
    "UNHELD_ATTRIBUTES",
    "ComputeCapabilitiesFilter",
    "FactsBook",
    "FactsKey",
    "HostFacts",
    "ImagePropertiesFilter",
    "MetricsFilter",
    "capability_checks",
    "facts_key",
    "row_values",
]

BoolColumn = NDArray[np.bool_]

# the HostReport fields that are a host's facts
FACT_FIELDS = (
    "hypervisor_type",
    "hypervisor_version",
    "supported_instances",
    "cpu_info",
    "stats",
    "failed_builds",
    "metrics",
)
# kept answers before they are dropped and worked out again: at most this many
# answer arrays, and this many answers in all
_MAX_ANSWERS = 4_096
_MAX_ANSWER_CELLS = 1 << 24
# distinct facts the book may hold beyond twice those rows use before it is
# compacted (facts no row reports any more are forgotten then)
_COMPACT_SLACK = 64

# Nova 34's HostState attributes (``hasattr`` is true of each, so an unscoped
# extra spec naming one is checked): the host's figures, read per row ...
ROW_ATTRIBUTES = (
    "host",
    "nodename",
    "hypervisor_hostname",
    "total_usable_ram_mb",
    "total_usable_disk_gb",
    "disk_mb_used",
    "free_ram_mb",
    "free_disk_mb",
    "vcpus_total",
    "vcpus_used",
    "num_instances",
    "num_io_ops",
    "ram_allocation_ratio",
    "cpu_allocation_ratio",
    "disk_allocation_ratio",
)
# ... the facts, read per facts id ...
FACT_ATTRIBUTES = tuple(f for f in FACT_FIELDS if f != "metrics")
# ... and those actorsched does not hold: unset here, so the stats are read
UNHELD_ATTRIBUTES = (
    "host_ip",
    "pci_stats",
    "numa_topology",
    "limits",
    "metrics",
    "aggregates",
    "instances",
    "service",
    "uuid",
    "cell_uuid",
    "updated",
    "allocation_candidates",
    "update",
    "consume_from_request",
)
HOST_STATE_ATTRIBUTES = frozenset((*ROW_ATTRIBUTES, *FACT_ATTRIBUTES, *UNHELD_ATTRIBUTES))
_CAPABILITIES_SCOPE = "capabilities"
# Nova's ComputeCapabilitiesFilter reads this flavor extra spec as a
# capabilities requirement of at least that many bits
_MAXPHYSADDR_SPEC = "hw:maxphysaddr_bits"
_MAXPHYSADDR_CAPABILITY = "capabilities:cpu_info:maxphysaddr:bits"
_COMPARE: Mapping[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    ">": operator.gt,
}


def _loads(text: str | None) -> Any:
    """``text`` as JSON (Nova's ``jsonutils.loads``), or None when it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


# what a report says of its hypervisor, in FACT_FIELDS order: the book's key
FactsKey = tuple[
    str | None,
    int | None,
    tuple[tuple[str, ...], ...],
    str | None,
    tuple[tuple[str, str], ...],
    int,
    tuple[tuple[str, float], ...],
]


@dataclass(frozen=True, slots=True)
class HostFacts:
    """One distinct set of facts, as the book keeps it (:meth:`of` makes one)."""

    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    supported_instances: tuple[tuple[str, ...], ...] = ()
    cpu_info: str | None = None  # the JSON text, as reported
    stats: tuple[tuple[str, str], ...] = ()  # in the order reported
    failed_builds: int = 0
    metrics: tuple[tuple[str, float], ...] = ()  # in the order reported
    # derived once, not part of what the facts are
    stats_map: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    cpu: Any = field(default=None, compare=False, repr=False)  # cpu_info parsed, or None
    metrics_map: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)
    # Nova's HostState.failed_builds: the report's count, else its stats' (Nova:
    # int(stats.get('failed_builds', 0))); None when that stat is no whole number
    builds: int | None = field(default=0, compare=False, repr=False)

    @classmethod
    def of(cls, key: FactsKey) -> HostFacts:
        """The facts of ``key`` (:func:`facts_key`), with what they derive."""
        (
            hypervisor_type,
            hypervisor_version,
            supported_instances,
            cpu_info,
            stats,
            failed_builds,
            metrics,
        ) = key
        return cls(
            hypervisor_type,
            hypervisor_version,
            supported_instances,
            cpu_info,
            stats,
            failed_builds,
            metrics,
            dict(stats),
            _loads(cpu_info),
            dict(metrics),
            failed_builds or _stat_count(stats),
        )

    @property
    def key(self) -> FactsKey:
        """The :func:`facts_key` of a report that gives these facts."""
        return (
            self.hypervisor_type,
            self.hypervisor_version,
            self.supported_instances,
            self.cpu_info,
            self.stats,
            self.failed_builds,
            self.metrics,
        )

    def report_fields(self) -> dict[str, Any]:
        """The HostReport fields that give these facts (those not at their defaults)."""
        fields: dict[str, Any] = {}
        if self.hypervisor_type is not None:
            fields["hypervisor_type"] = self.hypervisor_type
        if self.hypervisor_version is not None:
            fields["hypervisor_version"] = self.hypervisor_version
        if self.supported_instances:
            fields["supported_instances"] = [list(t) for t in self.supported_instances]
        if self.cpu_info is not None:
            fields["cpu_info"] = self.cpu_info
        if self.stats:
            fields["stats"] = dict(self.stats)
        if self.failed_builds:
            fields["failed_builds"] = self.failed_builds
        if self.metrics:
            fields["metrics"] = dict(self.metrics)
        return fields

    def attribute(self, name: str) -> Any:
        """What Nova's ``HostState.<name>`` holds of these facts; None when unset
        (or not a fact: the caller reads the stats then)."""
        if name == "supported_instances":
            return [list(t) for t in self.supported_instances]
        if name == "stats":
            return dict(self.stats)  # Nova: ``compute.stats or {}``, never None
        if name == "failed_builds":
            return self.builds
        if name in ("hypervisor_type", "hypervisor_version", "cpu_info"):
            return getattr(self, name)
        return None


def _stat_count(stats: tuple[tuple[str, str], ...]) -> int | None:
    """A compute's ``failed_builds`` stat as Nova reads it (0 when absent), or None."""
    text = dict(stats).get("failed_builds", "0")
    try:
        return int(text)
    except ValueError:
        return None


NO_FACTS = HostFacts()


def facts_key(report: HostReport) -> FactsKey | None:
    """What ``report`` says of its hypervisor, or None when it says nothing (most
    reports of a fleet that reports no facts: a few dict lookups)."""
    d = report.__dict__  # faster than pydantic's attributes
    if (
        d["hypervisor_type"] is None
        and d["hypervisor_version"] is None
        and not d["supported_instances"]
        and d["cpu_info"] is None
        and not d["stats"]
        and not d["failed_builds"]
        and not d["metrics"]
    ):
        return None
    return (
        d["hypervisor_type"],
        d["hypervisor_version"],
        tuple(map(tuple, d["supported_instances"])),
        d["cpu_info"],
        tuple(d["stats"].items()),
        d["failed_builds"],
        tuple(d["metrics"].items()),
    )


class FactsBook:
    """Every distinct set of facts a row reports, by id (0: none), and kept answers."""

    def __init__(self) -> None:
        self.values: list[HostFacts] = [NO_FACTS]
        self._ids: dict[FactsKey, int] = {NO_FACTS.key: 0}
        self._answers: dict[object, BoolColumn] = {}
        self._figures: dict[object, NDArray[np.float64]] = {}
        self._compact_at = _COMPACT_SLACK

    @property
    def held(self) -> bool:
        """True once some report gave facts (until a compaction finds none left):
        while False, no row has any and a report without facts reads no id."""
        return len(self.values) > 1

    def assign(self, table: HostTable, row: int, key: FactsKey | None) -> None:
        """Give ``row`` the id of the facts of ``key`` (:func:`facts_key`; None: none
        reported) in ``table.facts_id``."""
        if key is None:
            table.facts_id[row] = 0
            return
        fid = self._ids.get(key)
        if fid is None:
            if len(self.values) >= self._compact_at:
                self._compact(table)
            fid = len(self.values)
            self.values.append(HostFacts.of(key))
            self._ids[key] = fid
        table.facts_id[row] = fid

    def versions(self) -> NDArray[np.float64]:
        """Nova's ``hypervisor_version or 0`` of the facts of every id (HypervisorVersionWeigher's
        raw value)."""
        return self.figures("hypervisor_version", _version_or_0)

    def figures(self, key: object, of: Callable[[HostFacts], float]) -> NDArray[np.float64]:
        """``of`` the facts of every id, as a float array, kept under ``key``."""
        found: NDArray[np.float64] = self._kept(self._figures, key, of, np.float64)
        return found

    def answers(self, key: object, decide: Callable[[HostFacts], bool]) -> BoolColumn:
        """``decide`` for the facts of every id, as a bool array, kept under ``key``."""
        found: BoolColumn = self._kept(self._answers, key, decide, np.bool_)
        return found

    def _kept(
        self, kept: dict[object, Any], key: object, of: Callable[[HostFacts], Any], kind: Any
    ) -> Any:
        """``of`` every id's facts under ``key`` in ``kept``: worked out for the ids
        appended since (ids are only appended between compactions, which clear it)."""
        found = kept.get(key)
        count = len(self.values)
        done = 0 if found is None else len(found)
        if done < count:
            if found is None and len(kept) >= min(_MAX_ANSWERS, _MAX_ANSWER_CELLS // count):
                kept.clear()
            new = np.fromiter(map(of, self.values[done:]), dtype=kind, count=count - done)
            found = kept[key] = new if found is None else np.concatenate((found, new))
        return found

    def _compact(self, table: HostTable) -> None:
        """Forget the facts no row has, renumbering the rows' ids (order kept)."""
        n = table.n
        ids = table.facts_id[:n]
        used = np.unique(ids).tolist()
        keep = [0, *(i for i in used if i)]
        renumber = np.zeros(len(self.values), dtype=np.int32)
        renumber[keep] = np.arange(len(keep), dtype=np.int32)
        ids[:] = renumber[ids]
        self.values = [self.values[i] for i in keep]
        self._ids = {facts.key: i for i, facts in enumerate(self.values)}
        self._answers.clear()
        self._figures.clear()
        self._compact_at = 2 * len(self.values) + _COMPACT_SLACK


def _version_or_0(facts: HostFacts) -> float:
    return facts.hypervisor_version or 0


# -- ComputeCapabilitiesFilter ------------------------------------------------------

# one requirement: the attribute path, what it must match, and whether the key
# was unscoped (then checked only on a host that has that attribute or stat)
Check = tuple[tuple[str, ...], str, bool]


def capability_checks(extra_specs: Mapping[str, str]) -> tuple[Check, ...]:
    """The requirements ComputeCapabilitiesFilter reads in ``extra_specs``.

    Unscoped keys and ``capabilities:`` ones, split at ``:`` into an attribute
    path; ``hw:maxphysaddr_bits`` as ``capabilities:cpu_info:maxphysaddr:bits``
    of at least that many; keys of other scopes are not this filter's.

    >>> capability_checks({"capabilities:cpu_info:vendor": "Intel", "hw:x": "1", "a": "2"})
    ((('cpu_info', 'vendor'), 'Intel', False), (('a',), '2', True))
    """
    specs = dict(extra_specs)
    bits = specs.pop(_MAXPHYSADDR_SPEC, None)
    if bits is not None:
        specs[_MAXPHYSADDR_CAPABILITY] = ">= " + bits
    checks: list[Check] = []
    for key, requirement in specs.items():
        scope = tuple(key.split(":"))
        if len(scope) == 1:
            checks.append((scope, requirement, True))
        elif scope[0] == _CAPABILITIES_SCOPE:
            checks.append((scope[1:], requirement, False))
    return tuple(checks)


def _resolve(cap: Any, path: Sequence[str]) -> Any:
    """Nova's ``_get_capabilities`` past the attribute itself: JSON text is loaded,
    a dict indexed, anything else read by attribute; None when a step finds nothing."""
    for name in path:
        if isinstance(cap, str):
            cap = _loads(cap)
            if cap is None:
                return None
        # not a dict: Nova reads the attribute, else ``.stats``, which no value has
        cap = cap.get(name) if isinstance(cap, dict) else getattr(cap, name, None)
        if cap is None:
            return None
    return cap


def _matches(cap: Any, requirement: str) -> bool:
    return cap is not None and match_extra_spec(str(cap), requirement)


def _satisfies(checks: tuple[Check, ...], facts: HostFacts) -> bool:
    """Do ``facts`` meet every one of ``checks`` (none of them of a row attribute)?"""
    stats = facts.stats_map
    for path, requirement, unscoped in checks:
        first = path[0]
        if unscoped and first not in HOST_STATE_ATTRIBUTES and first not in stats:
            continue  # neither an attribute nor a stat of this host: not for it
        value = facts.attribute(first)
        if value is None:
            value = stats.get(first)
        if not _matches(_resolve(value, path[1:]), requirement):
            return False
    return True


def row_values(
    table: HostTable, ctx: PlacementContext, name: str, before_request: bool = True
) -> NDArray[Any]:
    """Nova's ``HostState.<name>`` (one of :data:`ROW_ATTRIBUTES`) of every row
    ``[:n]``: as it stood before this request's first instance was claimed (its
    earlier instances given back: a filter Nova runs once per request), or with
    ``before_request`` False as the claims leave it now (one Nova runs for each
    instance)."""
    n = table.n
    if name in ("host", "nodename", "hypervisor_hostname"):
        names = [host or "" for host in table.name_of[:n]]
        if name != "host":
            for row, node in table.node_of.items():
                names[row] = node
        return np.array(names, dtype=object)
    ints = table.ints
    values: NDArray[Any]
    if name == "total_usable_ram_mb":
        values = ints["mem_total"][:n].copy()
    elif name == "total_usable_disk_gb":
        values = ints["disk_total"][:n].copy()
    elif name == "disk_mb_used":
        values = ints["disk_used"][:n] * 1024
    elif name == "vcpus_total":
        values = ints["vcpus_total"][:n].copy()
    elif name == "vcpus_used":
        values = ints["vcpus_used"][:n] + ints["claimed_vcpus"][:n] - ints["released_vcpus"][:n]
    elif name in ("ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio"):
        # the table's RATIO_ROWS: cpu the host's own (Nova's HostState has no
        # aggregate's); ram and disk the resource filters', the host's own unless
        # an Aggregate{Ram,Disk}Filter (Nova 18's) is on
        ratio_row = {"ram": 0, "cpu": 3, "disk": 2}[name.partition("_")[0]]
        return table.ratios[ratio_row, :n].copy()
    else:  # free_ram_mb, free_disk_mb, num_instances, num_io_ops
        column = {"free_ram_mb": "free_ram", "free_disk_mb": "free_disk"}.get(name, name)
        values = table.column(column).astype(np.int64)
        if name == "free_disk_mb":
            values *= 1024
    chosen = ctx.chosen_rows
    if chosen and before_request:
        spec = ctx.spec
        back = {
            "free_ram_mb": spec.memory_mb,
            "free_disk_mb": spec.disk_gb * 1024,
            "vcpus_used": -spec.vcpus,
            "num_instances": -1,
            "num_io_ops": -1,
        }.get(name)
        if back:
            np.add.at(values, np.asarray(chosen, dtype=np.intp), back)
    return values


def _row_check(table: HostTable, ctx: PlacementContext, check: Check) -> BoolColumn:
    """One requirement of a row attribute, for every row: decided once per distinct value."""
    path, requirement, _ = check
    distinct, inverse = np.unique(row_values(table, ctx, path[0]), return_inverse=True)
    answers = np.fromiter(
        (_matches(_resolve(value, path[1:]), requirement) for value in distinct.tolist()),
        dtype=np.bool_,
        count=len(distinct),
    )
    passed: BoolColumn = answers[inverse]
    return passed


class ComputeCapabilitiesFilter:
    """Hosts whose capabilities meet the flavor's extra specs (Nova 34).

    A ``capabilities:a:b`` key reads attribute ``a`` of Nova's ``HostState``
    (its ``stats`` entry when unset) and then ``b`` inside it (JSON text such
    as ``cpu_info`` is loaded); an unscoped key ``a`` likewise, but only on a
    host that has such an attribute or stat (others ignore it); keys of
    other scopes are ignored, and ``hw:maxphysaddr_bits`` asks
    ``capabilities:cpu_info:maxphysaddr:bits`` of at least that many. The
    value found, as text, must match the requirement with Nova's
    extra_specs_ops (``>= 4``, ``<in> avx``, ``s== Intel`` ..., else
    equality). A path that finds nothing fails the host. No such key in the
    request: the filter does not apply.

    >>> ComputeCapabilitiesFilter.name
    'ComputeCapabilitiesFilter'
    """

    name = "ComputeCapabilitiesFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        specs = ctx.spec.extra_specs
        if not specs:
            return None
        checks = capability_checks(specs)
        if not checks:
            return None
        of_facts = tuple(c for c in checks if c[0][0] not in ROW_ATTRIBUTES)
        passed: BoolColumn | None = None
        if of_facts:
            book = table.host_facts
            answers = book.answers((self.name, of_facts), lambda f: _satisfies(of_facts, f))
            if not answers.all():  # else every host passes them: no say
                passed = answers[table.facts_id[: table.n]]
        for check in checks:
            if check[0][0] in ROW_ATTRIBUTES:
                mask = _row_check(table, ctx, check)
                passed = mask if passed is None else passed & mask
        return passed


# -- ImagePropertiesFilter ------------------------------------------------------------


def _version_numbers(version: int) -> list[int]:
    """Nova's ``convert_version_to_str`` as numbers: 6000000 is 6.0.0."""
    numbers: list[int] = []
    while version:
        version, number = divmod(version, 1000)
        numbers.insert(0, number)
    return numbers


def _version_ok(version: int | None, predicate: str | None) -> bool:
    if not (version and predicate):
        return True  # Nova: nothing asked, or no version known
    have = release(_version_numbers(version))
    return all(_COMPARE[op](have, wanted) for op, wanted in version_predicate(predicate))


def _bits_ok(cpu: Any, bits: str | None) -> bool:
    """Nova's ``_compare_maxphysaddr_bits``: a host that says nothing of its bits passes."""
    if not bits or not int(bits):
        return True
    found = cpu.get("maxphysaddr", {}) if isinstance(cpu, dict) else None
    have = found.get("bits") if isinstance(found, dict) else None
    if not have or not isinstance(have, int | float):
        return True
    return bool(have >= int(bits))


def _supports(
    wanted: tuple[str | None, ...], predicate: str | None, bits: str | None
) -> Callable[[HostFacts], bool]:
    def decide(facts: HostFacts) -> bool:
        return (
            any(all(p is None or p in spec for p in wanted) for spec in facts.supported_instances)
            and _version_ok(facts.hypervisor_version, predicate)
            and _bits_ok(facts.cpu, bits)
        )

    return decide


class ImagePropertiesFilter:
    """Hosts that run what the image asks for (Nova 34).

    The image's ``hw_architecture`` (else ``image_properties_default_architecture``),
    ``img_hv_type`` and ``hw_vm_mode``, those it names, must all be in one of
    the host's ``supported_instances`` triples; a host that reports none
    fails. ``img_hv_requested_version`` (``>=6.0,<6.2``) must hold for the
    host's ``hypervisor_version`` when it reports one, and
    ``hw_maxphysaddr_bits`` be at most its ``cpu_info`` maxphysaddr bits
    when it reports them. The image names none of the three (and no default
    architecture): the filter does not apply.
    """

    name = "ImagePropertiesFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        props = ctx.spec.image_properties
        default = ctx.config.image_properties_default_architecture
        if not props and default is None:
            return None
        wanted = (
            props.get("hw_architecture", default),
            props.get("img_hv_type"),
            props.get("hw_vm_mode"),
        )
        if not any(wanted):
            return None
        predicate = props.get("img_hv_requested_version")
        bits = props.get("hw_maxphysaddr_bits")
        book = table.host_facts
        answers = book.answers(
            (self.name, wanted, predicate, bits), _supports(wanted, predicate, bits)
        )
        passed: BoolColumn = answers[table.facts_id[: table.n]]
        return passed


# -- MetricsFilter --------------------------------------------------------------------


class MetricsFilter:
    """Hosts that report every metric ``metrics_weight_setting`` names (Nova 34), so
    that MetricsWeigher finds them all; with no setting, every host passes."""

    name = "MetricsFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        setting = ctx.config.metrics_weight_setting
        if not setting:
            return None
        names = frozenset(name for name, _ in setting)
        answers = table.host_facts.answers(
            (self.name, names), lambda facts: names.issubset(facts.metrics_map)
        )
        passed: BoolColumn = answers[table.facts_id[: table.n]]
        return passed
