"""One writer per journal: SQLite's file lock, PostgreSQL's epoch, and a standby that follows."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from journal_backends import PG_URL, pg_execute
from journal_workload import report

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.core import SchedulerCore
from actorsched.core.image import CoreImage
from actorsched.errors import NotActive
from actorsched.journal import (
    JournalError,
    JournalFenced,
    JournalGap,
    JournalLocked,
    JournalUnavailable,
    PostgresJournal,
    SqliteJournal,
)
from actorsched.journal.base import StoredSnapshot

CONFIG = SchedulerConfig(max_io_ops_per_host=10_000, max_instances_per_host=10_000)


def _spec(uuid_: str) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid_], memory_mb=64, vcpus=1, disk_gb=1)


@pytest.fixture
def shard() -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
        pg_execute(f"DELETE FROM {table} WHERE shard = %s", (name,))


def _pg(shard: str, snapshot_every: int = 20_000) -> PostgresJournal:
    return PostgresJournal(PG_URL, shard=shard, snapshot_every=snapshot_every)


# -- SQLite: one process per file ------------------------------------------------


async def test_a_second_journal_on_one_sqlite_file_is_refused_and_names_the_holder(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=path) as first:
        await first.update_host(report("h1", 1))
        second = Scheduler(CONFIG, journal=path)
        with pytest.raises(JournalLocked, match=rf"{path} is in use by pid {os.getpid()}"):
            await second.start()
        # the first keeps answering, and writing
        [selection] = await first.select_destinations(_spec("vm-1"))
        assert selection.host == "h1"
    async with Scheduler(CONFIG, journal=path) as again:  # released on close
        assert again.claim_count == 1


# -- PostgreSQL: epochs --------------------------------------------------------------


async def test_a_second_owner_fences_the_first(shard: str) -> None:
    async with Scheduler(CONFIG, journal=_pg(shard)) as first:
        await first.update_host(report("h1", 1))
        await first.select_destinations(_spec("vm-1"))
        async with Scheduler(CONFIG, journal=_pg(shard)) as second:
            assert second.claim_count == 1, "the new owner starts from the journal"
            with pytest.raises(JournalFenced, match="was taken over: its epoch is 2"):
                await first.select_destinations(_spec("vm-2"))
            with pytest.raises(JournalFenced):  # and every later call
                await first.release("vm-1")
            await second.select_destinations(_spec("vm-3"))
    core = SchedulerCore(CONFIG)
    journal = _pg(shard)
    journal.open(core)
    journal.close_now()
    assert sorted(core.claims()) == ["vm-1", "vm-3"], "the deposed owner wrote nothing"


async def test_an_idle_owner_learns_of_a_takeover_from_its_own_check(shard: str) -> None:
    # no commit follows the takeover: the check of the shard's epoch finds it
    journal = PostgresJournal(PG_URL, shard=shard, owner_check_interval=0.2)
    told: list[JournalError] = []
    async with Scheduler(CONFIG, journal=journal) as first:
        journal.failure_listeners.append(told.append)
        await first.update_host(report("h1", 1))
        await asyncio.sleep(0.5)
        assert journal.failed is None, "its own epoch: nothing to tell"
        pg_execute(
            "UPDATE actorsched_shards SET epoch = epoch + 1, owner = 'operator' WHERE shard = %s",
            (shard,),
        )
        for _ in range(40):
            if told:
                break
            await asyncio.sleep(0.05)
        assert [type(e) for e in told] == [JournalFenced]
        assert "its epoch is 2 (operator)" in str(told[0])
        assert journal.failed is told[0]


async def test_a_stepped_down_owner_does_not_check_a_term_it_gave_up(shard: str) -> None:
    journal = PostgresJournal(PG_URL, shard=shard, owner_check_interval=0.1)
    async with Scheduler(CONFIG, journal=journal) as first:
        await first.update_host(report("h1", 1))
        await first.step_down()
        async with Scheduler(CONFIG, journal=_pg(shard)) as second:  # takes the shard
            await second.update_host(report("h2", 1))
            await asyncio.sleep(0.5)
            assert journal.failed is None, "a standby follows; its old term is nobody's concern"


async def test_an_epoch_stolen_by_hand_fails_the_owners_next_commit(shard: str) -> None:
    async with Scheduler(CONFIG, journal=_pg(shard)) as s:
        await s.update_host(report("h1", 1))
        pg_execute(
            "UPDATE actorsched_shards SET epoch = epoch + 1, owner = 'operator' WHERE shard = %s",
            (shard,),
        )
        with pytest.raises(JournalFenced, match=r"its epoch is 2 \(operator\)"):
            await s.select_destinations(_spec("vm-1"))
        assert s.journal is not None
        assert isinstance(s.journal.failed, JournalFenced)
    rows = pg_execute("SELECT count(*) FROM actorsched_records WHERE shard = %s", (shard,))
    assert rows == [(1,)], "only the host report is in the journal"


async def test_a_killed_database_connection_loses_no_commit(shard: str) -> None:
    async with Scheduler(CONFIG, journal=_pg(shard)) as s:
        await s.update_hosts([report(f"h{i}", 1, vcpus=64) for i in range(4)])
        kills = 0

        async def killer() -> None:
            nonlocal kills
            for _ in range(5):
                await asyncio.sleep(0.05)
                kills += len(
                    pg_execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE application_name = %s",
                        (f"actorsched {shard}",),
                    )
                )

        task = asyncio.create_task(killer())
        for round_ in range(30):
            await asyncio.gather(
                *(s.select_destinations(_spec(f"vm-{round_}-{i}")) for i in range(10))
            )
            await asyncio.sleep(0.01)
        await task
        assert kills >= 3
        assert s.journal is not None
        assert s.journal.failed is None
        digest = s.core.digest()
    core = SchedulerCore(CONFIG)
    journal = _pg(shard)
    journal.open(core)
    journal.close_now()
    assert len(core.claims()) == 300
    assert core.digest() == digest


# -- a standby follows the journal -------------------------------------------------------


def _has_claims(scheduler: Scheduler, count: int) -> bool:
    return scheduler.claim_count == count


async def _wait_for(predicate: Callable[[], bool]) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not within 5 s")


async def test_a_standby_follows_then_takes_over_with_the_same_state(shard: str) -> None:
    active = Scheduler(CONFIG, journal=_pg(shard, snapshot_every=7))
    standby = Scheduler(CONFIG, journal=_pg(shard, snapshot_every=7), follow_interval=0.02)
    await active.start()
    await standby.follow()
    try:
        assert standby.role == "standby"
        with pytest.raises(NotActive):
            await standby.select_destinations(_spec("vm-x"))
        await active.update_hosts([report(f"h{i}", 1, vcpus=64) for i in range(4)])
        for i in range(40):  # several snapshots pass while the standby follows
            await active.select_destinations(_spec(f"vm-{i}"))
            if i % 5 == 4:  # never more than a snapshot's worth behind
                await _wait_for(functools.partial(_has_claims, standby, i + 1))
        assert standby.core.digest() == active.core.digest()
        epoch = await standby.activate()
        assert epoch == 2
        assert standby.role != "standby"
        with pytest.raises(JournalFenced):
            await active.select_destinations(_spec("vm-late"))
        [selection] = await standby.select_destinations(_spec("vm-40"))
        assert selection.host.startswith("h")
        assert standby.claim_count == 41
    finally:
        await active.stop()
        await standby.stop()


async def test_a_standby_that_missed_dropped_records_rebuilds_from_the_snapshot(
    shard: str,
) -> None:
    active = Scheduler(CONFIG, journal=_pg(shard, snapshot_every=3))
    standby = Scheduler(CONFIG, journal=_pg(shard), follow_interval=3600)
    await active.start()
    await active.update_host(report("h1", 1, vcpus=64))
    await standby.follow()  # reads once, then sleeps an hour
    try:
        for i in range(20):  # snapshots every 3 records drop what the standby has not read
            await active.select_destinations(_spec(f"vm-{i}"))
        await active.step_down()  # the active stops answering; its writes are all durable
        behind = standby.core
        with pytest.raises(JournalGap):
            standby.journal.catch_up(behind)  # type: ignore[union-attr]
        await standby.activate()
        assert standby.core is not behind, "a new state, rebuilt from the snapshot"
        assert standby.core.digest() == active.core.digest()
        assert standby.claim_count == 20
    finally:
        await active.stop()
        await standby.stop()


async def test_a_standby_falling_behind_while_following_keeps_up_by_rebuilding(
    shard: str,
) -> None:
    active = Scheduler(CONFIG, journal=_pg(shard, snapshot_every=3))
    standby = Scheduler(CONFIG, journal=_pg(shard), follow_interval=0.5)
    await active.start()
    await standby.follow()
    try:
        await active.update_host(report("h1", 1, vcpus=64))
        for i in range(30):  # far more than a snapshot's worth between two reads
            await active.select_destinations(_spec(f"vm-{i}"))
        await _wait_for(functools.partial(_has_claims, standby, 30))
        assert standby.core.digest() == active.core.digest()
    finally:
        await active.stop()
        await standby.stop()


async def test_step_down_then_activate_again_catches_up(shard: str) -> None:
    a = Scheduler(CONFIG, journal=_pg(shard))
    b = Scheduler(CONFIG, journal=_pg(shard), follow_interval=0.02)
    await a.start()
    await b.follow()
    try:
        await a.update_host(report("h1", 1, vcpus=64))
        await a.step_down()
        assert a.role == "standby"
        assert await b.activate() == 2
        await b.select_destinations(_spec("vm-1"))
        await b.step_down()
        assert await a.activate() == 3
        assert a.claim_count == 1, "a caught up with what b wrote"
        await a.select_destinations(_spec("vm-2"))
    finally:
        await a.stop()
        await b.stop()


async def test_sqlite_scheduler_steps_down_and_back(tmp_path: Path) -> None:
    s = Scheduler(CONFIG, journal=SqliteJournal(tmp_path / "j.sqlite"))
    await s.start()
    try:
        await s.update_host(report("h1", 1))
        await s.step_down()
        with pytest.raises(NotActive):
            await s.release("vm-1")
        assert await s.activate() == 1
        await s.select_destinations(_spec("vm-1"))
    finally:
        await s.stop()


async def test_a_standby_that_never_took_over_writes_no_snapshot_on_stop(
    shard: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with Scheduler(CONFIG, journal=_pg(shard)) as active:
        await active.update_host(report("h1", 1, vcpus=64))
        standby = Scheduler(CONFIG, journal=_pg(shard), follow_interval=0.02)
        await standby.follow()
        await active.select_destinations(_spec("vm-1"))
        await _wait_for(functools.partial(_has_claims, standby, 1))
        await standby.stop()  # it followed two records, but they are not its to snapshot
        snapshots = pg_execute(
            "SELECT count(*) FROM actorsched_snapshots WHERE shard = %s", (shard,)
        )
        assert snapshots == [(0,)]
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    snapshots = pg_execute("SELECT seq FROM actorsched_snapshots WHERE shard = %s", (shard,))
    assert snapshots == [(2,)], "the owner's closing snapshot"


async def test_takeover_waits_for_a_catch_up_still_running_in_its_thread(shard: str) -> None:
    # cancelling the follower would leave its worker thread applying records to the
    # core while activate() acquires and catches up on the same core
    standby = Scheduler(CONFIG, journal=_pg(shard), follow_interval=0.01)
    await standby.follow()
    journal = standby.journal
    assert journal is not None
    events: list[str] = []
    started = threading.Event()
    real_catch_up, real_acquire = journal.catch_up, journal.acquire

    def slow_catch_up(core: SchedulerCore) -> int:
        events.append("catch_up begins")
        started.set()
        time.sleep(0.3)
        applied = real_catch_up(core)
        events.append("catch_up ends")
        return applied

    def acquire() -> int:
        events.append("acquire")
        return real_acquire()

    journal.catch_up = slow_catch_up  # type: ignore[method-assign]
    journal.acquire = acquire  # type: ignore[method-assign]
    try:
        await asyncio.to_thread(started.wait, 5)
        await standby.activate()
        assert events.index("acquire") > events.index("catch_up ends"), events
    finally:
        await standby.stop()


def test_a_reload_cut_off_leaves_no_half_state_to_follow(shard: str) -> None:
    journal = _pg(shard)
    old = SchedulerCore(CONFIG)
    journal.open(old)
    try:

        def cut_off(core: SchedulerCore) -> int:
            raise JournalUnavailable("the database went away mid-reload")

        journal._replay = cut_off  # type: ignore[method-assign]
        with pytest.raises(JournalUnavailable):
            journal.reload(SchedulerCore(CONFIG))
        del journal._replay
        with pytest.raises(JournalGap, match="last reload did not finish"):
            journal.catch_up(old)  # never onto the old state from the new state's position
        fresh = SchedulerCore(CONFIG)
        journal.reload(fresh)
        assert journal.catch_up(fresh) == 0
    finally:
        journal.close_now()


def _stored_snapshot_seq(shard: str) -> list[tuple[int, ...]]:
    return pg_execute("SELECT seq FROM actorsched_snapshots WHERE shard = %s", (shard,))


def test_a_snapshot_of_an_earlier_epoch_is_never_written(shard: str) -> None:
    # the same process owned epoch 1, then 3: a snapshot captured at 1 must not land
    journal = _pg(shard)
    journal.open(SchedulerCore(CONFIG))
    try:
        assert journal.acquire() == 1
        body = '{"format":2}'
        digest = hashlib.sha256(body.encode()).hexdigest()
        journal._write_snapshot(StoredSnapshot(10, body, digest), 1)
        pg_execute("UPDATE actorsched_shards SET epoch = 2 WHERE shard = %s", (shard,))
        assert journal.acquire() == 3
        with pytest.raises(JournalError, match="taken at epoch 1 and the shard is at epoch 3"):
            journal._write_snapshot(StoredSnapshot(20, body, digest), 1)
        with pytest.raises(JournalError, match="not newer"):  # and never an older seq
            journal._write_snapshot(StoredSnapshot(5, body, digest), 3)
        assert _stored_snapshot_seq(shard) == [(10,)]
    finally:
        journal.close_now()


def test_the_takeover_bump_is_not_part_of_a_transaction_open_on_the_writer(
    shard: str,
) -> None:
    journal = _pg(shard)
    journal.open(SchedulerCore(CONFIG))
    try:
        writer = journal._write_conn()
        writer.execute("BEGIN")  # as a snapshot of the last term would hold it
        writer.execute("SELECT 1")
        assert journal.acquire() == 1
        writer.execute("ROLLBACK")
        assert pg_execute("SELECT epoch FROM actorsched_shards WHERE shard = %s", (shard,)) == [
            (1,)
        ], "the epoch stands whatever the writer's transaction did"
    finally:
        journal.close_now()


async def test_records_missing_below_the_committed_mark_refuse_to_start(shard: str) -> None:
    journal = _pg(shard)
    async with Scheduler(CONFIG, journal=journal) as s:
        await s.update_host(report("h1", 1, vcpus=64))
        for i in range(5):
            await s.select_destinations(_spec(f"vm-{i}"))
        journal._since_snapshot = 0  # no closing snapshot: the records stay
    pg_execute("DELETE FROM actorsched_records WHERE shard = %s AND seq > 3", (shard,))
    with pytest.raises(JournalError, match="replays to record 3, but records up to 6"):
        _pg(shard).open(SchedulerCore(CONFIG))


async def test_step_down_waits_for_a_snapshot_of_its_term(
    shard: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import actorsched.journal.base as journal_base
    from actorsched.journal.snapshot import encode as real_encode

    release = threading.Event()

    def slow_encode(image: CoreImage) -> str:
        assert release.wait(10)
        return real_encode(image)

    s = Scheduler(CONFIG, journal=_pg(shard, snapshot_every=3))
    await s.start()
    try:
        monkeypatch.setattr(journal_base, "encode", slow_encode)
        await s.update_hosts([report(f"h{i}", 1) for i in range(3)])  # a snapshot is due
        stepping = asyncio.ensure_future(s.step_down())
        await asyncio.sleep(0.3)
        assert not stepping.done(), "stepped down with its snapshot still to write"
        release.set()
        await asyncio.wait_for(stepping, 10)
        assert _stored_snapshot_seq(shard) == [(3,)]
    finally:
        release.set()
        await s.stop()
