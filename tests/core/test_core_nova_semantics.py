"""Nova 18.0.0's semantics where actorsched once differed, each pinned by a test
named after the Nova behaviour (nova/weights.py, nova/scheduler/weights/,
nova/scheduler/filters/, filter_scheduler.py, host_manager.py); and Nova
34.0.0's weighers (the CPU weigher's own ratio, per-aggregate multipliers),
with the expected values of Nova 34's own unit tests. Where Nova 34's rules
differ from Nova 18's (a weight below the minval, a class asked 0 of, a host
reporting 0 of a class, the zone as a request filter), a test with
``nova_release=34`` (:data:`NOVA_34`) pins Nova 34's beside the Nova 18 one.

Every placement test runs through each ranking path of the core (the
unfiltered shortcut, the full mask, the gathered copy) and through the
Nova-style baseline chain, so no fast path keeps an older rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import pytest
from conftest import make_config, make_core, make_report, make_spec, ram_only_config
from numpy.typing import NDArray

from actorsched import HostReport, NoValidHost, RequestSpec, SchedulerConfig, ServerGroup
from actorsched.baselines import NovaHostState, NovaStyleChain
from actorsched.core import HostTable, PlacementContext, SchedulerCore

MB = 1024
# the settings of the tests of Nova 34's rules where Nova 18's differ
NOVA_34: dict[str, object] = {"nova_release": 34}


def _shortcut(core: SchedulerCore) -> None:
    pass


def _full_mask(core: SchedulerCore) -> None:
    core.ranker.shortcut = False
    core.ranker.compress_below = 0.0


def _gathered(core: SchedulerCore) -> None:
    core.ranker.shortcut = False
    core.ranker.compress_below = 2.0  # always weigh a gathered copy of the passing rows


PATHS = pytest.mark.parametrize("path", [_shortcut, _full_mask, _gathered])


def _place(
    config: SchedulerConfig,
    reports: list[HostReport],
    spec: RequestSpec,
    path: Callable[[SchedulerCore], None],
    **kwargs: object,
) -> list[str]:
    core = make_core(config, **kwargs)
    path(core)
    for report in reports:
        core.update_host(report, now=0.0)
    return [s.host for s in core.select_destinations(spec, now=1.0)]


def _chain_order(
    config: SchedulerConfig, reports: list[HostReport], spec: RequestSpec
) -> list[str]:
    hosts = [NovaHostState.from_report(r, now=0.0) for r in reports]
    return [h.host for h in NovaStyleChain(config).select(spec, hosts, now=1.0)]


class Fixed:
    """A plug-in weigher with fixed raw values per host (plain min-max: no minval)."""

    def __init__(self, values: dict[str, float], multiplier: float) -> None:
        self.name = "Fixed"
        self.multiplier = multiplier
        self.values = values

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.float64] | None:
        raw = np.zeros(table.n, dtype=np.float64)
        for host, row in table.row_of.items():
            raw[row] = self.values.get(host, 0.0)
        return raw


# -- weight normalization: minval = 0 (nova/weights.py, weights/ram.py ...) ---------------

# The example: free RAM 10, 8 and 6 GB, free disk 700, 1,000 and 0 GB.
ABC = [
    make_report("A", memory_mb=16 * MB, memory_mb_used=6 * MB, local_gb=1000, local_gb_used=300),
    make_report("B", memory_mb=16 * MB, memory_mb_used=8 * MB, local_gb=1000, local_gb_used=0),
    make_report("C", memory_mb=16 * MB, memory_mb_used=10 * MB, local_gb=1000, local_gb_used=1000),
]


@PATHS
def test_nova_weighers_normalize_from_zero_so_default_weighers_pick_b(
    path: Callable[[SchedulerCore], None],
) -> None:
    # RAM 1.0, 0.8, 0.6 and disk 0.7, 1.0, 0.0 (value / highest): B wins with 1.8.
    # Scaled between lowest and highest (RAM 1, 0.5, 0) A would win with 1.7.
    spec = make_spec("vm1", memory_mb=MB, disk_gb=0)
    assert _place(make_config(), ABC, spec, path) == ["B"]
    assert _chain_order(make_config(), ABC, spec)[0] == "B"


@PATHS
def test_nova_ram_weight_is_free_ram_over_the_highest(
    path: Callable[[SchedulerCore], None],
) -> None:
    # free RAM 20 and 50 MB weigh 0.4 and 1.0; a plug-in adds 0.7 to x: x 1.1 > y 1.0.
    # (Between lowest and highest x would weigh 0.0 + 0.7 and lose.)
    reports = [
        make_report("x", memory_mb=20, local_gb=10),
        make_report("y", memory_mb=50, local_gb=10),
    ]
    spec = make_spec("vm1", memory_mb=0, vcpus=0, disk_gb=0)
    fixed = Fixed({"x": 1.0}, multiplier=0.7)
    assert _place(ram_only_config(), reports, spec, path, weighers=[fixed]) == ["x"]


@PATHS
def test_nova_negative_free_ram_lowers_the_minimum_to_itself(
    path: Callable[[SchedulerCore], None],
) -> None:
    # Nova 18 lowers minval to a negative value (test_ram_filter_negative: that host
    # weighs 0): free RAM 1000, 0, -1000 weigh 1.0, 0.5, 0.0 (from -1000 to 1000),
    # and the plug-in's 0.7 makes q win with 1.2. Clipping at 0 (Nova 22) would give
    # q 0.0 + 0.7 and pick p.
    config = ram_only_config(ram_allocation_ratio=2.0)
    reports = [
        make_report("p", memory_mb=2000, memory_mb_used=1000),
        make_report("q", memory_mb=2000, memory_mb_used=2000),
        make_report("neg", memory_mb=2000, memory_mb_used=3000),
    ]
    spec = make_spec("vm1", memory_mb=100, vcpus=0, disk_gb=0)
    fixed = Fixed({"q": 1.0}, multiplier=0.7)
    assert _place(config, reports, spec, path, weighers=[fixed]) == ["q"]
    # without the plug-in the negative host weighs least, the freest most
    order = _chain_order(config, reports, spec)
    assert order == ["p", "q", "neg"]


@PATHS
def test_nova_negative_free_ram_weighs_as_none_free(
    path: Callable[[SchedulerCore], None],
) -> None:
    # Nova 34 clamps a raw weight below the RAMWeigher's minval 0 to 0 (nova/weights.py
    # weigh_objects: max(weight, minval)) and normalizes from 0: free RAM 1000, 0 and
    # -1000 weigh 1.0, 0.0 and 0.0, so the plug-in's 0.7 for q (0.7) does not beat p
    # (1.0). Nova 18 lowered the minimum to -1000 instead (1.0, 0.5, 0.0: q won, 1.2).
    config = ram_only_config(ram_allocation_ratio=2.0, nova_release=34)
    reports = [
        make_report("p", memory_mb=2000, memory_mb_used=1000),
        make_report("q", memory_mb=2000, memory_mb_used=2000),
        make_report("neg", memory_mb=2000, memory_mb_used=3000),
    ]
    spec = make_spec("vm1", memory_mb=100, vcpus=0, disk_gb=0)
    fixed = Fixed({"q": 1.0}, multiplier=0.7)
    assert _place(config, reports, spec, path, weighers=[fixed]) == ["p"]
    host, weights = _weighed(
        config.model_copy(update={"max_attempts": 3}), reports, spec, path, weighers=[fixed]
    )
    assert host == "p"
    assert weights == pytest.approx({"p": 1.0, "q": 0.7, "neg": 0.0})
    # without the plug-in the negative host weighs least, the freest most
    order = _chain_order(config, reports, spec)
    assert order == ["p", "q", "neg"]


def _negative_ram_hosts() -> list[HostReport]:
    """test_weights_ram.py test_ram_filter_negative: _get_all_hosts and a host of
    8192 MB with -512 MB free (its own ratio 1.5 lets it pass the RAM filter)."""
    negative = make_report(
        "negative", memory_mb=8192, memory_mb_used=8704, ram_allocation_ratio=1.5
    )
    return [*_ram_hosts(), negative]


def _negative_cpu_hosts() -> list[HostReport]:
    """test_weights_cpu.py test_negative_host: _get_all_hosts and a host of 4 vCPUs
    using 6 at ratio 1.0 (-2 free)."""
    negative = make_report("negative", vcpus=4, vcpus_used=6, cpu_allocation_ratio=1.0)
    return [*_cpu_hosts(), negative]


def _negative_disk_hosts() -> list[HostReport]:
    """test_weights_disk.py test_disk_filter_negative: _get_all_hosts and a host of
    80 GB with -5 GB (-5120 MB) free (its own ratio 1.5 lets it pass the disk filter)."""
    negative = make_report("negative", local_gb=80, local_gb_used=85, disk_allocation_ratio=1.5)
    return [*_disk_hosts(), negative]


@PATHS
@pytest.mark.parametrize(
    ("option", "hosts", "highest"),
    [
        ("ram_weight_multiplier", _negative_ram_hosts, 8192),  # test_ram_filter_negative
        ("cpu_weight_multiplier", _negative_cpu_hosts, 16),  # test_negative_host
        ("disk_weight_multiplier", _negative_disk_hosts, 80),  # test_disk_filter_negative
    ],
)
def test_nova_negative_host_weighs_zero_and_the_rest_from_zero(
    path: Callable[[SchedulerCore], None],
    option: str,
    hosts: Callable[[], list[HostReport]],
    highest: int,
) -> None:
    # Nova 34's tests: host4 wins with weight 1 and the negative host loses with 0.
    # nova/weights.py gives the rest too: with the negative value clamped to the
    # weigher's minval 0 and normalize(minval=0), each weighs its value over host4's
    # (free RAM 512 MB weighs 512 / 8192; Nova 18's minimum of -512 gave 1024 / 8704).
    config = make_config(**{**ONE_WEIGHER, option: 1.0, "max_attempts": 5, **NOVA_34})
    reports = hosts()
    host, weights = _weighed(config, reports, make_spec("vm1", **NOTHING), path)
    assert host == "host4"
    assert weights["host4"] == pytest.approx(1.0)
    assert weights["negative"] == 0.0
    free = {
        "ram_weight_multiplier": {"host1": 512, "host2": 1024, "host3": 3072},
        "cpu_weight_multiplier": {"host1": 0, "host2": 2, "host3": 6},
        "disk_weight_multiplier": {"host1": 5, "host2": 10, "host3": 30},
    }[option]
    assert {h: weights[h] for h in free} == pytest.approx(
        {h: value / highest for h, value in free.items()}
    )


@PATHS
def test_nova_a_negative_host_with_an_aggregate_multiplier_still_weighs_zero(
    path: Callable[[SchedulerCore], None],
) -> None:
    # both at once: the clamp (weigh_objects) and a multiplier per host
    # (get_weight_multiplier) on the normalized, clamped value: -512 MB free weighs
    # 2.0 x 0, 1024 MB 2.0 x 0.25, and 4096 MB 1.0 x 1.0
    config = make_config(
        **{**ONE_WEIGHER, "ram_weight_multiplier": 1.0, "max_attempts": 3, **NOVA_34}
    )
    reports = [
        make_report("negative", memory_mb=4096, memory_mb_used=4608, ram_allocation_ratio=1.5),
        make_report("small", memory_mb=4096, memory_mb_used=3072),
        make_report("big", memory_mb=4096),
    ]
    double: Aggregates = [("double", {"ram_weight_multiplier": "2.0"}, ["negative", "small"])]
    host, weights = _weighed(config, reports, make_spec("vm1", **NOTHING), path, double)
    assert host == "big"
    assert weights == pytest.approx({"big": 1.0, "small": 0.5, "negative": 0.0})


@PATHS
def test_nova_hosts_all_at_or_below_the_minval_weigh_zero(
    path: Callable[[SchedulerCore], None],
) -> None:
    # every free RAM at or below 0: clamped, all equal the minval, normalize gives 0
    # (minval == maxval); the CPU weigher alone decides (Nova 18: -1000 weighed 0,
    # -500 weighed 1.0, and "b" won on RAM)
    config = make_config(ram_allocation_ratio=2.0, max_attempts=2, **NOVA_34)
    reports = [
        make_report("a", memory_mb=2000, memory_mb_used=3000, vcpus=8),
        make_report("b", memory_mb=2000, memory_mb_used=2500, vcpus=4),
    ]
    spec = make_spec("vm1", memory_mb=100, vcpus=1, disk_gb=0)
    assert _place(config, reports, spec, path) == ["a"]
    host, weights = _weighed(config, reports, spec, path)
    assert host == "a"
    assert weights == pytest.approx({"a": 1.0 + 1.0, "b": 0.5 + 1.0})


@PATHS
def test_nova_equal_positive_values_all_weigh_one_and_all_zero_weigh_zero(
    path: Callable[[SchedulerCore], None],
) -> None:
    # Equal values weigh 1.0 each with minval 0 (0 only when all are 0); either way
    # the weigher cannot decide, and the plug-in does.
    reports = [make_report(h, memory_mb=4 * MB) for h in ("e1", "e2", "e3")]
    spec = make_spec("vm1", memory_mb=MB, disk_gb=0)
    fixed = Fixed({"e2": 1.0}, multiplier=0.01)
    assert _place(make_config(), reports, spec, path, weighers=[fixed]) == ["e2"]
    zeros = [make_report(h, memory_mb=0, vcpus=0, local_gb=0) for h in ("z1", "z2")]
    nothing = make_spec("vm1", memory_mb=0, vcpus=0, disk_gb=0)
    fixed = Fixed({"z2": 1.0}, multiplier=0.01)
    assert _place(make_config(), zeros, nothing, path, weighers=[fixed]) == ["z2"]


def test_nova_io_ops_weigher_counts_from_zero() -> None:
    # IoOps 1 and 2 weigh 0.5 and 1.0 (times -1.0): -0.5 and -1.0. The plug-in
    # gives b 0.6: b -0.4 beats a -0.5. Between lowest and highest: a 0, b -0.4.
    config = make_config(
        ram_weight_multiplier=0.0, cpu_weight_multiplier=0.0, disk_weight_multiplier=0.0
    )
    reports = [make_report("a", num_io_ops=1), make_report("b", num_io_ops=2)]
    fixed = Fixed({"b": 1.0}, multiplier=0.6)
    for path in (_shortcut, _full_mask, _gathered):
        assert _place(config, reports, make_spec("vm1"), path, weighers=[fixed]) == ["b"]


# -- resource filters: no overcommit against itself, CoreFilter fails safe -----------------


@PATHS
@pytest.mark.parametrize(
    ("ratios", "report", "resource", "total", "filter_name"),
    [
        ({"ram_allocation_ratio": 2.0}, {"memory_mb": 512}, "memory_mb", 512, "RamFilter"),
        ({"cpu_allocation_ratio": 2.0}, {"vcpus": 1}, "vcpus", 1, "CoreFilter"),
        ({"disk_allocation_ratio": 10.0}, {"local_gb": 12}, "disk_gb", 12, "DiskFilter"),
    ],
)
def test_nova_instance_may_not_overcommit_against_itself(
    path: Callable[[SchedulerCore], None],
    ratios: dict[str, float],
    report: dict[str, int],
    resource: str,
    total: int,
    filter_name: str,
) -> None:
    # 1,024 MB on a 512 MB host at ratio 2.0; 2 vCPUs on 1 at 2.0; 13 GB on 12 at 10:
    # the ratio would leave room, but one instance may not be larger than the host.
    config = make_config(**ratios)
    small = {"memory_mb": 1, "vcpus": 1, "disk_gb": 1}
    host = make_report("h1", **report)
    over = make_spec("vm1", **{**small, resource: total + 1})
    core = make_core(config)
    path(core)
    core.update_host(host, now=0.0)
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(over, now=1.0)
    assert info.value.filter_counts == {filter_name: 1}
    with pytest.raises(NoValidHost):
        _chain_order(config, [host], over)
    # as large as the host itself is fine, and the ratio still counts past it
    assert _place(config, [host], make_spec("vm1", **{**small, resource: total}), path) == ["h1"]
    two = make_spec("vm1", "vm2", **{**small, resource: total})
    assert _place(config, [host], two, path) == ["h1", "h1"]


@PATHS
def test_nova_core_filter_passes_a_host_reporting_zero_vcpus(
    path: Callable[[SchedulerCore], None],
) -> None:
    # "VCPUs not set; assuming CPU collection broken": the host passes whatever it uses
    broken = make_report("broken", vcpus=0, vcpus_used=5)
    spec = make_spec("vm1", vcpus=8)
    assert _place(make_config(), [broken], spec, path) == ["broken"]
    assert _chain_order(make_config(), [broken], spec) == ["broken"]
    # its other figures still count
    with pytest.raises(NoValidHost, match="RamFilter removed 1"):
        _place(make_config(), [broken], make_spec("vm1", memory_mb=8192), path)


@PATHS
@pytest.mark.parametrize(
    ("report", "asked", "filter_name"),
    [
        ({"vcpus": 0, "vcpus_used": 5}, "vcpus", "CoreFilter"),
        ({"memory_mb": 0}, "memory_mb", "RamFilter"),
        ({"local_gb": 0}, "disk_gb", "DiskFilter"),
    ],
)
def test_nova_a_host_reporting_zero_of_a_class_has_no_inventory_of_it(
    path: Callable[[SchedulerCore], None],
    report: dict[str, int],
    asked: str,
    filter_name: str,
) -> None:
    # Nova 34's libvirt driver reports no inventory of a class whose total is 0
    # (nova/tests/unit/virt/libvirt/test_driver.py test_update_provider_tree_zero_total:
    # "we omit various resources from inventory when there are zero total"), so
    # Placement names the host for no request asking any of it. (Nova 18's CoreFilter
    # passed a host of 0 vCPUs, "assuming CPU collection broken"; its chain still does.)
    config = make_config(**NOVA_34)
    host = make_report("zero", **report)
    spec = make_spec("vm1", **{"memory_mb": 0, "vcpus": 0, "disk_gb": 0, asked: 1})
    with pytest.raises(NoValidHost) as caught:
        _place(config, [host], spec, path)
    assert caught.value.filter_counts == {filter_name: 1}
    # a request asking none of it asks nothing of it: the host takes it
    nothing = make_spec("vm1", memory_mb=0, vcpus=0, disk_gb=0)
    assert _place(config, [host], nothing, path) == ["zero"]


@PATHS
@pytest.mark.parametrize(
    ("report", "asked"),
    [
        ({"local_gb": 100, "local_gb_used": 110}, "disk_gb"),
        ({"memory_mb": 4096, "memory_mb_used": 5000}, "memory_mb"),
        ({"vcpus": 4, "vcpus_used": 20}, "vcpus"),
    ],
)
def test_nova_a_class_asked_zero_of_is_not_asked(
    path: Callable[[SchedulerCore], None], report: dict[str, int], asked: str
) -> None:
    # Nova 34 leaves a class asked 0 of out of the Placement query
    # (nova/scheduler/utils.py ResourceRequest.from_request_spec: no DISK_GB for a boot
    # from volume, test_resource_request_from_request_spec_is_bfv; strip_zeros for any
    # other, test_resources_from_flavor_with_override: "Standard and custom zeroes
    # don't make it through"): a host used past its capacity of that class still takes
    # the request, and one asking any of it does not
    config = make_config(**NOVA_34)
    over = make_report("over", **report)
    other = {"memory_mb": 512, "vcpus": 1, "disk_gb": 1, asked: 0}
    assert _place(config, [over], make_spec("vm1", "vm2", **other), path) == ["over", "over"]
    with pytest.raises(NoValidHost, match="removed 1"):
        _place(config, [over], make_spec("vm1", **{**other, asked: 1}), path)


# -- host names in ignore_hosts match in any case (host_manager._strip_ignore_hosts) ---------


@PATHS
def test_nova_ignore_hosts_match_host_names_case_insensitively(
    path: Callable[[SchedulerCore], None],
) -> None:
    # the freest hosts are ignored under other spellings; every spelling of a name goes
    reports = [
        make_report("Node1", memory_mb=16 * MB),
        make_report("node1", memory_mb=12 * MB),
        make_report("NODE2", memory_mb=8 * MB),
        make_report("node3", memory_mb=4 * MB),
    ]
    spec = make_spec("vm1", ignore_hosts=["NODE1", "node2"])
    assert _place(make_config(), reports, spec, path) == ["node3"]
    assert _chain_order(make_config(), reports, spec) == ["node3"]
    core = make_core()
    path(core)
    for report in reports:
        core.update_host(report, now=0.0)
    with pytest.raises(NoValidHost, match="IgnoreHosts removed 4"):
        core.select_destinations(make_spec("vm1", ignore_hosts=["nOdE1", "Node2", "NODE3"]), 1.0)
    # a removed host's other spellings are still matched, and only they
    core.remove_host("Node1", now=1.0)
    [sel] = core.select_destinations(make_spec("vm2", ignore_hosts=["NODE1"]), now=1.0)
    assert sel.host == "NODE2"


@PATHS
def test_nova_force_hosts_match_in_any_case_force_nodes_and_aggregate_hosts_exactly(
    path: Callable[[SchedulerCore], None],
) -> None:
    # Nova 34's host manager lower-cases ignore_hosts and force_hosts on both sides
    # (_strip_ignore_hosts, _match_forced_hosts: test_host_manager.py
    # test_get_filtered_hosts_with_ignore_case_insensitive and
    # test_get_filtered_hosts_with_force_case_insensitive) but compares node names as
    # given (_match_forced_nodes: ``nodename not in nodes_to_force``), and an
    # aggregate's hosts are matched by name as stored (AggregateList.get_by_host:
    # ``AggregateHost.host == host``)
    reports = [
        make_report("Node1", memory_mb=4 * MB, node="Node1.example"),
        make_report("node2", memory_mb=16 * MB, node="NODE2.example"),
    ]
    core = make_core(
        make_config(enabled_filters=[*make_config().enabled_filters, "AggregateTypeAffinityFilter"])
    )
    path(core)
    for report in reports:
        core.update_host(report, now=0.0)
    placed = core.select_destinations(make_spec("vm1", force_hosts=["NODE1"]), 1.0)
    assert [s.host for s in placed] == ["Node1"]
    placed = core.select_destinations(make_spec("vm2", ignore_hosts=["NODE2"]), 1.0)
    assert [s.host for s in placed] == ["Node1"]
    placed = core.select_destinations(make_spec("vm3", force_nodes=["NODE2.example"]), 1.0)
    assert [s.host for s in placed] == ["node2"]
    with pytest.raises(NoValidHost, match=r"force_nodes \['node2.example'\] name no known"):
        core.select_destinations(make_spec("vm4", force_nodes=["node2.example"]), 1.0)
    # "node1" names no host of the aggregate filter: Node1 is in no aggregate
    core.create_aggregate("tiny", {"instance_type": "m1.tiny"}, ["node1", "NODE2"])
    assert core.host_states()["Node1"].aggregates == []
    placed = core.select_destinations(make_spec("vm5", flavor_name="m1.small"), 1.0)
    assert [s.host for s in placed] == ["node2"]


# -- a host with no zone is in default_availability_zone (AvailabilityZoneFilter) -------------


@PATHS
def test_nova_host_without_a_zone_is_in_the_default_availability_zone(
    path: Callable[[SchedulerCore], None],
) -> None:
    reports = [
        make_report("zoneless", memory_mb=16 * MB),
        make_report("in-nova", memory_mb=8 * MB, availability_zone="nova"),
        make_report("in-az1", memory_mb=32 * MB, availability_zone="az1"),
    ]
    spec = make_spec("vm1", "vm2", availability_zone="nova")
    assert _place(make_config(), reports, spec, path) == ["zoneless", "in-nova"]
    assert _chain_order(make_config(), reports, spec) == ["zoneless", "in-nova"]
    # the default is a setting; a request for another zone does not pass the zoneless host
    config = make_config(default_availability_zone="az1")
    assert _place(config, reports, spec, path) == ["in-nova", "in-nova"]
    assert _place(config, reports, make_spec("vm1", "vm2", availability_zone="az1"), path) == [
        "in-az1",
        "zoneless",
    ]
    # the default zone passes a zoneless host even when no host reported it by name
    alone = [make_report("zoneless")]
    assert _place(make_config(), alone, make_spec("vm1", availability_zone="nova"), path) == [
        "zoneless"
    ]
    with pytest.raises(NoValidHost, match="AvailabilityZoneFilter removed 1"):
        _place(make_config(), alone, make_spec("vm1", availability_zone="az9"), path)
    # what the host reported is kept as it was
    core = make_core()
    core.update_host(alone[0], now=0.0)
    assert core.host_states()["zoneless"].availability_zone is None


# -- nova_release 34: the zone is Nova 34's request filter map_az_to_placement_aggregate ---
# (nova/scheduler/request_filter.py; nova/tests/unit/scheduler/test_request_filter.py
# test_map_az, test_map_az_no_aggregates, test_map_az_no_hint)


@PATHS
def test_nova_the_default_zone_nothing_names_limits_nothing(
    path: Callable[[SchedulerCore], None],
) -> None:
    # test_map_az_no_aggregates: no aggregate of the zone, no member_of: any host, one of
    # another zone too (Nova 18's AvailabilityZoneFilter, the baseline chain, passed the
    # zoneless host only)
    reports = [
        make_report("zoneless", memory_mb=16 * MB),
        make_report("in-az1", memory_mb=32 * MB, availability_zone="az1"),
    ]
    nova34 = make_config(**NOVA_34)
    spec = make_spec("vm1", availability_zone="nova")
    assert _place(nova34, reports, spec, path) == ["in-az1"]
    assert _chain_order(nova34, reports, spec) == ["zoneless"]
    # no zone asked (test_map_az_no_hint): no limit either
    assert _place(nova34, reports, make_spec("vm1"), path) == ["in-az1"]
    # another zone that nothing names limits nothing too (map_az_to_placement_aggregate
    # finds no aggregate of it); under Nova 18's rules it passes no host
    alone = [make_report("zoneless")]
    config = make_config(default_availability_zone="az9", **NOVA_34)
    assert _place(config, alone, make_spec("vm1", availability_zone="az9"), path) == ["zoneless"]
    assert _place(nova34, alone, make_spec("vm1", availability_zone="az9"), path) == ["zoneless"]
    with pytest.raises(NoValidHost, match="AvailabilityZoneFilter removed 1"):
        _place(make_config(), alone, make_spec("vm1", availability_zone="az9"), path)
    # what the host reported is kept as it was
    core = make_core(nova34)
    core.update_host(alone[0], now=0.0)
    assert core.host_states()["zoneless"].availability_zone is None


@PATHS
def test_nova_a_zone_a_host_reports_counts_as_named_by_an_aggregate(
    path: Callable[[SchedulerCore], None],
) -> None:
    # test_map_az: a zone an aggregate names limits the request to its hosts. A host
    # that reports its zone (no aggregate) names it likewise, the default zone too:
    # then the zoneless host is not in it (Nova 18's filter passed it in "nova")
    reports = [
        make_report("zoneless", memory_mb=16 * MB),
        make_report("in-nova", memory_mb=8 * MB, availability_zone="nova"),
        make_report("in-az1", memory_mb=32 * MB, availability_zone="az1"),
    ]
    nova34 = make_config(**NOVA_34)
    spec = make_spec("vm1", "vm2", availability_zone="nova")
    assert _place(nova34, reports, spec, path) == ["in-nova", "in-nova"]
    az1 = make_spec("vm1", "vm2", availability_zone="az1")
    assert _place(nova34, reports, az1, path) == ["in-az1", "in-az1"]
    core = make_core(nova34)
    path(core)
    for report in reports:
        core.update_host(report, now=0.0)
    # an aggregate's zone is its host's over the one it reports
    core.create_aggregate("other", {"availability_zone": "az1"}, ["in-nova"])
    [selection] = core.select_destinations(make_spec("vm3", availability_zone="nova"), 1.0)
    assert selection.host == "in-az1"  # nothing names "nova" now: no limit
    with pytest.raises(NoValidHost, match="AvailabilityZoneFilter removed 1"):
        # az1 now has in-nova and in-az1: the zoneless host is out, the others too small
        core.select_destinations(make_spec("vm4", memory_mb=64 * MB, availability_zone="az1"), 1.0)


# -- alternates of a request of several instances (filter_scheduler._get_alternate_hosts) -----


@PATHS
def test_nova_alternates_are_chosen_after_every_instance_is_claimed(
    path: Callable[[SchedulerCore], None],
) -> None:
    # 2 instances, 3 equal hosts, max_attempts=3: Nova gives [host0, host2] and
    # [host1, host2], not [host0, host1, host2] and [host1, host2, host0]
    config = make_config(max_attempts=3)
    core = make_core(config)
    path(core)
    for host in ("host0", "host1", "host2"):
        core.update_host(make_report(host), now=0.0)
    selections = core.select_destinations(make_spec("i1", "i2"), now=1.0)
    assert [[s.host, *s.alternates] for s in selections] == [
        ["host0", "host2"],
        ["host1", "host2"],
    ]
    # resent, the same answer; and journaled claims keep it
    assert core.select_destinations(make_spec("i1", "i2"), now=2.0) == selections
    # one instance: the next best hosts it was ranked with, as before
    [single] = core.select_destinations(make_spec("i3"), now=3.0)
    assert [single.host, *single.alternates] == ["host2", "host0", "host1"]


def _filling_hosts(core: SchedulerCore) -> None:
    # 8 GB each; an instance of 4 GB fills h0, which has the most vCPUs (32)
    for name, used, vcpus in (("h0", 4 * MB, 32), ("h1", 2 * MB, 8), ("h2", 4 * MB, 16)):
        core.update_host(
            make_report(name, memory_mb=8 * MB, memory_mb_used=used, vcpus=vcpus, local_gb=200),
            now=0.0,
        )


@pytest.mark.parametrize("shuffle", [False, True])
@PATHS
def test_nova_34_weighs_the_hosts_a_multi_create_filled_for_its_later_instances(
    path: Callable[[SchedulerCore], None], shuffle: bool
) -> None:
    # Nova 34's SchedulerManager._schedule weighs Placement's candidates for one
    # instance for each instance: for the second, h0 (filled by the first) is
    # weighed too, its 31 free vCPUs and its I/O operation set the CPU and I/O
    # weighers' range, and h1 (the most RAM) wins over h2; h0 is never taken
    config = make_config(nova_release=34, shuffle_best_same_weighed_hosts=shuffle)
    core = make_core(config)
    path(core)
    _filling_hosts(core)
    spec = make_spec("a", "b", memory_mb=4 * MB, vcpus=2, disk_gb=40)
    plan = core.plan(spec, now=1.0)
    assert [(i.host, i.alternates, i.passing_hosts) for i in plan.instances] == [
        ("h0", ["h2"], 3),
        ("h1", ["h2"], 2),  # the hosts with room for it: h1, h2
    ]
    # the plan's weights are those it was ranked by: over h0, h1 and h2
    [second] = plan.instances[1].candidates
    assert second.host == "h1"
    assert second.total == pytest.approx(2.254, abs=1e-3)
    assert [s.host for s in core.select_destinations(spec, now=1.0)] == ["h0", "h1"]


def test_nova_18_weighs_the_hosts_with_room_for_each_later_instance() -> None:
    # Nova 18 (the default): the second instance is weighed over h1 and h2 only
    core = make_core()
    _filling_hosts(core)
    spec = make_spec("a", "b", memory_mb=4 * MB, vcpus=2, disk_gb=40)
    assert [s.host for s in core.select_destinations(spec, now=1.0)] == ["h0", "h2"]


def test_nova_34_never_takes_a_filled_host_for_a_later_instance() -> None:
    # one host with room for one instance: the second fails, nothing is claimed
    core = make_core(make_config(nova_release=34))
    core.update_host(make_report("h0", memory_mb=2 * MB), now=0.0)
    with pytest.raises(NoValidHost, match="instance 2 of 2"):
        core.select_destinations(make_spec("a", "b", memory_mb=2 * MB), now=1.0)
    assert core.claims() == {}


@pytest.mark.parametrize("subset", [1, 3])
def test_nova_alternates_never_include_a_host_chosen_for_the_same_request(subset: int) -> None:
    for seed in range(10):
        config = make_config(max_attempts=4, host_subset_size=subset, seed=seed)
        core = make_core(config)
        for i in range(6):
            core.update_host(make_report(f"h{i}", memory_mb=(4 + i) * MB), now=0.0)
        selections = core.select_destinations(make_spec("a", "b", "c"), now=1.0)
        chosen = {s.host for s in selections}
        for sel in selections:
            assert sel.alternates == selections[0].alternates
            assert not chosen & set(sel.alternates)
            assert len(sel.alternates) == min(3, 6 - len(chosen))


# -- Nova 34's weighers: the CPU weigher's own ratio, per-aggregate multipliers -------------
# (nova/scheduler/weights/*.py and utils.get_weight_multiplier; expected values from
# nova/tests/unit/scheduler/weights/test_weights_*.py, each test named below)

# Every built-in weigher off but the one a test sets, all four hosts ranked (1 + 3 alternates).
ONE_WEIGHER = {
    "ram_weight_multiplier": 0.0,
    "cpu_weight_multiplier": 0.0,
    "disk_weight_multiplier": 0.0,
    "io_ops_weight_multiplier": 0.0,
    "num_instances_weight_multiplier": 0.0,
    "soft_affinity_weight_multiplier": 0.0,
    "soft_anti_affinity_weight_multiplier": 0.0,
    "max_attempts": 4,
}
# a request every host of these tests passes: what is weighed is all that counts
NOTHING = {"memory_mb": 0, "vcpus": 0, "disk_gb": 0}
Aggregates = list[tuple[str, dict[str, str], list[str]]]


def _weighed(
    config: SchedulerConfig,
    reports: list[HostReport],
    spec: RequestSpec,
    path: Callable[[SchedulerCore], None],
    aggregates: Aggregates | None = None,
    **kwargs: object,
) -> tuple[str, dict[str, float]]:
    """The host ``spec``'s first instance goes to, and each host's total weight as
    the plan explains it (what Nova's ``weighed_host.weight`` is)."""
    core = make_core(config, **kwargs)
    path(core)
    for report in reports:
        core.update_host(report, now=0.0)
    for name, metadata, hosts in aggregates or []:
        core.create_aggregate(name, metadata, hosts)
    first = core.plan(spec, now=1.0).instances[0]
    host = core.select_destinations(spec, now=1.0)[0].host
    assert first.host == host
    return host, {c.host: c.total for c in first.candidates}


def _cpu_hosts() -> list[HostReport]:
    """test_weights_cpu.py _get_all_hosts: vCPUs free 0, 2, 6 and 16 (8 x its own 2.0)."""
    return [
        make_report("host1", vcpus=8, vcpus_used=8, cpu_allocation_ratio=1.0),
        make_report("host2", vcpus=4, vcpus_used=2, cpu_allocation_ratio=1.0),
        make_report("host3", vcpus=6, vcpus_used=0, cpu_allocation_ratio=1.0),
        make_report("host4", vcpus=8, vcpus_used=0, cpu_allocation_ratio=2.0),
    ]


_AGGREGATE_CORE = [
    "AggregateCoreFilter" if name == "CoreFilter" else name
    for name in make_config().enabled_filters
]


@PATHS
def test_nova_cpu_weigher_uses_the_hosts_own_ratio_never_an_aggregates(
    path: Callable[[SchedulerCore], None],
) -> None:
    # test_weights_cpu.py test_multiplier_default: host4 wins with 1.0 (16 free of the
    # highest 16). host3's aggregate ratio 4.0 is AggregateCoreFilter's alone: Nova's
    # CPUWeigher reads host_state.cpu_allocation_ratio (6 free, not 24).
    config = make_config(
        **{**ONE_WEIGHER, "cpu_weight_multiplier": 1.0}, enabled_filters=_AGGREGATE_CORE
    )
    dense: Aggregates = [("dense", {"cpu_allocation_ratio": "4.0"}, ["host3"])]
    host, weights = _weighed(config, _cpu_hosts(), make_spec("vm1", **NOTHING), path, dense)
    assert host == "host4"
    assert weights == pytest.approx({"host4": 1.0, "host3": 6 / 16, "host2": 2 / 16, "host1": 0})
    # and the brief's case: 8 vCPUs at the aggregate's 4.0 against 10 of the host's own 1.0
    reports = [make_report("eight", vcpus=8), make_report("ten", vcpus=10)]
    config = make_config(
        **{**ONE_WEIGHER, "cpu_weight_multiplier": 1.0},
        cpu_allocation_ratio=1.0,
        enabled_filters=_AGGREGATE_CORE,
    )
    four: Aggregates = [("four", {"cpu_allocation_ratio": "4.0"}, ["eight"])]
    assert _weighed(config, reports, make_spec("vm1", vcpus=1), path, four)[0] == "ten"


def _ram_hosts() -> list[HostReport]:
    """test_weights_ram.py _get_all_hosts: free RAM 512, 1024, 3072 and 8192 MB."""
    return [
        make_report(f"host{i}", memory_mb=8192, memory_mb_used=8192 - free)
        for i, free in enumerate((512, 1024, 3072, 8192), start=1)
    ]


def _disk_hosts() -> list[HostReport]:
    """test_weights_disk.py _get_all_hosts: free disk 5120, 10240, 30720, 81920 MB."""
    return [
        make_report(f"host{i}", local_gb=80, local_gb_used=80 - free_mb // 1024)
        for i, free_mb in enumerate((5120, 10240, 30720, 81920), start=1)
    ]


def _io_hosts() -> list[HostReport]:
    """test_weights_ioopsweight.py _get_all_hosts: 1, 2, 0 and 4 I/O operations."""
    return [make_report(f"host{i}", num_io_ops=io) for i, io in enumerate((1, 2, 0, 4), start=1)]


ALL_FOUR = ["host1", "host2", "host3", "host4"]


@PATHS
@pytest.mark.parametrize(
    ("option", "configured", "hosts"),
    [
        ("cpu_weight_multiplier", -1.0, _cpu_hosts),  # test_weights_cpu.py
        ("ram_weight_multiplier", -1.0, _ram_hosts),  # test_weights_ram.py
        ("disk_weight_multiplier", -1.0, _disk_hosts),  # test_weights_disk.py
        ("io_ops_weight_multiplier", 0.0, _io_hosts),  # test_weights_ioopsweight.py
    ],
)
def test_nova_weigher_host_with_agg(
    path: Callable[[SchedulerCore], None],
    option: str,
    configured: float,
    hosts: Callable[[], list[HostReport]],
) -> None:
    # test_host_with_agg: the configured multiplier would stack (-1.0) or ignore (0.0);
    # every host's aggregate says 1.5, so host4 (the most free, or the most I/O) wins
    # with weight 1.0 x 1.5
    config = make_config(**{**ONE_WEIGHER, option: configured})
    aggregate: Aggregates = [("foo", {option: "1.5"}, ALL_FOUR)]
    host, weights = _weighed(config, hosts(), make_spec("vm1", **NOTHING), path, aggregate)
    assert host == "host4"
    assert weights["host4"] == pytest.approx(1.5)
    if configured:  # and without the aggregate, the configured multiplier's host
        assert _weighed(config, hosts(), make_spec("vm1", **NOTHING), path)[0] == "host1"


def _group_hosts() -> tuple[list[HostReport], list[str]]:
    """test_weights_affinity.py _get_all_hosts: members of the group 1, 4, 0 and 2 (the
    group's ``hosts``: one entry per member actorsched did not place)."""
    reports = [make_report(host) for host in ALL_FOUR]
    return reports, ["host1", *["host2"] * 4, "host4", "host4"]


@pytest.mark.parametrize("path", [_full_mask, _gathered])
@pytest.mark.parametrize(
    ("policy", "option", "expected"),
    [
        ("soft-affinity", "soft_affinity_weight_multiplier", "host2"),
        ("soft-anti-affinity", "soft_anti_affinity_weight_multiplier", "host3"),
    ],
)
def test_nova_soft_affinity_weighers_host_with_agg(
    path: Callable[[SchedulerCore], None],
    policy: Literal["soft-affinity", "soft-anti-affinity"],
    option: str,
    expected: str,
) -> None:
    # test_weights_affinity.py Soft{,Anti}AffinityWeigherTestCase.test_host_with_agg:
    # configured 0.0 (the weigher is off), the aggregate's 1.5 turns it on for its
    # hosts: host2 (most members) or host3 (none) wins with 1.5
    reports, members = _group_hosts()
    group = ServerGroup(id="g", policy=policy, hosts=members)
    spec = make_spec("vm1", **NOTHING, group=group)
    config = make_config(**ONE_WEIGHER)
    aggregate: Aggregates = [("foo", {option: "1.5"}, ALL_FOUR)]
    host, weights = _weighed(config, reports, spec, path, aggregate)
    assert host == expected
    assert weights[expected] == pytest.approx(1.5)


@PATHS
@pytest.mark.parametrize(
    ("values", "multiplier"),
    [
        # test_weights_cpu.py test_cpu_weigher_multiplier (ram, disk, io_ops alike)
        (["2"], 2.0),
        (["2", "1.5"], 1.5),  # in several aggregates: the smallest
        # test_utils.py test_get_weight_multiplier
        (["invalid"], -1.0),  # not a number: the configured one
        (["1.9"], 1.9),
        (["1.9", "1.8"], 1.8),
        (["1.9", "invalid"], -1.0),  # validate_num_values raises for the whole set
    ],
)
def test_nova_get_weight_multiplier(
    path: Callable[[SchedulerCore], None], values: list[str], multiplier: float
) -> None:
    # only host4 is in the aggregates: its weight (1.0, the most free vCPUs) times its
    # multiplier; the other hosts keep the configured -1.0
    config = make_config(**{**ONE_WEIGHER, "cpu_weight_multiplier": -1.0})
    aggregates: Aggregates = [
        (f"agg{i}", {"cpu_weight_multiplier": value}, ["host4"]) for i, value in enumerate(values)
    ]
    host, weights = _weighed(config, _cpu_hosts(), make_spec("vm1", **NOTHING), path, aggregates)
    assert weights["host4"] == pytest.approx(multiplier)
    assert weights["host3"] == pytest.approx(-6 / 16)
    assert host == ("host4" if multiplier > 0 else "host1")


@PATHS
@pytest.mark.parametrize("configured", [0.0, 0.5])
def test_nova_a_multiplier_per_host_multiplies_the_normalized_weight(
    path: Callable[[SchedulerCore], None], configured: float
) -> None:
    # nova/weights.py: weight += multiplier(host) x normalized. NumInstancesWeigher has
    # no minval: 1, 2 and 3 instances normalize to 0, 0.5 and 1. "few" is in an
    # aggregate of multiplier 10: 10 x 0 = 0 (not 10 x 1/2, which would win); "many"
    # in one of 1.0; "mid" keeps the configured one (off, or 0.5 x 0.5)
    reports = [
        make_report("few", instances=["a"]),
        make_report("mid", instances=["b", "c"]),
        make_report("many", instances=["d", "e", "f"]),
    ]
    config = make_config(**{**ONE_WEIGHER, "num_instances_weight_multiplier": configured})
    aggregates: Aggregates = [
        ("ten", {"num_instances_weight_multiplier": "10"}, ["few"]),
        ("one", {"num_instances_weight_multiplier": "1.0"}, ["many"]),
    ]
    host, weights = _weighed(config, reports, make_spec("vm1", **NOTHING), path, aggregates)
    assert host == "many"
    assert weights == pytest.approx({"many": 1.0, "mid": configured * 0.5, "few": 0.0})
