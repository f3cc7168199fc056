"""Capacity = (total - reserved) x ratio (Placement's formula); a request fits when it
is no larger than capacity - used - claimed + released, nor than the host's own total
(Nova: an instance may not overcommit against itself). HostState figures carry no ratio.
"""

from __future__ import annotations

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import NoValidHost
from actorsched.core import SchedulerCore

RAM = {"memory_mb": 3200, "memory_mb_reserved": 200, "memory_mb_used": 500}
CPU = {"vcpus": 6, "vcpus_used": 3}
DISK = {"local_gb": 80, "local_gb_used": 40}
RATIOS = {"ram_allocation_ratio": 1.5, "cpu_allocation_ratio": 2.5, "disk_allocation_ratio": 1.25}
# Used so that what capacity leaves is below each total:
# (total - reserved) x ratio - used: 3000 x 1.5 - 2000 = 2500 MB (of 3200),
# 6 x 2.5 - 12 = 3 vCPUs (of 6), 80 x 1.25 - 40 = 60 GB (of 80)
TIGHT = {**RAM, "memory_mb_used": 2000, **CPU, "vcpus_used": 12, **DISK}


def _core() -> SchedulerCore:
    core = make_core(make_config(**RATIOS))
    core.update_host(make_report("h1", **TIGHT), now=0.0)
    return core


@pytest.mark.parametrize(
    ("resource", "headroom", "filter_name"),
    [
        ("memory_mb", 2500, "RamFilter"),
        ("vcpus", 3, "CoreFilter"),
        ("disk_gb", 60, "DiskFilter"),
    ],
)
def test_exactly_fits_and_one_over_does_not(resource: str, headroom: int, filter_name: str) -> None:
    small = {"memory_mb": 1, "vcpus": 1, "disk_gb": 1}

    over = _core()
    with pytest.raises(NoValidHost) as info:
        over.select_destinations(make_spec("vm1", **{**small, resource: headroom + 1}), now=1.0)
    assert info.value.filter_counts == {filter_name: 1}
    assert over.claims() == {}

    exact = _core()
    [sel] = exact.select_destinations(make_spec("vm1", **{**small, resource: headroom}), now=1.0)
    assert sel.host == "h1"


@pytest.mark.parametrize(
    ("resource", "headroom"), [("memory_mb", 2500), ("vcpus", 3), ("disk_gb", 60)]
)
def test_claims_count_against_capacity(resource: str, headroom: int) -> None:
    core = _core()
    small = {"memory_mb": 1, "vcpus": 1, "disk_gb": 1}
    core.select_destinations(make_spec("a", **{**small, resource: headroom - 1}), now=1.0)
    # one unit left of this resource: two units no longer fit, one does
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("b", **{**small, resource: 2}), now=1.0)
    assert core.select_destinations(make_spec("c", **small), now=1.0)[0].host == "h1"


def test_released_still_reported_counts_as_free_for_fitting() -> None:
    core = make_core()
    core.update_host(make_report("h1", memory_mb=2048), now=0.0)
    core.select_destinations(make_spec("vm1", memory_mb=2048), now=1.0)
    core.update_host(
        make_report("h1", 2, memory_mb=2048, memory_mb_used=2048, instances=["vm1"]), 2.0
    )
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm2", memory_mb=2048), now=3.0)
    assert core.release("vm1", now=4.0)
    assert core.select_destinations(make_spec("vm2", memory_mb=2048), now=5.0)[0].host == "h1"


def test_capacity_is_placements_total_minus_reserved_times_the_ratio() -> None:
    """Placement's (total - reserved) x ratio, not Nova 18 HostState's total x ratio
    with reserved counted as used: they differ when reserved > 0 and ratio != 1."""
    # (1000 - 200) x 2.0 - 700 = 900 left, not 1000 x 2.0 - (700 + 200) = 1100;
    # both requests are within the host's own 1000 MB
    core = make_core(make_config(ram_allocation_ratio=2.0))
    core.update_host(
        make_report("h1", memory_mb=1000, memory_mb_reserved=200, memory_mb_used=700), now=0.0
    )
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(make_spec("vm1", memory_mb=901), now=1.0)
    assert info.value.filter_counts == {"RamFilter": 1}
    core.select_destinations(make_spec("vm1", memory_mb=900), now=1.0)
    # what is free carries no ratio: 1000 - 200 - 700 - 900
    assert core.host_states()["h1"].free_ram_mb == -800


