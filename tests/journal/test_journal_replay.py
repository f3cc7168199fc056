"""Recovery: snapshot plus replay gives back the same state, however often it runs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from journal_workload import StepClock, random_workload, report

from actorsched import InvalidRequest, RequestSpec, Scheduler, SchedulerConfig, ServerGroup
from actorsched.core import SchedulerCore
from actorsched.core.ledger import request_fingerprint
from actorsched.journal import SqliteJournal
from actorsched.journal.records import CLAIM, Record, apply

CONFIG = SchedulerConfig(claim_timeout=40.0, service_down_time=1e9, host_subset_size=3)


async def _run_workload(
    path: Path, seed: int, steps: int, snapshot_every: int, *, closing_snapshot: bool = True
) -> tuple[str, int]:
    """Run the workload; return the digest and how many records follow the last snapshot.

    Without ``closing_snapshot`` the scheduler stops as after kill -9 would
    leave it: a few late reports are journaled with no snapshot after them,
    so recovery has to replay records.
    """
    clock = StepClock()
    journal = SqliteJournal(path, snapshot_every=snapshot_every)
    async with Scheduler(CONFIG, journal=journal, clock=clock) as s:
        await random_workload(s, random.Random(seed), steps)
        assert len(s.core.ledger) > 0, "the workload should leave some claims"
        if not closing_snapshot:
            journal.snapshot_every = 10**9  # no periodic snapshot after the late reports
            for i in range(3):
                assert await s.update_host(report(f"late{i}", 1))
        digest = s.core.digest()
        pending = journal._since_snapshot
        if not closing_snapshot:
            assert pending >= 3
            journal._since_snapshot = 0  # no closing snapshot, as after kill -9
    return digest, pending


def _recover(path: Path) -> tuple[str, SqliteJournal]:
    core = SchedulerCore(CONFIG)
    journal = SqliteJournal(path)
    journal.open(core)
    journal.close_now()
    return core.digest(), journal


@pytest.mark.parametrize(
    ("seed", "snapshot_every"),
    [(1, 1_000_000), (2, 1_000_000), (3, 7), (4, 50)],
)
async def test_replay_gives_the_same_digest_after_a_random_workload(
    tmp_path: Path, seed: int, snapshot_every: int
) -> None:
    path = tmp_path / "j.sqlite"
    before, pending = await _run_workload(path, seed, 400, snapshot_every, closing_snapshot=False)
    async with Scheduler(CONFIG, journal=path) as again:
        assert again.core.digest() == before
        assert again.journal is not None
        recovery = again.journal.recovery
        assert recovery is not None
        # every record after the last periodic snapshot was replayed
        assert recovery.replayed == pending > 0
        if snapshot_every == 1_000_000:
            assert recovery.snapshot_seq == 0  # no snapshot at all: records alone
            assert recovery.replayed > 100
        else:
            assert recovery.snapshot_seq > 0  # a periodic snapshot, then the records after it


async def test_replay_without_the_closing_snapshot_gives_the_same_digest(tmp_path: Path) -> None:
    # a crash leaves no closing snapshot: recovery must come from the records alone
    path = tmp_path / "j.sqlite"
    clock = StepClock()
    core_digest = ""
    journal = SqliteJournal(path, snapshot_every=1_000_000)
    s = Scheduler(CONFIG, journal=journal, clock=clock)
    await s.start()
    await random_workload(s, random.Random(9), 300)
    core_digest = s.core.digest()
    journal._since_snapshot = 0  # no closing snapshot, as after kill -9
    await s.stop()
    digest, recovered = _recover(path)
    assert recovered.recovery is not None
    assert recovered.recovery.snapshot_seq == 0
    assert recovered.recovery.replayed > 100
    assert digest == core_digest


async def test_replaying_twice_gives_the_same_state(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    before, pending = await _run_workload(path, 5, 300, 40, closing_snapshot=False)
    first, first_journal = _recover(path)
    second, second_journal = _recover(path)
    assert first == second == before
    # replay does not write: the second recovery goes through the same records
    for journal in (first_journal, second_journal):
        assert journal.recovery is not None
        assert journal.recovery.snapshot_seq > 0  # snapshot_every=40: a periodic one
        assert journal.recovery.replayed == pending > 0


async def test_a_recovered_scheduler_goes_on_journaling(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    await _run_workload(path, 6, 200, 30)  # with its closing snapshot
    async with Scheduler(CONFIG, journal=SqliteJournal(path, snapshot_every=30)) as s:
        await random_workload(s, random.Random(7), 200)
        after = s.core.digest()
    digest, _ = _recover(path)
    assert digest == after


async def test_redelivered_request_after_restart_returns_the_same_hosts(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    spec = RequestSpec(instance_uuids=["a", "b", "c"], memory_mb=1024, vcpus=1, disk_gb=1)
    async with Scheduler(CONFIG, journal=path) as s:
        for i in range(6):
            await s.update_host(report(f"h{i}", 1))
        first = await s.select_destinations(spec)
    async with Scheduler(CONFIG, journal=path) as s:
        assert s.claim_count == 3
        assert await s.select_destinations(spec) == first
        assert s.claim_count == 3


async def test_stale_report_is_not_journaled(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=path) as s:
        assert await s.update_host(report("h1", 2))
        assert not await s.update_host(report("h1", 2, memory_mb_used=9999))
        journal = s.journal
        assert journal is not None
        assert journal.stats.records == 1


async def test_recovering_into_a_core_with_state_is_refused(tmp_path: Path) -> None:
    from actorsched.journal import JournalError

    core = SchedulerCore(CONFIG)
    core.update_host(report("h1", 1), 0.0)
    with pytest.raises(JournalError, match="empty core"):
        SqliteJournal(tmp_path / "j.sqlite").open(core)


async def test_snapshot_keeps_release_credits_and_confirmed_claims(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    spec = RequestSpec(instance_uuids=["x", "y"], memory_mb=1024, vcpus=1, disk_gb=5)
    async with Scheduler(CONFIG, journal=SqliteJournal(path, snapshot_every=1)) as s:
        await s.update_host(report("h1", 1, instances=["x", "y"]))
        await s.select_destinations(spec)  # both confirmed at once: h1 lists them
        assert await s.release("x")  # h1 still lists x: credited back
        assert s.core.ledger.released
        before = s.core.digest()
        states = await s.host_states()
    async with Scheduler(CONFIG, journal=path) as again:
        assert again.journal is not None
        assert again.journal.recovery is not None
        assert again.journal.recovery.replayed == 0  # all from the snapshot
        assert again.core.digest() == before
        assert await again.host_states() == states
        assert again.core.claims() == {"y": ("h1", True)}


def test_claim_records_rely_on_these_request_defaults() -> None:
    # Claim records leave out the spec fields left at their defaults, and
    # replay fills the defaults in again: changing one of these would change
    # what old journals replay to, so it needs a new journal SCHEMA_VERSION.
    defaults = {
        name: field.get_default(call_default_factory=True)
        for name, field in RequestSpec.model_fields.items()
        if not field.is_required()
    }
    assert defaults == {
        "availability_zone": None,
        "required_traits": [],
        "forbidden_traits": [],
        "group": None,
        "same_host": [],
        "different_host": [],
        "ignore_hosts": [],
        # issue 14: new fields, absent from older records, which replay them as
        # these defaults (what those requests meant)
        "flavor_name": None,
        "extra_specs": {},
        "project_id": None,
        "force_hosts": [],
        "force_nodes": [],
        "requested_destination": None,
        # issue 16: how to ask (not in the fingerprint; replay never waits)
        "priority": 0,
        "wait": None,
        # what ImagePropertiesFilter reads, absent from older records (no image asked)
        "image_properties": {},
        # what IsolatedHostsFilter and JsonFilter read, absent from older records
        "image_id": None,
        "query": None,
        # issue 24: who placed it, absent from older records (nobody's claims then)
        "owner": None,
    }
    group_defaults = {
        name: field.get_default(call_default_factory=True)
        for name, field in ServerGroup.model_fields.items()
        if not field.is_required()
    }
    assert group_defaults == {"max_server_per_host": None, "hosts": [], "members": []}


@pytest.mark.parametrize("snapshot_every", [1, 1_000_000])  # from a snapshot, from records
async def test_a_repeat_with_another_request_is_refused_after_restart(
    tmp_path: Path, snapshot_every: int
) -> None:
    path = tmp_path / "j.sqlite"
    spec = RequestSpec(instance_uuids=["a", "b"], memory_mb=1024, vcpus=1, disk_gb=1)
    async with Scheduler(CONFIG, journal=SqliteJournal(path, snapshot_every=snapshot_every)) as s:
        await s.update_host(report("h1", 1))
        first = await s.select_destinations(spec)
    async with Scheduler(CONFIG, journal=path) as s:
        assert await s.select_destinations(spec) == first
        bigger = spec.model_copy(update={"memory_mb": 2**30})
        with pytest.raises(InvalidRequest, match="memory_mb 1024 then, 1073741824 now"):
            await s.select_destinations(bigger)


def test_a_claim_record_without_a_fingerprint_replays_with_its_specs() -> None:
    # Claim records have never stored a fingerprint: replay computes it from the
    # spec the record keeps, so a record written before fingerprints existed
    # gives its claims the fingerprint they would have had.
    core = SchedulerCore(CONFIG)
    core.update_host(report("h1", 1), 0.0)
    body = (
        '{"spec":{"instance_uuids":["a"],"memory_mb":512,"vcpus":1,"disk_gb":1,'
        '"required_traits":["SSD","AVX"]},'
        '"selections":[{"instance_uuid":"a","host":"h1","alternates":[]}]}'
    )
    apply(core, Record(CLAIM, 1.0, body))
    spec = RequestSpec.model_validate_json(body[8 : body.index(',"selections"')])
    assert core.ledger.claims["a"].fingerprint == request_fingerprint(spec)
    assert core.select_destinations(spec, now=2.0)[0].host == "h1"
    with pytest.raises(InvalidRequest, match='required_traits \\["AVX", "SSD"\\] then, none now'):
        core.select_destinations(spec.model_copy(update={"required_traits": []}), now=2.0)
