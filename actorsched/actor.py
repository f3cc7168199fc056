"""The owner task: the only code that touches the core, one message at a time.

Rules this module keeps:

* One asyncio task (the owner) calls the core; it never awaits while a
  message is being applied, so no caller can see a half-applied change.
* The mailbox is a bounded ``asyncio.Queue`` (``mailbox_size``): when it is
  full, a message waits in line for room (backpressure), in order of
  arrival: the owner moves waiting messages into the room it frees, first
  come first served, and a new message never overtakes one that waits.
* The line is bounded too (``max_waiting``), as anyio's memory streams are.
  Past it, a sender that cannot wait (:meth:`Owner.ask`) gets
  :class:`MailboxFull` and nothing is sent; a sender that awaits
  (``ask(wait=True)``, :meth:`Owner.send`) waits unsent for a place in the
  line, in order, and one that gives up while unsent sends nothing. Each of
  those holds its caller's task: they are as many as the caller runs at once
  (the AMQP service: at most one per delivery in flight). Between owner
  steps a message waits in line only while the mailbox is full, and a
  sender waits unsent only while the line is full too: a send that finds
  room in the mailbox overtakes nobody, which keeps the fast path one check.
* Each message travels in an :class:`Envelope` with the future that answers
  it. A message whose handler raises fails its own caller; the owner goes on.
* ``stop`` is itself a message, so everything sent before it is handled.
  Whatever is still queued after it, or sent later, fails with
  :class:`SchedulerStopped`: no caller is left hanging.
* Per wake-up the owner drains up to ``max_batch`` envelopes. A batch sink
  (the journal) sees each batch's records before its callers are answered.
* A placement that fits nowhere and asks to wait (``RequestSpec.wait``)
  waits here, in the owner, at most ``max_waiting_requests`` of them. Every
  command that changed state (other than a placement) is a freeing event and
  bumps a sequence number; each waiter remembers the number it was last
  tried at. Before a batch is handed to the journal, every waiter with an
  older number is tried again (first a check of the headroom of the rows
  those events freed, then the full placement), by (-priority, arrival), and also before a
  later placement of the same batch (which must not take the room first): so
  an event later in the same batch as the wait, or in any batch after it, is
  never missed, and a waiter is never tried twice against the same state. A
  placed waiter joins the batch (after the events that freed its room) and
  is journaled and answered with it. A timer fails a waiter at its ``wait`` with its last
  NoValidHost; stopping fails the waiters with SchedulerStopped.
* Preemption (``SchedulerConfig.preemption``) is decided when a request
  arrives, never for a request waiting for room: a woken waiter only takes
  room that freed, and a redelivery of a waiting request (one of its uuids
  in line) is placed without preempting and otherwise waits with it. A
  placement that preempted is a freeing event on the host it freed (its
  victims may have left more room than it took).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .core import (
    COMMANDS,
    Command,
    Release,
    SchedulerCore,
    SelectDestinations,
    UpdateHost,
    UpdateHosts,
)
from .errors import MailboxFull, NoValidHost, SchedulerError, SchedulerStopped
from .models import SchedulerConfig

__all__ = ["BatchSink", "Envelope", "Owner"]

R = TypeVar("R")

log = logging.getLogger("actorsched.actor")

_DEFAULT_MAX_WAITING: int = SchedulerConfig.model_fields["max_waiting"].default
_DEFAULT_MAX_WAITING_REQUESTS: int = SchedulerConfig.model_fields["max_waiting_requests"].default
# The freeing events that wake waiting placements: every command that changes
# state (it makes a journal record), but a placement, which only takes room.
# A new state-changing command (a move's confirm) is one by being listed in
# core.COMMANDS with a record kind; nothing to add here.
_FREEING: tuple[type[Command[Any]], ...] = tuple(
    c.command for c in COMMANDS if c.record is not None and c.command is not SelectDestinations
)


@dataclass(slots=True)
class Envelope:
    """A command, the future that answers it, and what the owner made of it."""

    command: Command[Any] | None  # None is the stop message
    future: asyncio.Future[Any]  # typed by its command's answer where it is handed out
    now: float = 0.0
    result: object = None
    error: BaseException | None = None
    sent: float = 0.0  # time.perf_counter() when sent, while an observer watches
    preempted: bool = False  # a placement that released claims now (not a repeat's answer)


# Told each answered batch, and how long its journal commit took (None: no
# journal): metrics and decision log lines, off the owner's step.
Observer = Callable[[list[Envelope], float | None], None]


class BatchSink(Protocol):
    """Receives each applied batch before its callers are answered (the journal)."""

    def submit(self, batch: list[Envelope]) -> Awaitable[None]:
        """Start making ``batch`` durable; the returned awaitable finishes when it is."""
        ...


@dataclass(slots=True, eq=False)
class _Waiter:
    """A placement waiting in the owner for room."""

    order: tuple[int, int]  # (-priority, arrival): the order waiters are tried in
    envelope: Envelope
    error: NoValidHost  # its last explanation, raised at its deadline
    seen: int  # the freeing-event number it was last tried at
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class _Stats:
    handled: int = 0
    failed: int = 0
    batches: int = 0
    refused: int = 0  # sends refused with MailboxFull


class Owner:
    """Owns a :class:`SchedulerCore` and applies messages from a bounded mailbox."""

    def __init__(
        self,
        core: SchedulerCore,
        *,
        mailbox_size: int,
        max_batch: int,
        clock: Callable[[], float],
        sink: BatchSink | None = None,
        max_waiting: int = _DEFAULT_MAX_WAITING,
        observer: Observer | None = None,
        max_waiting_requests: int = _DEFAULT_MAX_WAITING_REQUESTS,
    ) -> None:
        if max_waiting < 0:
            raise ValueError(f"max_waiting must be 0 or more, got {max_waiting}")
        self.core = core
        self._queue: asyncio.Queue[Envelope] = asyncio.Queue(mailbox_size)
        # messages sent while the mailbox was full, waiting for room, oldest first
        self._waiting: collections.deque[Envelope] = collections.deque()
        self._max_waiting = max_waiting
        # awaiting senders past max_waiting, unsent, oldest first: the envelope and,
        # for send(), the future that tells it the envelope got a place
        self._blocked: collections.deque[tuple[Envelope, asyncio.Future[None] | None]] = (
            collections.deque()
        )
        self._max_batch = max_batch
        self._clock = clock
        self._sink = sink
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._pending_commits: set[asyncio.Task[None]] = set()
        self.stats = _Stats()
        self.observer = observer
        self._current: list[Envelope] = []  # the batch being applied
        # placements waiting for room, in the order they are tried (-priority, arrival)
        self._waiters: list[_Waiter] = []
        # how many waiters ask for each instance uuid (a redelivery of a waiting
        # request is one more): read before a placement may preempt
        self._waiting_uuids: collections.Counter[str] = collections.Counter()
        self._max_waiting_requests = max_waiting_requests
        self._arrivals = itertools.count()
        self._freed = 0  # freeing events applied so far (see _FREEING)
        self._woken_at = 0  # the value of _freed at the last pass over the waiters
        # the freeing events since that pass, while some request waits: their
        # number and the rows that gained room (None: any row may have)
        self._events: list[tuple[int, list[int] | None]] = []

    @property
    def mailbox_depth(self) -> int:
        """Messages in the mailbox (at most its size)."""
        return self._queue.qsize()

    @property
    def waiting_for_room(self) -> int:
        """Messages sent while the mailbox was full, waiting for room (at most max_waiting)."""
        return len(self._waiting)

    @property
    def blocked_senders(self) -> int:
        """Awaiting senders past max_waiting, waiting unsent for a place in the line."""
        return len(self._blocked)

    @property
    def pending_requests(self) -> int:
        """Placements waiting for room (RequestSpec.wait), at most max_waiting_requests."""
        return len(self._waiters)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._closed

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("owner already started")
        self._task = asyncio.get_running_loop().create_task(self._run(), name="actorsched-owner")
        self._task.add_done_callback(self._on_owner_done)

    def ask(self, command: Command[R], wait: bool = False) -> asyncio.Future[R]:
        """Send ``command``; the future this returns gives its result (or raises its error).

        A plain function: the message is sent by the time it returns (into
        the mailbox, or in line for room in it when the mailbox is full),
        whether or not anyone awaits the future. When the line holds
        ``max_waiting`` messages already, it raises :class:`MailboxFull` and
        sends nothing; with ``wait=True`` (for a caller that awaits the
        future at once) the message waits unsent for a place in the line
        instead, and is never sent if the future is cancelled first.
        """
        if self._closed or self._task is None:
            raise SchedulerStopped(
                "the scheduler is not running; start it (async with Scheduler())"
            )
        envelope = Envelope(command, asyncio.get_running_loop().create_future())
        if self.observer is not None:
            envelope.sent = time.perf_counter()
        if not self._waiting:  # nobody in line: nobody unsent either, unless the mailbox is full
            try:
                self._queue.put_nowait(envelope)
                return envelope.future
            except asyncio.QueueFull:  # backpressure: wait for room, first come first served
                pass
        if not self._get_in_line(envelope):
            if not wait:
                self.stats.refused += 1
                raise self._full()
            self._blocked.append((envelope, None))
        return envelope.future

    async def send(self, command: Command[R]) -> asyncio.Future[R]:
        """Send ``command`` once it has a place (waiting for one), and return its future.

        What :meth:`ask` does, except that past ``max_waiting`` it waits
        (unsent, in order) instead of raising: a sender that feeds many
        commands one after the other thus holds at most one waiting at a
        time. Raises :class:`SchedulerStopped` if the owner stops first.
        """
        if self._closed or self._task is None:
            raise SchedulerStopped(
                "the scheduler is not running; start it (async with Scheduler())"
            )
        envelope = Envelope(command, asyncio.get_running_loop().create_future())
        if self.observer is not None:
            envelope.sent = time.perf_counter()
        if not self._waiting:
            try:
                self._queue.put_nowait(envelope)
                return envelope.future
            except asyncio.QueueFull:
                pass
        if not self._get_in_line(envelope):
            placed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._blocked.append((envelope, placed))
            await placed  # cancelled here, the command is never sent
        return envelope.future

    def _get_in_line(self, envelope: Envelope) -> bool:
        """Put ``envelope`` last in line for room; False when the line is full.

        Also False while unsent senders wait: the line was full when they
        came, and a new message never overtakes them.
        """
        if self._blocked or len(self._waiting) >= self._max_waiting:
            return False
        self._waiting.append(envelope)
        return True

    def _full(self) -> MailboxFull:
        blocked = len(self._blocked)
        return MailboxFull(
            f"the scheduler's mailbox is full: {self._queue.maxsize} messages in it "
            f"(SchedulerConfig.mailbox_size) and {len(self._waiting)} waiting in line for "
            f"room (SchedulerConfig.max_waiting {self._max_waiting})"
            + (f", and {blocked} awaiting callers wait for a place in that line" if blocked else "")
            + "; nothing was sent. Await the call instead (the typed methods or "
            "submit_when_room() wait for room), send fewer at once, or raise "
            "SchedulerConfig.max_waiting"
        )

    def _let_in(self) -> None:
        """Move waiting messages into the room the owner just made, oldest first."""
        waiting = self._waiting
        queue = self._queue
        while waiting and not queue.full():
            queue.put_nowait(waiting.popleft())
        if self._blocked:
            self._place_blocked()

    def _place_blocked(self) -> None:
        """Give unsent senders the places left, oldest first (mailbox, then line)."""
        blocked = self._blocked
        waiting = self._waiting
        queue = self._queue
        while blocked:
            if not waiting and not queue.full():
                put: Callable[[Envelope], None] = queue.put_nowait
            elif len(waiting) < self._max_waiting:
                put = waiting.append
            else:
                return
            envelope, placed = blocked.popleft()
            if (envelope.future if placed is None else placed).done():
                continue  # its caller gave up before it was sent: nothing to send
            put(envelope)
            if placed is not None:
                placed.set_result(None)

    async def stop(self) -> None:
        """Handle everything sent so far, fail what comes after, wait for the owner."""
        if self._task is None:
            self._closed = True
            return
        if not self._closed and not self._task.done():
            stop = Envelope(None, asyncio.get_running_loop().create_future())
            # never refused: it may take one place past max_waiting, ahead of
            # unsent senders (they were not sent before it, so they fail)
            if self._waiting or self._queue.full():
                self._waiting.append(stop)
            else:
                self._queue.put_nowait(stop)
            # a failed journal commit fails the stop message too: stopping still succeeds
            with contextlib.suppress(SchedulerError):
                await stop.future
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    # -- the owner task -----------------------------------------------------

    async def _run(self) -> None:
        queue = self._queue
        core = self.core
        stopping = False
        while not stopping:
            batch = [await queue.get()]
            while len(batch) < self._max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            self._current = batch  # failed at once if the owner dies on it
            self._let_in()
            applied: list[Envelope] = []
            for index, env in enumerate(batch):
                if env.command is None:
                    stopping = True
                    for rest in batch[index + 1 :]:
                        _fail(rest.future, _stopped())
                    applied.append(env)
                    break
                if self._freed != self._woken_at and isinstance(env.command, SelectDestinations):
                    self._wake(applied)  # room freed earlier in the batch: waiters first
                env.now = self._clock()
                claimed_on = self._claim_row(env.command) if self._waiters else None
                preemptions = core.preemptions
                try:
                    if self._waiters and self._already_waiting(env.command):
                        # it waits for room already: it may not preempt for it
                        assert isinstance(env.command, SelectDestinations)
                        env.result = core.select_destinations(
                            env.command.spec, env.now, preempt=False
                        )
                    else:
                        env.result = core.handle(env.command, env.now)
                except NoValidHost as exc:
                    if self._wait(env, exc):
                        continue  # not answered (nor journaled) until placed
                    self.stats.failed += 1
                except Exception as exc:  # a bad message fails its caller only
                    env.error = exc
                    self.stats.failed += 1
                else:
                    if isinstance(env.command, _FREEING) and _changed(env.result):
                        self._freed += 1
                        if self._waiters:
                            self._events.append(
                                (self._freed, self._rows_freed(env.command, env.result, claimed_on))
                            )
                    elif core.preemptions != preemptions:
                        env.preempted = True
                        if self._waiters:
                            self._preempted(env.result)
                applied.append(env)
            if self._freed != self._woken_at and not stopping:
                self._wake(applied)
            self.stats.handled += len(applied)
            self.stats.batches += 1
            self._current = []
            if self._sink is None:
                _answer(applied)
                self._observe(applied, None)
            else:
                # hand the batch over now, while the core is as this batch left it,
                # and commit in the background: the owner goes on with the next batch
                handed = time.perf_counter()
                commit = asyncio.ensure_future(
                    self._commit(applied, self._hand_off(applied), handed)
                )
                self._pending_commits.add(commit)
                commit.add_done_callback(self._pending_commits.discard)
        if self._pending_commits:
            await asyncio.gather(*self._pending_commits, return_exceptions=True)
        self._closed = True
        self._fail_queued()

    # -- waiting placements ---------------------------------------------------

    def _wait(self, env: Envelope, exc: NoValidHost) -> bool:
        """Keep a placement that fits nowhere waiting, if it asks to; else fail it.

        Only ``select_destinations`` waits: a move or a reschedule that finds no
        host (NoValidHost, MaxRetriesExceeded) fails at once."""
        command = env.command
        if not isinstance(command, SelectDestinations) or not command.spec.wait:
            env.error = exc
            return False
        if len(self._waiters) >= self._max_waiting_requests:
            env.error = NoValidHost(
                f"{exc}; and the waiting line is full: {len(self._waiters):,} requests "
                f"wait for room (SchedulerConfig.max_waiting_requests "
                f"{self._max_waiting_requests:,}), so this one could not wait",
                instance_uuid=exc.instance_uuid,
                total_hosts=exc.total_hosts,
                filter_counts=exc.filter_counts,
            )
            return False
        if env.future.done():  # its caller gave up already
            env.error = exc
            return False
        waiter = _Waiter((-command.spec.priority, next(self._arrivals)), env, exc, self._freed)
        bisect.insort(self._waiters, waiter, key=_order)
        self._waiting_uuids.update(command.spec.instance_uuids)
        waiter.timer = asyncio.get_running_loop().call_later(
            command.spec.wait, self._expire, waiter
        )
        env.future.add_done_callback(lambda _: self._drop(waiter))
        return True

    def _already_waiting(self, command: Command[Any] | None) -> bool:
        """Is ``command`` a placement one of whose uuids waits in line already (a
        redelivery of a waiting request), while preemption is on? It then
        waits with it: it may not preempt for room it is waiting for."""
        if not isinstance(command, SelectDestinations) or not self.core.config.preemption:
            return False
        waiting = self._waiting_uuids
        return any(uuid in waiting for uuid in command.spec.instance_uuids)

    def _preempted(self, result: object) -> None:
        """A placement that preempted released claims: a freeing event on the
        rows it freed (they may have more room than it took)."""
        if not isinstance(result, list):
            return
        row_of = self.core.table.row_of
        rows = [
            row
            for selection in result
            if selection.preempted and (row := row_of.get(selection.host)) is not None
        ]
        if rows:
            self._freed += 1
            self._events.append((self._freed, rows))

    def _wake(self, applied: list[Envelope]) -> None:
        """Try each waiter that has not seen the latest freeing events, in order;
        a placed one joins ``applied``, after the events that made its room."""
        freed = self._woken_at = self._freed
        events, self._events = self._events, []
        core = self.core
        for waiter in list(self._waiters):  # a copy: a placed waiter leaves the list
            if waiter.seen >= freed:
                continue
            env = waiter.envelope
            if env.future.done():
                self._drop(waiter)
                continue
            if not self._may_fit(waiter, events):  # no row that gained room can take it
                waiter.seen = freed
                continue
            command = env.command
            assert isinstance(command, SelectDestinations)
            env.now = self._clock()
            try:
                # a waiting request takes room that freed; it never preempts
                env.result = core.select_destinations(command.spec, env.now, preempt=False)
            except NoValidHost as exc:
                waiter.error = exc
                waiter.seen = freed
                continue
            except Exception as exc:  # e.g. max_claims reached: it fails now
                env.error = exc
                self.stats.failed += 1
            self._drop(waiter)
            applied.append(env)

    def _claim_row(self, command: Command[Any] | None) -> int | None:
        """The row of the claim a Release will free (read before it is applied)."""
        if isinstance(command, Release):
            claim = self.core.ledger.claims.get(command.instance_uuid)
            return None if claim is None else claim.row
        return None

    def _rows_freed(
        self, command: Command[Any], result: object, claimed_on: int | None
    ) -> list[int] | None:
        """The rows a freeing event may have given room on; None: any row (a
        removal ends claims that hints and groups count, an aggregate change
        rewrites ratios and zones, a command not known here)."""
        if isinstance(command, Release):
            return None if claimed_on is None else [claimed_on]
        row_of = self.core.table.row_of
        if isinstance(command, UpdateHost):
            row = row_of.get(command.report.host)
            return None if row is None else [row]
        if isinstance(command, UpdateHosts) and isinstance(result, list):
            rows = [
                row_of.get(report.host)
                for report, applied in zip(command.reports, result, strict=True)
                if applied is True
            ]
            return None if None in rows else [row for row in rows if row is not None]
        return None

    def _may_fit(self, waiter: _Waiter, events: list[tuple[int, list[int] | None]]) -> bool:
        """False only when none of its uuids holds a claim (a twin request placed)
        and no row that gained room since ``waiter`` was last tried has
        the headroom for one of its instances (the resource filters' rule, which
        every placement, forced ones too, keeps): then nothing it could pass changed."""
        rows: list[int] = []
        for number, freed in events:
            if number > waiter.seen:
                if freed is None:
                    return True
                rows.extend(freed)
        if not rows or not self.core.ranker.fused_resources:
            return True  # nothing known to narrow it by: the full placement decides
        command = waiter.envelope.command
        assert isinstance(command, SelectDestinations)
        spec = command.spec
        claims = self.core.ledger.claims
        if any(uuid in claims for uuid in spec.instance_uuids):
            return True  # a twin was placed (a redelivery): the placement answers it

        headroom = self.core.table.headroom[:, rows]
        fits = (
            (headroom[0] >= spec.memory_mb)
            & (headroom[1] >= spec.vcpus)
            & (headroom[2] >= spec.disk_gb)
        )
        return bool(fits.any())

    def _drop(self, waiter: _Waiter) -> None:
        """Take ``waiter`` out of the line (placed, expired, given up); idempotent."""
        waiters = self._waiters
        index = bisect.bisect_left(waiters, waiter.order, key=_order)
        if index < len(waiters) and waiters[index] is waiter:
            del waiters[index]
            command = waiter.envelope.command
            assert isinstance(command, SelectDestinations)
            counts = self._waiting_uuids
            counts.subtract(command.spec.instance_uuids)
            for uuid in command.spec.instance_uuids:
                if counts[uuid] <= 0:
                    del counts[uuid]
            if waiter.timer is not None:
                waiter.timer.cancel()

    def _expire(self, waiter: _Waiter) -> None:
        """The timer of a waiter still waiting at its deadline: NoValidHost, as it was."""
        if waiter in self._waiters:
            self._drop(waiter)
            self.stats.failed += 1
            env = waiter.envelope
            env.error = waiter.error
            _answer([env])
            self._observe([env], None)

    def _hand_off(self, batch: list[Envelope]) -> Awaitable[None] | BaseException:
        assert self._sink is not None
        try:
            return self._sink.submit(batch)
        except Exception as exc:
            return exc

    async def _commit(
        self, batch: list[Envelope], durable: Awaitable[None] | BaseException, handed: float
    ) -> None:
        try:
            if isinstance(durable, BaseException):
                raise durable
            await durable
        except SchedulerError as exc:  # the journal logged it once; not a traceback per batch
            log.debug("journal commit failed; failing %d callers: %s", len(batch), exc)
            for env in batch:
                _fail(env.future, exc)
            return
        except Exception as exc:
            log.exception("journal commit failed; failing %d callers", len(batch))
            for env in batch:
                _fail(env.future, exc)
            return
        _answer(batch)
        self._observe(batch, time.perf_counter() - handed)

    def _observe(self, batch: list[Envelope], commit_seconds: float | None) -> None:
        observer = self.observer
        if observer is None:
            return
        try:
            observer(batch, commit_seconds)
        except Exception:  # metrics must never stop the owner
            log.exception("the batch observer failed; it is switched off")
            self.observer = None

    def _fail_queued(self) -> None:
        self._waiting_uuids.clear()
        while self._waiters:  # a waiter is not durable until placed: a restart forgets it
            waiter = self._waiters.pop()
            if waiter.timer is not None:
                waiter.timer.cancel()
            _fail(waiter.envelope.future, _stopped())
        while not self._queue.empty():
            env = self._queue.get_nowait()
            _fail(env.future, _stopped())
        while self._waiting:
            _fail(self._waiting.popleft().future, _stopped())
        while self._blocked:
            envelope, placed = self._blocked.popleft()
            _fail(envelope.future if placed is None else placed, _stopped())

    def _on_owner_done(self, task: asyncio.Task[None]) -> None:
        self._closed = True
        died = None if task.cancelled() else task.exception()
        # the batch it died on: applied or not, never answered nor made durable
        for env in self._current:
            _fail(env.future, SchedulerStopped(f"the scheduler's owner task died: {died!r}"))
        self._current = []
        self._fail_queued()
        if died is not None:
            log.error("scheduler owner task died", exc_info=died)


def _order(waiter: _Waiter) -> tuple[int, int]:
    return waiter.order


def _changed(result: object) -> bool:
    """Whether a state-changing command's answer says it changed something."""
    if isinstance(result, list):  # UpdateHosts: one applied flag per report
        return any(flag is True for flag in result)
    return result is not False


def _stopped() -> SchedulerStopped:
    return SchedulerStopped("the scheduler stopped before it handled this call")


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _answer(batch: list[Envelope]) -> None:
    for env in batch:
        if env.future.done():  # the caller gave up (cancelled); the change stands
            continue
        if env.error is not None:
            env.future.set_exception(env.error)
        else:
            env.future.set_result(env.result)
