"""The follower against a real Placement seeded as Nova's computes seed it.

Every test seeds providers of its own (named with a fresh suffix) on the
module's Placement and looks at those; the providers of earlier tests are
there too, as in a real cloud.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from placement_fixture import PlacementServer, placement_missing, running_placement
from placement_seed import Seeder

from actorsched import HostReport, NoValidHost, RequestSpec, Scheduler, SchedulerConfig
from actorsched.models import Units
from actorsched.nova.placement import (
    Inventory,
    PlacementClaims,
    PlacementClient,
    PlacementError,
    PlacementFollower,
    ProviderState,
    RemovedProvider,
)


@pytest.fixture(scope="module")
def placement(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    reason = placement_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_placement(tmp_path_factory.mktemp("placement")) as server:
        yield server


@pytest.fixture
def seed(placement: PlacementServer) -> Iterator[Seeder]:
    seeder = Seeder(placement.url)
    yield seeder
    seeder.close()


def _id() -> str:
    return str(uuid.uuid4())


def _name(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:8]}"


def _by_uuid(states: tuple[ProviderState, ...]) -> dict[str, ProviderState]:
    return {s.uuid: s for s in states}


def _same(report: HostReport, expected: HostReport) -> None:
    assert report.model_dump(exclude={"generation"}) == expected.model_dump(exclude={"generation"})


async def test_reports_equal_the_seeded_figures(placement: PlacementServer, seed: Seeder) -> None:
    agg1, agg2 = _id(), _id()
    a_name, b_name = _name("cn-a"), _name("cn-b")
    a = seed.compute_node(
        a_name,
        vcpus=32,
        reserved_vcpus=2,
        memory_mb=65_536,
        reserved_mb=512,
        disk_gb=2_000,
        reserved_gb=10,
        cpu_ratio=16.0,
        ram_ratio=1.5,
        disk_ratio=1.0,
        extra={"PCPU": {"total": 8, "max_unit": 8}},
        traits={"HW_CPU_X86_AVX2", "CUSTOM_GOLD"},
        aggregates={agg1, agg2},
    )
    b = seed.compute_node(b_name, traits={"COMPUTE_STATUS_DISABLED"})
    # not compute nodes: a sharing disk provider and a nested child of A
    shared = seed.provider(_name("shared-disk"))
    seed.inventories(shared, {"DISK_GB": {"total": 10_000}})
    seed.traits(shared, {"MISC_SHARES_VIA_AGGREGATE"})
    child = seed.provider(_name("cn-a-gpu"), parent=a)
    seed.inventories(child, {"VGPU": {"total": 4}})
    i1, i2, i3, i4, m1 = _id(), _id(), _id(), _id(), _id()
    seed.allocate_many(
        {
            i1: {a: {"VCPU": 4, "MEMORY_MB": 4_096, "DISK_GB": 40}},
            i2: {a: {"VCPU": 2, "MEMORY_MB": 2_048}, child: {"VGPU": 1}},
            i3: {b: {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10}},
            i4: {a: {"VCPU": 1, "MEMORY_MB": 256}, shared: {"DISK_GB": 20}},
            m1: {b: {"VCPU": 2, "MEMORY_MB": 1_024}},  # a migration's source allocation
        }
    )
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client)
        result = await follower.poll()
    states = _by_uuid(result.changed)
    assert shared not in states
    assert child not in states
    assert shared not in follower.aggregates()
    _same(
        states[a].report,
        HostReport(
            host=a_name,
            node=a_name,
            generation=1,
            memory_mb=65_536,
            memory_mb_reserved=512,
            memory_mb_used=4_096 + 2_048 + 256,
            vcpus=32,
            vcpus_reserved=2,
            vcpus_used=4 + 2 + 1,
            local_gb=2_000,
            local_gb_reserved=10,
            local_gb_used=40,  # i4's disk is on the sharing provider
            ram_allocation_ratio=1.5,
            cpu_allocation_ratio=16.0,
            disk_allocation_ratio=1.0,
            traits=["COMPUTE_NODE", "CUSTOM_GOLD", "HW_CPU_X86_AVX2"],
            instances=sorted([i1, i2, i4]),
        ),
    )
    _same(
        states[b].report,
        HostReport(
            host=b_name,
            node=b_name,
            generation=1,
            memory_mb=32_768,
            memory_mb_reserved=512,
            memory_mb_used=512 + 1_024,
            vcpus=16,
            vcpus_used=3,
            local_gb=1_000,
            local_gb_used=10,
            ram_allocation_ratio=1.0,
            cpu_allocation_ratio=4.0,
            disk_allocation_ratio=1.0,
            enabled=False,  # COMPUTE_STATUS_DISABLED: Nova's disabled compute service
            traits=["COMPUTE_NODE", "COMPUTE_STATUS_DISABLED"],
            instances=sorted([i3, m1]),
        ),
    )
    rules = states[a].rules
    assert rules.inventories == {
        "VCPU": Inventory(32, 2, 1, 32, 1, 16.0),
        "MEMORY_MB": Inventory(65_536, 512, 1, 65_536, 1, 1.5),
        "DISK_GB": Inventory(2_000, 10, 1, 2_000, 1, 1.0),
        "PCPU": Inventory(8, 0, 1, 8, 1, 1.0),
    }
    # the report carries the reserved vCPUs and disk; only the PCPU class is left out
    assert rules.unexpressed == ("PCPU inventory",)
    assert states[b].rules.unexpressed == ()
    assert follower.aggregates()[a] == frozenset({agg1, agg2}) == states[a].aggregates
    assert follower.aggregates()[b] == frozenset()
    assert states[a].consumers[i1] == {"VCPU": 4, "MEMORY_MB": 4_096, "DISK_GB": 40}
    assert follower.provider_of_host(a_name) == a
    assert follower.providers_of(i4) == {a}  # the sharing provider is not followed
    assert states[a].generation == seed.generation(a)
    generations = [s.report.generation for s in result.changed]
    assert len(set(generations)) == len(generations)


async def test_an_idle_poll_rereads_nothing(placement: PlacementServer, seed: Seeder) -> None:
    seed.compute_node(_name("idle"))
    seed.compute_node(_name("idle"))
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        first = await follower.poll()
        assert len(first.reread) >= 2
        idle = await follower.poll()
        assert (idle.changed, idle.reread, idle.swept, idle.removed) == ((), (), (), ())
        assert idle.requests == 1  # the listing
        sweeping = PlacementFollower(client, sweep_per_poll=2)
        await sweeping.poll()
        swept = await sweeping.poll()
        assert (swept.changed, swept.reread) == ((), ())
        assert len(swept.swept) == 2
        assert swept.requests == 3


async def test_a_changed_inventory_rereads_only_that_provider(
    placement: PlacementServer, seed: Seeder
) -> None:
    a, b, c = (seed.compute_node(_name("inv")) for _ in range(3))
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        await follower.poll()
        seed.inventories(b, {"VCPU": {"total": 64, "allocation_ratio": 2.0}})
        result = await follower.poll()
    assert result.reread == (b,)
    assert result.requests == 1 + 4
    (state,) = result.changed
    assert state.uuid == b
    assert (state.report.vcpus, state.report.cpu_allocation_ratio) == (64, 2.0)
    assert (state.report.memory_mb, state.report.local_gb) == (0, 0)  # no inventory now
    assert a != c


async def test_a_new_allocation_is_seen_after_one_poll(
    placement: PlacementServer, seed: Seeder
) -> None:
    a, b = seed.compute_node(_name("alloc")), seed.compute_node(_name("alloc"))
    instance = _id()
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        await follower.poll()
        seed.allocate(instance, {b: {"VCPU": 3, "MEMORY_MB": 1_536, "DISK_GB": 15}})
        result = await follower.poll()
    assert result.reread == (b,)
    (state,) = result.changed
    report = state.report
    assert report.instances == [instance]
    assert (report.vcpus_used, report.memory_mb_used, report.local_gb_used) == (3, 1_536, 15)
    assert follower.providers_of(instance) == {b}
    assert a != b


async def test_regression_delete_allocations_leaves_the_generation_so_a_sweep_reads_it(
    placement: PlacementServer, seed: Seeder
) -> None:
    """Placement moves no provider generation when allocations leave it (DELETE, or a
    PUT that moves the consumer elsewhere): only an allocations read sees it."""
    a, b = seed.compute_node(_name("del")), seed.compute_node(_name("del"))
    gone, moved = _id(), _id()
    seed.allocate(gone, {a: {"VCPU": 1, "MEMORY_MB": 128}})
    seed.allocate(moved, {a: {"VCPU": 2, "MEMORY_MB": 256}})
    async with PlacementClient(placement.url) as client:
        blind = PlacementFollower(client, sweep_per_poll=0)
        await blind.poll()
        before = seed.generation(a)
        seed.delete_allocations(gone)
        seed.allocate(moved, {b: {"VCPU": 2, "MEMORY_MB": 256}})
        assert seed.generation(a) == before  # Placement's rule this test pins
        assert (await blind.poll()).reread == (b,)  # b's moved; a's did not
        assert blind.state(a) is not None
        assert blind.state(a).report.vcpus_used == 3  # type: ignore[union-attr]
        sweeping = PlacementFollower(client, sweep_per_poll=1_000_000)
        await sweeping.poll()
        # the blind one sees it once its sweep reaches a
        blind.sweep_per_poll = 1_000_000
        result = await blind.poll()
    assert a in result.swept
    assert a not in result.reread
    state = _by_uuid(result.changed)[a]
    assert state.report.instances == []
    assert state.report.vcpus_used == 0
    assert sweeping.state(a).report.vcpus_used == 0  # type: ignore[union-attr]


async def test_a_release_through_the_claims_is_read_at_the_next_poll(
    placement: PlacementServer, seed: Seeder
) -> None:
    a = seed.compute_node(_name("release"))
    instance = _id()
    seed.allocate(instance, {a: {"VCPU": 1, "MEMORY_MB": 64}})
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        await follower.poll()
        claims = PlacementClaims(client, follower=follower)
        assert await claims.release(instance)
        result = await follower.poll()
    assert result.swept == (a,)
    assert result.reread == ()
    (state,) = result.changed
    assert state.report.instances == []
    assert state.report.memory_mb_used == 0


async def test_a_deleted_provider_is_removed(placement: PlacementServer, seed: Seeder) -> None:
    name = _name("gone")
    a = seed.compute_node(name)
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        await follower.poll()
        seed.delete_provider(a)
        result = await follower.poll()
    assert result.removed == (RemovedProvider(a, name),)
    assert follower.state(a) is None
    assert follower.provider_of_host(name) is None


async def test_the_service_host_comes_from_nova_instance_casts(
    placement: PlacementServer, seed: Seeder
) -> None:
    names = [_name("node") for _ in range(3)]
    providers = [seed.compute_node(n) for n in names]
    x, y, both = _id(), _id(), _id()
    seed.allocate(x, {providers[0]: {"VCPU": 1}})
    seed.allocate(y, {providers[1]: {"VCPU": 1}})
    seed.allocate(both, {providers[0]: {"VCPU": 1}, providers[2]: {"VCPU": 1}})
    host = _name("compute")
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        await follower.poll()
        # an instance on two providers tells nothing
        assert follower.learn_host(host, [both]).changed == ()
        mapped = follower.learn_host(host, [x])
        assert [s.uuid for s in mapped.changed] == [providers[0]]
        assert mapped.changed[0].report.host == host
        assert mapped.changed[0].report.node == names[0]
        assert mapped.removed == (RemovedProvider(providers[0], names[0]),)
        assert follower.provider_of_host(host) == providers[0]
        assert follower.learn_host(host, [x]).changed == ()  # nothing new
        # a second provider on the same host: each is reported under its own name
        two = follower.learn_host(host, [y])
        assert [(s.uuid, s.report.host) for s in two.changed] == [(providers[0], names[0])]
        assert two.removed == (RemovedProvider(providers[0], host),)
        # y's provider is said to be on a host named as another provider is: it keeps
        # its own name, and the first is the only one on ``host`` again
        again = follower.learn_host(names[2], [y])
        assert [(s.uuid, s.report.host) for s in again.changed] == [(providers[0], host)]
        assert follower.provider_of_host(names[1]) == providers[1]
        # a poll keeps the names
        seed.allocate(_id(), {providers[0]: {"MEMORY_MB": 1}})
        polled = await follower.poll()
        assert [s.report.host for s in polled.changed] == [host]
    with pytest.raises(ValueError, match="printable"):
        follower.learn_host("bad\nhost", [x])


async def test_a_provider_that_moves_while_read_is_read_again(
    placement: PlacementServer, seed: Seeder
) -> None:
    a = seed.compute_node(_name("moving"))
    reads: list[str] = []

    async def concurrent_writer(method: str, path: str, status: int) -> None:
        if path.startswith(f"/resource_providers/{a}/"):
            reads.append(path.rpartition("/")[2])
            if len(reads) == 1:  # after the first of the four reads
                seed.traits(a, {"COMPUTE_NODE", "CUSTOM_LATE"})

    async with PlacementClient(
        placement.url, max_connections=1, on_response=concurrent_writer
    ) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        result = await follower.poll()
    assert len(reads) == 8  # four, and four again at the moved generation
    state = _by_uuid(result.changed)[a]
    assert "CUSTOM_LATE" in state.report.traits
    assert state.generation == seed.generation(a)


async def test_more_providers_than_followed_is_an_error(
    placement: PlacementServer, seed: Seeder
) -> None:
    seed.compute_node(_name("many"))
    seed.compute_node(_name("many"))
    async with PlacementClient(placement.url) as client:
        with pytest.raises(PlacementError, match="max_providers 1"):
            await PlacementFollower(client, max_providers=1).poll()


async def test_a_provider_no_host_report_can_name_is_refused_not_dropped(
    placement: PlacementServer, seed: Seeder
) -> None:
    bad = seed.compute_node("bidi\u202ename-" + uuid.uuid4().hex[:6])
    good = seed.compute_node(_name("fine"))
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        result = await follower.poll()
        refused = dict(result.refused)
        assert "host" in refused[bad]
        assert "U+202E" in refused[bad]
        assert good in _by_uuid(result.changed)
        assert bad not in _by_uuid(result.changed)
        assert follower.state(bad) is None
        assert bad not in (await follower.poll()).reread  # not read again until it moves


async def test_placements_own_unit_rules_and_reserves_become_the_hosts_rules(
    placement: PlacementServer, seed: Seeder
) -> None:
    """min_unit, max_unit, step_size and reserved of each class travel in the report,
    and the scheduler refuses what Placement would (no claim need be refused first)."""
    name = _name("cn-units")
    rp = seed.compute_node(name, vcpus=16, reserved_vcpus=4, cpu_ratio=1.0, disk_gb=100)
    seed.inventories(
        rp,
        {
            "VCPU": {"total": 16, "reserved": 4, "min_unit": 2, "allocation_ratio": 1.0},
            "MEMORY_MB": {"total": 32_768, "reserved": 512, "max_unit": 8_192},
            "DISK_GB": {"total": 100, "reserved": 20, "step_size": 10},
        },
    )
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client)
        states = _by_uuid((await follower.poll()).changed)
    report = states[rp].report
    assert (report.vcpus_reserved, report.local_gb_reserved) == (4, 20)
    assert report.vcpus_units == Units(min_unit=2)
    assert report.memory_mb_units == Units(max_unit=8_192)
    assert report.local_gb_units == Units(step_size=10)
    assert states[rp].rules.unexpressed == ()

    async def fits(vcpus: int, memory_mb: int, disk_gb: int) -> bool:
        async with Scheduler(SchedulerConfig()) as s:
            await s.update_hosts([report])
            try:
                spec = RequestSpec(
                    instance_uuids=[_id()], vcpus=vcpus, memory_mb=memory_mb, disk_gb=disk_gb
                )
                await s.select_destinations(spec)
            except NoValidHost:
                return False
            return True

    assert await fits(vcpus=2, memory_mb=8_192, disk_gb=80)
    assert not await fits(vcpus=1, memory_mb=1, disk_gb=10)  # VCPU min_unit 2
    assert not await fits(vcpus=2, memory_mb=8_193, disk_gb=10)  # MEMORY_MB max_unit
    assert not await fits(vcpus=2, memory_mb=1, disk_gb=15)  # DISK_GB step_size 10
    assert not await fits(vcpus=14, memory_mb=1, disk_gb=10)  # 16 - 4 reserved
    assert not await fits(vcpus=2, memory_mb=1, disk_gb=90)  # 100 - 20 reserved
