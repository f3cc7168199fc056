"""kill -9 of the active owner under load: the standby takes over, nothing is lost or doubled."""

from __future__ import annotations

import asyncio
import signal

import pytest
from ha_support import HOSTS, SLOTS, ha_cluster, spec

from benchmarks.cluster import ACTIVE_LINE, STANDBY_LINE, Tally, place_all

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(240)]

REQUESTS = 120  # 80 fit, 40 get NoValidHost: the standby must know every earlier claim


async def test_kill_9_of_the_active_under_load_then_restart() -> None:
    async with ha_cluster(("a", "b")) as cluster:
        first = await cluster.wait_active()
        assert first.name == "a"
        standby = cluster.serves[1]
        assert not standby.is_active
        tally = Tally()
        load = asyncio.ensure_future(
            place_all(cluster.client, [spec(i) for i in range(REQUESTS)], tally)
        )
        await tally.wait_answered(30)  # mid-load
        await first.kill()
        second = await cluster.wait_active()
        assert second is standby
        restarted = await cluster.add("a-again")  # comes back as a standby
        await load
        assert not restarted.is_active
        assert restarted.count(STANDBY_LINE) == 1
        result = cluster.audit(tally)
        assert result.zero(), result
        assert result.unanswered == 0
        assert result.placed == HOSTS * SLOTS
        assert result.refused == REQUESTS - HOSTS * SLOTS
        assert second.count(ACTIVE_LINE) == 1
        epochs = cluster.records_by_epoch()
        assert [e for e, _, _ in epochs] == [1, 2]
        assert epochs[0][2] < epochs[1][1], "no record of the old epoch after the new one"


async def test_sigstop_of_the_active_then_sigcont_writes_nothing_and_steps_down() -> None:
    async with ha_cluster(("a", "b")) as cluster:
        first = await cluster.wait_active()
        tally = Tally()
        load = asyncio.ensure_future(
            place_all(cluster.client, [spec(i) for i in range(REQUESTS)], tally)
        )
        await tally.wait_answered(30)
        first.signal(signal.SIGSTOP)
        second = cluster.serves[1]
        # the broker drops the frozen owner after missed heartbeats; b gets the queue
        await second.wait_line(ACTIVE_LINE, timeout=30)
        await load
        first.signal(signal.SIGCONT)
        # the woken zombie learns its channel is gone: it steps down or stops, never answers
        await first.wait_line("stepping down to standby|stopping:", timeout=30)
        await asyncio.sleep(1)
        assert cluster.active() == [second]
        result = cluster.audit(tally)
        assert result.zero(), result
        assert result.unanswered == 0
        assert result.placed == HOSTS * SLOTS
        epochs = cluster.records_by_epoch()
        assert [e for e, _, _ in epochs] == [1, 2]
        assert epochs[0][2] < epochs[1][1], "the zombie wrote nothing after the takeover"
