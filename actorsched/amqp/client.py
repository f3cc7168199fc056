"""``SchedulerClient``: the Scheduler API over AMQP, for processes that do not own the scheduler.

Each call publishes one request (persistent, publisher-confirmed, mandatory
so a missing queue fails at once) and waits for the reply on this client's
own exclusive queue, matched by ``correlation_id``. Errors come back as the
classes the embedded :class:`~actorsched.Scheduler` raises.

A call that times out may still have been applied. Every operation is
safe to repeat (claims are keyed by instance uuid, reports by generation),
so the answer to a timeout is to call again with the same arguments.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from types import TracebackType
from typing import Any, cast

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustChannel, AbstractRobustConnection

from ..errors import SchedulerStopped
from ..models import HostReport, HostState, RequestSpec, Selection
from .protocol import (
    CONTENT_TYPE,
    OPERATIONS,
    HostReportResult,
    ReleaseRequest,
    ReleaseResult,
    RemoveHostRequest,
    RemoveHostResult,
    decode_reply,
)
from .service import DEFAULT_QUEUE, DEFAULT_URL

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


class SchedulerClient:
    """Calls a running ``actorsched serve`` through RabbitMQ.

    ``timeout`` (seconds) bounds each call; a method's own ``timeout``
    argument overrides it. On timeout the call raises :class:`TimeoutError`.

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
    ) -> None:
        self.url = url
        self.queue = queue
        self.timeout = timeout
        self._reconnect_interval = reconnect_interval
        self._reply_queue = f"actorsched.reply.{uuid.uuid4().hex}"
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._pending: dict[str, asyncio.Future[bytes]] = {}

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
        self._connection, self._channel = connection, channel

    async def close(self) -> None:
        """Close the connection; calls still waiting fail with SchedulerStopped."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(SchedulerStopped("the SchedulerClient was closed"))
        self._pending.clear()
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
        timeout: float | None = None,  # noqa: ASYNC109 (a per-call limit is the API)
    ) -> list[Selection]:
        """Claim a host per instance uuid, in the spec's order; raises NoValidHost."""
        result = await self._call("select_destinations", spec.model_dump_json().encode(), timeout)
        return cast(list[Selection], result)

    async def update_host(self, report: HostReport, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Apply a host report; False when it is stale."""
        result = await self._call("host_report", report.model_dump_json().encode(), timeout)
        return cast(HostReportResult, result).applied

    async def release(self, instance_uuid: str, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Free that instance's claim; False when it holds none."""
        body = ReleaseRequest(instance_uuid=instance_uuid).model_dump_json().encode()
        result = await self._call("release", body, timeout)
        return cast(ReleaseResult, result).released

    async def remove_host(self, host: str, *, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Forget a host and its claims; False when unknown."""
        body = RemoveHostRequest(host=host).model_dump_json().encode()
        result = await self._call("remove_host", body, timeout)
        return cast(RemoveHostResult, result).removed

    async def host_states(self, *, timeout: float | None = None) -> dict[str, HostState]:  # noqa: ASYNC109
        """A consistent snapshot of every host."""
        result = await self._call("host_states", b"{}", timeout)
        return cast(dict[str, HostState], result)

    # -- plumbing ------------------------------------------------------------

    async def _call(self, op_name: str, body: bytes, timeout: float | None) -> Any:  # noqa: ASYNC109
        if self._channel is None:
            raise SchedulerStopped(
                "the SchedulerClient is not connected: use `async with SchedulerClient(...)`"
            )
        op = OPERATIONS[op_name]
        limit = self.timeout if timeout is None else timeout
        correlation_id = uuid.uuid4().hex
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = future
        message = aio_pika.Message(
            body,
            content_type=CONTENT_TYPE,
            type=op_name,
            correlation_id=correlation_id,
            message_id=correlation_id,  # aiormq matches returned messages by it
            reply_to=self._reply_queue,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        try:
            async with asyncio.timeout(limit):
                await self._publish(message)
                reply = await future
        except TimeoutError:
            raise TimeoutError(
                f"no reply to {op_name} from queue {self.queue!r} within {limit}s; is "
                "`actorsched serve` running? Calling again with the same arguments is safe"
            ) from None
        finally:
            self._pending.pop(correlation_id, None)
        return decode_reply(op, reply)

    async def _publish(self, message: aio_pika.Message) -> None:
        """Publish with a confirm; while the robust connection is reconnecting, try again.

        Sending a request twice is safe (claims are idempotent per instance
        uuid), so a publish whose confirm was lost in a reconnect is retried
        until the caller's timeout runs out.
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
                log.debug("publish failed while reconnecting (%s); trying again", exc)
                await asyncio.sleep(_REPUBLISH_PAUSE)

    async def _on_reply(self, message: AbstractIncomingMessage) -> None:
        future = self._pending.get(message.correlation_id or "")
        # a reply nobody waits for (timed out, or a redelivered request) is dropped
        if future is not None and not future.done():
            future.set_result(message.body)
