"""A damaged write-ahead log after an unclean stop is refused, never recovered with fewer claims.

The state on disk after ``kill -9`` is the database, its ``-wal`` and the
mark, as they are while the journal is open: the test copies them then
(the writer idle, every answer given), damages the copy's ``-wal`` and opens it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from journal_workload import report

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.core import SchedulerCore
from actorsched.journal import JournalError, SqliteJournal
from actorsched.journal.sqlite import MARK_XATTR

CONFIG = SchedulerConfig(max_io_ops_per_host=10_000, max_instances_per_host=10_000)
CLAIMS = 50


async def _crash_image(tmp_path: Path) -> Path:
    """The files of a journal holding CLAIMS acknowledged claims, as kill -9 leaves them."""
    live = tmp_path / "live"
    live.mkdir()
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    journal = SqliteJournal(live / "j.sqlite", snapshot_every=10**9)
    async with Scheduler(CONFIG, journal=journal) as s:
        await s.update_hosts([report(f"h{i}", 1, vcpus=64) for i in range(4)])
        for i in range(CLAIMS):
            spec = RequestSpec(instance_uuids=[f"vm-{i}"], memory_mb=64, vcpus=1, disk_gb=1)
            await s.select_destinations(spec)
        for name in ("j.sqlite", "j.sqlite-wal", "j.sqlite.mark"):
            shutil.copy2(live / name, crashed / name)  # with the file's attributes
        journal._since_snapshot = 0  # the live one closes without a snapshot; no matter
    return crashed / "j.sqlite"


def _open(path: Path) -> SchedulerCore:
    core = SchedulerCore(CONFIG)
    journal = SqliteJournal(path)
    journal.open(core)
    journal.close_now()
    return core


async def test_an_undamaged_crash_image_recovers_every_claim(tmp_path: Path) -> None:
    path = await _crash_image(tmp_path)
    assert len(_open(path).claims()) == CLAIMS


def _delete(wal: Path) -> None:
    wal.unlink()


def _truncate(wal: Path) -> None:
    with open(wal, "r+b") as f:
        f.truncate(wal.stat().st_size // 2)


def _flip(wal: Path) -> None:
    data = bytearray(wal.read_bytes())
    data[len(data) * 3 // 4] ^= 0xFF  # a byte inside a late frame: its checksum fails
    wal.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_delete, _truncate, _flip], ids=["deleted", "cut", "flipped"])
async def test_a_damaged_wal_is_refused_naming_the_file(tmp_path: Path, damage: object) -> None:
    path = await _crash_image(tmp_path)
    assert callable(damage)
    damage(path.with_name("j.sqlite-wal"))
    with pytest.raises(JournalError, match=rf"journal {path} holds records up to \d+, but"):
        _open(path)


def _attributes_kept(where: Path) -> bool:
    probe = where / "probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, MARK_XATTR, b"x")
    except OSError:
        return False
    return True


@pytest.mark.parametrize("damage", [_delete, _truncate], ids=["deleted", "cut"])
async def test_a_damaged_wal_with_its_mark_file_deleted_is_refused_too(
    tmp_path: Path, damage: object
) -> None:
    # the second copy of the mark, an attribute of the database file, still says
    # how far the journal was committed
    if not _attributes_kept(tmp_path):
        pytest.skip(f"{tmp_path}'s filesystem keeps no user extended attributes")
    path = await _crash_image(tmp_path)
    assert callable(damage)
    damage(path.with_name("j.sqlite-wal"))
    path.with_name("j.sqlite.mark").unlink()
    with pytest.raises(JournalError, match=rf"{MARK_XATTR} attribute says so"):
        _open(path)


async def test_a_new_journal_at_the_same_path_is_not_refused_by_an_old_mark(
    tmp_path: Path,
) -> None:
    path = await _crash_image(tmp_path)
    for name in ("j.sqlite", "j.sqlite-wal"):
        path.with_name(name).unlink()  # the operator starts over, the mark left behind
    assert _open(path).claims() == {}
