"""Fail-over of an active/standby pair: from ``kill -9`` of the active to the standby's answer.

Two ``actorsched serve`` processes share one queue and one PostgreSQL
shard that holds ``hosts`` hosts and ``claims`` live claims (written first
by an embedded scheduler). Each round kills the active with SIGKILL, sends
one placement at once, and times its answer, which the standby gives after
the broker moved the queue to it, it fenced the shard and caught up; then
the killed one is started again (it recovers and comes back as a standby).

The broker's own share is measured the same way on two plain consumers of
a single-active-consumer queue that only reply: what a fail-over costs
beyond that is what actorsched adds.
"""

from __future__ import annotations

import asyncio
import re
import signal
import statistics
import sys
import time
import uuid
from typing import Any

import aio_pika

from actorsched import HostReport, RequestSpec, Scheduler, SchedulerConfig
from actorsched.amqp import SchedulerClient
from actorsched.amqp.service import queue_arguments
from actorsched.journal import PostgresJournal

from .cluster import ACTIVE_LINE, ServeProcess, delete_queue

__all__ = ["failover"]

_HOST_RAM = 65_536
_CLAIM_RAM = 1_024
_PER_SPEC = 10  # uuids per request while filling: 10x fewer journal records to write
_FREE_HOSTS = 100  # hosts left empty, so each probe has somewhere to go


def _host(i: int, generation: int = 1) -> HostReport:
    return HostReport(
        host=f"fo{i:06d}",
        generation=generation,
        memory_mb=_HOST_RAM,
        memory_mb_used=0,
        vcpus=64,
        vcpus_used=0,
        local_gb=10_000,
        local_gb_used=0,
    )


def _spec(uuids: list[str]) -> RequestSpec:
    return RequestSpec(instance_uuids=uuids, memory_mb=_CLAIM_RAM, vcpus=1, disk_gb=1)


