"""``SchedulerClient``: the Scheduler API over AMQP, for processes that do not own the scheduler.

Each request is published persistent, publisher-confirmed and mandatory (so
a missing queue fails at once); its reply comes back on this client's own
exclusive queue, matched by ``correlation_id``. Errors come back as the
classes the embedded :class:`~actorsched.Scheduler` raises.

With ``batch=True`` (the default) one client shared by many concurrent
callers coalesces them, Nagle-style without a timer: at most ``window``
messages are unanswered at once (each for at most ``window_hold``
seconds), and calls made while the window is full queue up; when a reply
frees a slot, one sender task divides the queued calls over the free
slots (up to ``max_batch`` a message) and publishes each share as one
``batch``. With two slots the service works on one message while the next
is on its way through the broker. A call made while nothing else is
waiting goes out at once as its plain operation. Each caller still gets
its own result or exception and its own timeout.

A call that times out may still have been applied. Every operation is
safe to repeat (claims are keyed by instance uuid, reports by generation),
so the answer to a timeout is to call again with the same arguments.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustChannel, AbstractRobustConnection
from pydantic import BaseModel
from yarl import URL

from ..answers import ClaimInfo, ClaimsPage, Location, Plan
from ..errors import SchedulerError, SchedulerStopped
from ..models import (
    Aggregate,
    AggregateHostRequest,
    AggregateNameRequest,
    CreateAggregateRequest,
    HostReport,
    HostState,
    RequestSpec,
    Selection,
    UpdateAggregateRequest,
)
from .protocol import (
    BATCH,
    CONTENT_TYPE,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PAGE_HOSTS,
    DEFAULT_QUEUE,
    DEFAULT_URL,
    MAX_BATCH_ITEMS,
    OPERATIONS,
    ClaimsRequest,
    ConfirmMoveResult,
    DeleteAggregateResult,
    HostReportResult,
    HostStatesPage,
    HostStatesRequest,
    MigrationRequest,
    MoveRequest,
    Operation,
    ReleaseRequest,
    ReleaseResult,
    RemoveHostRequest,
    RemoveHostResult,
    RescheduleRequest,
    RevertMoveResult,
    WhereRequest,
    decode_batch_reply,
    decode_reply,
)

__all__ = ["SchedulerClient"]

log = logging.getLogger("actorsched.amqp.client")

# what a publish raises while a robust connection or channel is being re-opened
_RECONNECTING = (
    aiormq.exceptions.ChannelInvalidStateError,
    aiormq.exceptions.ChannelClosed,
    aiormq.exceptions.ConnectionClosed,
    ConnectionError,
    RuntimeError,  # aio-pika: "<Connection ...> closed" / "No active transport in channel"
)
_REPUBLISH_PAUSE = 0.05
DEFAULT_MAX_BATCH = 256
DEFAULT_WINDOW = 2
DEFAULT_WINDOW_HOLD = 1.0
# the service's default body cap, less room for the envelope
_DEFAULT_MAX_BATCH_BYTES = DEFAULT_MAX_BODY_BYTES // 2


@dataclass(slots=True, eq=False)
class _Call:
    """One caller's request, waiting to be sent or answered."""

    op: Operation
    body: bytes
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    correlation_id: str | None = None  # set once it is in a published message


@dataclass(slots=True, eq=False)
class _InFlight:
    """A published message: the calls its reply answers, and whether it is a batch."""

    calls: list[_Call]
    batch: bool
    waiting: int  # calls not yet given up (timed out or cancelled) by their callers


def _json(body: BaseModel) -> bytes:
    return body.model_dump_json().encode()


