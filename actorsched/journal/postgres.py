"""The PostgreSQL journal: one shared database, one fenced writer per shard.

Rules this module keeps (the rules every journal keeps are in ``base.py``):

* Every table is keyed by shard, so independent schedulers (one per cell or
  region) share one database. A shard's row in ``actorsched_shards`` holds
  its epoch and the seq of its last committed record.
* :meth:`PostgresJournal.acquire` bumps the epoch (``UPDATE … SET epoch =
  epoch + 1``, which waits for the row lock any commit in progress holds).
  A commit is ONE statement: it moves ``last_seq`` forward only where the
  row still has the committer's epoch and the ``last_seq`` the committer
  last saw (a compare-and-set), and inserts the records only where that
  update matched. A deposed owner's commit therefore inserts nothing and
  fails with :class:`JournalFenced`; it can never answer a caller with a
  change that is not the truth.
* A commit whose connection breaks is ambiguous: the writer reconnects
  (for up to ``reconnect_timeout`` seconds), reads the shard row, and
  counts the commit done (``last_seq`` reached its end under its epoch),
  sends it again (``last_seq`` did not move), or fails fenced.
* A snapshot keeps the records after the *previous* snapshot, so a standby
  that follows a snapshot behind still finds every record it needs.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..logs import redact
from .base import (
    DEFAULT_COMMIT_TIMEOUT,
    DEFAULT_OWNER_CHECK_INTERVAL,
    Journal,
    Row,
    StoredSnapshot,
    rows_of,
)
from .errors import JournalError, JournalFenced, JournalMissing, JournalUnavailable

__all__ = ["DEFAULT_SHARD", "SCHEMA_VERSION", "PostgresJournal", "is_postgres_url"]

log = logging.getLogger("actorsched.journal")

MAGIC = "actorsched-journal"
SCHEMA_VERSION = 1
DEFAULT_SHARD = "default"
_MAX_SHARD_CHARS = 200
# pg_advisory_xact_lock key that serializes creating the tables ("acts")
_SCHEMA_LOCK = 0x61637473

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS actorsched_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS actorsched_shards (shard TEXT PRIMARY KEY,"
    " epoch BIGINT NOT NULL, last_seq BIGINT NOT NULL, owner TEXT NOT NULL DEFAULT '',"
    " since TIMESTAMPTZ NOT NULL DEFAULT now())",
    "CREATE TABLE IF NOT EXISTS actorsched_records (shard TEXT NOT NULL, seq BIGINT NOT NULL,"
    " epoch BIGINT NOT NULL, kind TEXT NOT NULL, now DOUBLE PRECISION NOT NULL,"
    " body TEXT NOT NULL, crc BIGINT NOT NULL, PRIMARY KEY (shard, seq))",
    "CREATE TABLE IF NOT EXISTS actorsched_snapshots (shard TEXT PRIMARY KEY,"
    " seq BIGINT NOT NULL, taken_at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL,"
    " sha256 TEXT NOT NULL)",
)

# Parameters go in binary (%b): quoting arrays of JSON bodies into text costs
# the writer 3 to 4 times more per commit from 16 records up
# (benchmarks/pg_drivers.py).
_COMMIT = (
    "WITH fence AS (UPDATE actorsched_shards SET last_seq = %(last)b"
    " WHERE shard = %(shard)b AND epoch = %(epoch)b AND last_seq = %(prev)b RETURNING 1)"
    " INSERT INTO actorsched_records (shard, seq, epoch, kind, now, body, crc)"
    " SELECT %(shard)b, r.seq, %(epoch)b, r.kind, r.now, r.body, r.crc"
    " FROM unnest(%(seqs)b::bigint[], %(kinds)b::text[], %(nows)b::float8[],"
    " %(bodies)b::text[], %(crcs)b::bigint[]) AS r(seq, kind, now, body, crc)"
    " WHERE EXISTS (SELECT 1 FROM fence)"
)


def is_postgres_url(where: object) -> bool:
    """True for a ``postgresql://`` (or ``postgres://``) URL: the journal is PostgreSQL."""
    return isinstance(where, str) and where.startswith(("postgresql://", "postgres://"))