async def _fill(journal_url: str, shard: str, hosts: int, claims: int) -> None:
    """Write ``hosts`` hosts and ``claims`` claims into the shard, as an owner would."""
    roomy = SchedulerConfig(max_io_ops_per_host=10**6, max_instances_per_host=10**6)
    async with Scheduler(roomy, journal=PostgresJournal(journal_url, shard=shard)) as s:
        busy = range(_FREE_HOSTS, max(hosts, _FREE_HOSTS + 1))
        for start in range(busy.start, busy.stop, 1_000):
            await s.update_hosts([_host(i) for i in range(start, min(start + 1_000, busy.stop))])
        specs = [
            _spec([f"fill-{n}-{k}" for k in range(_PER_SPEC)]) for n in range(claims // _PER_SPEC)
        ]
        for start in range(0, len(specs), 500):
            await asyncio.gather(*(s.select_destinations(x) for x in specs[start : start + 500]))
        await s.update_hosts([_host(i) for i in range(min(_FREE_HOSTS, hosts))])


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_s": statistics.median(ordered), "p99_s": p99, "max_s": ordered[-1]}


async def _actorsched_rounds(
    amqp_url: str, journal_url: str, shard: str, hosts: int, rounds: int
) -> dict[str, Any]:
    queue = f"actorsched.bench.failover.{uuid.uuid4().hex[:8]}"
    serve_url = amqp_url.rstrip("/") + "/?heartbeat=5"
    serves: list[ServeProcess] = []

    async def start(name: str) -> ServeProcess:
        serve = await ServeProcess.start(
            amqp_url=serve_url, queue=queue, journal=journal_url, shard=shard, name=name
        )
        serves.append(serve)
        return serve

    times: list[float] = []
    takeovers: list[float] = []
    recoveries: list[float] = []
    try:
        async with SchedulerClient(amqp_url, queue=queue, timeout=60) as client:
            started = time.perf_counter()
            await start("a")
            recoveries.append(time.perf_counter() - started)
            await start("b")
            generation = 2
            [first] = await client.select_destinations(_spec(["warm-up"]))
            assert first.host
            active = next(s for s in serves if s.is_active)
            for n in range(rounds):
                generation += 1
                # refresh the empty hosts, so they are not stale for the probe
                for i in range(min(_FREE_HOSTS, hosts)):
                    await client.update_host(_host(i, generation))
                killed_at = time.perf_counter()
                active.signal(signal.SIGKILL)
                await client.select_destinations(_spec([f"probe-{n}"]))
                times.append(time.perf_counter() - killed_at)
                await active.wait_exit()
                standby = next(s for s in serves if s.is_active)
                line = await standby.wait_line(ACTIVE_LINE, timeout=5)
                took = re.search(r"took over in ([0-9.]+) ms", line)
                if took:
                    takeovers.append(float(took.group(1)) / 1000)
                serves.remove(active)
                restarted_at = time.perf_counter()
                await start(f"r{n}")
                recoveries.append(time.perf_counter() - restarted_at)
                active = standby
    finally:
        await asyncio.gather(*(s.stop() for s in serves), return_exceptions=True)
        await delete_queue(amqp_url, queue)
    return {
        "failover": _summary(times),
        "takeover": _summary(takeovers) if takeovers else None,
        "standby_start_s": statistics.median(recoveries),
        "rounds": len(times),
        "samples_s": times,
    }


# A consumer of a single-active-consumer queue that replies "ok" and nothing else.
_PLAIN_CONSUMER = """
import asyncio, sys, aio_pika
async def main():
    conn = await aio_pika.connect(sys.argv[1])
    ch = await conn.channel()
    q = await ch.declare_queue(sys.argv[2], durable=True, arguments={
        "x-queue-type": "quorum", "x-single-active-consumer": True})
    async def on(m):
        await ch.default_exchange.publish(
            aio_pika.Message(b"ok", correlation_id=m.correlation_id), routing_key=m.reply_to)
        await m.ack()
    await q.consume(on)
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


async def _broker_rounds(amqp_url: str, rounds: int) -> dict[str, Any]:
    """The same fail-over on two plain consumers: the broker's own share."""
    queue = f"actorsched.bench.sac.{uuid.uuid4().hex[:8]}"
    url = amqp_url.rstrip("/") + "/?heartbeat=5"

    async def consumer() -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _PLAIN_CONSUMER, url, queue, stdout=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"ready"
        return proc

    times: list[float] = []
    connection = await aio_pika.connect(amqp_url)
    procs: list[asyncio.subprocess.Process] = []
    try:
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True)
        answers: asyncio.Queue[str] = asyncio.Queue()

        async def on_reply(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            await answers.put(message.correlation_id or "")

        await replies.consume(on_reply, no_ack=True)
        procs = [await consumer(), await consumer()]

        async def ask(tag: str) -> None:
            await channel.default_exchange.publish(
                aio_pika.Message(b"ping", correlation_id=tag, reply_to=replies.name),
                routing_key=queue,
            )
            while await asyncio.wait_for(answers.get(), 60) != tag:
                pass

        await ask("warm-up")
        for n in range(rounds):
            active = procs.pop(0)  # the first consumer is the active one
            killed_at = time.perf_counter()
            active.kill()
            await ask(f"probe-{n}")
            times.append(time.perf_counter() - killed_at)
            await active.wait()
            procs.append(await consumer())
    finally:
        for proc in procs:
            proc.kill()
            await proc.wait()
        await channel.queue_delete(queue)
        await connection.close()
    return {"failover": _summary(times), "rounds": len(times)}


async def failover(
    amqp_url: str, journal_url: str, *, hosts: int, claims: int, rounds: int
) -> dict[str, Any]:
    """Fail-over figures at ``hosts`` hosts and ``claims`` live claims, ``rounds`` times."""
    shard = f"bench-failover-{uuid.uuid4().hex[:8]}"
    filled_at = time.perf_counter()
    try:
        await _fill(journal_url, shard, hosts, claims)
        fill_s = time.perf_counter() - filled_at
        broker = await _broker_rounds(amqp_url, rounds)
        ours = await _actorsched_rounds(amqp_url, journal_url, shard, hosts, rounds)
    finally:
        journal = PostgresJournal(journal_url, shard=shard)
        conn = journal._new_connection()
        with conn:
            for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
                conn.execute(f"DELETE FROM {table} WHERE shard = %s", (shard,))
    beyond = ours["failover"]["p99_s"] - broker["failover"]["p99_s"]
    return {
        "hosts": hosts,
        "claims": claims,
        "fill_s": fill_s,
        "actorsched": ours,
        "broker": broker,
        "beyond_broker_p50_s": ours["failover"]["p50_s"] - broker["failover"]["p50_s"],
        "beyond_broker_p99_s": beyond,
        "queue_arguments": {k: str(v) for k, v in queue_arguments("q").items()},
    }
