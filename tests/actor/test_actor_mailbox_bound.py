"""What waits for room in the mailbox is bounded too (issue 12, item 4).

Before, ``mailbox_size=2`` let 100,000 ``submit`` calls pile up in the line
waiting for room. Now the line holds at most ``max_waiting`` messages:
``submit`` past it raises MailboxFull and sends nothing, and a caller that
awaits waits, unsent, for a place in the line.

Several tests line up their tasks before the owner runs, relying on asyncio
running ready callbacks first in, first out: tasks made before the mailbox
fills take their first step before the owner wakes up for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest
from conftest import make_config, make_report

from actorsched import MailboxFull, Scheduler, SchedulerError, SchedulerStopped
from actorsched.core import Command, UpdateHost

TIMEOUT = 10.0  # no test here should come near it: hitting it means a caller hung


async def _settle(aws: Sequence[Awaitable[object]]) -> list[object]:
    return await asyncio.wait_for(asyncio.gather(*aws, return_exceptions=True), TIMEOUT)


def _record(s: Scheduler) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Hosts in the order the owner applied their reports, and the bounds seen meanwhile.

    Each handled message notes (mailbox depth, waiting for room, blocked senders).
    """
    handled: list[str] = []
    seen: list[tuple[int, int, int]] = []
    handle = s.core.handle

    def recording(command: Command[Any], now: float) -> object:
        assert isinstance(command, UpdateHost)
        handled.append(command.report.host)
        seen.append((s.mailbox_depth, s.waiting_for_room, s.blocked_senders))
        return handle(command, now)

    s.core.handle = recording  # type: ignore[method-assign,assignment]
    return handled, seen


def _fill(s: Scheduler, prefix: str, count: int) -> list[asyncio.Future[object]]:
    return [s.submit(UpdateHost(make_report(f"{prefix}{i}"))) for i in range(count)]


@pytest.mark.parametrize("max_waiting", [0, 10])
async def test_100000_submits_against_a_mailbox_of_2_no_longer_pile_up(max_waiting: int) -> None:
    async with Scheduler(make_config(mailbox_size=2, max_waiting=max_waiting)) as s:
        template = make_report("h")
        accepted: list[tuple[int, asyncio.Future[object]]] = []
        refused: list[type[SchedulerError]] = []
        first: SchedulerError | None = None
        for i in range(100_000):
            report = template.model_copy(update={"host": f"h{i}"})
            try:
                accepted.append((i, s.submit(UpdateHost(report))))
            except SchedulerError as exc:
                refused.append(type(exc))
                first = first or exc
        room = 2 + max_waiting
        assert s.mailbox_depth == 2
        assert s.waiting_for_room == max_waiting
        assert [i for i, _ in accepted] == list(range(room)), "the first ones in, the rest out"
        assert len(refused) == 100_000 - room
        assert set(refused) == {MailboxFull}
        message = str(first)
        assert "2 messages in it (SchedulerConfig.mailbox_size)" in message
        assert f"{max_waiting} waiting in line" in message
        assert f"SchedulerConfig.max_waiting {max_waiting}" in message
        assert "nothing was sent" in message
        assert "raise SchedulerConfig.max_waiting" in message
        # nothing accepted is lost: every one is answered and applied, nothing refused is
        answers = await _settle([future for _, future in accepted])
        assert answers == [True] * room
        assert sorted(s.core.host_states()) == sorted(f"h{i}" for i in range(room))
        # the owner made room: submit sends again
        assert await s.submit(UpdateHost(make_report("later"))) is True
        assert s.host_count == room + 1


async def test_awaiting_callers_past_the_bound_wait_for_a_place_in_order() -> None:
    async with Scheduler(make_config(mailbox_size=2, max_batch=2, max_waiting=3)) as s:
        handled, seen = _record(s)
        submitted: list[asyncio.Future[object]] = []

        async def filler() -> bool:
            submitted.extend(_fill(s, "a", 5))  # the mailbox's 2 and the line's 3
            return await s.update_host(make_report("b0"))

        callers = [asyncio.ensure_future(filler())]
        callers += [
            asyncio.ensure_future(s.update_host(make_report(f"b{i}"))) for i in range(1, 40)
        ]
        await asyncio.sleep(0)  # every caller took its first step; the owner has not run yet
        # the callers past the bound wait unsent, and the line stays within its bound
        assert s.mailbox_depth == 2
        assert s.waiting_for_room == 3
        assert s.blocked_senders == 40
        with pytest.raises(MailboxFull, match="40 awaiting callers wait"):
            s.submit(UpdateHost(make_report("overtaker")))  # never ahead of those who wait
        answers = await _settle([*submitted, *callers])
        assert answers == [True] * 45
        assert handled == [*(f"a{i}" for i in range(5)), *(f"b{i}" for i in range(40))]
        assert max(waiting for _, waiting, _ in seen) <= 3
        assert max(depth for depth, _, _ in seen) <= 2
        assert s.blocked_senders == 0
        assert s.waiting_for_room == 0


