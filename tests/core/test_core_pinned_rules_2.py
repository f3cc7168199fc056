"""More rules of the core a mutation sample found no test pinning (issue 31,
``make mutate --seed 20261202``): the tenant request filter with no aggregate,
the bound and order of the requests kept for a reschedule, a move's reset of
the requested destination, the batch path of update_hosts (instances, units,
its fast path), the credit book, a snapshot of an empty core, and the commands'
slots."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec, ram_only_config

from actorsched import Destination, HostReport, NoValidHost
from actorsched.core import COMMANDS, SchedulerCore
from actorsched.core.image import capture
from actorsched.journal.snapshot import encode, restore
from actorsched.models import Units

# -- the tenant request filter ------------------------------------------------------


def test_a_tenant_limited_scheduler_without_aggregates_places_a_plain_request() -> None:
    # limit_tenants_to_placement_aggregate with no aggregate at all: no tenant
    # has aggregates, so every host passes (and a request of resources only may
    # take the ranking's shortcut); placement_aggregate_required_for_tenants
    # fails the same request.
    core = make_core(ram_only_config(limit_tenants_to_placement_aggregate=True))
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=8192), 1.0)  # the most free RAM
    assert core.select_destinations(make_spec("vm-1"), 2.0)[0].host == "h2"
    assert core.select_destinations(make_spec("vm-2", project_id="p1"), 2.0)[0].host == "h2"
    required = make_core(
        make_config(
            limit_tenants_to_placement_aggregate=True,
            placement_aggregate_required_for_tenants=True,
        )
    )
    required.update_host(make_report("h1"), 1.0)
    with pytest.raises(NoValidHost, match="require_tenant_aggregate"):
        required.select_destinations(make_spec("vm-1"), 2.0)


# -- the requests kept for a reschedule ----------------------------------------------


def test_the_kept_requests_are_bounded_at_ten_thousand_dropping_the_oldest() -> None:
    # A core keeps the last 10,000 placements' requests (a snapshot's too):
    # one more drops the oldest, and only it.
    core = make_core()
    spec = make_spec("x")
    core.restore_requests((f"vm-{i}", spec) for i in range(10_001))
    kept = list(core.kept_requests())
    assert len(kept) == 10_000
    assert kept[0] == "vm-1"
    assert kept[-1] == "vm-10000"


def test_a_request_kept_again_becomes_the_newest() -> None:
    # kept_requests is oldest first, the order the bound drops them in: an
    # instance placed again is kept as the newest, not at its old place.
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1"), 1.0)
    core.select_destinations(make_spec("vm-2"), 2.0)
    assert list(core.kept_requests()) == ["vm-1", "vm-2"]
    assert core.release("vm-1", 3.0)
    core.select_destinations(make_spec("vm-1", memory_mb=1024), 4.0)
    assert list(core.kept_requests()) == ["vm-2", "vm-1"]
    assert core.kept_requests()["vm-1"].memory_mb == 1024


def test_a_move_without_a_spec_drops_the_requested_destination() -> None:
    # As Nova's reset_forced_destinations: an instance placed with a requested
    # destination moves by its kept request without it (else it could go only
    # to the host it leaves).
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    spec = make_spec("vm-a", requested_destination=Destination(host="h1"))
    assert core.select_destinations(spec, 1.0)[0].host == "h1"
    assert core.move("vm-a", "mig-1", None, 2.0).host == "h2"


# -- update_hosts: the batch path -------------------------------------------------------

_HOSTS = [f"h{i}" for i in range(8)]  # a batch of 8 or more distinct hosts: the batch path


def _state(core: SchedulerCore) -> tuple[Any, ...]:
    table = core.table
    return (
        core.digest(),
        {h: sorted(core.ledger.listed_on(r)) for h, r in table.row_of.items()},
        {table.name_of[r]: u for r, u in table.units.items()},
        {table.name_of[r]: e for r, e in table.inventory.items()},
        {table.name_of[r]: s for r, s in table.unit_steps.items()},
        core.claims(),
    )


def _apply_both(batches: list[list[HostReport]]) -> tuple[SchedulerCore, SchedulerCore]:
    """Two cores fed ``batches``: one a report at a time, one a batch at a time."""
    one, many = make_core(), make_core()
    for now, batch in enumerate(batches, start=1):
        for report in batch:
            one.update_host(report, float(now))
        many.update_hosts(batch, float(now))
    return one, many


def test_a_batch_of_reports_records_the_instances_they_list_as_one_report_does() -> None:
    # A host with no claims that lists instances (strangers, or instances
    # placed elsewhere): the batch records what it lists, and an instance
    # then placed there is confirmed at once, as after update_host.
    lists = [make_report(h, instances=[f"vm-{h}"] if h == "h3" else []) for h in _HOSTS]
    one, many = _apply_both([lists])
    assert _state(one) == _state(many)
    assert sorted(many.ledger.listed_on(many.table.row_of["h3"])) == ["vm-h3"]
    spec = make_spec("vm-h3", force_hosts=["h3"])
    for core in (one, many):
        assert core.select_destinations(spec, 5.0)[0].host == "h3"
    assert many.claims()["vm-h3"] == ("h3", True)
    assert _state(one) == _state(many)


def test_a_batch_without_units_drops_the_units_an_earlier_report_gave() -> None:
    # Units (min_unit, step_size) and reserved figures are the last report's:
    # a report of the batch path that gives none drops those of the one before,
    # for a host that had units only as for one that had reserved figures.
    steps = Units(min_unit=2, step_size=2)
    first = [
        make_report("h0", memory_mb_units=steps),
        make_report("h1", vcpus_reserved=1),
        *(make_report(h) for h in _HOSTS[2:]),
    ]
    again = [make_report(h, 2) for h in _HOSTS]
    one, many = _apply_both([first, again])
    assert _state(one) == _state(many)
    assert many.table.units == {}
    assert many.table.inventory == {}
    assert many.table.unit_steps == {}


def test_a_batch_giving_reserved_figures_but_no_ratio_keeps_the_batch_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # White-box (a cost rule; update_hosts' docstring): reserved vCPUs and disk
    # and units are written on the batch path; only a ratio (or instances)
    # sends a report of a host with no claims through update_host.
    core = make_core()
    one_by_one: list[str] = []
    update_host = core.update_host

    def spy(report: HostReport, now: float) -> bool:
        one_by_one.append(report.host)
        return update_host(report, now)

    monkeypatch.setattr(core, "update_host", spy)
    reserved = [make_report(h, vcpus_reserved=1, local_gb_reserved=2) for h in _HOSTS]
    assert core.update_hosts(reserved, 1.0) == [True] * 8
    assert one_by_one == []
    assert core.host_states()["h0"].vcpus_reserved == 1
    ratio = [
        make_report(h, 2, **({"ram_allocation_ratio": 1.0} if h == "h5" else {})) for h in _HOSTS
    ]
    assert core.update_hosts(ratio, 2.0) == [True] * 8
    assert one_by_one == ["h5"]


# -- the credit book ----------------------------------------------------------------


def test_a_host_whose_last_credit_ends_leaves_no_entry_in_the_credit_book() -> None:
    # A released instance its host still lists is credited back until a report
    # no longer lists it; the last credit gone, the host has no entry left
    # (an empty one would send every later report of it down update_host's path).
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1"), 1.0)
    core.update_host(make_report("h1", 2, instances=["vm-1"], memory_mb_used=512), 2.0)
    assert core.release("vm-1", 3.0)
    row = core.table.row_of["h1"]
    assert set(core.ledger.released[row]) == {"vm-1"}
    core.update_host(make_report("h1", 3), 4.0)
    assert core.ledger.released == {}
    assert core.host_states()["h1"].free_ram_mb == 4096


# -- snapshots ------------------------------------------------------------------------


def test_a_snapshot_of_a_core_with_no_hosts_restores_an_empty_core() -> None:
    empty = make_core()
    text = encode(capture(empty))
    again = make_core()
    restore(again, text)
    assert again.host_states() == {}
    assert again.digest() == empty.digest()


# -- commands -----------------------------------------------------------------------


def test_every_command_is_a_frozen_slotted_message() -> None:
    # A command is sent once and shared (journal, reply, retries): frozen, and
    # slotted, so no attribute can be added to it on the way (nor a dict per
    # message kept).
    for entry in COMMANDS:
        command = entry.command
        assert "__slots__" in vars(command), command.__name__
        assert command.__dataclass_params__.frozen, command.__name__  # type: ignore[attr-defined]
        assert "__dict__" not in dir(command), command.__name__
