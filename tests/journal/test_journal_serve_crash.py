"""kill -9 of ``actorsched serve --journal`` under load, then restart on the same file."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import aio_pika
import pytest
from conftest import code_under_test_env, start_serve

from actorsched import HostReport, RequestSpec, Selection
from actorsched.amqp import SchedulerClient
from actorsched.amqp.service import dead_letter_names

AMQP_URL = os.environ.get("ACTORSCHED_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
HOSTS = 20
HOST_RAM = 8192
CLAIM_RAM = 512
REQUESTS = 600

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(180)]


@dataclass
class Serve:
    process: asyncio.subprocess.Process
    log: asyncio.Future[None]  # keeps reading its log, or a full pipe would stall it


async def _serve(journal: Path, queue: str, *more: str) -> Serve:
    serve = await start_serve(AMQP_URL, queue, journal, *more)
    assert serve.stderr is not None
    return Serve(serve, asyncio.ensure_future(_drain(serve.stderr)))


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def _kill(serve: Serve) -> None:
    if serve.process.returncode is None:
        serve.process.send_signal(signal.SIGKILL)
    await serve.process.wait()
    await serve.log


async def _delete_queues(queue: str) -> None:
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        exchange, dead = dead_letter_names(queue)
        for name in (queue, dead):
            await channel.queue_delete(name)
        await channel.exchange_delete(exchange)


def _spec(i: int) -> RequestSpec:
    return RequestSpec(instance_uuids=[f"vm-{i}"], memory_mb=CLAIM_RAM, vcpus=1, disk_gb=1)


async def test_kill_9_of_serve_loses_no_acknowledged_claim(tmp_path: Path) -> None:
    journal = tmp_path / "claims.sqlite"
    queue = f"actorsched.test.journal.{uuid.uuid4().hex[:12]}"
    serve = await _serve(journal, queue)
    acknowledged: dict[str, Selection] = {}
    try:
        async with SchedulerClient(AMQP_URL, queue=queue, timeout=60) as client:
            for h in range(HOSTS):
                await client.update_host(
                    HostReport(
                        host=f"h{h}",
                        generation=1,
                        memory_mb=HOST_RAM,
                        memory_mb_used=0,
                        vcpus=64,
                        vcpus_used=0,
                        local_gb=1000,
                        local_gb_used=0,
                    )
                )
            enough = asyncio.Event()

            async def place(i: int) -> None:
                [selection] = await client.select_destinations(_spec(i))
                acknowledged[selection.instance_uuid] = selection
                if len(acknowledged) >= 100:
                    enough.set()

            calls = [asyncio.ensure_future(place(i)) for i in range(REQUESTS)]
            await asyncio.wait_for(enough.wait(), timeout=60)
            await _kill(serve)  # under load: most requests are still in flight
            seen = dict(acknowledged)
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
        assert len(seen) >= 100

        serve = await _serve(journal, queue)
        async with SchedulerClient(AMQP_URL, queue=queue, timeout=60) as client:
            # asking again for the acknowledged uuids returns the same hosts
            again = await asyncio.gather(
                *(client.select_destinations(_spec(int(u.split("-")[1]))) for u in seen)
            )
            assert {sel.instance_uuid: sel.host for [sel] in again} == {
                u: s.host for u, s in seen.items()
            }
            # none is doubled: each host counts each claim it holds exactly once
            states = await client.host_states()
            for host, state in states.items():
                told = sum(1 for s in seen.values() if s.host == host)
                assert HOST_RAM - state.free_ram_mb == CLAIM_RAM * state.assumed_claims
                assert state.assumed_claims >= told, host
                assert state.free_ram_mb >= 0
    finally:
        await _kill(serve)
        await _delete_queues(queue)


def _pending(port: int) -> float | None:
    """actorsched_pending_requests on serve's metrics endpoint; None before it answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    found = re.search(r"^actorsched_pending_requests (\S+)$", text, re.MULTILINE)
    return None if found is None else float(found.group(1))


async def _until_pending(port: int, count: int) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while loop.time() < deadline:
        if await asyncio.to_thread(_pending, port) == count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"serve never had {count} request(s) waiting")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_request_waiting_when_serve_is_killed_waits_again_after_the_restart(
    tmp_path: Path,
) -> None:
    # the waiting delivery is unacked: kill -9 gives it back to the broker, the
    # restarted serve replays the journal (the host still full) and the request
    # waits again there, until a release makes room
    journal = tmp_path / "claims.sqlite"
    queue = f"actorsched.test.journal.{uuid.uuid4().hex[:12]}"
    port = _port()
    serve = await _serve(journal, queue, "--metrics-port", str(port))
    try:
        async with SchedulerClient(AMQP_URL, queue=queue, timeout=60) as client:
            report = HostReport(
                host="h1",
                generation=1,
                memory_mb=1024,
                memory_mb_used=0,
                vcpus=4,
                vcpus_used=0,
                local_gb=10,
                local_gb_used=0,
            )
            assert await client.update_host(report)
            full = RequestSpec(instance_uuids=["first"], memory_mb=1024, vcpus=1, disk_gb=1)
            await client.select_destinations(full)
            spec = RequestSpec(instance_uuids=["vm"], memory_mb=1024, vcpus=1, disk_gb=1, wait=90)
            waiter = asyncio.ensure_future(client.select_destinations(spec))
            await _until_pending(port, 1)
            await _kill(serve)
            serve = await _serve(journal, queue, "--metrics-port", str(port))
            await _until_pending(port, 1)  # redelivered, and waiting again
            assert not waiter.done()
            assert (await client.where("first")).claimed
            assert await client.release("first")
            [placed] = await asyncio.wait_for(waiter, timeout=30)
            assert placed.host == "h1"
            states = await client.host_states()
            assert states["h1"].free_ram_mb == 0  # vm alone: nothing doubled or over-committed
            assert states["h1"].assumed_claims == 1
            assert not (await client.where("first")).claimed
    finally:
        await _kill(serve)
        await _delete_queues(queue)


