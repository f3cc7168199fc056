"""BuildFailureWeigher, MetricsWeigher and MetricsFilter: each expectation is Nova
34.0.0's own unit test's (``nova/tests/unit/scheduler/weights/test_weights_compute.py``,
``test_weights_metrics.py``, ``filters/test_metrics_filters.py``), named in each
test's docstring; the hosts are Nova's fakes as host reports, every other weigher
off so that a weight is the one weigher's, as in Nova's tests."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import InvalidRequest, PlacementContext
from actorsched.core import SchedulerCore
from actorsched.core.host_facts import MetricsFilter
from actorsched.nova.conf import weight_setting

_ALONE: dict[str, Any] = {  # Nova's tests weigh with one weigher: the others off
    "ram_weight_multiplier": 0.0,
    "cpu_weight_multiplier": 0.0,
    "disk_weight_multiplier": 0.0,
    "io_ops_weight_multiplier": 0.0,
    "nova_release": 34,
    "max_attempts": 10,
}


def _weighed(core: SchedulerCore) -> list[tuple[str, float]]:
    """(host, weight) of every passing host, best first, as the plan ranks them."""
    plan = core.plan(make_spec("vm"), now=1.0)
    return [(c.host, c.total) for c in plan.instances[0].candidates]


# -- BuildFailureWeigher -------------------------------------------------------------

# Nova's _get_all_hosts: host1 ... host4 with 0, 1, 10 and 100 failed builds
_FAILED = {"host1": 0, "host2": 1, "host3": 10, "host4": 100}


def _failures_core(multiplier: float, **reported: Any) -> SchedulerCore:
    core: SchedulerCore = make_core(
        make_config(build_failure_weight_multiplier=multiplier, **_ALONE)
    )
    for host, failed in _FAILED.items():
        core.update_host(make_report(host, failed_builds=failed, **reported), now=0.0)
    return core


def test_build_failure_weigher_disabled() -> None:
    """Nova's test_build_failure_weigher_disabled: multiplier 0, every weight 0."""
    assert {weight for _, weight in _weighed(_failures_core(0.0))} == {0.0}


def test_build_failure_weigher_scaled() -> None:
    """Nova's test_build_failure_weigher_scaled: 1000.0 weighs 0, -10, -100, -1000."""
    weighed = _weighed(_failures_core(1000.0))
    assert [host for host, _ in weighed] == ["host1", "host2", "host3", "host4"]
    assert [weight for _, weight in weighed] == pytest.approx([0, -10, -100, -1000])


def test_build_failure_weight_multiplier() -> None:
    """Nova's test_build_failure_weight_multiplier: an aggregate's
    build_failure_weight_multiplier (1000.0) replaces the configured 0, negated;
    of two aggregates (500 and 1000) the smallest, 500, negated."""
    core = _failures_core(0.0)
    core.create_aggregate("foo", {"build_failure_weight_multiplier": "1000.0"}, ["host4"])
    assert dict(_weighed(core))["host4"] == pytest.approx(-1000)
    core.create_aggregate("bar", {"build_failure_weight_multiplier": "500"}, ["host4"])
    assert dict(_weighed(core))["host4"] == pytest.approx(-500)


def test_build_failure_host_with_agg() -> None:
    """Nova's test_host_with_agg: configured 0, every host's aggregate says 1000."""
    core = _failures_core(0.0)
    core.create_aggregate("foo", {"build_failure_weight_multiplier": "1000"}, list(_FAILED))
    assert [weight for _, weight in _weighed(core)] == pytest.approx([0, -10, -100, -1000])


def test_failed_builds_are_read_from_a_nova_computes_stats_too() -> None:
    """Nova's HostState.update_from_compute_node: failed_builds is
    ``int(stats.get('failed_builds', 0))``; a report that gives no count reads it."""
    core = make_core(make_config(build_failure_weight_multiplier=1000.0, **_ALONE))
    for host, failed in _FAILED.items():
        core.update_host(make_report(host, stats={"failed_builds": str(failed)}), now=0.0)
    assert [weight for _, weight in _weighed(core)] == pytest.approx([0, -10, -100, -1000])


def test_the_default_multiplier_puts_a_failing_host_last_and_a_success_resets_it() -> None:
    """Nova's default 1000000.0: one failed build outweighs any free RAM; the next
    report of 0 (a success resets the count) weighs the host as before."""
    core = make_core(make_config(max_attempts=3))
    core.update_host(make_report("big", memory_mb=65536, failed_builds=1), now=0.0)
    core.update_host(make_report("small", memory_mb=4096), now=0.0)
    weighed = _weighed(core)
    assert [host for host, _ in weighed] == ["small", "big"]
    # its RAM, vCPUs and disk weigh 1.0 each, its one failed build -1000000
    assert dict(weighed)["big"] == pytest.approx(3.0 - 1_000_000)
    core.update_host(make_report("big", 2, memory_mb=65536), now=0.0)
    assert [host for host, _ in _weighed(core)] == ["big", "small"]


