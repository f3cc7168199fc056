"""Rules of the owner (``actorsched.actor.Owner``) no other test pinned (issue 31):
its counters, the name of its task, the logger it reports under, and which
answers count as freeing room for the requests that wait."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

import pytest
from conftest import make_core, make_report, make_spec, until_pending

from actorsched import (
    MailboxFull,
    NoValidHost,
    Scheduler,
    SchedulerConfig,
    SchedulerError,
    SchedulerStopped,
    Selection,
)
from actorsched.actor import Envelope, Owner, _Waiter
from actorsched.core import Release, SelectDestinations, UpdateHost
from actorsched.metrics import SchedulerMetrics

TIMEOUT = 10.0  # no test here comes near it: hitting it means a caller hung


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


async def test_the_owner_counts_what_it_handled_failed_and_refused() -> None:
    # Owner.stats: every send refused with MailboxFull is one more ``refused``;
    # each message applied one more ``handled``, a failed one one more ``failed``.
    core = make_core()
    owner = Owner(core, mailbox_size=1, max_batch=4, clock=Clock(), max_waiting=0)
    owner.start()
    try:
        first = owner.ask(UpdateHost(make_report("h1")))  # the mailbox's one place
        for _ in range(3):
            with pytest.raises(MailboxFull):
                owner.ask(UpdateHost(make_report("h2")))
        assert owner.stats.refused == 3
        assert await asyncio.wait_for(first, TIMEOUT) is True
        with pytest.raises(NoValidHost):  # 8 GB fits nowhere: a failed message
            await asyncio.wait_for(
                owner.ask(SelectDestinations(make_spec("vm", memory_mb=8192))), TIMEOUT
            )
        assert owner.stats.refused == 3
        assert owner.stats.handled == 2
        assert owner.stats.failed == 1
        assert owner.stats.batches == 2
    finally:
        await asyncio.wait_for(owner.stop(), TIMEOUT)


async def test_the_owner_task_goes_by_its_name() -> None:
    # A task dump (asyncio.all_tasks, a debugger, aiomonitor) shows the owner
    # as "actorsched-owner".
    async with Scheduler(SchedulerConfig(seed=0)):
        names = {task.get_name() for task in asyncio.all_tasks()}
        assert "actorsched-owner" in names


async def test_a_failing_batch_observer_is_logged_under_the_actor_logger_and_switched_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The observer (metrics) never stops the owner: its first error is logged
    # under "actorsched.actor" (a logging configuration names it) and it is
    # not called again.
    calls: list[int] = []

    def observer(batch: list[Envelope], commit_seconds: float | None) -> None:
        calls.append(len(batch))
        raise RuntimeError("broken metrics")

    owner = Owner(make_core(), mailbox_size=4, max_batch=4, clock=Clock(), observer=observer)
    owner.start()
    try:
        with caplog.at_level(logging.ERROR, logger="actorsched.actor"):
            assert await asyncio.wait_for(owner.ask(UpdateHost(make_report("h1"))), TIMEOUT)
            assert await asyncio.wait_for(owner.ask(UpdateHost(make_report("h2"))), TIMEOUT)
        assert calls == [1]
        assert owner.observer is None
        failed = [r for r in caplog.records if "batch observer failed" in r.getMessage()]
        assert [r.name for r in failed] == ["actorsched.actor"]
    finally:
        await asyncio.wait_for(owner.stop(), TIMEOUT)


async def test_a_call_that_changed_nothing_does_not_retry_the_waiting_requests() -> None:
    # White-box (a cost rule): a release of an unknown instance answers False,
    # frees nothing, and must not send every waiting request through the
    # ranking again; a release that frees room does retry it, and places it.
    async with Scheduler(SchedulerConfig(seed=0)) as s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.select_destinations(make_spec("first", memory_mb=1024))
        tried: list[str] = []
        select = s.core.select_destinations

        def counting(spec: Any, now: float, *args: Any, **kwargs: Any) -> Any:
            tried.append(spec.instance_uuids[0])
            return select(spec, now, *args, **kwargs)

        s.core.select_destinations = counting  # type: ignore[method-assign]
        waiter = asyncio.create_task(
            s.select_destinations(make_spec("vm", memory_mb=1024), wait=TIMEOUT)
        )
        await until_pending(s, 1)
        tried.clear()
        assert await s.release("nobody") is False
        assert await s.submit(Release("nobody-either")) is False
        await s.host_states()  # a read changes nothing either
        assert tried == []
        assert s.pending_requests == 1
        assert await s.release("first") is True
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await waiter] == ["h1"]
        assert tried == ["vm"]


async def test_a_batch_of_reports_wakes_the_waiting_requests_only_when_it_applied_one() -> None:
    # UpdateHosts answers one applied flag per report: a batch of stale reports
    # (none applied) retries no waiting request; one whose report frees room
    # places it.
    async with Scheduler(SchedulerConfig(seed=0)) as s:
        await s.update_hosts([make_report("h1", 2, memory_mb=1024, memory_mb_used=1024)])
        tried: list[str] = []
        select = s.core.select_destinations

        def counting(spec: Any, now: float, *args: Any, **kwargs: Any) -> Any:
            tried.append(spec.instance_uuids[0])
            return select(spec, now, *args, **kwargs)

        s.core.select_destinations = counting  # type: ignore[method-assign]
        waiter = asyncio.create_task(
            s.select_destinations(make_spec("vm", memory_mb=1024), wait=TIMEOUT)
        )
        await until_pending(s, 1)
        tried.clear()
        stale = make_report("h1", 1, memory_mb=1024, memory_mb_used=0)
        assert await s.update_hosts([stale]) == [False]
        assert tried == []
        assert s.pending_requests == 1
        freed = make_report("h1", 3, memory_mb=1024, memory_mb_used=0)
        assert await s.update_hosts([freed]) == [True]
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await waiter] == ["h1"]
        assert tried == ["vm"]


async def test_an_owner_starts_once() -> None:
    owner = Owner(make_core(), mailbox_size=4, max_batch=4, clock=Clock())
    owner.start()
    try:
        with pytest.raises(RuntimeError, match=r"^owner already started$"):
            owner.start()
        assert owner.running
    finally:
        await asyncio.wait_for(owner.stop(), TIMEOUT)


class _SlowSink:
    """A journal whose every commit takes a few milliseconds."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.seconds = seconds
        self.batches: list[int] = []

    async def _commit(self, size: int) -> None:
        await asyncio.sleep(self.seconds)
        self.batches.append(size)

    def submit(self, batch: list[Envelope]) -> Awaitable[None]:
        return self._commit(len(batch))