async def test_kill_9_under_preemptions_loses_doubles_and_over_commits_nothing(
    tmp_path: Path,
) -> None:
    # every host full of priority-0 claims; 150 requests of priority 5 each free
    # one; serve is killed -9 while they run, then restarted on its journal
    journal = tmp_path / "claims.sqlite"
    queue = f"actorsched.test.journal.{uuid.uuid4().hex[:12]}"
    hosts, per_host, size = 20, 8, 1024
    on = {"ACTORSCHED_PREEMPTION": "true"}
    serve = Serve(await start_serve(AMQP_URL, queue, journal, env=on), asyncio.Future())
    assert serve.process.stderr is not None
    serve.log = asyncio.ensure_future(_drain(serve.process.stderr))
    acknowledged: dict[str, Selection] = {}

    def high(i: int) -> RequestSpec:
        return RequestSpec(
            instance_uuids=[f"high-{i}"], memory_mb=size, vcpus=1, disk_gb=1, priority=5
        )

    try:
        async with SchedulerClient(AMQP_URL, queue=queue, timeout=60) as client:
            for h in range(hosts):
                await client.update_host(
                    HostReport(host=f"h{h}", generation=1, memory_mb=per_host * size,
                               memory_mb_used=0, vcpus=64, vcpus_used=0, local_gb=1000,
                               local_gb_used=0)
                )  # fmt: skip
            await asyncio.gather(
                *(
                    client.select_destinations(
                        RequestSpec(
                            instance_uuids=[f"low-{h}-{k}"],
                            memory_mb=size,
                            vcpus=1,
                            disk_gb=1,
                            force_hosts=[f"h{h}"],
                        )
                    )
                    for h in range(hosts)
                    for k in range(per_host)
                )
            )
            enough = asyncio.Event()

            async def place(i: int) -> None:
                [selection] = await client.select_destinations(high(i))
                acknowledged[selection.instance_uuid] = selection
                if len(acknowledged) >= 40:
                    enough.set()

            calls = [asyncio.ensure_future(place(i)) for i in range(150)]
            await asyncio.wait_for(enough.wait(), timeout=60)
            await _kill(serve)  # preemptions still in flight
            seen = dict(acknowledged)
            for call in calls:
                call.cancel()
            await asyncio.gather(*calls, return_exceptions=True)
        assert len(seen) >= 40
        assert all(len(s.preempted) == 1 for s in seen.values())

        serve = Serve(await start_serve(AMQP_URL, queue, journal, env=on), asyncio.Future())
        assert serve.process.stderr is not None
        serve.log = asyncio.ensure_future(_drain(serve.process.stderr))
        async with SchedulerClient(AMQP_URL, queue=queue, timeout=60) as client:
            claims = {c.instance_uuid: c for c in await client.claims()}
            lost = [u for u, s in seen.items() if claims.get(u) is None or claims[u].host != s.host]
            victims = [v for s in seen.values() for v in s.preempted]
            doubled = [v for v in victims if v in claims]  # a victim that still holds a claim
            assert (lost, doubled) == ([], [])
            assert len(set(victims)) == len(victims)  # each victim preempted once
            # asking again answers the same, victims and all, and releases nothing more
            again = await asyncio.gather(
                *(client.select_destinations(high(int(u.split("-")[1]))) for u in seen)
            )
            assert {sel.instance_uuid: sel for [sel] in again} == seen
            states = await client.host_states()
            after = {c.instance_uuid: c for c in await client.claims()}
            assert after == claims
            over_committed = [h for h, s in states.items() if s.free_ram_mb < 0]
            assert over_committed == []
            for host, state in states.items():
                on_host = [c for c in after.values() if c.host == host]
                assert per_host * size - state.free_ram_mb == size * len(on_host), host
                assert state.assumed_claims == len(on_host), host
    finally:
        await _kill(serve)
        await _delete_queues(queue)


async def test_a_serve_with_another_journal_on_the_queue_is_refused_at_start(
    tmp_path: Path,
) -> None:
    """One queue, one journal: the first serve records its journal's identity beside the
    queue, so a second serve with another SQLite file exits 2 with one line naming both."""

    queue = f"actorsched.test.{uuid.uuid4().hex[:12]}"
    first = await start_serve(AMQP_URL, queue, tmp_path / "a.sqlite")
    try:
        other = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "actorsched.cli",
            "serve",
            "--amqp-url",
            AMQP_URL,
            "--queue",
            queue,
            "--journal",
            str(tmp_path / "b.sqlite"),
            "--create-journal",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=code_under_test_env(),
        )
        _, err = await asyncio.wait_for(other.communicate(), timeout=60)
        assert other.returncode == 2, err.decode()
        lines = [line for line in err.decode().splitlines() if "refused to start" in line]
        assert len(lines) == 1, err.decode()
        assert f"queue {queue!r} answers from 'sqlite journal " in lines[0]
        assert "not from this serve's 'sqlite journal " in lines[0]
        assert first.returncode is None  # the first one goes on
    finally:
        first.terminate()
        await first.wait()
        exchange, dead = dead_letter_names(queue)
        connection = await aio_pika.connect(AMQP_URL)
        async with connection:
            channel = await connection.channel()
            await channel.queue_delete(queue)
            await channel.queue_delete(f"{queue}.state")
            await channel.queue_delete(dead)
            await channel.exchange_delete(exchange)
