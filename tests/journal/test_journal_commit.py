"""Group commit: one transaction per batch, answers only once durable, in order."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable
from contextlib import closing
from pathlib import Path

import pytest
from journal_workload import report

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.actor import Envelope
from actorsched.core.image import CoreImage
from actorsched.journal import JournalError, SqliteJournal

CONFIG = SchedulerConfig(max_io_ops_per_host=10_000, max_instances_per_host=10_000)


def _spec(uuid: str) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=64, vcpus=1, disk_gb=1)


async def _hosts(s: Scheduler, count: int = 8) -> None:
    await s.update_hosts([report(f"h{i}", 1, vcpus=64) for i in range(count)])


async def test_many_concurrent_callers_share_transactions(tmp_path: Path) -> None:
    async with Scheduler(CONFIG, journal=tmp_path / "j.sqlite") as s:
        await _hosts(s)
        journal = s.journal
        assert journal is not None
        before = journal.stats.transactions
        await asyncio.gather(*(s.select_destinations(_spec(f"vm-{i}")) for i in range(300)))
        assert journal.stats.records == 8 + 300  # the host reports, then one per claim
        transactions = journal.stats.transactions - before
        assert 1 <= transactions < 300 / 10


async def test_a_transaction_of_more_records_than_one_insert_takes(tmp_path: Path) -> None:
    # 450 reports in one batch: three INSERT statements (199 + 199 + 52 rows), one commit
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=SqliteJournal(path)) as s:
        journal = s.journal
        assert journal is not None
        before = journal.stats.transactions
        await _hosts(s, 450)
        assert journal.stats.transactions - before == 1
        assert journal.stats.records == 450
        with closing(sqlite3.connect(path)) as reader:
            seqs = [row[0] for row in reader.execute("SELECT seq FROM records ORDER BY seq")]
        assert seqs == list(range(1, 451))
        digest = s.core.digest()
    async with Scheduler(CONFIG, journal=path) as again:
        assert again.host_count == 450
        assert again.core.digest() == digest


class GatedSink:
    """Wraps a journal and holds every commit until ``gate`` is set."""

    def __init__(self, inner: SqliteJournal) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.handed = 0

    def submit(self, batch: list[Envelope]) -> Awaitable[None]:
        durable = self.inner.submit(batch)
        self.handed += 1

        async def wait() -> None:
            await self.gate.wait()
            await durable

        return wait()


async def test_callers_are_answered_only_after_their_batch_is_durable(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "j.sqlite")
    sink = GatedSink(journal)
    s = Scheduler(CONFIG.model_copy(update={"max_batch": 4}), sink=sink)
    journal.open(s.core)
    journal.start()
    await s.start()
    try:
        hosts = asyncio.ensure_future(_hosts(s))
        calls = [asyncio.ensure_future(s.select_destinations(_spec(f"vm-{i}"))) for i in range(20)]
        reads = asyncio.ensure_future(s.host_states())  # changes nothing, still waits
        # the owner goes on applying batch after batch while none is committed
        for _ in range(2_000):  # up to 10 s
            if s.claim_count == 20 and sink.handed >= 5:
                break
            await asyncio.sleep(0.005)
        assert s.claim_count == 20
        assert sink.handed >= 5
        assert not hosts.done()
        assert not any(call.done() for call in calls)
        assert not reads.done()
        sink.gate.set()
        await hosts
        await asyncio.gather(*calls)
        assert len(await reads) == 8
    finally:
        sink.gate.set()
        await s.stop()
        await journal.close()


async def test_an_answered_claim_is_already_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=path) as s:
        await _hosts(s)

        async def place_and_look(uuid: str) -> int:
            await s.select_destinations(_spec(uuid))
            with closing(sqlite3.connect(path)) as reader:
                row = reader.execute(
                    "SELECT count(*) FROM records WHERE kind = 'claim' AND body LIKE ?",
                    (f'%"{uuid}"%',),
                ).fetchone()
            return int(row[0])

        found = await asyncio.gather(*(place_and_look(f"vm-{i}") for i in range(40)))
    assert found == [1] * 40


async def test_a_failed_write_fails_its_callers_and_every_later_call(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=path) as s:
        await _hosts(s)
        with closing(sqlite3.connect(path)) as other, other:
            other.execute("DROP TABLE records")  # the next write cannot land
        with pytest.raises(JournalError, match="could not write journal"):
            await s.select_destinations(_spec("vm-1"))
        with pytest.raises(JournalError, match="could not write journal"):
            await s.release("vm-1")


async def test_snapshots_keep_the_journal_short(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=SqliteJournal(path, snapshot_every=25)) as s:
        await _hosts(s)
        for round_ in range(10):
            uuids = [f"vm-{round_}-{i}" for i in range(30)]
            await asyncio.gather(*(s.select_destinations(_spec(u)) for u in uuids))
            await asyncio.gather(*(s.release(u) for u in uuids[:20]))
        journal = s.journal
        assert journal is not None
        assert journal.stats.records == 8 + 10 * 50
        assert journal.stats.snapshots >= 10
        with closing(sqlite3.connect(path)) as reader:
            left = reader.execute("SELECT count(*) FROM records").fetchone()[0]
        assert left < 25 + SchedulerConfig().max_batch
        digest = s.core.digest()
    async with Scheduler(CONFIG, journal=path) as again:
        assert again.core.digest() == digest
        assert again.claim_count == 100


class HeldSnapshots(SqliteJournal):
    """A journal whose snapshot writes wait until ``release`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, snapshot_every=10)
        self.release = threading.Event()
        self.started = threading.Event()

    def _snapshot(self, image: CoreImage, seq: int, term: int) -> None:
        self.started.set()
        assert self.release.wait(30), "the test never released the snapshot"
        super()._snapshot(image, seq, term)


async def test_callers_do_not_wait_for_a_snapshot(tmp_path: Path) -> None:
    journal = HeldSnapshots(tmp_path / "j.sqlite")
    async with Scheduler(CONFIG, journal=journal) as s:
        await _hosts(s)  # 8 records
        await s.select_destinations(_spec("vm-a"))
        await s.select_destinations(_spec("vm-b"))  # the 10th record: a snapshot is due
        assert await asyncio.to_thread(journal.started.wait, 10)
        # vm-b made the snapshot due and has its answer while the writer is
        # still inside that snapshot: answers wait for records, not snapshots.
        # The next batch's records queue behind the snapshot on the one writer.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(s.select_destinations(_spec("vm-c")), 0.3)
        assert journal.stats.snapshots == 0
        journal.release.set()
        assert (await s.select_destinations(_spec("vm-c")))[0].instance_uuid == "vm-c"
        digest = s.core.digest()
    assert journal.stats.snapshots >= 1
    async with Scheduler(CONFIG, journal=tmp_path / "j.sqlite") as again:
        assert again.core.digest() == digest
        assert again.journal is not None
        assert again.journal.recovery is not None
        assert again.journal.recovery.snapshot_seq >= 10


async def test_a_failed_snapshot_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import actorsched.journal.base as journal_base

    def broken(image: CoreImage) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(journal_base, "encode", broken)
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=SqliteJournal(path, snapshot_every=5)) as s:
        await _hosts(s)
        placed = [await s.select_destinations(_spec(f"vm-{i}")) for i in range(12)]
        assert len(placed) == 12  # every call answered: a snapshot is not needed for that
        journal = s.journal
        assert journal is not None
        assert journal.stats.snapshots == 0
        assert journal.stats.records == 8 + 12
        digest = s.core.digest()
    assert "could not write a snapshot" in caplog.text
    assert "disk full" in caplog.text
    monkeypatch.undo()
    async with Scheduler(CONFIG, journal=path) as again:  # every record replays
        assert again.journal is not None
        assert again.journal.recovery is not None
        assert again.journal.recovery.snapshot_seq == 0
        assert again.journal.recovery.replayed == 8 + 12
        assert again.core.digest() == digest


async def test_sink_and_journal_together_are_refused(tmp_path: Path) -> None:
    from actorsched import InvalidRequest

    with pytest.raises(InvalidRequest, match="not both"):
        Scheduler(CONFIG, sink=SqliteJournal(tmp_path / "a.sqlite"), journal=tmp_path / "b.sqlite")