async def test_stop_returns_once_the_owner_task_has_finished() -> None:
    # After stop() the owner's task is over, its journal commits too: nothing
    # of it runs on (a service shutting down may close the loop next).
    sink = _SlowSink()
    owner = Owner(make_core(), mailbox_size=4, max_batch=4, clock=Clock(), sink=sink)
    owner.start()
    assert await asyncio.wait_for(owner.ask(UpdateHost(make_report("h1"))), TIMEOUT)
    pending = owner.ask(UpdateHost(make_report("h2")))
    async with asyncio.timeout(TIMEOUT):  # no wait_for: its own task would hide a late end
        await owner.stop()
    assert pending.done()
    assert not owner.running
    assert "actorsched-owner" not in {t.get_name() for t in asyncio.all_tasks() if not t.done()}


class _StopFailingSink(_SlowSink):
    """Commits slowly, but fails the stop message's own commit at once."""

    async def _fail(self) -> None:
        raise SchedulerError("journal gone")

    def submit(self, batch: list[Envelope]) -> Awaitable[None]:
        if any(env.command is None for env in batch):
            return self._fail()
        return super().submit(batch)


async def test_stop_waits_for_every_commit_in_flight_even_when_its_own_fails() -> None:
    # A stop sent while a batch's journal commit is still running, whose own
    # commit fails at once: stop() still returns only once that earlier commit
    # is done and its caller answered (nothing of the owner runs on after it).
    sink = _StopFailingSink(seconds=0.3)
    owner = Owner(make_core(), mailbox_size=4, max_batch=4, clock=Clock(), sink=sink)
    owner.start()
    pending = owner.ask(UpdateHost(make_report("h1")))
    await asyncio.sleep(0.05)  # the owner has handed the batch over: its commit runs
    assert not pending.done()
    async with asyncio.timeout(TIMEOUT):
        await owner.stop()
    assert sink.batches == [1]
    assert pending.done()
    assert pending.result() is True