def test_build_failure_weigher_is_silent_while_every_host_has_one_count() -> None:
    """No failed build anywhere (most of the time): it says nothing, so the ranking's
    shortcut still answers a request of resources only."""
    core = make_core(make_config(build_failure_weight_multiplier=1000.0))
    for host in ("h1", "h2"):
        core.update_host(make_report(host, hypervisor_version=5), now=0.0)
    [weigher] = [w for w in core.weighers if w.name == "BuildFailureWeigher"]
    ctx = PlacementContext(make_spec(), core.config, 1.0, core.ledger, core.locate)
    assert weigher.weigh_all(core.table, ctx) is None
    core.update_host(make_report("h1", 2, failed_builds=3), now=0.0)
    assert weigher.weigh_all(core.table, ctx) is not None


# -- MetricsWeigher -----------------------------------------------------------------

IDLE, KERNEL, USER = "cpu.idle.time", "cpu.kernel.time", "cpu.user.time"
# Nova's _get_all_hosts of test_weights_metrics.py
_METRICS: dict[str, dict[str, float]] = {
    "host1": {IDLE: 512, KERNEL: 1},
    "host2": {IDLE: 1024, KERNEL: 2},
    "host3": {IDLE: 3072, KERNEL: 1},
    "host4": {IDLE: 8192, KERNEL: 0},
    "host5": {IDLE: 768, KERNEL: 0, USER: 1},
    "host6": {IDLE: 2048, KERNEL: 0, USER: 2},
}


def _metrics_core(
    items: list[str], hosts: dict[str, dict[str, float]] = _METRICS, **config: Any
) -> SchedulerCore:
    setting, _ = weight_setting(items, "[metrics] weight_setting")
    core: SchedulerCore = make_core(
        make_config(metrics_weight_setting=setting, **{**_ALONE, **config})
    )
    for host, metrics in hosts.items():
        core.update_host(make_report(host, metrics=metrics), now=0.0)
    return core


def _top(weighed: SchedulerCore | list[tuple[str, float]]) -> tuple[str, float]:
    """The best host and its weight (to 12 digits: Nova's figures are exact)."""
    host, weight = (_weighed(weighed) if isinstance(weighed, SchedulerCore) else weighed)[0]
    return host, round(weight, 12)


def _best(items: list[str], **config: Any) -> tuple[str, float]:
    return _top(_metrics_core(items, **config))


def test_single_resource_no_metrics() -> None:
    """Nova's test_single_resource_no_metrics: no host reports the metric and
    [metrics] required is true: Nova raises ComputeHostMetricNotFound, actorsched
    refuses the request."""
    core = _metrics_core([IDLE + "=1"], {"host1": {}, "host2": {}})
    with pytest.raises(InvalidRequest, match=re.escape("reports no metric 'cpu.idle.time'")):
        core.select_destinations(make_spec("vm"), now=1.0)
    with pytest.raises(InvalidRequest):
        core.plan(make_spec("vm"), now=1.0)


def test_single_resource() -> None:
    """Nova's test_single_resource: idle=1, host4 (8192) wins with 1.0."""
    assert _best([IDLE + "=1"]) == ("host4", 1.0)


def test_multiple_resource() -> None:
    """Nova's test_multiple_resource: idle=0.0001, kernel=1, host2 wins."""
    assert _best([IDLE + "=0.0001", KERNEL + "=1"]) == ("host2", 1.0)


def test_single_resource_duplicate_setting() -> None:
    """Nova's test_single_resource_duplicate_setting: idle=-2 and idle=1 both count."""
    assert _best([IDLE + "=-2", IDLE + "=1"]) == ("host1", 1.0)


def test_single_resource_negative_ratio() -> None:
    """Nova's test_single_resourcenegative_ratio: idle=-1, host1 wins."""
    assert _best([IDLE + "=-1"]) == ("host1", 1.0)


def test_multiple_resource_missing_ratio() -> None:
    """Nova's test_multiple_resource_missing_ratio: 'kernel' alone is ignored."""
    assert _best([IDLE + "=0.0001", KERNEL]) == ("host4", 1.0)


def test_multiple_resource_wrong_ratio() -> None:
    """Nova's test_multiple_resource_wrong_ratio: 'kernel = 2.0t' is ignored."""
    assert _best([IDLE + "=0.0001", KERNEL + " = 2.0t"]) == ("host4", 1.0)


def test_parse_setting() -> None:
    """Nova's test_parse_setting: the items parse_options keeps, in order."""
    assert weight_setting([IDLE + "=1"], "x")[0] == [(IDLE, 1.0)]
    assert weight_setting([IDLE + "=1", KERNEL + "=-2.1"], "x")[0] == [(IDLE, 1.0), (KERNEL, -2.1)]
    for bad in (IDLE + "=a1", IDLE, "=5"):
        kept, warned = weight_setting([bad, KERNEL + "=-2.1"], "[metrics] weight_setting")
        assert kept == [(KERNEL, -2.1)]
        assert warned == [
            f"[metrics] weight_setting: ignoring {bad} (not name=ratio, a finite ratio)"
        ]


