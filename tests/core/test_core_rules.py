"""Rules of the core that a sampled mutation run found no test pinning; one test each."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_config, make_core, make_report, make_spec
from numpy.typing import NDArray

from actorsched import (
    Destination,
    InvalidRequest,
    MaxRetriesExceeded,
    NoValidHost,
    SchedulerConfig,
    Selection,
)
from actorsched.core import HostTable, PlacementContext, SchedulerCore
from actorsched.core.image import capture
from actorsched.core.views import host_state
from actorsched.journal.snapshot import encode, restore

DOWN = 60.0  # service_down_time in these tests


def _free_ram(core: SchedulerCore, host: str = "h1") -> int:
    return host_state(core.table, core.table.row_of[host]).free_ram_mb


def test_replaying_a_claim_its_uuid_already_holds_counts_it_once() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    spec = make_spec("vm-1", memory_mb=1000)
    selections = core.select_destinations(spec, 1.0)
    assert _free_ram(core) == 3096
    digest = core.digest()
    core.restore_claims(spec, selections, 2.0)  # the journal replays the same record again
    assert _free_ram(core) == 3096
    assert core.digest() == digest


@pytest.mark.parametrize(("age", "placed"), [(DOWN, True), (DOWN + 0.001, False)])
def test_a_host_exactly_service_down_time_old_is_still_up_and_one_past_it_is_not(
    age: float, placed: bool
) -> None:
    # Nova's servicegroup: up while the time since the last report is <= service_down_time
    core = make_core(make_config(service_down_time=DOWN))
    core.update_host(make_report("h0", memory_mb=8192), 0.0)  # long silent: the sweep looks
    core.update_host(make_report("h1"), 100.0)
    spec = make_spec("vm-1")
    if placed:
        assert core.select_destinations(spec, 100.0 + age)[0].host == "h1"
    else:
        with pytest.raises(NoValidHost, match="ComputeFilter removed 2"):
            core.select_destinations(spec, 100.0 + age)


def test_a_host_that_reuses_a_removed_hosts_row_has_only_its_own_traits() -> None:
    core = make_core()
    core.update_host(make_report("gpu-host", traits=["CUSTOM_GPU"]), 1.0)
    row = core.table.row_of["gpu-host"]
    assert core.remove_host("gpu-host", 2.0)
    core.update_host(make_report("plain-host"), 3.0)
    assert core.table.row_of["plain-host"] == row  # the freed row, reused
    with pytest.raises(NoValidHost, match="RequiredTraitsFilter removed 1"):
        core.select_destinations(make_spec("vm-1", required_traits=["CUSTOM_GPU"]), 3.0)


def test_a_stale_host_that_reports_again_in_a_large_batch_is_placeable_again() -> None:
    core = make_core(make_config(service_down_time=DOWN))
    core.update_host(make_report("h0"), 0.0)
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm-0"), 100.0)  # h0 is stale now
    # 8 or more distinct reports take the batch path
    reports = [make_report("h0", generation=2)] + [make_report(f"n{i}") for i in range(9)]
    assert core.update_hosts(reports, 100.0) == [True] * len(reports)
    placed = {core.select_destinations(make_spec(f"vm-{i}"), 100.0)[0].host for i in range(1, 11)}
    assert "h0" in placed


def _every_weigher_at_zero() -> SchedulerConfig:
    return make_config(
        ram_weight_multiplier=0.0,
        cpu_weight_multiplier=0.0,
        disk_weight_multiplier=0.0,
        io_ops_weight_multiplier=0.0,
        soft_affinity_weight_multiplier=0.0,
        soft_anti_affinity_weight_multiplier=0.0,
    )


def test_every_weigher_at_zero_still_places_on_the_first_passing_host() -> None:
    core = make_core(_every_weigher_at_zero())
    for host, used in (("h1", 3000), ("h2", 0), ("h3", 1000)):
        core.update_host(make_report(host, memory_mb_used=used), 1.0)
    [selection] = core.select_destinations(make_spec("vm-1", memory_mb=2048), 1.0)
    assert selection.host == "h2"  # h1 cannot take it; h2 is the first that can
    assert selection.alternates == ["h3"]


@pytest.mark.parametrize(("disk_gb", "fits"), [(100, True), (101, False)])
def test_disk_filter_takes_an_exact_fit_when_the_resource_filters_are_not_fused(
    disk_gb: int, fits: bool
) -> None:
    config = make_config(enabled_filters=["ComputeFilter", "DiskFilter"])
    core = make_core(config)
    assert not core.ranker._fused_resources  # each resource filter runs on its own
    core.update_host(make_report("h1", local_gb=100, local_gb_used=0), 1.0)
    spec = make_spec("vm-1", disk_gb=disk_gb)
    if fits:
        assert core.select_destinations(spec, 1.0)[0].host == "h1"
    else:
        with pytest.raises(NoValidHost, match="DiskFilter removed 1"):
            core.select_destinations(spec, 1.0)


def test_the_ledger_counts_its_live_claims() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    assert len(core.ledger) == 0
    core.select_destinations(make_spec("a", "b"), 1.0)
    assert len(core.ledger) == 2
    core.release("a", 2.0)
    assert len(core.ledger) == 1


def test_the_no_valid_host_message_of_a_single_instance() -> None:
    core = make_core()
    core.update_host(make_report("h1", memory_mb=1024), 1.0)
    core.update_host(make_report("h2", availability_zone="az2"), 1.0)
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(make_spec("vm-1", memory_mb=8192), 1.0)
    assert str(caught.value) == "0/2 hosts are available for instance vm-1: RamFilter removed 2"
    assert caught.value.filter_counts == {"RamFilter": 2}
    assert caught.value.total_hosts == 2


def test_hosts_keep_going_stale_after_the_first_one_did() -> None:
    core = make_core(make_config(service_down_time=DOWN))
    core.update_host(make_report("early"), 0.0)
    core.update_host(make_report("late"), 50.0)
    core.select_destinations(make_spec("vm-0"), 70.0)  # "early" goes stale here
    with pytest.raises(NoValidHost, match="ComputeFilter removed 2"):
        core.select_destinations(make_spec("vm-1"), 120.0)  # and "late" by now


def test_equal_states_have_equal_digests_whatever_the_report_times() -> None:
    one, two = make_core(), make_core()
    one.update_host(make_report("h1"), 1.0)
    two.update_host(make_report("h1"), 5.0)
    assert one.digest() == two.digest()
    two.update_host(make_report("h1", generation=2, memory_mb_used=1), 6.0)
    assert one.digest() != two.digest()


def test_a_removed_hosts_release_credits_do_not_pass_to_the_next_host_on_its_row() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1", memory_mb=1000), 1.0)
    core.update_host(make_report("h1", generation=2, memory_mb_used=1000, instances=["vm-1"]), 2.0)
    core.release("vm-1", 3.0)  # still listed: credited back until a report drops it
    assert _free_ram(core) == 4096
    core.remove_host("h1", 4.0)
    core.update_host(make_report("h2", memory_mb_used=1000, instances=["vm-1"]), 5.0)
    assert core.table.row_of["h2"] == 0  # h1's row
    assert _free_ram(core, "h2") == 3096  # no credit carried over
    core.update_host(make_report("h2", generation=2), 6.0)  # and none to take back
    assert _free_ram(core, "h2") == 4096


def test_an_instance_a_report_no_longer_lists_is_no_longer_located_there() -> None:
    core = make_core()
    core.update_host(make_report("h1", instances=["legacy"]), 1.0)
    core.update_host(make_report("h2"), 1.0)
    assert core.locate("legacy") == core.table.row_of["h1"]
    core.update_host(make_report("h1", generation=2), 2.0)  # "legacy" is gone
    assert core.locate("legacy") is None
    # so different_host=["legacy"] no longer keeps a request off h1
    spec = make_spec("vm-1", different_host=["legacy"], memory_mb=4000)
    core.update_host(make_report("h2", generation=2, memory_mb_used=3000), 3.0)
    assert core.select_destinations(spec, 3.0)[0].host == "h1"


def test_a_column_weigher_without_minval_scales_between_lowest_and_highest() -> None:
    from actorsched.core.weighers import ColumnWeigher

    class FreeRamSpread(ColumnWeigher):  # a plug-in: free RAM, min-max scaled
        column = "free_ram"
        minval = None

    config = make_config(
        ram_weight_multiplier=0.0, cpu_weight_multiplier=0.0, io_ops_weight_multiplier=0.0
    )
    core = make_core(config, weighers=[FreeRamSpread("FreeRamSpread", 1.0)])
    core.update_host(make_report("h1", memory_mb_used=3096, local_gb=100), 1.0)
    core.update_host(make_report("h2", memory_mb_used=1096, local_gb=100, local_gb_used=70), 1.0)
    # free RAM 1,000 and 3,000, free disk 100 and 30 GB. Min-max, RAM weighs 0
    # and 1, disk (minval 0) 1 and 0.3: h2 wins, 1.3 to 1.0. Were the plug-in's
    # floor 0, RAM would weigh 0.33 and 1 and h1 win, 1.33 to 1.3.
    assert core.select_destinations(make_spec("vm-1"), 1.0)[0].host == "h2"


def test_a_stale_host_is_fresh_again_for_a_clock_that_goes_back_to_its_report() -> None:
    core = make_core(make_config(service_down_time=DOWN))
    core.update_host(make_report("h1"), 0.0)
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm-0"), 100.0)  # stale at 100
    # now 60: the report (at 0) is exactly service_down_time old, so up again
    assert core.select_destinations(make_spec("vm-1"), 60.0)[0].host == "h1"


def test_every_weigher_at_zero_with_a_selective_request_places_on_the_first_passing_host() -> None:
    core = make_core(_every_weigher_at_zero())
    for i in range(10):  # one host in az1 among ten: the gathered ranking
        core.update_host(make_report(f"h{i}", availability_zone="az1" if i > 6 else "az2"), 1.0)
    [selection] = core.select_destinations(make_spec("vm-1", availability_zone="az1"), 1.0)
    assert selection.host == "h7"
    assert selection.alternates == ["h8", "h9"]


def test_a_request_for_an_unknown_zone_adds_no_zone_to_the_vocabulary() -> None:
    core = make_core()
    core.update_host(make_report("h1", availability_zone="az1"), 1.0)
    zones = list(core.table.zone_names)
    with pytest.raises(NoValidHost, match="AvailabilityZoneFilter removed 1"):
        core.select_destinations(make_spec("vm-1", availability_zone="nowhere"), 1.0)
    assert core.table.zone_names == zones


def test_no_valid_host_with_no_host_at_all_says_none_has_reported() -> None:
    with pytest.raises(NoValidHost) as caught:
        make_core().select_destinations(make_spec("vm-1"), 1.0)
    assert str(caught.value) == "0/0 hosts are available for instance vm-1: no host has reported"


def test_a_table_with_floors_for_the_wrong_columns_is_refused_by_name() -> None:
    from actorsched.core.table import WEIGH_COLUMNS, HostTable

    with pytest.raises(ValueError, match="floors must give one value per column in use"):
        HostTable(1.0, 1.0, 1.0, WEIGH_COLUMNS, 2, (0.0,))


def test_each_row_local_filter_counts_the_hosts_its_own_part_of_the_rule_removes() -> None:
    # ComputeFilter: one disabled host and one silent one; NumInstancesFilter:
    # one host at its limit; IoOpsFilter: one at its limit. Each is counted by
    # the filter whose share of the table's one row rule it fails, and no other.
    core = make_core(
        make_config(service_down_time=DOWN, max_instances_per_host=2, max_io_ops_per_host=3)
    )
    core.update_host(make_report("silent"), 0.0)
    core.update_host(make_report("disabled", enabled=False), 100.0)
    core.update_host(make_report("full", instances=["x", "y"]), 100.0)
    core.update_host(make_report("busy", num_io_ops=3), 100.0)
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(make_spec("vm-1"), 100.0 + DOWN)
    assert caught.value.filter_counts == {
        "ComputeFilter": 2,
        "NumInstancesFilter": 1,
        "IoOpsFilter": 1,
    }
    with pytest.raises(ValueError, match="'RamFilter' is not a row-local filter"):
        core.table.row_local_part("RamFilter")


def _reported_ratios(core: SchedulerCore, host: str) -> tuple[object, ...]:
    columns = capture(core).host_columns()
    at = columns["host"].index(host)
    fields = ("ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio")
    return tuple(columns[field][at] for field in fields)


@pytest.mark.parametrize("ratio", [1.0, 2.0])  # the configured one, and another
def test_a_report_without_ratios_drops_the_ratios_the_last_one_carried(ratio: float) -> None:
    core = make_core()
    core.update_host(make_report("h1", ram_allocation_ratio=ratio), 1.0)
    assert _reported_ratios(core, "h1") == (ratio, None, None)
    core.update_host(make_report("h1", generation=2), 2.0)
    assert _reported_ratios(core, "h1") == (None, None, None)  # a snapshot keeps none


def test_a_cpu_ratio_alone_in_a_large_batch_of_reports_counts() -> None:
    core = make_core(make_config(cpu_allocation_ratio=1.0))
    reports = [make_report(f"h{i}", vcpus=4, vcpus_used=3) for i in range(9)]
    reports[4] = make_report("h4", vcpus=4, vcpus_used=3, cpu_allocation_ratio=4.0)
    assert core.update_hosts(reports, 1.0) == [True] * 9
    # 4 vCPUs fit on h4 only (16 - 3 left), not on the hosts at the configured 1.0 (1 left)
    (selection,) = core.select_destinations(make_spec("vm-1", vcpus=4), 1.0)
    assert selection.host == "h4"


def test_an_aggregate_ratio_of_zero_is_a_ratio_and_the_host_takes_nothing() -> None:
    # Nova's validate_num_values reads "0" as 0.0 (see test_core_aggregates'
    # test_aggregate_filter_ratio_of_zero); a value that is not finite falls back
    config = make_config(enabled_filters=["ComputeFilter", "AggregateRamFilter"])
    core = make_core(config)
    core.update_host(make_report("h1", memory_mb=1024), 1.0)
    core.create_aggregate("zero", {"ram_allocation_ratio": "0"}, ("h1",))
    with pytest.raises(NoValidHost, match="AggregateRamFilter removed 1"):
        core.select_destinations(make_spec("vm-1", memory_mb=1), 1.0)
    core.update_aggregate("zero", {"ram_allocation_ratio": "inf"})  # the configured 1.0
    assert core.select_destinations(make_spec("vm-1", memory_mb=1000), 1.0)[0].host == "h1"


def test_a_requested_destination_host_that_is_not_known_takes_no_host() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    spec = make_spec("vm-1", requested_destination=Destination(host="nowhere"))
    with pytest.raises(NoValidHost, match="RequestedDestination removed 1"):
        core.select_destinations(spec, 1.0)


def test_a_replayed_claim_is_charged_to_its_own_host_only() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    spec = make_spec("vm-1", memory_mb=1000)
    selection = Selection(instance_uuid="vm-1", host="h2", alternates=["h1"])
    core.restore_claims(spec, [selection], 2.0)
    assert (_free_ram(core, "h1"), _free_ram(core, "h2")) == (4096, 3096)
    assert core.ledger.claims["vm-1"].row == core.table.row_of["h2"]


class _Scaled:
    """A plug-in weigher (not a table column) with Nova's minval 0."""

    name = "Scaled"
    multiplier = 1.0
    minval = 0.0

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.float64]:
        return np.array([self.values.get(n or "", 0.0) for n in table.name_of[: table.n]])


