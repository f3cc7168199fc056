"""A lone ``serve`` learns it owns its queue without waiting for traffic.

Before, a serve stayed "standby" (and ``/readyz`` said so) until the first
message reached it. Now every standby publishes a read to its own queue
every two seconds; the broker's single active consumer takes it, and that
begins its term. In a pair, the probes of the second reach the first.
"""

from __future__ import annotations

import asyncio

import pytest
from ha_support import SERVE_AMQP_URL, delete_queue_and_shard, new_names
from journal_backends import PG_URL

from benchmarks.cluster import ACTIVE_LINE, ServeProcess

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(120)]


async def test_a_lone_serve_and_then_a_pair_become_active_and_standby_without_traffic() -> None:
    queue, shard = new_names()
    serves: list[ServeProcess] = []
    try:
        first = await ServeProcess.start(
            amqp_url=SERVE_AMQP_URL, queue=queue, journal=PG_URL, shard=shard, name="a"
        )
        serves.append(first)
        # nothing is sent to the queue: its own probe begins the term
        await first.wait_line(ACTIVE_LINE, timeout=10)
        second = await ServeProcess.start(
            amqp_url=SERVE_AMQP_URL, queue=queue, journal=PG_URL, shard=shard, name="b"
        )
        serves.append(second)
        await asyncio.sleep(5)  # two probes of the second: both answered by the first
        assert first.is_active
        assert second.count(ACTIVE_LINE) == 0
        assert first.count(ACTIVE_LINE) == 1
    finally:
        await asyncio.gather(*(s.stop() for s in serves), return_exceptions=True)
        await delete_queue_and_shard(queue, shard)
