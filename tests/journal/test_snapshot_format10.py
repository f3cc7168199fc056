"""Snapshot format 10: each claim's owner (issue 24) survives a snapshot, a journal
replay and a move's hold; a format 9 snapshot still restores, its claims owned by
nobody (so only an unscoped caller may act on them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from journal_workload import report

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.core import Release, SchedulerCore
from actorsched.core.image import capture
from actorsched.errors import Forbidden
from actorsched.journal import SqliteJournal
from actorsched.journal.snapshot import SNAPSHOT_FORMAT, encode, restore

CONFIG = SchedulerConfig(seed=1, service_down_time=1e9)


def _spec(uuid: str, owner: str | None) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=64, vcpus=1, disk_gb=1, owner=owner)


def _core() -> SchedulerCore:
    core = SchedulerCore(CONFIG)
    for name in ("a", "b", "c"):
        core.update_host(report(name, 1), 1.0)
    core.select_destinations(_spec("vm-a", "tenant-a"), 2.0)
    core.select_destinations(_spec("vm-b", "tenant-b"), 2.0)
    core.select_destinations(_spec("vm-e", None), 2.0)
    core.move("vm-a", "mig-a", None, 3.0)
    return core


def _owners(core: SchedulerCore) -> dict[str, str | None]:
    return {uuid: claim.owner for uuid, claim in core.ledger.claims.items()}


def test_owners_round_trip_with_a_moves_hold() -> None:
    core = _core()
    data = json.loads(encode(capture(core)))
    assert data["format"] == SNAPSHOT_FORMAT >= 10
    again = SchedulerCore(CONFIG)
    restore(again, json.dumps(data))
    assert (
        _owners(again)
        == _owners(core)
        == {
            "vm-a": "tenant-a",
            "mig-a": "tenant-a",
            "vm-b": "tenant-b",
            "vm-e": None,
        }
    )
    assert again.digest() == core.digest()
    with pytest.raises(Forbidden):
        again.handle(Release("vm-a", caller="tenant-b"), 4.0)


def _format_9(core: SchedulerCore) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(encode(capture(core)))
    data["claims"].pop("owner")
    data["claims"].pop("image")  # format 11's
    data.pop("images")
    data["format"] = 9
    return data


def test_a_format_9_snapshot_restores_with_claims_owned_by_nobody() -> None:
    core = _core()
    again = SchedulerCore(CONFIG)
    restore(again, json.dumps(_format_9(core)))
    assert set(_owners(again).values()) == {None}
    assert sorted(again.claims()) == sorted(core.claims())
    with pytest.raises(Forbidden):  # nobody's: a tenant may not take it over
        again.handle(Release("vm-a", caller="tenant-a"), 4.0)
    assert again.handle(Release("vm-a"), 4.0) is True


def test_an_owner_is_not_text_is_refused_by_name() -> None:
    data = json.loads(encode(capture(_core())))
    data["claims"]["owner"][0] = 7
    with pytest.raises(ValueError, match="has an owner that is not text"):
        restore(SchedulerCore(CONFIG), json.dumps(data))


async def test_owners_survive_a_journal_replay(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    async with Scheduler(CONFIG, journal=SqliteJournal(path, snapshot_every=10_000)) as s:
        for name in ("a", "b"):
            await s.update_host(report(name, 1))
        await s.select_destinations(_spec("vm-a", "tenant-a"))
        await s.move("vm-a", "mig-a")
    async with Scheduler(CONFIG, journal=SqliteJournal(path, snapshot_every=10_000)) as s:
        page = await s.claims()
        assert {c.instance_uuid: c.owner for c in page.claims} == {
            "vm-a": "tenant-a",
            "mig-a": "tenant-a",
        }
