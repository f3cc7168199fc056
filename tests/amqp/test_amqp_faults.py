"""Faults against the real broker: every connection closed mid-load, SIGTERM or SIGINT mid-load.

The connections are closed on a vhost of the test's own on the test run's private
RabbitMQ node (tests/servers.py), never on the machine's broker: its ``rabbitmqctl``
runs as whoever runs the tests, root or not."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest
from amqp_support import AMQP_URL, ROOMY, delete_topology, host_report, running_stack, unique_queue
from conftest import code_under_test_env
from servers import PrivateRabbit, private_rabbitmq_fixture  # noqa: F401 (a fixture)

from actorsched import RequestSpec, Selection
from actorsched.amqp import SchedulerClient

pytestmark = [pytest.mark.amqp, pytest.mark.slow]

MEMORY_MB = 64

# What a call may raise while the connection is down; the test retries those.
TRANSIENT = (
    TimeoutError,
    ConnectionError,
    aiormq.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
)


@pytest.fixture
async def vhost_url(private_rabbitmq: PrivateRabbit) -> AsyncIterator[tuple[str, str]]:
    # a vhost of our own, so closing "all" connections closes only this test's
    vhost = f"actorsched-test-{uuid.uuid4().hex[:10]}"
    await private_rabbitmq.actl("add_vhost", vhost)
    try:
        await private_rabbitmq.actl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield vhost, f"amqp://guest:guest@127.0.0.1:{private_rabbitmq.port}/{vhost}"
    finally:
        await private_rabbitmq.actl("delete_vhost", vhost)


async def _close_all(node: PrivateRabbit, vhost: str, reason: str) -> str:
    """``rabbitmqctl close_all_connections`` of ``vhost`` on the private node; its output."""
    return await node.actl("close_all_connections", "--vhost", vhost, "--limit", "100", reason)


async def test_close_all_connections_mid_load_loses_and_doubles_no_claim(
    vhost_url: tuple[str, str], private_rabbitmq: PrivateRabbit
) -> None:
    vhost, url = vhost_url
    async with running_stack(url, config=ROOMY, client_timeout=3) as stack:
        hosts = [f"h{i}" for i in range(20)]
        await asyncio.gather(*(stack.client.update_host(host_report(h)) for h in hosts))
        uuids = [f"vm-{i}" for i in range(600)]
        acknowledged: dict[str, str] = {}
        retries = 0
        enough = asyncio.Event()

        async def place(instance_uuid: str) -> None:
            nonlocal retries
            spec = RequestSpec(
                instance_uuids=[instance_uuid], memory_mb=MEMORY_MB, vcpus=1, disk_gb=1
            )
            while True:
                try:
                    [selection] = await stack.client.select_destinations(spec)
                except TRANSIENT:
                    retries += 1  # asking again for the same uuid is safe: claims are idempotent
                    await asyncio.sleep(0.1)
                    continue
                acknowledged[instance_uuid] = selection.host
                if len(acknowledged) >= 150:
                    enough.set()
                return

        async def worker(share: list[str]) -> None:
            for instance_uuid in share:
                await place(instance_uuid)

        load = asyncio.gather(*(worker(uuids[i::50]) for i in range(50)))
        await enough.wait()
        placed_before_fault = len(acknowledged)
        out = await _close_all(private_rabbitmq, vhost, "test: broker fault")
        closed = re.search(r"Closed (\d+) connections", out)
        assert closed is not None, out
        assert int(closed.group(1)) >= 2  # the service's and the client's
        assert placed_before_fault < len(uuids), "the load was over before the fault"
        await asyncio.wait_for(load, timeout=90)
        # (``retries`` may be 0: when both sides reconnect within the client's
        # timeout, redelivered requests are answered into the re-declared reply queue)
        claims = stack.scheduler.core.claims()
        lost = [u for u in uuids if claims.get(u, ("", False))[0] != acknowledged[u]]

        # asking again returns the first answer and claims nothing more
        async def ask_again(instance_uuid: str) -> list[Selection]:
            spec = RequestSpec(
                instance_uuids=[instance_uuid], memory_mb=MEMORY_MB, vcpus=1, disk_gb=1
            )
            while True:  # the broker may still be settling after the fault
                try:
                    return await stack.client.select_destinations(spec)
                except TRANSIENT:
                    await asyncio.sleep(0.1)

        again = await asyncio.gather(*(ask_again(u) for u in uuids))
        changed = [u for u, [sel] in zip(uuids, again, strict=True) if sel.host != acknowledged[u]]
        states = await stack.client.host_states()
        counted_mb = sum(8192 - s.free_ram_mb for s in states.values())
        doubled = (counted_mb - len(uuids) * MEMORY_MB) // MEMORY_MB + len(changed)
        assert (len(lost), doubled) == (0, 0)
        assert stack.scheduler.claim_count == len(uuids)
        for host in hosts:  # per host, what the scheduler counts is what clients were told
            told = sum(1 for h in acknowledged.values() if h == host)
            assert 8192 - states[host].free_ram_mb == told * MEMORY_MB


async def _eventually(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


@contextlib.asynccontextmanager
async def _one_out_one_queued(url: str, **options: Any) -> AsyncIterator[SchedulerClient]:
    """A client with a window of one: one message out and never answered (there
    is no service on its queue), and a second call queued behind it."""
    queue = unique_queue()
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        await channel.declare_queue(queue, durable=True)
        spec = RequestSpec(instance_uuids=["vm-a"], memory_mb=MEMORY_MB, vcpus=1, disk_gb=1)
        async with SchedulerClient(url, queue=queue, timeout=60, window=1, **options) as client:
            first = asyncio.ensure_future(client.select_destinations(spec))
            assert await _eventually(lambda: client.messages_sent == 1)
            second = asyncio.ensure_future(
                client.select_destinations(spec.model_copy(update={"instance_uuids": ["vm-b"]}))
            )
            await asyncio.sleep(0.2)
            assert client.messages_sent == 1  # the window of one is held ...
            assert len(client._queued) == 1  # ... and the second call waits for it
            try:
                yield client
            finally:
                first.cancel()
                second.cancel()
                await asyncio.gather(first, second, return_exceptions=True)
    finally:
        with contextlib.suppress(Exception):
            await connection.close()
        async with await aio_pika.connect(url) as cleanup:
            await (await cleanup.channel()).queue_delete(queue)


async def test_a_reconnect_frees_the_window_of_unanswered_messages(
    vhost_url: tuple[str, str], private_rabbitmq: PrivateRabbit
) -> None:
    vhost, url = vhost_url
    async with _one_out_one_queued(url, window_hold=60, reconnect_interval=0.2) as client:
        await _close_all(private_rabbitmq, vhost, "test: reconnect")
        # after the reconnect the lost message holds no slot: the queued call
        # goes out at once, long before the window hold (or the timeout) ends
        assert await _eventually(lambda: client.messages_sent == 2)
        assert not client._queued


async def test_an_unanswered_message_holds_its_slot_only_for_window_hold() -> None:
    async with _one_out_one_queued(AMQP_URL, window_hold=1.5) as client:
        started = time.monotonic()
        assert await _eventually(lambda: client.messages_sent == 2)
        assert not client._queued
        # the hold ran out without any reply or reconnect
        assert time.monotonic() - started < 5


async def _read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str]) -> str:
    while True:
        line = (await stream.readline()).decode()
        if not line:
            raise AssertionError(f"serve exited before logging {pattern!r}:\n{''.join(seen)}")
        seen.append(line)
        if re.search(pattern, line):
            return line


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_sigterm_during_load_answers_every_accepted_request(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    queue = unique_queue()
    serve = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "actorsched.cli",
        "serve",
        "--amqp-url",
        AMQP_URL,
        "--queue",
        queue,
        "--prefetch",
        "32",
        "--journal",
        str(tmp_path / "journal.sqlite"),
        "--create-journal",
        cwd=tmp_path,
        env=code_under_test_env(),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert serve.stderr is not None
    log: list[str] = []
    connection = await aio_pika.connect(AMQP_URL)
    try:
        await asyncio.wait_for(_read_until(serve.stderr, "ready", log), timeout=30)
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
        answers: dict[str, dict[str, object]] = {}
        duplicates = 0
        got_enough = asyncio.Event()

        async def on_reply(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal duplicates
            key = message.correlation_id or ""
            duplicates += key in answers
            answers[key] = json.loads(message.body)
            if len(answers) >= 100:
                got_enough.set()

        await replies.consume(on_reply, no_ack=True)
        bodies = [("host_report", host_report(f"h{i}").model_dump_json()) for i in range(20)]
        bodies += [
            (
                "select_destinations",
                RequestSpec(
                    instance_uuids=[f"vm-{i}"], memory_mb=64, vcpus=1, disk_gb=1
                ).model_dump_json(),
            )
            for i in range(2000)
        ]
        # published together, so the service is still busy when SIGTERM comes
        await asyncio.gather(
            *(
                channel.default_exchange.publish(
                    aio_pika.Message(
                        body.encode(),
                        type=op,
                        correlation_id=uuid.uuid4().hex,
                        reply_to=replies.name,
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        user_id="guest",  # serve's own broker user: every role
                    ),
                    routing_key=queue,
                )
                for op, body in bodies
            )
        )
        await asyncio.wait_for(got_enough.wait(), timeout=30)
        serve.send_signal(stop_signal)
        stopped = await asyncio.wait_for(_read_until(serve.stderr, "stopped:", log), timeout=60)
        assert await asyncio.wait_for(serve.wait(), timeout=30) == 0
        match = re.search(r"(\d+) accepted, (\d+) answered, (\d+) returned", stopped)
        assert match is not None, stopped
        accepted, answered, returned = map(int, match.groups())
        assert (accepted, returned) == (answered, 0), "an accepted request went unanswered"
        # replies published before exit may still be on their way to us
        for _ in range(500):  # up to 10 s
            if len(answers) >= answered:
                break
            await asyncio.sleep(0.02)
        assert len(answers) == answered
        assert duplicates == 0
        # each reply is a placement, or NoValidHost once the 20 hosts are full
        for reply in answers.values():
            error = reply.get("error")
            assert reply["ok"] is True or (
                isinstance(error, dict) and error["type"] == "NoValidHost"
            )
        # nothing lost: what was not answered is still in the queue for the next instance
        left = await channel.declare_queue(queue, passive=True)
        assert left.declaration_result.message_count == len(bodies) - answered
        assert answered < len(bodies), "the load finished before SIGTERM; nothing was tested"
    finally:
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
        await connection.close()
        await delete_topology(AMQP_URL, queue)