async def test_a_caller_cancelled_while_it_waits_unsent_sends_nothing() -> None:
    async with Scheduler(make_config(mailbox_size=2, max_batch=2, max_waiting=1)) as s:
        handled, _ = _record(s)
        submitted: list[asyncio.Future[object]] = []

        async def filler() -> None:
            submitted.extend(_fill(s, "a", 3))

        filling = asyncio.ensure_future(filler())
        callers = [asyncio.ensure_future(s.update_host(make_report(f"b{i}"))) for i in range(4)]
        await asyncio.sleep(0)
        callers[1].cancel()  # b1, waiting for a place in the line
        await filling
        results = await _settle([*submitted, *callers])
        assert results[:3] == [True] * 3
        assert results[3] is True
        assert isinstance(results[4], asyncio.CancelledError)
        assert results[5:] == [True, True]
        assert handled == ["a0", "a1", "a2", "b0", "b2", "b3"]
        assert "b1" not in s.core.host_states()


async def test_stop_fails_callers_still_waiting_unsent_with_scheduler_stopped() -> None:
    s = Scheduler(make_config(mailbox_size=2, max_batch=2, max_waiting=2))
    await s.start()
    handled, _ = _record(s)
    submitted: list[asyncio.Future[object]] = []

    async def filler() -> None:
        submitted.extend(_fill(s, "a", 4))

    async def feeder() -> asyncio.Future[object]:
        return await s.submit_when_room(UpdateHost(make_report("fed")))

    tasks: list[asyncio.Future[object]] = [asyncio.ensure_future(filler())]
    tasks += [asyncio.ensure_future(s.update_host(make_report(f"b{i}"))) for i in range(10)]
    tasks.append(asyncio.ensure_future(feeder()))
    stopping = asyncio.ensure_future(s.stop())  # sent before the owner saw any of them
    await asyncio.sleep(0)
    assert s.blocked_senders == 11  # the ten callers and the feeder: none of them was sent
    results = await _settle([*submitted, *tasks[1:]])
    await asyncio.wait_for(stopping, TIMEOUT)
    # what was sent before stop is answered; whatever waited unsent fails, none hangs
    assert results[:4] == [True] * 4
    assert all(isinstance(r, SchedulerStopped) for r in results[4:]), results[4:]
    assert handled == ["a0", "a1", "a2", "a3"]
    assert s.blocked_senders == 0
    with pytest.raises(SchedulerStopped):
        await s.submit_when_room(UpdateHost(make_report("after")))


async def test_a_feeder_falling_back_to_submit_when_room_holds_one_waiting_at_most() -> None:
    async with Scheduler(make_config(mailbox_size=2, max_batch=2, max_waiting=2)) as s:
        handled, seen = _record(s)

        async def feed(prefix: str) -> list[object]:
            futures: list[asyncio.Future[object]] = []
            for i in range(500):
                command = UpdateHost(make_report(f"{prefix}{i}"))
                try:
                    futures.append(s.submit(command))
                except MailboxFull:
                    futures.append(await s.submit_when_room(command))
            return await asyncio.gather(*futures)

        first, second = await asyncio.wait_for(asyncio.gather(feed("x"), feed("y")), TIMEOUT)
        assert first == second == [True] * 500
        assert s.host_count == 1_000
        # each feeder's own commands in its order; the line within its bound throughout
        assert [h for h in handled if h[0] == "x"] == [f"x{i}" for i in range(500)]
        assert max(waiting for _, waiting, _ in seen) <= 2
        assert max(blocked for _, _, blocked in seen) <= 2  # one per feeder at most
