"""Claims written to a real Placement as Nova 34's scheduler writes them."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest
from placement_fixture import PlacementServer, placement_missing, running_placement
from placement_seed import Seeder

from actorsched import RequestSpec
from actorsched.nova.placement import (
    ALLOCATION_REQUEST_VERSION,
    Claimed,
    ClaimRefused,
    Moved,
    PlacementClaims,
    PlacementClient,
    PlacementFollower,
    allocation_request,
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


def _node(seed: Seeder, **figures: int | float) -> str:
    return seed.compute_node(f"claims-{uuid.uuid4().hex[:8]}", **figures)  # type: ignore[arg-type]


def _spec(vcpus: int = 2, memory_mb: int = 1_024, disk_gb: int = 10) -> RequestSpec:
    return RequestSpec(instance_uuids=[_id()], vcpus=vcpus, memory_mb=memory_mb, disk_gb=disk_gb)


def test_the_allocation_request_is_nova_shaped() -> None:
    spec = _spec(vcpus=2, memory_mb=512, disk_gb=0)
    request = allocation_request(spec, "rp-1")
    # strip_zeros: no DISK_GB; the unnumbered group maps to the provider (1.34)
    assert request == {
        "allocations": {"rp-1": {"resources": {"VCPU": 2, "MEMORY_MB": 512}}},
        "mappings": {"": ["rp-1"]},
    }
    assert ALLOCATION_REQUEST_VERSION == "1.36"  # Nova 34's SAME_SUBTREE_VERSION
    with pytest.raises(ValueError, match="nothing to allocate"):
        allocation_request(_spec(0, 0, 0), "rp-1")


async def test_a_claim_is_visible_in_placements_usages(
    placement: PlacementServer, seed: Seeder
) -> None:
    rp = _node(seed)
    spec = _spec()
    instance = spec.instance_uuids[0]
    # a Selection carries the request as JSON; the conductor claims what it decodes
    selection_json = json.dumps(allocation_request(spec, rp))
    async with PlacementClient(placement.url) as client:
        claims = PlacementClaims(client)
        outcome = await claims.claim(instance, json.loads(selection_json), "project", "user")
        assert outcome == Claimed(instance, (rp,))
        assert seed.usages(rp) == {"VCPU": 2, "MEMORY_MB": 1_024, "DISK_GB": 10}
        consumer = seed.consumer(instance)
        assert (consumer["project_id"], consumer["user_id"]) == ("project", "user")
        # the same claim again (AMQP redelivers) changes nothing
        again = await claims.claim(instance, json.loads(selection_json), "project", "user")
        assert again == Claimed(instance, (rp,))
        assert seed.usages(rp) == {"VCPU": 2, "MEMORY_MB": 1_024, "DISK_GB": 10}


async def test_a_claim_that_does_not_fit_is_refused_naming_the_provider(
    placement: PlacementServer, seed: Seeder
) -> None:
    rp = _node(seed, vcpus=4, cpu_ratio=1.0, reserved_vcpus=1)
    spec = _spec(vcpus=4)
    async with PlacementClient(placement.url) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        await follower.poll()
        claims = PlacementClaims(client, follower=follower)
        outcome = await claims.claim(spec.instance_uuids[0], allocation_request(spec, rp), "p", "u")
        assert isinstance(outcome, ClaimRefused)
        assert (outcome.reason, outcome.provider, outcome.resource_class) == (
            "capacity",
            rp,
            "VCPU",
        )
        assert outcome.providers == (rp,)
        assert rp in outcome.message
        assert "exceed the capacity" in outcome.detail
        assert seed.usages(rp) == {}
        assert seed.consumer(spec.instance_uuids[0])["allocations"] == {}
        # the refusal marked it: the next poll reads it (the caller refreshes it)
        assert (await follower.poll()).swept == (rp,)


async def test_refusals_name_what_placement_checks(
    placement: PlacementServer, seed: Seeder
) -> None:
    stepped = _node(seed)
    seed.inventories(stepped, {"DISK_GB": {"total": 100, "step_size": 10, "max_unit": 100}})
    async with PlacementClient(placement.url) as client:
        claims = PlacementClaims(client)
        odd = await claims.claim(
            _id(), {"allocations": {stepped: {"resources": {"DISK_GB": 15}}}}, "p", "u"
        )
        assert isinstance(odd, ClaimRefused)
        assert (odd.reason, odd.provider) == ("constraints", stepped)
        none = await claims.claim(
            _id(), {"allocations": {stepped: {"resources": {"VCPU": 1}}}}, "p", "u"
        )
        assert isinstance(none, ClaimRefused)
        assert (none.reason, none.provider, none.resource_class) == (
            "no_inventory",
            stepped,
            "VCPU",
        )
        missing = _id()
        unknown = await claims.claim(
            _id(), {"allocations": {missing: {"resources": {"VCPU": 1}}}}, "p", "u"
        )
        assert isinstance(unknown, ClaimRefused)
        assert (unknown.reason, unknown.provider) == ("unknown_provider", missing)
        with pytest.raises(ValueError, match="empty one would delete"):
            await claims.claim(_id(), {"allocations": {}}, "p", "u")
        with pytest.raises(ValueError, match="positive int"):
            await claims.claim(
                _id(), {"allocations": {stepped: {"resources": {"DISK_GB": 0}}}}, "p", "u"
            )


async def test_concurrent_claims_never_over_commit(
    placement: PlacementServer, seed: Seeder
) -> None:
    rp = _node(seed, vcpus=8, cpu_ratio=1.0)
    specs = [_spec(vcpus=2) for _ in range(10)]
    async with PlacementClient(placement.url) as client:
        claims = PlacementClaims(client)
        outcomes = await asyncio.gather(
            *(claims.claim(s.instance_uuids[0], allocation_request(s, rp), "p", "u") for s in specs)
        )
    claimed = [o for o in outcomes if isinstance(o, Claimed)]
    refused = [o for o in outcomes if isinstance(o, ClaimRefused)]
    assert len(claimed) == 4
    assert len(refused) == 6
    assert {(r.reason, r.provider) for r in refused} == {("capacity", rp)}
    assert seed.usages(rp)["VCPU"] == 8


async def test_a_consumer_changed_between_read_and_write_is_refused_as_nova_does(
    placement: PlacementServer, seed: Seeder
) -> None:
    """Another writer gives the consumer allocations after the claim read it as new:
    Placement's consumer generation conflict, which Nova does not retry."""
    rp, other = _node(seed), _node(seed)
    spec = _spec()
    instance = spec.instance_uuids[0]
    writes: list[str] = []

    async def concurrent_writer(method: str, path: str, status: int) -> None:
        writes.append(method)
        if (method, path) == ("GET", f"/allocations/{instance}") and len(writes) == 1:
            seed.allocate(instance, {other: {"VCPU": 1}})

    async with PlacementClient(placement.url, on_response=concurrent_writer) as client:
        claims = PlacementClaims(client, retry_backoff=0.01)
        outcome = await claims.claim(instance, allocation_request(spec, rp), "p", "u")
    assert isinstance(outcome, ClaimRefused)
    assert (outcome.reason, outcome.consumer, outcome.provider) == (
        "consumer_generation",
        instance,
        None,
    )
    assert writes == ["GET", "PUT"]  # not retried
    assert seed.usages(rp) == {}
    assert seed.usages(other) == {"VCPU": 1}


