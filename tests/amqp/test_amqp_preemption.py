"""Preemption over the real broker: a Selection's ``preempted`` in select and batch
replies, the victims gone from host_states, a redelivery answering alike and
releasing nothing more, nothing preempted with preemption off, many preemptions
at once leaving no host over-committed, and ``actorsched serve`` turning it on
from the environment (and keeping it across a restart on its journal)."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from amqp_support import AMQP_URL, Stack, delete_topology, host_report, running_stack, unique_queue
from conftest import make_spec, over_committed_hosts, start_serve

from actorsched import NoValidHost, RequestSpec, SchedulerConfig, Selection
from actorsched.amqp import SchedulerClient

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(180)]

TIMEOUT = 10.0
# claims count as instances and I/O operations: room for many on one host
ROOMY: dict[str, Any] = {
    "seed": 1,
    "ram_allocation_ratio": 1.0,
    "max_io_ops_per_host": 1000,
    "max_instances_per_host": 1000,
}
PREEMPTING = SchedulerConfig(**ROOMY, preemption=True)
NOT_PREEMPTING = SchedulerConfig(**ROOMY)


def _spec(uuid_: str, memory_mb: int, priority: int = 0, **fields: Any) -> RequestSpec:
    return make_spec(uuid_, memory_mb=memory_mb, priority=priority, **fields)


async def _fill(stack: Stack) -> None:
    """h1: "low" (6144 of 8192 MB, priority 0); h2: "keep" (all of it, priority 10)."""
    client = stack.client
    for host in ("h1", "h2"):
        assert await client.update_host(host_report(host))
    await client.select_destinations(_spec("low", 6144, force_hosts=["h1"]))
    await client.select_destinations(_spec("keep", 8192, priority=10, force_hosts=["h2"]))


async def _plain_call(url: str, queue: str, op: str, body: bytes) -> Any:
    """One request and its reply's JSON, with aio_pika alone (no SchedulerClient)."""
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
        correlation_id = uuid.uuid4().hex
        await channel.default_exchange.publish(
            aio_pika.Message(
                body,
                content_type="application/json",
                type=op,
                correlation_id=correlation_id,
                reply_to=replies.name,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                user_id="guest",  # serve's own broker user: every role
            ),
            routing_key=queue,
        )
        async with asyncio.timeout(TIMEOUT):
            async with replies.iterator() as incoming:
                async for message in incoming:
                    await message.ack()
                    assert message.correlation_id == correlation_id
                    return json.loads(message.body)
    raise AssertionError("no reply")


async def test_a_high_priority_request_preempts_and_a_redelivery_releases_nothing_more() -> None:
    async with running_stack(config=PREEMPTING) as stack:
        client = stack.client
        await _fill(stack)
        before = await client.host_states()
        assert before["h1"].free_ram_mb == 2048
        assert before["h2"].free_ram_mb == 0

        high = _spec("high", 4096, priority=5)
        [placed] = await client.select_destinations(high)
        assert placed == Selection(instance_uuid="high", host="h1", preempted=["low"])
        # the victim is gone: h1 counts only "high", h2 keeps its higher-priority claim
        states = await client.host_states()
        assert states["h1"].free_ram_mb == 8192 - 4096
        assert states["h1"].num_instances == 1
        assert states["h1"].assumed_claims == 1
        assert states["h2"] == before["h2"]
        assert (await client.where("low")).claimed is False
        assert {c.instance_uuid for c in await client.claims()} == {"high", "keep"}
        assert over_committed_hosts(states) == 0

        # the evicted instance is placed again, on h1's room that is left
        [back] = await client.select_destinations(_spec("low", 4096, force_hosts=["h1"]))
        assert back.host == "h1"
        assert back.preempted == []
        full = await client.host_states()
        assert full["h1"].free_ram_mb == 0

        # the same request delivered again: the same answer, naming the same victim,
        # and "low" (which holds a claim again) is not released a second time
        assert await client.select_destinations(high) == [placed]
        body = high.model_dump_json(exclude_defaults=True).encode()
        reply = await _plain_call(stack.url, stack.queue, "select_destinations", body)
        assert reply == {
            "ok": True,
            "result": [
                {"instance_uuid": "high", "host": "h1", "alternates": [], "preempted": ["low"]}
            ],
        }
        assert await client.host_states() == full
        assert (await client.where("low")).host == "h1"
        assert {c.instance_uuid for c in await client.claims()} == {"high", "keep", "low"}
        assert over_committed_hosts(full) == 0


