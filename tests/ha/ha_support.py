"""A pair (or trio) of ``actorsched serve`` on one queue and one PostgreSQL shard.

Not a conftest: the HA test modules import :func:`ha_cluster` and wrap it in
a fixture. Each cluster gets a queue and a shard of its own and deletes
them afterwards.

By default on the machine's broker and database (:data:`AMQP_URL`, :data:`PG_URL`).
A test that faults a server itself (restarts the database, closes every broker
connection) gives :func:`ha_cluster` the URLs of a private one (``tests/servers.py``)
and faults that one: the machine's are never restarted nor cut.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "amqp"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journal"))

import psycopg
from amqp_support import AMQP_URL, delete_topology, host_report
from journal_backends import PG_URL
from servers import PrivatePostgres, PrivateRabbit

from actorsched import HostReport, RequestSpec
from actorsched.amqp import SchedulerClient
from actorsched.journal import DEFAULT_SHARD, PostgresJournal
from actorsched.journal.postgres import is_postgres_url
from benchmarks.cluster import (
    Audit,
    ServeProcess,
    Tally,
    audit,
    recovered_core,
)

HOSTS = 20
HOST_RAM = 8192
CLAIM_RAM = 2048
SLOTS = HOST_RAM // CLAIM_RAM  # RAM is what binds: 4 claims a host, 80 in all
CLIENT_AMQP_URL = AMQP_URL  # the test's own client (for test modules: mypy exports it)


def serve_url(amqp_url: str) -> str:
    """``amqp_url`` with one heartbeat a second: the broker drops a frozen process after
    about 2 s."""
    return amqp_url.rstrip("/") + "/?heartbeat=1"


SERVE_AMQP_URL = serve_url(AMQP_URL)


def pg_execute(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """One statement on the database of ``url`` (autocommit); its rows, if any."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


def spec(i: int) -> RequestSpec:
    return RequestSpec(instance_uuids=[f"vm-{i}"], memory_mb=CLAIM_RAM, vcpus=1, disk_gb=1)


def host(i: int) -> HostReport:
    """Host ``h<i>``: HOST_RAM, 64 vCPUs, 1 TB, nothing used."""
    return host_report(f"h{i:02d}", memory_mb=HOST_RAM)


@dataclass
class Cluster:
    queue: str
    shard: str
    serves: list[ServeProcess]
    client: SchedulerClient
    journal: str = PG_URL  # the serves' --journal unless add() is told otherwise
    amqp_url: str = AMQP_URL  # the broker of the serves and of the client
    pg_url: str = PG_URL  # the database the shard is in (records_by_epoch, clean-up)

    def _shard_of(self, journal: str) -> str:
        # an SQLite file holds one shard: serve refuses any other name there
        return self.shard if is_postgres_url(journal) else DEFAULT_SHARD

    async def add(
        self, name: str, *, journal: str | None = None, ready: bool = True
    ) -> ServeProcess:
        journal = self.journal if journal is None else journal
        serve = await ServeProcess.start(
            amqp_url=serve_url(self.amqp_url),
            queue=self.queue,
            journal=journal,
            shard=self._shard_of(journal),
            name=name,
            ready=ready,
        )
        self.serves.append(serve)
        return serve

    def active(self) -> list[ServeProcess]:
        return [s for s in self.serves if s.is_active]

    async def wait_active(self, timeout: float = 30.0) -> ServeProcess:  # noqa: ASYNC109
        for _ in range(int(timeout * 50)):
            active = self.active()
            if len(active) == 1:
                return active[0]
            assert len(active) < 2, f"two active at once: {[s.name for s in active]}"
            await asyncio.sleep(0.02)
        logs = "\n".join(f"{s.name}: {line}" for s in self.serves for line in s.lines[-15:])
        raise AssertionError("no active serve:\n" + logs)

    def audit(self, tally: Tally) -> Audit:
        """The journal against ``tally`` (an SQLite one only once its serve has let go)."""
        core = recovered_core(self.journal, self._shard_of(self.journal))
        return audit(core, tally, slots_per_host=SLOTS)

    def logs(self, last: int = 40) -> str:
        """The last ``last`` log lines of every serve, for an assertion message."""
        return "\n".join(f"{s.name}: {line}" for s in self.serves for line in s.lines[-last:])

    def records_by_epoch(self) -> list[tuple[int, int, int]]:
        """(epoch, first seq, last seq) of the journal's records, by epoch."""
        rows = pg_execute(
            self.pg_url,
            "SELECT epoch, min(seq), max(seq) FROM actorsched_records WHERE shard = %s"
            " GROUP BY epoch ORDER BY epoch",
            (self.shard,),
        )
        return [(int(e), int(lo), int(hi)) for e, lo, hi in rows]


def new_names() -> tuple[str, str]:
    """A queue and a shard of a test's own."""
    return f"actorsched.test.ha.{uuid.uuid4().hex[:10]}", f"test-ha-{uuid.uuid4().hex[:10]}"


def pg_journal(shard: str, pg_url: str = PG_URL) -> PostgresJournal:
    return PostgresJournal(pg_url, shard=shard)


def shard_epoch(shard: str, pg_url: str = PG_URL) -> int:
    """The shard's epoch as the database holds it now."""
    [(epoch,)] = pg_execute(
        pg_url, "SELECT epoch FROM actorsched_shards WHERE shard = %s", (shard,)
    )
    return int(epoch)


