"""The inspection commands of the core: plan (a dry run), claims and where."""

from __future__ import annotations

import pytest
from conftest import make_config, make_core, make_report, make_spec, ram_only_config

from actorsched import InvalidRequest
from actorsched.core import SchedulerCore


def _cluster(core: SchedulerCore) -> None:
    core.update_host(make_report("big", memory_mb=8192), 1.0)
    core.update_host(make_report("half", memory_mb=4096), 1.0)
    core.update_host(make_report("small", memory_mb=2048), 1.0)


def test_a_plan_chooses_what_a_placement_would_and_leaves_the_state_as_it_was() -> None:
    planned, placed = (
        make_core(make_config(host_subset_size=2)),
        make_core(make_config(host_subset_size=2)),
    )
    for core in (planned, placed):
        _cluster(core)
    digest = planned.digest()
    plan = planned.plan(make_spec("vm-1", memory_mb=1024), 2.0)
    assert planned.digest() == digest
    assert len(planned.ledger) == 0
    assert plan.placed
    (instance,) = plan.instances
    # the random pick among the best was rewound: the real placement after the
    # plan picks what a placement without a plan before it picks
    (after_plan,) = planned.select_destinations(make_spec("vm-1", memory_mb=1024), 2.0)
    (alone,) = placed.select_destinations(make_spec("vm-1", memory_mb=1024), 2.0)
    assert instance.host == after_plan.host == alone.host
    assert instance.alternates == after_plan.alternates


def test_a_plan_shows_each_weighers_normalized_weight_and_the_total() -> None:
    core = make_core(ram_only_config())
    _cluster(core)
    plan = core.plan(make_spec("vm-1", memory_mb=1024), 2.0)
    (instance,) = plan.instances
    hosts = [c.host for c in instance.candidates]
    assert hosts == ["big", "half", "small"]  # the chosen first, then its alternates
    weights = [c.weights["RAMWeigher"] for c in instance.candidates]
    # Nova's minval 0: a weight is free RAM over the highest free RAM
    assert weights == pytest.approx([1.0, 0.5, 0.25])
    assert [c.total for c in instance.candidates] == pytest.approx(weights)
    assert instance.total_hosts == 3
    assert instance.passing_hosts == 3
    assert instance.filter_counts == {}


def test_a_plans_weights_go_by_novas_weigher_names() -> None:
    """Each weigher's weight in a plan is under its Nova class name (what an
    operator reads in ``actorsched plan`` and compares with Nova's logs)."""
    # every weigher whose multiplier is not 0 (Nova 34's NumInstancesWeigher is 0)
    core = make_core(make_config(nova_release=34, num_instances_weight_multiplier=1.0))
    _cluster(core)
    (instance,) = core.plan(make_spec("vm-1", memory_mb=1024), 2.0).instances
    assert list(instance.candidates[0].weights) == [
        "RAMWeigher",
        "CPUWeigher",
        "DiskWeigher",
        "IoOpsWeigher",
        "NumInstancesWeigher",
        "ServerGroupSoftAffinityWeigher",
        "ServerGroupSoftAntiAffinityWeigher",
        "BuildFailureWeigher",
    ]


def test_a_plan_of_several_instances_sees_each_earlier_claim_and_takes_them_all_back() -> None:
    core = make_core(ram_only_config())
    _cluster(core)
    spec = make_spec("a", "b", memory_mb=4096, group=("g1", "anti-affinity"))
    digest = core.digest()
    plan = core.plan(spec, 2.0)
    assert plan.placed
    assert [i.host for i in plan.instances] == ["big", "half"]  # anti-affinity: apart
    second = plan.instances[1]
    assert second.filter_counts == {"RamFilter": 1, "ServerGroupAntiAffinityFilter": 1}
    assert plan.instances[0].alternates == plan.instances[1].alternates
    assert core.digest() == digest
    assert len(core.ledger) == 0


def test_a_plan_that_finds_no_host_says_why_and_changes_nothing() -> None:
    core = make_core()
    _cluster(core)
    digest = core.digest()
    plan = core.plan(make_spec("a", "b", memory_mb=6000), 2.0)
    assert not plan.placed
    assert plan.message is not None
    assert plan.message.startswith("0/3 hosts are available for instance b (instance 2 of 2")
    assert [i.host for i in plan.instances] == ["big", None]
    assert plan.instances[1].filter_counts == {"RamFilter": 3}
    assert plan.instances[1].passing_hosts == 0
    assert core.digest() == digest


def test_a_plan_of_an_instance_already_placed_is_refused() -> None:
    core = make_core()
    _cluster(core)
    core.select_destinations(make_spec("vm-1"), 2.0)
    with pytest.raises(InvalidRequest, match=r"instance_uuids \['vm-1'\] already hold claims"):
        core.plan(make_spec("vm-1"), 3.0)


def test_claims_come_in_pages_and_by_host() -> None:
    core = make_core(ram_only_config(max_instances_per_host=1000))
    _cluster(core)
    for i in range(5):
        core.select_destinations(make_spec(f"vm-{i}", memory_mb=100), 2.0)
    first = core.claims_page(None, 0, 3)
    second = core.claims_page(None, 3, 3)
    assert [c.instance_uuid for c in first.claims] == ["vm-0", "vm-1", "vm-2"]
    assert first.next_cursor == 3
    assert [c.instance_uuid for c in second.claims] == ["vm-3", "vm-4"]
    assert second.next_cursor is None
    on_big = core.claims_page("big", 0, 100).claims
    assert on_big
    assert {c.host for c in on_big} == {"big"}
    assert {c.memory_mb for c in on_big} == {100}
    assert not any(c.confirmed for c in on_big)
    assert core.claims_page("nowhere", 0, 100).claims == []


def test_where_finds_a_claim_a_reported_instance_and_nothing() -> None:
    core = make_core()
    _cluster(core)
    (selection,) = core.select_destinations(make_spec("vm-1"), 2.0)
    core.update_host(make_report("small", generation=2, memory_mb=2048, instances=["vm-9"]), 3.0)
    claimed = core.where("vm-1")
    assert (claimed.host, claimed.claimed, claimed.confirmed, claimed.reported) == (
        selection.host,
        True,
        False,
        False,
    )
    reported = core.where("vm-9")
    assert (reported.host, reported.claimed, reported.reported) == ("small", False, True)
    unknown = core.where("vm-x")
    assert (unknown.host, unknown.claimed, unknown.reported) == (None, False, False)


def test_a_plan_of_a_forced_host_counts_only_the_forced_rows_as_passing() -> None:
    core = make_core(ram_only_config())
    _cluster(core)
    plan = core.plan(make_spec("vm-1", memory_mb=1024, force_hosts=["SMALL"]), 2.0)
    (instance,) = plan.instances
    assert instance.host == "small"
    assert instance.passing_hosts == 1
    assert [c.host for c in instance.candidates] == ["small"]


def test_a_plan_in_an_aggregate_zone_explains_the_zone_filter() -> None:
    core = make_core(ram_only_config())
    _cluster(core)
    core.create_aggregate("edge", {"availability_zone": "edge"}, ("half",))
    plan = core.plan(make_spec("vm-1", memory_mb=1024, availability_zone="edge"), 2.0)
    (instance,) = plan.instances
    assert instance.host == "half"
    assert instance.filter_counts == {"AvailabilityZoneFilter": 2}
