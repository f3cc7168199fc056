"""Opening a journal: foreign, damaged, newer or cut-off files."""

from __future__ import annotations

import shutil
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import pytest
from journal_workload import report

from actorsched import RequestSpec, Scheduler
from actorsched.core import SchedulerCore
from actorsched.journal import JournalError, SqliteJournal


def _open(path: Path) -> SchedulerCore:
    core = SchedulerCore()
    journal = SqliteJournal(path)
    journal.open(core)
    journal.close_now()
    return core


async def _small_journal(path: Path) -> str:
    async with Scheduler(journal=SqliteJournal(path, snapshot_every=1_000)) as s:
        for i in range(4):
            await s.update_host(report(f"h{i}", 1))
        await s.select_destinations(
            RequestSpec(instance_uuids=["a", "b"], memory_mb=512, vcpus=1, disk_gb=1)
        )
        journal = s.journal
        assert journal is not None
        journal._since_snapshot = 0  # keep the records: no closing snapshot
        return s.core.digest()


def _sql(path: Path, statement: str) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(statement)


async def test_a_missing_or_empty_file_starts_a_new_journal(tmp_path: Path) -> None:
    (tmp_path / "empty.sqlite").touch()
    for name in ("new.sqlite", "empty.sqlite"):
        async with Scheduler(journal=tmp_path / name) as s:
            assert s.journal is not None
            assert s.journal.recovery is not None
            assert s.journal.recovery.created
            assert s.host_count == 0


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are my notes, not a journal\n" * 200)
    with pytest.raises(JournalError, match="not a readable actorsched journal"):
        _open(path)
    assert path.read_bytes().startswith(b"these are my notes")  # left as it was


def test_another_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    _sql(path, "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    with pytest.raises(JournalError, match="not an actorsched journal"):
        _open(path)


async def test_a_scheduler_on_a_foreign_file_does_not_start(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    _sql(path, "CREATE TABLE users (id INTEGER PRIMARY KEY)")
    s = Scheduler(journal=path)
    with pytest.raises(JournalError, match="not an actorsched journal"):
        await s.start()
    await s.stop()


async def test_wrong_magic_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    await _small_journal(path)
    _sql(path, "UPDATE meta SET value = 'something-else' WHERE key = 'magic'")
    with pytest.raises(JournalError, match="magic"):
        _open(path)


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    await _small_journal(path)
    _sql(path, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(JournalError, match="schema '99'"):
        _open(path)


async def test_a_damaged_record_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    await _small_journal(path)
    _sql(path, "UPDATE records SET body = replace(body, 'h1', 'h9') WHERE kind = 'report'")
    with pytest.raises(JournalError, match="CRC"):
        _open(path)


async def test_a_damaged_snapshot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(journal=path) as s:
        await s.update_host(report("h1", 1))
    _sql(path, "UPDATE snapshot SET body = replace(body, 'h1', 'h2')")
    with pytest.raises(JournalError, match="checksum"):
        _open(path)


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.1])
async def test_a_truncated_file_is_refused(tmp_path: Path, keep: float) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(journal=SqliteJournal(path, snapshot_every=10**9)) as s:
        for i in range(100):
            await s.update_host(report(f"h{i}", 1, instances=[f"vm-{i}-{j}" for j in range(30)]))
    _truncate(path, keep)
    with pytest.raises(JournalError):
        _open(path)


async def test_a_write_cut_off_mid_way_recovers_a_whole_commit(tmp_path: Path) -> None:
    # copy the file and its WAL while the scheduler runs, then cut the WAL at
    # many points: each cut recovers the state after some whole commit
    path = tmp_path / "j.sqlite"
    digests = [SchedulerCore().digest()]
    async with Scheduler(journal=SqliteJournal(path, snapshot_every=10**9)) as s:
        for i in range(12):
            await s.update_host(report(f"h{i % 4}", i + 1, memory_mb_used=i * 100))
            digests.append(s.core.digest())
            await s.select_destinations(
                RequestSpec(instance_uuids=[f"vm-{i}"], memory_mb=256, vcpus=1, disk_gb=1)
            )
            digests.append(s.core.digest())
        copy = tmp_path / "copy.sqlite"
        shutil.copy(path, copy)
        wal = _read(Path(f"{path}-wal"))
    assert len(wal) > 10_000, "the test needs the commits to be in the WAL"
    seen = set()
    for cut in [*range(0, len(wal), max(1, len(wal) // 40)), len(wal)]:
        digest = _recover_cut(copy, wal[:cut], tmp_path / f"cut{cut}.sqlite")
        assert digest in digests, f"cut at {cut} of {len(wal)} bytes gave a state never seen"
        seen.add(digests.index(digest))
        if cut == len(wal):
            assert digest == digests[-1]
    assert len(seen) > 5  # the cuts landed after different commits


def _read(path: Path) -> bytes:
    return path.read_bytes()


def _truncate(path: Path, keep: float) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(int(size * keep))


def _recover_cut(db: Path, wal: bytes, trial: Path) -> str:
    shutil.copy(db, trial)
    Path(f"{trial}-wal").write_bytes(wal)
    return _open(trial).digest()


def _modes(folder: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir() if p.is_file()}


async def test_journal_files_are_for_the_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(journal=path) as s:
        await s.update_host(report("h1", 1))
        modes = _modes(tmp_path)
    assert modes == {
        "j.sqlite": 0o600,
        "j.sqlite-wal": 0o600,
        "j.sqlite-shm": 0o600,
        "j.sqlite.lock": 0o600,
        "j.sqlite.mark": 0o600,
    }