def test_a_plug_in_weighers_minval_is_its_floor() -> None:
    # RAM: a 1.0, b 0.5. Scaled with floor 0: a 0.75, b 1.0 (a wins, 1.75 to 1.5);
    # without the floor (lo 15): a 0, b 1 (b would win, 1.0 to 1.5)
    config = make_config(cpu_weight_multiplier=0.0, disk_weight_multiplier=0.0)
    core = make_core(config, weighers=[_Scaled({"a": 15.0, "b": 20.0})])
    core.update_host(make_report("a", memory_mb=2000), 1.0)
    core.update_host(make_report("b", memory_mb=1000), 1.0)
    assert core.select_destinations(make_spec("vm-1", memory_mb=100), 1.0)[0].host == "a"


def test_a_host_that_fails_row_ok_is_never_ranked_on_the_full_mask_path() -> None:
    # Only the I/O weigher (multiplier -1): every passing host weighs below 0.
    # A disabled host and a request with ignore_hosts (a mask, most hosts
    # passing: the full-table ranking) get the least busy enabled host and two
    # alternates, none disabled or ignored.
    config = make_config(
        ram_weight_multiplier=0.0,
        cpu_weight_multiplier=0.0,
        disk_weight_multiplier=0.0,
        max_attempts=3,
    )
    core = make_core(config)
    core.update_host(make_report("off", enabled=False), 1.0)
    for i in range(5):
        core.update_host(make_report(f"h{i}", num_io_ops=i + 1), 1.0)
    spec = make_spec("vm-1", ignore_hosts=["h0"])
    (selection,) = core.select_destinations(spec, 1.0)
    assert (selection.host, selection.alternates) == ("h1", ["h2", "h3"])


