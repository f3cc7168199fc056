"""The Nova-shaped baselines apply actorsched's filters, weighers and claim rules."""

from __future__ import annotations

import asyncio
import doctest
import random
from typing import Any

import pytest

import actorsched.baselines
from actorsched import (
    HostReport,
    InvalidRequest,
    NoValidHost,
    RequestSpec,
    Scheduler,
    SchedulerConfig,
    ServerGroup,
)
from actorsched.baselines import (
    LockedHostManager,
    NovaHostState,
    NovaStyleChain,
    UnsynchronizedHostManager,
    over_capacity,
)

Manager = type[UnsynchronizedHostManager]
MANAGERS = pytest.mark.parametrize("manager_cls", [UnsynchronizedHostManager, LockedHostManager])


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def report(host: str, generation: int = 1, **figures: Any) -> HostReport:
    fields: dict[str, Any] = {
        "memory_mb": 8192,
        "memory_mb_used": 0,
        "vcpus": 8,
        "vcpus_used": 0,
        "local_gb": 100,
        "local_gb_used": 0,
    }
    fields.update(figures)
    return HostReport(host=host, generation=generation, **fields)


def spec(*uuids: str, memory_mb: int = 1024, **extra: Any) -> RequestSpec:
    return RequestSpec(
        instance_uuids=list(uuids) or ["vm"], memory_mb=memory_mb, vcpus=1, disk_gb=1, **extra
    )


async def hosts_of(manager: UnsynchronizedHostManager, request: RequestSpec) -> list[str]:
    return [s.host for s in await manager.select_destinations(request)]


def test_module_examples_hold() -> None:
    result = doctest.testmod(actorsched.baselines)
    assert result.attempted > 0
    assert result.failed == 0


@MANAGERS
async def test_ram_filter_applies_the_allocation_ratio(manager_cls: Manager) -> None:
    config = SchedulerConfig(ram_allocation_ratio=1.5)
    async with manager_cls(config) as m:
        await m.update_host(report("n1", memory_mb=4096 + 512, memory_mb_reserved=512))
        # 4096 x 1.5 = 6144 in all, no instance larger than the host's 4608
        assert await hosts_of(m, spec("a", memory_mb=4608)) == ["n1"]
        assert await hosts_of(m, spec("b", memory_mb=1536)) == ["n1"]
        with pytest.raises(NoValidHost, match="RamFilter removed 1"):
            await m.select_destinations(spec("c", memory_mb=1))
        assert (await m.host_states())["n1"].free_ram_mb == 4096 - 6144
        assert m.overcommitted_hosts() == []  # within capacity once the ratio is applied


@MANAGERS
async def test_core_and_disk_filters(manager_cls: Manager) -> None:
    async with manager_cls(SchedulerConfig(cpu_allocation_ratio=2.0)) as m:
        await m.update_host(report("n1", vcpus=2, vcpus_used=2, local_gb=10, local_gb_used=5))
        with pytest.raises(NoValidHost, match="CoreFilter removed 1"):
            await m.select_destinations(
                RequestSpec(instance_uuids=["a"], memory_mb=1, vcpus=3, disk_gb=1)
            )
        with pytest.raises(NoValidHost, match="DiskFilter removed 1"):
            await m.select_destinations(
                RequestSpec(instance_uuids=["a"], memory_mb=1, vcpus=2, disk_gb=6)
            )
        placed = await m.select_destinations(
            RequestSpec(instance_uuids=["a"], memory_mb=1, vcpus=2, disk_gb=5)
        )
        assert placed[0].host == "n1"