def test_metric_not_found_required() -> None:
    """Nova's test_metric_not_found_required: host1 ... host4 have no user time."""
    core = _metrics_core([IDLE + "=1", USER + "=2"])
    with pytest.raises(InvalidRequest, match=re.escape("'cpu.user.time'")):
        core.select_destinations(make_spec("vm"), now=1.0)


def test_metric_not_found_non_required() -> None:
    """Nova's test_metric_not_found_non_required: required false, the hosts without
    user time weigh weight_of_unavailable (-10000), host5 wins."""
    weighed = _weighed(_metrics_core([IDLE + "=0.0001", USER + "=-1"], metrics_required=False))
    assert _top(weighed) == ("host5", 1.0)
    assert [host for host, _ in weighed[:2]] == ["host5", "host6"]


def test_metrics_weigher_multiplier() -> None:
    """Nova's test_metrics_weigher_multiplier: an aggregate's metrics_weight_multiplier
    (2) replaces the configured -1.0; of two (2 and 1.5) the smallest."""
    core = _metrics_core([IDLE + "=1"], metrics_weight_multiplier=-1.0)
    assert _top(core) == ("host1", 0.0)  # -1.0: host4 weighs -1
    assert dict(_weighed(core))["host4"] == pytest.approx(-1.0)
    core.create_aggregate("foo", {"metrics_weight_multiplier": "2"}, ["host4"])
    assert _top(core) == ("host4", 2.0)
    core.create_aggregate("bar", {"metrics_weight_multiplier": "1.5"}, ["host4"])
    assert _top(core) == ("host4", 1.5)


def test_metrics_host_with_agg() -> None:
    """Nova's test_host_with_agg: every host's aggregate says 1.5, host4 weighs 1.5."""
    core = _metrics_core([IDLE + "=0.0001", KERNEL])
    core.create_aggregate("foo", {"metrics_weight_multiplier": "1.5"}, list(_METRICS))
    assert _top(core) == ("host4", 1.5)


def test_an_unavailable_metric_of_ratio_0_or_multiplier_0_is_skipped() -> None:
    """Nova's _weigh_object: a missing metric weighs weight_of_unavailable only when
    ``ratio * weight_multiplier(host) != 0``; else the host's sum of the others."""
    hosts = {"a": {IDLE: 10.0}, "b": {IDLE: 20.0, USER: 1.0}, "c": {IDLE: 30.0, USER: 1.0}}
    core = _metrics_core([IDLE + "=1", USER + "=0"], hosts, metrics_required=False)
    assert [host for host, _ in _weighed(core)] == ["c", "b", "a"]  # ratio 0: skipped
    assert dict(_weighed(core))["b"] == pytest.approx((20 - 10) / (30 - 10))
    core = _metrics_core([IDLE + "=1", USER + "=1"], hosts, metrics_required=False)
    assert [host for host, _ in _weighed(core)] == ["c", "b", "a"]  # a: -10000
    assert dict(_weighed(core))["a"] == pytest.approx(0.0)
    # a's aggregate weighs it 0: its raw weight is its idle time, 10, not -10000,
    # so b and c normalize between 10 and 31
    core.create_aggregate("off", {"metrics_weight_multiplier": "0"}, ["a"])
    assert dict(_weighed(core))["b"] == pytest.approx((21 - 10) / (31 - 10))


def test_one_weighed_host_is_not_weighed_so_required_does_not_fail() -> None:
    """Nova's HostWeightHandler weighs nothing for one host (its weight stays 0):
    a lone host without the metric is placed."""
    core = _metrics_core([IDLE + "=1"], {"lone": {}})
    assert core.select_destinations(make_spec("vm"), now=1.0)[0].host == "lone"


# -- MetricsFilter --------------------------------------------------------------------


def _filtered(setting: list[str], metrics: dict[str, float]) -> bool:
    core = _metrics_core(setting, {"host1": metrics}, enabled_filters=["MetricsFilter"])
    ctx = PlacementContext(make_spec(), core.config, 1.0, core.ledger, core.locate)
    passed = MetricsFilter().filter_all(core.table, ctx)
    return True if passed is None else bool(passed[0])


def test_metrics_filter_pass() -> None:
    """Nova's test_metrics_filter_pass: the host has both metrics of the setting."""
    assert _filtered(
        ["cpu.frequency=1", "numa.membw.current=2"],
        {"cpu.frequency": 1000, "numa.membw.current": 10},
    )


def test_metrics_filter_missing_metrics() -> None:
    """Nova's test_metrics_filter_missing_metrics: foo and bar are not reported."""
    assert not _filtered(["foo=1", "bar=2"], {"cpu.frequency": 1000})


def test_metrics_filter_keeps_required_metrics_from_failing_the_request() -> None:
    """MetricsFilter with MetricsWeigher (Nova's pairing): the hosts without a metric
    are filtered out, so [metrics] required fails nothing."""
    hosts = {"with": {IDLE: 1.0}, "also": {IDLE: 2.0}, "without": {}}
    core = _metrics_core([IDLE + "=1"], hosts, enabled_filters=["ComputeFilter", "MetricsFilter"])
    assert [host for host, _ in _weighed(core)] == ["also", "with"]
