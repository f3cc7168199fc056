"""Waiting requests over the real broker: ``wait`` travels in the request's spec,
and the delivery is acked when its answer is sent (it holds a prefetch slot)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from amqp_support import ROOMY, host_report, running_stack
from conftest import until_pending

from actorsched import NoValidHost, RequestSpec

pytestmark = pytest.mark.amqp

TIMEOUT = 10.0


def _spec(*uuids: str, **fields: Any) -> RequestSpec:
    return RequestSpec.model_validate(
        {"instance_uuids": list(uuids), "memory_mb": 1024, "vcpus": 1, "disk_gb": 1, **fields}
    )


async def test_a_waiting_request_over_amqp_is_placed_by_a_release() -> None:
    async with running_stack(config=ROOMY, prefetch=4) as stack:
        client = stack.client
        assert await client.update_host(host_report("h1", memory_mb=1024))
        await client.select_destinations(_spec("first"))
        waiter = asyncio.create_task(client.select_destinations(_spec("vm"), wait=TIMEOUT))
        await until_pending(stack.scheduler, 1)
        # the waiting delivery holds one prefetch slot, unacked: the others still flow
        assert stack.service.in_flight == 1
        assert (await client.where("first")).host == "h1"
        assert not waiter.done()
        assert await client.release("first")
        async with asyncio.timeout(TIMEOUT):
            [placed] = await waiter
        assert placed.host == "h1"
        assert stack.scheduler.pending_requests == 0


async def test_a_waiting_request_over_amqp_times_out_with_no_valid_host() -> None:
    async with running_stack(config=ROOMY) as stack:
        client = stack.client
        assert await client.update_host(host_report("h1", memory_mb=512))
        started = time.monotonic()
        with pytest.raises(NoValidHost, match="RamFilter"):
            await client.select_destinations(_spec("vm", wait=0.3))
        assert 0.25 <= time.monotonic() - started < TIMEOUT
        assert stack.scheduler.pending_requests == 0


async def test_waiting_requests_go_alone_and_hold_no_batch_of_other_calls() -> None:
    async with running_stack(config=ROOMY, prefetch=8) as stack:
        client = stack.client
        assert await client.update_host(host_report("h1", memory_mb=1024))
        await client.select_destinations(_spec("first"))
        sent = client.messages_sent
        waiters = [
            asyncio.create_task(client.select_destinations(_spec(f"w{i}"), wait=TIMEOUT))
            for i in range(3)
        ]
        await until_pending(stack.scheduler, 3)
        assert client.messages_sent == sent + 3  # one message each, none batched
        # more calls than the client's window still flow while three wait
        where = await asyncio.gather(*[client.where(f"x{i}") for i in range(10)])
        assert all(found.host is None for found in where)
        for i, waiter in enumerate(waiters):
            assert await client.release("first" if i == 0 else f"w{i - 1}")
            async with asyncio.timeout(TIMEOUT):
                [placed] = await waiter
            assert placed.host == "h1"
