"""Host aggregates: named sets of hosts with string metadata, and what they mean per row.

Rules this module keeps (Nova 18.0.0's meaning, ``nova/scheduler/filters/utils.py``
and ``extra_specs_ops.py``; no code of theirs):

* The book holds aggregates by name, and the aggregates of each host by
  host name, whether or not that host has reported (an aggregate may name
  a host before it reports). Only the engine changes it, through
  :meth:`AggregateBook.check` first (every bound and conflict, before any
  change: a refused command changes nothing) and then :meth:`apply`.
* Hosts in the same aggregates behave the same under every aggregate
  filter. Each distinct set of aggregates a host is in gets a small id
  (``membership``; 0 is "in none"), kept per row in the host table's
  ``agg_set`` column. A filter then decides once per membership, not per
  host, and the answer per row is one NumPy gather
  (``answers[table.agg_set[:n]]``). Those per-membership answers are kept
  for each (filter, request key) until an aggregate changes, so a repeated
  request costs a dict lookup and the gather.
* Metadata as a host sees it is Nova's ``aggregate_metadata_get_by_host``:
  per key, the set of the comma-separated, stripped values of every
  aggregate of the host (of those that have ``key``, when one is given);
  ``aggregate_values_from_key`` is the set of whole values.
* A numeric value a host sees (an allocation ratio, a weigher multiplier)
  is Nova's ``validate_num_values`` over ``aggregate_values_from_key``, the
  smallest, written once in :func:`_smallest_number`; a whole number (the
  ``max_instances_per_host`` and ``max_io_ops_per_host`` limits) the same
  with ``cast_to=int``, in :func:`_smallest_int`.
* A host's availability zone comes from at most one zone: as Nova's
  aggregate API, an aggregate's ``availability_zone`` may not conflict with
  another zone one of its hosts is in. Which zones some aggregate names,
  with hosts or not, is kept (:meth:`AggregateBook.names_zone`): Nova 34's
  zone request filter (``nova_release`` 34) asks it of a request for the
  default zone.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidRequest
from ..models import Aggregate, SchedulerConfig

__all__ = [
    "RATIO_KEYS",
    "AggregateBook",
    "AggregateChange",
    "is_number",
    "match_extra_spec",
    "numeric_operand",
    "scoped_extra_specs",
]

AZ_KEY = "availability_zone"
# Nova 34's AggregateMultiTenancyIsolation reads every key that starts with it
# (filter_tenant_id2 ...), Nova 18's this one only
TENANT_KEY = "filter_tenant_id"
TYPE_KEY = "instance_type"
# the extra-spec scope AggregateInstanceExtraSpecsFilter reads besides unscoped keys
EXTRA_SPECS_SCOPE = "aggregate_instance_extra_specs"
# metadata key of each per-aggregate allocation ratio, in the table's (ram, cpu, disk) order
RATIO_KEYS = ("ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio")
# kept per-membership answers before they are dropped and worked out again:
# at most this many answer arrays, and this many answers in all (16 MB)
_MAX_ANSWERS = 4_096
_MAX_ANSWER_CELLS = 1 << 24
# a limit beyond any count (an aggregate may say "1" followed by 400 zeros)
_FAR_LIMIT = 2**62


def _as_float(value: str) -> float:
    return float(value)


def is_number(text: str) -> bool:
    """Whether ``float(text)`` takes ``text``, as extra_specs_ops' numeric operators
    read an aggregate value and an operand (``" 2 "``, ``"1e3"``, ``"inf"`` are)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


# extra_specs_ops' operators that compare as numbers (float() of both sides)
_NUMERIC_OPS = frozenset({"=", "==", "!=", ">=", "<="})


def numeric_operand(requested: str) -> str | None:
    """The operand of a numeric operator (``"= 2"``, ``">= 4"`` ...: ``"2"``, ``"4"``),
    or None for any other requirement (a string operator, ``<in>``, ``<or>``, a
    plain value, an operator with no operand: Nova then compares nothing).

    >>> numeric_operand(">= 4"), numeric_operand("s>= 4"), numeric_operand(">=")
    ('4', None, None)
    """
    words = requested.split()
    return words[1] if len(words) > 1 and words[0] in _NUMERIC_OPS else None


