"""Bad input against the real broker: error reply, dead letter with a reason, one log line."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import cast

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from amqp_support import Stack, host_report, running_stack

from actorsched import Scheduler
from actorsched.amqp.service import (
    ERROR_HEADER,
    REASON_HEADER,
    TRUNCATED_HEADER,
    SchedulerService,
    dead_letter_names,
)

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
        if len(body) > 4096:  # a large body is kept in part, with its size
            assert letter.body == body[:4096]
            assert letter.headers[TRUNCATED_HEADER] == len(body)
        else:
            assert letter.body == body
            assert TRUNCATED_HEADER not in letter.headers
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


class _DeadConnectionMessage:
    """A delivery whose ack and nack wait forever, as on a connection that died."""

    reply_to = None

    def __init__(self) -> None:
        self.acks = self.nacks = 0

    async def ack(self) -> None:
        self.acks += 1
        await asyncio.Event().wait()

    async def nack(self, requeue: bool = True) -> None:
        self.nacks += 1
        await asyncio.Event().wait()


async def test_an_ack_that_hangs_gives_up_within_its_timeout_and_never_requeues_done_work() -> None:
    async with Scheduler() as scheduler:
        service = SchedulerService(scheduler, ack_timeout=0.1)
        message = _DeadConnectionMessage()
        incoming = cast(AbstractIncomingMessage, message)
        async with asyncio.timeout(2):  # without a bound this never returns
            outcome = await service._answer(incoming, "release", b"{}", "ok")
            given_back = await service._give_back(incoming)
        # the work was done: a slow ack is not turned into a nack (which would have the
        # broker deliver it again, and the work be redone)
        assert outcome == "ok"
        assert given_back == "requeued"
        assert (message.acks, message.nacks) == (1, 1)
        assert service.ack_failures == 2


async def test_a_bad_message_cannot_forge_a_log_line(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    forged = "x\n2026-12-02 ERROR actorsched.amqp.service: the journal is gone"
    connection = await aio_pika.connect(stack.url)
    async with connection:
        channel = await connection.channel()
        with caplog.at_level(logging.WARNING, logger="actorsched.amqp.service"):
            await channel.default_exchange.publish(
                aio_pika.Message(b"not json", type="host_report", correlation_id=forged),
                routing_key=stack.queue,
            )
            for _ in range(400):
                if any("dead-lettering" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.025)
    (line,) = [r.getMessage() for r in caplog.records if "dead-lettering" in r.getMessage()]
    assert "\n" not in line
    assert "'x\\n2026-12-02 ERROR" in line  # shown escaped, as what it is


def test_a_password_in_a_url_query_is_redacted_too() -> None:
    from actorsched.amqp.service import redact

    assert redact("postgresql://app@db/test?password=s3cret&sslmode=require") == (
        "postgresql://app@db/test?password=***&sslmode=require"
    )
    assert "s3cret" not in redact("amqp://app:s3cret@broker/")
    assert redact("postgresql://db/test") == "postgresql://db/test"


def test_the_journal_names_itself_without_a_password_in_its_url_query() -> None:
    # the PostgreSQL journal's own description (its log lines, /readyz) redacts
    # libpq's password= parameter as the broker's URL is redacted
    from actorsched.journal.postgres import PostgresJournal

    journal = PostgresJournal("postgresql://app@db/test?password=s3cret", shard="a")
    assert "s3cret" not in journal.name
    assert "password=***" in journal.name
