"""What every journal backend shares: group commit, recovery, following, fencing, fail-stop.

Rules this module keeps (a backend only stores and fetches rows):

* One writer thread owns all writing. The owner task hands it each applied
  batch (:meth:`Journal.submit`, a ``BatchSink``) and goes on with the next
  batch at once; the writer commits batches strictly in the order they were
  handed over, several at a time when they queue up (group commit), and
  only then are their callers answered. A batch that changed nothing still
  waits for the batches before it: no answer may depend on a change that is
  not yet durable.
* Records are numbered 1, 2, 3 … per journal (per shard). A snapshot is
  captured by the owner between two batches every ``snapshot_every``
  records and written by the writer in a transaction of its own once the
  records up to it are committed (the batch that made it due does not wait
  for it); a snapshot that fails to write loses nothing and is only logged.
* Recovery restores the snapshot, checked against its SHA-256, and applies
  every later record in order, each checked against its CRC; any failure
  raises :class:`JournalError`: never an empty scheduler in place of a
  damaged one. Following (a standby's :meth:`catch_up`) is the same replay,
  run again for the records written since.
* One writer per journal, enforced by the backend: SQLite holds an
  exclusive lock on the file for as long as it is open; PostgreSQL keeps a
  per-shard epoch, bumped by :meth:`acquire`, and every commit is
  conditional on the committer's epoch in the same statement. A deposed
  owner's commit fails with :class:`JournalFenced`.
* A failed write is final: every later batch fails too (fail-stop), since
  the state in memory already holds changes the journal does not.
* No silent hang: a commit not done within ``commit_timeout`` seconds (a
  snapshot within ``snapshot_timeout``) fails the journal from the loop's
  side (a watchdog), whatever the writer thread is stuck on (a database
  link that stalls with its sockets open, a row lock another session
  holds): every waiting batch gets the error, so the service fail-stops
  and its standby takes over. :attr:`Journal.overdue` says, before that,
  that the write in progress is late (``/readyz`` is not ready then).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import queue
import threading
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from ..actor import Envelope
from ..core import SchedulerCore
from ..core.image import CoreImage, capture
from .errors import JournalError, JournalGap
from .records import Record, apply, count_changes, records_of
from .snapshot import encode, restore

__all__ = [
    "DEFAULT_COMMIT_TIMEOUT",
    "DEFAULT_OWNER_CHECK_INTERVAL",
    "Journal",
    "JournalStats",
    "Recovery",
    "Row",
    "StoredSnapshot",
]

log = logging.getLogger("actorsched.journal")

# One stored record: (seq, kind, now, body, crc).
Row = tuple[int, str, float, str, int]


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    """A snapshot as stored: the seq of the last record it covers, its body and digest."""

    seq: int
    body: str
    sha256: str


@dataclass(slots=True)
class JournalStats:
    """Counters of the writer; ``transactions`` < ``batches`` shows group commit."""

    batches: int = 0
    transactions: int = 0
    records: int = 0
    snapshots: int = 0
    followed: int = 0  # records applied by catch_up (a standby following the journal)


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :meth:`Journal.open` found and rebuilt."""

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
    term: int = 0  # the epoch the batch was applied in: a snapshot is written in it or not at all
    barrier: bool = False  # answered only once everything before it, snapshots too, is done


# seconds a commit may take before the journal fails (Journal.commit_timeout)
DEFAULT_COMMIT_TIMEOUT = 5.0
# seconds an idle owner goes without confirming it still holds the shard
DEFAULT_OWNER_CHECK_INTERVAL = 1.0

# Records fetched per query while recovering or following: bounds the memory
# one fetch takes, whatever the length of the tail.
_FETCH = 5_000


