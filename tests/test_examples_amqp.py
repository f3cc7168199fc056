"""The AMQP examples run against a service on the real broker."""

from __future__ import annotations

import asyncio
import re
import sys
import uuid
from pathlib import Path

import aio_pika
import pytest
from conftest import code_under_test_env

from actorsched import Scheduler, SchedulerConfig
from actorsched.amqp import SchedulerService
from actorsched.amqp.service import dead_letter_names

pytestmark = pytest.mark.amqp

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
URL = "amqp://guest:guest@127.0.0.1:5672/"


async def _run(script: str, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / script),
        "--amqp-url",
        URL,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=code_under_test_env(),
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, out.decode()
    return out.decode()


async def test_reporter_then_placement_client() -> None:
    queue = f"actorsched.test.{uuid.uuid4().hex[:12]}"
    try:
        async with (
            Scheduler(SchedulerConfig(seed=1)) as scheduler,
            SchedulerService(scheduler, URL, queue=queue),
        ):
            out = await _run(
                "compute_node_reporter.py", "--queue", queue, "--hosts", "3", "--rounds", "2",
                "--interval", "0",
            )  # fmt: skip
            assert "round 2: reported 3 hosts" in out
            out = await _run("placement_client.py", "--queue", queue, "--instances", "3")
            hosts = re.findall(r"-> (compute-\d)", out)
            assert sorted(hosts) == ["compute-0", "compute-1", "compute-2"]  # anti-affinity
            assert "released 3 of 3" in out
            assert scheduler.host_count == 3
            assert scheduler.claim_count == 0
            # named and kept: asking again gives the same hosts and claims nothing more
            first = await _run(
                "placement_client.py", "--queue", queue, "--instances", "2",
                "--name", "web", "--keep",
            )  # fmt: skip
            again = await _run(
                "placement_client.py", "--queue", queue, "--instances", "2",
                "--name", "web", "--keep",
            )  # fmt: skip
            assert "kept 2 claims" in first
            placed = re.findall(r"(web-\d) -> (compute-\d)", first)
            assert len(placed) == 2
            assert re.findall(r"(web-\d) -> (compute-\d)", again) == placed
            assert scheduler.claim_count == 2
    finally:
        connection = await aio_pika.connect(URL)
        async with connection:
            channel = await connection.channel()
            exchange, dead = dead_letter_names(queue)
            await channel.queue_delete(queue)
            await channel.queue_delete(dead)
            await channel.exchange_delete(exchange)
