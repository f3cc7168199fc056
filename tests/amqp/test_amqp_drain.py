"""Stopping never waits past its drain timeout, and what it did not finish stays with the broker."""

from __future__ import annotations

import asyncio
import logging
import time

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from amqp_support import AMQP_URL, delete_topology, unique_queue

from actorsched import Scheduler
from actorsched.amqp.service import SchedulerService

pytestmark = pytest.mark.amqp


async def test_stop_gives_up_a_stuck_delivery_within_the_drain_timeout_and_leaves_it_queued(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="actorsched.amqp.service")
    queue = unique_queue()
    stuck = asyncio.Event()
    try:
        async with Scheduler() as scheduler:
            service = SchedulerService(scheduler, AMQP_URL, queue=queue, drain_timeout=0.5)

            async def hang(
                message: AbstractIncomingMessage, items: list[tuple[str, str]], cut: int | None
            ) -> str:
                stuck.set()
                await asyncio.Event().wait()  # as a delivery whose ack never returns
                raise AssertionError("unreachable")

            service._process = hang  # type: ignore[method-assign]
            await service.start()
            connection = await aio_pika.connect(AMQP_URL)
            async with connection:
                channel = await connection.channel()
                await channel.default_exchange.publish(
                    aio_pika.Message(b'{"instance_uuid": "vm-1"}', type="release"),
                    routing_key=queue,
                )
                await asyncio.wait_for(stuck.wait(), 10)
                started = time.monotonic()
                await asyncio.wait_for(service.stop(), 10)  # without the bound: forever
                took = time.monotonic() - started
                assert took < 0.5 + 5.0  # the drain timeout, plus the close's own bound
                assert any("still in flight after" in r.getMessage() for r in caplog.records)
                # never acked: the broker gives it to the next consumer
                again = await channel.get_queue(queue)
                async with again.iterator(timeout=10) as stream:
                    message = await anext(stream)
                assert message.body == b'{"instance_uuid": "vm-1"}'
                assert message.redelivered
                await message.ack()
    finally:
        await delete_topology(AMQP_URL, queue)
