"""Placement killed or frozen: every call fails within its timeout, never hangs,
and the follower and claims go on once it is back."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from placement_fixture import PlacementServer, placement_missing, running_placement
from placement_seed import Seeder

from actorsched import RequestSpec
from actorsched.nova.placement import (
    Claimed,
    PlacementClaims,
    PlacementClient,
    PlacementFollower,
    PlacementUnavailable,
    allocation_request,
)

TIMEOUT = 2.0  # the client's timeout in these tests, in seconds (a 2-CPU machine under load)
SLACK = 2.0  # what an answer past the timeout may take (a loaded machine)


@pytest.fixture(scope="module")
def placement(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    reason = placement_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_placement(tmp_path_factory.mktemp("placement")) as server:
        yield server


def _spec() -> RequestSpec:
    return RequestSpec(instance_uuids=[str(uuid.uuid4())], vcpus=1, memory_mb=256, disk_gb=1)


async def test_killed_placement_fails_fast_and_back_again_works(placement: PlacementServer) -> None:
    seed = Seeder(placement.url)
    rp = seed.compute_node(f"outage-{uuid.uuid4().hex[:8]}")
    async with PlacementClient(placement.url, timeout=TIMEOUT) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        claims = PlacementClaims(client, follower=follower)
        await follower.poll()  # leaves kept-alive connections in the pool
        placement.kill()  # kill -9
        seed.close()
        for call in (
            follower.poll(),
            claims.claim(_spec().instance_uuids[0], allocation_request(_spec(), rp), "p", "u"),
            claims.release(str(uuid.uuid4())),
        ):
            started = time.monotonic()
            with pytest.raises(PlacementUnavailable, match="could not be reached"):
                await call
            assert time.monotonic() - started < TIMEOUT + SLACK
        placement.start()  # on the same port, the same database
        # the pooled connections died with the server: the call goes on a fresh one
        idle = await follower.poll()
        assert (idle.changed, idle.reread) == ((), ())  # nothing moved meanwhile
        spec = _spec()
        outcome = await claims.claim(spec.instance_uuids[0], allocation_request(spec, rp), "p", "u")
        assert outcome == Claimed(spec.instance_uuids[0], (rp,))
        assert (await follower.poll()).reread == (rp,)


async def test_a_frozen_placement_times_out_and_answers_when_thawed(
    placement: PlacementServer,
) -> None:
    seed = Seeder(placement.url)
    rp = seed.compute_node(f"frozen-{uuid.uuid4().hex[:8]}")
    seed.close()
    spec = _spec()
    instance = spec.instance_uuids[0]
    async with PlacementClient(placement.url, timeout=TIMEOUT) as client:
        follower = PlacementFollower(client, sweep_per_poll=0)
        claims = PlacementClaims(client)
        await follower.poll()
        placement.pause()  # SIGSTOP: connections are accepted, nothing answers
        try:
            for call in (
                follower.poll(),
                claims.claim(instance, allocation_request(spec, rp), "p", "u"),
            ):
                started = time.monotonic()
                with pytest.raises(PlacementUnavailable, match=f"within {TIMEOUT:g} s"):
                    await call
                elapsed = time.monotonic() - started
                assert TIMEOUT - 0.05 <= elapsed < TIMEOUT + SLACK
        finally:
            placement.resume()
        # the claim's outcome was unknown: claiming again is safe (keyed by instance)
        again = await claims.claim(instance, allocation_request(spec, rp), "p", "u")
        assert again == Claimed(instance, (rp,))
        seed = Seeder(placement.url)
        assert seed.usages(rp) == {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}
        seed.close()
        assert rp in (await follower.poll()).reread