async def test_a_provider_claimed_between_read_and_write_is_checked_again(
    placement: PlacementServer, seed: Seeder
) -> None:
    """Another claim on the provider moves its generation between our read and
    write: Placement checks the room again at the write."""
    rp = _node(seed, vcpus=4, cpu_ratio=1.0)
    fits, full = _spec(vcpus=2), _spec(vcpus=2)

    def writer(instance: str, vcpus: int):  # type: ignore[no-untyped-def]
        async def hook(method: str, path: str, status: int) -> None:
            if (method, path) == ("GET", f"/allocations/{instance}"):
                seed.allocate(_id(), {rp: {"VCPU": vcpus}})

        return hook

    async with PlacementClient(placement.url, on_response=writer(fits.instance_uuids[0], 1)) as c:
        before = seed.generation(rp)
        ok = await PlacementClaims(c).claim(
            fits.instance_uuids[0], allocation_request(fits, rp), "p", "u"
        )
        assert ok == Claimed(fits.instance_uuids[0], (rp,))
        assert seed.generation(rp) == before + 2
    async with PlacementClient(placement.url, on_response=writer(full.instance_uuids[0], 1)) as c:
        refused = await PlacementClaims(c).claim(
            full.instance_uuids[0], allocation_request(full, rp), "p", "u"
        )
    assert isinstance(refused, ClaimRefused)
    assert (refused.reason, refused.provider) == ("capacity", rp)
    assert seed.usages(rp)["VCPU"] == 4


