"""No silent journal loss at start: a journal that does not exist is made only when asked.

Before, ``serve --journal claims.sqllite`` (a typo) or ``--shard cell-1`` (for
``cell1``) started an empty scheduler, and every claim of the real journal
was as good as lost to the callers. Now serve makes a journal only with
``--create-journal`` (or its default state file, on first use); otherwise it
exits 2 with one line naming what is missing, and makes nothing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import code_under_test_env
from journal_backends import PG_URL, pg_execute

from actorsched import Scheduler
from actorsched.journal import JournalMissing, PostgresJournal, SqliteJournal


@pytest.fixture
def shard() -> Iterator[str]:
    name = f"test-create-{uuid.uuid4().hex[:12]}"
    yield name
    for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
        pg_execute(f"DELETE FROM {table} WHERE shard = %s", (name,))


async def test_a_missing_sqlite_journal_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    path = tmp_path / "claims.sqlite"
    with pytest.raises(JournalMissing, match=rf"journal {path} does not exist.*--create-journal"):
        await Scheduler(journal=SqliteJournal(path, create=False)).start()
    assert os.listdir(tmp_path) == []  # no file, no lock file
    async with Scheduler(journal=SqliteJournal(path, create=True)):
        pass
    # once made, it opens without being asked again
    async with Scheduler(journal=SqliteJournal(path, create=False)):
        pass


async def test_a_missing_postgresql_shard_is_refused_and_nothing_is_made(shard: str) -> None:
    with pytest.raises(JournalMissing, match=rf"holds no shard '{shard}'.*--create-journal"):
        await Scheduler(journal=PostgresJournal(PG_URL, shard=shard, create=False)).start()
    assert pg_execute("SELECT 1 FROM actorsched_shards WHERE shard = %s", (shard,)) == []
    async with Scheduler(journal=PostgresJournal(PG_URL, shard=shard)):
        pass
    async with Scheduler(journal=PostgresJournal(PG_URL, shard=shard, create=False)):
        pass


async def _serve(*argv: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "actorsched.cli",
        "serve",
        "--amqp-url",
        "amqp://guest:guest@127.0.0.1:1/",  # never reached: the journal comes first
        "--connect-timeout",
        "0",
        *argv,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=code_under_test_env(),
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, err.decode()


async def test_serve_with_a_mistyped_journal_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "state" / "claims.sqllite"
    code, err = await _serve("--journal", str(path))
    assert code == 2, err
    [line] = [line for line in err.splitlines() if "ERROR" in line]
    assert f"journal {path} does not exist" in line
    assert not (tmp_path / "state").exists(), "not even its directory is made"
    # asked to, serve makes it (then fails on the unreachable broker: exit 1)
    code, err = await _serve("--journal", str(path), "--create-journal")
    assert code == 1, err
    assert path.exists()