async def test_a_cancelled_caller_is_not_answered_and_its_change_stands() -> None:
    # A caller that gives up (cancels the future) after sending: the command
    # is applied all the same, the owner answers the rest of the batch and
    # goes on.
    core = make_core()
    owner = Owner(core, mailbox_size=4, max_batch=4, clock=Clock())
    owner.start()
    try:
        gone = owner.ask(UpdateHost(make_report("h1")))
        kept = owner.ask(UpdateHost(make_report("h2")))
        gone.cancel()
        assert await asyncio.wait_for(kept, TIMEOUT) is True
        assert await asyncio.wait_for(owner.ask(UpdateHost(make_report("h3"))), TIMEOUT)
        assert sorted(core.host_states()) == ["h1", "h2", "h3"]
        assert owner.running
    finally:
        await asyncio.wait_for(owner.stop(), TIMEOUT)


async def test_a_woken_waiter_that_fails_otherwise_is_answered_with_its_error_and_counted() -> None:
    # A waiting request retried when room may have freed, that fails for
    # another reason than room (max_claims reached meanwhile), fails now with
    # that error (not NoValidHost at its deadline); the owner counts it failed.
    async with Scheduler(SchedulerConfig(seed=0, max_claims=2)) as s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.select_destinations(make_spec("first", memory_mb=1024))
        waiter = asyncio.create_task(
            s.select_destinations(make_spec("vm", memory_mb=1024), wait=TIMEOUT)
        )
        await until_pending(s, 1)
        await s.update_host(make_report("h2", memory_mb=512))
        await s.select_destinations(make_spec("small", memory_mb=512))  # the second claim
        owner = s._running_owner()
        failed = owner.stats.failed
        await s.update_host(make_report("h3", memory_mb=2048))  # room, but no claim left
        async with asyncio.timeout(TIMEOUT):
            with pytest.raises(SchedulerError, match="max_claims"):
                await waiter
        assert owner.stats.failed == failed + 1
        assert s.pending_requests == 0


def test_the_owner_s_records_are_slotted() -> None:
    # One Envelope per message and one _Waiter per waiting request (up to
    # max_waiting_requests): no attribute dict for each.
    assert "__dict__" not in dir(Envelope)
    assert "__dict__" not in dir(_Waiter)


