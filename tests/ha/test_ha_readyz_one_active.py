"""In a pair, ``/readyz`` says ``active`` on one process at a time (issue 24, item 6).

The active's link to the broker stalls (the test's own TCP proxy stops
forwarding, every socket stays open): the broker drops it after missed
heartbeats and gives the queue to the standby, which takes the journal over.
The stalled one cannot hear that from the broker; its journal's check of the
shard's epoch (every ``--owner-check-interval``, 1 s) tells it, and it
fail-stops. Before that check it said ``active`` for about 4 s beside the new
active (aiormq gives up on a silent broker after three heartbeats).
Both ``/readyz`` endpoints are polled every 50 ms throughout, and the time
both said ``active`` together is measured: at most one heartbeat (1 s here)
plus the polling step.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from ha_support import (
    CLIENT_AMQP_URL,
    delete_queue_and_shard,
    host,
    new_names,
    serve_url,
)

from actorsched.amqp import SchedulerClient
from benchmarks.cluster import ACTIVE_LINE, ServeProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journal"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from journal_backends import PG_URL
from servers import free_port
from stall_proxy import StallProxy

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(180)]

HEARTBEAT = 1.0  # serve_url's heartbeat
STEP = 0.05


async def _readyz(port: int) -> str:
    """The first word of ``GET /readyz`` (``unreachable`` when nothing answers)."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 1.0)
    except (OSError, TimeoutError):
        return "unreachable"
    try:
        writer.write(b"GET /readyz HTTP/1.0\r\n\r\n")
        await writer.drain()
        reply = await asyncio.wait_for(reader.read(), 1.0)
    except (OSError, TimeoutError):
        return "unreachable"
    finally:
        writer.close()
    return reply.split(b"\r\n\r\n", 1)[-1].decode().strip() or "empty"


async def test_a_stalled_active_stops_saying_active_within_one_heartbeat_of_the_takeover() -> None:
    queue, shard = new_names()
    serves: list[ServeProcess] = []
    ports = [free_port(), free_port()]
    seen: list[tuple[float, str, str]] = []
    try:
        async with (
            StallProxy("amqp://guest:guest@127.0.0.1:5672/") as proxy,
            SchedulerClient(
                CLIENT_AMQP_URL, queue=queue, timeout=10, reconnect_interval=0.2
            ) as client,
        ):
            for name, amqp_url, port in (
                ("a", serve_url(proxy.url), ports[0]),
                ("b", serve_url("amqp://guest:guest@127.0.0.1:5672/"), ports[1]),
            ):
                serves.append(
                    await ServeProcess.start(
                        amqp_url=amqp_url,
                        queue=queue,
                        journal=PG_URL,
                        shard=shard,
                        name=name,
                        extra=("--metrics-port", str(port)),
                    )
                )
                if name == "a":
                    await serves[0].wait_line(ACTIVE_LINE, timeout=20)
            first, second = serves
            assert await client.update_host(host(0))
            assert await _readyz(ports[0]) == "active"
            assert await _readyz(ports[1]) == "standby"

            stop = asyncio.Event()

            async def poll() -> None:
                while not stop.is_set():
                    a, b = await asyncio.gather(_readyz(ports[0]), _readyz(ports[1]))
                    seen.append((time.monotonic(), a, b))
                    await asyncio.sleep(STEP)

            poller = asyncio.ensure_future(poll())
            await asyncio.sleep(0.5)
            proxy.stall()
            await second.wait_line(ACTIVE_LINE, timeout=30)
            await asyncio.sleep(6 * HEARTBEAT)  # long past any heartbeat of the stalled one
            stop.set()
            await poller
            assert await client.update_host(host(1))  # the new active answers
            # the stalled one learnt it from its journal's check of the shard, not the broker
            assert await first.wait_exit(timeout=10) == 1
            assert first.count("stopping: journal .* was taken over") == 1, first.lines[-10:]
    finally:
        await asyncio.gather(*(s.stop() for s in serves), return_exceptions=True)
        await delete_queue_and_shard(queue, shard)
    logs = "\n".join(f"{s.name}: {line}" for s in serves for line in s.lines[-15:])
    both = [t for t, a, b in seen if a == "active" and b == "active"]
    overlap = (both[-1] - both[0]) if both else 0.0
    assert overlap <= HEARTBEAT + 2 * STEP + 0.5, (overlap, seen[-5:], logs)
    assert seen[-1][2] == "active", (seen[-5:], logs)
    assert seen[-1][1] != "active", (seen[-5:], logs)
