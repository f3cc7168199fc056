"""Snapshot format 8: each host's reserved vCPUs and disk and its Placement units
survive encode/restore and a restart (from a snapshot and from records, SQLite and
PostgreSQL); a format 7 snapshot still restores (nothing reserved, no units); a
report without the new fields is recorded as before them; damaged new fields are
refused by name."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_backends import BACKENDS, Backend, make_backend
from journal_workload import report

from actorsched import NoValidHost, RequestSpec, Scheduler, SchedulerConfig
from actorsched.actor import Envelope
from actorsched.core import Command, SchedulerCore, UpdateHost
from actorsched.core.host_facts import FACT_FIELDS
from actorsched.core.image import capture
from actorsched.core.inventory import UNIT_FIELDS
from actorsched.journal.records import records_of
from actorsched.journal.snapshot import SNAPSHOT_FORMAT, encode, restore
from actorsched.models import Units

CONFIG = SchedulerConfig(seed=1, service_down_time=1e9, cpu_allocation_ratio=4.0)
NEW_COLUMNS = ("vcpus_reserved", "local_gb_reserved", *UNIT_FIELDS)


def _spec(uuid: str, **fields: object) -> RequestSpec:
    return RequestSpec.model_validate(
        {"instance_uuids": [uuid], "memory_mb": 64, "vcpus": 1, "disk_gb": 1, **fields}
    )


def _reports() -> list[Any]:
    return [
        report("plain", 1),
        report("reserving", 1, vcpus_reserved=6, local_gb_reserved=150),
        report("bounded", 1, vcpus_units=Units(max_unit=2), memory_mb_units=Units(max_unit=8192)),
        report("stepped", 1, vcpus_units=Units(min_unit=2, step_size=2)),
        report("disk", 1, local_gb_units=Units(step_size=10, max_unit=50)),
    ]


def _core() -> SchedulerCore:
    core = SchedulerCore(CONFIG)
    for r in _reports():
        core.update_host(r, 1.0)
    core.select_destinations(_spec("vm1", vcpus=2), 2.0)
    return core


def _restored(text: str) -> SchedulerCore:
    again = SchedulerCore(CONFIG)
    restore(again, text)
    return again


def test_reserved_figures_and_units_round_trip() -> None:
    core = _core()
    data = json.loads(encode(capture(core)))
    assert data["format"] == SNAPSHOT_FORMAT >= 8
    hosts = data["hosts"]
    at = hosts["host"].index
    assert hosts["vcpus_reserved"][at("reserving")] == 6
    assert hosts["local_gb_reserved"][at("reserving")] == 150
    assert hosts["vcpus_units"][at("stepped")] == {"min_unit": 2, "max_unit": None, "step_size": 2}
    assert hosts["memory_mb_units"][at("bounded")] == {
        "min_unit": 1,
        "max_unit": 8192,
        "step_size": 1,
    }
    assert hosts["vcpus_units"][at("plain")] is None  # Placement's defaults
    again = _restored(json.dumps(data))
    assert again.digest() == core.digest()  # the digest covers reserved figures and units
    assert again.host_states() == core.host_states()
    table, kept = again.table, core.table
    assert (table.units, table.inventory, table.unit_steps) == (
        kept.units,
        kept.inventory,
        kept.unit_steps,
    )
    assert [f.name for f in again.filters] == [f.name for f in core.filters]
    assert "PlacementUnits" in [f.name for f in again.filters]
    # the rules hold after the restore as before it
    others = ["plain", "reserving", "bounded", "disk"]
    for state in (core, again):
        with pytest.raises(NoValidHost, match="VCPU step_size 2 refuses 3 on 1 host"):
            state.select_destinations(_spec("vm2", vcpus=3, ignore_hosts=others), 3.0)


def test_a_restored_host_takes_what_placement_allows() -> None:
    again = _restored(encode(capture(_core())))
    # 3 vCPUs and 15 GB: plain has 8 x 4 = 32 vCPUs, reserving (8 - 6) x 4 = 8 and
    # 200 - 150 - 10 = 40 GB; stepped refuses 3 vCPUs, bounded's max_unit is 2
    placed = again.select_destinations(_spec("vm3", vcpus=3, disk_gb=15), 3.0)
    assert placed[0].host in ("plain", "reserving")  # disk: 15 is no step of 10
    with pytest.raises(NoValidHost, match="DiskFilter removed 5"):
        again.select_destinations(_spec("vm4", disk_gb=201), 3.0)


def _format_7(core: SchedulerCore) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(encode(capture(core)))
    for column in ("vcpus_reserved", "local_gb_reserved"):
        assert set(data["hosts"].pop(column)) <= {0}
    for column in UNIT_FIELDS:
        assert set(data["hosts"].pop(column)) <= {None}
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 7
    return data


def test_a_format_7_snapshot_restores_with_nothing_reserved_and_no_units() -> None:
    core = SchedulerCore(CONFIG)
    core.update_host(report("a", 1), 1.0)
    core.update_host(report("b", 1), 1.0)
    core.select_destinations(_spec("vm1"), 2.0)
    again = _restored(json.dumps(_format_7(core)))
    assert again.digest() == core.digest()
    assert again.table.units == {}
    state = again.host_states()["a"]
    assert (state.vcpus_reserved, state.local_gb_reserved) == (0, 0)


def test_a_format_7_snapshot_with_format_8_columns_is_refused() -> None:
    data = json.loads(encode(capture(_core())))
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 7
    with pytest.raises(ValueError, match="snapshot hosts must have exactly the columns"):
        restore(SchedulerCore(CONFIG), json.dumps(data))


def _host(data: dict[str, Any], host: str, column: str, value: Any) -> None:
    data["hosts"][column][data["hosts"]["host"].index(host)] = value


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: _host(d, "stepped", "vcpus_units", "2"), r"vcpus_units\n"),
        (lambda d: _host(d, "stepped", "vcpus_units", {"step_size": 0}), "vcpus_units.step_size"),
        (
            lambda d: _host(d, "stepped", "vcpus_units", {"min_unit": 3, "max_unit": 2}),
            "min_unit 3 is above max_unit 2",
        ),
        (
            lambda d: _host(d, "stepped", "vcpus_units", {"min_units": 3}),
            r"vcpus_units.min_units\n",
        ),
        (lambda d: _host(d, "plain", "vcpus_reserved", 9), "vcpus_reserved 9 is above vcpus 8"),
        (lambda d: _host(d, "plain", "local_gb_reserved", "1"), r"local_gb_reserved\n"),
        (
            lambda d: d["hosts"].pop("local_gb_units"),
            "snapshot hosts must have exactly the columns",
        ),
        (lambda d: d["hosts"]["vcpus_reserved"].pop(), "columns must be lists of one length"),
        (lambda d: d.update(format=SNAPSHOT_FORMAT + 1), "unknown snapshot format"),
    ],
)
def test_damaged_new_fields_are_refused_by_name(damage: Any, message: str) -> None:
    data = json.loads(encode(capture(_core())))
    damage(data)
    with pytest.raises(ValueError, match=message):
        restore(SchedulerCore(CONFIG), json.dumps(data))


# -- journal records ---------------------------------------------------------------------


async def test_report_records_carry_the_new_fields_and_leave_them_out_when_unset() -> None:
    plain = report("h0", 1)
    given = report("h1", 1, vcpus_reserved=2, local_gb_units=Units(step_size=10))

    def applied(command: Command[Any], result: object) -> Envelope:
        return Envelope(command, asyncio.get_running_loop().create_future(), 1.0, result)

    first, second = records_of([applied(UpdateHost(plain), True), applied(UpdateHost(given), True)])
    body = json.loads(first.body)
    assert body == plain.model_dump(exclude=set(FACT_FIELDS))
    assert not set(NEW_COLUMNS) & set(body)  # a record as before these fields
    again = json.loads(second.body)
    assert again["vcpus_reserved"] == 2
    assert again["local_gb_units"] == {"min_unit": 1, "max_unit": None, "step_size": 10}
    assert "vcpus_units" not in again


# -- a restart, on both backends -------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    made.cleanup()


@pytest.mark.parametrize("source", ["records", "snapshot"])
async def test_reserved_figures_and_units_survive_a_restart(backend: Backend, source: str) -> None:
    journal = backend.journal(10**6)
    async with Scheduler(CONFIG, journal=journal) as s:
        await s.update_hosts(_reports())  # few: the one-report path
        await s.update_host(report("stepped", 2, vcpus_units=Units(step_size=2)))
        await s.update_host(report("bounded", 2))  # its units gone
        await s.select_destinations(_spec("vm1", vcpus=2))
        before = s.core.digest()
        if source == "records":
            journal._since_snapshot = 0  # no closing snapshot, as after kill -9
    async with Scheduler(CONFIG, journal=backend.journal(10**6)) as again:
        assert again.journal is not None
        recovery = again.journal.recovery
        assert recovery is not None
        if source == "records":
            assert (recovery.snapshot_seq, recovery.replayed > 0) == (0, True)
        else:
            assert (recovery.snapshot_seq > 0, recovery.replayed) == (True, 0)
        assert again.core.digest() == before
        assert again.core.table.inventory == {
            again.core.table.row_of["disk"]: (16384, 8, 50, 0, 0),
            again.core.table.row_of["reserving"]: (16384, 8, 200, 6, 150),
        }
        with pytest.raises(NoValidHost, match="VCPU step_size 2 refuses 1 on 1 host"):
            await again.select_destinations(
                _spec("vm2", ignore_hosts=["plain", "reserving", "bounded", "disk"])
            )