# extra_specs_ops' operators: (aggregate value, requested word(s)) -> bool
_OPERATORS: dict[str, Callable[[str, Any], bool]] = {
    "=": lambda x, y: _as_float(x) >= _as_float(y),
    "<in>": lambda x, y: y in x,
    "<all-in>": lambda x, y: all(word in x for word in y),
    "==": lambda x, y: _as_float(x) == _as_float(y),
    "!=": lambda x, y: _as_float(x) != _as_float(y),
    ">=": lambda x, y: _as_float(x) >= _as_float(y),
    "<=": lambda x, y: _as_float(x) <= _as_float(y),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}


def match_extra_spec(value: str, requested: str) -> bool:
    """Whether an aggregate's ``value`` satisfies one extra spec ``requested``.

    Nova's ``extra_specs_ops.match``: ``requested`` is an operator and its
    operand(s) (``">= 4"``, ``"<in> ssd"``, ``"<all-in> a b"``,
    ``"s== fast"``, ``"<or> a <or> b"``), or else a plain string compared
    for equality. A numeric operator over a value that is not a number is
    no match here; Nova raises ValueError out of the filter, failing the
    whole request, and so does AggregateInstanceExtraSpecsFilter with
    ``nova_release`` 34 before it matches (InvalidRequest,
    :func:`numeric_operand`).

    >>> match_extra_spec("8", ">= 4"), match_extra_spec("ssd,hdd", "<in> ssd")
    (True, True)
    >>> match_extra_spec("b", "<or> a <or> b"), match_extra_spec("x", "x y")
    (True, False)
    """
    words = requested.split()
    op = words.pop(0) if words else None
    method = _OPERATORS.get(op) if op is not None else None
    if op != "<or>" and method is None:
        return value == requested
    if op == "<or>":  # <or> v1 <or> v2 ...: every other word is a choice
        return value in words[::2]
    assert method is not None
    if not words:
        return False
    try:
        return method(value, words) if op == "<all-in>" else method(value, words[0])
    except ValueError:
        return False