async def test_preempted_travels_in_a_batch_reply_and_is_left_out_when_empty() -> None:
    async with running_stack(config=PREEMPTING) as stack:
        await _fill(stack)
        items = [
            {
                "type": "select_destinations",
                "body": json.loads(_spec("small", 1024).model_dump_json(exclude_defaults=True)),
            },
            {
                "type": "select_destinations",
                "body": json.loads(_spec("big", 7500, priority=3).model_dump_json()),
            },
        ]
        reply = await _plain_call(
            stack.url, stack.queue, "batch", json.dumps({"requests": items}).encode()
        )
        assert reply == {
            "ok": True,
            "result": [
                {
                    "ok": True,
                    "result": [{"instance_uuid": "small", "host": "h1", "alternates": []}],
                },
                {
                    "ok": True,
                    "result": [
                        # "small" (priority 0) went with "low": both were needed for 7500 MB
                        {
                            "instance_uuid": "big",
                            "host": "h1",
                            "alternates": [],
                            "preempted": ["low", "small"],
                        }
                    ],
                },
            ],
        }
        states = await stack.client.host_states()
        assert states["h1"].free_ram_mb == 8192 - 7500
        assert over_committed_hosts(states) == 0


@pytest.mark.parametrize(
    ("config", "priority", "words"),
    [
        (NOT_PREEMPTING, 5, "RamFilter"),
        # on, but the request is not above the claims by preemption_min_priority_delta
        (PREEMPTING, 0, "no host could be freed by preempting claims of priority -1"),
        (SchedulerConfig(**ROOMY, preemption=True, preemption_min_priority_delta=6), 5, "-1"),
    ],
    ids=["off", "same-priority", "delta"],
)
async def test_nothing_is_preempted_without_preemption_or_a_priority_above(
    config: SchedulerConfig, priority: int, words: str
) -> None:
    async with running_stack(config=config) as stack:
        client = stack.client
        await _fill(stack)
        before = await client.host_states()
        claims = await client.claims()
        with pytest.raises(NoValidHost, match=words):
            await client.select_destinations(_spec("high", 4096, priority=priority))
        assert await client.host_states() == before
        assert await client.claims() == claims
        assert (await client.where("low")).host == "h1"
        assert (await client.where("high")).claimed is False


def _high(i: int) -> RequestSpec:
    return _spec(f"high-{i}", 4096, priority=10)


async def test_many_preemptions_at_once_leave_no_hostover_committed_hosts() -> None:
    hosts, lows_per_host, highs = 10, 4, 20
    async with running_stack(config=PREEMPTING, prefetch=8) as stack:
        client = stack.client
        await asyncio.gather(*(client.update_host(host_report(f"h{i}")) for i in range(hosts)))
        # every host full of low-priority claims (priorities 0 to 3) of 2048 MB
        lows = [
            _spec(f"low-{h}-{n}", 2048, priority=n, force_hosts=[f"h{h}"])
            for h in range(hosts)
            for n in range(lows_per_host)
        ]
        await asyncio.gather(*(client.select_destinations(s) for s in lows))
        assert sum(s.free_ram_mb for s in (await client.host_states()).values()) == 0
        sent = client.messages_sent
        # 20 requests of 4096 MB at priority 10 at once: each frees half a host
        answers = await asyncio.gather(
            *(
                client.select_destinations(_spec(f"high-{i}", 4096, priority=10))
                for i in range(highs)
            )
        )
        assert client.messages_sent - sent < highs  # some went together, in batches
        placed = [selection for [selection] in answers]
        victims = [v for s in placed for v in s.preempted]
        assert len(victims) == len(set(victims))  # none named twice
        # all 80 GiB went to the high ones: every low claim was preempted, two a request
        assert set(victims) == {s.instance_uuids[0] for s in lows}
        assert all(len(s.preempted) == 2 for s in placed)
        assert Counter(s.host for s in placed) == {f"h{i}": 2 for i in range(hosts)}
        states = await client.host_states()
        over_committed = over_committed_hosts(states)
        assert over_committed == 0
        assert all(s.free_ram_mb == 0 for s in states.values())
        claims = await client.claims()
        assert {c.instance_uuid for c in claims} == {s.instance_uuid for s in placed}
        # the victims of each host were on that host
        for selection in placed:
            assert all(v.startswith(f"low-{selection.host[1:]}-") for v in selection.preempted)
        # each asked again: the same answers, nothing more released
        again = await asyncio.gather(
            *(
                client.select_destinations(_spec(f"high-{i}", 4096, priority=10))
                for i in range(highs)
            )
        )
        assert again == answers
        assert await client.host_states() == states