class Journal(ABC):
    """A write-ahead journal of scheduler state changes (a ``BatchSink``).

    ``Scheduler(journal=...)`` is the usual way in; it opens, recovers,
    acquires, starts and closes the journal for you. By hand::

        journal.open(core)          # creates the journal, or recovers core from it
        journal.acquire()           # become its one writer (fences any earlier one)
        journal.catch_up(core)      # apply what an earlier writer wrote since open
        journal.start()             # in the running loop, before the owner starts
        owner = Owner(core, ..., sink=journal)
        ...
        await journal.close()       # after the owner stopped

    ``snapshot_every`` bounds how many records replay has to go through.
    """

    def __init__(
        self,
        *,
        snapshot_every: int,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT,
        snapshot_timeout: float | None = None,
        owner_check_interval: float = DEFAULT_OWNER_CHECK_INTERVAL,
    ) -> None:
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every must be at least 1, got {snapshot_every}")
        if not commit_timeout > 0:
            raise ValueError(f"commit_timeout must be above 0, got {commit_timeout}")
        if not owner_check_interval > 0:
            raise ValueError(f"owner_check_interval must be above 0, got {owner_check_interval}")
        self.owner_check_interval = owner_check_interval
        # called on the loop with the error when the journal fails outside any commit
        self.failure_listeners: list[Callable[[JournalError], None]] = []
        self.snapshot_every = snapshot_every
        self.commit_timeout = commit_timeout
        # a snapshot is one large write: it may take longer than a commit
        self.snapshot_timeout = (
            max(60.0, 10 * commit_timeout) if snapshot_timeout is None else snapshot_timeout
        )
        self.stats = JournalStats()
        self.recovery: Recovery | None = None
        self._core: SchedulerCore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._next_seq = 1
        self._since_snapshot = 0
        self._inflight = 0
        self._failed: JournalError | None = None
        self._closed = False
        self._opened = False
        self._term = 0
        self._holding = False  # acquired and not stepped down: the writer checks the term
        # what the writer thread is doing: (what, monotonic start, its limit), or None
        self._busy: tuple[str, float, float] | None = None
        self._waiting: set[asyncio.Future[None]] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._stalled = False  # the watchdog failed the journal: the writer may be stuck

    # -- what a backend provides ----------------------------------------------

    @property
    @abstractmethod
    def name(self) -> str:
        """What the journal is, for messages: a path, or a URL (no password) and shard."""

    @property
    @abstractmethod
    def identity(self) -> str:
        """The state this journal holds, the same across restarts and machines (no
        password): ``serve`` records it beside its request queue, so that a ``serve``
        with another journal or shard on the same queue is refused at start."""

    @property
    def former_identities(self) -> tuple[str, ...]:
        """How an earlier actorsched named this same journal (a queue may still hold it)."""
        return ()

    @abstractmethod
    def _connect(self) -> bool:
        """Connect, check or create the schema, take the writer's lock; True when new."""

    @abstractmethod
    def _load_snapshot(self) -> StoredSnapshot | None:
        """The stored snapshot, if any."""

    @abstractmethod
    def _load_records(self, after: int, limit: int) -> list[Row]:
        """Up to ``limit`` records with seq > ``after``, in order."""

    @abstractmethod
    def _write_records(self, rows: list[Row]) -> None:
        """Commit ``rows`` (consecutive seqs) in one transaction, or raise; writer thread."""

    @abstractmethod
    def _write_snapshot(self, snapshot: StoredSnapshot, term: int) -> None:
        """Store ``snapshot`` (taken in epoch ``term``) and drop records no reader needs.

        Writer thread. A backend with epochs writes it only while ``term`` is
        still the shard's epoch.
        """

    @abstractmethod
    def _disconnect(self) -> None:
        """Close connections and let go of the lock."""

    def _acquire(self) -> int:
        """Become the one writer; the epoch of this term (a lock held since open: 1)."""
        return 1

    def _writer_here(self) -> bool:
        """True when this process may write (a standby that never took over may not)."""
        return True

    def _check_still_writer(self) -> None:  # noqa: B027 (a hook: none by default)
        """Writer thread: raise :class:`JournalFenced` when another process took the shard."""

    def _check_recovered(self, last_seq: int) -> None:  # noqa: B027 (a hook: none by default)
        """Raise if recovery ended at ``last_seq`` while more is known to be committed."""

    def _committed(self, last_seq: int) -> None:  # noqa: B027 (a hook: none by default)
        """Note that records up to ``last_seq`` are durable (writer thread, after a commit)."""

    def _describe_stall(self) -> str:
        """What a stuck write waits on, if the backend can tell (blocking; a thread)."""
        return ""

    def _describe_failure(self, exc: BaseException) -> JournalError:
        """The error that stops the journal after ``exc`` failed a write."""
        return JournalError(
            f"could not write journal {self.name}: {exc}; the scheduler's answers are "
            "no longer durable: stop it and restart it on this journal"
        )

    # -- open, recover, follow (no owner running) -----------------------------

    def open(self, core: SchedulerCore) -> Recovery:
        """Open or create the journal and rebuild ``core`` (which must be empty) from it.

        Blocking; ``Scheduler`` runs it in a worker thread. Raises
        :class:`JournalError` for a journal that is foreign, damaged, newer,
        or held by another process.
        """
        if self._opened:
            raise JournalError(f"journal {self.name} is already open")
        if core.table.count or len(core.ledger):
            raise JournalError("a journal recovers into an empty core; this one holds state")
        started = time.perf_counter()
        created = self._connect()
        self._opened = True
        try:
            snapshot_seq, replayed = self._rebuild(core)
            self._check_recovered(self.last_seq)
        except BaseException:
            self._opened = False
            self._disconnect()
            raise
        self.recovery = Recovery(
            created,
            snapshot_seq,
            replayed,
            core.table.count,
            len(core.ledger),
            time.perf_counter() - started,
        )
        log.info("journal %s: %s", self.name, self.recovery)
        return self.recovery

    def _restore_snapshot(self, core: SchedulerCore) -> int:
        stored = self._load_snapshot()
        if stored is None:
            return 0
        if hashlib.sha256(stored.body.encode()).hexdigest() != stored.sha256:
            raise JournalError(
                f"the snapshot in {self.name} does not match its checksum: the journal is "
                "damaged; restore it from a backup"
            )
        try:
            restore(core, stored.body)
        except (ValueError, KeyError, TypeError) as exc:
            raise JournalError(f"the snapshot in {self.name} does not parse: {exc}") from exc
        return stored.seq

    def _replay(self, core: SchedulerCore) -> int:
        """Apply every record after the last one applied; how many there were."""
        replayed = 0
        while True:
            rows = self._load_records(self._next_seq - 1, _FETCH)
            for seq, kind, now, body, crc in rows:
                if seq != self._next_seq:
                    raise JournalGap(
                        f"journal {self.name} has record {seq} where record {self._next_seq} "
                        "was expected: the records this state needs were dropped by a newer "
                        "snapshot (a standby fell too far behind) or the journal is damaged; "
                        "restart to recover from the snapshot"
                    )
                if zlib.crc32(body.encode()) != crc:
                    raise JournalError(
                        f"record {seq} in {self.name} does not match its CRC: the journal is "
                        "damaged"
                    )
                try:
                    apply(core, Record(kind, now, body))
                except Exception as exc:
                    raise JournalError(f"record {seq} ({kind}) in {self.name}: {exc}") from exc
                self._next_seq = seq + 1
                replayed += 1
            if len(rows) < _FETCH:
                return replayed

    def acquire(self) -> int:
        """Become the journal's one writer; returns the epoch of this term.

        PostgreSQL bumps the shard's epoch, so a commit of any earlier owner
        fails from now on; call :meth:`catch_up` after it, before answering
        anyone, to apply what that owner wrote. Blocking.
        """
        if not self._opened:
            raise JournalError(f"open journal {self.name} before acquiring it")
        self._check_usable()
        self._term = self._acquire()
        self._holding = True
        return self._term

    def catch_up(self, core: SchedulerCore) -> int:
        """Apply the records written since this journal last read or wrote; how many.

        A standby calls it to follow the active writer, and once more after
        :meth:`acquire`. Only while no owner runs on ``core``. Blocking.
        """
        if self._core is None and self._opened:
            raise JournalGap(f"journal {self.name}: the last reload did not finish; reload again")
        if core is not self._core:
            raise JournalError("catch_up applies records to the core this journal recovered")
        self._check_usable()
        applied = self._replay(core)
        self._since_snapshot += applied
        self.stats.followed += applied
        return applied

    def reload(self, core: SchedulerCore) -> int:
        """Rebuild ``core`` (empty) from the snapshot and the records after it; how many records.

        For a standby whose state fell more than a snapshot behind (a
        :class:`JournalGap` from :meth:`catch_up`): it follows ``core`` from
        then on. Only while no owner runs. Blocking.
        """
        if core.table.count or len(core.ledger):
            raise JournalError("a journal reloads into an empty core; this one holds state")
        self._check_usable()
        self._core = None  # until it finishes: catch_up on the old state is refused
        return self._rebuild(core)[1]

    def _rebuild(self, core: SchedulerCore) -> tuple[int, int]:
        """Restore the snapshot into ``core`` and replay what follows; (snapshot seq, replayed)."""
        snapshot_seq = self._restore_snapshot(core)
        self._next_seq = snapshot_seq + 1
        replayed = self._replay(core)
        self._core = core
        self._since_snapshot = replayed
        return snapshot_seq, replayed

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self._closed:
            raise JournalError(f"journal {self.name} is closed")

    @property
    def failed(self) -> JournalError | None:
        """The error that stopped the journal (fail-stop), or None while it works."""
        return self._failed

    @property
    def last_seq(self) -> int:
        """The seq of the last record written or applied."""
        return self._next_seq - 1

    # -- writing (the owner hands batches over) -------------------------------

    def start(self) -> None:
        """Start the writer thread; call in the running loop, after :meth:`open`."""
        if not self._opened:
            raise JournalError("open the journal before starting it")
        if self._thread is not None:
            raise JournalError(f"journal {self.name} already started")
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(
            target=self._write_loop, name="actorsched-journal", daemon=True
        )
        self._thread.start()
        self._watchdog = self._loop.create_task(self._watch(), name="actorsched-journal-watchdog")

    def _still_busy(self, what: str, limit: float) -> None:
        """Writer thread: the write in progress goes on as ``what`` with a new limit
        from now (a backend that retries a lost commit under a bound of its own)."""
        if self._busy is not None:
            self._busy = (what, time.monotonic(), limit)

    @property
    def overdue(self) -> bool:
        """True while the write in progress has taken longer than its limit."""
        busy = self._busy
        return busy is not None and time.monotonic() - busy[1] > busy[2]

    async def _watch(self) -> None:
        """Fail the journal when a write outlives its limit (the loop's side)."""
        period = min(self.commit_timeout / 4, 0.5)
        while self._failed is None:
            await asyncio.sleep(period)
            busy = self._busy
            if busy is None or not self.overdue:
                continue
            what, since, limit = busy
            try:
                why = await asyncio.wait_for(_in_daemon_thread(self._describe_stall), 3.0)
            except Exception as exc:
                why = f"the database did not say what it waits on ({type(exc).__name__})"
            if self._busy is not busy or self._failed is not None:
                continue  # it finished meanwhile
            self._stalled = True
            self._fail(
                JournalError(
                    f"journal {self.name}: a {what} has not finished in "
                    f"{time.monotonic() - since:.1f}s (limit {limit:g}s)"
                    + (f"; {why}" if why else "")
                    + "; nothing after it is durable, so this scheduler stops answering"
                )
            )
            failed = self._failed
            assert failed is not None
            for future in list(self._waiting):
                if not future.done():
                    future.set_exception(failed)
            return

    def submit(self, batch: list[Envelope]) -> Awaitable[None]:
        """Hand over an applied batch; the awaitable finishes once it is durable."""
        loop = self._loop
        if loop is None:
            raise JournalError("start the journal before handing it batches")
        future: asyncio.Future[None] = loop.create_future()
        if self._failed is None and self._closed:
            self._failed = JournalError(f"journal {self.name} is closed")
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
        self._waiting.add(future)
        future.add_done_callback(self._waiting.discard)
        self._queue.put(_Pending(batch, future, image, self._term))
        return future

    async def quiesce(self) -> None:
        """Wait until the writer is idle: every batch handed over, and its snapshot, written.

        ``Scheduler.step_down`` waits for it, so that nothing of a term is
        written after the scheduler went back to following.
        """
        self._holding = False  # the term is over: nothing more to confirm
        if self._thread is None or self._loop is None or self._failed is not None:
            return
        done: asyncio.Future[None] = self._loop.create_future()
        self._inflight += 1
        self._queue.put(_Pending([], done, None, self._term, barrier=True))
        with contextlib.suppress(JournalError):
            await done

    def _fail(self, exc: JournalError) -> None:
        if self._failed is None:
            log.error("journal %s failed; every later call fails too: %s", self.name, exc)
            self._failed = exc

    def _write_loop(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=self.owner_check_interval)
            except queue.Empty:
                self._confirm_term()
                continue
            group = [first]
            with contextlib.suppress(queue.Empty):
                while True:
                    group.append(self._queue.get_nowait())
            items = [item for item in group if item is not None]
            if items:
                error, snapshot = self._commit(items)
                loop = self._loop
                assert loop is not None
                barriers = [item for item in items if item.barrier]
                # a closed loop has nobody waiting any more
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(
                        self._settle, [item for item in items if not item.barrier], error
                    )
                if snapshot is not None:
                    self._snapshot(*snapshot)
                if barriers:
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(self._settle, barriers, error)
            if len(items) != len(group):  # the stop sentinel, always last
                return

    def _confirm_term(self) -> None:
        """Writer thread, idle: fail the journal when this owner's term was taken over."""
        if not self._holding or self._failed is not None or self._closed:
            return
        self._busy = ("check of the shard's owner", time.monotonic(), self.commit_timeout)
        try:
            self._check_still_writer()
        except JournalError as exc:
            self._failed = exc
            log.error("%s", exc)
        except Exception as exc:
            # a database that cannot be asked is not a takeover: the next commit tells
            log.warning("journal %s: could not confirm this owner's term: %s", self.name, exc)
            return
        finally:
            self._busy = None
        failed = self._failed
        loop = self._loop
        if failed is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop has nobody to tell
                loop.call_soon_threadsafe(self._tell_failure, failed)

    def _tell_failure(self, error: JournalError) -> None:
        for listener in list(self.failure_listeners):
            listener(error)

    def _commit(
        self, items: list[_Pending]
    ) -> tuple[JournalError | None, tuple[CoreImage, int, int] | None]:
        """Write the records of ``items`` in one transaction.

        Returns the error instead of raising, and the last snapshot captured
        among ``items`` with the seq of the last record it covers (an earlier
        one in the same group is superseded by it).
        """
        if self._failed is not None:
            return self._failed, None
        seq = self._next_seq
        snapshot: tuple[CoreImage, int, int] | None = None
        rows: list[Row] = []
        try:
            for item in items:
                for record in records_of(item.batch):
                    crc = zlib.crc32(record.body.encode())
                    rows.append((seq, record.kind, record.now, record.body, crc))
                    seq += 1
                if item.image is not None:
                    snapshot = (item.image, seq - 1, item.term)
            if rows:
                self._busy = ("commit", time.monotonic(), self.commit_timeout)
                try:
                    self._write_records(rows)
                finally:
                    self._busy = None
                self._committed(rows[-1][0])
        except Exception as exc:
            error = exc if isinstance(exc, JournalError) else self._describe_failure(exc)
            if error is not exc:
                error.__cause__ = exc
            self._failed = error
            log.error("%s", error)
            return error, None
        self._next_seq = seq
        self.stats.batches += len(items)
        self.stats.transactions += 1 if rows else 0
        self.stats.records += len(rows)
        return None, snapshot

    def _snapshot(self, image: CoreImage, seq: int, term: int) -> None:
        """Write ``image`` (the state after record ``seq``) and drop the records it covers."""
        try:
            body = encode(image)
            self._busy = ("snapshot", time.monotonic(), self.snapshot_timeout)
            try:
                self._write_snapshot(
                    StoredSnapshot(seq, body, hashlib.sha256(body.encode()).hexdigest()), term
                )
            finally:
                self._busy = None
        except JournalError as exc:  # this process may no longer write it: one line
            log.warning("no snapshot of journal %s at record %d: %s", self.name, seq, exc)
            return
        except Exception:
            log.exception(
                "could not write a snapshot of journal %s at record %d; nothing is lost "
                "(replay starts from the previous snapshot), the next one is tried after "
                "%d more records",
                self.name,
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
        """Write a last snapshot, stop the writer and close (after the owner stopped)."""
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        if self._stalled:
            # the writer thread is stuck in the database (a daemon thread: the process
            # may exit under it); joining it or closing its connections could hang too
            self._opened = False
            return
        try:
            if self._thread is not None:
                if (
                    self._failed is None
                    and self._since_snapshot
                    and self._core is not None
                    and self._writer_here()
                ):
                    assert self._loop is not None
                    final: asyncio.Future[None] = self._loop.create_future()
                    self._inflight += 1
                    self._queue.put(_Pending([], final, capture(self._core), self._term))
                    with contextlib.suppress(JournalError):
                        await final
                self._queue.put(None)
                await asyncio.to_thread(self._thread.join)
        finally:
            if self._opened:
                self._opened = False
                await asyncio.to_thread(self._disconnect)

    def close_now(self) -> None:
        """Close a journal that was opened but never started (start-up failed)."""
        if self._thread is not None:
            raise JournalError("the journal is running; await close() instead")
        self._closed = True
        if self._opened:
            self._opened = False
            self._disconnect()


def _in_daemon_thread(fn: Callable[[], str]) -> asyncio.Future[str]:
    """``fn()`` in a daemon thread of its own: one stuck in the database must not hold
    the process at exit, as a thread of the loop's default executor would."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def run() -> None:
        result: str | None = None
        error: BaseException | None = None
        try:
            result = fn()
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
            loop.call_soon_threadsafe(_settle_future, future, result, error)

    threading.Thread(target=run, name="actorsched-journal-describe", daemon=True).start()
    return future


def _settle_future(
    future: asyncio.Future[str], result: str | None, exc: BaseException | None
) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result or "")


def rows_of(records: Iterable[tuple[int, str, float, str, int]]) -> list[Row]:
    """Rows as plain tuples of the right types (a driver may return its own row type)."""
    return [(int(s), str(k), float(n), str(b), int(c)) for s, k, n, b, c in records]
