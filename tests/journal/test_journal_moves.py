"""Moves survive a restart: SQLite and PostgreSQL, from records and from a snapshot
(format 5 keeps the open moves); a format 4 snapshot still restores; a move record
replayed twice changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_report, make_spec
from journal_backends import BACKENDS, Backend, make_backend
from journal_workload import report

from actorsched import (
    InvalidRequest,
    MaxRetriesExceeded,
    RequestSpec,
    Scheduler,
    SchedulerConfig,
)
from actorsched.core import SchedulerCore
from actorsched.core.image import capture
from actorsched.journal.records import Record, apply
from actorsched.journal.snapshot import encode, restore

CONFIG = SchedulerConfig(seed=1, service_down_time=1e9)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    made.cleanup()


def _spec(uuid: str, memory_mb: int = 1024) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=memory_mb, vcpus=1, disk_gb=1)


async def _build(s: Scheduler) -> None:
    """Open moves of every kind, and moves confirmed, reverted and settled by reports."""
    for i in range(4):
        await s.update_host(report(f"h{i}", 1))
    for n in range(6):
        await s.select_destinations(_spec(f"vm{n}"))
    await s.move("vm0", "mig0")  # open: a migration
    await s.move("vm1", "mig1", _spec("vm1", 4096))  # open: a resize
    await s.move("vm2", "mig2", _spec("vm2", 2048), allow_same_host=True)
    await s.move("vm3", "mig3")
    assert await s.confirm_move("mig3")
    await s.move("vm4", "mig4")
    assert await s.revert_move("mig4")
    host = (await s.where("vm5")).host
    assert host is not None
    await s.move("vm5", "mig5", evacuate=True)
    await s.update_host(report(host, 2))  # the evacuated host is back: the hold dropped


@pytest.mark.parametrize("snapshot_every", [1_000_000, 3], ids=["records", "snapshot"])
async def test_moves_survive_a_restart(backend: Backend, snapshot_every: int) -> None:
    async with Scheduler(CONFIG, journal=backend.journal(snapshot_every)) as s:
        await _build(s)
        before = s.core.digest()
        states = await s.host_states()
        claims = s.core.claims()
    assert set(s.core.ledger.migrations) == {"mig0", "mig1", "mig2"}
    assert {"mig0", "mig1", "mig2"} <= set(claims)
    async with Scheduler(CONFIG, journal=backend.journal(snapshot_every)) as again:
        assert again.journal is not None
        assert again.journal.recovery is not None
        if snapshot_every == 3:
            assert again.journal.recovery.snapshot_seq > 0
        assert again.core.digest() == before
        assert await again.host_states() == states
        assert set(again.core.ledger.migrations) == {"mig0", "mig1", "mig2"}
        # still the same moves: a redelivery answers alike, another is refused
        first = again.core.ledger.migrations["mig1"].selection
        assert await again.move("vm1", "mig1", _spec("vm1", 4096)) == first
        with pytest.raises(InvalidRequest, match="memory_mb"):
            await again.move("vm1", "mig1", _spec("vm1", 1024))
        assert await again.revert_move("mig1")
        assert (await again.where("vm1")).host == claims["mig1"][0]
        assert await again.confirm_move("mig0")
        assert await again.confirm_move("mig2")
        assert not again.core.ledger.migrations


def _moved_core() -> SchedulerCore:
    core = SchedulerCore(SchedulerConfig(seed=1))
    core.update_host(make_report("a", 1, memory_mb_used=512, instances=["vm1"]), 1.0)
    core.update_host(make_report("b", 1), 1.0)
    core.select_destinations(make_spec("vm1", force_hosts=["a"]), 2.0)  # confirmed
    core.select_destinations(make_spec("vm2", force_hosts=["a"]), 2.0)  # assumed
    core.move("vm1", "m1", None, 3.0)
    core.move("vm2", "m2", make_spec("vm2", memory_mb=1024), 3.0, allow_same_host=True)
    return core


def test_a_snapshot_keeps_the_holds_and_their_states() -> None:
    core = _moved_core()
    assert core.ledger.claims["m1"].confirmed
    text = encode(capture(core))
    assert [m["migration_uuid"] for m in json.loads(text)["moves"]] == ["m1", "m2"]
    again = SchedulerCore(SchedulerConfig(seed=1))
    restore(again, text)
    assert again.digest() == core.digest()
    assert again.host_states() == core.host_states()
    assert again.ledger.claims["m1"].confirmed
    assert again.ledger.moving == {"vm1": "m1", "vm2": "m2"}


def test_a_format_4_snapshot_still_restores() -> None:
    core = SchedulerCore(SchedulerConfig(seed=1))
    core.update_host(make_report("a", 1), 1.0)
    core.select_destinations(make_spec("vm1"), 2.0)
    data = json.loads(encode(capture(core)))
    assert data.pop("moves") == []
    assert data.pop("host_facts") == []
    assert data["hosts"].pop("host_facts") == [None]
    for column in ("vcpus_reserved", "local_gb_reserved"):  # format 8's
        assert set(data["hosts"].pop(column)) <= {0}
    for column in ("memory_mb_units", "vcpus_units", "local_gb_units"):
        assert set(data["hosts"].pop(column)) <= {None}
    assert data["claims"].pop("priority") == [0]
    assert data["claims"].pop("preempted") == [[]]
    del data["requests"]
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 4
    again = SchedulerCore(SchedulerConfig(seed=1))
    restore(again, json.dumps(data))
    assert again.digest() == core.digest()


def test_a_move_record_replayed_twice_changes_nothing() -> None:
    core = SchedulerCore(SchedulerConfig(seed=1))
    core.update_host(make_report("a", 1), 1.0)
    core.update_host(make_report("b", 1), 1.0)
    core.select_destinations(make_spec("vm1", force_hosts=["a"]), 2.0)
    body = json.dumps(
        {
            "instance_uuid": "vm1",
            "migration_uuid": "m1",
            "selection": {"instance_uuid": "vm1", "host": "b", "alternates": []},
        }
    )
    apply(core, Record("move", 3.0, body))
    digest = core.digest()
    assert core.claims() == {"m1": ("a", False), "vm1": ("b", False)}
    apply(core, Record("move", 3.0, body))
    assert core.digest() == digest
    apply(core, Record("move_confirm", 4.0, json.dumps("m1")))
    assert core.claims() == {"vm1": ("b", False)}
    apply(core, Record("move_confirm", 4.0, json.dumps("m1")))
    assert core.claims() == {"vm1": ("b", False)}


@pytest.mark.parametrize("snapshot_every", [1_000_000, 2], ids=["records", "snapshot"])
async def test_reschedules_survive_a_restart(backend: Backend, snapshot_every: int) -> None:
    config = SchedulerConfig(seed=1, service_down_time=1e9, max_attempts=3)
    async with Scheduler(config, journal=backend.journal(snapshot_every)) as s:
        for i in range(3):
            await s.update_host(report(f"h{i}", 1, memory_mb_used=512 + 100 * i))
        [first] = await s.select_destinations(_spec("vm1"))
        [other] = await s.select_destinations(_spec("vm2"))
        assert first.alternates == ["h1", "h2"]
        again = await s.reschedule("vm1", first.host)
        assert (again.host, again.alternates) == ("h1", ["h2"])
        await s.reschedule("vm2", other.host)
        await s.reschedule("vm2", (await s.where("vm2")).host or "")
        with pytest.raises(MaxRetriesExceeded):
            await s.reschedule("vm2", (await s.where("vm2")).host or "")
        before = s.core.digest()
        claims = s.core.claims()
    assert "vm2" not in claims
    async with Scheduler(config, journal=backend.journal(snapshot_every)) as again_s:
        assert again_s.core.digest() == before
        assert again_s.core.claims() == claims
        last = await again_s.reschedule("vm1", "h1")
        assert (last.host, last.alternates) == ("h2", [])
