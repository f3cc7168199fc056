"""The SQLite journal: group commit of every state change, and recovery on start.

Rules this module keeps:

* One writer thread owns all writing. The owner task hands it each applied
  batch (:meth:`SqliteJournal.submit`, a ``BatchSink``) and goes on with the
  next batch at once; the writer commits batches strictly in the order they
  were handed over, several at a time when they queue up (group commit),
  and only then are their callers answered. A batch that changed nothing
  still waits for the batches before it: no answer may depend on a change
  that is not yet durable.
* A snapshot is captured by the owner between two batches (a cheap copy,
  see ``core/snapshot.py``) every ``snapshot_every`` records. The writer
  writes it in a transaction of its own once the records up to it are
  committed and their callers answered (the batch that made it due does
  not wait for it; later batches queue behind it on the one writer), and
  deletes the records it covers: the file stays bounded and replay stays
  short. A snapshot that fails to write loses nothing (its records are
  still there); it is logged and the next one is tried as usual.
* On open, the file must be an actorsched journal (SQLite header
  ``application_id``, a ``meta`` table with the magic value and a schema
  version this code reads) and pass ``PRAGMA quick_check``; recovery then
  restores the snapshot and replays the records after it, each checked
  against its CRC. Any failure raises :class:`JournalError`: never an empty
  scheduler in place of a damaged one.
* WAL mode with ``synchronous=FULL`` by default: a commit is on disk before
  its callers hear of it, even if the power goes. A write cut off mid-way
  is discarded by SQLite on the next open, leaving the last whole commit.
* A failed write is final: every later batch fails too (fail-stop), since
  the state in memory already holds changes the file does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import queue
import sqlite3
import threading
import time
import zlib
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..actor import Envelope
from ..core import SchedulerCore
from ..core.snapshot import CoreImage, capture
from .errors import JournalError
from .records import Record, apply, count_changes, records_of
from .snapshot import encode, restore

__all__ = ["MAGIC", "SCHEMA_VERSION", "JournalStats", "Recovery", "SqliteJournal"]

log = logging.getLogger("actorsched.journal")

MAGIC = "actorsched-journal"
SCHEMA_VERSION = 1
APPLICATION_ID = 0x61637473  # "acts" in the SQLite header: tells a foreign file at once

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE records (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL,"
    " now REAL NOT NULL, body TEXT NOT NULL, crc INTEGER NOT NULL)",
    "CREATE TABLE snapshot (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL,"
    " taken_at REAL NOT NULL, body TEXT NOT NULL, sha256 TEXT NOT NULL)",
)


# Rows per INSERT statement: 5 parameters a row stays under SQLite's oldest
# limit of 999 parameters per statement.
_INSERT_CHUNK = 199


@functools.lru_cache(maxsize=256)
def _insert_sql(rows: int) -> str:
    return "INSERT INTO records (seq, kind, now, body, crc) VALUES " + ",".join(
        ["(?,?,?,?,?)"] * rows
    )


@dataclass(slots=True)
class JournalStats:
    """Counters of the writer; ``transactions`` < ``batches`` shows group commit."""

    batches: int = 0
    transactions: int = 0
    records: int = 0
    snapshots: int = 0


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :meth:`SqliteJournal.open` found and rebuilt."""

    created: bool
    snapshot_seq: int
    replayed: int
    hosts: int
    claims: int
    seconds: float


@dataclass(slots=True)
class _Pending:
    batch: list[Envelope]
    future: asyncio.Future[None]
    image: CoreImage | None