def test_a_repeat_with_other_extra_specs_is_refused_naming_extra_specs() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1", extra_specs={"ssd": "true"}), 1.0)
    with pytest.raises(InvalidRequest, match=r'extra_specs \{"ssd": "true"\} then, none now'):
        core.select_destinations(make_spec("vm-1"), 2.0)


def test_a_requested_destination_node_that_is_not_known_is_named() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    spec = make_spec("vm-1", requested_destination=Destination(node="no-such-node"))
    with pytest.raises(NoValidHost, match="requested_destination node 'no-such-node' is not known"):
        core.select_destinations(spec, 1.0)


def _through_a_snapshot(core: SchedulerCore) -> SchedulerCore:
    again = make_core(core.config)
    restore(again, encode(capture(core)))
    return again


def test_a_reschedule_after_a_snapshot_still_keeps_the_claims_server_group() -> None:
    # vm-b, vm-a and vm-c in one anti-affinity group, one per host; vm-a's one
    # alternate (h3) now holds vm-c. The snapshot keeps no request, so the
    # group comes from the claim itself: the alternate is refused.
    core = make_core(make_config(max_attempts=2))
    for host in ("h1", "h2", "h3"):
        core.update_host(make_report(host), 1.0)
    group = ("g1", "anti-affinity")
    assert core.select_destinations(make_spec("vm-b", group=group), 1.0)[0].host == "h1"
    (placed,) = core.select_destinations(make_spec("vm-a", group=group), 1.0)
    assert (placed.host, placed.alternates) == ("h2", ["h3"])
    assert core.select_destinations(make_spec("vm-c", group=group), 1.0)[0].host == "h3"
    again = _through_a_snapshot(core)
    with pytest.raises(MaxRetriesExceeded):
        again.reschedule("vm-a", "h2", 2.0)


