"""The one list of commands: every layer knows each command by the names core.COMMANDS gives it."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from typing import Any

import pytest
from conftest import make_core, make_report, make_spec

from actorsched import Scheduler
from actorsched.actor import Envelope
from actorsched.amqp.protocol import BATCH, OPERATIONS
from actorsched.core import (
    COMMANDS,
    AddHostToAggregate,
    Command,
    ConfirmMove,
    CreateAggregate,
    DeleteAggregate,
    GetAggregates,
    GetClaims,
    GetHostStates,
    Locate,
    Move,
    NovaInstances,
    PlanPlacement,
    Release,
    RemoveHost,
    RemoveHostFromAggregate,
    Reschedule,
    RevertMove,
    SelectDestinations,
    UpdateAggregate,
    UpdateHost,
    UpdateHosts,
)
from actorsched.errors import InvalidRequest
from actorsched.journal.records import KINDS, count_changes, records_of


def test_every_command_is_listed_once_with_a_scheduler_method() -> None:
    classes = [c.command for c in COMMANDS]
    assert len(classes) == len(set(classes))
    assert set(classes) == {c for c in vars_of_core() if inspect.isclass(c)}
    for entry in COMMANDS:
        method = getattr(Scheduler, entry.method)
        assert inspect.iscoroutinefunction(method), entry.method
        assert dataclasses.is_dataclass(entry.command)
        assert entry.command.__dataclass_params__.frozen


def vars_of_core() -> list[Any]:
    import actorsched.core.commands as module

    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and issubclass(value, Command) and value is not Command
    ]


def test_the_amqp_operations_are_the_listed_ones_and_a_batch() -> None:
    own = {c.operation for c in COMMANDS if c.operation}
    assert set(OPERATIONS) == own | {BATCH}


def _applied(core_command: Command[Any]) -> Envelope:
    core = make_core()
    core.update_host(make_report("h1", instances=[]), 1.0)
    core.select_destinations(make_spec("vm-held"), 1.0)
    core.create_aggregate("agg-held", {"ssd": "true"}, ["h1"])
    core.create_aggregate("agg-empty")
    core.select_destinations(make_spec("vm-moving"), 1.0)
    core.move("vm-moving", "mig-held", None, 1.0, allow_same_host=True)
    core.update_host(make_report("h0", memory_mb=65536), 1.0)
    assert core.select_destinations(make_spec("vm-failing"), 1.0)[0].alternates == ["h1"]
    envelope = Envelope(core_command, asyncio.get_running_loop().create_future())
    envelope.now = 2.0
    envelope.result = core.handle(core_command, 2.0)
    return envelope


_ONE_OF_EACH: dict[type[Command[Any]], Command[Any]] = {
    UpdateHost: UpdateHost(make_report("h2")),
    UpdateHosts: UpdateHosts((make_report("h3"), make_report("h4"))),
    SelectDestinations: SelectDestinations(make_spec("vm-new")),
    Release: Release("vm-held"),
    RemoveHost: RemoveHost("h1"),
    GetHostStates: GetHostStates(),
    PlanPlacement: PlanPlacement(make_spec("vm-planned")),
    GetClaims: GetClaims(),
    Locate: Locate("vm-held"),
    CreateAggregate: CreateAggregate("agg-new", {"k": "v"}, ("h1",)),
    UpdateAggregate: UpdateAggregate("agg-held", {"ssd": None}),
    DeleteAggregate: DeleteAggregate("agg-empty"),
    AddHostToAggregate: AddHostToAggregate("agg-held", "h9"),
    RemoveHostFromAggregate: RemoveHostFromAggregate("agg-held", "h1"),
    GetAggregates: GetAggregates(),
    Move: Move("vm-held", "mig-new", allow_same_host=True),
    ConfirmMove: ConfirmMove("mig-held"),
    RevertMove: RevertMove("mig-held"),
    Reschedule: Reschedule("vm-failing", "h0"),
    NovaInstances: NovaInstances("h1", ("vm-nova",), "add"),
}


@pytest.mark.parametrize("entry", COMMANDS, ids=lambda e: e.command.__name__)
async def test_a_command_that_changes_state_makes_the_record_the_list_names(entry: Any) -> None:
    assert set(_ONE_OF_EACH) == {c.command for c in COMMANDS}  # one example per command
    envelope = _applied(_ONE_OF_EACH[entry.command])
    records = records_of([envelope])
    assert count_changes([envelope]) == len(records)
    if entry.record is None:
        assert records == []
    else:
        assert records
        assert {r.kind for r in records} == {entry.record}
        assert entry.record in KINDS


async def test_a_command_not_listed_is_refused_by_the_core_and_the_journal() -> None:
    @dataclasses.dataclass(frozen=True)
    class Reboot(Command[bool]):
        host: str

    core = make_core()
    with pytest.raises(InvalidRequest, match="unknown command 'Reboot'"):
        core.handle(Reboot("h1"), 1.0)
    envelope = Envelope(Reboot("h1"), asyncio.get_running_loop().create_future())
    envelope.result = True
    from actorsched.journal import JournalError

    with pytest.raises(JournalError, match="Reboot is not journaled"):
        count_changes([envelope])