def test_host_state_free_figures_formula() -> None:
    """free = total - reserved - used - claimed not yet reported + released still reported."""
    core = make_core(make_config(**RATIOS))
    core.update_host(make_report("h1", **RAM, **CPU, **DISK, instances=["old1", "old2"]), now=0.0)
    state = core.host_states()["h1"]
    assert state.free_ram_mb == 3200 - 200 - 500  # no ratio applied
    assert state.free_disk_gb == 80 - 40
    assert state.vcpus_total == 6
    assert state.vcpus_used == 3
    assert state.num_instances == 2
    assert state.assumed_claims == 0
    assert state.memory_mb == 3200
    assert state.memory_mb_reserved == 200

    core.select_destinations(make_spec("a", "b", memory_mb=100, vcpus=2, disk_gb=5), now=1.0)
    state = core.host_states()["h1"]
    assert state.free_ram_mb == 2500 - 200
    assert state.free_disk_gb == 40 - 10
    assert state.vcpus_used == 3 + 4
    assert state.num_instances == 4
    assert state.assumed_claims == 2

    # the report lists a; its figures now carry it (no double count); b is still assumed
    core.update_host(
        make_report(
            "h1",
            2,
            memory_mb=3200,
            memory_mb_reserved=200,
            memory_mb_used=600,
            vcpus=6,
            vcpus_used=5,
            local_gb=80,
            local_gb_used=45,
            instances=["old1", "old2", "a"],
        ),
        now=2.0,
    )
    state = core.host_states()["h1"]
    assert state.free_ram_mb == 3200 - 200 - 600 - 100
    assert state.free_disk_gb == 80 - 45 - 5
    assert state.vcpus_used == 5 + 2
    assert state.num_instances == 4
    assert state.assumed_claims == 1

    # a released while still reported: credited back
    assert core.release("a", now=3.0)
    state = core.host_states()["h1"]
    assert state.free_ram_mb == 3200 - 200 - 600 - 100 + 100
    assert state.free_disk_gb == 80 - 45 - 5 + 5
    assert state.vcpus_used == 5 + 2 - 2
    assert state.num_instances == 3


def test_free_ram_can_read_negative_when_a_report_says_so() -> None:
    # the report is the truth about usage; HostState shows it, no clamping
    core = make_core()
    core.update_host(make_report("h1", memory_mb=1024, memory_mb_used=1500), now=0.0)
    assert core.host_states()["h1"].free_ram_mb == -476
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm1", memory_mb=1), now=1.0)


# -- stale reports -------------------------------------------------------------


@pytest.mark.parametrize("generation", [5, 4, 0])
def test_stale_report_ignored(generation: int) -> None:
    core = make_core()
    assert core.update_host(make_report("h1", 5, memory_mb_used=1000, instances=["x"]), now=0.0)
    core.select_destinations(make_spec("vm1"), now=1.0)
    before_states = core.host_states()
    before_claims = core.claims()
    before = core.digest()

    stale = make_report(
        "h1",
        generation,
        memory_mb=99999,
        memory_mb_used=0,
        enabled=False,
        instances=["vm1"],
        availability_zone="elsewhere",
    )
    assert core.update_host(stale, now=2.0) is False
    assert core.digest() == before
    assert core.host_states() == before_states
    assert core.claims() == before_claims
    assert core.claims()["vm1"] == ("h1", False)  # a stale listing confirms nothing


def test_stale_report_does_not_refresh_liveness() -> None:
    core = make_core(make_config(service_down_time=60.0))
    core.update_host(make_report("h1", 3), now=0.0)
    assert core.update_host(make_report("h1", 3), now=100.0) is False
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(make_spec("vm1"), now=100.0)
    assert info.value.filter_counts == {"ComputeFilter": 1}


def test_fresher_report_applied() -> None:
    core = make_core()
    assert core.update_host(make_report("h1", 1), now=0.0) is True
    assert core.update_host(make_report("h1", 2, memory_mb_used=1024), now=1.0) is True
    state = core.host_states()["h1"]
    assert state.generation == 2
    assert state.free_ram_mb == 4096 - 1024


def test_generations_are_per_host() -> None:
    core = make_core()
    assert core.update_host(make_report("h1", 10), now=0.0)
    assert core.update_host(make_report("h2", 1), now=0.0)
    assert core.update_host(make_report("h2", 2), now=0.0)
    assert not core.update_host(make_report("h1", 2), now=0.0)
