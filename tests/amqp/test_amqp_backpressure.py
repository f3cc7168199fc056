"""A flood of batch items waits outside the scheduler: at most a mailbox's worth is in it."""

from __future__ import annotations

import asyncio

import pytest
from amqp_support import host_report, running_stack

from actorsched import SchedulerConfig
from actorsched.core import Command

pytestmark = pytest.mark.amqp


async def test_a_flood_of_batch_items_waits_for_room_in_the_mailbox() -> None:
    mailbox = 4
    async with running_stack(config=SchedulerConfig(mailbox_size=mailbox), prefetch=2) as stack:
        scheduler = stack.scheduler
        original = scheduler.submit
        deepest = 0
        waited = 0  # items that found the mailbox full and waited for room

        def watching_submit(command: Command) -> asyncio.Future[object]:
            nonlocal deepest, waited
            answer = original(command)
            deepest = max(deepest, scheduler.mailbox_depth)
            waited = max(waited, scheduler.waiting_for_room)
            return answer

        scheduler.submit = watching_submit  # type: ignore[method-assign]
        reports = [host_report(f"h{i}") for i in range(120)]
        # 120 concurrent calls through one client: a few batch messages of many items
        applied = await asyncio.gather(*(stack.client.update_host(r) for r in reports))
        assert applied == [True] * len(reports)
        assert scheduler.host_count == len(reports)
        assert stack.client.messages_sent < len(reports)  # they did travel as batches
        assert deepest == mailbox  # the flood filled the mailbox ...
        assert waited > 0  # ... and the items past it waited for room instead of failing