class SqliteJournal:
    """A write-ahead journal of scheduler state changes in one SQLite file.

    ``Scheduler(journal=path)`` is the usual way in; it opens, recovers,
    starts and closes the journal for you. By hand::

        journal = SqliteJournal("claims.sqlite")
        journal.open(core)          # creates the file, or recovers core from it
        journal.start()             # in the running loop, before the owner starts
        owner = Owner(core, ..., sink=journal)
        ...
        await journal.close()       # after the owner stopped

    ``snapshot_every`` bounds how many records replay has to go through;
    ``synchronous`` is SQLite's setting (``FULL`` survives power loss,
    ``NORMAL`` only a crash of the process).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        snapshot_every: int = 20_000,
        synchronous: Literal["FULL", "NORMAL", "EXTRA"] = "FULL",
    ) -> None:
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be at least 1, got {snapshot_every}")
        self.path = Path(path)
        self.snapshot_every = snapshot_every
        self.synchronous = synchronous
        self.stats = JournalStats()
        self.recovery: Recovery | None = None
        self._conn: sqlite3.Connection | None = None
        self._core: SchedulerCore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._next_seq = 1
        self._since_snapshot = 0
        self._inflight = 0
        self._failed: JournalError | None = None
        self._closed = False

    # -- open and recover (before the owner starts) ---------------------------

    def open(self, core: SchedulerCore) -> Recovery:
        """Open or create the file and rebuild ``core`` (which must be empty) from it.

        Blocking; ``Scheduler`` runs it in a worker thread. Raises
        :class:`JournalError` for a file that is foreign, damaged or newer.
        """
        if self._conn is not None:
            raise JournalError(f"journal {self.path} is already open")
        if core.table.count or len(core.ledger):
            raise JournalError("a journal recovers into an empty core; this one holds state")
        started = time.perf_counter()
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc}") from exc
        try:
            if not fresh:
                fresh = self._check(conn)
            if fresh:
                self._create(conn)
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"journal {self.path} cannot use WAL mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            snapshot_seq, replayed = self._recover(conn, core)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise JournalError(
                f"{self.path} is not a readable actorsched journal ({exc}); "
                "restore it from a backup, or point the scheduler at a new path"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._core = core
        self._since_snapshot = replayed
        self.recovery = Recovery(
            fresh,
            snapshot_seq,
            replayed,
            core.table.count,
            len(core.ledger),
            time.perf_counter() - started,
        )
        log.info("journal %s: %s", self.path, self.recovery)
        return self.recovery

    def _check(self, conn: sqlite3.Connection) -> bool:
        """Validate an existing file; True when it is an SQLite file with nothing in it."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if app_id != APPLICATION_ID:
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app_id == 0 and tables == 0:
                return True  # created but cut off before its first commit: nothing to lose
            raise JournalError(
                f"{self.path} is an SQLite database but not an actorsched journal "
                f"(application_id {app_id:#x}, {tables} schema objects); "
                "pass the path of a journal, or a new path to start an empty one"
            )
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError as exc:
            raise JournalError(f"{self.path} has no journal header ({exc})") from exc
        if meta.get("magic") != MAGIC:
            raise JournalError(
                f"{self.path} has magic {meta.get('magic')!r}, not {MAGIC!r}: not an actorsched "
                "journal"
            )
        version = meta.get("schema_version", "")
        if not version.isdigit() or int(version) != SCHEMA_VERSION:
            raise JournalError(
                f"{self.path} has journal schema {version!r}; this actorsched reads schema "
                f"{SCHEMA_VERSION}: run the actorsched version that wrote it"
            )
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            raise JournalError(
                f"journal {self.path} is damaged: {'; '.join(problems[:5])}; "
                "restore it from a backup"
            )
        return False

    def _create(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [
                ("magic", MAGIC),
                ("schema_version", str(SCHEMA_VERSION)),
                ("created_at", repr(time.time())),
            ],
        )
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute("COMMIT")

    def _recover(self, conn: sqlite3.Connection, core: SchedulerCore) -> tuple[int, int]:
        snapshot_seq = 0
        row = conn.execute("SELECT seq, body, sha256 FROM snapshot WHERE id = 1").fetchone()
        if row is not None:
            snapshot_seq, body, digest = row
            if hashlib.sha256(body.encode()).hexdigest() != digest:
                raise JournalError(
                    f"the snapshot in {self.path} does not match its checksum: the file is "
                    "damaged; restore it from a backup"
                )
            try:
                restore(core, body)
            except (ValueError, KeyError, TypeError) as exc:
                raise JournalError(f"the snapshot in {self.path} does not parse: {exc}") from exc
        last = snapshot_seq
        replayed = 0
        cursor = conn.execute(
            "SELECT seq, kind, now, body, crc FROM records WHERE seq > ? ORDER BY seq",
            (snapshot_seq,),
        )
        for seq, kind, now, body, crc in cursor:
            if zlib.crc32(body.encode()) != crc:
                raise JournalError(
                    f"record {seq} in {self.path} does not match its CRC: the file is damaged"
                )
            try:
                apply(core, Record(kind, now, body))
            except Exception as exc:
                raise JournalError(f"record {seq} ({kind}) in {self.path}: {exc}") from exc
            last = seq
            replayed += 1
        self._next_seq = last + 1
        return snapshot_seq, replayed

    # -- writing (the owner hands batches over) -------------------------------

    def start(self) -> None:
        """Start the writer thread; call in the running loop, after :meth:`open`."""
        if self._conn is None:
            raise JournalError("open the journal before starting it")
        if self._thread is not None:
            raise JournalError(f"journal {self.path} already started")
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(
            target=self._write_loop, name="actorsched-journal", daemon=True
        )
        self._thread.start()

    def submit(self, batch: list[Envelope]) -> Awaitable[None]:
        """Hand over an applied batch; the awaitable finishes once it is durable."""
        loop = self._loop
        if loop is None:
            raise JournalError("start the journal before handing it batches")
        future: asyncio.Future[None] = loop.create_future()
        if self._failed is None and self._closed:
            self._failed = JournalError(f"journal {self.path} is closed")
        if self._failed is None:
            try:
                changes = count_changes(batch)
            except JournalError as exc:
                self._fail(exc)
        if self._failed is not None:
            future.set_exception(self._failed)
            return future
        if changes == 0 and self._inflight == 0:
            future.set_result(None)  # nothing to write, nothing earlier to wait for
            return future
        image = None
        self._since_snapshot += changes
        if self._since_snapshot >= self.snapshot_every and self._core is not None:
            image = capture(self._core)  # the state exactly as this batch left it
            self._since_snapshot = 0
        self._inflight += 1
        self._queue.put(_Pending(batch, future, image))
        return future

    def _fail(self, exc: JournalError) -> None:
        if self._failed is None:
            log.error("journal %s failed; every later call fails too: %s", self.path, exc)
            self._failed = exc

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            group = [first]
            with contextlib.suppress(queue.Empty):
                while True:
                    group.append(self._queue.get_nowait())
            items = [item for item in group if item is not None]
            if items:
                error, snapshot = self._commit(items)
                loop = self._loop
                assert loop is not None
                # a closed loop has nobody waiting any more
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._settle, items, error)
                if snapshot is not None:
                    self._snapshot(*snapshot)
            if len(items) != len(group):  # the stop sentinel, always last
                return

    def _commit(
        self, items: list[_Pending]
    ) -> tuple[JournalError | None, tuple[CoreImage, int] | None]:
        """Write the records of ``items`` in one transaction.

        Returns the error instead of raising, and the last snapshot captured
        among ``items`` with the seq of the last record it covers (an earlier
        one in the same group is superseded by it).
        """
        if self._failed is not None:
            return self._failed, None
        conn = self._conn
        assert conn is not None
        seq = self._next_seq
        snapshot: tuple[CoreImage, int] | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            rows: list[tuple[int, str, float, str, int]] = []
            for item in items:
                for record in records_of(item.batch):
                    crc = zlib.crc32(record.body.encode())
                    rows.append((seq, record.kind, record.now, record.body, crc))
                    seq += 1
                if item.image is not None:
                    snapshot = (item.image, seq - 1)
            self._insert(conn, rows)
            conn.execute("COMMIT")
        except Exception as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = JournalError(
                f"could not write journal {self.path}: {exc}; the scheduler's answers are "
                "no longer durable: stop it and restart it on this journal"
            )
            error.__cause__ = exc
            self._failed = error
            log.error("%s", error)
            return error, None
        self._next_seq = seq
        self.stats.batches += len(items)
        self.stats.transactions += 1
        self.stats.records += len(rows)
        return None, snapshot

    @staticmethod
    def _insert(conn: sqlite3.Connection, rows: list[tuple[int, str, float, str, int]]) -> None:
        """Insert ``rows`` with one multi-row statement per ``_INSERT_CHUNK`` rows.

        ``executemany`` would step SQLite once per row, and each step lets go
        of the GIL and must win it back from the owner, which is busy applying
        the next batch; one ``VALUES (...), (...)`` statement is a single step
        (and about four times cheaper than passing the rows as one JSON array).
        """
        for start in range(0, len(rows), _INSERT_CHUNK):
            chunk = rows[start : start + _INSERT_CHUNK]
            conn.execute(_insert_sql(len(chunk)), [value for row in chunk for value in row])

    def _snapshot(self, image: CoreImage, seq: int) -> None:
        """Write ``image`` (the state after record ``seq``) and drop the records it covers."""
        conn = self._conn
        assert conn is not None
        try:
            body = encode(image)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT OR REPLACE INTO snapshot (id, seq, taken_at, body, sha256)"
                " VALUES (1, ?, ?, ?, ?)",
                (seq, time.time(), body, hashlib.sha256(body.encode()).hexdigest()),
            )
            conn.execute("DELETE FROM records WHERE seq <= ?", (seq,))
            conn.execute("COMMIT")
        except Exception:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            log.exception(
                "could not write a snapshot of journal %s at record %d; nothing is lost "
                "(replay starts from the previous snapshot), the next one is tried after "
                "%d more records",
                self.path,
                seq,
                self.snapshot_every,
            )
            return
        self.stats.snapshots += 1

    def _settle(self, items: list[_Pending], error: JournalError | None) -> None:
        for item in items:
            self._inflight -= 1
            if item.future.done():
                continue
            if error is None:
                item.future.set_result(None)
            else:
                item.future.set_exception(error)

    # -- closing --------------------------------------------------------------

    async def close(self) -> None:
        """Write a last snapshot, stop the writer and close the file (after the owner stopped)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._thread is not None:
                if self._failed is None and self._since_snapshot and self._core is not None:
                    assert self._loop is not None
                    final: asyncio.Future[None] = self._loop.create_future()
                    self._inflight += 1
                    self._queue.put(_Pending([], final, capture(self._core)))
                    with contextlib.suppress(JournalError):
                        await final
                self._queue.put(None)
                await asyncio.to_thread(self._thread.join)
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def close_now(self) -> None:
        """Close a journal that was opened but never started (start-up failed)."""
        if self._thread is not None:
            raise JournalError("the journal is running; await close() instead")
        self._closed = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None