def test_an_open_move_survives_a_snapshot_and_confirms_after_it() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    source = core.select_destinations(make_spec("vm-a", memory_mb=3000), 1.0)[0].host
    moved = core.move("vm-a", "mig-1", None, 2.0)
    assert moved.host != source
    again = _through_a_snapshot(core)
    assert again.digest() == core.digest()
    assert _free_ram(again, source) == 1096  # the source still held
    assert again.confirm_move("mig-1", 3.0)
    assert _free_ram(again, source) == 4096


def test_a_same_host_resize_listed_by_its_host_survives_a_snapshot_with_both_flavors_held() -> None:
    core = make_core()
    core.update_host(make_report("h1", memory_mb=8192), 1.0)
    core.select_destinations(make_spec("vm-a", memory_mb=1000), 1.0)
    bigger = make_spec("vm-a", memory_mb=2000)
    assert core.move("vm-a", "mig-1", bigger, 2.0, allow_same_host=True).host == "h1"
    # the host lists the instance, at its old flavor: both flavors stay held
    core.update_host(
        make_report("h1", generation=2, memory_mb=8192, memory_mb_used=1000, instances=["vm-a"]),
        3.0,
    )
    held = _free_ram(core, "h1")
    assert held == 8192 - 1000 - 2000
    again = _through_a_snapshot(core)
    assert _free_ram(again, "h1") == held
    assert again.digest() == core.digest()