async def test_a_waiting_caller_that_gives_up_leaves_the_line_at_once() -> None:
    # A request waiting for room whose caller is cancelled leaves the line
    # then, not at the next event that frees room: its place (one of
    # max_waiting_requests) is free for another at once.
    async with Scheduler(SchedulerConfig(seed=0)) as s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.select_destinations(make_spec("first", memory_mb=1024))
        waiter = asyncio.create_task(
            s.select_destinations(make_spec("vm", memory_mb=1024), wait=TIMEOUT)
        )
        await until_pending(s, 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.sleep(0)
        assert s.pending_requests == 0


async def test_a_placement_sent_before_an_observer_watched_is_not_timed() -> None:
    # an envelope has a send time only while an observer watches: one sent before
    # the metrics were attached is not timed (from 0), one sent after is
    metrics = SchedulerMetrics(process=False)
    spec = make_spec("vm-1")
    selections = [Selection(instance_uuid="vm-1", host="h1")]
    loop = asyncio.get_running_loop()
    unseen = Envelope(SelectDestinations(spec), loop.create_future(), result=selections)
    metrics.observe_batch([unseen], None)
    count = "actorsched_scheduling_attempt_duration_seconds_count"
    assert metrics.registry.get_sample_value(count, {"result": "scheduled"}) == 0
    owner = Owner(make_core(), mailbox_size=4, max_batch=4, clock=Clock())
    owner.observer = metrics.observe_batch
    owner.start()
    try:
        await asyncio.wait_for(owner.ask(UpdateHost(make_report("h1"))), TIMEOUT)
        await asyncio.wait_for(owner.ask(SelectDestinations(spec)), TIMEOUT)
    finally:
        await asyncio.wait_for(owner.stop(), TIMEOUT)
    assert metrics.registry.get_sample_value(count, {"result": "scheduled"}) == 1


class _GatedSink:
    """A journal whose commits finish only once the test opens its gate; ``two``
    is set once it has been handed two batches."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.two = asyncio.Event()
        self.batches: list[int] = []

    async def _commit(self, size: int) -> None:
        await self.gate.wait()

    def submit(self, batch: list[Envelope]) -> Awaitable[None]:
        self.batches.append(len(batch))
        if len(self.batches) == 2:
            self.two.set()
        return self._commit(len(batch))


async def test_a_stop_its_caller_gives_up_on_still_answers_what_was_sent_before_it() -> None:
    # stop() cancelled while its stop message waits for the journal (a shutdown
    # with a deadline): the owner still handles and answers everything sent
    # before it, and then stops; giving up on stop() never cancels the owner.
    sink = _GatedSink()
    owner = Owner(make_core(), mailbox_size=4, max_batch=4, clock=Clock(), sink=sink)
    owner.start()
    sent = owner.ask(UpdateHost(make_report("h1")))
    stopping = asyncio.ensure_future(owner.stop())
    await asyncio.wait_for(sink.two.wait(), TIMEOUT)
    assert sink.batches == [1, 1]  # the call's batch and the stop's, neither durable
    stopping.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await stopping
    sink.gate.set()
    assert await asyncio.wait_for(sent, 2.0) is True
    async with asyncio.timeout(TIMEOUT):
        await owner.stop()
    assert not owner.running


WAIT = 3600.0  # a waiting request's deadline: far off, and no other timer's delay


async def test_a_waiter_placed_given_up_or_stopped_leaves_no_deadline_timer_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A request may wait long for room: once it is placed, or its caller gives
    # up, or the owner stops, the timer of its deadline is cancelled, not left
    # on the loop holding the request (and its answer) until the deadline.
    loop = asyncio.get_running_loop()
    deadlines: list[asyncio.TimerHandle] = []
    call_later = loop.call_later

    def recorded(delay: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        handle = call_later(delay, callback, *args, **kwargs)
        if delay == WAIT:
            deadlines.append(handle)
        return handle

    monkeypatch.setattr(loop, "call_later", recorded)
    s = Scheduler(SchedulerConfig(seed=0))
    async with s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.select_destinations(make_spec("first", memory_mb=1024))
        placed = asyncio.create_task(
            s.select_destinations(make_spec("placed", memory_mb=1024), wait=WAIT)
        )
        await until_pending(s, 1)
        assert await s.release("first")
        async with asyncio.timeout(TIMEOUT):
            assert [sel.host for sel in await placed] == ["h1"]
        gone = asyncio.create_task(s.select_destinations(make_spec("gone"), wait=WAIT))
        await until_pending(s, 1)
        gone.cancel()
        await until_pending(s, 0)
        stopped = asyncio.create_task(s.select_destinations(make_spec("stopped"), wait=WAIT))
        await until_pending(s, 1)
        assert [handle.cancelled() for handle in deadlines] == [True, True, False]
    with pytest.raises(SchedulerStopped):
        await stopped
    assert len(deadlines) == 3
    assert all(handle.cancelled() for handle in deadlines)


class _Crash(BaseException):
    """Not an Exception: nothing in the owner catches it."""


class _CrashingFilter:
    name = "Crashing"

    def filter_all(self, table: Any, ctx: Any) -> None:
        raise _Crash("a plug-in gone wrong")


async def test_the_calls_queued_behind_the_batch_that_killed_the_owner_fail_at_once() -> None:
    # An owner that dies fails its batch with the reason, and every call still
    # queued behind it with SchedulerStopped: none is left hanging.
    core = make_core(filters=[_CrashingFilter()])
    core.update_host(make_report("h1"), 0.0)
    owner = Owner(core, mailbox_size=4, max_batch=1, clock=Clock())
    owner.start()
    dying = owner.ask(SelectDestinations(make_spec("vm")))
    behind = owner.ask(UpdateHost(make_report("h2")))
    try:
        with pytest.raises(SchedulerStopped, match="owner task died: _Crash"):
            await asyncio.wait_for(dying, TIMEOUT)
        with pytest.raises(SchedulerStopped, match="stopped before it handled this call"):
            await asyncio.wait_for(behind, 2.0)
    finally:
        with contextlib.suppress(BaseException):
            await owner.stop()
    assert sorted(core.host_states()) == ["h1"]
