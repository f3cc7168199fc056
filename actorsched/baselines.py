"""Baselines actorsched is measured against: Nova's host manager as of 2015 and 2016.

Both keep one mutable Python object per host (:class:`NovaHostState`) and
run filters and weighers as a loop over those objects
(:class:`NovaStyleChain`), as Nova's FilterScheduler did. They apply the
same filters, weighers, claim rules and stale-report check as actorsched;
they differ only in what guards host state:

* :class:`UnsynchronizedHostManager` (the 2015 shape) yields to the event
  loop between choosing a host and consuming it, and half way through
  applying a host report, as the sleeps in the 2015 reproduction did.
  Concurrent requests then choose from figures that are already out of
  date, and free RAM goes negative.
* :class:`LockedHostManager` (the 2016 fix, "host-state-level locking")
  takes an ``asyncio.Lock`` per host around update and consume. A lock per
  host alone still lets two requests choose the same last slot before
  either consumes it, so the consume re-checks the host under its lock
  and moves on to the next best host when it no longer fits, as Nova
  effectively did through retries. It never over-commits, at the price of
  a lock every method that touches a host must remember.

They exist to be measured against, not to be deployed.

>>> import asyncio
>>> from actorsched import HostReport, RequestSpec
>>> async def main() -> int:
...     async with UnsynchronizedHostManager() as m:
...         await m.update_host(HostReport(host="n1", generation=1, memory_mb=2048,
...             memory_mb_used=0, vcpus=8, vcpus_used=0, local_gb=100, local_gb_used=0))
...         spec = lambda u: RequestSpec(instance_uuids=[u], memory_mb=2048, vcpus=1, disk_gb=1)
...         await asyncio.gather(m.select_destinations(spec("a")), m.select_destinations(spec("b")))
...         return m.lowest_free_ram()
>>> asyncio.run(main())  # both requests chose the host before either consumed it
-2048
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import ClassVar

from .core.ledger import fingerprint_differences, request_fingerprint
from .errors import InvalidRequest, NoValidHost
from .models import HostReport, HostState, RequestSpec, SchedulerConfig, Selection

__all__ = [
    "ChainContext",
    "LockedHostManager",
    "NovaHostState",
    "NovaStyleChain",
    "UnsynchronizedHostManager",
    "over_capacity",
]

log = logging.getLogger("actorsched.baselines")

_NO_MEMBERS: Mapping[str, int] = {}


def over_capacity(state: HostState, config: SchedulerConfig) -> bool:
    """True when ``state`` uses more RAM, vCPUs or disk than its capacity with ratios.

    Works on any scheduler's snapshot, so the demo counts over-commit the
    same way for actorsched and the baselines. A host that reports 0 vCPUs
    has no vCPU capacity to pass (CoreFilter assumes its count is broken).
    """
    usable_ram = state.memory_mb - state.memory_mb_reserved
    used_ram = usable_ram - state.free_ram_mb
    used_disk = state.local_gb - state.free_disk_gb
    return (
        used_ram > usable_ram * config.ram_allocation_ratio
        or used_disk > state.local_gb * config.disk_allocation_ratio
        or 0 < state.vcpus_total * config.cpu_allocation_ratio < state.vcpus_used
    )


# -- host state -------------------------------------------------------------


@dataclass(slots=True, eq=False)
class NovaHostState:
    """One host's figures as a mutable Python object, as Nova's ``HostState``.

    Reported figures are what the last applied report said; ``claimed_*``
    are assumed claims no report lists yet; ``released_*`` credit back
    released instances a report still lists.
    """

    host: str
    generation: int = -1
    memory_mb: int = 0
    memory_mb_reserved: int = 0
    memory_mb_used: int = 0
    vcpus: int = 0
    vcpus_used: int = 0
    local_gb: int = 0
    local_gb_used: int = 0
    availability_zone: str | None = None
    node: str = ""  # the hypervisor node; set from each report (its host's name if none)
    enabled: bool = True
    traits: frozenset[str] = frozenset()
    instances: frozenset[str] = frozenset()  # uuids the last report listed
    reported_io_ops: int = 0
    reported_at: float = -math.inf
    claimed_mem: int = 0
    claimed_vcpus: int = 0
    claimed_disk: int = 0
    assumed: int = 0
    released: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    released_mem: int = 0
    released_vcpus: int = 0
    released_disk: int = 0

    @classmethod
    def from_report(cls, report: HostReport, now: float) -> NovaHostState:
        """A host built from its first report (its instances are not reconciled here)."""
        host = cls(report.host, generation=report.generation)
        host.instances = frozenset(report.instances)
        host.apply_figures(report, now)
        return host

    def apply_figures(self, report: HostReport, now: float) -> None:
        """Write the report's figures (the second half of ``update_from_compute_node``)."""
        self.memory_mb = report.memory_mb
        self.memory_mb_reserved = report.memory_mb_reserved
        self.memory_mb_used = report.memory_mb_used
        self.vcpus = report.vcpus
        self.vcpus_used = report.vcpus_used
        self.local_gb = report.local_gb
        self.local_gb_used = report.local_gb_used
        self.availability_zone = report.availability_zone
        self.node = report.node or report.host
        self.enabled = report.enabled
        self.traits = frozenset(report.traits)
        self.reported_io_ops = report.num_io_ops
        self.reported_at = now

    # derived figures, named as the filters and HostState name them

    @property
    def free_ram_mb(self) -> int:
        used = self.memory_mb_used + self.claimed_mem - self.released_mem
        return self.memory_mb - self.memory_mb_reserved - used

    @property
    def free_disk_gb(self) -> int:
        return self.local_gb - (self.local_gb_used + self.claimed_disk - self.released_disk)

    @property
    def vcpus_in_use(self) -> int:
        return self.vcpus_used + self.claimed_vcpus - self.released_vcpus

    @property
    def num_instances(self) -> int:
        return len(self.instances) + self.assumed - len(self.released)

    @property
    def num_io_ops(self) -> int:
        return self.reported_io_ops + self.assumed

    # the largest request the host can take (Nova 18's RamFilter, CoreFilter and
    # DiskFilter): what capacity leaves, and never more than the host's own total

    def ram_headroom(self, ratio: float) -> float:
        usable = self.memory_mb - self.memory_mb_reserved
        left = usable * ratio - (self.memory_mb_used + self.claimed_mem - self.released_mem)
        return min(self.memory_mb, left)

    def vcpus_free(self, ratio: float) -> float:
        """Nova's CPUWeigher figure: vcpus x ratio - used."""
        return self.vcpus * ratio - (self.vcpus_used + self.claimed_vcpus - self.released_vcpus)

    def vcpu_headroom(self, ratio: float) -> float:
        if self.vcpus == 0:
            return math.inf  # CoreFilter fails safe: CPU collection assumed broken
        return min(self.vcpus, self.vcpus_free(ratio))

    def disk_headroom(self, ratio: float) -> float:
        left = self.local_gb * ratio - (self.local_gb_used + self.claimed_disk - self.released_disk)
        return min(self.local_gb, left)

    def consume(self, mem: int, vcpus: int, disk: int, sign: int = 1) -> None:
        """Add (or with ``sign=-1`` remove) one assumed claim (``consume_from_request``)."""
        self.claimed_mem += sign * mem
        self.claimed_vcpus += sign * vcpus
        self.claimed_disk += sign * disk
        self.assumed += sign

    def credit(self, uuid: str, mem: int, vcpus: int, disk: int) -> None:
        """Credit back a released instance the host still reports."""
        self.released[uuid] = (mem, vcpus, disk)
        self.released_mem += mem
        self.released_vcpus += vcpus
        self.released_disk += disk

    def uncredit(self, uuid: str) -> None:
        """Stop crediting ``uuid``: a report no longer lists it."""
        mem, vcpus, disk = self.released.pop(uuid)
        self.released_mem -= mem
        self.released_vcpus -= vcpus
        self.released_disk -= disk

    def state(self, config: SchedulerConfig | None = None) -> HostState:
        """A :class:`HostState` snapshot, figured as actorsched figures it (with the
        allocation ratios of ``config``, the default one when None)."""
        config = config or SchedulerConfig()
        return HostState(
            host=self.host,
            node=self.node,
            generation=self.generation,
            enabled=self.enabled,
            availability_zone=self.availability_zone,
            traits=sorted(self.traits),
            memory_mb=self.memory_mb,
            memory_mb_reserved=self.memory_mb_reserved,
            free_ram_mb=self.free_ram_mb,
            local_gb=self.local_gb,
            free_disk_gb=self.free_disk_gb,
            vcpus_total=self.vcpus,
            vcpus_used=self.vcpus_in_use,
            num_instances=self.num_instances,
            num_io_ops=self.num_io_ops,
            assumed_claims=self.assumed,
            reported_at=self.reported_at,
            ram_allocation_ratio=config.ram_allocation_ratio,
            cpu_allocation_ratio=config.cpu_allocation_ratio,
            disk_allocation_ratio=config.disk_allocation_ratio,
        )


