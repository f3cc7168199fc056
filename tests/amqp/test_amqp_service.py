"""End to end against the real broker: SchedulerClient, a plain AMQP client, load."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import aio_pika
import aiormq
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
from pamqp.commands import Basic
from servers import PrivateRabbit, private_rabbitmq_fixture  # noqa: F401 (a fixture)

from actorsched import NoValidHost, RequestSpec, Scheduler, SchedulerConfig, SchedulerStopped
from actorsched.amqp import SchedulerClient, SchedulerService
from actorsched.amqp.service import queue_arguments

pytestmark = pytest.mark.amqp


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack(config=ROOMY) as running:
        yield running


def spec(*uuids: str, memory_mb: int = 1024) -> RequestSpec:
    return RequestSpec(instance_uuids=list(uuids), memory_mb=memory_mb, vcpus=1, disk_gb=1)


async def test_every_operation_through_scheduler_client(stack: Stack) -> None:
    client = stack.client
    assert await client.update_host(host_report("h1", generation=1)) is True
    assert await client.update_host(host_report("h1", generation=1)) is False  # stale
    [selection] = await client.select_destinations(spec("vm-1"))
    assert (selection.instance_uuid, selection.host) == ("vm-1", "h1")
    states = await client.host_states()
    assert states["h1"].free_ram_mb == 8192 - 1024
    assert await client.release("vm-1") is True
    assert await client.release("vm-1") is False
    assert await client.remove_host("h1") is True
    assert await client.host_states() == {}


async def test_no_valid_host_stays_no_valid_host(stack: Stack) -> None:
    await stack.client.update_host(host_report("h1", memory_mb=2048))
    with pytest.raises(NoValidHost, match="RamFilter") as caught:
        await stack.client.select_destinations(spec("vm-big", memory_mb=4096))
    assert caught.value.instance_uuid == "vm-big"
    assert caught.value.filter_counts == {"RamFilter": 1}
    assert stack.scheduler.claim_count == 0


async def _plain_call(
    channel: aiormq.abc.AbstractChannel, queue: str, op: str, body: bytes
) -> tuple[str | None, dict[str, object]]:
    """One request/reply with aiormq alone: what any AMQP 0-9-1 client does."""
    declared = await channel.queue_declare("", exclusive=True, auto_delete=True)
    assert declared.queue is not None
    replies: asyncio.Queue[aiormq.abc.DeliveredMessage] = asyncio.Queue()

    async def on_reply(message: aiormq.abc.DeliveredMessage) -> None:
        await replies.put(message)

    await channel.basic_consume(declared.queue, on_reply, no_ack=True)
    correlation_id = uuid.uuid4().hex
    await channel.basic_publish(
        body,
        exchange="",
        routing_key=queue,
        properties=Basic.Properties(
            content_type="application/json",
            message_type=op,
            correlation_id=correlation_id,
            reply_to=declared.queue,
            delivery_mode=2,
        ),
    )
    reply = await asyncio.wait_for(replies.get(), timeout=10)
    assert reply.header.properties.correlation_id == correlation_id
    return reply.header.properties.message_type, json.loads(reply.body)


async def test_a_plain_aiormq_client_gets_json_replies(stack: Stack) -> None:
    connection = await aiormq.connect(stack.url)
    try:
        channel = await connection.channel()
        report = host_report("h1").model_dump_json().encode()
        assert await _plain_call(channel, stack.queue, "host_report", report) == (
            "host_report",
            {"ok": True, "result": {"applied": True}},
        )
        body = b'{"instance_uuids": ["vm-1"], "memory_mb": 512, "vcpus": 1, "disk_gb": 1}'
        _, reply = await _plain_call(channel, stack.queue, "select_destinations", body)
        assert reply == {
            "ok": True,
            "result": [{"instance_uuid": "vm-1", "host": "h1", "alternates": []}],
        }
        # the same request delivered again (at least once) claims nothing more
        _, again = await _plain_call(channel, stack.queue, "select_destinations", body)
        assert again == reply
        assert stack.scheduler.claim_count == 1
        huge = b'{"instance_uuids": ["vm-2"], "memory_mb": 65536, "vcpus": 1, "disk_gb": 1}'
        _, failed = await _plain_call(channel, stack.queue, "select_destinations", huge)
        assert failed["ok"] is False
        assert isinstance(failed["error"], dict)
        assert failed["error"]["type"] == "NoValidHost"
    finally:
        await connection.close()


async def test_a_message_without_reply_to_is_applied_and_acked(stack: Stack) -> None:
    connection = await aio_pika.connect(stack.url)
    async with connection:
        channel = await connection.channel()
        await channel.default_exchange.publish(
            aio_pika.Message(host_report("h7").model_dump_json().encode(), type="host_report"),
            routing_key=stack.queue,
        )
    states = await stack.client.host_states()  # the queue is FIFO: answered after the report
    assert list(states) == ["h7"]


async def test_a_thousand_concurrent_calls(stack: Stack) -> None:
    hosts = [f"h{i}" for i in range(20)]
    await asyncio.gather(*(stack.client.update_host(host_report(h)) for h in hosts))
    results = await asyncio.gather(
        *(stack.client.select_destinations(spec(f"vm-{i}", memory_mb=128)) for i in range(1000)),
    )
    placed = {sel.instance_uuid: sel.host for [sel] in results}
    assert len(placed) == 1000
    assert stack.scheduler.claim_count == 1000
    states = await stack.client.host_states()
    assert all(state.free_ram_mb >= 0 for state in states.values())
    assert sum(8192 - s.free_ram_mb for s in states.values()) == 1000 * 128
    # a reply is published before its request is acked: give the last acks a moment
    for _ in range(100):
        if stack.service.in_flight == 0:
            break
        await asyncio.sleep(0.02)
    assert stack.service.in_flight == 0
    assert stack.service.answered == stack.service.accepted
    # one shared client coalesces concurrent calls into batch messages; every call is answered
    assert stack.service.operations == 1000 + 20 + 1
    assert stack.service.accepted == stack.client.messages_sent < 1000 + 20 + 1


async def test_the_queue_is_a_durable_quorum_queue_with_dead_letters_and_a_delivery_limit(
    private_rabbitmq: PrivateRabbit,
) -> None:
    # listed by rabbitmqctl: on the private node, which runs as whoever runs the tests
    # (the machine's node answers only root's or the rabbitmq user's rabbitmqctl)
    async with running_stack(private_rabbitmq.url, config=ROOMY) as stack:
        listing = await private_rabbitmq.actl("list_queues", "name", "type", "durable", "arguments")
        rows = {line.split("\t")[0]: line for line in listing.splitlines()}
        row = rows[stack.queue]
        assert "\tquorum\ttrue\t" in row
        assert f"{stack.queue}.dlx" in row
        assert "x-delivery-limit" in row
        assert f"{stack.queue}.dead" in rows
        # declaring it with the documented arguments agrees with what the service made
        connection = await aio_pika.connect(stack.url)
        async with connection:
            channel = await connection.channel()
            await channel.declare_queue(
                stack.queue, durable=True, arguments=queue_arguments(stack.queue)
            )


async def test_prefetch_may_not_exceed_the_mailbox() -> None:
    async with Scheduler(SchedulerConfig(mailbox_size=16)) as scheduler:
        with pytest.raises(ValueError, match="mailbox size 16"):
            SchedulerService(scheduler, AMQP_URL, queue="unused", prefetch=17)
        assert SchedulerService(scheduler, AMQP_URL, queue="unused").prefetch == 16


async def test_client_times_out_when_no_service_consumes() -> None:
    queue = unique_queue()
    connection = await aio_pika.connect(AMQP_URL)
    try:
        async with connection:
            channel = await connection.channel()
            await channel.declare_queue(queue, durable=True, arguments=queue_arguments(queue))
            async with SchedulerClient(AMQP_URL, queue=queue, timeout=30) as client:
                with pytest.raises(TimeoutError, match="safe"):
                    await client.host_states(timeout=0.5)
    finally:
        await delete_topology(AMQP_URL, queue)


async def test_client_to_a_missing_queue_fails_at_once() -> None:
    async with SchedulerClient(AMQP_URL, queue=unique_queue(), timeout=10) as client:
        with pytest.raises(SchedulerStopped, match="actorsched serve"):
            await client.host_states()
