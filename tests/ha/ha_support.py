"""A pair (or trio) of ``actorsched serve`` on one queue and one PostgreSQL shard.

Not a conftest: the HA test modules import :func:`ha_cluster` and wrap it in
a fixture. Each cluster gets a queue and a shard of its own and deletes
them afterwards.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "amqp"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journal"))

from amqp_support import AMQP_URL, delete_topology
from journal_backends import PG_URL, pg_execute

from actorsched import HostReport, RequestSpec
from actorsched.amqp import SchedulerClient
from benchmarks.cluster import Audit, ServeProcess, Tally, audit, recovered_core

HOSTS = 20
HOST_RAM = 8192
CLAIM_RAM = 2048
SLOTS = HOST_RAM // CLAIM_RAM  # RAM is what binds: 4 claims a host, 80 in all
# one heartbeat a second: the broker drops a frozen process after about 2 s
SERVE_AMQP_URL = AMQP_URL.rstrip("/") + "/?heartbeat=1"


def spec(i: int) -> RequestSpec:
    return RequestSpec(instance_uuids=[f"vm-{i}"], memory_mb=CLAIM_RAM, vcpus=1, disk_gb=1)


def host(i: int) -> HostReport:
    return HostReport(
        host=f"h{i:02d}",
        generation=1,
        memory_mb=HOST_RAM,
        memory_mb_used=0,
        vcpus=64,
        vcpus_used=0,
        local_gb=1000,
        local_gb_used=0,
    )


@dataclass
class Cluster:
    queue: str
    shard: str
    serves: list[ServeProcess]
    client: SchedulerClient

    async def add(self, name: str, *, journal: str = PG_URL, ready: bool = True) -> ServeProcess:
        serve = await ServeProcess.start(
            amqp_url=SERVE_AMQP_URL,
            queue=self.queue,
            journal=journal,
            shard=self.shard,
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
        return audit(recovered_core(PG_URL, self.shard), tally, slots_per_host=SLOTS)

    def records_by_epoch(self) -> list[tuple[int, int, int]]:
        """(epoch, first seq, last seq) of the journal's records, by epoch."""
        rows = pg_execute(
            "SELECT epoch, min(seq), max(seq) FROM actorsched_records WHERE shard = %s"
            " GROUP BY epoch ORDER BY epoch",
            (self.shard,),
        )
        return [(int(e), int(lo), int(hi)) for e, lo, hi in rows]


@asynccontextmanager
async def ha_cluster(names: Sequence[str] = ("a", "b")) -> AsyncIterator[Cluster]:
    """Serves ``names`` started in order (the first gets the queue), hosts reported."""
    queue = f"actorsched.test.ha.{uuid.uuid4().hex[:10]}"
    shard = f"test-ha-{uuid.uuid4().hex[:10]}"
    serves: list[ServeProcess] = []
    try:
        async with SchedulerClient(
            AMQP_URL, queue=queue, timeout=10, reconnect_interval=0.2
        ) as client:
            cluster = Cluster(queue, shard, serves, client)
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
