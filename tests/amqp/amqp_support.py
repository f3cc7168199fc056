"""Helpers for the tests against the real RabbitMQ on 127.0.0.1:5672.

Not a conftest (tests/conftest.py owns that module name): test modules
import these and wrap them in a fixture of their own. The broker is shared
by other test runs, so every test gets queue names of its own and deletes
them afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aio_pika

from actorsched import HostReport, Scheduler, SchedulerConfig
from actorsched.amqp import SchedulerClient, SchedulerService
from actorsched.amqp.service import dead_letter_names

AMQP_URL = os.environ.get("ACTORSCHED_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
# Claims count as I/O operations and instances; room for 1,000 on 20 hosts.
ROOMY = SchedulerConfig(seed=1, max_io_ops_per_host=1000, max_instances_per_host=1000)


def unique_queue() -> str:
    return f"actorsched.test.{uuid.uuid4().hex[:12]}"


def host_report(host: str, generation: int = 1, memory_mb: int = 8192) -> HostReport:
    """A healthy host with 8 GiB, 64 vCPUs and 1 TB, nothing used."""
    return HostReport(
        host=host,
        generation=generation,
        memory_mb=memory_mb,
        memory_mb_used=0,
        vcpus=64,
        vcpus_used=0,
        local_gb=1000,
        local_gb_used=0,
    )


async def delete_topology(url: str, queue: str) -> None:
    """Delete a request queue, its dead-letter queue and exchange (missing ones are fine)."""
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        exchange, dead = dead_letter_names(queue)
        for name in (queue, dead, f"{queue}.state"):  # .state: the queue's journal (serve)
            await channel.queue_delete(name)
        await channel.exchange_delete(exchange)


@dataclass
class Stack:
    """A running scheduler, the service consuming ``queue``, and a client of it."""

    url: str
    queue: str
    scheduler: Scheduler
    service: SchedulerService
    client: SchedulerClient


@asynccontextmanager
async def running_stack(
    url: str = AMQP_URL,
    *,
    config: SchedulerConfig | None = None,
    client_timeout: float = 10.0,
    **service_options: Any,
) -> AsyncIterator[Stack]:
    """Scheduler + SchedulerService + SchedulerClient on a fresh queue, torn down after."""
    queue = unique_queue()
    try:
        async with (
            Scheduler(config or SchedulerConfig(seed=1)) as scheduler,
            SchedulerService(
                scheduler, url, queue=queue, reconnect_interval=0.2, **service_options
            ) as service,
            SchedulerClient(url, queue=queue, timeout=client_timeout) as client,
        ):
            yield Stack(url, queue, scheduler, service, client)
    finally:
        await delete_topology(url, queue)


async def raw_call(
    url: str, queue: str, op: str, body: dict[str, Any], user_id: str | None
) -> dict[str, Any]:
    """One request published with (or without) ``user_id``, as any client may; its reply."""
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
        await channel.default_exchange.publish(
            aio_pika.Message(
                json.dumps(body).encode(),
                content_type="application/json",
                type=op,
                correlation_id=uuid.uuid4().hex,
                reply_to=replies.name,
                user_id=user_id,
            ),
            routing_key=queue,
        )
        for _ in range(400):
            message = await replies.get(no_ack=True, fail=False)
            if message is not None:
                reply: dict[str, Any] = json.loads(message.body)
                return reply
            await asyncio.sleep(0.025)
    raise AssertionError(f"no reply to {op}")


async def run_cli(*argv: str) -> tuple[int, str, str]:
    """``actorsched ARGV...`` in a process of its own: its exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "actorsched.cli",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
