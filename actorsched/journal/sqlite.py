"""The SQLite journal: one file, one writer process, group commit and recovery.

Rules this module keeps (the rules every journal keeps are in ``base.py``):

* The file must be an actorsched journal (SQLite header ``application_id``,
  a ``meta`` table with the magic value and a schema version this code
  reads) and pass ``PRAGMA quick_check`` before anything is recovered.
* One process at a time: an exclusive ``flock`` on ``<file>.lock``, taken
  before the file is read and held until it is closed. A second process
  (or a second journal in this one) on the same file is refused with a
  :class:`JournalLocked` error naming the file and the holder: never two
  writers on one file, never a split state.
* WAL mode with ``synchronous=FULL`` by default: a commit is on disk before
  its callers hear of it, even if the power goes. A write cut off mid-way
  is discarded by SQLite on the next open, leaving the last whole commit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import socket
import sqlite3
import time
import uuid
from pathlib import Path
from typing import IO, Literal

from .base import (
    DEFAULT_COMMIT_TIMEOUT,
    Journal,
    JournalStats,
    Recovery,
    Row,
    StoredSnapshot,
    rows_of,
)
from .errors import JournalError, JournalLocked, JournalMissing

__all__ = ["MAGIC", "SCHEMA_VERSION", "JournalStats", "Recovery", "SqliteJournal"]

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


# Free space an SQLite journal needs to start: room for many commits and a snapshot
# of a few thousand hosts; a smaller disk is refused at start, not at a write.
DEFAULT_MIN_FREE_BYTES = 16 * 2**20

# Claims, hosts and tenants' requests are the operator's alone: rw for the owner only.
_PRIVATE = 0o600

# "<journal id> <seq, 20 digits>\n", rewritten in place after every commit, in
# <file>.mark and in this extended attribute of <file>
MARK_XATTR = "user.actorsched.mark"
_MARK_BYTES = 32 + 1 + 20 + 1

# Rows per INSERT statement: 5 parameters a row stays under SQLite's oldest
# limit of 999 parameters per statement.
_INSERT_CHUNK = 199


@functools.lru_cache(maxsize=256)
def _insert_sql(rows: int) -> str:
    return "INSERT INTO records (seq, kind, now, body, crc) VALUES " + ",".join(
        ["(?,?,?,?,?)"] * rows
    )


def mark_path(path: Path) -> Path:
    """The file that holds how far the journal at ``path`` was committed."""
    return path.with_name(path.name + ".mark")


def lock_path(path: Path) -> Path:
    """The file whose ``flock`` marks the one process that has ``path`` open."""
    return path.with_name(path.name + ".lock")


class SqliteJournal(Journal):
    """A write-ahead journal of scheduler state changes in one SQLite file.

    ``Scheduler(journal=path)`` is the usual way in; see :class:`Journal`
    for the steps by hand. ``synchronous`` is SQLite's setting (``FULL``
    survives power loss, ``NORMAL`` only a crash of the process).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        snapshot_every: int = 20_000,
        synchronous: Literal["FULL", "NORMAL", "EXTRA"] = "FULL",
        min_free_bytes: int = DEFAULT_MIN_FREE_BYTES,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT,
        create: bool = True,
    ) -> None:
        super().__init__(snapshot_every=snapshot_every, commit_timeout=commit_timeout)
        self.create = create  # False: a file that does not exist is JournalMissing
        if min_free_bytes < 0:
            raise ValueError(f"min_free_bytes must be 0 or more, got {min_free_bytes}")
        self.path = Path(path)
        self.synchronous = synchronous
        self.min_free_bytes = min_free_bytes
        self._conn: sqlite3.Connection | None = None
        self._lock: IO[str] | None = None
        self._mark: int | None = None  # the descriptor of <file>.mark
        self._marked = 0
        self._marked_by = ""  # which copy of the mark said self._marked
        self._xattr = False  # the second copy is kept (the filesystem takes it)
        self._journal_id = ""

    @property
    def name(self) -> str:
        return str(self.path)

    @property
    def identity(self) -> str:
        # the id written into the file when it was made (set once the journal is open)
        return f"sqlite journal {self._journal_id}"

    # -- connecting -------------------------------------------------------------

    def _connect(self) -> bool:
        if not self.create and not self.path.exists():
            raise JournalMissing(
                f"journal {self.path} does not exist; serve makes one only when asked "
                "(--create-journal), so that a mistyped --journal never starts an empty "
                "scheduler: check the path, or pass --create-journal once"
            )
        self._check_room()
        self._take_lock()
        try:
            return self._open_file()
        except BaseException:
            self._disconnect()
            raise

    def _check_room(self) -> None:
        """Refuse to start on a filesystem too full to take the next commits."""
        folder = self.path.parent
        try:
            stats = os.statvfs(folder)
        except OSError as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc}") from exc
        free = stats.f_bavail * stats.f_frsize
        if free < self.min_free_bytes:
            raise JournalError(
                f"journal {self.path}: {free:,} bytes free on its filesystem, under the "
                f"{self.min_free_bytes:,} it needs to start; free some space on {folder} "
                "and start again (nothing was read or written)"
            )

    def _take_lock(self) -> None:
        where = lock_path(self.path)
        try:
            # owner-only, as the journal itself: the holder's pid and host are no one else's
            fd = os.open(where, os.O_RDWR | os.O_CREAT, _PRIVATE)
            handle = open(fd, "a+", encoding="utf-8")  # noqa: SIM115 (held until close)
        except OSError as exc:
            raise JournalError(
                f"cannot open the lock file {where} of journal {self.path}: {exc}"
            ) from exc
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise JournalLocked(
                f"journal {self.path} is in use by {holder} (it holds the lock on {where}); "
                "one process writes a journal at a time: stop that one first, or give this "
                "one a journal of its own (for an active/standby pair use a postgresql:// "
                "journal)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.ctime()}\n")
        handle.flush()
        self._lock = handle

    def _open_file(self) -> bool:
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        try:
            if not self.path.exists():
                # SQLite gives its -wal and -shm files the mode of the database file
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE))
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (sqlite3.Error, OSError) as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc}") from exc
        self._conn = conn
        try:
            if not fresh:
                fresh = self._check(conn)
            if fresh:
                self._create(conn)
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise JournalError(f"journal {self.path} cannot use WAL mode (got {mode!r})")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from exc
        try:  # a journal that cannot take a write fails now, not at its first commit
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('opened_at', ?)",
                (repr(time.time()),),
            )
            # journals from before the mark get their id now
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('journal_id', ?)",
                (uuid.uuid4().hex,),
            )
            conn.execute("COMMIT")
            self._journal_id = str(
                conn.execute("SELECT value FROM meta WHERE key = 'journal_id'").fetchone()[0]
            )
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise JournalError(
                f"cannot write journal {self.path} ({exc}); free space on its filesystem or "
                "fix its permissions, and start again"
            ) from exc
        self._open_mark()
        return fresh

    # -- the high-water mark: what was committed, kept outside the database ------

    def _open_mark(self) -> None:
        where = mark_path(self.path)
        try:
            self._mark = os.open(where, os.O_RDWR | os.O_CREAT, _PRIVATE)
            text = os.pread(self._mark, _MARK_BYTES, 0).decode("ascii", "replace")
        except OSError as exc:
            raise JournalError(
                f"cannot open {where}, the mark of journal {self.path}: {exc}"
            ) from exc
        # the second copy, an extended attribute of the database file itself: it is
        # there when the -wal and the .mark file are both deleted (a clean-up of
        # "temporary" files); a filesystem without user attributes has the first only
        try:
            second = os.getxattr(self.path, MARK_XATTR).decode("ascii", "replace")
            self._xattr = True
        except OSError as exc:
            second = ""
            self._xattr = exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP)
        self._marked = max(self._mark_of(text), self._mark_of(second))
        self._marked_by = (
            str(mark_path(self.path))
            if self._mark_of(text) >= self._mark_of(second)
            else f"{self.path}'s {MARK_XATTR} attribute"
        )

    def _mark_of(self, text: str) -> int:
        words = text.split()
        if len(words) == 2 and words[0] == self._journal_id and words[1].isdigit():
            return int(words[1])
        return 0  # no mark, or one of another journal that was at this path

    def _check_recovered(self, last_seq: int) -> None:
        if last_seq < self._marked:
            raise JournalError(
                f"journal {self.path} holds records up to {last_seq}, but records up to "
                f"{self._marked} were committed (its mark {self._marked_by} says so): "
                "its write-ahead log (-wal) was lost, cut short or damaged after an unclean "
                "stop; restore the journal from a backup (refusing to start with fewer claims)"
            )
        self._committed(last_seq)

    def _committed(self, last_seq: int) -> None:
        # no fsync: the mark only has to outlive the process (kill -9), not the power;
        # after a power cut it can only be behind, so it never refuses a good journal
        if self._mark is not None:
            line = f"{self._journal_id} {last_seq:020d}\n".encode()
            os.pwrite(self._mark, line, 0)
            if self._xattr:
                try:
                    os.setxattr(self.path, MARK_XATTR, line)
                except OSError:  # the filesystem refuses it (full, no attributes): one copy
                    self._xattr = False

    def _unreadable(self, exc: BaseException) -> JournalError:
        return JournalError(
            f"{self.path} is not a readable actorsched journal ({exc}); "
            "restore it from a backup, or point the scheduler at a new path"
        )

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
                ("journal_id", uuid.uuid4().hex),
            ],
        )
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute("COMMIT")

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._mark is not None:
            os.close(self._mark)
            self._mark = None
        if self._lock is not None:
            self._lock.close()  # closing the descriptor lets go of the flock
            self._lock = None

    # -- reading ------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise JournalError(f"journal {self.path} is not open")
        return conn

    def _load_snapshot(self) -> StoredSnapshot | None:
        try:
            row = (
                self._connection()
                .execute("SELECT seq, body, sha256 FROM snapshot WHERE id = 1")
                .fetchone()
            )
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from exc
        return None if row is None else StoredSnapshot(int(row[0]), str(row[1]), str(row[2]))

    def _load_records(self, after: int, limit: int) -> list[Row]:
        try:
            cursor = self._connection().execute(
                "SELECT seq, kind, now, body, crc FROM records WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit),
            )
            return rows_of(cursor.fetchall())
        except sqlite3.DatabaseError as exc:
            raise self._unreadable(exc) from exc

    # -- writing (the writer thread) ------------------------------------------------

    def _write_records(self, rows: list[Row]) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._insert(conn, rows)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _insert(conn: sqlite3.Connection, rows: list[Row]) -> None:
        """Insert ``rows`` with one multi-row statement per ``_INSERT_CHUNK`` rows.

        ``executemany`` would step SQLite once per row, and each step lets go
        of the GIL and must win it back from the owner, which is busy applying
        the next batch; one ``VALUES (...), (...)`` statement is a single step
        (and about four times cheaper than passing the rows as one JSON array).
        """
        for start in range(0, len(rows), _INSERT_CHUNK):
            chunk = rows[start : start + _INSERT_CHUNK]
            conn.execute(_insert_sql(len(chunk)), [value for row in chunk for value in row])

    def _write_snapshot(self, snapshot: StoredSnapshot, term: int) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT OR REPLACE INTO snapshot (id, seq, taken_at, body, sha256)"
                " VALUES (1, ?, ?, ?, ?)",
                (snapshot.seq, time.time(), snapshot.body, snapshot.sha256),
            )
            # one process reads this file, and its state is past the snapshot
            conn.execute("DELETE FROM records WHERE seq <= ?", (snapshot.seq,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
