"""SchedulerCore against a plain sequential model of issue 2's rules (Hypothesis stateful).

The model is written from the rules, not from the engine: hosts with the
figures of their last applied report, claims keyed by uuid (assumed or
confirmed), and credits for released instances a host still lists. Reports
are generated the way a compute node would send them: they list instances
the scheduler placed there (started or still being deleted) and their used
figures are the sum of what they list, so the claims the scheduler holds on
a host must never add up to more than the host's capacity. Released uuids
are asked for again (another flavor, with fresh uuids, under hard
anti-affinity): a claim beside the credit of the released instance its host
still lists stays assumed until a listing after the credit ended. The model
runs under both ``nova_release`` settings (:class:`CoreMachineNova34`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
from conftest import make_report, make_spec, ram_only_config
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from actorsched import InvalidRequest, NoValidHost, RequestSpec, Selection
from actorsched.core import SchedulerCore

CONFIG = ram_only_config(
    ram_allocation_ratio=1.5,
    cpu_allocation_ratio=2.0,
    disk_allocation_ratio=1.0,
    claim_timeout=100.0,
    service_down_time=60.0,
    max_instances_per_host=5,
    max_io_ops_per_host=4,
    max_attempts=3,
)
HOSTS = [f"h{i}" for i in range(4)]
Sizes = tuple[int, int, int]  # memory_mb, vcpus, disk_gb


def totals(host: str) -> dict[str, int]:
    """Fixed hardware per host name."""
    i = HOSTS.index(host)
    return {
        "memory_mb": 1024 + 1024 * i,
        "memory_mb_reserved": 256 * (i % 2),
        "vcpus": 1 + i % 3,
        "local_gb": 20 + 10 * i,
    }


@dataclass
class MHost:
    generation: int
    reported_at: float
    enabled: bool
    io_ops: int
    listed: dict[str, Sizes] = field(default_factory=dict)  # uuid -> what that instance uses


@dataclass
class MClaim:
    host: str
    sizes: Sizes
    created_at: float
    confirmed: bool = False


class CoreMachine(RuleBasedStateMachine):
    config = CONFIG

    def __init__(self) -> None:
        super().__init__()
        self.core = SchedulerCore(self.config)
        self.now = 0.0
        self.hosts: dict[str, MHost] = {}
        self.claims: dict[str, MClaim] = {}
        self.credits: dict[str, dict[str, Sizes]] = {}  # host -> released, still listed
        self.sizes: dict[str, Sizes] = {}  # every uuid ever placed, and its last flavor
        self.placed: list[tuple[RequestSpec, list[Selection]]] = []
        self.next_uuid = 0
        self.next_group = 0

    # -- model arithmetic --------------------------------------------------------

    def used(self, host: str) -> Sizes:
        listed = self.hosts[host].listed.values()
        return (
            sum(s[0] for s in listed),
            sum(s[1] for s in listed),
            sum(s[2] for s in listed),
        )

    def assumed(self, host: str) -> list[MClaim]:
        return [c for c in self.claims.values() if c.host == host and not c.confirmed]

    def net_used(self, host: str) -> Sizes:
        """used - credits + assumed claims, per resource."""
        used = self.used(host)
        credits = self.credits.get(host, {}).values()
        assumed = [c.sizes for c in self.assumed(host)]
        return (
            used[0] - sum(s[0] for s in credits) + sum(s[0] for s in assumed),
            used[1] - sum(s[1] for s in credits) + sum(s[1] for s in assumed),
            used[2] - sum(s[2] for s in credits) + sum(s[2] for s in assumed),
        )

    def ram_weight(self, host: str) -> int:
        """What the RAM weigher ranks by: free RAM; under Nova 34 a negative one counts as
        0 (a raw weight is clamped to the weigher's minval 0), so such hosts tie."""
        free = self.free_ram(host)
        return max(free, 0) if self.config.nova_release == 34 else free

    def free_ram(self, host: str) -> int:
        t = totals(host)
        return t["memory_mb"] - t["memory_mb_reserved"] - self.net_used(host)[0]

    def passes(self, host: str, want: Sizes) -> bool:
        h = self.hosts[host]
        t = totals(host)
        mem, vcpus, disk = self.net_used(host)
        assumed = len(self.assumed(host))
        return (
            h.enabled
            and h.reported_at >= self.now - CONFIG.service_down_time
            and (t["memory_mb"] - t["memory_mb_reserved"]) * CONFIG.ram_allocation_ratio - mem
            >= want[0]
            and t["vcpus"] * CONFIG.cpu_allocation_ratio - vcpus >= want[1]
            and t["local_gb"] * CONFIG.disk_allocation_ratio - disk >= want[2]
            # an instance may not overcommit against itself
            and want[0] <= t["memory_mb"]
            and want[1] <= t["vcpus"]
            and want[2] <= t["local_gb"]
            and len(h.listed) + assumed - len(self.credits.get(host, {}))
            < CONFIG.max_instances_per_host
            and h.io_ops + assumed < CONFIG.max_io_ops_per_host
        )

    # -- rules ----------------------------------------------------------------------

    @initialize()
    def cluster(self) -> None:
        for host in HOSTS:
            self._apply_report(host, 1, True, 0, {})

    @rule(
        host=st.sampled_from(HOSTS),
        step=st.integers(1, 3),
        enabled=st.booleans() | st.just(True),
        io_ops=st.integers(0, 4),
        data=st.data(),
    )
    def report(self, host: str, step: int, enabled: bool, io_ops: int, data: st.DataObject) -> None:
        known = self.hosts.get(host)
        listed = dict(known.listed) if known else {}
        if known:
            startable = sorted(
                u for u, c in self.claims.items() if c.host == host and u not in listed
            )
            started = data.draw(
                st.just(set(startable)) | st.sets(st.sampled_from(startable))
                if startable
                else st.just(set())
            )
            gone = data.draw(st.sets(st.sampled_from(sorted(listed))) if listed else st.just(set()))
            for uuid in gone:
                del listed[uuid]
            for uuid in started:
                listed[uuid] = self.claims[uuid].sizes
        self._apply_report(host, (known.generation if known else 0) + step, enabled, io_ops, listed)

    def _apply_report(
        self, host: str, generation: int, enabled: bool, io_ops: int, listed: dict[str, Sizes]
    ) -> None:
        mem = sum(s[0] for s in listed.values())
        vcpus = sum(s[1] for s in listed.values())
        disk = sum(s[2] for s in listed.values())
        report = make_report(
            host,
            generation,
            **totals(host),
            memory_mb_used=mem,
            vcpus_used=vcpus,
            local_gb_used=disk,
            enabled=enabled,
            num_io_ops=io_ops,
            instances=sorted(listed),
        )
        assert self.core.update_host(report, now=self.now) is True
        # the model's rules
        self.hosts[host] = MHost(generation, self.now, enabled, io_ops, listed)
        credits = self.credits.get(host, {})
        for uuid, claim in list(self.claims.items()):
            if claim.host != host:
                continue
            if uuid in listed and uuid not in credits:  # else the released instance is listed
                claim.confirmed = True
            elif claim.confirmed or self.now - claim.created_at > CONFIG.claim_timeout:
                del self.claims[uuid]
        for uuid in list(credits):
            if uuid not in listed:
                del credits[uuid]

    @precondition(lambda self: bool(self.hosts))
    @rule(data=st.data(), back=st.integers(0, 2))
    def stale_report(self, data: st.DataObject, back: int) -> None:
        host = data.draw(st.sampled_from(sorted(self.hosts)))
        generation = max(0, self.hosts[host].generation - back)
        before = self.core.digest()
        junk = make_report(host, generation, memory_mb=1, enabled=False, instances=["junk"])
        assert self.core.update_host(junk, now=self.now) is False
        assert self.core.digest() == before

    @rule(
        count=st.integers(1, 3),
        mem=st.sampled_from([256, 512, 1024, 1536]),
        vcpus=st.integers(1, 2),
        disk=st.sampled_from([1, 5, 10]),
    )
    def select(self, count: int, mem: int, vcpus: int, disk: int) -> None:
        uuids = [f"vm{self.next_uuid + i}" for i in range(count)]
        self.next_uuid += count
        spec = make_spec(*uuids, memory_mb=mem, vcpus=vcpus, disk_gb=disk)
        want: Sizes = (mem, vcpus, disk)
        before = self.core.digest()
        try:
            selections = self.core.select_destinations(spec, now=self.now)
        except NoValidHost:
            selections = []
        if not selections:
            assert self.core.digest() == before, "a failed request left something behind"
            if count == 1:
                passing = [h for h in self.hosts if self.passes(h, want)]
                assert passing == [], f"NoValidHost, but {passing} fit"
            return
        assert [s.instance_uuid for s in selections] == uuids
        alternates = CONFIG.max_attempts - 1
        for sel in selections:
            passing = [h for h in self.hosts if self.passes(h, want)]
            assert sel.host in passing
            # RAM is the only weigher: best free RAM, then the next best as alternates
            ranked = sorted((self.ram_weight(h) for h in passing), reverse=True)
            assert self.ram_weight(sel.host) == ranked[0]
            if count == 1:
                assert sel.host not in sel.alternates
                assert set(sel.alternates) <= set(passing)
                got = [self.ram_weight(h) for h in sel.alternates]
                assert got == ranked[1 : 1 + len(got)]
                assert len(sel.alternates) == min(alternates, len(passing) - 1)
            self.sizes[sel.instance_uuid] = want
            self.claims[sel.instance_uuid] = MClaim(sel.host, want, self.now)
        if count > 1:
            # Nova: chosen once all are claimed, from the hosts that pass then,
            # the same for every instance and never a host chosen for one of them
            chosen = {sel.host for sel in selections}
            left = [h for h in self.hosts if self.passes(h, want) and h not in chosen]
            ranked = sorted((self.ram_weight(h) for h in left), reverse=True)
            for sel in selections:
                assert sel.alternates == selections[0].alternates
                assert set(sel.alternates) <= set(left)
                assert [self.ram_weight(h) for h in sel.alternates] == ranked[:alternates]
        self.placed.append((spec, selections))

    @precondition(lambda self: any(u not in self.claims for u in self.sizes))
    @rule(
        data=st.data(),
        fresh=st.integers(0, 2),
        mem=st.sampled_from([256, 512, 1024, 1536]),
        vcpus=st.integers(1, 2),
        disk=st.sampled_from([1, 5, 10]),
        anti=st.booleans(),
    )
    def select_released(
        self, data: st.DataObject, fresh: int, mem: int, vcpus: int, disk: int, anti: bool
    ) -> None:
        """A released (or dropped) uuid asked for again, maybe with fresh uuids under
        hard anti-affinity: all or nothing, and a failure leaves nothing behind."""
        # most often one its host still lists and credits back: the case that matters
        released = st.sampled_from(sorted(u for u in self.sizes if u not in self.claims))
        still_listed = sorted(
            u for by_uuid in self.credits.values() for u in by_uuid if u not in self.claims
        )
        old = data.draw(st.sampled_from(still_listed) | released if still_listed else released)
        uuids = [old, *(f"vm{self.next_uuid + i}" for i in range(fresh))]
        self.next_uuid += fresh
        self.next_group += 1
        group = (f"g{self.next_group}", "anti-affinity") if anti else None  # a group of its own
        spec = make_spec(*uuids, memory_mb=mem, vcpus=vcpus, disk_gb=disk, group=group)
        want: Sizes = (mem, vcpus, disk)
        before = self.core.digest()
        try:
            selections = self.core.select_destinations(spec, now=self.now)
        except NoValidHost:
            assert self.core.digest() == before, "a failed request left something behind"
            if len(uuids) == 1:
                assert [h for h in self.hosts if self.passes(h, want)] == []
            return
        assert [s.instance_uuid for s in selections] == uuids
        for sel in selections:
            passing = [h for h in self.hosts if self.passes(h, want)]
            assert sel.host in passing
            if not anti:
                assert self.ram_weight(sel.host) == max(self.ram_weight(h) for h in passing)
            runs = self.hosts[sel.host].listed
            credited = self.credits.get(sel.host, {})
            confirmed = sel.instance_uuid in runs and sel.instance_uuid not in credited
            self.sizes[sel.instance_uuid] = want
            self.claims[sel.instance_uuid] = MClaim(sel.host, want, self.now, confirmed)
        if anti:
            assert len({s.host for s in selections}) == len(uuids)
        # an earlier request for one of these uuids is not the one they hold now
        self.placed = [p for p in self.placed if not set(p[0].instance_uuids) & set(uuids)]
        self.placed.append((spec, selections))

    @precondition(lambda self: bool(self.placed))
    @rule(data=st.data())
    def select_again(self, data: st.DataObject) -> None:
        spec, selections = data.draw(st.sampled_from(self.placed))
        live = [u for u in spec.instance_uuids if u in self.claims]
        before = self.core.digest()
        if len(live) == len(spec.instance_uuids):
            assert self.core.select_destinations(spec, now=self.now) == selections
            # the same uuids asked for with another flavor: not this request
            other = spec.model_copy(update={"disk_gb": spec.disk_gb + 1})
            differs = f"disk_gb {spec.disk_gb} then, {spec.disk_gb + 1} now"
            with pytest.raises(InvalidRequest, match=differs):
                self.core.select_destinations(other, now=self.now)
        elif live:
            try:
                self.core.select_destinations(spec, now=self.now)
            except InvalidRequest:
                pass
            else:
                raise AssertionError("mixed claimed and unclaimed uuids must be refused")
        else:
            return  # a fresh request for old uuids: not this rule's business
        assert self.core.digest() == before

    @precondition(lambda self: bool(self.sizes))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        live = st.sampled_from(sorted(self.claims)) if self.claims else st.nothing()
        uuid = data.draw(live | live | st.sampled_from(sorted(self.sizes)) | st.just("unknown"))
        claim = self.claims.pop(uuid, None)
        if claim is not None and claim.confirmed and uuid in self.hosts[claim.host].listed:
            self.credits.setdefault(claim.host, {})[uuid] = claim.sizes
        assert self.core.release(uuid, now=self.now) is (claim is not None)

    @rule(host=st.sampled_from(HOSTS))
    def remove_host(self, host: str) -> None:
        known = host in self.hosts
        assert self.core.remove_host(host, now=self.now) is known
        self.hosts.pop(host, None)
        self.credits.pop(host, None)
        for uuid in [u for u, c in self.claims.items() if c.host == host]:
            del self.claims[uuid]

    @rule(dt=st.sampled_from([0.5, 5.0, 30.0, 61.0, 101.0]))
    def advance_time(self, dt: float) -> None:
        self.now += dt

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def claims_match(self) -> None:
        expected = {u: (c.host, c.confirmed) for u, c in self.claims.items()}
        assert self.core.claims() == expected

    @invariant()
    def figures_match(self) -> None:
        states = self.core.host_states(now=self.now)
        assert set(states) == set(self.hosts)
        for host, h in self.hosts.items():
            s = states[host]
            t = totals(host)
            mem, vcpus, disk = self.net_used(host)
            assumed = len(self.assumed(host))
            assert s.generation == h.generation
            assert s.enabled == h.enabled
            assert s.free_ram_mb == t["memory_mb"] - t["memory_mb_reserved"] - mem
            assert s.free_disk_gb == t["local_gb"] - disk
            assert s.vcpus_used == vcpus
            assert s.vcpus_total == t["vcpus"]
            assert s.assumed_claims == assumed
            assert s.num_instances == len(h.listed) + assumed - len(self.credits.get(host, {}))
            assert s.num_io_ops == h.io_ops + assumed

    @invariant()
    def no_host_over_capacity(self) -> None:
        for host in self.hosts:
            t = totals(host)
            held = [c.sizes for c in self.claims.values() if c.host == host]
            assert (
                sum(s[0] for s in held)
                <= (t["memory_mb"] - t["memory_mb_reserved"]) * CONFIG.ram_allocation_ratio
            )
            assert sum(s[1] for s in held) <= t["vcpus"] * CONFIG.cpu_allocation_ratio
            assert sum(s[2] for s in held) <= t["local_gb"] * CONFIG.disk_allocation_ratio


# under `make mutate` each surviving mutant runs this: fewer runs, and the same
# ones each time so that two mutation runs compare
_MUTATING = bool(os.environ.get("ACTORSCHED_MUTATE"))
CoreMachine.TestCase.settings = settings(
    max_examples=25 if _MUTATING else 150,
    derandomize=_MUTATING,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoreAgainstModel = CoreMachine.TestCase


class CoreMachineNova34(CoreMachine):
    """The same model under ``nova_release`` 34 (where its rules differ here: the RAM
    weigher clamps a negative free RAM to 0; no request asks 0 of a class)."""

    config = CONFIG.model_copy(update={"nova_release": 34})


CoreMachineNova34.TestCase.settings = settings(
    max_examples=25 if _MUTATING else 75,
    derandomize=_MUTATING,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoreAgainstModelNova34 = CoreMachineNova34.TestCase
