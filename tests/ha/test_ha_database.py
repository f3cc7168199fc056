"""The journal's database misbehaves under load: connections killed, the server restarted.

The connections killed are the serves' own, on the machine's database. The server
restarted is a private cluster of the test run's own (tests/servers.py), never the
machine's.
"""

from __future__ import annotations

import asyncio

import pytest
from ha_support import (
    assert_clean,
    assert_epochs_in_order,
    ensure_postgres_up,
    ha_cluster,
    restart_postgres,
    spec,
    terminate_journal_connections,
)
from servers import PrivatePostgres, private_postgres_fixture  # noqa: F401 (a fixture)

from benchmarks.cluster import ACTIVE_LINE, Tally, place_all

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(240)]

REQUESTS = 120  # 80 fit, 40 get NoValidHost
LOST_COMMIT = "connection lost during a commit"


async def test_killed_database_connections_under_load_lose_nothing_and_the_active_stays() -> None:
    async with ha_cluster(("a", "b")) as cluster:
        active = await cluster.wait_active()
        standby = cluster.serves[1]
        tally = Tally()
        load = asyncio.ensure_future(
            place_all(cluster.client, [spec(i) for i in range(REQUESTS)], tally, pause=0.03)
        )
        killed: list[int] = []
        for answered in (20, 40, 60, 80):
            await tally.wait_answered(answered)
            killed.append(await terminate_journal_connections(cluster.shard))
        await load
        logs = cluster.logs()
        assert sum(killed) >= 4, killed  # the active's writer each time, the standby's reader
        # the writer reconnected and settled each cut-off commit: no fail-stop, no exit
        assert active.process.returncode is None, logs
        assert active.count("stopping:") == 0, logs
        assert active.count(LOST_COMMIT) >= 1, logs
        assert cluster.active() == [active], logs
        assert active.count(ACTIVE_LINE) == 1, "it never stepped down"
        assert standby.process.returncode is None, logs
        assert standby.count("stopped following") == 0, logs
        assert_clean(cluster.audit(tally), REQUESTS, logs)
        assert assert_epochs_in_order(cluster) == [1], "nobody took over"


async def test_database_restart_under_load_loses_nothing(
    private_postgres: PrivatePostgres,
) -> None:
    pg = private_postgres
    async with ha_cluster(("a", "b"), pg_url=pg.url) as cluster:
        first = await cluster.wait_active()
        standby = cluster.serves[1]
        tally = Tally()
        load = asyncio.ensure_future(
            # about 3 s of load; the server goes down early in the restart, for a moment
            place_all(cluster.client, [spec(i) for i in range(REQUESTS)], tally, pause=0.2)
        )
        await tally.wait_answered(30)
        try:
            took = await restart_postgres(pg)
        finally:
            await ensure_postgres_up(pg)
        await load
        logs = cluster.logs()
        assert took < 10, f"the restart took {took:.1f}s, past the writer's 10 s of retries"
        # the writer retries for 10 s: the active rides the restart out
        assert first.process.returncode is None, logs
        assert first.count("stopping:") == 0, logs
        assert first.count(LOST_COMMIT) >= 1, "the restart cut a commit mid-load\n" + logs
        assert cluster.active() == [first], logs
        assert standby.process.returncode is None, logs
        assert standby.count(ACTIVE_LINE) == 0, logs
        assert standby.count("stopped following") == 0, logs
        assert_clean(cluster.audit(tally), REQUESTS, logs)
        assert assert_epochs_in_order(cluster) == [1]