class SchedulerClient:
    """Calls a running ``actorsched serve`` through RabbitMQ.

    ``timeout`` (seconds) bounds each call; a method's own ``timeout``
    argument overrides it. On timeout the call raises :class:`TimeoutError`.

    ``batch`` (default on): at most ``window`` messages wait for their
    replies at once; calls made meanwhile are sent together when a slot
    frees, divided over the free slots, at most ``max_batch`` calls and
    about ``max_batch_bytes`` of bodies in one message; a lone call still
    goes out at once, as its plain operation. A message holds its slot for
    at most ``window_hold`` seconds, and not past a reconnect: a slow or
    lost reply never holds up the calls behind it for longer. Share one client between many
    concurrent callers to get the most from it. The service must know the
    ``batch`` operation; ``batch=False`` publishes one message per call.

    >>> async def place(spec: RequestSpec) -> list[Selection]:  # doctest: +SKIP
    ...     async with SchedulerClient("amqp://guest:guest@127.0.0.1/") as client:
    ...         return await client.select_destinations(spec, timeout=5)
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        queue: str = DEFAULT_QUEUE,
        timeout: float = 30.0,
        reconnect_interval: float = 1.0,
        batch: bool = True,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_batch_bytes: int = _DEFAULT_MAX_BATCH_BYTES,
        window: int = DEFAULT_WINDOW,
        window_hold: float = DEFAULT_WINDOW_HOLD,
    ) -> None:
        if not 1 <= max_batch <= MAX_BATCH_ITEMS:
            raise ValueError(f"max_batch must be between 1 and {MAX_BATCH_ITEMS}, got {max_batch}")
        if max_batch_bytes < 1:
            raise ValueError(f"max_batch_bytes must be positive, got {max_batch_bytes}")
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        if not window_hold > 0:
            raise ValueError(f"window_hold must be positive, got {window_hold}")
        self.url = url
        self.queue = queue
        self.timeout = timeout
        self.batch = batch
        self.max_batch = max_batch
        self.max_batch_bytes = max_batch_bytes
        self.window = window
        self.window_hold = window_hold
        self.messages_sent = 0  # requests published (a batch is one)
        self._reconnect_interval = reconnect_interval
        self._reply_queue = f"actorsched.reply.{uuid.uuid4().hex}"
        self.user = URL(url).user or "guest"  # the broker user the URL logs in as
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._pending: dict[str, _InFlight] = {}
        self._queued: collections.deque[_Call] = collections.deque()
        self._wakeup = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._publishing: set[asyncio.Task[None]] = set()
        # messages holding a slot of the window (with the timer that ends the
        # hold): sent less than window_hold ago and since the last reconnect,
        # and neither answered nor given up by all their callers
        self._holding: dict[str, asyncio.TimerHandle] = {}

    # -- lifecycle ---------------------------------------------------------

    async def connect(self) -> None:
        """Connect and start listening for replies (``async with`` does this)."""
        if self._connection is not None:
            return
        connection = await aio_pika.connect_robust(
            self.url,
            reconnect_interval=self._reconnect_interval,
            client_properties={"connection_name": f"actorsched client {self.queue}"},
        )
        try:
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
            assert isinstance(channel, AbstractRobustChannel)
            # named by us, not by the broker: a robust connection re-declares it
            # under the same name after a reconnect, so late replies still arrive
            replies = await channel.declare_queue(
                self._reply_queue, exclusive=True, auto_delete=True
            )
            await replies.consume(self._on_reply, no_ack=True)
        except BaseException:
            await connection.close()
            raise
        connection.reconnect_callbacks.add(self._on_reconnect)
        self._connection, self._channel = connection, channel
        if self.batch:
            self._sender = asyncio.create_task(self._send_loop(), name="actorsched client sender")

    async def close(self) -> None:
        """Close the connection; calls still waiting fail with SchedulerStopped."""
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            self._sender = None
        for publishing in list(self._publishing):
            publishing.cancel()
        await asyncio.gather(*self._publishing, return_exceptions=True)
        stopped = "the SchedulerClient was closed"
        for call in self._queued:
            if not call.future.done():
                call.future.set_exception(SchedulerStopped(stopped))
        self._queued.clear()
        for inflight in self._pending.values():
            for call in inflight.calls:
                if not call.future.done():
                    call.future.set_exception(SchedulerStopped(stopped))
        self._pending.clear()
        self._release_window()
        if self._connection is not None:
            await self._connection.close()
            self._connection = self._channel = None

    async def __aenter__(self) -> SchedulerClient:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the API (same names and types as Scheduler) -------------------------

    async def select_destinations(
        self,
        spec: RequestSpec,
        *,
        wait: float | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (a per-call limit is the API)
    ) -> list[Selection]:
        """Claim a host per instance uuid, in the spec's order; raises NoValidHost.

        ``wait`` (or ``spec.wait``): seconds the request may wait in the
        service for room, as :meth:`Scheduler.select_destinations`; without
        its own ``timeout`` the call then waits ``wait`` more than the client's.
        """
        if wait is not None:
            spec = RequestSpec.model_validate({**spec.__dict__, "wait": wait})
        if timeout is None and spec.wait:
            timeout = self.timeout + spec.wait
        # fields at their defaults are left out: a service of an older version,
        # which does not know the newer fields, still takes the request
        body = spec.model_dump_json(exclude_defaults=True).encode()
        result = await self._call("select_destinations", body, timeout, alone=bool(spec.wait))
        return cast(list[Selection], result)

    async def update_host(self, report: HostReport, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Apply a host report; False when it is stale."""
        body = report.model_dump_json(exclude_defaults=True).encode()
        result = await self._call("host_report", body, timeout)
        return cast(HostReportResult, result).applied

    async def release(self, instance_uuid: str, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Free that instance's claim; False when it holds none."""
        body = ReleaseRequest(instance_uuid=instance_uuid).model_dump_json().encode()
        result = await self._call("release", body, timeout)
        return cast(ReleaseResult, result).released

    async def move(
        self,
        instance_uuid: str,
        migration_uuid: str,
        spec: RequestSpec | None = None,
        *,
        allow_same_host: bool = False,
        evacuate: bool = False,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Selection:
        """Claim a destination for an instance, holding its source under
        ``migration_uuid``; as :meth:`actorsched.Scheduler.move`."""
        body = MoveRequest(
            instance_uuid=instance_uuid,
            migration_uuid=migration_uuid,
            spec=spec,
            allow_same_host=allow_same_host,
            evacuate=evacuate,
        ).model_dump_json(exclude_defaults=True)
        return cast(Selection, await self._call("move", body.encode(), timeout))

    async def confirm_move(self, migration_uuid: str, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Free a move's source hold; False when no such move is open."""
        body = _json(MigrationRequest(migration_uuid=migration_uuid))
        return cast(ConfirmMoveResult, await self._call("confirm_move", body, timeout)).confirmed

    async def revert_move(self, migration_uuid: str, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Free a move's destination and give the instance its source back."""
        body = _json(MigrationRequest(migration_uuid=migration_uuid))
        return cast(RevertMoveResult, await self._call("revert_move", body, timeout)).reverted

    async def reschedule(
        self,
        instance_uuid: str,
        failed_host: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Selection:
        """Free the claim on ``failed_host`` and claim the next alternate that fits;
        raises MaxRetriesExceeded when none does (as :meth:`actorsched.Scheduler.reschedule`)."""
        body = _json(RescheduleRequest(instance_uuid=instance_uuid, failed_host=failed_host))
        return cast(Selection, await self._call("reschedule", body, timeout))

    async def remove_host(self, host: str, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Forget a host and its claims; False when unknown."""
        body = RemoveHostRequest(host=host).model_dump_json().encode()
        result = await self._call("remove_host", body, timeout)
        return cast(RemoveHostResult, result).removed

    async def host_states(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        page_size: int = DEFAULT_PAGE_HOSTS,
    ) -> dict[str, HostState]:
        """Every host, fetched a page at a time (``timeout`` bounds each page).

        Each page is consistent in itself; a host added or removed while the
        pages come may or may not be in the answer.
        """
        hosts: dict[str, HostState] = {}
        cursor: int | None = 0
        while cursor is not None:
            page = await self.host_states_page(cursor, limit=page_size, timeout=timeout)
            hosts.update(page.hosts)
            cursor = page.next_cursor
        return hosts

    async def host_states_page(
        self,
        cursor: int = 0,
        *,
        limit: int = DEFAULT_PAGE_HOSTS,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> HostStatesPage:
        """One page of hosts from ``cursor`` (0, or a page's ``next_cursor``)."""
        # no "host": null, which a service older than that field refuses
        request = HostStatesRequest(limit=limit, cursor=cursor)
        body = request.model_dump_json(exclude_none=True).encode()
        return cast(HostStatesPage, await self._call("host_states", body, timeout))

    async def host_state(self, host: str, *, timeout: float | None = None) -> HostState | None:  # noqa: ASYNC109
        """The host named ``host``, None when there is none: the service reads that
        host's figures only, however many hosts it has."""
        body = HostStatesRequest(host=host).model_dump_json(exclude_none=True).encode()
        page = cast(HostStatesPage, await self._call("host_states", body, timeout))
        return page.hosts.get(host)

    async def plan(self, spec: RequestSpec, *, timeout: float | None = None) -> Plan:  # noqa: ASYNC109
        """A dry run of :meth:`select_destinations`; claims nothing (see Scheduler.plan)."""
        return cast(Plan, await self._call("plan", spec.model_dump_json().encode(), timeout))

    async def claims(
        self,
        host: str | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        page_size: int = DEFAULT_PAGE_HOSTS,
    ) -> list[ClaimInfo]:
        """Every live claim (on ``host`` only, when given), fetched a page at a time."""
        found: list[ClaimInfo] = []
        cursor: int | None = 0
        while cursor is not None:
            body = ClaimsRequest(host=host, limit=page_size, cursor=cursor)
            page = cast(
                ClaimsPage, await self._call("claims", body.model_dump_json().encode(), timeout)
            )
            found.extend(page.claims)
            cursor = page.next_cursor
        return found

    async def where(self, instance_uuid: str, *, timeout: float | None = None) -> Location:  # noqa: ASYNC109
        """Where ``instance_uuid`` is (its claim's host, or the host that reports it)."""
        body = WhereRequest(instance_uuid=instance_uuid).model_dump_json().encode()
        return cast(Location, await self._call("where", body, timeout))

    # -- host aggregates (admin) ---------------------------------------------

    async def create_aggregate(
        self,
        name: str,
        metadata: Mapping[str, str | None] | None = None,
        hosts: Sequence[str] = (),
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Aggregate:
        """Create host aggregate ``name``; the same one sent again is answered alike."""
        body = CreateAggregateRequest(name=name, metadata=dict(metadata or {}), hosts=list(hosts))
        return cast(Aggregate, await self._call("create_aggregate", _json(body), timeout))

    async def update_aggregate(
        self,
        name: str,
        metadata: Mapping[str, str | None],
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Aggregate:
        """Merge ``metadata`` into the aggregate's; a None value deletes that key."""
        body = UpdateAggregateRequest(name=name, metadata=dict(metadata))
        return cast(Aggregate, await self._call("update_aggregate", _json(body), timeout))

    async def delete_aggregate(self, name: str, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Delete an aggregate with no hosts; False when there is none."""
        body = AggregateNameRequest(name=name)
        result = await self._call("delete_aggregate", _json(body), timeout)
        return cast(DeleteAggregateResult, result).deleted

    async def add_host_to_aggregate(
        self,
        name: str,
        host: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Aggregate:
        """Put ``host`` (reported or not) in aggregate ``name``."""
        body = AggregateHostRequest(name=name, host=host)
        return cast(Aggregate, await self._call("add_host_to_aggregate", _json(body), timeout))

    async def remove_host_from_aggregate(
        self,
        name: str,
        host: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Aggregate:
        """Take ``host`` out of aggregate ``name``."""
        body = AggregateHostRequest(name=name, host=host)
        return cast(Aggregate, await self._call("remove_host_from_aggregate", _json(body), timeout))

    async def aggregates(self, *, timeout: float | None = None) -> list[Aggregate]:  # noqa: ASYNC109
        """Every host aggregate, by name."""
        result = await self._call("aggregates", b"{}", timeout)
        return cast(list[Aggregate], result)

    # -- plumbing ------------------------------------------------------------

    async def _call(
        self,
        op_name: str,
        body: bytes,
        timeout: float | None,  # noqa: ASYNC109
        *,
        alone: bool = False,
    ) -> Any:
        """Send one call and await its answer; ``alone``: in a message of its own, outside
        the window (a waiting placement, whose answer may take long, holds no batch)."""
        if self._channel is None:
            raise SchedulerStopped(
                "the SchedulerClient is not connected: use `async with SchedulerClient(...)`"
            )
        limit = self.timeout if timeout is None else timeout
        call = _Call(OPERATIONS[op_name], body)
        try:
            async with asyncio.timeout(limit):
                if self._sender is not None and not alone:
                    self._queued.append(call)
                    self._wakeup.set()
                else:
                    await self._send([call])
                return await call.future
        except TimeoutError:
            raise TimeoutError(
                f"no reply to {op_name} from queue {self.queue!r} within {limit}s; is "
                "`actorsched serve` running? Calling again with the same arguments is safe"
            ) from None
        finally:
            if not call.future.done():
                call.future.cancel()  # the sender skips it; a late reply is dropped
            self._give_up(call)

    def _give_up(self, call: _Call) -> None:
        """Forget a message once no caller waits for its reply any more."""
        if call.correlation_id is None:
            return
        inflight = self._pending.get(call.correlation_id)
        if inflight is not None:  # no reply yet: this caller timed out or was cancelled
            inflight.waiting -= 1
            if inflight.waiting <= 0:
                del self._pending[call.correlation_id]
                self._free_slot(call.correlation_id)

    def _free_slot(self, correlation_id: str) -> None:
        hold = self._holding.pop(correlation_id, None)
        if hold is not None:
            hold.cancel()
            self._wakeup.set()

    def _release_window(self) -> None:
        for hold in self._holding.values():
            hold.cancel()
        self._holding.clear()
        self._wakeup.set()

    def _on_reconnect(self, _connection: object) -> None:
        """After a reconnect, earlier messages hold no slot of the window.

        Their replies may have been lost with the old reply queue; they are
        still matched if they come, and their callers still time out if
        not, but new calls need not wait for that.
        """
        if self._holding:
            log.info(
                "reconnected: %d unanswered message(s) no longer hold the window",
                len(self._holding),
            )
            self._release_window()

    async def _send_loop(self) -> None:
        """The batching sender: divide what is queued over the free slots, publish, repeat."""
        while True:
            free = self.window - len(self._holding)
            if not self._queued or free <= 0:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            calls = self._take(-(-len(self._queued) // free))  # a fair share, rounded up
            if calls:
                message, correlation_id = self._prepare(calls)
                # a reply slower than window_hold (or one lost) frees the slot all the same
                self._holding[correlation_id] = asyncio.get_running_loop().call_later(
                    self.window_hold, self._free_slot, correlation_id
                )
                publish = asyncio.create_task(self._deliver(message, correlation_id, calls))
                self._publishing.add(publish)
                publish.add_done_callback(self._publishing.discard)

    def _take(self, share: int) -> list[_Call]:
        """The calls for the next message: up to ``share`` and max_batch, within max_batch_bytes."""
        calls: list[_Call] = []
        size = 0
        queued = self._queued
        limit = min(share, self.max_batch)
        while queued and len(calls) < limit:
            call = queued[0]
            if call.future.done():  # its caller gave up before it was sent
                queued.popleft()
                continue
            size += len(call.body) + len(call.op.name) + 22  # {"type":"","body":},
            if calls and size > self.max_batch_bytes:
                break
            calls.append(queued.popleft())
        return calls

    async def _send(self, calls: list[_Call]) -> None:
        """Publish ``calls`` and wait for the broker's confirm (errors go to their futures)."""
        message, correlation_id = self._prepare(calls)
        await self._deliver(message, correlation_id, calls)

    def _prepare(self, calls: list[_Call]) -> tuple[aio_pika.Message, str]:
        """The message for ``calls`` (one as its plain operation, several as one ``batch``),
        registered as awaiting its reply."""
        correlation_id = uuid.uuid4().hex
        if len(calls) == 1:
            op_name, body = calls[0].op.name, calls[0].body
        else:
            op_name = BATCH
            body = (
                b'{"requests":['
                + b",".join(
                    b'{"type":"' + call.op.name.encode() + b'","body":' + call.body + b"}"
                    for call in calls
                )
                + b"]}"
            )
        for call in calls:
            call.correlation_id = correlation_id
        # registered before publishing: the reply may overtake the confirm
        self._pending[correlation_id] = _InFlight(calls, batch=len(calls) > 1, waiting=len(calls))
        message = aio_pika.Message(
            body,
            content_type=CONTENT_TYPE,
            type=op_name,
            correlation_id=correlation_id,
            message_id=correlation_id,  # aiormq matches returned messages by it
            reply_to=self._reply_queue,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            # who sends it: the broker checks it is this connection's user, and the
            # service gives that user its roles (actorsched.auth)
            user_id=self.user,
        )
        return message, correlation_id

    async def _deliver(
        self, message: aio_pika.Message, correlation_id: str, calls: list[_Call]
    ) -> None:
        try:
            await self._publish(message, calls)
        except Exception as exc:
            self._pending.pop(correlation_id, None)
            self._free_slot(correlation_id)
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(exc)
            return
        self.messages_sent += 1

    async def _publish(self, message: aio_pika.Message, calls: list[_Call]) -> None:
        """Publish with a confirm; while the robust connection is reconnecting, try again.

        Sending a request twice is safe (claims are idempotent per instance
        uuid), so a publish whose confirm was lost in a reconnect is retried
        until the caller's timeout runs out (for a batch: until no caller in
        it waits any more).
        """
        assert self._channel is not None
        while True:
            try:
                await self._channel.default_exchange.publish(
                    message, routing_key=self.queue, mandatory=True
                )
                return
            except aiormq.exceptions.PublishError:
                raise SchedulerStopped(
                    f"no queue {self.queue!r} on the broker: start `actorsched serve "
                    f"--queue {self.queue}` first"
                ) from None
            except _RECONNECTING as exc:
                if all(call.future.done() for call in calls):
                    return  # every caller timed out: nobody to send it for
                log.debug("publish failed while reconnecting (%s); trying again", exc)
                await asyncio.sleep(_REPUBLISH_PAUSE)

    async def _on_reply(self, message: AbstractIncomingMessage) -> None:
        # a reply nobody waits for (timed out, or a redelivered request) is dropped
        inflight = self._pending.pop(message.correlation_id or "", None)
        if inflight is None:
            return
        self._free_slot(message.correlation_id or "")
        calls = inflight.calls
        if not inflight.batch:
            outcomes: list[Any] = []
            try:
                outcomes.append(decode_reply(calls[0].op, message.body))
            except SchedulerError as exc:
                outcomes.append(exc)
        else:
            outcomes = decode_batch_reply([call.op for call in calls], message.body)
        for call, outcome in zip(calls, outcomes, strict=True):
            if call.future.done():
                continue
            if isinstance(outcome, BaseException):
                call.future.set_exception(outcome)
            else:
                call.future.set_result(outcome)
