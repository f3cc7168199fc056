"""The owner and the Scheduler facade: failures stay with their caller, the mailbox
is bounded (callers wait), and stopping leaves no caller hanging.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
import pytest
from conftest import make_config, make_core, make_report, make_spec
from numpy.typing import NDArray

from actorsched import (
    HostReport,
    InvalidRequest,
    NoValidHost,
    PlacementContext,
    Scheduler,
    SchedulerConfig,
    SchedulerStopped,
    Selection,
)
from actorsched.actor import Owner
from actorsched.core import Command, HostTable, SelectDestinations, UpdateHost, UpdateHosts

TIMEOUT = 10.0  # no test here should come near it: hitting it means a caller hung
# load tests put many instances on few hosts: lift Nova's per-host count limits
ROOMY = {"max_io_ops_per_host": 10**6, "max_instances_per_host": 10**6}


def big_host(host: str, generation: int = 1) -> HostReport:
    """A host with room for thousands of the default 512 MB / 1 vCPU instances."""
    return make_report(host, generation, memory_mb=10**7, vcpus=10**4, local_gb=10**5)


class Clock:
    """A settable clock for the owner (time enters the core as an argument)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Explodes:
    """A custom filter that raises for one request size: a handler error."""

    name = "Explodes"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        if ctx.spec.memory_mb == 13:
            raise RuntimeError("filter blew up on 13 MB")
        return None


async def _settle(aws: Sequence[Awaitable[object]]) -> list[object]:
    return await asyncio.wait_for(asyncio.gather(*aws, return_exceptions=True), TIMEOUT)


# -- a failing message fails its caller only ------------------------------------------


async def test_handler_error_fails_only_its_caller() -> None:
    async with Scheduler(make_config(), filters=[Explodes()]) as s:
        for i in range(3):
            await s.update_host(make_report(f"h{i}"))
        calls = [s.select_destinations(make_spec(f"ok{i}")) for i in range(10)]
        calls.insert(5, s.select_destinations(make_spec("bad", memory_mb=13)))
        results = await _settle(calls)
        bad = results.pop(5)
        assert isinstance(bad, RuntimeError)
        assert "13 MB" in str(bad)
        assert all(isinstance(r, list) and isinstance(r[0], Selection) for r in results)
        # the owner goes on
        [sel] = await s.select_destinations(make_spec("later"))
        assert sel.host in {"h0", "h1", "h2"}
        assert "bad" not in s.core.claims()
        assert len(s.core.claims()) == 11


async def test_scheduler_errors_fail_only_their_caller() -> None:
    async with Scheduler(make_config()) as s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.select_destinations(make_spec("a"))
        results = await _settle(
            [
                s.select_destinations(make_spec("a", "b")),  # mixed: InvalidRequest
                s.select_destinations(make_spec("big", memory_mb=10**6)),  # NoValidHost
                s.update_host(make_report("h1", 2, memory_mb=1024)),
                s.select_destinations(make_spec("c")),
            ]
        )
        assert isinstance(results[0], InvalidRequest)
        assert isinstance(results[1], NoValidHost)
        assert results[2] is True
        assert isinstance(results[3], list)
        assert await s.release("a") is True
        assert sorted(s.core.claims()) == ["c"]


async def test_wrong_argument_types_are_invalid_requests() -> None:
    async with Scheduler() as s:
        bad_calls: list[Callable[[], Awaitable[object]]] = [
            lambda: s.update_host({"host": "h1"}),  # type: ignore[arg-type]
            lambda: s.select_destinations({"instance_uuids": ["a"]}),  # type: ignore[arg-type]
            lambda: s.release(42),  # type: ignore[arg-type]
            lambda: s.remove_host(None),  # type: ignore[arg-type]
        ]
        for call in bad_calls:
            with pytest.raises(InvalidRequest):
                await call()
        assert await s.update_host(make_report("h1")) is True


# -- the API through the owner ---------------------------------------------------------


async def test_api_round_trip_through_the_owner() -> None:
    clock = Clock(100.0)
    async with Scheduler(make_config(), clock=clock) as s:
        assert await s.update_host(make_report("h1", 3)) is True
        assert await s.update_host(make_report("h1", 3)) is False  # stale
        [sel] = await s.select_destinations(make_spec("vm1", memory_mb=1024))
        assert sel.host == "h1"
        states = await s.host_states()
        assert states["h1"].free_ram_mb == 3072
        assert states["h1"].reported_at == 100.0  # the owner's clock stamps reports
        assert await s.release("vm1") is True
        assert await s.release("vm1") is False
        assert await s.remove_host("h1") is True
        assert await s.remove_host("h1") is False
        assert await s.host_states() == {}


async def test_clock_drives_service_down_time() -> None:
    clock = Clock(0.0)
    async with Scheduler(make_config(service_down_time=60.0), clock=clock) as s:
        await s.update_host(make_report("h1"))
        clock.now = 61.0
        with pytest.raises(NoValidHost) as info:
            await s.select_destinations(make_spec("vm1"))
        assert info.value.filter_counts == {"ComputeFilter": 1}