# -- survivors of the mutation sample after preemption (make mutate, 5,654 mutants) --


def _anti_affine_trio() -> SchedulerCore:
    """g1 on h1, g2 on h2 (alternate h3), g3 then on h3: all in anti-affinity group G."""
    core = make_core(make_config(max_attempts=3))
    for host, memory in (("h1", 8192), ("h2", 6144), ("h3", 4096)):
        core.update_host(make_report(host, memory_mb=memory), now=0.0)
    group = ("G", "anti-affinity")
    for uuid, host in (("g1", "h1"), ("g2", "h2")):
        [placed] = core.select_destinations(make_spec(uuid, group=group), now=1.0)
        assert placed.host == host
    assert core.ledger.claims["g2"].alternates == ("h3",)
    [third] = core.select_destinations(make_spec("g3", group=group), now=1.0)
    assert third.host == "h3"
    return core


def test_a_reschedule_without_the_kept_request_still_keeps_the_group_rule() -> None:
    core = _anti_affine_trio()
    core._requests.pop("g2")  # as after a restart from a format-5 snapshot, or 10,000 later
    with pytest.raises(MaxRetriesExceeded):  # h3 runs g3, of the same anti-affinity group
        core.reschedule("g2", "h2", now=2.0)


def test_restored_requests_are_the_ones_a_reschedule_asks() -> None:
    core = make_core()
    for host, zone in (("h1", "z1"), ("h2", "z1"), ("h3", "z2")):
        core.update_host(make_report(host, availability_zone=zone), now=0.0)
    spec = make_spec("vm", availability_zone="z1")
    [placed] = core.select_destinations(spec, now=1.0)
    kept = core.kept_requests()
    assert kept == {"vm": spec}
    core._requests.clear()
    core.restore_requests(kept.items())
    assert core.kept_requests() == {"vm": spec}
    # the alternate in z1 passes; the claim's resources alone would take any zone
    other = next(h for h in ("h1", "h2") if h != placed.host)
    assert core.reschedule("vm", placed.host, now=2.0).host == other


