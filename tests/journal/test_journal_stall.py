"""No silent hang on the database: a stalled link or a held row lock fails the journal in time.

The commit watchdog (``Journal.commit_timeout``) fails a write that has not
finished within its limit, whatever the writer thread is stuck on, so the
caller gets a JournalError (``serve`` fail-stops and its standby takes
over) instead of waiting for ever. Before it, a stalled link kept the
owner mute for as long as the stall lasted, with no line at all.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from journal_backends import PG_URL, pg_execute
from journal_workload import report
from stall_proxy import StallProxy

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.journal import JournalError, PostgresJournal

pytestmark = pytest.mark.timeout(60)

CONFIG = SchedulerConfig(max_io_ops_per_host=10_000, max_instances_per_host=10_000)
LIMIT = 1.0  # commit_timeout of these tests
# the watchdog looks every LIMIT/4 and asks the database what the write waits on
# (a connection of at most 2 s, a query of at most 2 s): the failure comes by then
BOUND = LIMIT + LIMIT / 4 + 3.0 + 1.0


def _spec(name: str) -> RequestSpec:
    return RequestSpec(instance_uuids=[name], memory_mb=64, vcpus=1, disk_gb=1)


@pytest.fixture
def shard() -> Iterator[str]:
    name = f"test-stall-{uuid.uuid4().hex[:12]}"
    yield name
    for table in ("actorsched_records", "actorsched_snapshots", "actorsched_shards"):
        pg_execute(f"DELETE FROM {table} WHERE shard = %s", (name,))


async def _claims_after_takeover(shard: str) -> set[str]:
    async with Scheduler(CONFIG, journal=PostgresJournal(PG_URL, shard=shard)) as again:
        return {claim.instance_uuid for claim in (await again.claims()).claims}


async def test_a_stalled_database_link_fails_the_commit_within_its_limit(shard: str) -> None:
    async with StallProxy(PG_URL) as proxy:
        journal = PostgresJournal(proxy.url, shard=shard, commit_timeout=LIMIT)
        scheduler = Scheduler(CONFIG, journal=journal)
        await scheduler.start()
        try:
            await scheduler.update_host(report("h1", 1))
            [before] = await scheduler.select_destinations(_spec("vm-before"))
            proxy.stall()
            seen_overdue = False

            async def watch() -> None:
                nonlocal seen_overdue
                while True:
                    seen_overdue |= journal.overdue
                    await asyncio.sleep(0.05)

            watcher = asyncio.ensure_future(watch())
            started = time.monotonic()
            with pytest.raises(JournalError, match=r"a commit has not finished in \d") as failed:
                await scheduler.select_destinations(_spec("vm-during"))
            took = time.monotonic() - started
            watcher.cancel()
            assert LIMIT <= took < BOUND, took
            assert seen_overdue, "overdue was never true before the journal failed"
            assert journal.failed is failed.value
            assert "nothing after it is durable" in str(failed.value)
            # every later call fails at once: the state in memory is ahead of the journal
            with pytest.raises(JournalError):
                await scheduler.select_destinations(_spec("vm-after"))
        finally:
            closing = time.monotonic()
            await scheduler.stop()
            # the writer thread is still stuck on the stalled socket: close does not wait
            assert time.monotonic() - closing < 5.0
    # whoever takes over finds the answered claim, and no other (0 lost, 0 doubled)
    assert before.host == "h1"
    assert await _claims_after_takeover(shard) == {"vm-before"}


async def test_a_held_row_lock_fails_the_commit_and_names_its_holder(shard: str) -> None:
    journal = PostgresJournal(PG_URL, shard=shard, commit_timeout=LIMIT)
    scheduler = Scheduler(CONFIG, journal=journal)
    await scheduler.start()
    holder = psycopg.connect(PG_URL, application_name="the lock holder")
    try:
        await scheduler.update_host(report("h1", 1))
        await scheduler.select_destinations(_spec("vm-before"))
        [(holder_pid,)] = holder.execute("SELECT pg_backend_pid()").fetchall()
        holder.execute("SELECT 1 FROM actorsched_shards WHERE shard = %s FOR UPDATE", (shard,))
        started = time.monotonic()
        with pytest.raises(JournalError, match=r"a commit has not finished") as failed:
            await scheduler.select_destinations(_spec("vm-during"))
        assert LIMIT <= time.monotonic() - started < BOUND
        message = str(failed.value)
        assert f"waits on a lock held by pid {holder_pid} (application 'the lock holder'" in (
            message
        ), message
        await scheduler.stop()
        # a standby's takeover waits for the lock: nobody writes the shard meanwhile
        takeover = asyncio.ensure_future(_claims_after_takeover(shard))
        await asyncio.sleep(2 * LIMIT + 0.5)  # past the database's own bound on that commit
        assert not takeover.done()
        holder.rollback()
        claims = await asyncio.wait_for(takeover, 30)
        # the unanswered placement never became durable: 0 lost, 0 doubled
        assert claims == {"vm-before"}
    finally:
        holder.close()
        await scheduler.stop()
