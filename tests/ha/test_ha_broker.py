"""The broker drops every connection in the middle of a fail-over.

The broker is a private node of the test run's own (tests/servers.py): closing
"all" connections, or one by its pid, is never done to the machine's broker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import psycopg
import pytest
from aio_pika.abc import AbstractIncomingMessage
from ha_support import (
    HOSTS,
    answered_at_forced_close,
    assert_clean,
    assert_epochs_in_order,
    broker_connections,
    close_broker_connection,
    delete_queue_and_shard,
    ha_cluster,
    host,
    new_names,
    pg_journal,
    serve_url,
    shard_epoch,
    spec,
)
from journal_backends import PG_URL
from servers import PrivateRabbit, private_rabbitmq_fixture  # noqa: F401 (a fixture)

from actorsched import Scheduler
from actorsched.amqp import SchedulerClient, SchedulerService
from benchmarks.cluster import ACTIVE_LINE, STEP_DOWN_LINE, Tally, place_all

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(240)]

REQUESTS = 120  # 80 fit, 40 get NoValidHost


@pytest.fixture
def rabbit(private_rabbitmq: PrivateRabbit) -> PrivateRabbit:
    """The private node every test here faults (the session's one)."""
    return private_rabbitmq


async def test_all_broker_connections_closed_during_a_fail_over_leave_one_active(
    rabbit: PrivateRabbit,
) -> None:
    async with ha_cluster(("a", "b", "c"), amqp_url=rabbit.url) as cluster:
        first = await cluster.wait_active()
        assert first.name == "a"
        survivors = cluster.serves[1:]
        tally = Tally()
        # armed before the load (its rabbitmqctl takes seconds to start), cued within it
        async with rabbit.close_all_on_cue() as close_all:
            load = asyncio.ensure_future(
                # about 4 s of load: it goes on through the close and the reconnects (1 s)
                place_all(cluster.client, [spec(i) for i in range(REQUESTS)], tally, pause=0.3)
            )
            await tally.wait_answered(30)
            await first.kill()
            # every connection goes: both survivors' and the test client's (all reconnect)
            with answered_at_forced_close(tally) as at_close:
                assert await close_all() >= 3
        answered_at_close = at_close[0] if at_close else tally.answered
        await load
        assert answered_at_close < REQUESTS, f"the load ended before the close {at_close}"
        owner = await cluster.wait_active()
        await asyncio.sleep(1.5)  # past a reconnect of each survivor: still only one
        await asyncio.wait_for(cluster.client.host_states(), 10)  # a delivery: it answers
        logs = cluster.logs()
        assert cluster.active() == [owner], logs
        assert all(s.process.returncode is None for s in survivors), logs
        assert sum(s.count("stopping:") for s in survivors) == 0, logs
        for serve in survivors:
            # each term a survivor began ended with the lost connection, but the last
            terms = serve.count(ACTIVE_LINE)
            assert serve.count(STEP_DOWN_LINE) == terms - (serve is owner), logs
        assert_clean(cluster.audit(tally), REQUESTS, logs)
        epochs = assert_epochs_in_order(cluster)
        assert epochs[0] == 1, epochs
        assert len(epochs) >= 2, "a survivor took over and wrote"


FLOOD = 600  # 80 fit, 520 refused: every one a delivery, so some are in flight at the close


async def test_all_broker_connections_closed_under_a_flood_the_owner_waits_for_its_channel(
    rabbit: PrivateRabbit,
) -> None:
    async with ha_cluster(("a", "b"), amqp_url=rabbit.url) as cluster:
        first = await cluster.wait_active()
        tally = Tally()
        async with rabbit.close_all_on_cue() as close_all:
            load = asyncio.ensure_future(
                place_all(
                    cluster.client,
                    [spec(i) for i in range(FLOOD)],
                    tally,
                    concurrency=32,
                    pause=0.15,
                )
            )
            await tally.wait_answered(100)
            with answered_at_forced_close(tally) as at_close:
                assert await close_all() >= 3  # both serves' and the test client's
        answered_at_close = at_close[0] if at_close else tally.answered
        await load
        assert answered_at_close < FLOOD, f"the load ended before the close {at_close}"
        await asyncio.sleep(1.5)
        await asyncio.wait_for(cluster.client.host_states(), 10)  # a delivery: it answers
        logs = cluster.logs()
        assert first.count(STEP_DOWN_LINE) >= 1, logs
        assert len(cluster.active()) == 1, logs
        # a term begun for a delivery of the lost connection would fence the real owner,
        # which would fail-stop on its next commit: none did
        assert all(s.process.returncode is None for s in cluster.serves), logs
        assert sum(s.count("stopping:") for s in cluster.serves) == 0, logs
        assert_clean(cluster.audit(tally), FLOOD, logs)
        assert_epochs_in_order(cluster)


class HeldDelivery:
    """Holds the next delivery a service starts on, until :meth:`release`.

    aiormq reads a delivery and the broker's close of its connection from one
    socket; it hands the delivery on in a task of its own, which may run after
    the close was handled (and the term ended). Holding one delivery makes
    that interleaving happen every time instead of now and then.
    """

    def __init__(self, service: SchedulerService) -> None:
        self.armed = False
        self.held = asyncio.Event()
        self._release = asyncio.Event()
        self._process = service._process
        service._process = self._hold  # type: ignore[method-assign]

    async def _hold(
        self, message: AbstractIncomingMessage, items: list[tuple[str, str]], cut: int | None
    ) -> str:
        if self.armed:
            self.armed = False
            self.held.set()
            await self._release.wait()
        return await self._process(message, items, cut)

    def release(self) -> None:
        self._release.set()


async def _until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.01)