def _check_shard(shard: str) -> str:
    if not shard or len(shard) > _MAX_SHARD_CHARS or not shard.isprintable():
        raise ValueError(
            f"shard name {shard[:80]!r} must be 1 to {_MAX_SHARD_CHARS} printable characters"
        )
    return shard


class PostgresJournal(Journal):
    """A journal in a PostgreSQL database, shared by an active/standby pair.

    >>> journal = PostgresJournal("postgresql://postgres@127.0.0.1/test", shard="cell1")
    >>> scheduler = Scheduler(journal=journal)  # doctest: +SKIP

    ``reconnect_timeout`` bounds how long a commit waits for a lost
    database to come back before the journal fails (fail-stop).
    """

    def __init__(
        self,
        url: str,
        *,
        shard: str = DEFAULT_SHARD,
        snapshot_every: int = 20_000,
        connect_timeout: float = 5.0,
        reconnect_timeout: float = 10.0,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT,
        owner_check_interval: float = DEFAULT_OWNER_CHECK_INTERVAL,
        create: bool = True,
    ) -> None:
        super().__init__(
            snapshot_every=snapshot_every,
            commit_timeout=commit_timeout,
            owner_check_interval=owner_check_interval,
        )
        self.create = create  # False: a shard the database does not hold is JournalMissing
        if not is_postgres_url(url):
            raise ValueError(f"a PostgreSQL journal needs a postgresql:// URL, got {url[:80]!r}")
        self.url = url
        self.shard = _check_shard(shard)
        self.connect_timeout = connect_timeout
        self.reconnect_timeout = reconnect_timeout
        self.epoch: int | None = None
        self._committed_at_open = 0
        self._journal_id = ""
        self._writer: psycopg.Connection[Any] | None = None
        self._reader: psycopg.Connection[Any] | None = None
        self._owner_name = f"pid {os.getpid()} on {socket.gethostname()}"

    @property
    def name(self) -> str:
        return f"{redact(self.url)} shard {self.shard!r}"

    @property
    def identity(self) -> str:
        # the id the database got when its tables were made (set once the journal is
        # open): the same database by any address (a proxy, a DNS name) is one journal
        return f"postgresql journal {self._journal_id} shard {self.shard}"

    @property
    def former_identities(self) -> tuple[str, ...]:
        # 0.x named it by its address, which a proxy or another DNS name changes
        info = conninfo_to_dict(self.url)
        where = f"{info.get('host', '')}:{info.get('port', '5432')}/{info.get('dbname', '')}"
        return (f"postgresql {where} shard {self.shard}",)

    # -- connecting -----------------------------------------------------------

    def _new_connection(
        self, *, writer: bool = False, connect_timeout: float | None = None
    ) -> psycopg.Connection[Any]:
        """A connection that notices a dead link (TCP keepalives, and unacknowledged
        data given up after ``commit_timeout``). The writer's statements also give up
        on a lock or a statement after twice ``commit_timeout`` (a snapshot sets its
        own): the watchdog fails the journal first, and the bound in the database
        makes sure the commit of a process that is gone never lands later. The
        reader has no statement or lock bound: a standby's takeover waits for a lock
        a dying owner's commit still holds."""
        limit_ms = max(1, round(self.commit_timeout * 1000))
        server_ms = 2 * limit_ms
        options = f"-c statement_timeout={server_ms} -c lock_timeout={server_ms}" if writer else ""
        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=max(
                    1, round(self.connect_timeout if connect_timeout is None else connect_timeout)
                ),
                application_name=f"actorsched {self.shard}",
                keepalives=1,
                keepalives_idle=max(1, round(self.commit_timeout)),
                keepalives_interval=1,
                keepalives_count=3,
                tcp_user_timeout=limit_ms,
                options=options,
            )
        except psycopg.Error as exc:
            raise JournalUnavailable(f"cannot connect to journal {self.name}: {exc}") from exc

    def _connect(self) -> bool:
        conn = self._new_connection()
        try:
            created = self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        self._reader = conn
        return created

    def _prepare(self, conn: psycopg.Connection[Any]) -> bool:
        """Create the tables when absent, check their version, make the shard's row."""
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO actorsched_meta (key, value) VALUES ('magic', %s),"
                    " ('schema_version', %s), ('journal_id', %s) ON CONFLICT (key) DO NOTHING",
                    (MAGIC, str(SCHEMA_VERSION), uuid.uuid4().hex),
                )
                meta = dict(conn.execute("SELECT key, value FROM actorsched_meta").fetchall())
                if (
                    not self.create
                    and not conn.execute(
                        "SELECT 1 FROM actorsched_shards WHERE shard = %s", (self.shard,)
                    ).fetchone()
                ):
                    # raised inside the transaction: the tables, if new, go with it
                    raise JournalMissing(
                        f"journal {self.name} does not exist (the database holds no shard "
                        f"{self.shard!r}); serve makes one only when asked (--create-journal), "
                        "so that a mistyped --journal or --shard never starts an empty "
                        "scheduler: check them, or pass --create-journal once"
                    )
                inserted = conn.execute(
                    "INSERT INTO actorsched_shards (shard, epoch, last_seq) VALUES (%s, 0, 0)"
                    " ON CONFLICT (shard) DO NOTHING",
                    (self.shard,),
                ).rowcount
                # committed before recovery reads a record: recovery must get this far
                committed = conn.execute(
                    "SELECT last_seq FROM actorsched_shards WHERE shard = %s", (self.shard,)
                ).fetchone()
            self._committed_at_open = int(committed[0]) if committed is not None else 0
        except psycopg.Error as exc:
            raise JournalError(f"cannot prepare journal {self.name}: {exc}") from exc
        if meta.get("magic") != MAGIC:
            raise JournalError(
                f"{self.name}: table actorsched_meta has magic {meta.get('magic')!r}, not "
                f"{MAGIC!r}; point the scheduler at another database"
            )
        self._journal_id = str(meta.get("journal_id", ""))
        version = meta.get("schema_version", "")
        if not version.isdigit() or int(version) != SCHEMA_VERSION:
            raise JournalError(
                f"{self.name} has journal schema {version!r}; this actorsched reads schema "
                f"{SCHEMA_VERSION}: run the actorsched version that wrote it"
            )
        return inserted == 1

    def _disconnect(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._reader = self._writer = None

    def _read_conn(self) -> psycopg.Connection[Any]:
        if self._reader is None or self._reader.closed:
            self._reader = self._new_connection()
        return self._reader

    def _write_conn(self) -> psycopg.Connection[Any]:
        if self._writer is None or self._writer.closed:
            self._writer = self._new_connection(writer=True)
        return self._writer

    def _describe_stall(self) -> str:
        writer = self._writer
        pid = writer.info.backend_pid if writer is not None and not writer.closed else 0
        try:
            with self._new_connection(connect_timeout=2.0) as conn:
                conn.execute("SET statement_timeout = 2000")
                blockers = conn.execute(
                    "SELECT a.pid, a.application_name, a.state, a.client_addr::text"
                    " FROM pg_stat_activity a WHERE a.pid = ANY(pg_blocking_pids(%s))",
                    (pid,),
                ).fetchall()
                present = conn.execute(
                    "SELECT state, wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
        except (psycopg.Error, JournalError) as exc:
            return f"the database cannot be asked what it waits on ({str(exc).strip()})"
        if blockers:
            held = ", ".join(
                f"pid {b[0]} (application {b[1]!r}, {b[2]}, from {b[3] or 'a local socket'})"
                for b in blockers
            )
            return f"the commit's backend (pid {pid}) waits on a lock held by {held}"
        if present is None:
            return (
                f"the commit's backend (pid {pid}) is not in the database: the link to it "
                "is stalled or cut"
            )
        return (
            f"the commit's backend (pid {pid}) is {present[0]} and waits on no lock: the "
            "link to the database is stalled"
        )

    # -- reading --------------------------------------------------------------

    def _load_snapshot(self) -> StoredSnapshot | None:
        try:
            row = (
                self._read_conn()
                .execute(
                    "SELECT seq, body, sha256 FROM actorsched_snapshots WHERE shard = %s",
                    (self.shard,),
                )
                .fetchone()
            )
        except psycopg.Error as exc:
            self._drop_reader()
            raise JournalUnavailable(f"cannot read journal {self.name}: {exc}") from exc
        return None if row is None else StoredSnapshot(int(row[0]), str(row[1]), str(row[2]))

    def _load_records(self, after: int, limit: int) -> list[Row]:
        try:
            cursor = self._read_conn().execute(
                "SELECT seq, kind, now, body, crc FROM actorsched_records"
                " WHERE shard = %s AND seq > %s ORDER BY seq LIMIT %s",
                (self.shard, after, limit),
            )
            return rows_of(cursor.fetchall())
        except psycopg.Error as exc:
            self._drop_reader()
            raise JournalUnavailable(f"cannot read journal {self.name}: {exc}") from exc

    def _drop_reader(self) -> None:
        # a broken connection is replaced on the next read
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def shard_row(self) -> tuple[int, int, str]:
        """The shard's (epoch, last_seq, owner) as the database holds them now."""
        return self._shard_row(self._read_conn())

    def _shard_row(self, conn: psycopg.Connection[Any]) -> tuple[int, int, str]:
        row = conn.execute(
            "SELECT epoch, last_seq, owner FROM actorsched_shards WHERE shard = %s",
            (self.shard,),
        ).fetchone()
        if row is None:
            raise JournalError(f"{self.name}: the shard's row is missing")
        return int(row[0]), int(row[1]), str(row[2])

    # -- fencing ----------------------------------------------------------------

    def _acquire(self) -> int:
        try:
            # not the writer's connection: a snapshot of the last term may still hold a
            # transaction open on it, and the bump must not commit or roll back with that
            row = (
                self._read_conn()
                .execute(
                    "UPDATE actorsched_shards SET epoch = epoch + 1, owner = %s, since = now()"
                    " WHERE shard = %s RETURNING epoch, last_seq",
                    (self._owner_name, self.shard),
                )
                .fetchone()
            )
        except psycopg.Error as exc:
            raise JournalError(f"cannot take over journal {self.name}: {exc}") from exc
        if row is None:
            raise JournalError(f"{self.name}: the shard's row is missing")
        self.epoch = int(row[0])
        log.info(
            "journal %s: this process owns epoch %d (records up to %d)",
            self.name,
            self.epoch,
            row[1],
        )
        return self.epoch

    def _check_recovered(self, last_seq: int) -> None:
        if last_seq < self._committed_at_open:
            raise JournalError(
                f"journal {self.name} replays to record {last_seq}, but records up to "
                f"{self._committed_at_open} were committed: records are missing (a snapshot "
                "or records removed by hand?); restore the database from a backup"
            )

    def _writer_here(self) -> bool:
        return self.epoch is not None

    def _check_still_writer(self) -> None:
        if self.epoch is None:
            return
        epoch_now, _, owner = self._shard_row_on_writer()
        if epoch_now != self.epoch:
            raise self._fenced(epoch_now, owner)

    def _fenced(self, epoch: int, owner: str) -> JournalFenced:
        holder = owner or "no owner recorded"
        return JournalFenced(
            f"journal {self.name} was taken over: its epoch is {epoch} ({holder}), "
            f"this process wrote at epoch {self.epoch}; another scheduler owns the shard now, "
            "so this one writes nothing more and stops answering"
        )

    # -- writing (the writer thread) ----------------------------------------------

    def _write_records(self, rows: list[Row]) -> None:
        epoch = self.epoch
        if epoch is None:
            raise JournalError(f"journal {self.name}: acquire() before writing")
        first, last = rows[0][0], rows[-1][0]
        params = {
            "shard": self.shard,
            "epoch": epoch,
            "prev": first - 1,
            "last": last,
            "seqs": [r[0] for r in rows],
            "kinds": [r[1] for r in rows],
            "nows": [r[2] for r in rows],
            "bodies": [r[3] for r in rows],
            "crcs": [r[4] for r in rows],
        }
        deadline = time.monotonic() + self.reconnect_timeout
        while True:
            try:
                inserted = self._write_conn().execute(_COMMIT, params, prepare=True).rowcount
            except psycopg.OperationalError as exc:
                if time.monotonic() >= deadline:
                    raise
                # the commit may or may not have happened: ask the database which
                done = self._after_lost_commit(exc, first, last, deadline)
                if done:
                    return
                continue
            if inserted == len(rows):
                return
            epoch_now, last_seq, owner = self._shard_row_on_writer()
            if epoch_now != epoch:
                raise self._fenced(epoch_now, owner)
            raise JournalError(
                f"journal {self.name} holds records up to {last_seq}, this process expected "
                f"{first - 1}: another writer wrote under this epoch; stop every scheduler of "
                "this shard and start one"
            )

    def _after_lost_commit(
        self, exc: BaseException, first: int, last: int, deadline: float
    ) -> bool:
        """True when the lost commit is in the database, False to send it again."""
        log.warning(
            "journal %s: connection lost during a commit (%s); reconnecting for up to %.0fs",
            self.name,
            str(exc).strip(),
            self.reconnect_timeout,
        )
        # a known state, logged, with a bound of its own: the watchdog waits for it
        self._still_busy(
            "commit after a lost connection", self.reconnect_timeout + self.commit_timeout
        )
        while True:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            try:
                epoch_now, last_seq, owner = self._shard_row_on_writer()
                break
            except (psycopg.Error, JournalError) as again:
                if time.monotonic() >= deadline:
                    raise JournalError(
                        f"journal {self.name} unreachable for {self.reconnect_timeout:.0f}s "
                        f"({again}); nothing after record {first - 1} is durable"
                    ) from again
                time.sleep(0.2)
        if epoch_now != self.epoch:
            raise self._fenced(epoch_now, owner)
        if last_seq == last:
            return True
        if last_seq == first - 1:
            return False
        raise JournalError(
            f"journal {self.name} holds records up to {last_seq} after a lost commit of "
            f"{first}..{last}: not this process's writes; stop every scheduler of this shard"
        )

    def _shard_row_on_writer(self) -> tuple[int, int, str]:
        return self._shard_row(self._write_conn())

    def _write_snapshot(self, snapshot: StoredSnapshot, term: int) -> None:
        conn = self._write_conn()
        with conn.transaction():
            # one large write: the snapshot's own bound, not a commit's
            conn.execute(
                "SELECT set_config('statement_timeout', %s, true)",
                (str(max(1, round(self.snapshot_timeout * 1000))),),
            )
            row = conn.execute(
                "SELECT epoch FROM actorsched_shards WHERE shard = %s FOR UPDATE", (self.shard,)
            ).fetchone()
            # the epoch the state was captured in, not this process's latest one: a
            # snapshot of an earlier term must never replace a later owner's
            if row is None or int(row[0]) != term:
                raise JournalError(
                    f"the snapshot was taken at epoch {term} and the shard is at epoch "
                    f"{None if row is None else row[0]}: the owner of that epoch writes them"
                )
            previous = conn.execute(
                "SELECT seq FROM actorsched_snapshots WHERE shard = %s", (self.shard,)
            ).fetchone()
            written = conn.execute(
                "INSERT INTO actorsched_snapshots (shard, seq, taken_at, body, sha256)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (shard) DO UPDATE SET"
                " seq = EXCLUDED.seq, taken_at = EXCLUDED.taken_at, body = EXCLUDED.body,"
                " sha256 = EXCLUDED.sha256 WHERE actorsched_snapshots.seq < EXCLUDED.seq",
                (self.shard, snapshot.seq, time.time(), snapshot.body, snapshot.sha256),
            ).rowcount
            if not written:  # an older one than what is stored: keep what is stored
                raise JournalError(
                    f"a snapshot at record {snapshot.seq} is not newer than the stored one"
                )
            if previous is not None:
                # keep one snapshot's worth of records for standbys still reading them
                conn.execute(
                    "DELETE FROM actorsched_records WHERE shard = %s AND seq <= %s",
                    (self.shard, int(previous[0])),
                )