async def test_host_states_is_a_consistent_snapshot() -> None:
    async with Scheduler(make_config()) as s:
        await s.update_host(make_report("h1", 1))

        async def reporter() -> None:
            for gen in range(2, 200):
                await s.update_host(
                    make_report(
                        "h1", gen, memory_mb_used=gen, vcpus_used=gen % 4, local_gb_used=gen % 50
                    )
                )

        async def reader() -> None:
            for _ in range(200):
                state = (await s.host_states())["h1"]
                if state.generation > 1:
                    assert state.free_ram_mb == 4096 - state.generation
                    assert state.vcpus_used == state.generation % 4
                    assert state.free_disk_gb == 100 - state.generation % 50

        await asyncio.wait_for(asyncio.gather(reporter(), reader(), reader()), TIMEOUT)


# -- lifecycle ---------------------------------------------------------------------------


async def _every_call_raises_stopped(s: Scheduler, report: HostReport) -> None:
    calls: list[Awaitable[object]] = [
        s.update_host(report),
        s.select_destinations(make_spec()),
        s.release("vm1"),
        s.remove_host("h1"),
        s.host_states(),
    ]
    for call in calls:
        with pytest.raises(SchedulerStopped):
            await asyncio.wait_for(call, TIMEOUT)


async def test_calls_before_start_raise_scheduler_stopped() -> None:
    await _every_call_raises_stopped(Scheduler(), make_report())


async def test_calls_after_stop_raise_scheduler_stopped() -> None:
    s = Scheduler()
    async with s:
        await s.update_host(make_report())
    await _every_call_raises_stopped(s, make_report("h1", 2))
    with pytest.raises(SchedulerStopped):
        await s.start()
    await s.stop()  # stopping twice is harmless


async def test_stop_without_start_is_harmless() -> None:
    s = Scheduler()
    await asyncio.wait_for(s.stop(), TIMEOUT)
    with pytest.raises(SchedulerStopped):
        await s.host_states()


async def test_owner_ask_before_start_raises() -> None:
    owner = Owner(make_core(), mailbox_size=4, max_batch=4, clock=Clock())
    with pytest.raises(SchedulerStopped):
        await owner.ask(UpdateHost(make_report()))


# -- backpressure ---------------------------------------------------------------------


async def test_bounded_mailbox_makes_callers_wait() -> None:
    config = make_config(mailbox_size=3, max_batch=2, **ROOMY)
    async with Scheduler(config) as s:
        await s.update_host(big_host("h1"))
        depths: list[int] = []
        waiting_when_full: list[int] = []
        done = asyncio.Event()

        async def monitor() -> None:
            while not done.is_set():
                depths.append(s.mailbox_depth)
                if s.mailbox_depth == config.mailbox_size:
                    waiting_when_full.append(sum(not t.done() for t in callers))
                await asyncio.sleep(0)

        callers = [
            asyncio.ensure_future(s.select_destinations(make_spec(f"vm{i}"))) for i in range(60)
        ]
        watcher = asyncio.ensure_future(monitor())
        results = await _settle(list(callers))
        done.set()
        await watcher
        assert all(isinstance(r, list) for r in results)
        assert max(depths) <= config.mailbox_size
        assert max(depths) == config.mailbox_size, "the mailbox never filled: no backpressure seen"
        # while the mailbox was full, more callers than it holds were still waiting
        assert max(waiting_when_full) > config.mailbox_size
        assert len(s.core.claims()) == 60


async def test_messages_waiting_for_room_keep_their_order() -> None:
    # a batch sent in one go into a full mailbox, then fresh calls each loop turn:
    # first come, first served, and nothing overtakes a message waiting for room
    async with Scheduler(make_config(mailbox_size=2, max_batch=2)) as s:
        handled: list[str] = []
        handle = s.core.handle

        def recording(command: Command[Any], now: float) -> object:
            assert isinstance(command, UpdateHost)
            handled.append(command.report.host)
            return handle(command, now)

        s.core.handle = recording  # type: ignore[method-assign,assignment]
        batch = [s.submit(UpdateHost(make_report(f"a{i}"))) for i in range(12)]
        assert s.mailbox_depth == 2
        assert s.waiting_for_room == 10
        fresh: list[asyncio.Future[object]] = []
        for i in range(30):
            fresh.append(s.submit(UpdateHost(make_report(f"b{i}"))))
            await asyncio.sleep(0)
        await _settle([*batch, *fresh])
        assert handled == [*(f"a{i}" for i in range(12)), *(f"b{i}" for i in range(30))]
        assert s.waiting_for_room == 0


async def test_submit_sends_even_when_nobody_awaits() -> None:
    async with Scheduler(make_config(mailbox_size=2)) as s:
        for i in range(5):
            s.submit(UpdateHost(make_report(f"h{i}")))  # past the mailbox's 2, too
        await s.host_states()  # sent after them, so answered after them
        assert s.host_count == 5