def test_a_reschedule_keeps_the_requested_node() -> None:
    core = make_core()
    for host in ("h1", "h2"):
        core.update_host(make_report(host, node="n1"), now=0.0)
    spec = make_spec("vm", requested_destination=Destination(node="n1"))
    [placed] = core.select_destinations(spec, now=1.0)
    other = next(h for h in ("h1", "h2") if h != placed.host)
    core.update_host(make_report(other, 2, node="n2"), now=1.5)  # moved to another node
    with pytest.raises(MaxRetriesExceeded):
        core.reschedule("vm", placed.host, now=2.0)


def test_a_move_names_each_difference_of_a_reused_migration_uuid() -> None:
    core = make_core()
    for host in ("h1", "h2"):
        core.update_host(make_report(host), now=0.0)
    core.select_destinations(make_spec("vm"), now=1.0)
    core.move("vm", "mig", make_spec("vm", memory_mb=1024), now=2.0)
    with pytest.raises(InvalidRequest) as raised:
        core.move("vm", "mig", make_spec("vm", memory_mb=2048), now=3.0, allow_same_host=True)
    message = str(raised.value)
    assert "allow_same_host false then, true now; spec {" in message
    assert '"memory_mb": 2048, "vcpus": 1} now; resend the original move unchanged' in message


def test_plan_of_a_placed_instance_points_to_where() -> None:
    core = make_core()
    core.update_host(make_report("h1"), now=0.0)
    core.select_destinations(make_spec("vm"), now=1.0)
    with pytest.raises(InvalidRequest) as raised:
        core.plan(make_spec("vm"), now=2.0)
    assert str(raised.value).endswith(
        "plan a request not placed yet (`where` shows where a placed instance is)"
    )


def test_a_batch_of_reports_records_each_hosts_node() -> None:
    core = make_core()
    # eight or more distinct hosts: the batch path (fewer go one by one)
    reports = [make_report("h1", node="n1"), *(make_report(f"x{i}") for i in range(8))]
    assert core.update_hosts(reports, now=0.0) == [True] * 9
    assert core.table.rows_of_node("n1") == [core.table.row_of["h1"]]
    [placed] = core.select_destinations(make_spec("vm", force_nodes=["n1"]), now=1.0)
    assert placed.host == "h1"


