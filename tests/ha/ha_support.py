"""A pair (or trio) of ``actorsched serve`` on one queue and one PostgreSQL shard.

Not a conftest: the HA test modules import :func:`ha_cluster` and wrap it in
a fixture. Each cluster gets a queue and a shard of its own and deletes
them afterwards.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "amqp"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journal"))

from amqp_support import AMQP_URL, delete_topology, host_report
from journal_backends import PG_URL, pg_execute

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
# one heartbeat a second: the broker drops a frozen process after about 2 s
SERVE_AMQP_URL = AMQP_URL.rstrip("/") + "/?heartbeat=1"


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

    def _shard_of(self, journal: str) -> str:
        # an SQLite file holds one shard: serve refuses any other name there
        return self.shard if is_postgres_url(journal) else DEFAULT_SHARD

    async def add(
        self, name: str, *, journal: str | None = None, ready: bool = True
    ) -> ServeProcess:
        journal = self.journal if journal is None else journal
        serve = await ServeProcess.start(
            amqp_url=SERVE_AMQP_URL,
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
            "SELECT epoch, min(seq), max(seq) FROM actorsched_records WHERE shard = %s"
            " GROUP BY epoch ORDER BY epoch",
            (self.shard,),
        )
        return [(int(e), int(lo), int(hi)) for e, lo, hi in rows]


def new_names() -> tuple[str, str]:
    """A queue and a shard of a test's own."""
    return f"actorsched.test.ha.{uuid.uuid4().hex[:10]}", f"test-ha-{uuid.uuid4().hex[:10]}"


def pg_journal(shard: str) -> PostgresJournal:
    return PostgresJournal(PG_URL, shard=shard)


def shard_epoch(shard: str) -> int:
    """The shard's epoch as the database holds it now."""
    [(epoch,)] = pg_execute("SELECT epoch FROM actorsched_shards WHERE shard = %s", (shard,))
    return int(epoch)


async def delete_queue_and_shard(queue: str, shard: str) -> None:
    """What a test made on the broker and in the database."""
    await delete_topology(AMQP_URL, queue)
    for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
        pg_execute(f"DELETE FROM {table} WHERE shard = %s", (shard,))


@asynccontextmanager
async def ha_cluster(
    names: Sequence[str] = ("a", "b"), *, journal: str = PG_URL
) -> AsyncIterator[Cluster]:
    """Serves ``names`` started in order (the first gets the queue), hosts reported."""
    queue = f"actorsched.test.ha.{uuid.uuid4().hex[:10]}"
    shard = f"test-ha-{uuid.uuid4().hex[:10]}"
    serves: list[ServeProcess] = []
    try:
        async with SchedulerClient(
            AMQP_URL, queue=queue, timeout=10, reconnect_interval=0.2
        ) as client:
            cluster = Cluster(queue, shard, serves, client, journal)
            for name in names:
                await cluster.add(name)
            for i in range(HOSTS):
                assert await client.update_host(host(i))
            yield cluster
    finally:
        await asyncio.gather(*(s.stop() for s in serves), return_exceptions=True)
        await delete_topology(AMQP_URL, queue)
        for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
            pg_execute(f"DELETE FROM {table} WHERE shard = %s", (shard,))


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


async def run_command(*argv: str, timeout: float = 60.0) -> tuple[int, str]:  # noqa: ASYNC109
    """Run ``argv``; its exit status and its stdout and stderr together."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace")


def _terminate_backends(application_name: str) -> int:
    rows = pg_execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        (application_name,),
    )
    return sum(1 for (done,) in rows if done)


async def terminate_journal_connections(shard: str) -> int:
    """Kill every database connection of the shard's journals (both serves); how many."""
    return await asyncio.to_thread(_terminate_backends, f"actorsched {shard}")


def steal_epoch(shard: str) -> int:
    """Force a second owner by hand, as an operator would; the epoch it took."""
    [(epoch,)] = pg_execute(
        "UPDATE actorsched_shards SET epoch = epoch + 1, owner = 'operator' WHERE shard = %s"
        " RETURNING epoch",
        (shard,),
    )
    return int(epoch)


def pg_cluster() -> tuple[str, str]:
    """(version, name) of the local PostgreSQL cluster (``ls /etc/postgresql``)."""
    version = os.environ.get("ACTORSCHED_TEST_PG_VERSION") or max(
        os.listdir("/etc/postgresql"), key=lambda v: [int(p) for p in v.split(".")]
    )
    return version, os.environ.get("ACTORSCHED_TEST_PG_CLUSTER", "main")


async def restart_postgres() -> float:
    """``pg_ctlcluster … restart`` (fast shutdown: every session is cut); seconds it took."""
    version, name = pg_cluster()
    started = time.monotonic()
    code, out = await run_command(
        "pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"
    )
    assert code == 0, f"pg_ctlcluster restart exited {code}: {out}"
    return time.monotonic() - started


async def postgres_is_ready() -> bool:
    code, _ = await run_command("pg_isready", "-h", "127.0.0.1", "-p", "5432", timeout=10)
    return code == 0


async def ensure_postgres_up(timeout: float = 60.0) -> None:  # noqa: ASYNC109
    """Until PostgreSQL answers; starts the cluster if it stays down (others need it)."""
    deadline = time.monotonic() + timeout
    started = False
    while not await postgres_is_ready():
        if time.monotonic() > deadline:
            raise AssertionError("PostgreSQL is not back up")
        if not started and time.monotonic() > deadline - timeout / 2:
            version, name = pg_cluster()
            await run_command("pg_ctlcluster", "--skip-systemctl-redirect", version, name, "start")
            started = True
        await asyncio.sleep(0.2)


async def close_all_broker_connections() -> str:
    """``rabbitmqctl close_all_connections`` on the default vhost (the test client's too)."""
    code, out = await run_command("rabbitmqctl", "close_all_connections", "test")
    assert code == 0, f"rabbitmqctl close_all_connections exited {code}: {out}"
    return out


# the serve's own reconnect_interval: a lost connection is retried after 1 s
async def broker_connections(connection_name: str) -> list[str]:
    """The broker's pids of the connections named ``connection_name`` (client property)."""
    code, out = await run_command(
        "rabbitmqctl", "-q", "list_connections", "pid", "client_properties", "--no-table-headers"
    )
    assert code == 0, f"rabbitmqctl list_connections exited {code}: {out}"
    named = '{"connection_name",' + json.dumps(connection_name) + "}"
    return [line.split("\t", 1)[0] for line in out.splitlines() if named in line]


async def close_broker_connection(pid: str) -> None:
    """``rabbitmqctl close_connection``: the broker drops that one connection."""
    code, out = await run_command("rabbitmqctl", "close_connection", pid, "test")
    assert code == 0, f"rabbitmqctl close_connection exited {code}: {out}"
