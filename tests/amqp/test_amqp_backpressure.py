"""A flood of batch items waits outside the scheduler: at most a mailbox's worth is in it,
and at most ``max_waiting`` in line for room."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from amqp_support import host_report, running_stack

from actorsched import SchedulerConfig
from actorsched.amqp import SchedulerClient
from actorsched.amqp.protocol import MAX_BATCH_ITEMS
from actorsched.core import Command

pytestmark = pytest.mark.amqp


async def test_a_flood_of_batch_items_waits_for_room_in_the_mailbox() -> None:
    mailbox = 4
    async with running_stack(config=SchedulerConfig(mailbox_size=mailbox), prefetch=2) as stack:
        scheduler = stack.scheduler
        original = scheduler.submit
        deepest = 0
        waited = 0  # items that found the mailbox full and waited for room

        def watching_submit(command: Command[Any]) -> asyncio.Future[object]:
            nonlocal deepest, waited
            answer = original(command)
            deepest = max(deepest, scheduler.mailbox_depth)
            waited = max(waited, scheduler.waiting_for_room)
            return answer

        scheduler.submit = watching_submit  # type: ignore[method-assign,assignment]
        reports = [host_report(f"h{i}") for i in range(120)]
        # 120 concurrent calls through one client: a few batch messages of many items
        applied = await asyncio.gather(*(stack.client.update_host(r) for r in reports))
        assert applied == [True] * len(reports)
        assert scheduler.host_count == len(reports)
        assert stack.client.messages_sent < len(reports)  # they did travel as batches
        assert deepest == mailbox  # the flood filled the mailbox ...
        assert waited > 0  # ... and the items past it waited for room instead of failing


async def test_batch_items_past_a_full_line_wait_item_by_item_and_none_piles_up() -> None:
    # Before, every item of every batch in flight went into the line waiting for
    # room at once: prefetch deliveries of up to MAX_BATCH_ITEMS items each.
    mailbox, line, prefetch = 4, 4, 2
    config = SchedulerConfig(mailbox_size=mailbox, max_waiting=line)
    async with (
        running_stack(config=config, prefetch=prefetch) as stack,
        SchedulerClient(stack.url, queue=stack.queue, timeout=30.0, batch=False) as single,
    ):
        scheduler = stack.scheduler
        seen: list[tuple[int, int]] = []  # (depth, waiting) at each owner step
        handle = scheduler.core.handle
        waited: list[int] = []  # for each item that waited for a place: how many already did

        def recording(command: Command[Any], now: float) -> object:
            seen.append((scheduler.mailbox_depth, scheduler.waiting_for_room))
            return handle(command, now)

        when_room = scheduler.submit_when_room

        async def watching_when_room(command: Command[Any]) -> asyncio.Future[object]:
            waited.append(scheduler.blocked_senders)
            return await when_room(command)

        scheduler.core.handle = recording  # type: ignore[method-assign,assignment]
        scheduler.submit_when_room = watching_when_room  # type: ignore[method-assign,assignment]
        batching = SchedulerClient(
            stack.url, queue=stack.queue, timeout=30.0, max_batch=MAX_BATCH_ITEMS, window=prefetch
        )
        async with batching:
            reports = [host_report(f"h{i}") for i in range(3_000)]
            applied, alone = await asyncio.gather(
                asyncio.gather(*(batching.update_host(r) for r in reports)),
                # plain deliveries beside the batches wait for a place too, never fail
                asyncio.gather(*(single.update_host(host_report(f"s{i}")) for i in range(20))),
            )
        assert applied == [True] * len(reports)
        assert alone == [True] * 20
        assert scheduler.host_count == len(reports) + 20
        assert batching.messages_sent <= 10  # they did travel as batches of many items
        assert max(depth for depth, _ in seen) <= mailbox
        assert max(waiting for _, waiting in seen) <= line
        # items did wait for a place, each delivery in flight at most one at a time
        assert waited, "no item found the line full"
        assert max(waited) < prefetch