# -- the per-host filter and weigher chain ------------------------------------


def _nowhere(instance_uuid: str) -> str | None:
    return None


def _no_members(group_id: str) -> Mapping[str, int]:
    return _NO_MEMBERS


@dataclass(slots=True)
class ChainContext:
    """What the chain may read while it places one instance.

    ``group_members(group_id)`` maps host -> members of that server group
    it holds; ``locate(uuid)`` names the host holding or running an
    instance; ``chosen`` lists hosts taken by earlier instances of the
    same request.
    """

    spec: RequestSpec
    config: SchedulerConfig
    now: float
    group_members: Callable[[str], Mapping[str, int]] = _no_members
    locate: Callable[[str], str | None] = _nowhere
    chosen: list[str] = field(default_factory=list)


class NovaFilter:
    """A per-host filter: ``host_passes`` is called once per host, as in Nova."""

    name: ClassVar[str] = ""

    def applies(self, ctx: ChainContext) -> bool:
        """False when this request gives the filter nothing to check."""
        return True

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        raise NotImplementedError


class ComputeFilter(NovaFilter):
    name = "ComputeFilter"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.enabled and host.reported_at >= ctx.now - ctx.config.service_down_time


class AvailabilityZoneFilter(NovaFilter):
    name = "AvailabilityZoneFilter"

    def applies(self, ctx: ChainContext) -> bool:
        return ctx.spec.availability_zone is not None

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        zone = host.availability_zone or ctx.config.default_availability_zone
        return zone == ctx.spec.availability_zone


