"""Bad input against the real broker: error reply, dead letter with a reason, one log line."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator

import aio_pika
import pytest
from amqp_support import Stack, host_report, running_stack

from actorsched.amqp.service import ERROR_HEADER, REASON_HEADER, dead_letter_names

pytestmark = pytest.mark.amqp

GOOD_RELEASE = b'{"instance_uuid": "vm-1"}'


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack(max_body_bytes=4096) as running:
        yield running


@pytest.mark.parametrize(
    ("op", "body", "reason"),
    [
        ("release", b"this is not json", "not-json"),
        ("release", '{"instance_uuid": "vm-1"}'.encode("utf-16"), "not-utf8"),
        ("release", b'{"instance_uuid": "vm-1\\nINFO forged log line"}', "schema"),
        ("release", b'{"instance_uuid": 7}', "schema"),
        ("select_destinations", b'{"instance_uuids": ["a", "a"], "memory_mb": 1}', "schema"),
        ("reserve_everything", GOOD_RELEASE, "unknown-type"),
        ("release", b'{"instance_uuid": "' + b"x" * 5000 + b'"}', "too-large"),
        ("release", b'{"instance_uuid": "a", "instance_uuid": "b"}', "duplicate-keys"),
    ],
)
async def test_bad_input_is_answered_dead_lettered_and_logged_once(
    stack: Stack, op: str, body: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="actorsched.amqp.service")
    connection = await aio_pika.connect(stack.url)
    async with connection:
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
        correlation_id = uuid.uuid4().hex
        await channel.default_exchange.publish(
            aio_pika.Message(
                body,
                type=op,
                content_type="application/json",
                correlation_id=correlation_id,
                reply_to=replies.name,
                headers={"x-sender": "test"},
            ),
            routing_key=stack.queue,
        )
        async with replies.iterator(timeout=10) as stream:
            reply = await anext(stream)
            await reply.ack()
        assert reply.correlation_id == correlation_id
        error = json.loads(reply.body)
        assert error["ok"] is False
        assert error["error"]["type"] == "InvalidRequest"
        assert error["error"]["message"]

        dead = await channel.get_queue(dead_letter_names(stack.queue)[1])
        letter = await dead.get(timeout=5, fail=True)
        assert letter is not None
        await letter.ack()
        assert letter.body == body
        assert letter.headers[REASON_HEADER] == reason
        assert letter.headers[ERROR_HEADER] == error["error"]["message"]
        assert letter.headers["x-sender"] == "test"  # the original headers travel along
        assert letter.correlation_id == correlation_id

    logged = [r for r in caplog.records if "dead-lettering" in r.getMessage()]
    assert len(logged) == 1
    assert reason in logged[0].getMessage()
    # the consumer lives on
    assert await stack.client.update_host(host_report("h1")) is True
    assert stack.service.metrics.dead_lettered.labels(reason)._value.get() == 1


async def test_bad_input_without_reply_to_is_still_dead_lettered(stack: Stack) -> None:
    connection = await aio_pika.connect(stack.url)
    async with connection:
        channel = await connection.channel()
        await channel.default_exchange.publish(
            aio_pika.Message(b"{", type="host_report"), routing_key=stack.queue
        )
        dead = await channel.get_queue(dead_letter_names(stack.queue)[1])
        letter = None
        for _ in range(100):
            letter = await dead.get(fail=False)
            if letter is not None:
                break
            await asyncio.sleep(0.05)
        assert letter is not None
        await letter.ack()
        assert letter.headers[REASON_HEADER] == "not-json"
    assert await stack.client.host_states() == {}