async def test_submit_refuses_what_is_not_a_command() -> None:
    async with Scheduler() as s:
        with pytest.raises(InvalidRequest, match="submit expects a command"):
            s.submit("select_destinations")  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="SelectDestinations expects a RequestSpec"):
            s.submit(SelectDestinations({"memory_mb": 1}))  # type: ignore[arg-type]
        with pytest.raises(InvalidRequest, match="UpdateHosts expects a HostReport"):
            s.submit(UpdateHosts((make_report("h1"), "h2")))  # type: ignore[arg-type]
        assert s.host_count == 0  # nothing of the refused commands was sent


async def test_mailbox_depth_never_exceeds_its_size_under_mixed_load() -> None:
    config = make_config(mailbox_size=5, max_batch=3, **ROOMY)
    async with Scheduler(config) as s:
        for i in range(5):
            await s.update_host(big_host(f"h{i}"))
        highest = 0

        async def caller(i: int) -> None:
            nonlocal highest
            await s.select_destinations(make_spec(f"vm{i}"))
            highest = max(highest, s.mailbox_depth)
            await s.update_host(big_host(f"h{i % 5}", 2 + i))
            highest = max(highest, s.mailbox_depth)
            await s.release(f"vm{i}")
            highest = max(highest, s.mailbox_depth)

        await asyncio.wait_for(asyncio.gather(*(caller(i) for i in range(100))), TIMEOUT)
        assert 0 < highest <= config.mailbox_size
        assert s.core.claims() == {}


# -- stop with callers still queued ------------------------------------------------------


async def test_stop_with_callers_queued_leaves_none_hanging() -> None:
    config = make_config(mailbox_size=4, max_batch=2, **ROOMY)
    s = Scheduler(config)
    await s.start()
    for i in range(4):
        await s.update_host(big_host(f"h{i}"))
    early = [asyncio.ensure_future(s.select_destinations(make_spec(f"e{i}"))) for i in range(40)]
    await asyncio.sleep(0)  # the early callers are in (or waiting for) the mailbox
    stopping = asyncio.ensure_future(s.stop())
    late = [asyncio.ensure_future(s.select_destinations(make_spec(f"l{i}"))) for i in range(40)]
    results = await _settle([*early, *late])
    await asyncio.wait_for(stopping, TIMEOUT)

    for r in results:
        assert isinstance(r, list | SchedulerStopped), repr(r)
    answered = [r for r in results if isinstance(r, list)]
    assert answered, "callers sent before stop must be answered"
    assert all(isinstance(r, SchedulerStopped) for r in results[40:])
    # what was answered holds a claim; what was refused holds none
    claims = s.core.claims()
    for caller_result, uuid in zip(results, [f"e{i}" for i in range(40)], strict=False):
        assert (uuid in claims) == isinstance(caller_result, list)


async def test_owner_stop_is_a_message_and_fails_what_comes_after() -> None:
    """With the Owner itself: calls queued behind the stop message fail, none hang."""
    core = make_core(make_config(**ROOMY))
    core.update_host(big_host("h1"), now=0.0)
    owner = Owner(core, mailbox_size=2, max_batch=2, clock=Clock())
    owner.start()
    before = [
        asyncio.ensure_future(owner.ask(SelectDestinations(make_spec(f"b{i}")))) for i in range(5)
    ]
    await asyncio.sleep(0)  # b0, b1 in the mailbox; b2..b4 wait for room
    stopping = asyncio.ensure_future(owner.stop())
    await asyncio.sleep(0)
    after = [
        asyncio.ensure_future(owner.ask(SelectDestinations(make_spec(f"a{i}")))) for i in range(5)
    ]
    results = await _settle([*before, *after])
    await asyncio.wait_for(stopping, TIMEOUT)

    assert isinstance(results[0], list)
    assert isinstance(results[1], list)
    for r in results:
        assert isinstance(r, list | SchedulerStopped), repr(r)
    assert all(isinstance(r, SchedulerStopped) for r in results[5:])
    assert not owner.running
    assert owner.mailbox_depth == 0
    with pytest.raises(SchedulerStopped):
        await asyncio.wait_for(owner.ask(SelectDestinations(make_spec("x"))), TIMEOUT)


async def test_async_with_exit_answers_everything_sent_before_it() -> None:
    results: list[asyncio.Future[list[Selection]]] = []
    async with Scheduler(make_config(mailbox_size=1024, **ROOMY)) as s:
        await s.update_host(big_host("h1"))
        results = [
            asyncio.ensure_future(s.select_destinations(make_spec(f"vm{i}"))) for i in range(50)
        ]
        await asyncio.sleep(0)  # all 50 are in the mailbox before the stop message
    done = await _settle(list(results))
    assert all(isinstance(r, list) for r in done)


async def test_config_without_seed_still_works() -> None:
    async with Scheduler(SchedulerConfig(host_subset_size=2)) as s:
        for i in range(3):
            await s.update_host(make_report(f"h{i}"))
        [sel] = await s.select_destinations(make_spec())
        assert sel.host in {"h0", "h1", "h2"}
