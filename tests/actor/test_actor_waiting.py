"""Waiting requests (issue 16): a placement that fits nowhere waits in the owner
for room, and is placed by the first event that makes some, in priority order
then arrival order; NoValidHost at its ``wait``; a bounded line.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import make_report, make_spec, until_pending
from pydantic import ValidationError

from actorsched import (
    NoValidHost,
    RequestSpec,
    Scheduler,
    SchedulerConfig,
    SchedulerStopped,
    Selection,
)
from actorsched.core import Release, SelectDestinations, UpdateHost
from actorsched.journal import SqliteJournal
from actorsched.metrics import SchedulerMetrics

TIMEOUT = 10.0  # generous: hitting it means a waiter was never woken
CONFIG = SchedulerConfig(seed=0)


def big(*uuids: str, **fields: Any) -> RequestSpec:
    return make_spec(*uuids, memory_mb=1024, **fields)


async def full_scheduler(s: Scheduler) -> None:
    await s.update_host(make_report("h1", memory_mb=1024))
    await s.select_destinations(big("first"))


async def test_a_request_that_fits_nowhere_waits_and_a_release_places_it() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        waiter = asyncio.create_task(s.select_destinations(big("vm2"), wait=TIMEOUT))
        await until_pending(s, 1)
        assert not waiter.done()
        assert await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            assert await waiter == [Selection(instance_uuid="vm2", host="h1")]
        assert s.pending_requests == 0
        assert s.core.claims() == {"vm2": ("h1", False)}


async def test_a_report_that_frees_room_places_a_waiter() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1", memory_mb=1024, memory_mb_used=1024))
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)
        await s.update_host(make_report("h1", 2, memory_mb=1024, memory_mb_used=512))
        assert s.pending_requests == 1  # 512 MB free is not room for 1024: still waiting
        await s.update_host(make_report("h1", 3, memory_mb=1024, memory_mb_used=0))
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await waiter] == ["h1"]


async def test_a_new_host_reporting_places_a_waiter() -> None:
    async with Scheduler(CONFIG) as s:
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)  # no host at all yet
        await s.update_host(make_report("h9", memory_mb=2048))
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await waiter] == ["h9"]


async def test_removing_a_host_frees_its_claims_for_a_different_host_waiter() -> None:
    # the removal frees no room on a host (it is gone) but ends its claims: a
    # request kept off the hosts of "first" (different_host) may now go anywhere
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.update_host(make_report("h2", memory_mb=1024))
        placed = await s.select_destinations(big("first"))
        other = {"h1": "h2", "h2": "h1"}[placed[0].host]
        await s.select_destinations(big("second"))  # fills the other host
        waiter = asyncio.create_task(
            s.select_destinations(big("vm", different_host=["second"]), wait=TIMEOUT)
        )
        await until_pending(s, 1)
        assert await s.remove_host(other)  # "second" and its claim are gone
        await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await waiter] == [placed[0].host]


async def test_the_higher_priority_waiter_goes_first_even_if_it_came_later() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        low = asyncio.create_task(s.select_destinations(big("low"), wait=TIMEOUT))
        await until_pending(s, 1)
        high = asyncio.create_task(s.select_destinations(big("high", priority=5), wait=TIMEOUT))
        await until_pending(s, 2)
        await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            await high
        assert not low.done()
        assert s.pending_requests == 1
        await s.release("high")
        async with asyncio.timeout(TIMEOUT):
            await low


async def test_equal_priorities_wait_in_arrival_order() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        tasks = []
        for name in ("a", "b", "c"):
            tasks.append(asyncio.create_task(s.select_destinations(big(name), wait=TIMEOUT)))
            await until_pending(s, len(tasks))
        order: list[str] = []
        previous = "first"
        for task, name in zip(tasks, ("a", "b", "c"), strict=True):
            await s.release(previous)
            async with asyncio.timeout(TIMEOUT):
                await task
            assert all(not t.done() for t in tasks[len(order) + 1 :])
            order.append(name)
            previous = name
        assert order == ["a", "b", "c"]


async def test_a_smaller_later_request_that_fits_is_not_held_back_by_a_bigger_one() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1", memory_mb=2048))
        await s.select_destinations(make_spec("first", memory_mb=2048))
        huge = asyncio.create_task(
            s.select_destinations(make_spec("huge", memory_mb=4096, priority=9), wait=TIMEOUT)
        )
        small = asyncio.create_task(s.select_destinations(big("small"), wait=TIMEOUT))
        await until_pending(s, 2)
        await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            await small
        assert not huge.done()
        huge.cancel()


async def test_a_waiter_raises_no_valid_host_at_its_wait_with_no_event() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        with pytest.raises(NoValidHost) as at_once:
            await s.select_destinations(big("vm"))
        started = time.monotonic()
        with pytest.raises(NoValidHost) as waited:
            async with asyncio.timeout(TIMEOUT):
                await s.select_destinations(big("vm"), wait=0.2)
        assert 0.15 <= time.monotonic() - started < TIMEOUT
        assert str(waited.value) == str(at_once.value)  # the last explanation, as now
        assert s.pending_requests == 0


async def test_the_waiting_line_is_bounded() -> None:
    async with Scheduler(SchedulerConfig(seed=0, max_waiting_requests=1)) as s:
        await full_scheduler(s)
        first = asyncio.create_task(s.select_destinations(big("a"), wait=TIMEOUT))
        await until_pending(s, 1)
        with pytest.raises(NoValidHost, match="the waiting line is full"):
            await s.select_destinations(big("b"), wait=TIMEOUT)
        assert s.pending_requests == 1
        await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            await first
    with pytest.raises(NoValidHost, match="waiting line is full"):
        async with Scheduler(SchedulerConfig(seed=0, max_waiting_requests=0)) as s:
            await s.select_destinations(big("a"), wait=TIMEOUT)


async def test_a_release_in_the_same_batch_after_the_wait_is_not_missed() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        # sent together, with no await between: one batch, the placement first
        placed = s.submit(SelectDestinations(big("vm", wait=TIMEOUT)))
        released = s.submit(Release("first"))
        async with asyncio.timeout(TIMEOUT):
            assert await released is True
            assert [sel.host for sel in await placed] == ["h1"]


async def test_a_waiter_gets_the_room_before_a_newcomer_later_in_the_same_batch() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)
        released = s.submit(Release("first"))
        newcomer = s.submit(SelectDestinations(big("newcomer")))
        async with asyncio.timeout(TIMEOUT):
            assert await released is True
            with pytest.raises(NoValidHost):
                await newcomer
            assert [sel.host for sel in await waiter] == ["h1"]


async def test_a_report_in_the_same_batch_after_the_wait_is_not_missed() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1", memory_mb=1024, memory_mb_used=1024))
        placed = s.submit(SelectDestinations(big("vm", wait=TIMEOUT)))
        s.submit(UpdateHost(make_report("h1", 2, memory_mb=1024, memory_mb_used=0)))
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await placed] == ["h1"]


async def test_a_waiter_is_woken_only_once_per_freeing_and_tried_against_later_ones() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)
        assert not await s.release("nobody")  # changed nothing: not a freeing event
        await s.update_host(make_report("h2", memory_mb=512))  # freeing, too small
        assert s.pending_requests == 1
        await s.update_host(make_report("h2", 2, memory_mb=4096))
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await waiter] == ["h2"]


async def test_a_caller_that_gives_up_leaves_the_line() -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)
        waiter.cancel()
        await until_pending(s, 0)
        await s.release("first")
        assert s.core.claims() == {}  # nothing placed for the caller that left


async def test_stopping_fails_the_waiters_with_scheduler_stopped() -> None:
    s = Scheduler(CONFIG)
    async with s:
        await full_scheduler(s)
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)
    with pytest.raises(SchedulerStopped):
        async with asyncio.timeout(TIMEOUT):
            await waiter


async def test_the_pending_requests_gauge() -> None:
    metrics = SchedulerMetrics(process=False)
    async with Scheduler(CONFIG, metrics=metrics) as s:
        await full_scheduler(s)
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)
        assert metrics.registry.get_sample_value("actorsched_pending_requests") == 1
        await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            await waiter
        assert metrics.registry.get_sample_value("actorsched_pending_requests") == 0


async def test_a_woken_placement_is_journaled_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    journal = SqliteJournal(path, snapshot_every=10**9)
    async with Scheduler(CONFIG, journal=journal) as s:
        await full_scheduler(s)
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        await until_pending(s, 1)
        await s.release("first")  # the claim is made in the release's batch
        async with asyncio.timeout(TIMEOUT):
            await waiter
        before = s.core.claims()
        digest = s.core.digest()
        assert journal._since_snapshot == 4  # report, claim, release, the woken claim
        journal._since_snapshot = 0  # no closing snapshot, as after kill -9: replay
    assert before == {"vm": ("h1", False)}
    async with Scheduler(CONFIG, journal=SqliteJournal(path)) as again:
        assert again.core.claims() == before
        assert again.core.digest() == digest


def test_wait_and_priority_are_bounded() -> None:
    make_spec(wait=3600.0, priority=-5)
    with pytest.raises(ValidationError):
        make_spec(wait=3600.5)
    with pytest.raises(ValidationError):
        make_spec(wait=-1.0)


async def test_only_waiters_that_a_freed_row_has_headroom_for_are_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        tries: list[str] = []
        placing = s.core.select_destinations

        def counted(spec: RequestSpec, now: float, **kwargs: Any) -> list[Selection]:
            tries.append(spec.instance_uuids[0])
            return placing(spec, now, **kwargs)

        monkeypatch.setattr(s.core, "select_destinations", counted)
        waiter = asyncio.create_task(s.select_destinations(big("vm"), wait=TIMEOUT))
        small = asyncio.create_task(
            s.select_destinations(make_spec("small", memory_mb=256, disk_gb=200), wait=TIMEOUT)
        )
        await until_pending(s, 2)
        assert tries == ["vm", "small"]
        # h2 has 512 MB: no room for "vm", nor disk for "small": neither is tried
        await s.update_host(make_report("h2", memory_mb=512, local_gb=100))
        assert tries == ["vm", "small"]
        assert s.pending_requests == 2
        # a report of h2 with the disk "small" needs: only "small" is tried, and placed
        await s.update_host(make_report("h2", 2, memory_mb=512, local_gb=500))
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await small] == ["h2"]
        assert tries == ["vm", "small", "small"]
        # a removal may free what hints count, on any row: every waiter is tried
        assert await s.remove_host("h2")
        assert tries == ["vm", "small", "small", "vm"]
        await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await waiter] == ["h1"]


async def test_a_row_with_room_for_one_instance_wakes_a_request_for_several() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.update_host(make_report("h2", memory_mb=1024))
        first = await s.select_destinations(big("first"))
        free = {"h1": "h2", "h2": "h1"}[first[0].host]
        waiter = asyncio.create_task(s.select_destinations(big("a", "b"), wait=TIMEOUT))
        await until_pending(s, 1)  # one host free, two asked
        await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            hosts = sorted(sel.host for sel in await waiter)
        assert hosts == sorted([free, first[0].host])


async def test_a_confirmed_move_wakes_the_request_that_waited_for_its_source() -> None:
    # h1 and h2 each take one 3,000 MB instance. vm-a moves h1 -> h2: the
    # source stays held under the migration uuid, so vm-b fits nowhere and
    # waits; confirming the move frees h1 and places vm-b there.
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1"))
        await s.update_host(make_report("h2"))
        (placed,) = await s.select_destinations(make_spec("vm-a", memory_mb=3000))
        source = placed.host
        moved = await s.move("vm-a", "mig-1")
        assert moved.host != source
        waiting = asyncio.ensure_future(
            s.select_destinations(make_spec("vm-b", memory_mb=3000), wait=TIMEOUT)
        )
        await until_pending(s, 1)
        assert await s.confirm_move("mig-1")
        (woken,) = await asyncio.wait_for(waiting, TIMEOUT)
        assert woken.host == source
        assert s.pending_requests == 0


async def test_a_move_or_reschedule_that_finds_no_host_fails_at_once_and_the_owner_lives_on() -> (
    None
):
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1"))
        await s.select_destinations(make_spec("vm-a"))
        with pytest.raises(NoValidHost):  # no other host to move to
            await s.move("vm-a", "mig-1")
        with pytest.raises(NoValidHost):  # MaxRetriesExceeded: no alternate left
            await s.reschedule("vm-a", "h1")
        (placed,) = await s.select_destinations(make_spec("vm-b"))  # the owner still answers
        assert placed.host == "h1"


class _Crash(BaseException):
    """Not an Exception: nothing in the owner catches it."""


class _CrashingFilter:
    name = "Crashing"

    def filter_all(self, table: Any, ctx: Any) -> None:
        raise _Crash("a plug-in gone wrong")


async def test_a_caller_whose_batch_kills_the_owner_is_failed_at_once() -> None:
    s = Scheduler(CONFIG, filters=[_CrashingFilter()])
    await s.start()
    try:
        await s.update_host(make_report("h1"))
        with pytest.raises(SchedulerStopped, match="owner task died: _Crash"):
            await asyncio.wait_for(s.select_destinations(make_spec("vm-a")), TIMEOUT)
        with pytest.raises(SchedulerStopped):  # and every later call, at once
            await asyncio.wait_for(s.select_destinations(make_spec("vm-b")), TIMEOUT)
    finally:
        with contextlib.suppress(BaseException):
            await s.stop()


async def test_twin_waiters_of_one_request_are_both_answered_when_room_frees() -> None:
    # a redelivery of a waiting request waits beside it; once the first is
    # placed, the second is answered with the same selections (its row is full
    # by then: the headroom check alone would keep it waiting)
    async with Scheduler(CONFIG) as s:
        await full_scheduler(s)
        first = asyncio.create_task(s.select_destinations(big("vm2"), wait=TIMEOUT))
        await until_pending(s, 1)
        again = asyncio.create_task(s.select_destinations(big("vm2"), wait=TIMEOUT))
        await until_pending(s, 2)
        assert await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            answers = await asyncio.gather(first, again)
        assert answers[0] == answers[1] == [Selection(instance_uuid="vm2", host="h1")]
        assert s.pending_requests == 0