class RamFilter(NovaFilter):
    name = "RamFilter"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.ram_headroom(ctx.config.ram_allocation_ratio) >= ctx.spec.memory_mb


class CoreFilter(NovaFilter):
    name = "CoreFilter"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.vcpu_headroom(ctx.config.cpu_allocation_ratio) >= ctx.spec.vcpus


class DiskFilter(NovaFilter):
    name = "DiskFilter"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.disk_headroom(ctx.config.disk_allocation_ratio) >= ctx.spec.disk_gb


class RequiredTraitsFilter(NovaFilter):
    name = "RequiredTraitsFilter"

    def applies(self, ctx: ChainContext) -> bool:
        return bool(ctx.spec.required_traits)

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.traits.issuperset(ctx.spec.required_traits)


class ForbiddenTraitsFilter(NovaFilter):
    name = "ForbiddenTraitsFilter"

    def applies(self, ctx: ChainContext) -> bool:
        return bool(ctx.spec.forbidden_traits)

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.traits.isdisjoint(ctx.spec.forbidden_traits)


class SameHostFilter(NovaFilter):
    name = "SameHostFilter"

    def applies(self, ctx: ChainContext) -> bool:
        return bool(ctx.spec.same_host)

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return any(ctx.locate(u) == host.host for u in ctx.spec.same_host)


class DifferentHostFilter(NovaFilter):
    name = "DifferentHostFilter"

    def applies(self, ctx: ChainContext) -> bool:
        return bool(ctx.spec.different_host)

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return all(ctx.locate(u) != host.host for u in ctx.spec.different_host)


class ServerGroupAffinityFilter(NovaFilter):
    name = "ServerGroupAffinityFilter"

    def applies(self, ctx: ChainContext) -> bool:
        group = ctx.spec.group
        return group is not None and group.policy == "affinity"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        assert ctx.spec.group is not None
        members = ctx.group_members(ctx.spec.group.id)
        return not members or host.host in members