def test_a_host_that_names_itself_as_its_node_is_found_by_that_name() -> None:
    core = make_core()
    core.update_host(make_report("h1", node="h1"), now=0.0)
    core.update_host(make_report("h2"), now=0.0)
    assert core.table.rows_of_node("h1") == [core.table.row_of["h1"]]
    [placed] = core.select_destinations(make_spec("vm", force_nodes=["h1"]), now=1.0)
    assert placed.host == "h1"


def test_explain_normalizes_from_the_lowest_value_up() -> None:
    class Spread:
        """A plug-in weigher without minval: normalized between its lowest and highest."""

        name = "Spread"
        multiplier = 1.0

        def weigh_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.float64]:
            return np.array([1.0, 2.0, 3.0])[: table.n]

    config = make_config(
        ram_weight_multiplier=0.0,
        cpu_weight_multiplier=0.0,
        disk_weight_multiplier=0.0,
        io_ops_weight_multiplier=0.0,
    )
    core = make_core(config, weighers=[Spread()])
    for host in ("h1", "h2", "h3"):
        core.update_host(make_report(host), now=0.0)
    plan = core.plan(make_spec("vm"), now=1.0)
    weights = {c.host: c.weights["Spread"] for c in plan.instances[0].candidates}
    assert weights == {"h3": 1.0, "h2": 0.5, "h1": 0.0}


def test_the_soft_affinity_weigher_is_named_as_nova_names_it() -> None:
    core = make_core()
    for host in ("h1", "h2"):
        core.update_host(make_report(host), now=0.0)
    plan = core.plan(make_spec("vm", group=("g", "soft-affinity")), now=1.0)
    assert "ServerGroupSoftAffinityWeigher" in plan.instances[0].candidates[0].weights


def test_a_no_valid_host_after_a_failed_preemption_keeps_its_filter_counts() -> None:
    core = make_core(make_config(preemption=True))
    core.update_host(make_report("h1", memory_mb=1024), now=0.0)
    with pytest.raises(NoValidHost) as raised:
        core.select_destinations(make_spec("vm", memory_mb=2048, priority=5), now=1.0)
    assert raised.value.filter_counts == {"RamFilter": 1}
    assert "no host could be freed by preempting" in str(raised.value)


def test_with_every_weigher_off_the_shortcut_never_takes_a_row_that_fails() -> None:
    config = make_config(
        ram_weight_multiplier=0.0,
        cpu_weight_multiplier=0.0,
        disk_weight_multiplier=0.0,
        io_ops_weight_multiplier=0.0,
    )
    core = make_core(config)
    core.update_host(make_report("off", enabled=False), now=0.0)
    core.update_host(make_report("on"), now=0.0)
    assert core.select_destinations(make_spec("vm"), now=1.0)[0].host == "on"


def test_the_lowest_value_of_a_row_that_fails_the_request_is_not_the_floor_of_the_rest() -> None:
    # a (zone z9) has the lowest free RAM, below the RAM weigher's floor (0): it
    # passes row_ok but not this request, so RAM is normalized over b and c alone
    config = make_config(
        ram_allocation_ratio=1.5,
        cpu_allocation_ratio=1.0,
        disk_weight_multiplier=0.0,
        io_ops_weight_multiplier=0.0,
    )
    core = make_core(config)
    core.update_host(
        make_report("a", memory_mb=4096, memory_mb_used=6000, availability_zone="z9"), now=0.0
    )
    core.update_host(make_report("b", memory_mb=2000, vcpus=7), now=0.0)
    core.update_host(make_report("c", memory_mb=1000, vcpus=10), now=0.0)
    assert core.host_states(1.0)["a"].free_ram_mb == 4096 - 6000
    # RAM over b, c: b 1.0, c 0.5; CPU: b 0.7, c 1.0; b wins 1.7 to 1.5. Normalized
    # from a's -1,904 instead, c would win (1.0 + 0.70 against 0.74 + 1.0).
    spec = make_spec("vm", memory_mb=1, availability_zone="nova")
    assert core.select_destinations(spec, now=1.0)[0].host == "b"


