"""A flood of batch items waits outside the scheduler: at most a mailbox's worth at once."""

from __future__ import annotations

import asyncio

import pytest
from amqp_support import host_report, running_stack

from actorsched import HostReport, SchedulerConfig

pytestmark = pytest.mark.amqp


async def test_batch_items_in_flight_never_exceed_the_mailbox() -> None:
    mailbox = 4
    async with running_stack(config=SchedulerConfig(mailbox_size=mailbox), prefetch=2) as stack:
        scheduler = stack.scheduler
        original = scheduler.update_host
        in_flight = 0
        most = 0

        async def counting_update_host(report: HostReport) -> bool:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            try:
                for _ in range(3):  # let every other waiting item run meanwhile
                    await asyncio.sleep(0)
                return await original(report)
            finally:
                in_flight -= 1

        scheduler.update_host = counting_update_host  # type: ignore[method-assign]
        reports = [host_report(f"h{i}") for i in range(120)]
        # 120 concurrent calls through one client: a few batch messages of many items
        applied = await asyncio.gather(*(stack.client.update_host(r) for r in reports))
        assert applied == [True] * len(reports)
        assert scheduler.host_count == len(reports)
        assert stack.client.messages_sent < len(reports)  # they did travel as batches
        assert 1 < most <= mailbox
