"""Regression: Nova's December 2015 host-state race.

``select_destinations`` and ``update_from_compute_node`` yielded half way
through changing a host, so concurrent requests worked from out-of-date
figures and a host's free RAM went negative. The unsynchronized baseline
keeps that shape and must show the bug; actorsched's Scheduler must not.
"""

from __future__ import annotations

import asyncio

from actorsched import HostReport, NoValidHost, RequestSpec, Scheduler, Selection
from actorsched.baselines import LockedHostManager, UnsynchronizedHostManager

HOST = HostReport(
    host="compute-0",
    generation=1,
    memory_mb=8192 + 512,
    memory_mb_reserved=512,
    memory_mb_used=0,
    vcpus=64,
    vcpus_used=0,
    local_gb=1000,
    local_gb_used=0,
)
SLOTS = 8  # 8192 MB usable, 1024 MB per instance


def _spec(i: int, memory_mb: int = 1024) -> RequestSpec:
    return RequestSpec(instance_uuids=[f"vm-{i}"], memory_mb=memory_mb, vcpus=1, disk_gb=1)


async def _create(
    placer: UnsynchronizedHostManager | Scheduler, spec: RequestSpec
) -> list[Selection] | None:
    try:
        return await placer.select_destinations(spec)
    except NoValidHost:
        return None


async def test_unsynchronized_manager_overcommits_one_host() -> None:
    async with UnsynchronizedHostManager() as manager:
        await manager.update_host(HOST)
        results = await asyncio.gather(*(_create(manager, _spec(i)) for i in range(20)))
        placed = [r for r in results if r is not None]
        states = await manager.host_states()
    # every request chose the empty host before any of them consumed it
    assert len(placed) == 20 > SLOTS
    assert states["compute-0"].free_ram_mb == 8192 - 20 * 1024
    assert manager.lowest_free_ram() < 0
    assert manager.overcommitted_hosts() == ["compute-0"]


async def test_scheduler_never_overcommits_one_host() -> None:
    async with Scheduler() as scheduler:
        await scheduler.update_host(HOST)
        results = await asyncio.gather(*(_create(scheduler, _spec(i)) for i in range(20)))
        placed = [r for r in results if r is not None]
        states = await scheduler.host_states()
    assert len(placed) == SLOTS
    assert states["compute-0"].free_ram_mb == 0


async def test_half_applied_report_lets_the_unsynchronized_manager_overcommit() -> None:
    # A claim is assumed; the host's next report lists it. While that report
    # is half applied the claim is already settled but the used figures that
    # now carry it are not written yet: the host looks empty to a request.
    async def race(placer: UnsynchronizedHostManager | Scheduler) -> tuple[bool, int]:
        await placer.update_host(HOST)
        await placer.select_destinations(_spec(0, memory_mb=4096))
        report = HOST.model_copy(
            update={"generation": 2, "memory_mb_used": 4096, "instances": ["vm-0"]}
        )
        _, second = await asyncio.gather(
            placer.update_host(report), _create(placer, _spec(1, memory_mb=8192))
        )
        return second is not None, (await placer.host_states())["compute-0"].free_ram_mb

    async with UnsynchronizedHostManager() as unsynchronized:
        assert await race(unsynchronized) == (True, -4096)
    async with LockedHostManager() as locked:
        assert await race(locked) == (False, 4096)
    async with Scheduler() as scheduler:
        assert await race(scheduler) == (False, 4096)
