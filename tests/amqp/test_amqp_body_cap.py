"""A body over --max-body-bytes is never held whole by the service, before and after a reconnect."""

from __future__ import annotations

import asyncio
import json
import uuid

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from amqp_support import Stack, host_report, running_stack

from actorsched.amqp.bodies import BodyCappedChannel
from actorsched.amqp.service import REASON_HEADER, TRUNCATED_HEADER, dead_letter_names

pytestmark = pytest.mark.amqp

CAP = 64 * 1024
BIG = 8 * 1024 * 1024


def _watch_bodies(stack: Stack) -> list[int]:
    """The length of every body the service's consumer is handed."""
    seen: list[int] = []
    handle = stack.service._handle

    async def spy(message: AbstractIncomingMessage, cut: int | None) -> None:
        seen.append(len(message.body))
        await handle(message, cut)

    stack.service._handle = spy  # type: ignore[method-assign]
    return seen


async def _send_big_and_read_the_dead_letter(stack: Stack, body: bytes) -> AbstractIncomingMessage:
    connection = await aio_pika.connect(stack.url)
    async with connection:
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
        await channel.default_exchange.publish(
            aio_pika.Message(
                body,
                type="host_report",
                content_type="application/json",
                correlation_id="big",
                reply_to=replies.name,
                # a publisher cannot fake the mark: the service keeps it, not a header
                headers={TRUNCATED_HEADER: 1},
            ),
            routing_key=stack.queue,
        )
        async with replies.iterator(timeout=20) as stream:
            reply = await anext(stream)
            await reply.ack()
        error = json.loads(reply.body)["error"]
        assert error["type"] == "InvalidRequest"
        assert f"body is {len(body)} bytes, over the limit of {CAP}" in error["message"]
        dead = await channel.get_queue(dead_letter_names(stack.queue)[1])
        letter = await dead.get(timeout=5, fail=True)
        assert letter is not None
        await letter.ack()
        return letter


async def test_an_oversized_body_is_cut_as_it_arrives_and_dead_lettered_with_its_size() -> None:
    async with running_stack(max_body_bytes=CAP) as stack:
        seen = _watch_bodies(stack)
        body = b'{"host": "' + b"x" * BIG + b'"}'
        letter = await _send_big_and_read_the_dead_letter(stack, body)
        assert seen == [4096]  # the consumer never had the 8 MiB
        assert letter.body == body[:4096]
        assert letter.headers[TRUNCATED_HEADER] == len(body)
        assert letter.headers[REASON_HEADER] == "too-large"
        # a body within the cap is read whole
        assert await stack.client.update_host(host_report("h1")) is True
        assert 0 < seen[-1] < CAP


async def test_the_cap_holds_on_the_channel_a_reconnect_opens() -> None:
    async with running_stack(max_body_bytes=CAP) as stack:
        channel = stack.service._channel
        assert isinstance(channel, BodyCappedChannel)
        before = await channel.get_underlay_channel()
        await before.close()  # the robust channel reopens a new underlying channel
        for _ in range(200):
            if not channel.is_closed and await channel.get_underlay_channel() is not before:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the channel did not reopen")
        await asyncio.sleep(0.5)  # the consumer is restored after the channel opens
        seen = _watch_bodies(stack)
        body = b'{"host": "' + uuid.uuid4().hex.encode() * (BIG // 32) + b'"}'
        letter = await _send_big_and_read_the_dead_letter(stack, body)
        assert seen[0] == 4096
        assert letter.headers[TRUNCATED_HEADER] == len(body)
