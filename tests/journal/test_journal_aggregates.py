"""Host aggregates and reported ratios survive a restart: SQLite and PostgreSQL, from a
snapshot and from records, and a record replayed twice changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_backends import BACKENDS, Backend, make_backend
from journal_workload import report

from actorsched import InvalidRequest, RequestSpec, Scheduler, SchedulerConfig
from actorsched.core import SchedulerCore
from actorsched.journal.records import Record, apply
from actorsched.models import AGGREGATE_FILTERS, BUILTIN_FILTERS

CONFIG = SchedulerConfig(
    seed=1,
    service_down_time=1e9,
    # the Aggregate* resource filters in place of the plain ones (beside them, the
    # host's own ratio bounds the aggregate's, as in Nova 18)
    enabled_filters=[
        *(f for f in BUILTIN_FILTERS if f not in ("RamFilter", "CoreFilter", "DiskFilter")),
        *AGGREGATE_FILTERS,
    ],
)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    made.cleanup()


async def _build(s: Scheduler) -> None:
    """Aggregates made, changed and deleted around hosts that report ratios."""
    for i in range(4):
        await s.update_host(report(f"h{i}", 1))
    await s.update_host(report("h0", 2, ram_allocation_ratio=1.5, cpu_allocation_ratio=8.0))
    await s.create_aggregate("az1", {"availability_zone": "az1"}, ["h0", "h1", "later"])
    await s.create_aggregate("fast", {"ssd": "true", "ram_allocation_ratio": "2.5"}, ["h1"])
    await s.update_aggregate("fast", {"ssd": None, "cpu": "9"})
    await s.add_host_to_aggregate("fast", "h2")
    await s.remove_host_from_aggregate("az1", "h1")
    await s.create_aggregate("gone")
    assert await s.delete_aggregate("gone")
    await s.create_aggregate("tenants", {"filter_tenant_id": "p1"}, ["h3"])
    await s.select_destinations(
        RequestSpec(
            instance_uuids=["vm"],
            memory_mb=64,
            vcpus=1,
            disk_gb=1,
            project_id="p1",
            extra_specs={"cpu": ">= 5"},
        )
    )


@pytest.mark.parametrize("snapshot_every", [1_000_000, 3], ids=["records", "snapshot"])
async def test_aggregates_and_ratios_survive_a_restart(
    backend: Backend, snapshot_every: int
) -> None:
    async with Scheduler(CONFIG, journal=backend.journal(snapshot_every)) as s:
        await _build(s)
        before = s.core.digest()
        states = await s.host_states()
        aggregates = await s.aggregates()
    assert states["h0"].availability_zone == "az1"
    assert (states["h0"].ram_allocation_ratio, states["h0"].cpu_allocation_ratio) == (1.5, 8.0)
    assert states["h1"].ram_allocation_ratio == 2.5  # AggregateRamFilter on
    async with Scheduler(CONFIG, journal=backend.journal(snapshot_every)) as again:
        assert again.journal is not None
        assert again.journal.recovery is not None
        if snapshot_every == 3:
            assert again.journal.recovery.snapshot_seq > 0
        assert again.core.digest() == before
        assert await again.host_states() == states
        assert await again.aggregates() == aggregates
        # the host named before it reported joins its zone when it reports
        await again.update_host(report("later", 1))
        assert (await again.host_states())["later"].availability_zone == "az1"


async def test_a_refused_admin_command_makes_no_record(backend: Backend) -> None:
    async with Scheduler(CONFIG, journal=backend.journal()) as s:
        await s.create_aggregate("a", {}, ["h1"])
        seqs = backend.record_seqs()
        with pytest.raises(InvalidRequest, match="already in host aggregate"):
            await s.add_host_to_aggregate("a", "h1")
        with pytest.raises(InvalidRequest, match="no host aggregate named"):
            await s.update_aggregate("b", {"k": "v"})
        assert await s.delete_aggregate("b") is False
        assert backend.record_seqs() == seqs


def test_aggregate_records_replayed_twice_change_nothing() -> None:
    core = SchedulerCore(CONFIG)
    records = [
        Record("aggregate_create", 1.0, '{"name":"a","metadata":{"k":"v"},"hosts":["h1"]}'),
        Record("aggregate_add_host", 1.0, '{"name":"a","host":"h2"}'),
        Record("aggregate_update", 1.0, '{"name":"a","metadata":{"k":null,"x":"1"}}'),
        Record("aggregate_remove_host", 1.0, '{"name":"a","host":"h1"}'),
    ]
    for record in records:
        apply(core, record)
    once = core.digest()
    for record in records:
        apply(core, record)
    assert core.digest() == once
    [aggregate] = core.aggregates.aggregates()
    assert (aggregate.hosts, aggregate.metadata) == (["h2"], {"x": "1"})
    apply(core, Record("aggregate_remove_host", 1.0, '{"name":"a","host":"h2"}'))
    apply(core, Record("aggregate_delete", 1.0, '{"name":"a"}'))
    apply(core, Record("aggregate_delete", 1.0, '{"name":"a"}'))
    assert core.aggregates.aggregates() == []
    with pytest.raises(ValueError, match="aggregate_add_host record does not parse"):
        apply(core, Record("aggregate_add_host", 1.0, '{"name":"a"}'))
