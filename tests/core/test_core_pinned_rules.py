"""Rules of the core a mutation sample found no test pinning (issue 31), pinned
before the code under them moves: cached filter answers and aggregate changes,
restoring a move, the vocabulary check's fast path, the defaults of a claim and
of a move, and the names each command goes by."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import NoValidHost, Scheduler, Selection
from actorsched.core import (
    COMMANDS,
    Claim,
    Command,
    GetAggregates,
    GetClaims,
    GetHostStates,
    Locate,
    Migration,
    Move,
    NovaInstances,
    PlanPlacement,
    SchedulerCore,
)
from actorsched.core.commands import info
from actorsched.core.image import capture
from actorsched.core.views import host_state
from actorsched.journal.snapshot import encode, restore
from actorsched.models import AGGREGATE_FILTERS, BUILTIN_FILTERS


def _free_ram(core: SchedulerCore, host: str) -> int:
    return host_state(core.table, core.table.row_of[host]).free_ram_mb


# -- cached filter answers and aggregate changes ----------------------------------


def test_a_placement_follows_an_aggregate_metadata_change_made_after_it_was_answered() -> None:
    # The AggregateInstanceExtraSpecsFilter answer for (request, membership) is
    # kept; a change of the aggregate's metadata (the same hosts, so the same
    # membership ids) must not leave the old answer in force.
    core = make_core(make_config(enabled_filters=[*BUILTIN_FILTERS, *AGGREGATE_FILTERS]))
    core.update_host(make_report("h1"), 1.0)
    core.create_aggregate("a1", {"tier": "gold"}, ["h1"])
    gold = {"aggregate_instance_extra_specs:tier": "gold"}
    assert core.select_destinations(make_spec("vm-1", extra_specs=gold), 2.0)[0].host == "h1"
    core.update_aggregate("a1", {"tier": "silver"})
    with pytest.raises(NoValidHost, match="AggregateInstanceExtraSpecsFilter"):
        core.select_destinations(make_spec("vm-2", extra_specs=gold), 3.0)
    core.update_aggregate("a1", {"tier": "gold"})
    assert core.select_destinations(make_spec("vm-3", extra_specs=gold), 4.0)[0].host == "h1"


# -- restoring a move ----------------------------------------------------------------


def _moved() -> SchedulerCore:
    """h1 and h2; vm-a placed on h1 (3000 MB), then moved to h2 under mig-1."""
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=2048 * 2), 1.0)
    assert core.select_destinations(make_spec("vm-a", memory_mb=3000), 1.0)[0].host == "h1"
    assert core.move("vm-a", "mig-1", None, 2.0).host == "h2"
    return core


def test_restoring_a_move_that_is_open_already_changes_nothing() -> None:
    core = _moved()
    before = core.digest()
    # the same move again, and one of the same migration uuid that says otherwise
    core.restore_migration(core.ledger.migrations["mig-1"])
    core.restore_migration(Migration("mig-1", "vm-a", "{}", True, None, "h1", ()))
    assert core.digest() == before
    # still the move first restored: no evacuation, so a report of the source
    # that no longer lists vm-a keeps the hold, and the move answers h2
    core.update_host(make_report("h1", generation=2), 3.0)
    assert core.claims()["mig-1"] == ("h1", False)
    assert _free_ram(core, "h1") == 4096 - 3000
    assert core.move("vm-a", "mig-1", None, 4.0).host == "h2"


def test_a_snapshot_listing_a_move_twice_restores_it_once() -> None:
    core = _moved()
    data = json.loads(encode(capture(core)))
    data["moves"].append({**data["moves"][0], "evacuate": True, "host": "h1"})
    again = make_core(core.config)
    restore(again, json.dumps(data))
    assert again.digest() == core.digest()
    assert again.move("vm-a", "mig-1", None, 3.0).host == "h2"
    again.update_host(make_report("h1", generation=2), 3.0)
    assert again.claims()["mig-1"] == ("h1", False)  # not an evacuation: the hold is kept


def test_a_restored_hold_whose_source_no_longer_lists_the_instance_counts_once() -> None:
    """A snapshot whose hold was confirmed (the source listed the instance) but whose
    source listing no longer names it: the hold is assumed again, its resources
    counted once on the source, as a live report that dropped it would leave it."""
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=2048 * 2), 1.0)
    core.select_destinations(make_spec("vm-a", memory_mb=3000), 1.0)
    core.update_host(make_report("h1", generation=2, instances=["vm-a"]), 1.5)
    assert core.move("vm-a", "mig-1", None, 2.0).host == "h2"
    assert core.claims()["mig-1"] == ("h1", True)
    data = json.loads(encode(capture(core)))
    hosts = data["hosts"]
    h1 = hosts["host"].index("h1")
    hosts["instances"][h1] = []
    again = make_core(core.config)
    restore(again, json.dumps(data))
    assert again.claims()["mig-1"] == ("h1", False)
    assert _free_ram(again, "h1") == _free_ram(core, "h1") - 3000


def test_restoring_a_move_whose_hold_is_gone_is_a_no_op() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    core.select_destinations(make_spec("vm-a", memory_mb=3000), 1.0)
    before = core.digest()
    core.restore_migration(Migration("mig-1", "vm-a", "{}", False, None, "h2", ()))
    assert core.digest() == before
    assert "mig-1" not in core.ledger.migrations
    assert "vm-a" not in core.ledger.moving
    # nothing half-open is left: the same migration uuid starts a move of its own
    assert core.move("vm-a", "mig-1", None, 2.0).host == "h2"


# -- the vocabulary check's fast path ----------------------------------------------


def test_a_report_naming_only_known_traits_and_zone_is_not_checked_against_the_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # White-box: the check refuses nothing for a known host whose zone and
    # trait set are known (nothing in it is new), so skipping it is a cost
    # rule, not a visible one; it is pinned because update_host is the path
    # every report of a fleet takes. A report with something new is checked.
    checked: list[str] = []
    real = SchedulerCore._check_room

    def spy(self: SchedulerCore, reports: Any) -> None:
        checked.extend(r.host for r in reports)
        real(self, reports)

    monkeypatch.setattr(SchedulerCore, "_check_room", spy)
    core = make_core()
    traits = ["HW_CPU_X86_AVX2", "HW_CPU_X86_SSE42"]
    core.update_host(make_report("h1", availability_zone="az1", traits=traits), 1.0)
    assert checked == ["h1"]  # a new host
    core.update_host(make_report("h1", 2, availability_zone="az1", traits=traits), 2.0)
    core.update_host(make_report("h1", 3, availability_zone="az1"), 3.0)
    core.update_host(make_report("h1", 4, availability_zone="az1", traits=traits), 4.0)
    assert checked == ["h1"]  # nothing new in any of them
    core.update_host(make_report("h1", 5, availability_zone="az1", traits=traits[:1]), 5.0)
    assert checked == ["h1", "h1"]  # a trait set not seen before


# -- defaults: a claim's priority, a move's flags --------------------------------------


def test_a_claim_made_without_a_priority_is_preempted_by_priority_1_and_not_by_0() -> None:
    core = make_core(make_config(preemption=True))
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-low", memory_mb=3000), 1.0)
    placed = core.ledger.drop("vm-low")
    # the same claim, made as a caller of the ledger makes one: no priority named
    core.ledger.add(
        Claim(
            placed.instance_uuid,
            placed.row,
            placed.memory_mb,
            placed.vcpus,
            placed.disk_gb,
            placed.group_id,
            placed.created_at,
            placed.host,
            placed.alternates,
            placed.fingerprint,
        )
    )
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm-0", memory_mb=3000, priority=0), 2.0)
    [selection] = core.select_destinations(make_spec("vm-1", memory_mb=3000, priority=1), 3.0)
    assert (selection.host, selection.preempted) == ("h1", ["vm-low"])


def _move(core: SchedulerCore, how: str, **flags: Any) -> Selection:
    """vm-a moved under mig-1 by a Move command or by the core's method, naming
    only the flags given (the rest are the defaults under test)."""
    if how == "command":
        return core.handle(Move("vm-a", "mig-1", **flags), 2.0)
    return core.move("vm-a", "mig-1", None, 2.0, **flags)


@pytest.mark.parametrize("how", ["command", "method"])
def test_a_move_asked_without_allow_same_host_never_lands_on_its_source(how: str) -> None:
    core = make_core()
    core.update_host(make_report("h1", memory_mb=8192), 1.0)
    core.select_destinations(make_spec("vm-a", memory_mb=1000), 1.0)
    before = core.digest()
    with pytest.raises(NoValidHost):
        _move(core, how)
    assert core.digest() == before
    assert _move(core, how, allow_same_host=True).host == "h1"


@pytest.mark.parametrize("how", ["command", "method"])
def test_a_move_asked_without_evacuate_keeps_its_hold_when_the_source_drops_the_instance(
    how: str,
) -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=2048), 1.0)
    core.select_destinations(make_spec("vm-a", memory_mb=1000), 1.0)
    assert _move(core, how).host == "h2"
    # the source reports again, without the instance: a migration's hold stays
    # (an evacuation's would be dropped) until the move is confirmed or reverted
    core.update_host(make_report("h1", generation=2), 3.0)
    assert core.claims()["mig-1"] == ("h1", False)
    assert _free_ram(core, "h1") == 4096 - 1000
    assert core.confirm_move("mig-1", 4.0)
    assert _free_ram(core, "h1") == 4096


# -- the names each command goes by --------------------------------------------------


def test_info_names_each_commands_scheduler_method_and_marks_the_reads() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-a"), 1.0)
    reads: dict[type[Command[Any]], Command[Any]] = {
        GetHostStates: GetHostStates(),
        PlanPlacement: PlanPlacement(make_spec("vm-b")),
        GetClaims: GetClaims(),
        Locate: Locate("vm-a"),
        GetAggregates: GetAggregates(),
        # not a read, but soft state no journal keeps (Nova's computes sync it
        # again): where an instance is, never a figure, so not in the digest
        NovaInstances: NovaInstances("h1", ("vm-nova",), "sync"),
    }
    for entry in COMMANDS:
        found = info(entry.command)
        assert found is entry
        assert callable(getattr(Scheduler, found.method))
        assert (found.record is None) is (entry.command in reads)
    # what info calls a read is one: it changes no figure and makes no journal record
    before = core.digest()
    for command, made in reads.items():
        assert info(command).record is None
        core.handle(made, 2.0)
    assert core.digest() == before
    with pytest.raises(KeyError):
        info(Command)


# -- found by make mutate, seed 20261202 --------------------------------------------


def test_the_digest_tells_apart_claims_that_differ_only_in_priority() -> None:
    # a journal replay compares digests: a claim's priority (what preemption reads)
    # is state, so two cores that differ only there must not look the same
    plain, urgent = make_core(), make_core()
    for core in (plain, urgent):
        core.update_host(make_report("h1"), 1.0)
    plain.select_destinations(make_spec("vm-1"), 2.0)
    urgent.select_destinations(make_spec("vm-1", priority=5), 2.0)
    assert plain.digest() != urgent.digest()
    again = make_core()
    again.update_host(make_report("h1"), 1.0)
    again.select_destinations(make_spec("vm-1", priority=5), 2.0)
    assert again.digest() == urgent.digest()


def test_nova_release_is_chosen_before_any_host_and_never_changed_after() -> None:
    from actorsched.core.table import HostTable

    table = HostTable(1.5, 16.0, 1.0)
    table.adopt_nova_release(34)  # no rows yet: taken
    assert table.nova_release == 34
    table.adopt_nova_release(34)  # the same: nothing to do, even with rows
    table.add_row("h1")
    table.adopt_nova_release(34)
    with pytest.raises(ValueError, match="must be chosen before any host is added"):
        table.adopt_nova_release(18)
    assert table.nova_release == 34
