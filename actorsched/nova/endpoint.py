"""Nova's scheduler RPC API on RabbitMQ, answered by the same owner as the native queue.

Rules this module keeps:

* It consumes what ``nova-scheduler`` consumes, declared as oslo.messaging
  declares it by default (so a Nova client, and a nova-scheduler being
  replaced, see the same queues): the topic exchange ``control_exchange``
  (not durable), the queues ``scheduler`` and ``scheduler.<host>`` bound to
  it, and a queue ``scheduler_fanout_<id>`` (``x-expires`` 30 min) on the
  fanout exchange ``scheduler_fanout`` (auto-delete).
* It answers only while its service owns the state (a term of the native
  queue's single active consumer): it consumes from the start of a term
  and stops at its end, so a standby never takes Nova's messages.
* Unlike oslo.messaging, which acks a request before dispatching it, a
  delivery is acked only once its answer is published (publisher confirms)
  or, for a cast, once it is applied; with a journal the owner answers only
  what is durable. A lost connection therefore redelivers the message, and
  claims keyed by instance uuid make the second answer the first one.
* Bad input (not oslo's envelope, a version this API does not serve, an
  object version it cannot read) is answered with a failure naming it when
  the message says where to answer, copied to ``actorsched.nova.dead``,
  acked and logged; it never reaches the owner and never stops the consumer.
  A body over ``max_body_bytes`` is never held whole (the channel keeps its
  first 4 KiB, as the native service's does); nor is one nested past
  :mod:`.wire`'s depth, a cast listing over 100,000 instances, or a
  RequestSpec listing over 10,000 hosts or nodes read further.
* While a call is worked on, a call-monitor heartbeat goes to the caller
  every half of the call's ``_call_monitor_timeout`` (at least a second),
  as oslo's dispatcher sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, ClassVar, Literal

import aio_pika
import aiormq.exceptions
from aio_pika.abc import (
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from pydantic import ValidationError

from ..amqp.bodies import BodyCappedChannel, BodyCappedConnection
from ..amqp.metrics import ServiceMetrics
from ..amqp.service import shown
from ..auth import ROLES, Role
from ..core import GetHostStates
from ..errors import InvalidRequest, NoValidHost, SchedulerStopped
from ..journal import JournalError
from ..models import RequestSpec, Selection
from ..scheduler import Scheduler
from . import objects, wire
from .conf import NovaConfig
from .placement import ALLOCATION_REQUEST_VERSION, PlacementError
from .placing import PlacementLink

__all__ = ["DEAD_QUEUE", "TOPIC", "NovaEndpoint"]

log = logging.getLogger("actorsched.nova")

TOPIC = "scheduler"  # nova.scheduler.rpcapi.RPC_TOPIC
DEAD_QUEUE = "actorsched.nova.dead"
_FANOUT_TTL_MS = 1_800_000  # oslo's rabbit_transient_queues_ttl
_DEAD_KEEP = 4_096  # bytes of a bad message kept in its dead letter
# instances one update/sync cast may list, and how many of them are looked up to
# learn which node the service host runs
_MAX_CAST_INSTANCES = 100_000
_MAPPING_LOOKUPS = 8
_FACTS_TTL = 2.0  # seconds a host's node and zone are taken from the last copy
# seconds a new term waits for its first read of Placement before it answers Nova
_FIRST_POLL_TIMEOUT = 10.0
_CHANNEL_ERRORS: tuple[type[BaseException], ...] = (
    aiormq.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    TimeoutError,
)
# select_destinations: the oldest API version read (4.3 carries the RequestSpec object)
_OLDEST_SELECT = (4, 3)


# the role each of Nova's methods needs (actorsched.auth's roles)
_METHOD_ROLES: dict[str, Role] = {
    "select_destinations": "place",
    "update_aggregates": "admin",
    "delete_aggregate": "admin",
    "update_instance_info": "report",
    "delete_instance_info": "report",
    "sync_instance_info": "report",
}


class _Refused(Exception):
    """An answer that is a failure: the serialized remote exception."""

    def __init__(self, failure: str, outcome: str) -> None:
        super().__init__(failure)
        self.failure = failure
        self.outcome = outcome


def _no_valid_host(reason: str) -> _Refused:
    return _Refused(
        wire.failure_body(
            "NoValidHost",
            "nova.exception",
            f"No valid host was found. {reason}",
            kwargs={"reason": reason},
        ),
        "no_valid_host",
    )


def _bad(message: str, outcome: str = "bad_input") -> _Refused:
    # builtins are rebuilt in every oslo caller: a ValueError with our words
    return _Refused(wire.failure_body("ValueError", "builtins", message, args=[message]), outcome)


def _user_id(spec: Any) -> str:
    """The user of a RequestSpec primitive (Placement records it with the claim)."""
    data = spec.get("nova_object.data") if isinstance(spec, dict) else None
    user = data.get("user_id") if isinstance(data, dict) else None
    return user if isinstance(user, str) else ""


def _with_allocation(
    selection: dict[str, Any], allocation: str | None, provider: str | None
) -> dict[str, Any]:
    """A Selection primitive that carries the allocation request claimed for it (or, for
    an alternate, the one the conductor claims on a reschedule), and, with Placement,
    the compute node's own uuid (its resource provider's), as Nova's has."""
    data = selection["nova_object.data"]
    if allocation is not None:
        data["allocation_request"] = allocation
        data["allocation_request_version"] = ALLOCATION_REQUEST_VERSION
    if provider is not None:
        data["compute_node_uuid"] = provider
    return selection