def delete_shard(shard: str, pg_url: str = PG_URL) -> None:
    for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
        pg_execute(pg_url, f"DELETE FROM {table} WHERE shard = %s", (shard,))


async def delete_queue_and_shard(
    queue: str, shard: str, *, amqp_url: str = AMQP_URL, pg_url: str = PG_URL
) -> None:
    """What a test made on the broker and in the database."""
    await delete_topology(amqp_url, queue)
    delete_shard(shard, pg_url)


@asynccontextmanager
async def ha_cluster(
    names: Sequence[str] = ("a", "b"),
    *,
    journal: str | None = None,
    amqp_url: str = AMQP_URL,
    pg_url: str = PG_URL,
) -> AsyncIterator[Cluster]:
    """Serves ``names`` started in order (the first gets the queue), hosts reported.

    ``amqp_url`` is the broker of the serves (with a 1 s heartbeat) and of the client;
    ``pg_url`` the database of the shard, the serves' ``--journal`` unless ``journal``
    says otherwise (an SQLite file)."""
    queue = f"actorsched.test.ha.{uuid.uuid4().hex[:10]}"
    shard = f"test-ha-{uuid.uuid4().hex[:10]}"
    serves: list[ServeProcess] = []
    try:
        async with SchedulerClient(
            amqp_url, queue=queue, timeout=10, reconnect_interval=0.2
        ) as client:
            cluster = Cluster(
                queue, shard, serves, client, journal or pg_url, amqp_url=amqp_url, pg_url=pg_url
            )
            for name in names:
                await cluster.add(name)
            for i in range(HOSTS):
                assert await client.update_host(host(i))
            yield cluster
    finally:
        await asyncio.gather(*(s.stop() for s in serves), return_exceptions=True)
        await delete_queue_and_shard(queue, shard, amqp_url=amqp_url, pg_url=pg_url)


# -- checks and faults shared by the fault modules -------------------------------------


def assert_clean(result: Audit, requests: int, logs: str = "") -> None:
    """0 lost, doubled, over-committed, two hosts; every uuid answered; exact counts."""
    assert result.zero(), f"{result}\n{logs}"
    assert result.unanswered == 0, f"{result}\n{logs}"
    assert result.placed == HOSTS * SLOTS, f"{result}\n{logs}"
    assert result.refused == requests - HOSTS * SLOTS, f"{result}\n{logs}"


def assert_epochs_in_order(cluster: Cluster) -> list[int]:
    """The journal's epochs, each one's records all after the previous one's."""
    epochs = cluster.records_by_epoch()
    for (_, _, last), (_, first, _) in itertools.pairwise(epochs):
        assert last < first, f"records of an older epoch after a newer one: {epochs}"
    return [e for e, _, _ in epochs]


def _terminate_backends(application_name: str, pg_url: str) -> int:
    # only our own connections (the journals' application_name): nobody else's
    rows = pg_execute(
        pg_url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (application_name,),
    )
    return sum(1 for (done,) in rows if done)


async def terminate_journal_connections(shard: str, pg_url: str = PG_URL) -> int:
    """Kill every database connection of the shard's journals (both serves); how many."""
    return await asyncio.to_thread(_terminate_backends, f"actorsched {shard}", pg_url)


def steal_epoch(shard: str, pg_url: str = PG_URL) -> int:
    """Force a second owner by hand, as an operator would; the epoch it took."""
    [(epoch,)] = pg_execute(
        pg_url,
        "UPDATE actorsched_shards SET epoch = epoch + 1, owner = 'operator' WHERE shard = %s"
        " RETURNING epoch",
        (shard,),
    )
    return int(epoch)


# Faults of a whole server: only ever a private one (tests/servers.py), never the
# machine's (tests/test_machine_services.py checks that nothing here does otherwise).


async def restart_postgres(server: PrivatePostgres) -> float:
    """``pg_ctl restart -m fast`` of the private cluster (every session is cut); seconds."""
    return await server.restart_async()


async def ensure_postgres_up(server: PrivatePostgres) -> None:
    """The private cluster is started again if a test left it down (later tests use it)."""
    await asyncio.to_thread(server.ensure_up)


async def broker_connections(node: PrivateRabbit, connection_name: str) -> list[str]:
    """The private node's pids of the connections named ``connection_name`` (client
    property)."""
    out = await node.actl("list_connections", "pid", "client_properties", "--no-table-headers")
    named = '{"connection_name",' + json.dumps(connection_name) + "}"
    return [line.split("\t", 1)[0] for line in out.splitlines() if named in line]


async def close_broker_connection(node: PrivateRabbit, pid: str) -> None:
    """``rabbitmqctl -n <private node> close_connection``: it drops that one connection."""
    await node.actl("close_connection", pid, "test")


class _ForcedClose(logging.Handler):
    def __init__(self, tally: Tally) -> None:
        super().__init__()
        self.tally = tally
        self.answered: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not self.answered and "CONNECTION_FORCED" in record.getMessage():
            self.answered.append(self.tally.answered)


@contextmanager
def answered_at_forced_close(tally: Tally) -> Iterator[list[int]]:
    """``[tally.answered]`` as it was when the broker closed this process's connection
    (aiormq logs the broker's CONNECTION_FORCED); empty if it never did. rabbitmqctl
    takes seconds to start and to return, so what was answered when it returns is not
    what was answered when it acted."""
    handler = _ForcedClose(tally)
    logger = logging.getLogger("aiormq.connection")
    logger.addHandler(handler)
    try:
        yield handler.answered
    finally:
        logger.removeHandler(handler)
