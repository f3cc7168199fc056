"""Moves in the core: resize, cold migration (confirm, revert), evacuation, same host.

As Nova (Queens on): the source's resources are held under the migration
uuid, the destination is claimed under the instance uuid. Every scenario
checks that no host is ever over its capacity.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import InvalidRequest, NoValidHost
from actorsched.core import SchedulerCore


def _core(*hosts: str, **config: Any) -> SchedulerCore:
    """Hosts of 4096 MB, 4 vCPUs, 100 GB, every ratio 1.0 (so free is exact)."""
    config.setdefault("ram_allocation_ratio", 1.0)
    config.setdefault("cpu_allocation_ratio", 1.0)
    config.setdefault("disk_allocation_ratio", 1.0)
    core = make_core(make_config(**config))
    for host in hosts:
        core.update_host(make_report(host), 1.0)
    return core


def _free(core: SchedulerCore) -> dict[str, int]:
    states = core.host_states()
    assert all(s.free_ram_mb >= 0 and s.free_disk_gb >= 0 for s in states.values()), states
    assert all(s.vcpus_used <= s.vcpus_total for s in states.values()), states
    return {host: s.free_ram_mb for host, s in states.items()}


def _place(core: SchedulerCore, uuid: str = "vm1", memory_mb: int = 1000, **fields: Any) -> str:
    [selection] = core.select_destinations(make_spec(uuid, memory_mb=memory_mb, **fields), 2.0)
    return selection.host


def test_cold_migration_holds_the_source_until_confirmed() -> None:
    core = _core("h1", "h2")
    assert _place(core, memory_mb=3000, force_hosts=["h1"]) == "h1"
    selection = core.move("vm1", "mig1", None, 3.0)
    assert selection.host == "h2"
    assert selection.instance_uuid == "vm1"
    assert _free(core) == {"h1": 1096, "h2": 1096}  # both holds
    assert core.claims() == {"mig1": ("h1", False), "vm1": ("h2", False)}
    assert core.where("vm1").host == "h2"
    # the source reporting it no longer runs the instance keeps the hold (Nova keeps
    # the migration allocation until confirm)
    core.update_host(make_report("h1", generation=2), 4.0)
    assert _free(core) == {"h1": 1096, "h2": 1096}
    # nothing else fits on h1 meanwhile
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm2", memory_mb=2000), 5.0)
    assert core.confirm_move("mig1", 6.0) is True
    assert _free(core) == {"h1": 4096, "h2": 1096}
    assert core.claims() == {"vm1": ("h2", False)}
    assert core.confirm_move("mig1", 6.0) is False  # once only
    assert core.revert_move("mig1", 6.0) is False


def test_resize_claims_the_new_flavor_on_another_host() -> None:
    core = _core("h1", "h2")
    _place(core, memory_mb=1000, force_hosts=["h1"])
    selection = core.move("vm1", "mig1", make_spec("vm1", memory_mb=3500, vcpus=2), 3.0)
    assert selection.host == "h2"
    assert _free(core) == {"h1": 3096, "h2": 596}
    assert core.host_states()["h2"].vcpus_used == 2
    assert core.ledger.claims["vm1"].memory_mb == 3500
    assert core.ledger.claims["mig1"].memory_mb == 1000


def test_revert_gives_the_source_back_to_the_instance() -> None:
    core = _core("h1", "h2")
    _place(core, memory_mb=1000, force_hosts=["h1"], group=("g1", "affinity"))
    before = core.ledger.claims["vm1"]
    core.move("vm1", "mig1", make_spec("vm1", memory_mb=2000), 3.0)
    assert core.revert_move("mig1", 4.0) is True
    assert _free(core) == {"h1": 3096, "h2": 4096}
    claim = core.ledger.claims["vm1"]
    assert (claim.host, claim.memory_mb, claim.group_id) == ("h1", 1000, "g1")
    assert claim.fingerprint == before.fingerprint
    assert claim.created_at == before.created_at
    assert "mig1" not in core.ledger.claims
    assert not core.ledger.migrations
    assert not core.ledger.moving
    assert core.ledger.group_members("g1") == {core.table.row_of["h1"]: 1}
    assert core.revert_move("mig1", 4.0) is False


def test_revert_after_the_destination_reported_credits_it_until_dropped() -> None:
    core = _core("h1", "h2")
    _place(core, memory_mb=1000, force_hosts=["h1"])
    core.move("vm1", "mig1", None, 3.0)
    # the destination runs it now: its report carries it, the claim is confirmed
    core.update_host(make_report("h2", 2, memory_mb_used=1000, instances=["vm1"]), 4.0)
    assert core.ledger.claims["vm1"].confirmed
    assert _free(core) == {"h1": 3096, "h2": 3096}
    core.revert_move("mig1", 5.0)
    assert _free(core) == {"h1": 3096, "h2": 4096}  # credited back at once
    core.update_host(make_report("h2", 3), 6.0)
    assert _free(core) == {"h1": 3096, "h2": 4096}


def test_a_report_of_the_destination_confirms_its_claim() -> None:
    core = _core("h1", "h2")
    core.update_host(make_report("h1", 2, memory_mb_used=1000, instances=["vm1"]), 1.5)
    _place(core, memory_mb=1000, force_hosts=["h1"])
    assert core.ledger.claims["vm1"].confirmed
    core.move("vm1", "mig1", None, 3.0)
    assert core.ledger.claims["mig1"].confirmed  # the source's report carries it
    assert _free(core) == {"h1": 3096, "h2": 3096}
    core.update_host(make_report("h2", 2, memory_mb_used=1000, instances=["vm1"]), 4.0)
    assert core.ledger.claims["vm1"].confirmed
    # the source no longer lists it and frees its figures: the hold is assumed again
    core.update_host(make_report("h1", 3), 5.0)
    assert not core.ledger.claims["mig1"].confirmed
    assert _free(core) == {"h1": 3096, "h2": 3096}
    core.confirm_move("mig1", 6.0)
    assert _free(core) == {"h1": 4096, "h2": 3096}


def test_evacuation_hold_is_dropped_by_the_sources_next_report() -> None:
    core = _core("h1", "h2")
    core.update_host(make_report("h1", 2, memory_mb_used=1000, instances=["vm1"]), 1.5)
    _place(core, memory_mb=1000, force_hosts=["h1"])
    selection = core.move("vm1", "mig1", None, 3.0, evacuate=True)
    assert selection.host == "h2"
    assert _free(core) == {"h1": 3096, "h2": 3096}
    # a report still listing it keeps the hold; one that does not drops it
    core.update_host(make_report("h1", 3, memory_mb_used=1000, instances=["vm1"]), 4.0)
    assert "mig1" in core.ledger.claims
    core.update_host(make_report("h1", 4), 5.0)
    assert "mig1" not in core.ledger.claims
    assert not core.ledger.migrations
    assert _free(core) == {"h1": 4096, "h2": 3096}
    assert core.confirm_move("mig1", 6.0) is False


@pytest.mark.parametrize("evacuate", [False, True])
def test_a_move_ignores_the_instances_host_not_the_hosts_its_boot_ignored(
    evacuate: bool,
) -> None:
    """Nova's compute API (resize, cold migration) and conductor (evacuation) set a
    move's ignore_hosts to the instance's host: the boot's list is replaced, so a
    host the boot ignored may take the move. h2 has the most room: the boot
    ignored it, the move takes it."""
    core = _core("h1", "h3")
    core.update_host(make_report("h2", memory_mb=8192), 1.0)
    assert _place(core, memory_mb=1000, ignore_hosts=["h2"]) == "h1"
    assert core.move("vm1", "mig1", None, 3.0, evacuate=evacuate).host == "h2"


def test_a_move_that_may_stay_ignores_no_host() -> None:
    # Nova's _allow_resize_to_same_host: ignore_hosts is empty then, so neither the
    # instance's host nor the one its boot ignored is left out
    core = _core("h1")
    core.update_host(make_report("h2", memory_mb=8192), 1.0)
    assert _place(core, memory_mb=1000, ignore_hosts=["h2"]) == "h1"
    assert core.move("vm1", "mig1", None, 3.0, allow_same_host=True).host == "h2"
    assert core.revert_move("mig1", 4.0)
    core.update_host(make_report("h2", 2, memory_mb=512), 4.0)  # h2 shrinks: h1 is best
    assert core.move("vm1", "mig2", None, 5.0, allow_same_host=True).host == "h1"


def test_same_host_is_refused_unless_allowed() -> None:
    core = _core("h1")
    _place(core, memory_mb=1000)
    digest = core.digest()
    with pytest.raises(NoValidHost):
        core.move("vm1", "mig1", None, 3.0)
    assert core.digest() == digest
    assert not core.ledger.migrations
    selection = core.move(
        "vm1", "mig1", make_spec("vm1", memory_mb=2000), 3.0, allow_same_host=True
    )
    assert selection.host == "h1"
    assert _free(core) == {"h1": 1096}  # both flavors held
    # a report listing the instance is its old flavor: the new claim stays assumed
    core.update_host(make_report("h1", 2, memory_mb_used=1000, instances=["vm1"]), 4.0)
    assert not core.ledger.claims["vm1"].confirmed
    assert core.ledger.claims["mig1"].confirmed
    assert _free(core) == {"h1": 1096}
    core.confirm_move("mig1", 5.0)
    assert _free(core) == {"h1": 1096}  # 1000 in the report, 2000 assumed: until it reports
    core.update_host(make_report("h1", 3, memory_mb_used=2000, instances=["vm1"]), 6.0)
    assert core.ledger.claims["vm1"].confirmed
    assert _free(core) == {"h1": 2096}


def test_same_host_resize_too_big_for_both_flavors_is_refused() -> None:
    core = _core("h1")
    _place(core, memory_mb=2000)
    digest = core.digest()
    with pytest.raises(NoValidHost):
        core.move("vm1", "mig1", make_spec("vm1", memory_mb=3000), 3.0, allow_same_host=True)
    assert core.digest() == digest


def test_the_same_move_redelivered_changes_nothing() -> None:
    core = _core("h1", "h2", "h3")
    _place(core, memory_mb=1000, force_hosts=["h1"])
    spec = make_spec("vm1", memory_mb=2000)
    first = core.move("vm1", "mig1", spec, 3.0)
    digest = core.digest()
    assert core.move("vm1", "mig1", spec, 4.0) == first
    assert core.digest() == digest
    with pytest.raises(InvalidRequest, match="memory_mb"):
        core.move("vm1", "mig1", make_spec("vm1", memory_mb=3000), 4.0)
    with pytest.raises(InvalidRequest, match="evacuate"):
        core.move("vm1", "mig1", spec, 4.0, evacuate=True)
    with pytest.raises(InvalidRequest, match="instance_uuid vm1 then, vm2 now"):
        core.move("vm2", "mig1", make_spec("vm2", memory_mb=2000), 4.0)
    with pytest.raises(InvalidRequest, match="already moving"):
        core.move("vm1", "mig2", spec, 4.0)
    assert core.digest() == digest


def test_bad_moves_change_nothing() -> None:
    core = _core("h1", "h2")
    _place(core, "vm1", force_hosts=["h1"])
    _place(core, "vm2", force_hosts=["h1"])
    core.update_host(make_report("h2", 2, memory_mb_used=500, instances=["vm9"]), 2.0)
    digest = core.digest()
    cases = [
        (("ghost", "mig1", None), "no claim and no host reports it"),
        (("vm1", "vm2", None), "already an instance's claim"),
        (("vm1", "vm1", None), "already an instance's claim"),
        (("vm1", "vm9", None), "an instance a host reports"),
        (("vm9", "mig1", None), "needs a spec"),
        (("vm1", "mig1", make_spec("vm2")), "exactly the moving instance"),
    ]
    for args, message in cases:
        with pytest.raises(InvalidRequest, match=message):
            core.move(*args, 3.0)
        assert core.digest() == digest


def test_a_reported_instance_moves_with_its_spec() -> None:
    core = _core("h1", "h2")
    core.update_host(make_report("h1", 2, memory_mb_used=1500, instances=["vm9"]), 1.5)
    selection = core.move("vm9", "mig9", make_spec("vm9", memory_mb=1500), 3.0)
    assert selection.host == "h2"
    assert core.claims() == {"mig9": ("h1", True), "vm9": ("h2", False)}
    assert _free(core) == {"h1": 2596, "h2": 2596}
    core.update_host(make_report("h1", 3), 4.0)  # gone from the source: still held
    assert _free(core) == {"h1": 2596, "h2": 2596}
    core.revert_move("mig9", 5.0)
    assert core.claims() == {"vm9": ("h1", False)}
    assert _free(core) == {"h1": 2596, "h2": 4096}


def test_migrations_count_against_max_claims() -> None:
    core = _core("h1", "h2", max_claims=2)
    _place(core, "vm1", force_hosts=["h1"])
    core.move("vm1", "mig1", None, 3.0)  # two claims now: the hold and the destination
    _place_error = None
    try:
        _place(core, "vm2")
    except InvalidRequest as exc:
        _place_error = str(exc)
    assert _place_error is not None
    assert "max_claims" in _place_error
    core.confirm_move("mig1", 4.0)
    _place(core, "vm2")
    digest = core.digest()
    with pytest.raises(InvalidRequest, match="max_claims"):
        core.move("vm2", "mig2", None, 5.0)
    assert core.digest() == digest


def test_no_destination_is_no_valid_host_and_changes_nothing() -> None:
    core = _core("h1", "h2")
    _place(core, "vm1", memory_mb=1000, force_hosts=["h1"])
    _place(core, "vm2", memory_mb=3500, force_hosts=["h2"])
    digest = core.digest()
    with pytest.raises(NoValidHost):
        core.move("vm1", "mig1", None, 3.0)
    assert core.digest() == digest
    assert core.claims()["vm1"] == ("h1", False)


def test_release_of_a_migration_uuid_confirms_and_remove_host_ends_its_moves() -> None:
    core = _core("h1", "h2", "h3")
    _place(core, "vm1", force_hosts=["h1"])
    _place(core, "vm2", force_hosts=["h1"])
    core.move("vm1", "mig1", None, 3.0)
    core.move("vm2", "mig2", None, 3.0)
    assert core.release("mig1", 4.0) is True
    assert "mig1" not in core.ledger.migrations
    assert "vm1" not in core.ledger.moving
    assert core.remove_host("h1", 5.0) is True
    assert not core.ledger.migrations
    assert not core.ledger.moving
    assert set(core.claims()) == {"vm1", "vm2"}
    _free(core)


def test_every_move_scenario_stays_within_capacity() -> None:
    """A mixed run: moves, confirms, reverts and reports; free never goes negative."""
    core = _core("h1", "h2", "h3")
    for n in range(6):
        _place(core, f"vm{n}", memory_mb=1200)
    _free(core)
    generation = {"h1": 1, "h2": 1, "h3": 1}
    for step in range(30):
        uuid = f"vm{step % 6}"
        migration = f"mig{step}"
        with contextlib.suppress(NoValidHost, InvalidRequest):
            core.move(uuid, migration, make_spec(uuid, memory_mb=1000 + 100 * (step % 4)), 3.0)
        _free(core)
        open_moves = sorted(core.ledger.migrations)
        if open_moves and step % 3 == 0:
            core.revert_move(open_moves[0], 4.0)
        elif open_moves and step % 3 == 1:
            core.confirm_move(open_moves[0], 4.0)
        _free(core)
        host = f"h{step % 3 + 1}"
        generation[host] += 1
        core.update_host(make_report(host, generation[host]), 4.0)
        _free(core)


def test_a_hold_outlives_claim_timeout_and_a_report_batch() -> None:
    """Reports of the source that never list the instance, past claim_timeout and
    in a batch, keep the hold (an assumed claim would be dropped by then)."""
    core = _core("h1", "h2", claim_timeout=10.0)
    _place(core, memory_mb=1000, force_hosts=["h1"])
    core.move("vm1", "mig1", None, 3.0)
    reports = [make_report("h1", 2), *(make_report(f"x{n}") for n in range(9))]
    core.update_hosts(reports, 100.0)
    core.update_host(make_report("h1", 3), 200.0)
    core.update_host(make_report("h2", 2), 200.0)
    assert "mig1" in core.ledger.claims
    assert "vm1" not in core.ledger.claims  # the destination's own claim timed out
    assert _free(core)["h1"] == 3096
    assert _free(core)["h2"] == 4096


def test_a_same_host_move_of_a_listed_instance_holds_both_flavors() -> None:
    core = _core("h1")
    core.update_host(make_report("h1", 2, memory_mb_used=1000, instances=["vm1"]), 1.5)
    _place(core, memory_mb=1000)
    assert core.ledger.claims["vm1"].confirmed
    core.move("vm1", "mig1", make_spec("vm1", memory_mb=2000), 3.0, allow_same_host=True)
    assert not core.ledger.claims["vm1"].confirmed  # the listing is the old flavor
    assert _free(core) == {"h1": 1096}
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm2", memory_mb=1100), 4.0)
    core.revert_move("mig1", 5.0)
    assert core.ledger.claims["vm1"].confirmed
    assert _free(core) == {"h1": 3096}