async def test_a_delivery_read_before_the_connection_was_lost_does_not_take_the_journal_over(
    rabbit: PrivateRabbit,
) -> None:
    queue, shard = new_names()
    schedulers = [Scheduler(journal=pg_journal(shard), follow_interval=0.02) for _ in "ab"]
    services: list[SchedulerService] = []
    a = SchedulerService(schedulers[0], serve_url(rabbit.url), queue=queue)
    hold = HeldDelivery(a)
    try:
        for scheduler in schedulers:
            await scheduler.follow()
        await a.start()
        services.append(a)
        [a_connection] = await broker_connections(rabbit, f"actorsched serve {queue}")  # a's
        b = SchedulerService(schedulers[1], serve_url(rabbit.url), queue=queue)
        await b.start()
        services.append(b)
        async with SchedulerClient(
            rabbit.url, queue=queue, timeout=10, reconnect_interval=0.2
        ) as client:
            for i in range(HOSTS):
                assert await client.update_host(host(i))
            assert a.active
            assert a.epoch == 1
            hold.armed = True
            placing = asyncio.ensure_future(client.select_destinations(spec(0)))
            await asyncio.wait_for(hold.held.wait(), 10)
            # a's connection alone goes: the broker gives the queue, and the request, to b
            await close_broker_connection(rabbit, a_connection)
            await _until(lambda: not a.active, "a stepped down")
            [placed] = await asyncio.wait_for(placing, 10)
            assert b.active
            assert b.epoch == 2
            # the delivery a had read before its connection went now reaches a
            hold.release()
            await asyncio.sleep(0.3)  # a reconnects after 1 s: until then it has no queue
            assert not a.active, (
                f"a began a term (epoch {a.epoch}, shard epoch {shard_epoch(shard)}) for a "
                "delivery of the connection it had lost, fencing b, which owns the queue"
            )
            assert shard_epoch(shard) == 2
            [again] = await client.select_destinations(spec(0))  # idempotent: the same host
            assert again.host == placed.host
            [other] = await client.select_destinations(spec(1))
            assert other.host.startswith("h")
            assert b.failure is None, b.failure
            assert b.active
    finally:
        hold.release()
        for service in services:
            await service.stop()
        for scheduler in schedulers:
            await scheduler.stop()
        await delete_queue_and_shard(queue, shard, amqp_url=rabbit.url)


async def test_a_connection_lost_while_taking_over_ends_that_term(rabbit: PrivateRabbit) -> None:
    # a's takeover waits on the shard's row lock; its connection goes meanwhile. The
    # takeover must not leave a "active" for a term that is over (it would answer from
    # the state of its catch-up once the queue comes back to it).
    queue, shard = new_names()
    schedulers = [Scheduler(journal=pg_journal(shard), follow_interval=0.02) for _ in "ab"]
    url = serve_url(rabbit.url)
    a = SchedulerService(schedulers[0], url, queue=queue, reconnect_interval=0.2)
    b = SchedulerService(schedulers[1], url, queue=queue, reconnect_interval=0.2)
    services = [a, b]
    lock = psycopg.connect(PG_URL)
    try:
        for scheduler in schedulers:
            await scheduler.follow()
        await a.start()
        [a_connection] = await broker_connections(rabbit, f"actorsched serve {queue}")
        await b.start()
        async with SchedulerClient(
            rabbit.url, queue=queue, timeout=30, reconnect_interval=0.2, batch=False
        ) as client:
            lock.execute("SELECT 1 FROM actorsched_shards WHERE shard = %s FOR UPDATE", (shard,))
            first = asyncio.ensure_future(client.host_states())
            await _until(lambda: schedulers[0].journal is not None, "a journal")
            await asyncio.sleep(0.5)  # a holds the delivery, waiting in acquire
            await close_broker_connection(rabbit, a_connection)
            await asyncio.sleep(0.5)
            lock.commit()  # a's takeover goes through now, for a term already over
            await asyncio.wait_for(first, 20)
            assert await client.update_host(host(1))
            assert await client.update_host(host(2))
            await _until(lambda: b.active or a.active, "someone owns the queue")
            owner, other = (b, a) if b.active else (a, b)
            await owner.stop()
            await owner.scheduler.stop()
            services.remove(owner)
            states = await client.host_states()
            assert sorted(states) == ["h01", "h02"], "the remaining one answers from the journal"
            [placed] = await client.select_destinations(spec(1))
            assert placed.host in states
            assert other.failure is None
            assert other.active
    finally:
        lock.close()
        for service in services:
            await service.stop()
        for scheduler in schedulers:
            await scheduler.stop()
        await delete_queue_and_shard(queue, shard, amqp_url=rabbit.url)