async def test_a_mixed_load_of_placements_releases_and_preemptions_stays_consistent() -> None:
    """Random waves of placements (priorities 0 to 9, some preempting), and releases
    racing them: every victim had a priority below its preemptor's, is named once,
    was not released by its caller too, holds no claim after; 0 over-committed hosts."""
    rng = random.Random(16)
    hosts = 8
    async with running_stack(config=PREEMPTING, prefetch=8) as stack:
        client = stack.client
        await asyncio.gather(*(client.update_host(host_report(f"h{i}")) for i in range(hosts)))
        priority_of: dict[str, int] = {}
        placed: dict[str, Selection] = {}
        released: set[str] = set()
        failed = 0

        async def place(uuid_: str, memory_mb: int, priority: int) -> None:
            nonlocal failed
            priority_of[uuid_] = priority
            try:
                [selection] = await client.select_destinations(
                    _spec(uuid_, memory_mb, priority=priority)
                )
            except NoValidHost:
                failed += 1
                return
            placed[uuid_] = selection

        async def release(uuid_: str) -> None:
            if await client.release(uuid_):
                released.add(uuid_)

        n = 0
        for _ in range(12):
            calls = []
            for _ in range(25):
                n += 1
                calls.append(
                    place(f"vm-{n}", rng.choice((1024, 2048, 3072, 4096)), rng.randrange(10))
                )
            for uuid_ in rng.sample(sorted(placed), min(5, len(placed))):
                calls.append(release(uuid_))
            await asyncio.gather(*calls)
            states = await client.host_states()
            assert over_committed_hosts(states) == 0

        victims = [(s.instance_uuid, v) for s in placed.values() for v in s.preempted]
        assert victims, "the load should have preempted"
        assert failed, "and some requests should have found nothing to preempt"
        named = [v for _, v in victims]
        assert len(named) == len(set(named))  # a claim is released once
        assert not set(named) & released  # by its preemptor or its caller, never both
        for preemptor, victim in victims:
            assert priority_of[victim] <= priority_of[preemptor] - 1, (preemptor, victim)
        claims = {c.instance_uuid: c for c in await client.claims()}
        assert not set(named) & set(claims)  # uuids are never reused: no victim came back
        assert set(claims) == set(placed) - set(named) - released
        states = await client.host_states()
        over_committed = over_committed_hosts(states)
        assert over_committed == 0
        for host, state in states.items():
            on_host = [c for c in claims.values() if c.host == host]
            assert 8192 - state.free_ram_mb == sum(c.memory_mb for c in on_host), host
            assert state.assumed_claims == len(on_host), host


# -- actorsched serve ----------------------------------------------------------


async def _serve(queue: str, journal: Path, **env: str) -> asyncio.subprocess.Process:
    return await start_serve(
        AMQP_URL, queue, journal, env={"ACTORSCHED_RAM_ALLOCATION_RATIO": "1.0", **env}
    )


async def _stop(process: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> None:
    if process.returncode is None:
        process.send_signal(sig)
    assert process.stderr is not None
    await process.stderr.read()  # to its end, or a full pipe would stall it
    await asyncio.wait_for(process.wait(), timeout=30)


async def test_serve_preempts_when_the_environment_turns_it_on(tmp_path: Path) -> None:
    queue = unique_queue()
    journal = tmp_path / "journal.sqlite"
    high = _spec("high", 4096, priority=5)
    try:
        process = await _serve(queue, journal)  # preemption off: the default
        try:
            async with SchedulerClient(AMQP_URL, queue=queue, timeout=TIMEOUT) as client:
                assert await client.update_host(host_report("h1"))
                await client.select_destinations(_spec("low", 6144))
                with pytest.raises(NoValidHost, match="RamFilter"):
                    await client.select_destinations(high)
        finally:
            await _stop(process)

        process = await _serve(queue, journal, ACTORSCHED_PREEMPTION="true")
        try:
            async with SchedulerClient(AMQP_URL, queue=queue, timeout=TIMEOUT) as client:
                assert (await client.where("low")).host == "h1"  # from the journal
                [placed] = await client.select_destinations(high)
                assert placed.preempted == ["low"]
                states = await client.host_states()
                assert states["h1"].free_ram_mb == 4096
                assert over_committed_hosts(states) == 0
        finally:
            await _stop(process, signal.SIGKILL)

        # restarted on the same journal: the same state, and a redelivery answers alike
        process = await _serve(queue, journal, ACTORSCHED_PREEMPTION="true")
        try:
            async with SchedulerClient(AMQP_URL, queue=queue, timeout=TIMEOUT) as client:
                assert await client.host_states() == states
                assert (await client.where("low")).claimed is False
                assert await client.select_destinations(high) == [placed]
                assert await client.host_states() == states
        finally:
            await _stop(process)
    finally:
        await delete_topology(AMQP_URL, queue)