@MANAGERS
async def test_stale_reports_are_ignored(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        assert await m.update_host(report("n1", generation=5, memory_mb_used=1024))
        assert not await m.update_host(report("n1", generation=5, memory_mb_used=0))
        assert not await m.update_host(report("n1", generation=4, memory_mb_used=0))
        state = (await m.host_states())["n1"]
        assert (state.generation, state.free_ram_mb) == (5, 8192 - 1024)


@MANAGERS
async def test_compute_zone_and_trait_filters(manager_cls: Manager) -> None:
    clock = Clock()
    config = SchedulerConfig(service_down_time=60)
    async with manager_cls(config, clock=clock) as m:
        await m.update_host(report("off", enabled=False))
        await m.update_host(report("az2", availability_zone="az2"))
        await m.update_host(report("gpu", availability_zone="az1", traits=["GPU"]))
        await m.update_host(report("ssd", availability_zone="az1", traits=["SSD"]))
        assert await hosts_of(m, spec("a", availability_zone="az2")) == ["az2"]
        assert await hosts_of(m, spec("b", required_traits=["GPU"])) == ["gpu"]
        no_gpu = spec("c", availability_zone="az1", forbidden_traits=["GPU"])
        assert await hosts_of(m, no_gpu) == ["ssd"]
        with pytest.raises(NoValidHost) as info:
            await m.select_destinations(spec("d", required_traits=["FPGA"]))
        assert info.value.filter_counts == {"ComputeFilter": 1, "RequiredTraitsFilter": 3}
        clock.now += 61  # nobody has reported within service_down_time
        with pytest.raises(NoValidHost, match="ComputeFilter removed 4"):
            await m.select_destinations(spec("e"))


@MANAGERS
async def test_num_instances_and_io_ops_filters(manager_cls: Manager) -> None:
    config = SchedulerConfig(max_instances_per_host=3, max_io_ops_per_host=2)
    async with manager_cls(config) as m:
        await m.update_host(report("busy", instances=["x", "y", "z"]))
        await m.update_host(report("io", num_io_ops=2))
        await m.update_host(report("free"))
        assert await hosts_of(m, spec("a")) == ["free"]
        assert await hosts_of(m, spec("b")) == ["free"]  # one assumed claim is one I/O op
        with pytest.raises(NoValidHost) as info:
            await m.select_destinations(spec("c"))
        assert info.value.filter_counts == {"NumInstancesFilter": 1, "IoOpsFilter": 2}


@MANAGERS
async def test_server_group_filters(manager_cls: Manager) -> None:
    anti = ServerGroup(id="g-anti", policy="anti-affinity")
    affinity = ServerGroup(id="g-aff", policy="affinity")
    async with manager_cls() as m:
        for i in range(3):
            await m.update_host(report(f"n{i}", memory_mb=8192 + 1024 * i))
        spread = await hosts_of(m, spec("a1", "a2", "a3", group=anti))
        assert sorted(spread) == ["n0", "n1", "n2"]
        with pytest.raises(NoValidHost, match="ServerGroupAntiAffinityFilter removed 3"):
            await m.select_destinations(spec("a4", group=anti))
        together = await hosts_of(m, spec("b1", "b2", group=affinity))
        assert together == ["n2", "n2"]
        assert await hosts_of(m, spec("b3", group=affinity)) == ["n2"]


@MANAGERS
async def test_same_different_and_ignore_hosts(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        await m.update_host(report("n0", instances=["running"]))
        await m.update_host(report("n1", memory_mb=16384))
        await m.update_host(report("n2", memory_mb=12288))
        assert await hosts_of(m, spec("a")) == ["n1"]
        assert await hosts_of(m, spec("b", same_host=["running"])) == ["n0"]
        assert await hosts_of(m, spec("c", same_host=["a"])) == ["n1"]
        assert await hosts_of(m, spec("d", different_host=["a", "b"])) == ["n2"]
        assert await hosts_of(m, spec("e", ignore_hosts=["n1", "n2"])) == ["n0"]


@MANAGERS
async def test_ram_weigher_spreads_or_stacks(manager_cls: Manager) -> None:
    stack = SchedulerConfig(
        ram_weight_multiplier=-1.0, cpu_weight_multiplier=0, disk_weight_multiplier=0
    )
    for config, want in ((SchedulerConfig(), "big"), (stack, "small")):
        async with manager_cls(config) as m:
            await m.update_host(report("small", memory_mb=4096))
            await m.update_host(report("big", memory_mb=65536))
            [selection] = await m.select_destinations(spec("a"))
            assert selection.host == want
            assert selection.alternates == [h for h in ("small", "big") if h != want]


@MANAGERS
async def test_multi_instance_requests_are_all_or_nothing(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        await m.update_host(report("n1", memory_mb=4096))
        with pytest.raises(NoValidHost, match="RamFilter"):
            await m.select_destinations(spec("a", "b", "c", memory_mb=2048))
        state = (await m.host_states())["n1"]
        assert (state.free_ram_mb, state.assumed_claims) == (4096, 0)
        assert not await m.release("a")


@MANAGERS
async def test_claims_are_idempotent_per_uuid(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        await m.update_host(report("n1"))
        await m.update_host(report("n2"))
        first = await m.select_destinations(spec("a", "b"))
        again = await m.select_destinations(spec("a", "b"))
        assert again == first
        assert sum(s.assumed_claims for s in (await m.host_states()).values()) == 2
        with pytest.raises(InvalidRequest, match="already hold claims"):
            await m.select_destinations(spec("a", "c"))


@MANAGERS
async def test_claim_lifecycle_follows_reports(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        await m.update_host(report("n1"))
        await m.select_destinations(spec("a", memory_mb=2048))
        # a fresher report that does not list the instance yet keeps the claim
        await m.update_host(report("n1", generation=2))
        assert (await m.host_states())["n1"].free_ram_mb == 8192 - 2048
        # once listed it is counted once, through the report's figures
        await m.update_host(report("n1", generation=3, memory_mb_used=2048, instances=["a"]))
        state = (await m.host_states())["n1"]
        assert (state.free_ram_mb, state.assumed_claims, state.num_instances) == (6144, 0, 1)
        # released while still listed: credited back until a report drops it
        assert await m.release("a")
        assert not await m.release("a")
        assert (await m.host_states())["n1"].free_ram_mb == 8192
        await m.update_host(report("n1", generation=4, memory_mb_used=2048, instances=["a"]))
        assert (await m.host_states())["n1"].free_ram_mb == 8192
        await m.update_host(report("n1", generation=5))
        state = (await m.host_states())["n1"]
        assert (state.free_ram_mb, state.num_instances) == (8192, 0)


@MANAGERS
async def test_reclaiming_a_released_still_listed_instance_cancels_its_credit(
    manager_cls: Manager,
) -> None:
    async with manager_cls() as m:
        await m.update_host(report("n1", memory_mb=4096))
        await m.select_destinations(spec("a", memory_mb=4096))
        await m.update_host(report("n1", 2, memory_mb=4096, memory_mb_used=4096, instances=["a"]))
        await m.release("a")
        assert (await m.host_states())["n1"].free_ram_mb == 4096
        assert await hosts_of(m, spec("a", memory_mb=4096)) == ["n1"]
        assert (await m.host_states())["n1"].free_ram_mb == 0
        with pytest.raises(NoValidHost):
            await m.select_destinations(spec("b", memory_mb=4096))


@MANAGERS
async def test_no_host_at_all_is_no_valid_host(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        with pytest.raises(NoValidHost, match="0/0 hosts"):
            await m.select_destinations(spec("a"))


@MANAGERS
async def test_remove_host(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        await m.update_host(report("n1"))
        await m.select_destinations(spec("a"))
        assert await m.remove_host("n1")
        assert not await m.remove_host("n1")
        assert await m.host_states() == {}
        assert not await m.release("a")


@MANAGERS
async def test_wrong_argument_types_are_rejected(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        with pytest.raises(InvalidRequest, match="HostReport"):
            await m.update_host({"host": "n1"})  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="RequestSpec"):
            await m.select_destinations({"instance_uuids": ["a"]})  # type: ignore[arg-type]


async def test_locked_manager_chooses_as_the_scheduler_does() -> None:
    # Run one after another there is no race, so the baseline and actorsched
    # apply the same filters and weighers to the same figures.
    rng = random.Random(7)
    reports = [
        report(
            f"n{i:02d}",
            memory_mb=rng.randrange(4, 64) * 1024,
            vcpus=rng.randrange(4, 32),
            local_gb=rng.randrange(100, 2000),
            availability_zone=rng.choice(["az1", "az2"]),
            num_io_ops=rng.randrange(0, 4),
        )
        for i in range(30)
    ]
    requests = [
        RequestSpec(
            instance_uuids=[f"vm-{i}"],
            memory_mb=rng.choice([2048, 8192, 16384]),
            vcpus=rng.choice([1, 2, 4]),
            disk_gb=rng.choice([10, 80]),
            availability_zone=rng.choice([None, "az1", "az2"]),
        )
        for i in range(200)
    ]
    chosen: list[list[str | None]] = []
    async with LockedHostManager() as locked, Scheduler() as scheduler:
        for placer in (locked, scheduler):
            hosts: list[str | None] = []
            for r in reports:
                await placer.update_host(r)
            for request in requests:
                try:
                    [selection] = await placer.select_destinations(request)
                    hosts.append(selection.host)
                except NoValidHost:
                    hosts.append(None)
            chosen.append(hosts)
    assert None in chosen[1]  # the run does reach full hosts
    assert chosen[0] == chosen[1]


@pytest.mark.parametrize("yield_delay", [0.0, 0.001])
async def test_locked_manager_never_overcommits(yield_delay: float) -> None:
    rng = random.Random(3)
    config = SchedulerConfig(max_io_ops_per_host=1000, max_instances_per_host=1000)
    reports = {f"n{i}": report(f"n{i}", memory_mb=rng.randrange(4, 16) * 1024) for i in range(20)}
    generation = dict.fromkeys(reports, 1)
    placed: dict[str, list[str]] = {h: [] for h in reports}

    async with LockedHostManager(config, yield_delay=yield_delay) as m:
        for r in reports.values():
            await m.update_host(r)

        async def create(i: int) -> None:
            try:
                [s] = await m.select_destinations(spec(f"vm-{i}", memory_mb=2048))
            except NoValidHost:
                return
            placed[s.host].append(s.instance_uuid)

        async def send_report(host: str) -> None:
            generation[host] += 1
            running = list(placed[host])
            await m.update_host(
                reports[host].model_copy(
                    update={
                        "generation": generation[host],
                        "memory_mb_used": 2048 * len(running),
                        "instances": running,
                    }
                )
            )

        jobs = [create(i) for i in range(150)]
        jobs.extend(send_report(rng.choice(list(reports))) for _ in range(40))
        rng.shuffle(jobs)
        await asyncio.gather(*jobs)
        states = await m.host_states()
    assert sum(len(v) for v in placed.values()) > 0
    assert m.overcommitted_hosts() == []
    assert m.lowest_free_ram() >= 0
    assert all(s.free_ram_mb >= 0 and not over_capacity(s, config) for s in states.values())


async def test_unsynchronized_manager_overcommits_a_cluster() -> None:
    async with UnsynchronizedHostManager() as m:
        for i in range(5):
            await m.update_host(report(f"n{i}", memory_mb=4096))
        await asyncio.gather(
            *(m.select_destinations(spec(f"vm-{i}", memory_mb=2048)) for i in range(30))
        )
        assert m.overcommitted_hosts() != []
        assert m.lowest_free_ram() < 0


def test_nova_style_chain_runs_synchronously() -> None:
    chain = NovaStyleChain(SchedulerConfig(max_io_ops_per_host=1))
    hosts = [
        NovaHostState.from_report(report("idle", memory_mb=4096), now=0.0),
        NovaHostState.from_report(report("big-busy", memory_mb=65536, num_io_ops=1), now=0.0),
        NovaHostState.from_report(report("bigger", memory_mb=131072, traits=["GPU"]), now=0.0),
    ]
    assert [h.host for h in chain.select(spec("a"), hosts, now=1.0)] == ["bigger", "idle"]
    no_gpu = spec("b", forbidden_traits=["GPU"])
    assert [h.host for h in chain.select(no_gpu, hosts, now=1.0)] == ["idle"]
    passing, removed = chain.filter_hosts(hosts, chain.context(no_gpu, now=1.0))
    assert [h.host for h in passing] == ["idle"]
    assert removed == {"ForbiddenTraitsFilter": 1, "IoOpsFilter": 1}
    with pytest.raises(NoValidHost, match="0/3 hosts"):
        chain.select(spec("c", memory_mb=10**6), hosts, now=1.0)


def test_over_capacity_counts_each_resource_with_its_ratio() -> None:
    config = SchedulerConfig(ram_allocation_ratio=1.0, cpu_allocation_ratio=2.0)
    host = NovaHostState.from_report(report("n1", memory_mb=4096, vcpus=2), now=0.0)
    assert not over_capacity(host.state(), config)
    host.consume(0, 4, 0)  # 4 vCPUs on 2 x 2.0: full, not over
    assert not over_capacity(host.state(), config)
    host.consume(0, 1, 0)
    assert over_capacity(host.state(), config)
    host.consume(0, -1, 0)
    host.consume(4097, 0, 0)
    assert over_capacity(host.state(), config)
    host.consume(4097, 0, 0, -1)
    host.consume(0, 0, 101)
    assert over_capacity(host.state(), config)


@MANAGERS
async def test_alternates_of_several_instances_are_chosen_after_all_claims(
    manager_cls: Manager,
) -> None:
    # as Nova's filter scheduler: 2 instances, 3 equal hosts, max_attempts=3
    async with manager_cls(SchedulerConfig(max_attempts=3)) as m:
        for host in ("host0", "host1", "host2"):
            await m.update_host(report(host))
        selections = await m.select_destinations(spec("i1", "i2"))
        assert [[s.host, *s.alternates] for s in selections] == [
            ["host0", "host2"],
            ["host1", "host2"],
        ]


@MANAGERS
async def test_a_repeat_with_another_request_is_invalid(manager_cls: Manager) -> None:
    async with manager_cls() as m:
        await m.update_host(report("n1"))
        first = await m.select_destinations(spec("a", memory_mb=1024))
        assert await m.select_destinations(spec("a", memory_mb=1024)) == first
        with pytest.raises(InvalidRequest, match="memory_mb 1024 then, 2048 now"):
            await m.select_destinations(spec("a", memory_mb=2048))
