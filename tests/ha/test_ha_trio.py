"""Three serves on one queue: kill -9 of the active twice in a row under load."""

from __future__ import annotations

import asyncio

import pytest
from ha_support import assert_clean, assert_epochs_in_order, ha_cluster, spec

from benchmarks.cluster import ACTIVE_LINE, STANDBY_LINE, Tally, place_all

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(240)]

REQUESTS = 120  # 80 fit, 40 get NoValidHost: each new owner must know every earlier claim


async def test_kill_9_of_the_active_twice_each_time_exactly_one_other_takes_over() -> None:
    async with ha_cluster(("a", "b", "c")) as cluster:
        owners = [await cluster.wait_active()]
        assert owners[0].name == "a"
        tally = Tally()
        load = asyncio.ensure_future(
            place_all(cluster.client, [spec(i) for i in range(REQUESTS)], tally, pause=0.05)
        )
        for answered in (30, 60):
            await tally.wait_answered(answered)
            await owners[-1].kill()
            successor = await cluster.wait_active()  # asserts never two at once
            assert successor not in owners
            owners.append(successor)
            # any other left waits as a standby: it has not taken over
            others = [s for s in cluster.serves if s.process.returncode is None]
            assert [s for s in others if s.count(ACTIVE_LINE)] == [successor], cluster.logs()
        await load
        logs = cluster.logs()
        assert cluster.active() == [owners[-1]], logs
        assert sorted(s.name for s in owners) == ["a", "b", "c"]
        for serve in owners:
            assert serve.count(ACTIVE_LINE) == 1, logs  # one term each, no flapping
            assert serve.count(STANDBY_LINE) == 1, logs
            assert serve.count("stopping:") == 0, logs
        assert [s.process.returncode for s in owners] == [-9, -9, None], logs
        assert_clean(cluster.audit(tally), REQUESTS, logs)
        assert assert_epochs_in_order(cluster) == [1, 2, 3]
        for number, serve in enumerate(owners, start=1):
            line = await serve.wait_line(ACTIVE_LINE, timeout=1)
            assert f"journal epoch {number}," in line, line