class ServerGroupAntiAffinityFilter(NovaFilter):
    name = "ServerGroupAntiAffinityFilter"

    def applies(self, ctx: ChainContext) -> bool:
        group = ctx.spec.group
        return group is not None and group.policy == "anti-affinity"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        assert ctx.spec.group is not None
        return host.host not in ctx.group_members(ctx.spec.group.id)


class NumInstancesFilter(NovaFilter):
    name = "NumInstancesFilter"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.num_instances < ctx.config.max_instances_per_host


class IoOpsFilter(NovaFilter):
    name = "IoOpsFilter"

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        return host.num_io_ops < ctx.config.max_io_ops_per_host


NOVA_FILTERS: dict[str, type[NovaFilter]] = {
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
    )
}


class NovaWeigher:
    """A per-host weigher: ``weigh`` gives one raw value per host, higher is better.

    ``minval``, as Nova's ``BaseWeigher.minval``: when set, the normalization
    starts from it or the lowest value, whichever is lower.
    """

    name: ClassVar[str] = ""
    minval: ClassVar[float | None] = None

    def __init__(self, multiplier: float) -> None:
        self.multiplier = multiplier

    def applies(self, ctx: ChainContext) -> bool:
        return True

    def weigh(self, host: NovaHostState, ctx: ChainContext) -> float:
        raise NotImplementedError


class RAMWeigher(NovaWeigher):
    name = "RAMWeigher"
    minval = 0.0

    def weigh(self, host: NovaHostState, ctx: ChainContext) -> float:
        return float(host.free_ram_mb)


class CPUWeigher(NovaWeigher):
    name = "CPUWeigher"
    minval = 0.0

    def weigh(self, host: NovaHostState, ctx: ChainContext) -> float:
        return host.vcpus_free(ctx.config.cpu_allocation_ratio)


class DiskWeigher(NovaWeigher):
    name = "DiskWeigher"
    minval = 0.0

    def weigh(self, host: NovaHostState, ctx: ChainContext) -> float:
        return float(host.free_disk_gb)


class IoOpsWeigher(NovaWeigher):
    name = "IoOpsWeigher"
    minval = 0.0

    def weigh(self, host: NovaHostState, ctx: ChainContext) -> float:
        return float(host.num_io_ops)


class NumInstancesWeigher(NovaWeigher):
    name = "NumInstancesWeigher"

    def weigh(self, host: NovaHostState, ctx: ChainContext) -> float:
        return float(host.num_instances)


class ServerGroupSoftAffinityWeigher(NovaWeigher):
    name = "ServerGroupSoftAffinityWeigher"
    policy: ClassVar[str] = "soft-affinity"
    sign: ClassVar[float] = 1.0

    def applies(self, ctx: ChainContext) -> bool:
        group = ctx.spec.group
        return group is not None and group.policy == self.policy

    def weigh(self, host: NovaHostState, ctx: ChainContext) -> float:
        assert ctx.spec.group is not None
        return self.sign * ctx.group_members(ctx.spec.group.id).get(host.host, 0)


class ServerGroupSoftAntiAffinityWeigher(ServerGroupSoftAffinityWeigher):
    name = "ServerGroupSoftAntiAffinityWeigher"
    policy = "soft-anti-affinity"
    sign = -1.0


def nova_weighers(config: SchedulerConfig) -> list[NovaWeigher]:
    """Nova's default weighers with the multipliers from ``config`` (zero ones left out)."""
    weighers: list[NovaWeigher] = [
        RAMWeigher(config.ram_weight_multiplier),
        CPUWeigher(config.cpu_weight_multiplier),
        DiskWeigher(config.disk_weight_multiplier),
        IoOpsWeigher(config.io_ops_weight_multiplier),
        NumInstancesWeigher(config.num_instances_weight_multiplier),
        ServerGroupSoftAffinityWeigher(config.soft_affinity_weight_multiplier),
        ServerGroupSoftAntiAffinityWeigher(config.soft_anti_affinity_weight_multiplier),
    ]
    return [w for w in weighers if w.multiplier != 0]


