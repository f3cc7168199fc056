"""The rules every journal keeps, run against each backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_backends import BACKENDS, Backend, make_backend
from journal_workload import StepClock, random_workload, report

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.core import SchedulerCore
from actorsched.journal import JournalError

CONFIG = SchedulerConfig(
    claim_timeout=40.0,
    service_down_time=1e9,
    host_subset_size=3,
    max_io_ops_per_host=10_000,
    max_instances_per_host=10_000,
)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    made.cleanup()


def _spec(uuid: str) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=64, vcpus=1, disk_gb=1)


async def _recovered_digest(backend: Backend) -> str:
    async with Scheduler(CONFIG, journal=backend.journal()) as s:
        return s.core.digest()


@pytest.mark.parametrize("snapshot_every", [1_000_000, 9])
async def test_recovery_gives_back_the_state_after_a_random_workload(
    backend: Backend, snapshot_every: int
) -> None:
    journal = backend.journal(snapshot_every)
    async with Scheduler(CONFIG, journal=journal, clock=StepClock()) as s:
        await random_workload(s, random.Random(7), 300)
        assert len(s.core.ledger) > 0
        journal.snapshot_every = 10**9
        for i in range(3):
            assert await s.update_host(report(f"late{i}", 1))
        before = s.core.digest()
        journal._since_snapshot = 0  # no closing snapshot, as after kill -9
    assert backend.record_seqs(), "records follow the last snapshot"
    assert await _recovered_digest(backend) == before
    assert await _recovered_digest(backend) == before  # and again: recovery changes nothing


async def test_concurrent_callers_share_transactions(backend: Backend) -> None:
    async with Scheduler(CONFIG, journal=backend.journal()) as s:
        await s.update_hosts([report(f"h{i}", 1, vcpus=64) for i in range(8)])
        journal = s.journal
        assert journal is not None
        before = journal.stats.transactions
        await asyncio.gather(*(s.select_destinations(_spec(f"vm-{i}")) for i in range(300)))
        assert journal.stats.records == 8 + 300
        assert 1 <= journal.stats.transactions - before < 300 / 10
    assert backend.record_seqs() == [] or backend.record_seqs()[-1] <= 308


async def _two_claims(backend: Backend) -> None:
    journal = backend.journal()
    async with Scheduler(CONFIG, journal=journal) as s:
        await s.update_host(report("h1", 1))
        await s.select_destinations(_spec("vm-1"))
        await s.select_destinations(_spec("vm-2"))
        journal._since_snapshot = 0  # keep the records: no closing snapshot


async def test_a_record_that_fails_its_crc_refuses_to_start(backend: Backend) -> None:
    await _two_claims(backend)
    backend.damage_record(2)
    with pytest.raises(JournalError, match=r"record 2 .*does not match its CRC"):
        backend.journal().open(SchedulerCore(CONFIG))


async def test_a_missing_record_refuses_to_start(backend: Backend) -> None:
    await _two_claims(backend)
    backend.drop_record(2)
    with pytest.raises(JournalError, match="record 3 where record 2 was expected"):
        backend.journal().open(SchedulerCore(CONFIG))


async def test_a_snapshot_that_fails_its_checksum_refuses_to_start(backend: Backend) -> None:
    async with Scheduler(CONFIG, journal=backend.journal()) as s:
        await s.update_host(report("h1", 1))
        await s.select_destinations(_spec("vm-1"))
    backend.damage_snapshot()
    with pytest.raises(JournalError, match=r"snapshot .* does not match its checksum"):
        backend.journal().open(SchedulerCore(CONFIG))


async def test_a_failed_write_fails_its_callers_and_every_later_call(backend: Backend) -> None:
    journal = backend.journal()
    async with Scheduler(CONFIG, journal=journal) as s:
        await s.update_host(report("h1", 1))

        def broken(rows: object) -> None:
            raise OSError("disk full")

        journal._write_records = broken  # type: ignore[method-assign]
        with pytest.raises(JournalError, match="disk full"):
            await s.select_destinations(_spec("vm-1"))
        assert journal.failed is not None
        with pytest.raises(JournalError, match="disk full"):  # fail-stop: never a success
            await s.update_host(report("h2", 1))
    core = SchedulerCore(CONFIG)
    recovered = backend.journal()
    recovered.open(core)
    recovered.close_now()
    assert core.claims() == {}, "the refused claim is not in the journal"
    assert core.table.count == 1
