"""The ``batch`` operation against the real broker: the batching client and raw batches."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aio_pika
import pytest
from amqp_support import (
    AMQP_URL,
    ROOMY,
    Stack,
    delete_topology,
    host_report,
    running_stack,
    unique_queue,
)

from actorsched import InvalidRequest, NoValidHost, RequestSpec, Selection
from actorsched.amqp import SchedulerClient
from actorsched.amqp.service import REASON_HEADER, dead_letter_names, queue_arguments

pytestmark = pytest.mark.amqp


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack(config=ROOMY) as running:
        yield running


def spec(*uuids: str, memory_mb: int = 128) -> RequestSpec:
    return RequestSpec(instance_uuids=list(uuids), memory_mb=memory_mb, vcpus=1, disk_gb=1)


def requests_total(stack: Stack, op: str, outcome: str) -> float:
    value = stack.service.metrics.registry.get_sample_value(
        "actorsched_requests_total", {"op": op, "outcome": outcome}
    )
    return value or 0.0


async def settled(stack: Stack) -> None:
    """Wait until every delivery is acked (a reply is published before its ack)."""
    for _ in range(250):
        if stack.service.in_flight == 0:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("deliveries still in flight")


class RawCaller:
    """Plain aio-pika request/reply, no actorsched client code."""

    def __init__(self, channel: aio_pika.abc.AbstractChannel, queue: str) -> None:
        self.channel = channel
        self.queue = queue
        self.replies: asyncio.Queue[aio_pika.abc.AbstractIncomingMessage] = asyncio.Queue()
        self.reply_to = ""

    async def start(self) -> None:
        replies = await self.channel.declare_queue("", exclusive=True, auto_delete=True)
        self.reply_to = replies.name
        await replies.consume(self.replies.put, no_ack=True)

    async def call(self, op: str, body: bytes, correlation_id: str | None = None) -> Any:
        correlation_id = correlation_id or uuid.uuid4().hex
        await self.channel.default_exchange.publish(
            aio_pika.Message(
                body,
                type=op,
                content_type="application/json",
                correlation_id=correlation_id,
                reply_to=self.reply_to,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            ),
            routing_key=self.queue,
        )
        reply = await asyncio.wait_for(self.replies.get(), timeout=10)
        assert reply.correlation_id == correlation_id
        assert reply.type == op
        return json.loads(reply.body)


@pytest.fixture
async def raw(stack: Stack) -> AsyncIterator[RawCaller]:
    connection = await aio_pika.connect(stack.url)
    async with connection:
        caller = RawCaller(await connection.channel(), stack.queue)
        await caller.start()
        yield caller


def batch_body(*items: tuple[str, Any]) -> bytes:
    return json.dumps({"requests": [{"type": t, "body": b} for t, b in items]}).encode()


async def test_concurrent_calls_through_one_client_share_messages(stack: Stack) -> None:
    await asyncio.gather(*(stack.client.update_host(host_report(f"h{i}")) for i in range(10)))
    sent_before = stack.client.messages_sent
    uuids = [f"vm-{i}" for i in range(300)]
    results = await asyncio.gather(*(stack.client.select_destinations(spec(u)) for u in uuids))
    sent = stack.client.messages_sent - sent_before
    # every caller got the answer for its own instance, and each was really placed
    assert [sel.instance_uuid for [sel] in results] == uuids
    claims = stack.scheduler.core.claims()
    assert all(claims[sel.instance_uuid][0] == sel.host for [sel] in results)
    assert stack.scheduler.claim_count == 300
    assert 1 <= sent < len(uuids)  # fewer AMQP messages than calls
    await settled(stack)
    assert stack.service.accepted == stack.service.answered == stack.client.messages_sent
    assert stack.service.operations == 10 + 300
    # metrics count each item under its own operation, not under "batch"
    assert requests_total(stack, "select_destinations", "ok") == 300
    assert requests_total(stack, "host_report", "ok") == 10
    assert requests_total(stack, "batch", "ok") == 0
    latency = stack.service.metrics.registry.get_sample_value(
        "actorsched_request_duration_seconds_count", {"op": "select_destinations"}
    )
    assert latency == 300  # one latency sample per item too
    batch_messages = stack.service.metrics.registry.get_sample_value("actorsched_batch_items_count")
    assert batch_messages is not None
    assert 1 <= batch_messages < stack.service.accepted + 1


async def test_mixed_operations_and_failures_in_one_batch_keep_their_own_results(
    stack: Stack,
) -> None:
    client = stack.client
    await client.update_host(host_report("h1", memory_mb=2048))
    await client.select_destinations(spec("vm-claimed"))
    await client.select_destinations(spec("vm-a"))
    sent_before = client.messages_sent
    # the items of a batch run concurrently: none of these depends on another
    outcomes = await asyncio.gather(
        client.update_host(host_report("h2", memory_mb=2048)),
        client.select_destinations(spec("vm-1")),
        client.select_destinations(spec("vm-big", memory_mb=65536)),
        client.select_destinations(spec("vm-claimed", "vm-unclaimed")),
        client.release("vm-nobody"),
        client.release("vm-a"),
        client.remove_host("h-unknown"),
        return_exceptions=True,
    )
    assert client.messages_sent - sent_before < len(outcomes)
    applied, placed, big, mixed, released_none, released, removed = outcomes
    assert applied is True
    assert isinstance(placed, list)
    assert [sel.instance_uuid for sel in placed] == ["vm-1"]
    assert isinstance(big, NoValidHost)  # NoValidHost stays NoValidHost, with its figures
    assert big.instance_uuid == "vm-big"
    assert set(big.filter_counts) == {"RamFilter"}
    assert isinstance(mixed, InvalidRequest)
    assert (released_none, released, removed) == (False, True, False)
    assert set(stack.scheduler.core.claims()) == {"vm-claimed", "vm-1"}
    await settled(stack)
    assert requests_total(stack, "select_destinations", "no_valid_host") == 1
    assert requests_total(stack, "select_destinations", "invalid_request") == 1
    assert requests_total(stack, "release", "ok") == 2


async def test_a_raw_batch_from_plain_aio_pika_gets_one_reply_per_item(
    stack: Stack, raw: RawCaller
) -> None:
    await stack.client.update_host(host_report("h1"))
    body = batch_body(
        ("host_report", json.loads(host_report("h2").model_dump_json())),
        ("select_destinations", {"instance_uuids": ["vm-1"], "memory_mb": 512, "vcpus": 1,
                                 "disk_gb": 1}),
        ("select_destinations", {"instance_uuids": ["vm-2"], "memory_mb": 65536, "vcpus": 1,
                                 "disk_gb": 1}),
        ("host_states", {}),
    )  # fmt: skip
    reply = await raw.call("batch", body)
    assert set(reply) == {"ok", "result"}
    assert reply["ok"] is True
    report, placed, refused, states = reply["result"]
    assert report == {"ok": True, "result": {"applied": True}}
    assert set(placed) == {"ok", "result"}
    [selection] = placed["result"]
    assert selection["instance_uuid"] == "vm-1"
    assert selection["host"] in {"h1", "h2"}
    assert set(refused) == {"ok", "error"}
    assert refused["ok"] is False
    assert refused["error"]["type"] == "NoValidHost"
    assert refused["error"]["instance_uuid"] == "vm-2"
    assert states["ok"] is True
    assert "h1" in states["result"]["hosts"]
    assert states["result"]["next_cursor"] is None
    assert stack.scheduler.claim_count == 1
    assert stack.scheduler.host_count == 2


async def test_a_bad_item_gets_its_own_error_and_the_others_run(
    stack: Stack, raw: RawCaller
) -> None:
    body = batch_body(
        ("host_report", json.loads(host_report("h1").model_dump_json())),
        ("reserve_everything", {}),
        ("select_destinations", {"instance_uuids": []}),
        ("batch", {"requests": [{"type": "host_states", "body": {}}]}),
        ("release", {"instance_uuid": "vm-1"}),
    )
    reply = await raw.call("batch", body)
    assert reply["ok"] is True
    report, unknown, schema, nested, release = reply["result"]
    assert report == {"ok": True, "result": {"applied": True}}
    assert release == {"ok": True, "result": {"released": False}}
    for bad, words in ((unknown, "reserve_everything"), (schema, "RequestSpec"), (nested, "nest")):
        assert bad["ok"] is False
        assert bad["error"]["type"] == "InvalidRequest"
        assert words in bad["error"]["message"]
    assert stack.scheduler.host_count == 1
    await settled(stack)
    # the message as a whole was fine: nothing is dead-lettered
    dead = await raw.channel.declare_queue(dead_letter_names(stack.queue)[1], passive=True)
    assert dead.declaration_result.message_count == 0
    assert requests_total(stack, "unknown", "invalid_request") == 2
    assert requests_total(stack, "select_destinations", "invalid_request") == 1
    assert requests_total(stack, "host_report", "ok") == 1
    assert requests_total(stack, "release", "ok") == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"requests": []}', "schema"),
        (b'{"requests": [{"type": "host_states"}]}', "schema"),
        (b'{"requests": [{"type": "host_states", "body": {}, "extra": 1}]}', "schema"),
        (b'[{"type": "host_states", "body": {}}]', "schema"),
        (b'{"requests": [{"type": "host_states", "body": {"a": 1, "a": 2}}]}', "duplicate-keys"),
        (b"{not json", "not-json"),
    ],
)
async def test_a_message_that_is_not_a_batch_is_bad_input(
    stack: Stack, raw: RawCaller, body: bytes, reason: str
) -> None:
    reply = await raw.call("batch", body)
    assert reply["ok"] is False
    assert reply["error"]["type"] == "InvalidRequest"
    dead = await raw.channel.declare_queue(dead_letter_names(stack.queue)[1], passive=True)
    copy = await dead.get(timeout=5, fail=False)
    for _ in range(50):  # the copy is published before the reply, but may take a moment
        if copy is not None:
            break
        await asyncio.sleep(0.05)
        copy = await dead.get(timeout=5, fail=False)
    assert copy is not None
    await copy.ack()
    assert copy.headers[REASON_HEADER] == reason
    assert copy.body == body
    await settled(stack)
    assert requests_total(stack, "batch", "bad_input") == 1


async def test_a_batch_delivered_twice_claims_nothing_more(stack: Stack, raw: RawCaller) -> None:
    await stack.client.update_host(host_report("h1"))
    await stack.client.update_host(host_report("h2"))
    item = {"memory_mb": 1024, "vcpus": 1, "disk_gb": 1}
    body = batch_body(
        ("select_destinations", {"instance_uuids": ["vm-1"], **item}),
        ("select_destinations", {"instance_uuids": ["vm-2", "vm-3"], **item}),
        ("host_report", json.loads(host_report("h1", generation=2).model_dump_json())),
    )
    correlation_id = uuid.uuid4().hex
    first = await raw.call("batch", body, correlation_id)
    again = await raw.call("batch", body, correlation_id)  # at least once: the same message again
    assert first["ok"] is True
    assert [r["ok"] for r in first["result"]] == [True, True, True]
    assert again["result"][:2] == first["result"][:2]  # the same selections
    assert again["result"][2] == {"ok": True, "result": {"applied": False}}  # stale now
    assert stack.scheduler.claim_count == 3
    states = await stack.client.host_states()
    assert sum(8192 - s.free_ram_mb for s in states.values()) == 3 * 1024


async def test_batched_calls_time_out_each_and_leave_nothing_behind() -> None:
    queue = unique_queue()
    connection = await aio_pika.connect(AMQP_URL)
    try:
        async with connection:
            channel = await connection.channel()
            await channel.declare_queue(queue, durable=True, arguments=queue_arguments(queue))
            async with SchedulerClient(AMQP_URL, queue=queue, timeout=30) as client:
                outcomes = await asyncio.gather(
                    client.host_states(timeout=0.3),
                    client.release("vm-1", timeout=0.3),
                    client.remove_host("h1", timeout=0.3),
                    return_exceptions=True,
                )
                assert all(isinstance(o, TimeoutError) for o in outcomes), outcomes
                assert client._pending == {}
                assert not client._queued
    finally:
        await delete_topology(AMQP_URL, queue)


async def test_without_batching_every_call_is_its_own_message(stack: Stack) -> None:
    await stack.client.update_host(host_report("h1"))
    async with SchedulerClient(stack.url, queue=stack.queue, timeout=10, batch=False) as client:
        results = await asyncio.gather(
            *(client.select_destinations(spec(f"vm-{i}")) for i in range(20))
        )
        assert [sel.instance_uuid for [sel] in results] == [f"vm-{i}" for i in range(20)]
        assert client.messages_sent == 20
    await settled(stack)
    assert requests_total(stack, "select_destinations", "ok") == 20


@pytest.mark.parametrize(
    ("window", "first_messages"),
    [(1, [40]), (2, [20, 20]), (3, [14, 13, 13])],
)
async def test_calls_are_divided_over_the_window(
    stack: Stack, window: int, first_messages: list[int]
) -> None:
    await stack.client.update_host(host_report("h1", memory_mb=131_072))
    async with SchedulerClient(stack.url, queue=stack.queue, timeout=10, window=window) as client:
        sizes: list[int] = []
        most_unanswered = 0
        prepare = client._prepare

        def watching_prepare(calls: list[Any]) -> Any:
            nonlocal most_unanswered
            prepared = prepare(calls)
            sizes.append(len(calls))
            most_unanswered = max(most_unanswered, len(client._pending))
            return prepared

        client._prepare = watching_prepare  # type: ignore[method-assign]
        # 40 calls queued before the sender runs: one share per free slot
        first = await asyncio.gather(
            *(client.select_destinations(spec(f"a-{i}")) for i in range(40))
        )
        assert sizes == first_messages
        # calls arriving in waves while earlier messages are unanswered wait for
        # a free slot: never more messages unanswered than the window allows
        waves: list[asyncio.Future[list[Selection]]] = []
        for wave in range(8):
            waves.extend(
                asyncio.ensure_future(client.select_destinations(spec(f"b-{i}")))
                for i in range(wave * 20, wave * 20 + 20)
            )
            await asyncio.sleep(0.001)
        later = await asyncio.gather(*waves)
        assert most_unanswered == window  # the window filled up, and went no further
        assert sum(sizes) == 200
        results = [*first, *later]
        assert [sel.instance_uuid for [sel] in results] == [
            *(f"a-{i}" for i in range(40)),
            *(f"b-{i}" for i in range(160)),
        ]
    await settled(stack)
    assert requests_total(stack, "select_destinations", "ok") == 200


def test_window_is_at_least_one_and_its_hold_positive() -> None:
    with pytest.raises(ValueError, match="window must be at least 1, got 0"):
        SchedulerClient(window=0)
    with pytest.raises(ValueError, match="window_hold must be positive, got 0"):
        SchedulerClient(window_hold=0)


def test_max_batch_is_bounded() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        SchedulerClient(max_batch=0)
    with pytest.raises(ValueError, match="max_batch"):
        SchedulerClient(max_batch=1001)


async def test_a_batch_of_many_bad_items_logs_one_line(
    stack: Stack, raw: RawCaller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="actorsched.amqp.service")
    items = [("release", {"instance_uuid": 7}) for _ in range(900)]
    reply = await raw.call("batch", batch_body(*items, ("release", {"instance_uuid": "vm-x"})))
    assert reply["ok"] is True
    results = reply["result"]
    assert len(results) == 901
    assert all(r["error"]["type"] == "InvalidRequest" for r in results[:900])
    assert results[900] == {"ok": True, "result": {"released": False}}
    lines = [r.getMessage() for r in caplog.records if "of a batch" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("refusing 900 of 901 items of a batch")
    assert lines[0].endswith("; and 897 more")