class NovaStyleChain:
    """Nova's filter-then-weigh pipeline as a Python loop over host objects.

    Purely synchronous, so the benchmarks can time it on its own:

    >>> chain = NovaStyleChain()
    >>> hosts = [NovaHostState.from_report(HostReport(host=f"n{i}", generation=1,
    ...     memory_mb=4096 * (i + 1), memory_mb_used=0, vcpus=8, vcpus_used=0,
    ...     local_gb=100, local_gb_used=0), now=0.0) for i in range(3)]
    >>> spec = RequestSpec(instance_uuids=["vm1"], memory_mb=1024, vcpus=1, disk_gb=1)
    >>> [h.host for h in chain.select(spec, hosts, now=1.0)]
    ['n2', 'n1', 'n0']
    """

    def __init__(self, config: SchedulerConfig | None = None) -> None:
        self.config = config = config or SchedulerConfig()
        self.filters: list[NovaFilter] = [NOVA_FILTERS[n]() for n in config.enabled_filters]
        self.weighers = nova_weighers(config)

    def context(self, spec: RequestSpec, now: float) -> ChainContext:
        """A context with no claims or groups known: enough for one-off selections."""
        return ChainContext(spec, self.config, now)

    def filter_hosts(
        self, hosts: Iterable[NovaHostState], ctx: ChainContext
    ) -> tuple[list[NovaHostState], dict[str, int]]:
        """Hosts that pass every filter, and how many hosts each filter removed."""
        remaining = list(hosts)
        removed: dict[str, int] = {}
        if ctx.spec.ignore_hosts:
            ignored = {host.lower() for host in ctx.spec.ignore_hosts}  # as Nova: any case
            kept = [h for h in remaining if h.host.lower() not in ignored]
            if len(kept) < len(remaining):
                removed["IgnoreHosts"] = len(remaining) - len(kept)
            remaining = kept
        for f in self.filters:
            if not f.applies(ctx):
                continue
            kept = [h for h in remaining if f.host_passes(h, ctx)]
            if len(kept) < len(remaining):
                removed[f.name] = len(remaining) - len(kept)
            remaining = kept
        return remaining, removed

    def host_passes(self, host: NovaHostState, ctx: ChainContext) -> bool:
        """Whether one host passes every filter now (the locked manager's re-check)."""
        if host.host.lower() in {h.lower() for h in ctx.spec.ignore_hosts}:
            return False
        return all(f.host_passes(host, ctx) for f in self.filters if f.applies(ctx))

    def weigh_hosts(self, hosts: list[NovaHostState], ctx: ChainContext) -> list[NovaHostState]:
        """``hosts`` best first: each weigher normalized, times its multiplier, summed.

        As ``nova/weights.py`` (18.0.0): from min(minval, lowest) to the highest.
        """
        totals = [0.0] * len(hosts)
        for w in self.weighers:
            if not w.applies(ctx):
                continue
            raw = [w.weigh(h, ctx) for h in hosts]
            lo, hi = min(raw, default=0.0), max(raw, default=0.0)
            if w.minval is not None:
                lo = min(lo, w.minval)
            if hi > lo:  # hi == lo -> every normalized weight is 0, as in nova/weights.py
                scale = w.multiplier / (hi - lo)
                totals = [t + scale * (value - lo) for t, value in zip(totals, raw, strict=True)]
        # a stable sort: equal weights keep the hosts' order
        order = sorted(range(len(hosts)), key=lambda i: -totals[i])
        return [hosts[i] for i in order]

    def select(
        self,
        spec: RequestSpec,
        hosts: Iterable[NovaHostState],
        now: float,
        ctx: ChainContext | None = None,
        *,
        uuid: str | None = None,
    ) -> list[NovaHostState]:
        """Every host that passes the filters, best first; raises NoValidHost when none does."""
        ctx = ctx or self.context(spec, now)
        hosts = list(hosts)
        passing, removed = self.filter_hosts(hosts, ctx)
        if not passing:
            uuid = uuid or spec.instance_uuids[0]
            reasons = ", ".join(f"{n} removed {c}" for n, c in removed.items())
            raise NoValidHost(
                f"0/{len(hosts)} hosts are available for instance {uuid}: "
                f"{reasons or 'no host has reported'}",
                instance_uuid=uuid,
                total_hosts=len(hosts),
                filter_counts=removed,
            )
        return self.weigh_hosts(passing, ctx)


# -- the host managers ----------------------------------------------------------


@dataclass(slots=True)
class _Claim:
    instance_uuid: str
    host: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    group_id: str | None
    created_at: float
    selection: Selection
    fingerprint: str
    confirmed: bool = False


