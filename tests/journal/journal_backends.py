"""The two journal backends behind one face, for the tests that every backend must pass.

Not a conftest: test modules import :func:`backends` and wrap it in a
fixture. Each PostgreSQL backend gets a shard of its own in the shared
database ``test`` and deletes its rows afterwards.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from actorsched.journal import Journal, PostgresJournal, SqliteJournal

PG_URL = os.environ.get("ACTORSCHED_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgresql")


def pg_execute(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the test database (autocommit); its rows, if any."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


@dataclass
class Backend:
    """Makes journals of one kind on one store, and damages that store on purpose."""

    kind: str
    where: str  # a path (sqlite) or a shard name (postgresql)
    made: list[Journal] = field(default_factory=list)

    def journal(self, snapshot_every: int = 20_000) -> Journal:
        made: Journal
        if self.kind == "sqlite":
            made = SqliteJournal(self.where, snapshot_every=snapshot_every)
        else:
            made = PostgresJournal(PG_URL, shard=self.where, snapshot_every=snapshot_every)
        self.made.append(made)
        return made

    def execute(self, sql_sqlite: str, sql_pg: str, params: tuple[Any, ...] = ()) -> None:
        if self.kind == "sqlite":
            with closing(sqlite3.connect(self.where)) as conn:
                conn.execute(sql_sqlite, params)
                conn.commit()
        else:
            pg_execute(sql_pg, (*params, self.where))

    def damage_record(self, seq: int) -> None:
        """Change one record's body without its CRC."""
        self.execute(
            "UPDATE records SET body = body || ' ' WHERE seq = ?",
            "UPDATE actorsched_records SET body = body || ' ' WHERE seq = %s AND shard = %s",
            (seq,),
        )

    def drop_record(self, seq: int) -> None:
        self.execute(
            "DELETE FROM records WHERE seq = ?",
            "DELETE FROM actorsched_records WHERE seq = %s AND shard = %s",
            (seq,),
        )

    def damage_snapshot(self) -> None:
        self.execute(
            "UPDATE snapshot SET body = body || ' '",
            "UPDATE actorsched_snapshots SET body = body || ' ' WHERE shard = %s",
        )

    def record_seqs(self) -> list[int]:
        if self.kind == "sqlite":
            with closing(sqlite3.connect(self.where)) as conn:
                return [r[0] for r in conn.execute("SELECT seq FROM records ORDER BY seq")]
        rows = pg_execute(
            "SELECT seq FROM actorsched_records WHERE shard = %s ORDER BY seq", (self.where,)
        )
        return [int(r[0]) for r in rows]

    def cleanup(self) -> None:
        if self.kind == "postgresql":
            for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
                pg_execute(f"DELETE FROM {table} WHERE shard = %s", (self.where,))


def make_backend(kind: str, tmp_path: Path) -> Backend:
    if kind == "sqlite":
        return Backend(kind, str(tmp_path / "journal.sqlite"))
    return Backend(kind, f"test-{uuid.uuid4().hex[:12]}")
