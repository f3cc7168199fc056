"""Preemption in the owner (issue 16, part 4): it is decided when a request
arrives, never for a request that waits for room, and the room a preemption
leaves over wakes the waiters."""

from __future__ import annotations

import asyncio
import logging

import pytest
from conftest import make_report, make_spec, until_pending

from actorsched import NoValidHost, RequestSpec, Scheduler, SchedulerConfig, Selection
from actorsched.metrics import SchedulerMetrics

TIMEOUT = 10.0
CONFIG = SchedulerConfig(seed=0, preemption=True)


async def _waiting_while_a_host_joins_its_zone(
    s: Scheduler,
) -> tuple[RequestSpec, asyncio.Task[list[Selection]]]:
    """A full host a (one priority-0 claim) and a request "w" (priority 9, zone z2)
    that waits: no host is in z2. Then a joins z2: "w" is tried again and waits on
    (a woken waiter takes only free room)."""
    await s.update_host(make_report("a", memory_mb=2048))
    await s.select_destinations(make_spec("low", memory_mb=2048))
    spec = make_spec("w", memory_mb=2048, priority=9, availability_zone="z2")
    first = asyncio.create_task(s.select_destinations(spec, wait=TIMEOUT))
    await until_pending(s, 1)
    await s.create_aggregate("agg", {"availability_zone": "z2"}, ["a"])
    return spec, first


async def test_an_embedded_request_preempts_and_names_its_victims() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("a", memory_mb=2048))
        await s.select_destinations(make_spec("low", memory_mb=2048))
        [selection] = await s.select_destinations(make_spec("high", memory_mb=2048, priority=9))
        assert selection == Selection(instance_uuid="high", host="a", preempted=["low"])
        assert s.core.claims() == {"high": ("a", False)}


async def test_a_woken_waiter_takes_only_free_room_and_a_newcomer_may_preempt() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("a", memory_mb=2048))
        await s.select_destinations(make_spec("low", memory_mb=2048))
        spec = make_spec("waiter", memory_mb=2048, priority=9, availability_zone="z2")
        waiter = asyncio.create_task(s.select_destinations(spec, wait=TIMEOUT))
        await until_pending(s, 1)  # no host in z2: nothing to preempt either
        # now a is in z2: the waiter is tried again (an aggregate change), but it
        # only takes room that freed, and none did
        await s.create_aggregate("agg", {"availability_zone": "z2"}, ["a"])
        await asyncio.sleep(0.01)
        assert s.pending_requests == 1
        assert not waiter.done()
        assert set(s.core.claims()) == {"low"}
        # a request arriving now may preempt
        newcomer = make_spec("newcomer", memory_mb=2048, priority=9, availability_zone="z2")
        [placed] = await s.select_destinations(newcomer)
        assert placed.preempted == ["low"]
        assert s.pending_requests == 1  # the waiter still waits (the room was taken)
        assert await s.release("newcomer")
        async with asyncio.timeout(TIMEOUT):
            [woken] = await waiter
        assert (woken.host, woken.preempted) == ("a", [])


async def test_a_redelivery_of_a_waiting_request_waits_and_does_not_preempt() -> None:
    async with Scheduler(CONFIG) as s:
        spec, first = await _waiting_while_a_host_joins_its_zone(s)
        again = asyncio.create_task(s.select_destinations(spec, wait=TIMEOUT))
        await until_pending(s, 2)  # it waits with the first: it does not preempt
        assert set(s.core.claims()) == {"low"}
        assert await s.release("low")
        async with asyncio.timeout(TIMEOUT):
            answers = await asyncio.gather(first, again)
        assert answers[0] == answers[1] == [Selection(instance_uuid="w", host="a")]


async def test_a_redelivery_that_cannot_wait_fails_without_preempting() -> None:
    async with Scheduler(CONFIG) as s:
        spec, first = await _waiting_while_a_host_joins_its_zone(s)
        with pytest.raises(NoValidHost):
            await s.select_destinations(spec)
        assert set(s.core.claims()) == {"low"}
        first.cancel()


async def test_room_a_preemption_leaves_over_wakes_a_waiter() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("a", memory_mb=4096))
        await s.select_destinations(make_spec("low", memory_mb=4096))
        small = make_spec("small", memory_mb=1024)  # priority 0: may not preempt "low"
        waiter = asyncio.create_task(s.select_destinations(small, wait=TIMEOUT))
        await until_pending(s, 1)
        [placed] = await s.select_destinations(make_spec("high", memory_mb=2048, priority=5))
        assert placed.preempted == ["low"]
        async with asyncio.timeout(TIMEOUT):
            [woken] = await waiter  # 2048 MB were left over: it fits
        assert woken.host == "a"
        assert s.core.host_states()["a"].free_ram_mb == 1024


async def test_a_preemption_is_a_decision_line_and_a_metric(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = SchedulerMetrics()
    async with Scheduler(CONFIG, metrics=metrics) as s:
        await s.update_host(make_report("a", memory_mb=2048))
        await s.select_destinations(make_spec("low1", memory_mb=1024))
        await s.select_destinations(make_spec("low2", memory_mb=1024))
        with caplog.at_level(logging.INFO, logger="actorsched.decisions"):
            await s.select_destinations(make_spec("high", memory_mb=2048, priority=3))
    lines = [r for r in caplog.records if r.__dict__.get("decision") == "preempted"]
    assert len(lines) == 1
    assert lines[0].getMessage() == (
        "preempted 2 claim(s) on a for instance high of priority 3: low1, low2"
    )
    assert lines[0].__dict__["preempted"] == ["low1", "low2"]
    registry = metrics.registry
    assert registry.get_sample_value("actorsched_preemption_attempts_total") == 1
    assert registry.get_sample_value("actorsched_preemption_victims_sum") == 2
    assert registry.get_sample_value("actorsched_preemption_victims_count") == 1


async def test_a_repeat_of_a_preempting_request_is_neither_counted_nor_logged_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = SchedulerMetrics()
    async with Scheduler(CONFIG, metrics=metrics) as s:
        await s.update_host(make_report("a", memory_mb=2048))
        await s.select_destinations(make_spec("low", memory_mb=2048))
        spec = make_spec("high", memory_mb=2048, priority=3)
        with caplog.at_level(logging.INFO, logger="actorsched.decisions"):
            first = await s.select_destinations(spec)
            again = await s.select_destinations(spec)  # a redelivery: the same answer
    assert again == first
    assert first[0].preempted == ["low"]
    lines = [r for r in caplog.records if r.__dict__.get("decision") == "preempted"]
    assert len(lines) == 1
    assert metrics.registry.get_sample_value("actorsched_preemption_attempts_total") == 1
    assert metrics.registry.get_sample_value("actorsched_preemption_victims_sum") == 1
