"""One writer per journal: an epoch stolen by hand under load, two serves on one SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from ha_support import (
    HOSTS,
    SLOTS,
    assert_clean,
    assert_epochs_in_order,
    ha_cluster,
    spec,
    steal_epoch,
)

from benchmarks.cluster import ACTIVE_LINE, Tally, place_all

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(240)]

REQUESTS = 120  # 80 fit, 40 get NoValidHost


async def test_an_epoch_stolen_by_hand_under_load_fail_stops_the_active_and_b_takes_over() -> None:
    async with ha_cluster(("a", "b")) as cluster:
        first = await cluster.wait_active()
        standby = cluster.serves[1]
        tally = Tally()
        load = asyncio.ensure_future(
            place_all(cluster.client, [spec(i) for i in range(REQUESTS)], tally, pause=0.03)
        )
        await tally.wait_answered(30)
        stolen = await asyncio.to_thread(steal_epoch, cluster.shard)
        assert stolen == 2
        # its next commit is fenced: it says why in one line and exits 1, never acking
        code = await first.wait_exit(30)
        logs = cluster.logs()
        assert code == 1, logs
        stopping = await first.wait_line("stopping:", timeout=1)
        assert "taken over" in stopping, stopping
        assert "its epoch is 2 (operator)" in stopping, stopping
        assert first.count("exits with status 1") == 1, logs
        second = await cluster.wait_active()
        assert second is standby
        await load
        logs = cluster.logs()
        assert second.count(ACTIVE_LINE) == 1, logs
        assert "journal epoch 3" in await second.wait_line(ACTIVE_LINE, timeout=1)
        assert cluster.active() == [second], logs
        # the fenced commit's callers were never told success: nothing answered is lost
        assert_clean(cluster.audit(tally), REQUESTS, logs)
        assert assert_epochs_in_order(cluster) == [1, 3], "nothing was written at epoch 2"


async def test_a_second_serve_on_one_sqlite_file_is_refused_and_the_first_keeps_answering(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite"
    async with ha_cluster(("a",), journal=str(path)) as cluster:
        first = cluster.serves[0]
        second = await cluster.add("b", ready=False)
        code = await second.wait_exit(30)
        logs = cluster.logs()
        assert code != 0, logs
        refused = await second.wait_line("failed to start", timeout=1)
        assert str(path) in refused, refused
        assert f"is in use by pid {first.process.pid} on " in refused, refused
        assert second.count("ready as standby") == 0, logs
        # the first still owns the file and answers (the hosts went through it already)
        assert first.process.returncode is None, logs
        assert cluster.active() == [first], logs
        tally = Tally()
        requests = HOSTS * SLOTS + 5
        await place_all(cluster.client, [spec(i) for i in range(requests)], tally, pause=0)
        assert first.process.returncode is None, cluster.logs()
        assert len(tally.hosts) == HOSTS * SLOTS
        assert len(tally.no_valid_host) == requests - HOSTS * SLOTS
        assert all(host.startswith("h") for hosts in tally.hosts.values() for host in hosts)
        await first.stop()  # lets go of the file, so that it can be read
        assert await first.wait_exit() == 0
        assert_clean(cluster.audit(tally), requests, cluster.logs())
