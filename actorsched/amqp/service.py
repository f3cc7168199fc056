"""The AMQP service: consume a RabbitMQ queue and answer each request from one Scheduler.

Rules this module keeps:

* A delivery is acked only after the owner has answered it *and* its reply
  (when ``reply_to`` is set) is confirmed by the broker. Anything that goes
  wrong before that leaves it unacked, so the broker delivers it again;
  claims are idempotent per instance uuid, so a second delivery is harmless.
* Each delivery is handled in its own task, so many requests reach the
  owner's mailbox together and it can batch them. The broker never hands
  out more than ``prefetch`` at once, and ``prefetch`` is at most the
  mailbox size: a flood waits in the broker, not in this process.
* A ``batch`` message is one delivery carrying several operations: its
  items are dispatched concurrently (so the owner takes them in one
  batch), it gets one reply with one reply object per item, and it is
  acked once every item is answered and that reply is confirmed. A bad
  item gets its own error; the others still run. Metrics count items.
  Items go to the owner in order; when its mailbox and the line waiting
  for room in it (``max_waiting``) are full, the batch waits for a place
  item by item, so a delivery holds at most one item waiting unsent and
  no batch is refused for its size (at most ``MAX_BATCH_ITEMS`` items).
* Bad input (see :mod:`.protocol`) is answered with an error when it can
  be, copied to ``<queue>.dead`` with the reason in a header, acked, and
  logged once. It never reaches the scheduler and never stops the consumer.
* ``stop`` cancels the consumer first, then waits for what is in flight to
  be answered and acked, then closes. Deliveries the broker had sent but
  this process had not started go back to the queue when the channel closes.
* One owner per queue. The queue has ``x-single-active-consumer``: of all
  the services consuming it, the broker delivers to one; the others wait
  as standbys (their scheduler follows the journal). A consumer is never
  told it became the active one: it learns from its first delivery, and
  then, before answering anything, takes the journal over (PostgreSQL
  bumps the shard's epoch, fencing the previous owner) and applies what
  the journal holds beyond its own state. A lost channel or connection
  ends the term (the broker may give the queue to another consumer
  meanwhile): the scheduler steps down, and the next delivery starts a
  new term the same way.
* Fail-stop: a journal error (a failed write, or fenced: another owner
  took the shard) is never answered or acked. The service stops consuming
  at once, logs why in one line, and sets :attr:`SchedulerService.failure`;
  ``actorsched serve`` then exits non-zero. An idle owner learns it was
  taken over from its journal's own check (``Journal.owner_check_interval``),
  not only from its next commit: one cut off from the broker cannot hear it.

Run it with ``actorsched serve`` (:mod:`.serve`) or, in-process::

    async with Scheduler() as scheduler, SchedulerService(scheduler, url, queue="q"):
        ...
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, cast

import aio_pika
import aiormq.exceptions
from aio_pika.abc import (
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from pydantic import BaseModel
from yarl import URL

from ..auth import ANONYMOUS, Authorizer
from ..core import (
    COMMANDS,
    AddHostToAggregate,
    Command,
    ConfirmMove,
    CreateAggregate,
    DeleteAggregate,
    GetAggregates,
    GetClaims,
    GetHostStates,
    Locate,
    Move,
    PlanPlacement,
    Release,
    RemoveHost,
    RemoveHostFromAggregate,
    Reschedule,
    RevertMove,
    SelectDestinations,
    UpdateAggregate,
    UpdateHost,
)
from ..core.views import HostStatesImage
from ..errors import Forbidden, InvalidRequest, MailboxFull, SchedulerError, SchedulerStopped
from ..journal import JournalError, JournalUnavailable
from ..logs import redact
from ..metrics import label as outcome_label
from ..models import RequestSpec
from ..scheduler import Scheduler
from .bodies import BodyCappedChannel, BodyCappedConnection
from .metrics import ServiceMetrics
from .protocol import (
    BATCH,
    CONTENT_TYPE,
    DEFAULT_DELIVERY_LIMIT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_PREFETCH,
    DEFAULT_QUEUE,
    DEFAULT_URL,
    ERROR_HEADER,
    OPERATIONS,
    REASON_HEADER,
    TRUNCATED_HEADER,
    BadMessage,
    BatchRequest,
    ConfirmMoveResult,
    DeleteAggregateResult,
    HostReportResult,
    HostStatesPage,
    HostStatesRequest,
    Operation,
    ReleaseResult,
    RemoveHostResult,
    RevertMoveResult,
    dead_letter_names,
    decode_batch_item,
    decode_request,
    encode_batch_ok,
    encode_error,
    encode_ok,
    queue_arguments,
)

__all__ = [
    "DEFAULT_DELIVERY_LIMIT",
    "DEFAULT_QUEUE",
    "DEFAULT_URL",
    "ERROR_HEADER",
    "REASON_HEADER",
    "TRUNCATED_HEADER",
    "QueueOfAnotherState",
    "SchedulerService",
    "dead_letter_names",
    "queue_arguments",
    "redact",
]

log = logging.getLogger("actorsched.amqp.service")

# refused items of one batch named in its one log line; the rest are counted
_LOGGED_REFUSALS = 3
# what one HostState weighs in JSON, about (no traits), and any other reply
_HOST_STATE_BYTES = 460
_SMALL_REPLY_BYTES = 512
# bytes of a bad body kept in its dead letter: enough to tell what it was
_DEAD_LETTER_KEEP = 4_096

# What a lost channel or connection raises while we publish, ack or nack.
_CHANNEL_ERRORS: tuple[type[BaseException], ...] = (
    aiormq.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    TimeoutError,
)


# the app_id of a standby's probe of its own queue (SchedulerService._probe)
_PROBE_APP_ID = "actorsched-probe"


def _quiet(task: asyncio.Future[Any]) -> None:
    """Take a background ack's or reply's outcome, so that a failure is not logged
    again as never retrieved (the one who gave up on it said so already)."""
    if not task.cancelled():
        task.exception()


def _channel_open(message: AbstractIncomingMessage) -> bool:
    """True while the channel ``message`` came on is open (its ack could still be sent)."""
    try:
        message.channel  # noqa: B018 (the property raises once that channel is closed)
    except aiormq.exceptions.ChannelInvalidStateError:
        return False
    return True


def shown(value: object) -> str:
    """A message property as a log line may show it: escaped, so no message can
    forge a line (a newline, a control character) or hide what it is (``%r``)."""
    return repr(value)


def _as_is(answer: Any) -> Any:
    return answer


def _page(image: HostStatesImage) -> HostStatesPage:
    # built here, in the service's task, not in the owner: the owner only copied columns
    return HostStatesPage(hosts=image.states(), next_cursor=image.next_row)


def _one_host(host: str, image: HostStatesImage) -> HostStatesPage:
    """The page of ``host`` alone, from the image of the row it held when asked.

    A row stays its host's until that host is removed, so a row that holds another
    host or none by the owner's step means ``host`` was gone at some moment of the
    read: no host is then as true an answer as the state it had.
    """
    return HostStatesPage(hosts=image.states() if image.names == [host] else {}, next_cursor=None)


# Per operation: the core command its request asks the scheduler for, and the
# reply's ``result`` made from the scheduler's answer (but host_states of one host:
# SchedulerService._submit reads its row alone, _result checks it with _one_host).
_ROUTES: dict[str, tuple[Callable[[Any], Command[Any]], Callable[[Any], Any]]] = {
    "select_destinations": (SelectDestinations, _as_is),
    "host_report": (UpdateHost, lambda applied: HostReportResult(applied=bool(applied))),
    "release": (
        lambda request: Release(request.instance_uuid),
        lambda released: ReleaseResult(released=bool(released)),
    ),
    "remove_host": (
        lambda request: RemoveHost(request.host),
        lambda removed: RemoveHostResult(removed=bool(removed)),
    ),
    "host_states": (lambda request: GetHostStates(request.cursor, request.limit), _page),
    "plan": (PlanPlacement, _as_is),
    "claims": (lambda request: GetClaims(request.host, request.cursor, request.limit), _as_is),
    "where": (lambda request: Locate(request.instance_uuid), _as_is),
    "create_aggregate": (
        lambda request: CreateAggregate(request.name, request.metadata, tuple(request.hosts)),
        _as_is,
    ),
    "update_aggregate": (lambda request: UpdateAggregate(request.name, request.metadata), _as_is),
    "delete_aggregate": (
        lambda request: DeleteAggregate(request.name),
        lambda deleted: DeleteAggregateResult(deleted=bool(deleted)),
    ),
    "add_host_to_aggregate": (
        lambda request: AddHostToAggregate(request.name, request.host),
        _as_is,
    ),
    "remove_host_from_aggregate": (
        lambda request: RemoveHostFromAggregate(request.name, request.host),
        _as_is,
    ),
    "aggregates": (lambda request: GetAggregates(), _as_is),
    "move": (
        lambda request: Move(
            request.instance_uuid,
            request.migration_uuid,
            request.spec,
            request.allow_same_host,
            request.evacuate,
        ),
        _as_is,
    ),
    "confirm_move": (
        lambda request: ConfirmMove(request.migration_uuid),
        lambda confirmed: ConfirmMoveResult(confirmed=bool(confirmed)),
    ),
    "reschedule": (
        lambda request: Reschedule(request.instance_uuid, request.failed_host),
        _as_is,
    ),
    "revert_move": (
        lambda request: RevertMove(request.migration_uuid),
        lambda reverted: RevertMoveResult(reverted=bool(reverted)),
    ),
}
# every command with an operation of its own (core.COMMANDS) is routed, and nothing else
assert (
    set(_ROUTES) == {c.operation for c in COMMANDS if c.operation} == set(OPERATIONS) - {BATCH}
), "core.COMMANDS, protocol.OPERATIONS and the service's routes drifted"


def _owned_by(request: BaseModel, user: str | None) -> BaseModel:
    """``request`` with its spec's ``owner`` the broker user that sent it (a body's
    own ``owner`` is never believed).

    Set in place: the spec was decoded from this delivery's body a moment ago and
    nothing else holds it yet, and a copy of the (frozen) model would cost a
    placement about ten times what the rest of the authorization check does
    (``benchmarks/auth_cost.py``).
    """
    spec = request if isinstance(request, RequestSpec) else getattr(request, "spec", None)
    if isinstance(spec, RequestSpec):
        owner = user if user else None
        fields = spec.__dict__
        if fields["owner"] != owner:
            fields["owner"] = owner
            spec.__pydantic_fields_set__.add("owner")
    return request


def _result(op: Operation, request: BaseModel, answer: object) -> Any:
    """What goes in the reply's ``result`` for the scheduler's ``answer`` to ``request``."""
    if isinstance(request, HostStatesRequest) and request.host is not None:
        assert isinstance(answer, HostStatesImage)
        return _one_host(request.host, answer)
    return _ROUTES[op.name][1](answer)


class QueueOfAnotherState(ValueError):
    """The request queue was declared by a ``serve`` with another journal or shard."""


class SchedulerService:
    """Consumes ``queue`` on the broker at ``url`` and answers from ``scheduler``.

    The scheduler must be started (and is not stopped by the service).

    >>> async def run(scheduler: Scheduler) -> None:  # doctest: +SKIP
    ...     async with SchedulerService(scheduler, queue="actorsched.requests") as service:
    ...         await asyncio.Event().wait()  # serve until cancelled
    """

    def __init__(
        self,
        scheduler: Scheduler,
        url: str = DEFAULT_URL,
        *,
        queue: str = DEFAULT_QUEUE,
        prefetch: int | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        delivery_limit: int = DEFAULT_DELIVERY_LIMIT,
        metrics: ServiceMetrics | None = None,
        reconnect_interval: float = 1.0,
        drain_timeout: float = 30.0,
        activation_timeout: float = 30.0,
        ack_timeout: float = 5.0,
        publish_timeout: float = 10.0,
        probe_interval: float | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        mailbox = scheduler.config.mailbox_size
        if prefetch is None:
            prefetch = min(DEFAULT_PREFETCH, mailbox)
        if not 1 <= prefetch <= mailbox:
            raise ValueError(
                f"prefetch {prefetch} must be between 1 and the scheduler's mailbox size "
                f"{mailbox}, so that every delivery fits in the mailbox; lower --prefetch "
                "or raise --mailbox-size"
            )
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
        if delivery_limit < 1:
            raise ValueError(f"delivery_limit must be at least 1, got {delivery_limit}")
        self.scheduler = scheduler
        self.url = url
        self.queue = queue
        self.prefetch = prefetch
        self.max_body_bytes = max_body_bytes
        if max_reply_bytes < 4_096:
            raise ValueError(f"max_reply_bytes must be at least 4096, got {max_reply_bytes}")
        self.max_reply_bytes = max_reply_bytes
        self.delivery_limit = delivery_limit
        self.metrics = metrics if metrics is not None else ServiceMetrics(scheduler)
        self._reconnect_interval = reconnect_interval
        self._drain_timeout = drain_timeout
        self._activation_timeout = activation_timeout
        if not (ack_timeout > 0 and publish_timeout > 0):
            raise ValueError(
                f"ack_timeout and publish_timeout must be positive, got {ack_timeout} "
                f"and {publish_timeout}"
            )
        # an ack, nack or publish on a connection that died may wait forever on
        # its write queue: past these bounds the delivery is left to the broker
        self._ack_timeout = ack_timeout
        self._publish_timeout = publish_timeout
        self.ack_failures = 0  # acks or nacks that could not be sent (the broker redelivers)
        # a term: from the first delivery (activate) to a lost channel (step down)
        self._term_lock = asyncio.Lock()
        self._active = False
        self._stopping = False
        self._losses = 0  # channels and connections lost so far
        self._step_downs: set[asyncio.Task[None]] = set()
        self.epoch: int | None = None  # the journal epoch of the current term
        self.terms = 0  # terms this service began (activations)
        self.failure: JournalError | None = None  # what stopped it (fail-stop)
        self.failed = asyncio.Event()
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._queue: AbstractQueue | None = None
        self._dlx: AbstractExchange | None = None
        self._consumer_tag: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.accepted = 0  # deliveries this service started to handle
        self.answered = 0  # ... that it acked (answered, or dead-lettered)
        self.returned = 0  # ... that it handed back to the broker
        self.redelivered = 0  # deliveries the broker had delivered before
        self.replies_lost = 0  # replies that could not be published (the work stands)
        self.replies_slow = 0  # ... that took longer than publish_timeout (sent later)
        self._late_replies: set[asyncio.Future[None]] = set()
        self.operations = 0  # operations in the deliveries it acked (a batch counts its items)
        # told True when a term begins and False when it ends (another adapter of the
        # same owner, such as the Nova endpoint, consumes only during a term)
        self.term_listeners: list[Callable[[bool], None]] = []
        # a standby asks its own queue who owns it every probe_interval seconds: the
        # active consumer takes the read and begins its term, so a term begins
        # without native traffic (None: the first native delivery begins it)
        if probe_interval is not None and probe_interval <= 0:
            raise ValueError(f"probe_interval must be positive, got {probe_interval}")
        self._probe_interval = probe_interval
        # who may do what (None: every caller may do everything, as embedded)
        self.authorizer = authorizer
        self._prober: asyncio.Task[None] | None = None

    @property
    def in_flight(self) -> int:
        """Deliveries being handled now."""
        return len(self._tasks)

    @property
    def connected(self) -> bool:
        """True while the connection and channel to the broker are open."""
        connection, channel = self._connection, self._channel
        return (
            connection is not None
            and not connection.is_closed
            and channel is not None
            and not channel.is_closed
        )

    @property
    def active(self) -> bool:
        """True while this service is the queue's owner (it answers); False as a standby."""
        return self._active

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Connect, declare the queues, and start consuming."""
        self._connection = await aio_pika.connect_robust(
            self.url,
            reconnect_interval=self._reconnect_interval,
            client_properties={"connection_name": f"actorsched serve {self.queue}"},
            connection_class=BodyCappedConnection,
        )
        try:
            channel = self._connection.channel(publisher_confirms=True)
            assert isinstance(channel, BodyCappedChannel)
            # a body over the cap is never held whole, on this channel and its reopens
            channel.max_body_bytes = self.max_body_bytes
            channel.keep = _DEAD_LETTER_KEEP
            await channel
            self._channel = channel
            await channel.set_qos(prefetch_count=self.prefetch)
            dlx_name, dead_name = dead_letter_names(self.queue)
            self._dlx = await channel.declare_exchange(
                dlx_name, aio_pika.ExchangeType.FANOUT, durable=True
            )
            dead = await channel.declare_queue(
                dead_name, durable=True, arguments={"x-queue-type": "quorum"}
            )
            await dead.bind(self._dlx)
            self._queue = await channel.declare_queue(
                self.queue,
                durable=True,
                arguments=queue_arguments(self.queue, self.delivery_limit),
            )
            journal = self.scheduler.journal
            if journal is not None:
                await self._claim_queue(channel, journal.identity, journal.former_identities)
                # taken over while idle (its broker link cut, so it cannot hear it): stop
                journal.failure_listeners.append(self._fail_stop)
            # a lost channel or connection ends the term: the broker may give
            # the queue to another consumer before this one is back
            channel.close_callbacks.add(self._on_lost)
            self._connection.close_callbacks.add(self._on_lost)
            self._consumer_tag = await self._queue.consume(self._on_message)
            if self._probe_interval is not None:
                self._prober = asyncio.get_running_loop().create_task(self._probe())
        except BaseException:
            await self._connection.close()
            self._connection = None
            raise

    async def _claim_queue(
        self, channel: AbstractRobustChannel, state: str, former: tuple[str, ...] = ()
    ) -> None:
        """One queue, one journal: the first ``serve`` of the queue records its journal's
        identity in ``<queue>.state`` (a durable queue that holds one message and
        refuses a second); a ``serve`` whose journal is another is refused here."""
        name = f"{self.queue}.state"
        holder = await channel.declare_queue(
            name, durable=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
        )
        for _ in range(3):
            message = await holder.get(no_ack=False, fail=False, timeout=self._publish_timeout)
            if message is not None:
                recorded = message.body.decode("utf-8", "replace")
                await message.nack(requeue=True)  # it stays for the next serve to read
                if recorded != state and recorded not in former:
                    raise QueueOfAnotherState(
                        f"queue {self.queue!r} answers from {recorded!r}, not from this "
                        f"serve's {state!r}: start serve with the queue's journal and shard, "
                        f"or use another --queue (the record is the message in {name!r})"
                    )
                return
            try:
                await channel.default_exchange.publish(
                    aio_pika.Message(
                        state.encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT
                    ),
                    routing_key=name,
                    timeout=self._publish_timeout,
                )
                return
            except aio_pika.exceptions.DeliveryError:
                continue  # another serve recorded its state first: read it
        raise QueueOfAnotherState(f"could not read or record the state of queue {self.queue!r}")

    async def stop(self) -> None:
        """Stop consuming, answer and ack what is in flight, then close."""
        if self._connection is None:
            return
        self._stopping = True
        if self._prober is not None:
            self._prober.cancel()
            self._prober = None
        if self._queue is not None and self._consumer_tag is not None:
            try:
                await self._queue.cancel(self._consumer_tag, timeout=5)
            except _CHANNEL_ERRORS as exc:
                log.warning("could not cancel the consumer cleanly (%s); closing anyway", exc)
            self._consumer_tag = None
        await self._drain()
        try:  # a dead connection's close can wait on its writer: SIGTERM must not
            await asyncio.wait_for(self._connection.close(), self._ack_timeout)
        except _CHANNEL_ERRORS as exc:
            log.warning("the broker connection did not close cleanly (%s)", exc)
        self._connection = None
        if self._step_downs:
            await asyncio.gather(*self._step_downs, return_exceptions=True)

    async def _drain(self) -> None:
        deadline = time.monotonic() + self._drain_timeout
        while self._tasks:
            left = deadline - time.monotonic()
            if left <= 0:
                log.error(
                    "%d deliveries still in flight after %gs; the broker will deliver them again",
                    len(self._tasks),
                    self._drain_timeout,
                )
                for task in self._tasks:
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                return
            await asyncio.wait(set(self._tasks), timeout=left)

    async def __aenter__(self) -> SchedulerService:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- terms: activate on the first delivery, step down on a lost channel ------

    async def _begin_term(self, message: AbstractIncomingMessage) -> bool:
        """Make this service the owner before it answers ``message``; False when it cannot be.

        Only a delivery of a live channel may begin a term: one read just
        before the channel was lost says nothing about who owns the queue now
        (the broker may have given it to another consumer), and taking the
        journal over for it would fence that owner.
        """
        async with self._term_lock:
            if self._active or self.failure is not None:
                return self._active
            if not _channel_open(message):
                return False
            losses = self._losses
            started = time.perf_counter()
            deadline = time.monotonic() + self._activation_timeout
            delay = 0.1
            while True:
                try:
                    if self.scheduler.role == "active":  # started active by its owner
                        self.epoch = self.epoch or 1
                    else:
                        self.epoch = await self.scheduler.activate()
                    break
                except JournalUnavailable as exc:
                    if time.monotonic() + delay > deadline:
                        self._fail_stop(exc)
                        return False
                    log.warning("cannot take over yet (%s); retrying in %.1fs", exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
                except JournalError as exc:
                    self._fail_stop(exc)
                    return False
            if self._losses != losses or not _channel_open(message):
                # the channel went while taking over: this term is over before it began
                log.warning("lost the broker channel while taking over: standby again")
                try:
                    await self.scheduler.step_down()
                except JournalError as exc:
                    self._fail_stop(exc)
                return False
            self._active = True
            self.terms += 1
            self._tell_term(True)
            journal = self.scheduler.journal
            log.info(
                "active: this service owns %r (journal epoch %d, record %d, %d hosts, "
                "%d claims; took over in %.1f ms)",
                self.queue,
                self.epoch,
                journal.last_seq if journal is not None else 0,
                self.scheduler.host_count,
                self.scheduler.claim_count,
                (time.perf_counter() - started) * 1000,
            )
            return True

    def _tell_term(self, active: bool) -> None:
        for listener in self.term_listeners:
            listener(active)

    async def _probe(self) -> None:
        """While a standby, publish a read to the own queue every probe_interval seconds."""
        assert self._probe_interval is not None
        while not self._stopping and self.failure is None:
            channel = self._channel
            if not self._active and channel is not None and not channel.is_closed:
                probe = aio_pika.Message(
                    b"{}",
                    content_type=CONTENT_TYPE,
                    type="aggregates",
                    app_id=_PROBE_APP_ID,  # its own: not counted as a caller's request
                    delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT,
                    user_id=URL(self.url).user or "guest",  # from itself: allowed its read
                )
                with contextlib.suppress(*_CHANNEL_ERRORS):
                    await channel.default_exchange.publish(
                        probe, routing_key=self.queue, timeout=self._publish_timeout
                    )
            await asyncio.sleep(self._probe_interval)

    def _on_lost(self, *_args: object) -> None:
        self._losses += 1  # a takeover under way sees it, and gives up
        if self._stopping or not self._active:
            return
        self._active = False  # no delivery is answered in this term from now on
        self._tell_term(False)
        task = asyncio.get_running_loop().create_task(self._step_down())
        self._step_downs.add(task)
        task.add_done_callback(self._step_downs.discard)

    async def _step_down(self) -> None:
        log.warning(
            "lost the broker channel: stepping down to standby (another consumer may own "
            "%r now); %d deliveries in flight go back to the queue",
            self.queue,
            self.in_flight,
        )
        async with self._term_lock:
            try:
                await self.scheduler.step_down()
            except JournalError as exc:
                self._fail_stop(exc)

    def _fail_stop(self, exc: JournalError) -> None:
        """Stop consuming at once: the journal cannot make answers durable any more."""
        if self.failure is not None:
            return
        self.failure = exc
        if self._active:
            self._tell_term(False)
        self._active = False
        log.error("stopping: %s", " ".join(str(exc).split()))
        queue, tag = self._queue, self._consumer_tag
        self._consumer_tag = None
        if queue is not None and tag is not None:

            async def cancel() -> None:
                with contextlib.suppress(*_CHANNEL_ERRORS):
                    await queue.cancel(tag, timeout=5)

            task = asyncio.get_running_loop().create_task(cancel())
            self._step_downs.add(task)
            task.add_done_callback(self._step_downs.discard)
        self.failed.set()

    # -- one delivery --------------------------------------------------------

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        # our own task (not aiormq's, which the channel cancels when it closes)
        # so that stop() can wait for every delivery it accepted
        # the declared size of a body cut to its head (BodyCappedChannel), taken
        # now so that no mark outlives its delivery
        task = asyncio.create_task(self._handle(message, self._cut_size(message)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, message: AbstractIncomingMessage, cut: int | None) -> None:
        if message.app_id == _PROBE_APP_ID and not message.reply_to:
            # a standby's probe of the queue: it begins a term like any delivery, and
            # counts in none of the callers' figures
            await self._process(message, [], cut)
            return
        started = time.perf_counter()
        self.accepted += 1
        op_label = message.type if message.type in OPERATIONS else "unknown"
        metrics = self.metrics
        if message.redelivered:
            self.redelivered += 1
            metrics.redelivered.labels(op_label).inc()
        metrics.in_flight.inc()
        items: list[tuple[str, str]] = []  # (op, outcome) of each item of a batch
        try:
            outcome = await self._process(message, items, cut)
        finally:
            metrics.in_flight.dec()
        elapsed = time.perf_counter() - started
        given_back = outcome in ("requeued", "unacked")
        if given_back:
            self.returned += 1
        else:
            self.answered += 1
        if not items:
            self.operations += 0 if given_back else 1
            metrics.requests.labels(op_label, outcome).inc()
            metrics.latency.labels(op_label).observe(elapsed)
            return
        # a batch: count each item by its own op, as if it had come alone
        # (one label lookup per distinct op and outcome, not per item)
        self.operations += 0 if given_back else len(items)
        metrics.batch_items.observe(len(items))
        counts = collections.Counter(
            (item_op, outcome if given_back else item_outcome) for item_op, item_outcome in items
        )
        for (item_op, item_outcome), count in counts.items():
            metrics.requests.labels(item_op, item_outcome).inc(count)
        for item_op, count in collections.Counter(item_op for item_op, _ in items).items():
            observe = metrics.latency.labels(item_op).observe
            for _ in range(count):
                observe(elapsed)

    async def _process(
        self, message: AbstractIncomingMessage, items: list[tuple[str, str]], cut: int | None
    ) -> str:
        if not self._active and not await self._begin_term(message):
            return await self._give_back(message)
        try:
            op, request = decode_request(
                message.type,
                message.body,
                content_type=message.content_type,
                max_body_bytes=self.max_body_bytes,
                body_size=cut,
            )
        except BadMessage as bad:
            return await self._dead_letter(message, bad, cut)
        if op.name != BATCH and (denied := self._denied(op.name, message, request)):
            return await self._dead_letter(
                message, BadMessage("forbidden", str(denied)), error=denied
            )
        if op.name == BATCH:
            assert isinstance(request, BatchRequest)
            return await self._process_batch(message, request, items)
        try:
            if (estimate := self._reply_estimate(op, request)) > self.max_reply_bytes:
                raise self._too_large(op.name, estimate, "would be")
            answer = await (await self._submit(op, request, message.user_id))
            body = encode_ok(op, _result(op, request, answer))
            if len(body) > self.max_reply_bytes:
                raise self._too_large(op.name, len(body), "is")
            outcome = "ok"
        except SchedulerStopped:
            # this process is going away; another (or the next) one will answer it
            return await self._give_back(message)
        except JournalError as exc:
            self._fail_stop(exc)  # never answered: the change is not durable
            return await self._give_back(message)
        except SchedulerError as exc:
            if isinstance(exc, Forbidden):  # the core's: another's claim
                self._count_denied(op.name, message.user_id, exc)
            body, outcome = encode_error(exc), outcome_label(type(exc).__name__)
        except Exception:
            self._log_unexpected(op.name)
            return await self._give_back(message)
        return await self._answer(message, op.name, body, outcome)

    async def _process_batch(
        self, message: AbstractIncomingMessage, batch: BatchRequest, items: list[tuple[str, str]]
    ) -> str:
        # Every item is checked and handed to the owner before any answer is
        # awaited, so they reach its mailbox together (one owner step), with no
        # task per item; past a full mailbox they wait in line for room, in
        # order, and past a full line (max_waiting) the batch waits for a place
        # item by item (backpressure): neither ever holds more than its bound.
        labels: list[str] = []
        outcomes: list[str] = []
        replies: list[bytes] = []
        started: list[tuple[int, Operation, BaseModel]] = []
        waits: list[Awaitable[object]] = []
        refused: list[str] = []
        budget = self.max_reply_bytes  # what the replies may still take, estimated
        for index, item in enumerate(batch.requests):
            try:
                op, request = decode_batch_item(item)
                if denied := self._denied(op.name, message, request):
                    raise denied
                budget -= self._reply_estimate(op, request)
                if budget < 0:  # refused before any work, not after a huge reply is built
                    raise self._too_large(op.name, self.max_reply_bytes - budget, "would be")
            except (BadMessage, InvalidRequest, Forbidden) as bad:
                refused.append(f"item {index} ({item.type!r}): {bad}")
                known = item.type in OPERATIONS and item.type != BATCH
                labels.append(item.type if known else "unknown")
                outcomes.append("forbidden" if isinstance(bad, Forbidden) else "invalid_request")
                replies.append(encode_error(bad))
                continue
            started.append((len(replies), op, request))
            labels.append(op.name)
            outcomes.append("ok")
            replies.append(b"")
            waits.append(await self._submit(op, request, message.user_id))
        if refused:  # one line per batch, however many items it refuses
            log.warning(
                "refusing %d of %d items of a batch (correlation_id %s): %s%s",
                len(refused),
                len(batch.requests),
                shown(message.correlation_id),
                "; ".join(refused[:_LOGGED_REFUSALS]),
                f"; and {len(refused) - _LOGGED_REFUSALS} more"
                if len(refused) > _LOGGED_REFUSALS
                else "",
            )
        answers = await asyncio.gather(*waits, return_exceptions=True)
        failed: BaseException | None = None
        for (slot, op, request), answer in zip(started, answers, strict=True):
            if isinstance(answer, JournalError):
                self._fail_stop(answer)
            if isinstance(answer, SchedulerError) and not isinstance(
                answer, SchedulerStopped | JournalError
            ):
                if isinstance(answer, Forbidden):  # the core's: another's claim
                    self._count_denied(op.name, message.user_id, answer)
                replies[slot], outcomes[slot] = (
                    encode_error(answer),
                    outcome_label(type(answer).__name__),
                )
                continue
            if isinstance(answer, BaseException):
                failed = failed or answer
                continue
            try:
                replies[slot] = encode_ok(op, _result(op, request, answer))
            except Exception as exc:
                failed = failed or exc
        total = 0
        for slot, (reply, label) in enumerate(zip(replies, labels, strict=True)):
            total += len(reply)
            if total > self.max_reply_bytes:  # the estimate was short: still never over
                error = self._too_large(label, total, "would be")
                replies[slot], outcomes[slot] = encode_error(error), "invalid_request"
                total += len(replies[slot]) - len(reply)
        if failed is not None:
            items.extend((label, "requeued") for label in labels)
            if not isinstance(failed, SchedulerStopped | JournalError):
                if not isinstance(failed, Exception):
                    raise failed  # cancelled: the broker delivers it again
                log.error(
                    "an item of a batch failed unexpectedly; returning the batch to the "
                    "queue (after %d deliveries the broker dead-letters it to %s)",
                    self.delivery_limit,
                    dead_letter_names(self.queue)[1],
                    exc_info=failed,
                )
            return await self._give_back(message)
        items.extend(zip(labels, outcomes, strict=True))
        return await self._answer(message, BATCH, encode_batch_ok(replies), "ok")

    def _reply_estimate(self, op: Operation, request: BaseModel) -> int:
        """About how large the reply to ``request`` gets, known before any work."""
        if isinstance(request, HostStatesRequest):
            hosts = 1 if request.host is not None else request.limit
            return min(hosts, self.scheduler.host_count) * _HOST_STATE_BYTES
        return _SMALL_REPLY_BYTES

    def _too_large(self, op_name: str, size: int, verb: str) -> InvalidRequest:
        return InvalidRequest(
            f"the reply to {op_name} {verb} about {size:,} bytes, over this service's "
            f"--max-reply-bytes {self.max_reply_bytes:,}; ask host_states for smaller pages "
            "(limit) or put fewer of them in one batch"
        )

    async def _submit(
        self, op: Operation, request: BaseModel, user: str | None
    ) -> Awaitable[object]:
        """Hand ``request`` of broker user ``user`` to the scheduler, waiting for a
        place when its line is full.

        A request's spec is owned by ``user`` (what the body says of ``owner`` is
        replaced), and a command on claims is scoped to ``user``'s own when the
        authorizer says so. The awaitable this returns gives the answer; it fails
        if the scheduler is not running.
        """
        request = _owned_by(request, user)
        if isinstance(request, HostStatesRequest) and request.host is not None:
            # one host: only the row it holds now (a hint read off the owner, which
            # _one_host checks against the row's host at the owner's step)
            command: Command[Any] = GetHostStates(self.scheduler.host_row(request.host) or 0, 1)
        else:
            command = _ROUTES[op.name][0](request)
        authorizer = self.authorizer
        if authorizer is not None and (caller := authorizer.scope(op.name, user)) is not None:
            # a command on claims (OWN_CLAIMS) is a dataclass with a caller field
            command = dataclasses.replace(cast(Any, command), caller=caller)
        try:
            try:
                return self.scheduler.submit(command)
            except MailboxFull:  # the mailbox and its line are full: wait, unsent, in order
                return await self.scheduler.submit_when_room(command)
        except SchedulerStopped as exc:
            stopped: asyncio.Future[object] = asyncio.get_running_loop().create_future()
            stopped.set_exception(exc)
            return stopped

    def _log_unexpected(self, op_name: str) -> None:
        log.exception(
            "%s failed unexpectedly; returning it to the queue (after %d deliveries "
            "the broker dead-letters it to %s)",
            op_name,
            self.delivery_limit,
            dead_letter_names(self.queue)[1],
        )

    async def _answer(
        self, message: AbstractIncomingMessage, op_name: str, body: bytes, outcome: str
    ) -> str:
        """Reply and ack a delivery whose work is done (applied, and durable).

        Neither a reply nor an ack that fails is turned into a requeue: the work
        stands, so doing it again would only repeat it (and, at the delivery
        limit, dead-letter good messages). A reply slower than
        ``publish_timeout`` goes on in the background (at most ``prefetch`` of
        them: past that, the next reply waits for room, which is backpressure
        on the broker); one that fails (its channel closed) is lost, and the
        caller's retry is answered from the state. An ack is sent the same way:
        slow on a live connection, it goes out when the connection gets to it;
        on a channel that closed, the broker delivers the message again,
        answered from the state.
        """
        if message.reply_to:
            await self._reply(message, op_name, body)
        # shielded: an ack given up on here still goes out when the connection gets to
        # it, so a live channel never keeps a delivery (and its prefetch slot) for ever
        ack = asyncio.ensure_future(message.ack())
        ack.add_done_callback(_quiet)
        try:
            await asyncio.wait_for(asyncio.shield(ack), self._ack_timeout)
        except _CHANNEL_ERRORS as exc:
            log.warning(
                "could not ack %s within %gs (%s); not requeued: its work stands, and a "
                "delivery again (if its channel closed) is answered from the state",
                op_name,
                self._ack_timeout,
                str(exc) or type(exc).__name__,
            )
            self.ack_failures += 1
        return outcome

    async def _reply(self, message: AbstractIncomingMessage, op_name: str, body: bytes) -> None:
        late = self._late_replies
        while len(late) >= self.prefetch:
            await asyncio.wait(late, return_when=asyncio.FIRST_COMPLETED)
        reply = asyncio.ensure_future(self._publish_reply(message, op_name, body))
        try:
            await asyncio.wait_for(asyncio.shield(reply), self._publish_timeout)
            return
        except TimeoutError:
            self.replies_slow += 1
            late.add(reply)
            reply.add_done_callback(late.discard)
            reply.add_done_callback(functools.partial(self._late_reply_done, op_name))
        except _CHANNEL_ERRORS as exc:
            self._reply_lost(op_name, exc)

    def _late_reply_done(self, op_name: str, reply: asyncio.Future[None]) -> None:
        if not reply.cancelled() and (exc := reply.exception()) is not None:
            self._reply_lost(op_name, exc)

    def _reply_lost(self, op_name: str, exc: BaseException) -> None:
        self.replies_lost += 1
        log.warning(
            "could not reply to %s (%s); its work stands, and a retry is answered from the state",
            op_name,
            str(exc) or type(exc).__name__,
        )

    async def _nack(self, message: AbstractIncomingMessage) -> bool:
        """Hand ``message`` back to the broker, within ``ack_timeout``; False if it could not."""
        nack = asyncio.ensure_future(message.nack(requeue=True))
        nack.add_done_callback(_quiet)  # shielded, as an ack (see _answer)
        try:
            await asyncio.wait_for(asyncio.shield(nack), self._ack_timeout)
        except _CHANNEL_ERRORS:
            return False  # it goes out later, or the broker delivers it again on a close
        return True

    async def _publish_reply(
        self, message: AbstractIncomingMessage, op_name: str, body: bytes
    ) -> None:
        assert self._channel is not None
        assert message.reply_to
        reply = aio_pika.Message(
            body,
            content_type=CONTENT_TYPE,
            correlation_id=message.correlation_id,
            type=op_name,
            delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT,
        )
        # mandatory=False: a client that went away has no queue; its claim stands all the same.
        # No timeout of its own: _reply bounds the wait and lets a slow one finish
        await self._channel.default_exchange.publish(
            reply, routing_key=message.reply_to, mandatory=False
        )

    async def _give_back(self, message: AbstractIncomingMessage) -> str:
        if not await self._nack(message):
            self.ack_failures += 1
        return "requeued"

    def _cut_size(self, message: AbstractIncomingMessage) -> int | None:
        channel = self._channel
        if not isinstance(channel, BodyCappedChannel):
            return None
        return channel.cut_size(message.delivery_tag)

    def _denied(
        self, operation: str, message: AbstractIncomingMessage, request: BaseModel
    ) -> Forbidden | None:
        """The refusal of ``operation`` for the message's broker user, counted; None: allowed."""
        authorizer = self.authorizer
        if authorizer is None:
            return None
        denied = authorizer.check(operation, message.user_id, request)
        if denied is not None:
            self._count_denied(operation, message.user_id, None)
        return denied

    def _count_denied(self, operation: str, user_id: str | None, core: Forbidden | None) -> None:
        """Count a refusal in ``actorsched_denied_total``; ``core``: the core refused
        it (another's claim), which the authorizer also counts and logs once."""
        authorizer = self.authorizer
        user = user_id or ANONYMOUS
        if core is not None and authorizer is not None:
            authorizer.note(operation, user, str(core).removeprefix("forbidden: "))
        # a bounded label: users the [auth] table names, else "other"
        named = authorizer is not None and user in authorizer.users
        label = user if named or user == ANONYMOUS else "other"
        self.metrics.denied.labels(operation, label).inc()

    async def _dead_letter(
        self,
        message: AbstractIncomingMessage,
        bad: BadMessage,
        cut: int | None = None,
        *,
        error: SchedulerError | None = None,
    ) -> str:
        log.warning(
            "dead-lettering a bad %r message (correlation_id %s, reason %s): %s",
            message.type,
            shown(message.correlation_id),
            bad.reason,
            bad,
        )
        self.metrics.dead_lettered.labels(bad.reason).inc()
        assert self._dlx is not None
        headers = dict(message.headers or {})
        headers[REASON_HEADER] = bad.reason
        headers[ERROR_HEADER] = str(bad)[:1000]
        body = message.body
        if cut is not None or len(body) > _DEAD_LETTER_KEEP:
            # the dead-letter queue keeps the reason and the head, not a flood's worth
            headers[TRUNCATED_HEADER] = len(body) if cut is None else cut
            body = body[:_DEAD_LETTER_KEEP]
        copy = aio_pika.Message(
            body,
            headers=headers,
            content_type=message.content_type,
            content_encoding=message.content_encoding,
            correlation_id=message.correlation_id,
            reply_to=message.reply_to,
            message_id=message.message_id,
            type=message.type,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        try:
            await self._dlx.publish(
                copy, routing_key=self.queue, mandatory=False, timeout=self._publish_timeout
            )
        except _CHANNEL_ERRORS as exc:
            log.warning("could not dead-letter it (%s); the broker will deliver it again", exc)
            await self._nack(message)
            return "unacked"
        if error is not None:  # refused, not malformed: the caller gets its own error
            return await self._answer(
                message, message.type or "unknown", encode_error(error), "forbidden"
            )
        return await self._answer(
            message, message.type or "unknown", encode_error(bad), "bad_input"
        )