def _instance_uuids(primitive: Any) -> list[str]:
    """The uuids of an InstanceList (or one Instance) primitive as oslo sends it."""
    if not isinstance(primitive, dict):
        raise _bad("update_instance_info needs instance_info, an InstanceList object")
    name = primitive.get("nova_object.name")
    data = primitive.get("nova_object.data")
    if not isinstance(data, dict):
        raise _bad("instance_info has no nova_object.data")
    if name == "Instance":
        items: Any = [primitive]
    elif name == "InstanceList":
        items = data.get("objects")
        if not isinstance(items, list):
            raise _bad("instance_info (an InstanceList) has no objects list")
    else:
        raise _bad(f"instance_info is a {name!r}, not an InstanceList")
    uuids: list[str] = []
    for item in items:
        fields = item.get("nova_object.data") if isinstance(item, dict) else None
        value = fields.get("uuid") if isinstance(fields, dict) else None
        if not isinstance(value, str) or not value:
            raise _bad("an Instance in instance_info has no uuid")
        uuids.append(value)
    return uuids


class NovaEndpoint:
    """Answers Nova's scheduler RPC API on the broker of ``nova.amqp_url`` from ``scheduler``.

    >>> async def run(scheduler: Scheduler, nova: NovaConfig) -> None:  # doctest: +SKIP
    ...     endpoint = NovaEndpoint(scheduler, nova, cell_uuid=str(uuid.uuid4()))
    ...     await endpoint.start()
    ...     await endpoint.begin_term()  # consume while this process owns the state
    """

    def __init__(
        self,
        scheduler: Scheduler,
        nova: NovaConfig,
        *,
        cell_uuid: str,
        max_body_bytes: int,
        prefetch: int = 64,
        publish_timeout: float = 10.0,
        ack_timeout: float = 5.0,
        reconnect_interval: float = 1.0,
        topic: str = TOPIC,
        metrics: ServiceMetrics | None = None,
        roles: frozenset[Role] = frozenset(ROLES),
        placement: PlacementLink | None = None,
    ) -> None:
        if not 1 <= prefetch <= scheduler.config.mailbox_size:
            raise ValueError(
                f"the Nova endpoint's prefetch {prefetch} must be between 1 and the mailbox "
                f"size {scheduler.config.mailbox_size}"
            )
        self.scheduler = scheduler
        self.nova = nova
        # host state from Placement and claims written to it (None: native reports)
        self.placement = placement
        self._following: asyncio.Task[None] | None = None
        self.url = nova.amqp_url
        self.cell_uuid = str(uuid.UUID(cell_uuid))
        self.max_body_bytes = max_body_bytes
        self.prefetch = prefetch
        self._publish_timeout = publish_timeout
        self._ack_timeout = ack_timeout
        self._reconnect_interval = reconnect_interval
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._queues: list[AbstractQueue] = []
        self._tags: list[tuple[AbstractQueue, str]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._aggregates_lock = asyncio.Lock()
        self._facts: dict[str, tuple[str, str | None]] = {}
        self._facts_at = -_FACTS_TTL
        # actorsched host (Nova's node) -> Nova's service host, from the instance casts
        self._service_hosts: dict[str, str] = {}
        self._service_hosts_known: set[str] = set()
        # the reverse: a service host, in lower case, -> its nodes (what _as_nodes reads)
        self._nodes_of: dict[str, list[str]] = {}
        self._consuming = False
        # Nova's topic; another one only for tests that share a broker (queue names are
        # global on a vhost, whatever the exchange)
        self.topic = topic
        self.fanout_queue = f"{topic}_fanout_{uuid.uuid4().hex}"
        self.dead_queue = DEAD_QUEUE if topic == TOPIC else f"{DEAD_QUEUE}.{topic}"
        self.counts: dict[tuple[str, str], int] = {}  # (method, outcome) -> messages
        self.metrics = metrics
        # what Nova's messages may do: oslo.messaging sets no user_id, so they all
        # get these roles ([auth] nova); Nova's vhost and exchange permissions are
        # what keeps others out
        self.roles = roles

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Connect and declare Nova's exchanges and queues; consuming waits for a term."""
        self._connection = await aio_pika.connect_robust(
            self.url,
            reconnect_interval=self._reconnect_interval,
            client_properties={"connection_name": f"actorsched nova-scheduler {self.nova.host}"},
            connection_class=BodyCappedConnection,
        )
        try:
            channel = self._connection.channel(publisher_confirms=True)
            assert isinstance(channel, BodyCappedChannel)
            # a body over the cap is never held whole, on this channel and its reopens
            channel.max_body_bytes = self.max_body_bytes
            channel.keep = _DEAD_KEEP
            await channel
            self._channel = channel
            await channel.set_qos(prefetch_count=self.prefetch)
            topic = await channel.declare_exchange(
                self.nova.control_exchange, aio_pika.ExchangeType.TOPIC, durable=False
            )
            for name in (self.topic, f"{self.topic}.{self.nova.host}"):
                queue = await channel.declare_queue(name, durable=False, auto_delete=False)
                await queue.bind(topic, routing_key=name)
                self._queues.append(queue)
            fanout = await channel.declare_exchange(
                f"{self.topic}_fanout",
                aio_pika.ExchangeType.FANOUT,
                durable=False,
                auto_delete=True,
            )
            queue = await channel.declare_queue(
                self.fanout_queue,
                durable=False,
                auto_delete=False,
                arguments={"x-expires": _FANOUT_TTL_MS},
            )
            await queue.bind(fanout, routing_key=self.topic)
            self._queues.append(queue)
            await channel.declare_queue(
                self.dead_queue, durable=True, arguments={"x-queue-type": "quorum"}
            )
        except BaseException:
            await self._connection.close()
            self._connection = None
            raise

    async def begin_term(self) -> None:
        """Start consuming: this process owns the state from now on."""
        if self._consuming or self._connection is None:
            return
        self._consuming = True
        link = self.placement
        if link is not None and self._following is None:
            self._following = asyncio.get_running_loop().create_task(link.run())
            if not await link.ready(_FIRST_POLL_TIMEOUT):
                log.warning(
                    "Placement at %s not read within %gs: answering Nova from what the "
                    "state holds until it is",
                    link.client.url,
                    _FIRST_POLL_TIMEOUT,
                )
        for queue in self._queues:
            tag = await queue.consume(self._on_message)
            self._tags.append((queue, tag))
        log.info(
            "answering Nova's scheduler API: exchange %r, queues %s",
            self.nova.control_exchange,
            [q.name for q in self._queues],
        )

    async def end_term(self) -> None:
        """Stop consuming (a standby takes no Nova message); what is in flight goes on."""
        self._consuming = False
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._following
            self._following = None
        tags, self._tags = self._tags, []
        for queue, tag in tags:
            with contextlib.suppress(*_CHANNEL_ERRORS):
                await queue.cancel(tag, timeout=5)

    async def stop(self, drain_timeout: float = 30.0) -> None:
        """Stop consuming, finish what is in flight, close."""
        if self._connection is None:
            return
        await self.end_term()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=drain_timeout)
            for task in self._tasks:
                task.cancel()
        with contextlib.suppress(*_CHANNEL_ERRORS):
            await asyncio.wait_for(self._connection.close(), self._ack_timeout)
        self._connection = None

    # -- one delivery --------------------------------------------------------

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        # the declared size of a body cut to its head, taken now (no mark outlives
        # its delivery)
        channel = self._channel
        cut = (
            channel.cut_size(message.delivery_tag)
            if isinstance(channel, BodyCappedChannel)
            else None
        )
        task = asyncio.create_task(self._handle(message, cut))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _count(self, method: str, outcome: str, started: float | None = None) -> None:
        method = method if method in self._METHODS else "unknown"  # a bounded vocabulary
        key = (method, outcome)
        self.counts[key] = self.counts.get(key, 0) + 1
        if self.metrics is not None:
            self.metrics.nova_requests.labels(method, outcome).inc()
            if started is not None:
                self.metrics.nova_latency.labels(method).observe(time.perf_counter() - started)

    async def _handle(self, message: AbstractIncomingMessage, cut: int | None = None) -> None:
        started = time.perf_counter()
        try:
            call = wire.decode(message.body, max_body_bytes=self.max_body_bytes, body_size=cut)
        except wire.BadEnvelope as bad:
            await self._dead_letter(message, bad.reason, str(bad))
            if bad.reply_q and bad.msg_id:
                await self._publish(
                    bad.reply_q, wire.encode_failure(bad.msg_id, _bad(str(bad)).failure)
                )
            self._count("unknown", "bad_input")
            await self._ack(message)
            return
        heartbeat = None
        if call.is_call and call.call_monitor_timeout:
            heartbeat = asyncio.create_task(self._heartbeat(call))
        result: Any = None
        failure: str | None = None
        try:
            result = await self._dispatch(call)
            outcome = "ok"
        except _Refused as refused:
            outcome, failure = refused.outcome, refused.failure
            if outcome == "bad_input":
                await self._dead_letter(message, "bad_input", refused.failure)
        except (SchedulerStopped, JournalError) as exc:
            # not answered: the change may not be durable; the broker delivers it again
            log.warning("%s not answered (%s); handing it back", call.method, exc)
            self._count(call.method, "requeued")
            await self._nack(message)
            return
        except Exception:
            log.exception("%s failed unexpectedly; answered with a failure", call.method)
            outcome = "error"
            failure = _bad(f"actorsched failed on {call.method}; see its log").failure
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
        if call.msg_id is not None and call.reply_q is not None:
            body = (
                wire.encode_reply(call.msg_id, result)
                if failure is None
                else wire.encode_failure(call.msg_id, failure)
            )
            if not await self._publish(call.reply_q, body):
                self._count(call.method, "unacked")
                await self._nack(message)
                return
        await self._ack(message)
        self._count(call.method, outcome, started)

    async def _nack(self, message: AbstractIncomingMessage) -> None:
        with contextlib.suppress(*_CHANNEL_ERRORS):
            await asyncio.wait_for(message.nack(requeue=True), self._ack_timeout)

    async def _heartbeat(self, call: wire.Call) -> None:
        assert call.msg_id is not None
        assert call.reply_q is not None
        interval = max(1.0, (call.call_monitor_timeout or 2.0) / 2)
        while True:
            await asyncio.sleep(interval)
            await self._publish(call.reply_q, wire.encode_heartbeat(call.msg_id))

    async def _publish(self, routing_key: str, body: bytes) -> bool:
        channel = self._channel
        if channel is None:
            return False
        try:
            # the default exchange routes to the caller's reply queue (oslo's direct_send)
            await channel.default_exchange.publish(
                aio_pika.Message(
                    body,
                    content_type="application/json",
                    content_encoding="utf-8",
                    delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT,
                ),
                routing_key=routing_key,
                mandatory=False,
                timeout=self._publish_timeout,
            )
        except _CHANNEL_ERRORS as exc:
            log.warning("could not answer on %s (%s)", routing_key, exc)
            return False
        return True

    async def _ack(self, message: AbstractIncomingMessage) -> None:
        with contextlib.suppress(*_CHANNEL_ERRORS):
            await asyncio.wait_for(message.ack(), self._ack_timeout)

    async def _dead_letter(self, message: AbstractIncomingMessage, reason: str, why: str) -> None:
        log.warning("Nova message refused (%s): %s", reason, why[:500])
        channel = self._channel
        if channel is None:
            return
        copy = aio_pika.Message(
            message.body[:_DEAD_KEEP],
            headers={"x-actorsched-reason": reason, "x-actorsched-error": why[:1000]},
            content_type=message.content_type,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        with contextlib.suppress(*_CHANNEL_ERRORS):
            await channel.default_exchange.publish(
                copy, routing_key=self.dead_queue, timeout=self._publish_timeout
            )

    # -- methods ---------------------------------------------------------------

    async def _dispatch(self, call: wire.Call) -> Any:
        if call.namespace is not None:
            raise _bad(f"namespace {call.namespace!r}: the scheduler API has none")
        handler = self._METHODS.get(call.method)
        if handler is None:
            raise _Refused(
                wire.failure_body(
                    "NoSuchMethod",
                    "oslo_messaging.rpc.dispatcher",
                    f"Endpoint does not support RPC method {call.method}",
                    args=[call.method],
                ),
                "bad_input",
            )
        unsupported = wire.check_version(call.version, call.method)
        if unsupported is not None:
            raise _bad(unsupported)
        need = _METHOD_ROLES[call.method]
        if need not in self.roles and "admin" not in self.roles:
            why = f"{call.method} needs the role {need!r}; Nova's messages have " + (
                f"{sorted(self.roles)} ([auth] nova)" if self.roles else "none ([auth] nova)"
            )
            if self.metrics is not None:
                self.metrics.denied.labels(call.method, "nova").inc()
            raise _Refused(
                wire.failure_body("PermissionError", "builtins", why, args=[why]), "forbidden"
            )
        return await handler(self, call)

    async def _select_destinations(self, call: wire.Call) -> Any:
        major, _, minor = call.version.partition(".")
        if (int(major), int(minor)) < _OLDEST_SELECT or "spec_obj" not in call.args:
            raise _bad(
                f"select_destinations {call.version} without spec_obj: actorsched reads API "
                "4.3 and later (the RequestSpec object)"
            )
        args = call.args
        uuids = args.get("instance_uuids")
        if uuids is not None and not (
            isinstance(uuids, list) and all(isinstance(u, str) for u in uuids)
        ):
            raise _bad("instance_uuids must be a list of strings")
        try:
            request = objects.request_from_primitive(
                args["spec_obj"],
                uuids,
                filters=self.nova.nova_filters,
                weighs_images=self.nova.weighs_images,
            )
        except objects.UnsupportedObject as exc:
            raise _bad(str(exc)) from None
        except objects.Unsupported as exc:
            raise _no_valid_host(f"actorsched cannot place this request: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise _bad(f"RequestSpec field {where}: {first['msg']}") from None
        request = replace(request, spec=self._as_nodes(request.spec))
        claimed: dict[tuple[str, str], str] = {}  # (instance, host) -> allocation request
        return_objects = bool(args.get("return_objects", False))
        return_alternates = bool(args.get("return_alternates", False)) and return_objects
        try:
            if request.is_rebuild:
                plan = await self.scheduler.plan(request.spec)
                if not plan.placed:
                    raise NoValidHost(plan.message or "no host passed the filters")
                chosen = [
                    Selection(
                        instance_uuid=entry.instance_uuid,
                        host=entry.host,
                        alternates=entry.alternates,
                    )
                    for entry in plan.instances
                    if entry.host is not None
                ]
            elif self.placement is not None:
                placed = await self.placement.place(
                    request.spec, request.spec.project_id or "", _user_id(args["spec_obj"])
                )
                chosen = [item.selection for item in placed]
                claimed = {
                    (item.selection.instance_uuid, host): allocation
                    for item in placed
                    for host, allocation in (
                        (item.selection.host, item.allocation),
                        *item.alternates.items(),
                    )
                }
            else:
                chosen = await self.scheduler.select_destinations(request.spec)
        except NoValidHost as exc:
            raise _no_valid_host(str(exc)) from None
        except PlacementError as exc:
            # Placement down or failing: no claim can be written, so none is answered
            raise _no_valid_host(f"Placement cannot be asked: {exc}") from None
        except InvalidRequest as exc:
            # the owner refused the request as sent (a bound, or a move of an instance
            # that holds a claim, which Nova's moves are until they go through
            # Scheduler.move): NoValidHost is what Nova's conductor handles, leaving
            # the instance where it is with the reason as its fault
            raise _no_valid_host(f"actorsched refused the request: {exc}") from None
        facts = await self._host_facts(
            [s.host for s in chosen] + [h for s in chosen for h in s.alternates]
        )
        answer: list[Any] = []
        for selection in chosen:
            hosts = [selection.host]
            if return_alternates:
                hosts += list(selection.alternates)[: self.scheduler.config.max_attempts - 1]
            if return_objects:
                answer.append(
                    [
                        _with_allocation(
                            objects.selection_primitive(
                                self.service_host(host), *facts[host], self.cell_uuid
                            ),
                            claimed.get((selection.instance_uuid, host)),
                            self._provider(host),
                        )
                        for host in hosts
                    ]
                )
            else:
                answer.append(
                    objects.legacy_destination(
                        host=self.service_host(hosts[0]), node=facts[hosts[0]][0]
                    )
                )
        return answer

    async def _host_facts(self, hosts: list[str]) -> dict[str, tuple[str, str | None]]:
        """Each host's node and zone, from a copy of the host table at most ``_FACTS_TTL`` old.

        The copy is the owner's column copy (one step, no per-host objects); its
        names, zones and nodes are read here, off the owner.
        """
        now = time.monotonic()
        if now - self._facts_at > _FACTS_TTL or any(h not in self._facts for h in hosts):
            image = await (await self.scheduler.submit_when_room(GetHostStates()))
            zone_names: list[str | None] = [*image.zone_names, None]  # zone id -1: none
            zones = image.zone.tolist()
            nodes = image.nodes
            facts: dict[str, tuple[str, str | None]] = {}
            for offset, name in enumerate(image.names):
                if name is not None:
                    row = image.start + offset
                    facts[name] = (nodes.get(row, name), zone_names[zones[offset]])
            self._facts = facts
            self._facts_at = now
        return {h: self._facts.get(h, (h, None)) for h in hosts}

    async def _update_aggregates(self, call: wire.Call) -> None:
        given = call.args.get("aggregates")
        if not isinstance(given, list):
            raise _bad("update_aggregates needs aggregates: a list of Aggregate objects")
        try:
            wanted = [objects.aggregate_from_primitive(p) for p in given]
        except objects.UnsupportedObject as exc:
            raise _bad(str(exc)) from None
        async with self._aggregates_lock:
            for aggregate in wanted:
                await self._put_aggregate(aggregate)
        self._facts_at = -_FACTS_TTL  # zones may have moved

    async def _put_aggregate(self, aggregate: objects.NovaAggregate) -> None:
        """Make actorsched's aggregate of that name what Nova's is (a few owner steps)."""
        scheduler = self.scheduler
        current = {a.name: a for a in await scheduler.aggregates()}.get(aggregate.name)
        try:
            if current is None:
                await scheduler.create_aggregate(
                    aggregate.name, aggregate.metadata, aggregate.hosts
                )
                return
            changed: dict[str, str | None] = {
                k: v for k, v in aggregate.metadata.items() if current.metadata.get(k) != v
            }
            changed.update({k: None for k in current.metadata if k not in aggregate.metadata})
            if changed:
                await scheduler.update_aggregate(aggregate.name, changed)
            for host in sorted(set(aggregate.hosts) - set(current.hosts)):
                await scheduler.add_host_to_aggregate(aggregate.name, host)
            for host in sorted(set(current.hosts) - set(aggregate.hosts)):
                await scheduler.remove_host_from_aggregate(aggregate.name, host)
        except InvalidRequest as exc:
            raise _bad(f"aggregate {aggregate.name!r}: {exc}") from None

    async def _delete_aggregate(self, call: wire.Call) -> None:
        try:
            aggregate = objects.aggregate_from_primitive(call.args.get("aggregate"))
        except objects.UnsupportedObject as exc:
            raise _bad(str(exc)) from None
        async with self._aggregates_lock:
            current = {a.name: a for a in await self.scheduler.aggregates()}.get(aggregate.name)
            if current is None:
                return
            for host in current.hosts:
                await self.scheduler.remove_host_from_aggregate(aggregate.name, host)
            await self.scheduler.delete_aggregate(aggregate.name)
        self._facts_at = -_FACTS_TTL

    async def _instance_info(self, call: wire.Call) -> None:
        """A compute's word on its instances. Its figures come with the host's reports
        (or Placement); what a cast adds is Nova's service host of the node an instance
        is on (Selections name it), what each of that service host's nodes runs (as
        Nova's host manager keeps it: where an instance is, for the hints and a
        group's members), and a deleted instance's claim freed at once."""
        host = call.args.get("host_name")
        if not isinstance(host, str) or not host:
            raise _bad(f"{call.method} needs host_name, a non-empty string")
        if call.method == "delete_instance_info":
            instance = call.args.get("instance_uuid")
            if not isinstance(instance, str) or not instance:
                raise _bad("delete_instance_info needs instance_uuid, a non-empty string")
            await self._forget_instance(host, instance)
            await self._list_on_nodes(host, [instance], "remove")
            return
        if call.method == "sync_instance_info":
            uuids = call.args.get("instance_uuids")
            if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
                raise _bad("sync_instance_info needs instance_uuids, a list of strings")
        else:
            uuids = _instance_uuids(call.args.get("instance_info"))
        if len(uuids) > _MAX_CAST_INSTANCES:
            raise _bad(
                f"{call.method} lists {len(uuids):,} instances, over {_MAX_CAST_INSTANCES:,}"
            )
        await self._learn_service_host(host, uuids)
        await self._list_on_nodes(
            host, uuids, "sync" if call.method == "sync_instance_info" else "add"
        )

    async def _list_on_nodes(
        self, host: str, uuids: list[str], mode: Literal["add", "remove", "sync"]
    ) -> None:
        """What Nova's service ``host`` says it runs, on each of its nodes (a node of
        no known service host is its own: Nova's host and node are one name there)."""
        for node in self._nodes_of.get(host.lower(), [host]):
            await self.scheduler.nova_instances(node, uuids, mode)

    async def _learn_service_host(self, host: str, uuids: list[str]) -> None:
        """Which of actorsched's hosts (Nova's nodes) Nova's service ``host`` runs, from
        where the first of its instances that actorsched knows is. Once per service
        host: a periodic sync of a known one costs nothing."""
        if host in self._service_hosts_known:
            return
        for instance in uuids[:_MAPPING_LOOKUPS]:
            node = (await self.scheduler.where(instance)).host
            if node is None:
                continue
            if len(self._service_hosts) >= self.scheduler.config.max_hosts:
                log.warning(
                    "not mapping service host %s: %d are mapped",
                    shown(host),
                    len(self._service_hosts),
                )
                return
            before = self._service_hosts.get(node)
            if before is not None:  # a node of another service host before: not any more
                self._nodes_of[before.lower()].remove(node)
            self._service_hosts[node] = host
            self._service_hosts_known.add(host)
            self._nodes_of.setdefault(host.lower(), []).append(node)
            return

    async def _forget_instance(self, host: str, instance: str) -> None:
        """Nova deleted ``instance`` from service ``host`` (or moved it away): its claim
        is freed when it is on a node of that host; a move's destination keeps it."""
        node = (await self.scheduler.where(instance)).host
        if node is None or self._service_hosts.get(node, node) != host:
            return
        await self.scheduler.release(instance)

    def _as_nodes(self, spec: RequestSpec) -> RequestSpec:
        """``spec`` with its ``ignore_hosts`` and ``force_hosts``, which Nova gives as
        service hosts (its host manager matches them against each node's host, in
        any case), extended by the nodes (actorsched's hosts) of those service hosts."""
        if not self._service_hosts or not (spec.ignore_hosts or spec.force_hosts):
            return spec

        def nodes(names: list[str]) -> list[str]:
            # a lookup per name named, not a scan of every mapped node
            wanted = {name.lower() for name in names}
            extra = [
                node
                for name in dict.fromkeys(name.lower() for name in names)
                for node in self._nodes_of.get(name, ())
                if node.lower() not in wanted
            ]
            return [*names, *extra]

        data = spec.model_dump()
        data.update(ignore_hosts=nodes(spec.ignore_hosts), force_hosts=nodes(spec.force_hosts))
        try:  # checked again: the lists keep their bound
            return RequestSpec.model_validate(data)
        except ValidationError:
            raise _bad(
                "ignore_hosts or force_hosts name service hosts of more nodes than a "
                "request may list"
            ) from None

    def _provider(self, host: str) -> str | None:
        """The Placement resource provider (compute node uuid) of ``host``, if followed."""
        link = self.placement
        return None if link is None else link.follower.provider_of_host(host)

    def service_host(self, node: str) -> str:
        """Nova's service host of actorsched's host ``node`` (itself until a cast says)."""
        return self._service_hosts.get(node, node)

    _METHODS: ClassVar[dict[str, Callable[[NovaEndpoint, wire.Call], Awaitable[Any]]]] = {
        "select_destinations": _select_destinations,
        "update_aggregates": _update_aggregates,
        "delete_aggregate": _delete_aggregate,
        "update_instance_info": _instance_info,
        "delete_instance_info": _instance_info,
        "sync_instance_info": _instance_info,
    }