# -- survivors of a second sample (make mutate MUTATE_ARGS="--seed 1 --sample 150") --


def test_an_empty_extra_spec_asks_for_an_empty_value() -> None:
    from actorsched.core.aggregates import match_extra_spec

    assert match_extra_spec("", "") is True
    assert match_extra_spec("ssd", "") is False


def test_an_aggregate_may_change_its_own_zone_and_a_conflict_says_why() -> None:
    core = make_core()
    core.update_host(make_report("h1"), now=0.0)
    core.create_aggregate("a", {"availability_zone": "z1"}, ["h1"])
    core.update_aggregate("a", {"availability_zone": "z2"})  # its own zone: no conflict
    assert core.host_states(1.0)["h1"].availability_zone == "z2"
    with pytest.raises(InvalidRequest) as raised:
        core.create_aggregate("b", {"availability_zone": "z3"}, ["h1"])
    assert str(raised.value).startswith(
        "host 'h1' is in availability zone 'z2' by host aggregate 'a', so host aggregate "
        "'b' cannot put it in 'z3' (a host is in one zone, as Nova's aggregate API keeps "
        "it); nothing "
    )


def test_an_evacuation_hold_dropped_by_a_report_is_logged_with_its_migration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = make_core()
    for host in ("h1", "h2"):
        core.update_host(make_report(host), now=0.0)
    [placed] = core.select_destinations(make_spec("vm"), now=1.0)
    core.move("vm", "evac", None, now=2.0, evacuate=True)
    with caplog.at_level("INFO", logger="actorsched.core"):
        core.update_host(make_report(placed.host, 2), now=3.0)
    assert f"evacuated instance vm no longer on {placed.host}: migration evac hold dropped" in [
        r.getMessage() for r in caplog.records
    ]


def test_a_host_states_command_answers_its_page() -> None:
    from actorsched.core import GetHostStates

    core = make_core()
    for host in ("h1", "h2", "h3"):
        core.update_host(make_report(host), now=0.0)
    image = core.handle(GetHostStates(start=1, limit=1), now=1.0)
    assert list(image.states()) == ["h2"]


def test_max_retries_exceeded_names_its_instance() -> None:
    core = make_core(make_config(max_attempts=1))  # no alternates
    core.update_host(make_report("h1"), now=0.0)
    core.select_destinations(make_spec("vm"), now=1.0)
    with pytest.raises(MaxRetriesExceeded) as raised:
        core.reschedule("vm", "h1", now=2.0)
    assert raised.value.instance_uuid == "vm"


def test_replaying_selections_goes_on_past_one_already_held() -> None:
    core = make_core()
    core.update_host(make_report("h1"), now=0.0)
    spec = make_spec("a", "b")
    core.restore_claims(spec, [Selection(instance_uuid="a", host="h1")], now=1.0)
    both = [Selection(instance_uuid="a", host="h1"), Selection(instance_uuid="b", host="h1")]
    core.restore_claims(spec, both, now=1.0)
    assert set(core.claims()) == {"a", "b"}


def test_a_selective_request_ranks_its_few_passing_hosts_best_first() -> None:
    # 3 of 7 hosts in zone z1: under half pass, so the gathered copy is ranked;
    # 20 attempts want more rows than the argmax loop takes (it sorts instead)
    core = make_core(make_config(max_attempts=20))
    for index in range(4):
        core.update_host(make_report(f"other{index}"), now=0.0)
    for host, memory in (("small", 2048), ("big", 8192), ("mid", 4096)):
        core.update_host(make_report(host, memory_mb=memory, availability_zone="z1"), now=0.0)
    [placed] = core.select_destinations(make_spec("vm", availability_zone="z1"), now=1.0)
    assert (placed.host, placed.alternates) == ("big", ["mid", "small"])


def test_a_no_valid_host_lists_at_most_ten_unknown_forced_hosts() -> None:
    core = make_core()
    core.update_host(make_report("h1"), now=0.0)
    unknown = [f"ghost{i:02d}" for i in range(11)]
    with pytest.raises(NoValidHost) as raised:
        core.select_destinations(make_spec("vm", force_hosts=unknown), now=1.0)
    assert f"force_hosts {unknown[:10]} name no known host" in str(raised.value)
