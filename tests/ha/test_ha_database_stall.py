"""The active's database link stalls under load (sockets open, nothing forwarded).

Before the commit watchdog the active stayed "ready" and mute for the whole
stall, with no line and no fail-over. Now it fail-stops within
``--commit-timeout`` plus the time it takes to say what it waited on, the
broker hands the queue to the standby, and the load goes on: 0 lost,
0 doubled, 0 over-committed. The stall is the test's own TCP proxy between
the active and PostgreSQL; the database itself is untouched.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from ha_support import (
    CLIENT_AMQP_URL,
    SERVE_AMQP_URL,
    Cluster,
    assert_clean,
    delete_queue_and_shard,
    host,
    new_names,
    spec,
)

from actorsched.amqp import SchedulerClient
from benchmarks.cluster import ACTIVE_LINE, ServeProcess, Tally, place_all

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journal"))
from journal_backends import PG_URL
from stall_proxy import StallProxy

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(240)]

REQUESTS = 120  # 80 fit, 40 get NoValidHost
COMMIT_TIMEOUT = 1.0


async def test_a_stalled_database_link_fails_the_active_over_to_the_standby() -> None:
    queue, shard = new_names()
    serves: list[ServeProcess] = []
    try:
        async with (
            StallProxy(PG_URL) as proxy,
            SchedulerClient(
                CLIENT_AMQP_URL, queue=queue, timeout=10, reconnect_interval=0.2
            ) as client,
        ):
            cluster = Cluster(queue, shard, serves, client, PG_URL)
            extra = ("--commit-timeout", str(COMMIT_TIMEOUT))
            for name, journal in (("a", proxy.url), ("b", PG_URL)):
                serves.append(
                    await ServeProcess.start(
                        amqp_url=SERVE_AMQP_URL,
                        queue=queue,
                        journal=journal,
                        shard=shard,
                        name=name,
                        extra=extra,
                    )
                )
            for i in range(20):  # the first delivery makes its consumer the active
                assert await client.update_host(host(i))
            first = await cluster.wait_active()
            assert first.name == "a"
            standby = serves[1]
            tally = Tally()
            load = asyncio.ensure_future(
                place_all(client, [spec(i) for i in range(REQUESTS)], tally, pause=0.05)
            )
            await tally.wait_answered(25)
            proxy.stall()
            stalled = time.monotonic()
            code = await first.wait_exit(timeout=30)
            took = time.monotonic() - stalled
            await standby.wait_line(ACTIVE_LINE, timeout=30)
            await load
            logs = cluster.logs()
            # fail-stop: one line naming the stuck commit, exit status 1, within the bound
            assert code == 1, logs
            assert first.count(r"a commit has not finished in") >= 1, logs
            assert took < COMMIT_TIMEOUT + 0.25 + 3.0 + 2.0, (took, logs)
            assert standby.process.returncode is None, logs
            assert cluster.active() == [standby], logs
            assert_clean(cluster.audit(tally), REQUESTS, logs)
    finally:
        await asyncio.gather(*(s.stop() for s in serves), return_exceptions=True)
        await delete_queue_and_shard(queue, shard)