def scoped_extra_specs(extra_specs: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The (metadata key, requirement) pairs AggregateInstanceExtraSpecsFilter checks.

    Unscoped keys as they are, ``aggregate_instance_extra_specs:key`` as
    ``key``; keys of any other scope (``hw:cpu_policy`` ...) are not this
    filter's. Sorted, so equal requests share one key.

    >>> scoped_extra_specs({"hw:numa_nodes": "2", "ssd": "true",
    ...                     "aggregate_instance_extra_specs:cpu": ">= 4"})
    (('cpu', '>= 4'), ('ssd', 'true'))
    """
    pairs: list[tuple[str, str]] = []
    for key, requested in extra_specs.items():
        scope, colon, rest = key.partition(":")
        if colon:
            if scope != EXTRA_SPECS_SCOPE:
                continue
            key = rest
        pairs.append((key, requested))
    return tuple(sorted(pairs))


def _split(value: str) -> set[str]:
    return {part.strip() for part in value.split(",")}


def _smallest_number(values: set[str]) -> float | None:
    """A host's aggregate value of a numeric key, as Nova reads it: the smallest
    of ``values`` (``aggregate_values_from_key``) as a float, or None for the
    caller's own default when there is none or one is not a number.

    That is ``validate_num_values(values, default, cast_to=float,
    based_on=min)`` with the ``except ValueError`` of every caller (the
    Aggregate*Filter ratios of Nova 18, ``utils.get_weight_multiplier``):
    ``"0"`` is 0 (a ratio of 0 lets the host take none of that resource), a
    negative value is itself. Not Nova's: a value that is not finite
    (``inf``, ``nan``) is None too, since Nova would take it and NaN would
    then stand in headroom and weight sums.

    >>> _smallest_number({"1.5", "0.5"}), _smallest_number({"0"}), _smallest_number({"x", "2"})
    (0.5, 0.0, None)
    """
    if not values:
        return None
    try:
        numbers = [float(v) for v in values]
    except ValueError:
        return None
    return min(numbers) if all(map(math.isfinite, numbers)) else None


def _smallest_int(values: set[str]) -> int | None:
    """A host's aggregate value of a whole-number key, as Nova's
    AggregateNumInstancesFilter and AggregateIoOpsFilter read it: the smallest
    of ``values`` as an ``int``, or None for the configured default when there
    is none or one is not an integer (``validate_num_values(values, default,
    cast_to=int)`` and their ``except ValueError``). ``int()`` as Nova's: ``" 8 "``
    is 8, ``"1.5"`` and ``"1e3"`` are not integers, a negative value is itself.

    >>> _smallest_int({"8", "6"}), _smallest_int({"0"}), _smallest_int({"2", "x"})
    (6, 0, None)
    """
    if not values:
        return None
    try:
        return min(int(v) for v in values)
    except ValueError:
        return None


@dataclass(slots=True)
class _Entry:
    hosts: dict[str, None]  # in the order added
    metadata: dict[str, str]

    def view(self, name: str) -> Aggregate:
        return Aggregate(name=name, hosts=list(self.hosts), metadata=dict(self.metadata))


@dataclass(frozen=True, slots=True)
class AggregateChange:
    """What one admin command does to the book, worked out (and checked) before it is done."""

    name: str
    hosts: tuple[str, ...]  # the aggregate's hosts afterwards, in order
    metadata: Mapping[str, str]  # its metadata afterwards
    delete: bool = False


@dataclass(slots=True)
class AggregateBook:
    """Every aggregate, each host's memberships, and per-membership answers."""

    config: SchedulerConfig
    by_name: dict[str, _Entry] = field(default_factory=dict)
    of_host: dict[str, frozenset[str]] = field(default_factory=dict)  # hosts in one or more
    # membership id -> the names of its aggregates, sorted; 0 is none
    memberships: list[tuple[str, ...]] = field(default_factory=lambda: [()])
    membership_ids: dict[tuple[str, ...], int] = field(default_factory=lambda: {(): 0})
    # how many aggregates have each metadata key (only keys some aggregate has)
    _with_key: dict[str, int] = field(default_factory=dict)
    # has_prefix's answers, until an aggregate changes
    _with_prefix: dict[str, bool] = field(default_factory=dict)
    # how many aggregates name each availability zone (only zones some aggregate names)
    _zones: dict[str, int] = field(default_factory=dict)
    _answers: dict[object, NDArray[np.bool_]] = field(default_factory=dict)
    # named sets of aggregates (a request filter's, per project or traits), until an
    # aggregate changes
    _named: dict[object, frozenset[str]] = field(default_factory=dict)
    # per-membership weigher multipliers, by (metadata key, configured multiplier), and
    # per-membership limits, by (metadata key, configured limit)
    _multipliers: dict[tuple[str, float], NDArray[np.float64]] = field(default_factory=dict)
    _limits: dict[tuple[str, int], NDArray[np.float64]] = field(default_factory=dict)
    members: int = 0  # host memberships of every aggregate together
    # the keys AggregateMultiTenancyIsolation reads: every filter_tenant_id* key
    # (Nova 34), or filter_tenant_id only (Nova 18); config is fixed, so decided once
    _tenant_prefix: bool = field(init=False)

    def __post_init__(self) -> None:
        self._tenant_prefix = self.config.nova_release == 34

    # -- reading ------------------------------------------------------------

    def aggregates(self) -> list[Aggregate]:
        """Every aggregate, by name."""
        return [self.by_name[name].view(name) for name in sorted(self.by_name)]

    def get(self, name: str) -> Aggregate:
        return self._entry(name).view(name)

    def membership_of(self, host: str) -> int:
        """The membership id of ``host`` (0: in no aggregate)."""
        names = self.of_host.get(host)
        if names is None:
            return 0
        key = tuple(sorted(names))
        found = self.membership_ids.get(key)
        if found is None:
            found = len(self.memberships)
            self.memberships.append(key)
            self.membership_ids[key] = found
        return found

    def has(self, key: str) -> bool:
        """True when some aggregate has metadata ``key``."""
        return key in self._with_key

    def has_prefix(self, prefix: str) -> bool:
        """True when some aggregate has a metadata key that starts with ``prefix``."""
        found = self._with_prefix.get(prefix)
        if found is None:
            found = self._with_prefix[prefix] = any(k.startswith(prefix) for k in self._with_key)
        return found

    def has_tenant_key(self) -> bool:
        """True when some aggregate has a key AggregateMultiTenancyIsolation reads:
        ``filter_tenant_id`` (Nova 18), or any that starts with it (``nova_release`` 34)."""
        if self._tenant_prefix:
            return self.has_prefix(TENANT_KEY)
        return TENANT_KEY in self._with_key

    def has_any(self, keys: frozenset[str]) -> bool:
        """True when some aggregate has one of the metadata ``keys``."""
        return not self._with_key.keys().isdisjoint(keys)

    def metadata_by_host(self, membership: int, key: str | None = None) -> dict[str, set[str]]:
        """Nova's ``aggregate_metadata_get_by_host`` for a host of ``membership``."""
        merged: dict[str, set[str]] = {}
        for name in self.memberships[membership]:
            entry = self.by_name.get(name)  # None: deleted since (no host has this id now)
            if entry is None:
                continue
            metadata = entry.metadata
            if key is None or key in metadata:
                for k, v in metadata.items():
                    merged.setdefault(k, set()).update(_split(v))
        return merged

    def values_from_key(self, membership: int, key: str) -> set[str]:
        """Nova's ``aggregate_values_from_key`` for a host of ``membership``."""
        found: set[str] = set()
        for name in self.memberships[membership]:
            entry = self.by_name.get(name)
            value = entry.metadata.get(key) if entry is not None else None
            if value is not None:
                found.add(value)
        return found

    def names_zone(self, zone: str) -> bool:
        """True when some aggregate's ``availability_zone`` is ``zone`` (Nova's
        ``AggregateList.get_by_metadata(key='availability_zone', value=zone)``),
        whether or not it has hosts."""
        return zone in self._zones

    def zone_of(self, membership: int) -> str | None:
        """The availability zone the aggregates of ``membership`` put a host in, or None."""
        values = self.values_from_key(membership, AZ_KEY)
        return min(values) if values else None  # one at most (checked on every change)

    def ratios_of(self, membership: int) -> tuple[float | None, float | None, float | None]:
        """The ``*_allocation_ratio`` of each resource (:func:`_smallest_number`), or None."""
        ram, cpu, disk = (
            _smallest_number(self.values_from_key(membership, key)) for key in RATIO_KEYS
        )
        return ram, cpu, disk

    def multipliers(self, key: str, configured: float) -> NDArray[np.float64]:
        """Nova's ``utils.get_weight_multiplier`` for a host of every membership id:
        the ``key`` value of its aggregates (:func:`_smallest_number`), else
        ``configured``; kept, as :meth:`answers` are, until an aggregate changes."""
        found = self._multipliers.get((key, configured))
        if found is None or len(found) < len(self.memberships):
            values = (
                _smallest_number(self.values_from_key(membership, key))
                for membership in range(len(self.memberships))
            )
            found = np.fromiter(
                (configured if value is None else value for value in values),
                dtype=np.float64,
                count=len(self.memberships),
            )
            self._multipliers[(key, configured)] = found
        return found

    def limits(self, key: str, configured: int) -> NDArray[np.float64]:
        """The limit of ``key`` (``max_instances_per_host``, ``max_io_ops_per_host``)
        for a host of every membership id: the smallest whole ``key`` value of its
        aggregates (:func:`_smallest_int`), else ``configured``; kept, as
        :meth:`answers` are, until an aggregate changes. Floats, so a limit past
        int64 still compares (a count is far below 2**53)."""
        found = self._limits.get((key, configured))
        if found is None or len(found) < len(self.memberships):
            values = (
                _smallest_int(self.values_from_key(membership, key))
                for membership in range(len(self.memberships))
            )
            found = np.fromiter(
                (
                    configured if value is None else min(max(value, -_FAR_LIMIT), _FAR_LIMIT)
                    for value in values
                ),
                dtype=np.float64,
                count=len(self.memberships),
            )
            self._limits[(key, configured)] = found
        return found

    def named(self, key: object, pick: Callable[[str, _Entry], bool]) -> frozenset[str]:
        """The aggregates ``pick`` chooses (by name and entry), kept under ``key`` until
        an aggregate changes: a request filter scans the aggregates once per project
        or trait set, not once per request."""
        found = self._named.get(key)
        if found is None:
            if len(self._named) >= _MAX_ANSWERS:
                self._named.clear()
            found = frozenset(name for name, entry in self.by_name.items() if pick(name, entry))
            self._named[key] = found
        return found

    def answers(self, key: object, decide: Callable[[int], bool]) -> NDArray[np.bool_]:
        """``decide`` for every membership id, as a bool array, kept under ``key``
        until an aggregate changes."""
        found = self._answers.get(key)
        if found is None or len(found) < len(self.memberships):
            count = len(self.memberships)
            if len(self._answers) >= min(_MAX_ANSWERS, _MAX_ANSWER_CELLS // count):
                self._answers.clear()
            found = np.fromiter(
                map(decide, range(len(self.memberships))),
                dtype=np.bool_,
                count=len(self.memberships),
            )
            self._answers[key] = found
        return found

    def _entry(self, name: str) -> _Entry:
        entry = self.by_name.get(name)
        if entry is None:
            known = ", ".join(sorted(self.by_name)[:10]) or "none"
            raise InvalidRequest(
                f"no host aggregate named {name!r} (known: {known}); create it first "
                "(create_aggregate)"
            )
        return entry

    # -- checking ------------------------------------------------------------

    def plan_create(
        self, name: str, metadata: Mapping[str, str | None], hosts: Iterable[str]
    ) -> AggregateChange | None:
        """The change that creates ``name``; None when it exists just so already (a
        repeat); InvalidRequest when it exists otherwise or passes a bound."""
        kept = {k: v for k, v in metadata.items() if v is not None}
        ordered = tuple(dict.fromkeys(hosts))
        existing = self.by_name.get(name)
        if existing is not None:
            if existing.metadata == kept and set(existing.hosts) == set(ordered):
                return None
            raise InvalidRequest(
                f"a host aggregate named {name!r} already exists with other hosts or "
                "metadata (Nova: AggregateNameExists); nothing was changed: choose another "
                "name, or change it with update_aggregate and add_host_to_aggregate"
            )
        if len(self.by_name) >= self.config.max_aggregates:
            raise InvalidRequest(
                f"creating host aggregate {name!r} would pass max_aggregates "
                f"{self.config.max_aggregates:,}: delete aggregates no longer used, or raise "
                "max_aggregates"
            )
        change = AggregateChange(name, ordered, kept)
        self._check(change)
        return change

    def plan_update(self, name: str, metadata: Mapping[str, str | None]) -> AggregateChange:
        """Merge ``metadata`` into ``name``'s (a None value deletes that key, as Nova's
        set_metadata)."""
        entry = self._entry(name)
        merged = dict(entry.metadata)
        for key, value in metadata.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        change = AggregateChange(name, tuple(entry.hosts), merged)
        self._check(change)
        return change

    def plan_delete(self, name: str) -> AggregateChange | None:
        entry = self.by_name.get(name)
        if entry is None:
            return None
        if entry.hosts:
            raise InvalidRequest(
                f"host aggregate {name!r} still has {len(entry.hosts)} host(s) (first "
                f"{next(iter(entry.hosts))!r}); nothing was changed: remove them first "
                "(remove_host_from_aggregate), as Nova requires"
            )
        return AggregateChange(name, (), {}, delete=True)

    def plan_add_host(self, name: str, host: str) -> AggregateChange:
        entry = self._entry(name)
        if host in entry.hosts:
            raise InvalidRequest(
                f"host {host!r} is already in host aggregate {name!r} (Nova: "
                "AggregateHostExists); nothing was changed"
            )
        change = AggregateChange(name, (*entry.hosts, host), entry.metadata)
        self._check(change)
        return change

    def plan_remove_host(self, name: str, host: str) -> AggregateChange:
        entry = self._entry(name)
        if host not in entry.hosts:
            raise InvalidRequest(
                f"host {host!r} is not in host aggregate {name!r} (Nova: "
                "AggregateHostNotFound); nothing was changed"
            )
        hosts = tuple(h for h in entry.hosts if h != host)
        return AggregateChange(name, hosts, entry.metadata)

    def _check(self, change: AggregateChange) -> None:
        config = self.config
        name = change.name
        old = self.by_name.get(name)
        members = self.members - (len(old.hosts) if old is not None else 0) + len(change.hosts)
        if members > config.max_aggregate_members:
            raise InvalidRequest(
                f"host aggregate {name!r} would bring the host memberships of all "
                f"aggregates to {members:,}, over max_aggregate_members "
                f"{config.max_aggregate_members:,}; nothing was changed"
            )
        if len(change.hosts) > config.max_aggregate_hosts:
            raise InvalidRequest(
                f"host aggregate {name!r} would name {len(change.hosts):,} hosts, over "
                f"max_aggregate_hosts {config.max_aggregate_hosts:,}; nothing was changed"
            )
        if len(change.metadata) > config.max_aggregate_metadata:
            raise InvalidRequest(
                f"host aggregate {name!r} would have {len(change.metadata)} metadata keys, "
                f"over max_aggregate_metadata {config.max_aggregate_metadata}; nothing was "
                "changed"
            )
        zone = change.metadata.get(AZ_KEY)
        if zone is None:
            return
        if not zone.strip() or "," in zone:
            raise InvalidRequest(
                f"host aggregate {name!r}: availability_zone {zone!r} must be one zone name "
                "(not empty, no commas); nothing was changed"
            )
        for host in change.hosts:
            for other in self.of_host.get(host, ()):
                theirs = self.by_name[other].metadata.get(AZ_KEY)
                if other != name and theirs is not None and theirs != zone:
                    raise InvalidRequest(
                        f"host {host!r} is in availability zone {theirs!r} by host aggregate "
                        f"{other!r}, so host aggregate {name!r} cannot put it in {zone!r} "
                        "(a host is in one zone, as Nova's aggregate API keeps it); nothing "
                        "was changed"
                    )

    # -- changing -------------------------------------------------------------

    def apply(self, change: AggregateChange) -> frozenset[str]:
        """Make ``change`` (checked by a ``plan_*``); return the hosts it concerns."""
        name = change.name
        old = self.by_name.get(name)
        before = frozenset(old.hosts) if old is not None else frozenset()
        if old is not None:
            self._count_keys(old.metadata, -1)
        if change.delete:
            del self.by_name[name]
        else:
            self.by_name[name] = _Entry(dict.fromkeys(change.hosts), dict(change.metadata))
            self._count_keys(change.metadata, +1)
        after = frozenset(change.hosts)
        self.members += len(after) - len(before)
        for host in before - after:
            left = self.of_host[host] - {name}
            if left:
                self.of_host[host] = left
            else:
                del self.of_host[host]
        for host in after - before:
            self.of_host[host] = self.of_host.get(host, frozenset()) | {name}
        self._answers.clear()
        self._named.clear()
        self._multipliers.clear()
        self._limits.clear()
        self._with_prefix.clear()
        return before | after

    def _count_keys(self, metadata: Mapping[str, str], sign: int) -> None:
        for counts, keys in (
            (self._with_key, metadata),
            (self._zones, (metadata[AZ_KEY],) if AZ_KEY in metadata else ()),
        ):
            for key in keys:
                count = counts.get(key, 0) + sign
                if count:
                    counts[key] = count
                else:
                    del counts[key]  # only keys some aggregate has: has_any compares the keys

    @property
    def compact_due(self) -> bool:
        """True when many membership ids are no longer any host's (after much churn)."""
        return len(self.memberships) > 2 * len(self.of_host) + 64

    def compact(self) -> None:
        """Forget every membership id but 0; the caller renumbers every row
        (:meth:`membership_of` hands out ids again)."""
        self.memberships = [()]
        self.membership_ids = {(): 0}
        self._answers.clear()
        self._multipliers.clear()
        self._limits.clear()