class UnsynchronizedHostManager:
    """Nova's 2015 host manager: nothing stops a caller from seeing half-done changes.

    Same async API as :class:`actorsched.Scheduler`. ``yield_delay`` is how
    long each yield sleeps (0 still hands the loop to other callers).
    ``lowest_free_ram()`` and ``overcommitted_hosts()`` show what that costs.
    """

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        yield_delay: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config or SchedulerConfig()
        self.yield_delay = yield_delay
        self.chain = NovaStyleChain(self.config)
        self._clock = clock
        self._rng = random.Random(self.config.seed)
        self._hosts: dict[str, NovaHostState] = {}
        self._claims: dict[str, _Claim] = {}
        self._claims_on: dict[str, set[str]] = {}  # host -> uuids claiming it
        self._group_hosts: dict[str, Counter[str]] = {}  # group id -> host -> members
        self._reported_on: dict[str, str] = {}  # uuid -> host whose last report lists it
        self._lowest_free_ram: int | None = None

    async def __aenter__(self) -> UnsynchronizedHostManager:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    # -- what over-commit looks like ---------------------------------------

    def overcommitted_hosts(self) -> list[str]:
        """Hosts now using more RAM, vCPUs or disk than their capacity allows."""
        return [
            h.host for h in self._hosts.values() if over_capacity(h.state(self.config), self.config)
        ]

    def lowest_free_ram(self) -> int:
        """The lowest free RAM (MB) any host had at any moment of the run so far."""
        lowest = [h.free_ram_mb for h in self._hosts.values()]
        if self._lowest_free_ram is not None:
            lowest.append(self._lowest_free_ram)
        return min(lowest, default=0)

    def _note(self, host: NovaHostState) -> None:
        free = host.free_ram_mb
        if self._lowest_free_ram is None or free < self._lowest_free_ram:
            self._lowest_free_ram = free

    # -- host reports ------------------------------------------------------

    async def update_host(self, report: HostReport) -> bool:
        """Apply a host report; False, and nothing changed, when it is stale.

        Yields half way: claims are reconciled against the listed instances
        first, the figures that carry them are written after the yield.
        """
        if not isinstance(report, HostReport):
            raise InvalidRequest(f"update_host expects a HostReport, got {type(report).__name__}")
        now = self._clock()
        host = self._hosts.get(report.host)
        if host is None:
            host = NovaHostState.from_report(report, now)
            host.instances = frozenset()
            self._hosts[report.host] = host
            self._reconcile(host, frozenset(report.instances), now)
            self._note(host)
            return True
        if report.generation <= host.generation:
            return False
        host.generation = report.generation
        self._reconcile(host, frozenset(report.instances), now)
        await asyncio.sleep(self.yield_delay)  # the 2015 yield, half way through the update
        host.apply_figures(report, now)
        self._note(host)
        return True

    def _reconcile(self, host: NovaHostState, listed: frozenset[str], now: float) -> None:
        for uuid in host.instances - listed:
            if self._reported_on.get(uuid) == host.host:
                del self._reported_on[uuid]
        for uuid in listed - host.instances:
            self._reported_on[uuid] = host.host
        host.instances = listed
        for uuid in list(self._claims_on.get(host.host, ())):
            claim = self._claims[uuid]
            if uuid in listed and uuid not in host.released:  # else the released instance
                if not claim.confirmed:  # the report's used figures carry it from now on
                    claim.confirmed = True
                    host.consume(claim.memory_mb, claim.vcpus, claim.disk_gb, -1)
            elif claim.confirmed:
                self._forget(uuid)
            elif now - claim.created_at > self.config.claim_timeout:
                self._forget(uuid)
                host.consume(claim.memory_mb, claim.vcpus, claim.disk_gb, -1)
                log.warning("claim of %s on %s dropped: never reported", uuid, host.host)
        for uuid in [u for u in host.released if u not in listed]:
            host.uncredit(uuid)

    async def remove_host(self, host: str) -> bool:
        """Forget ``host`` and its claims; False when unknown."""
        if host not in self._hosts:
            return False
        for uuid in list(self._claims_on.get(host, ())):
            self._forget(uuid)
        state = self._hosts.pop(host)
        for uuid in state.instances:
            if self._reported_on.get(uuid) == host:
                del self._reported_on[uuid]
        return True

    # -- claims ------------------------------------------------------------

    def _locate(self, uuid: str) -> str | None:
        claim = self._claims.get(uuid)
        return claim.host if claim is not None else self._reported_on.get(uuid)

    def _members(self, group_id: str) -> Mapping[str, int]:
        return self._group_hosts.get(group_id, _NO_MEMBERS)

    def _take(
        self, host: NovaHostState, ranked: list[NovaHostState], ctx: ChainContext, uuid: str
    ) -> None:
        """Consume ``host`` for ``uuid`` and record the claim, in one synchronous step."""
        spec = ctx.spec
        if uuid in self._claims:
            raise InvalidRequest(
                f"instance {uuid} was claimed by a concurrent request; send each request once"
            )
        alternates = [h.host for h in ranked if h is not host][: self.config.max_attempts - 1]
        selection = Selection(instance_uuid=uuid, host=host.host, alternates=alternates)
        group_id = spec.group.id if spec.group is not None else None
        claim = _Claim(
            uuid,
            host.host,
            spec.memory_mb,
            spec.vcpus,
            spec.disk_gb,
            group_id,
            ctx.now,
            selection,
            request_fingerprint(spec),
        )
        self._claims[uuid] = claim
        self._claims_on.setdefault(host.host, set()).add(uuid)
        if group_id is not None:
            self._group_hosts.setdefault(group_id, Counter())[host.host] += 1
        if uuid in host.instances and uuid not in host.released:
            claim.confirmed = True  # the host already reports it: its figures carry it
        else:
            # assumed, even beside the credit of a released instance of that uuid
            # the host still lists (as actorsched's core)
            host.consume(spec.memory_mb, spec.vcpus, spec.disk_gb)
        self._note(host)

    def _forget(self, uuid: str) -> _Claim:
        """Drop a claim from the indexes (resources are the caller's business)."""
        claim = self._claims.pop(uuid)
        on_host = self._claims_on[claim.host]
        on_host.discard(uuid)
        if not on_host:
            del self._claims_on[claim.host]
        if claim.group_id is not None:
            members = self._group_hosts[claim.group_id]
            members[claim.host] -= 1
            if members[claim.host] <= 0:
                del members[claim.host]
            if not members:
                del self._group_hosts[claim.group_id]
        return claim

    def _unclaim(self, uuid: str) -> None:
        claim = self._forget(uuid)
        host = self._hosts.get(claim.host)
        if host is None:
            return
        if not claim.confirmed:
            host.consume(claim.memory_mb, claim.vcpus, claim.disk_gb, -1)
        elif uuid in host.instances:  # still reported: credit it until a report drops it
            host.credit(uuid, claim.memory_mb, claim.vcpus, claim.disk_gb)

    async def _claim_host(
        self, pick: NovaHostState, ranked: list[NovaHostState], ctx: ChainContext, uuid: str
    ) -> None:
        # 2015: consume what was chosen before the yield, whatever happened since
        self._take(pick, ranked, ctx, uuid)

    async def select_destinations(self, spec: RequestSpec) -> list[Selection]:
        """Claim a host per instance uuid, in the spec's order; raises NoValidHost."""
        if not isinstance(spec, RequestSpec):
            raise InvalidRequest(
                f"select_destinations expects a RequestSpec, got {type(spec).__name__}"
            )
        held = [u for u in spec.instance_uuids if u in self._claims]
        if held:
            if len(held) == len(spec.instance_uuids):
                # the same request again (as actorsched tells it: its fingerprint)
                fingerprint = request_fingerprint(spec)
                other = [u for u in held if self._claims[u].fingerprint != fingerprint]
                if other:
                    differences = fingerprint_differences(
                        self._claims[other[0]].fingerprint, fingerprint
                    )
                    raise InvalidRequest(
                        f"instance {other[0]} already holds a claim made by another "
                        f"request: {'; '.join(differences)}; release it first"
                    )
                return [self._claims[u].selection for u in spec.instance_uuids]
            raise InvalidRequest(
                f"instance_uuids {held} already hold claims but others do not; "
                "resend the original request unchanged, or release the claimed ones first"
            )
        ctx = ChainContext(spec, self.config, self._clock(), self._members, self._locate)
        placed: list[str] = []
        try:
            for uuid in spec.instance_uuids:
                ranked = self.chain.select(spec, self._hosts.values(), ctx.now, ctx, uuid=uuid)
                pick = ranked[0]
                if self.config.host_subset_size > 1:
                    pick = self._rng.choice(ranked[: self.config.host_subset_size])
                await asyncio.sleep(self.yield_delay)  # the 2015 yield: chosen, not yet consumed
                await self._claim_host(pick, ranked, ctx, uuid)
                placed.append(uuid)
                ctx.chosen.append(self._claims[uuid].host)
            if len(placed) > 1 and self.config.max_attempts > 1:
                self._share_alternates(placed, ctx)
        except BaseException:
            for uuid in placed:  # all or nothing
                if uuid in self._claims:
                    self._unclaim(uuid)
            raise
        return [self._claims[u].selection for u in spec.instance_uuids]

    def _share_alternates(self, placed: list[str], ctx: ChainContext) -> None:
        """Nova's alternates of a request of several instances: ranked once all are
        claimed, never a host chosen for one of them, the same for each."""
        chosen = set(ctx.chosen)
        try:
            ranked = self.chain.select(ctx.spec, self._hosts.values(), ctx.now, ctx)
        except NoValidHost:
            ranked = []
        alternates = [h.host for h in ranked if h.host not in chosen]
        alternates = alternates[: self.config.max_attempts - 1]
        for uuid in placed:
            claim = self._claims[uuid]
            claim.selection = Selection(instance_uuid=uuid, host=claim.host, alternates=alternates)

    async def release(self, instance_uuid: str) -> bool:
        """Free that instance's claim at once; False when it holds none."""
        if instance_uuid not in self._claims:
            return False
        self._unclaim(instance_uuid)
        return True

    async def host_states(self) -> dict[str, HostState]:
        """A snapshot of every host (taken in one step, though a host may be half updated)."""
        return {name: host.state(self.config) for name, host in self._hosts.items()}