async def test_release_removes_the_claim(placement: PlacementServer, seed: Seeder) -> None:
    rp = _node(seed)
    spec = _spec()
    instance = spec.instance_uuids[0]
    async with PlacementClient(placement.url) as client:
        claims = PlacementClaims(client)
        assert isinstance(
            await claims.claim(instance, allocation_request(spec, rp), "p", "u"), Claimed
        )
        assert await claims.release(instance) is True
        assert seed.usages(rp) == {}
        assert await claims.release(instance) is False  # nothing left


async def test_move_moves_the_allocations_to_the_migration_and_back(
    placement: PlacementServer, seed: Seeder
) -> None:
    rp = _node(seed)
    spec = _spec()
    instance, migration = spec.instance_uuids[0], _id()
    async with PlacementClient(placement.url) as client:
        claims = PlacementClaims(client)
        await claims.claim(instance, allocation_request(spec, rp), "project", "user")
        moved = await claims.move(instance, migration)
        assert moved == Moved(instance, migration, (rp,))
        assert seed.consumer(instance)["allocations"] == {}
        held = seed.consumer(migration)
        assert held["allocations"][rp]["resources"] == {
            "VCPU": 2,
            "MEMORY_MB": 1_024,
            "DISK_GB": 10,
        }
        assert (held["project_id"], held["user_id"]) == ("project", "user")
        assert seed.usages(rp) == {"VCPU": 2, "MEMORY_MB": 1_024, "DISK_GB": 10}
        # again: they were moved already
        assert await claims.move(instance, migration) == Moved(instance, migration, (rp,), True)
        # back (a revert)
        assert await claims.move(migration, instance) == Moved(migration, instance, (rp,))
        assert seed.consumer(migration)["allocations"] == {}
        # nothing to move
        nobody, nowhere = _id(), _id()
        assert await claims.move(nobody, nowhere) == Moved(nobody, nowhere, ())


async def test_a_claim_for_a_consumer_that_holds_allocations_doubles_up_as_nova(
    placement: PlacementServer, seed: Seeder
) -> None:
    """Nova's evacuation claim: the source stays held until the move is done."""
    source, dest = _node(seed), _node(seed)
    spec = _spec()
    instance = spec.instance_uuids[0]
    async with PlacementClient(placement.url) as client:
        claims = PlacementClaims(client)
        await claims.claim(instance, allocation_request(spec, source), "p", "u")
        doubled = await claims.claim(instance, allocation_request(spec, dest), "p", "u")
        assert doubled == Claimed(instance, (source, dest), doubled=True)
        assert set(seed.consumer(instance)["allocations"]) == {source, dest}
        # done: drop the source's tree (Nova's remove_provider_tree_from_instance_allocation)
        assert await claims.remove_provider_tree(instance, source) is True
        assert set(seed.consumer(instance)["allocations"]) == {dest}
        assert seed.usages(source) == {}
        # a forced evacuation passes the generation it read: a stale one is refused
        stale = {**allocation_request(spec, source), "consumer_generation": 0}
        refused = await claims.claim(instance, stale, "p", "u")
        assert isinstance(refused, ClaimRefused)
        assert refused.reason == "consumer_generation"