class LockedHostManager(UnsynchronizedHostManager):
    """Nova's 2016 fix: an asyncio.Lock per host around every update and consume.

    The code is the unsynchronized manager's; each host change runs under
    that host's lock, and a consume re-checks the host there first, moving
    on to the next best host (and, when the list runs out, ranking afresh
    once) when the chosen one no longer fits. It never over-commits.
    """

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        yield_delay: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(config, yield_delay=yield_delay, clock=clock)
        self._locks: dict[str, asyncio.Lock] = {}
        self.retries = 0  # consumes that found their chosen host taken and moved on

    def _lock(self, host: str) -> asyncio.Lock:
        lock = self._locks.get(host)
        if lock is None:
            lock = self._locks[host] = asyncio.Lock()
        return lock

    async def update_host(self, report: HostReport) -> bool:
        if not isinstance(report, HostReport):
            raise InvalidRequest(f"update_host expects a HostReport, got {type(report).__name__}")
        async with self._lock(report.host):
            return await super().update_host(report)

    async def remove_host(self, host: str) -> bool:
        async with self._lock(host):
            return await super().remove_host(host)

    async def release(self, instance_uuid: str) -> bool:
        claim = self._claims.get(instance_uuid)
        if claim is None:
            return False
        async with self._lock(claim.host):
            return await super().release(instance_uuid)

    async def _claim_host(
        self, pick: NovaHostState, ranked: list[NovaHostState], ctx: ChainContext, uuid: str
    ) -> None:
        candidates = [pick, *(h for h in ranked if h is not pick)]
        for _ in range(2):
            for host in candidates:
                async with self._lock(host.host):
                    # re-check under the lock: the figures that chose it may be stale
                    if self._hosts.get(host.host) is host and self.chain.host_passes(host, ctx):
                        self._take(host, candidates, ctx, uuid)
                        return
                self.retries += 1
            candidates = self.chain.select(ctx.spec, self._hosts.values(), ctx.now, ctx, uuid=uuid)
        raise NoValidHost(
            f"instance {uuid}: every host that passed the filters was taken before it could "
            "be claimed, twice; retry the request",
            instance_uuid=uuid,
            total_hosts=len(self._hosts),
        )
