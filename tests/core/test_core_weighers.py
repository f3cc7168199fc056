"""Weighers (normalized as Nova's, multiplied, summed), host_subset_size, alternates,
and custom filters and weighers through the plug-in protocol.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_config, make_core, make_report, make_spec, ram_only_config
from numpy.typing import NDArray

from actorsched import (
    HostFilter,
    HostState,
    HostWeigher,
    NoValidHost,
    PerHostFilter,
    PlacementContext,
    RequestSpec,
    SchedulerConfig,
)
from actorsched.core import HostTable, SchedulerCore


def _core(config: SchedulerConfig | None = None, **kwargs: object) -> SchedulerCore:
    return make_core(config, **kwargs)


def _pick(core: SchedulerCore, uuid: str = "vm1", now: float = 1.0, **spec: object) -> str:
    return core.select_destinations(make_spec(uuid, **spec), now=now)[0].host  # type: ignore[arg-type]


class HostValues:
    """A custom weigher (the protocol: name, multiplier, weigh_all) with fixed values."""

    def __init__(self, values: dict[str, float], multiplier: float, name: str = "Fixed") -> None:
        self.name = name
        self.multiplier = multiplier
        self.values = values

    def weigh_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.float64] | None:
        raw = np.zeros(table.n, dtype=np.float64)
        for host, row in table.row_of.items():
            raw[row] = self.values.get(host, 0.0)
        return raw


# -- built-in weighers -----------------------------------------------------------


def test_ram_weigher_spreads_to_the_freest_host_by_default() -> None:
    core = _core()
    for host, used in (("a", 1000), ("b", 10), ("c", 500)):
        core.update_host(make_report(host, 1, memory_mb_used=used), now=0.0)
    assert _pick(core) == "b"


def test_negative_ram_multiplier_stacks() -> None:
    core = _core(ram_only_config(ram_weight_multiplier=-1.0))
    for host, used in (("a", 1000), ("b", 10), ("c", 3000)):
        core.update_host(make_report(host, 1, memory_mb_used=used), now=0.0)
    assert _pick(core) == "c"
    assert _pick(core, "vm2") == "c"  # keeps filling the fullest host


def test_cpu_weigher_prefers_more_free_vcpus() -> None:
    core = _core()
    for host, used in (("a", 3), ("b", 1), ("c", 2)):
        core.update_host(make_report(host, 1, vcpus_used=used), now=0.0)
    assert _pick(core) == "b"


def test_disk_weigher_prefers_more_free_disk() -> None:
    core = _core()
    for host, used in (("a", 30), ("b", 60), ("c", 5)):
        core.update_host(make_report(host, 1, local_gb_used=used), now=0.0)
    assert _pick(core) == "c"


def test_io_ops_weigher_prefers_fewer_io_ops() -> None:
    core = _core()
    for host, io in (("a", 3), ("b", 5), ("c", 1)):
        core.update_host(make_report(host, 1, num_io_ops=io), now=0.0)
    assert _pick(core) == "c"
    busy = _core(make_config(io_ops_weight_multiplier=1.0))
    for host, io in (("a", 3), ("b", 5), ("c", 1)):
        busy.update_host(make_report(host, 1, num_io_ops=io), now=0.0)
    assert _pick(busy) == "b"


@pytest.mark.parametrize(("multiplier", "expected"), [(1.0, "many"), (-1.0, "few")])
def test_num_instances_weigher(multiplier: float, expected: str) -> None:
    core = _core(make_config(num_instances_weight_multiplier=multiplier))
    core.update_host(make_report("many", 1, instances=["x", "y", "z"]), now=0.0)
    core.update_host(make_report("few", 1, instances=["w"]), now=0.0)
    assert _pick(core) == expected


def test_weights_add_up_with_their_multipliers() -> None:
    # a is freer on RAM (weights 1.0 against 0.27), b on vCPUs (0.25 against 1.0);
    # the bigger multiplier decides
    def pick(ram: float, cpu: float) -> str:
        core = _core(ram_only_config(ram_weight_multiplier=ram, cpu_weight_multiplier=cpu))
        core.update_host(make_report("a", 1, memory_mb_used=0, vcpus_used=12), now=0.0)
        core.update_host(make_report("b", 1, memory_mb_used=3000, vcpus_used=0), now=0.0)
        return _pick(core)

    assert pick(ram=1.0, cpu=0.5) == "a"
    assert pick(ram=0.5, cpu=1.0) == "b"


# -- per-aggregate multipliers (Nova's utils.get_weight_multiplier) ---------------------
# (the expected values of Nova's own tests: test_core_nova_semantics.py)


def test_an_aggregate_multiplier_counts_from_its_change_and_for_its_hosts_only() -> None:
    core = _core(ram_only_config(ram_weight_multiplier=-1.0))  # stack: the fullest first
    for host, used in (("a", 1000), ("b", 10), ("c", 3000)):
        core.update_host(make_report(host, 1, memory_mb_used=used), now=0.0)
    ctx = PlacementContext(make_spec(), core.config, 1.0, core.ledger, core.locate, [], None)
    assert core.ranker._row_multipliers(ctx) is None  # no aggregate: nothing per row
    core.create_aggregate("plain", {"ssd": "true"}, ["b"])
    ctx.aggregates = core.aggregates
    assert core.ranker._row_multipliers(ctx) is None  # no multiplier key: nothing either
    assert _pick(core, "vm1") == "c"
    core.release("vm1", now=1.0)
    core.update_aggregate("plain", {"ram_weight_multiplier": "1.0"})  # b spreads alone
    # free RAM 3096, 4086 and 1096 MB weigh 0.76, 1.0 and 0.27
    assert _pick(core, "vm1") == "b"  # b 1.0 x 1.0 against c -1.0 x 0.27
    core.release("vm1", now=1.0)
    core.update_aggregate("plain", {"ram_weight_multiplier": "-0.5"})  # b -0.5 < c -0.27
    assert _pick(core, "vm1") == "c"
    core.release("vm1", now=1.0)
    # a host that reports after joining gets its aggregate's multiplier at once
    core.create_aggregate("late", {"ram_weight_multiplier": "5"}, ["d"])
    core.update_host(make_report("d", 1, memory_mb_used=2000), now=1.0)
    assert _pick(core, "vm1") == "d"
    core.release("vm1", now=1.0)
    core.remove_host_from_aggregate("late", "d")  # the configured -1.0 again
    core.update_aggregate("plain", {"ram_weight_multiplier": None})
    assert _pick(core, "vm1") == "c"


# -- soft server-group weighers --------------------------------------------------


def _two_hosts(config: SchedulerConfig, a_mb: int = 8192, b_mb: int = 4096) -> SchedulerCore:
    core = _core(config)
    core.update_host(make_report("a", 1, memory_mb=a_mb), now=0.0)
    core.update_host(make_report("b", 1, memory_mb=b_mb), now=0.0)
    return core


@pytest.mark.parametrize(("multiplier", "expected"), [(2.0, "b"), (0.5, "a"), (0.0, "a")])
def test_soft_affinity_weigher_across_claims(multiplier: float, expected: str) -> None:
    core = _two_hosts(ram_only_config(soft_affinity_weight_multiplier=multiplier))
    group = ("g", "soft-affinity")
    assert _pick(core, "m1", group=group, ignore_hosts=["a"]) == "b"
    # RAM says a (weight 1 x 1.0), the group says b (weight 1 x multiplier)
    assert _pick(core, "m2", group=group) == expected


def test_soft_affinity_weigher_inside_one_request() -> None:
    core = _two_hosts(ram_only_config(soft_affinity_weight_multiplier=2.0), 4096, 4000)
    hosts = [
        s.host
        for s in core.select_destinations(
            make_spec("m1", "m2", "m3", group=("g", "soft-affinity")), now=1.0
        )
    ]
    assert hosts == ["a", "a", "a"]
    spread = _two_hosts(ram_only_config(soft_affinity_weight_multiplier=0.0), 4096, 4000)
    hosts = [
        s.host
        for s in spread.select_destinations(
            make_spec("m1", "m2", "m3", group=("g", "soft-affinity")), now=1.0
        )
    ]
    assert hosts == ["a", "b", "a"]  # without the weigher RAM spreads them


@pytest.mark.parametrize(("multiplier", "expected"), [(2.0, ["a", "b"]), (0.0, ["a", "a"])])
def test_soft_anti_affinity_weigher(multiplier: float, expected: list[str]) -> None:
    core = _two_hosts(ram_only_config(soft_anti_affinity_weight_multiplier=multiplier))
    spec = make_spec("m1", "m2", group=("g", "soft-anti-affinity"))
    assert [s.host for s in core.select_destinations(spec, now=1.0)] == expected


def test_soft_weighers_ignore_other_groups_and_policies() -> None:
    core = _two_hosts(ram_only_config(soft_affinity_weight_multiplier=5.0))
    _pick(core, "m1", group=("g1", "soft-affinity"), ignore_hosts=["a"])
    assert _pick(core, "m2", group=("g2", "soft-affinity")) == "a"
    assert _pick(core, "m3", group=("g1", "soft-anti-affinity")) == "a"


# -- normalization ------------------------------------------------------------------


def _ranking(core: SchedulerCore, uuid: str) -> list[str]:
    [sel] = core.select_destinations(make_spec(uuid), now=1.0)
    return [sel.host, *sel.alternates]


def test_a_weigher_with_all_values_equal_changes_nothing() -> None:
    def build(extra: list[HostWeigher]) -> SchedulerCore:
        core = _core(make_config(max_attempts=5), weighers=extra)
        for i, (used, io) in enumerate([(100, 3), (900, 0), (400, 1), (50, 6), (700, 2)]):
            core.update_host(make_report(f"h{i}", 1, memory_mb_used=used, num_io_ops=io), 0.0)
        return core

    plain = _ranking(build([]), "vm1")
    constant = HostValues({f"h{i}": 1e9 for i in range(5)}, multiplier=1e6)
    assert _ranking(build([constant]), "vm1") == plain
    assert len(plain) == 5


def test_normalization_makes_the_scale_of_raw_values_irrelevant() -> None:
    # a: twice b's free RAM (weights 1.0 and 0.5); b: the custom weigher's favourite,
    # whose values (plain min-max, no minval) weigh 1.0 for b whatever their scale
    for scale in (1e-6, 1.0, 1e6):
        for multiplier, expected in ((0.4, "a"), (0.6, "b")):
            core = _core(ram_only_config(), weighers=[HostValues({"b": scale}, multiplier)])
            core.update_host(make_report("a", 1, memory_mb=8192), now=0.0)
            core.update_host(make_report("b", 1, memory_mb=8192, memory_mb_used=4096), now=0.0)
            assert _pick(core) == expected, (scale, multiplier)


class Bounded(HostValues):
    """HostValues with Nova's BaseWeigher.minval and maxval."""

    def __init__(
        self, values: dict[str, float], minval: float | None, maxval: float | None
    ) -> None:
        super().__init__(values, 1.0, name="Bounded")
        self.minval = minval
        self.maxval = maxval


@pytest.mark.parametrize(
    ("values", "minval", "maxval", "expected"),
    [
        # nova/tests/unit/test_weights.py test_normalization
        ((20.0, 50.0), None, None, (0.0, 1.0)),
        ((20.0, 50.0), None, 100.0, (0.0, 0.375)),
        ((20.0, 50.0), 0.0, None, (0.4, 1.0)),
        ((20.0, 50.0), 0.0, 100.0, (0.2, 0.5)),
        # weigh_objects: a value past the maxval counts as the maxval
        ((20.0, 150.0), None, 100.0, (0.0, 1.0)),
    ],
)
def test_a_weighers_minval_and_maxval_bound_its_normalization_as_novas(
    values: tuple[float, float], minval: float | None, maxval: float | None, expected: object
) -> None:
    weigher = Bounded(dict(zip(("a", "b"), values, strict=True)), minval, maxval)
    config = ram_only_config(ram_weight_multiplier=0.0, nova_release=34)
    core = _core(config, weighers=[weigher])
    for host in ("a", "b"):
        core.update_host(make_report(host, 1), now=0.0)
    (instance,) = core.plan(make_spec("vm1"), now=1.0).instances
    weights = {c.host: c.weights["Bounded"] for c in instance.candidates}
    assert (weights["a"], weights["b"]) == pytest.approx(expected)


def test_a_maxval_clamps_what_the_ranking_compares() -> None:
    # b's 150 and a's 100 both count as the maxval 100 (equal: weighed 0), so the
    # RAM weigher's small lead of a decides; without the bound b would win
    weigher = Bounded({"a": 100.0, "b": 150.0}, None, 100.0)
    weigher.multiplier = 50.0
    core = _core(ram_only_config(nova_release=34), weighers=[weigher])
    core.update_host(make_report("a", 1), now=0.0)
    core.update_host(make_report("b", 1, memory_mb_used=10), now=0.0)
    assert _pick(core) == "a"


def test_normalization_is_over_the_hosts_that_passed_the_filters() -> None:
    # c is filtered out; its huge value must not squash b's lead to ~0
    weigher = HostValues({"a": 0.0, "b": 1.0, "c": 1000.0}, multiplier=1.5)
    core = _core(ram_only_config(), weighers=[weigher])
    core.update_host(make_report("a", 1, memory_mb_used=0), now=0.0)
    core.update_host(make_report("b", 1, memory_mb_used=100), now=0.0)
    core.update_host(make_report("c", 1, memory_mb_used=200), now=0.0)
    assert _pick(core, ignore_hosts=["c"]) == "b"


def test_normalization_ignores_filtered_out_ram_too() -> None:
    # a disabled host with far more RAM must not shrink the RAM weights of the others
    weigher = HostValues({"b": 1.0}, multiplier=0.4)
    core = _core(ram_only_config(), weighers=[weigher])
    core.update_host(make_report("a", 1, memory_mb=4096), now=0.0)
    core.update_host(make_report("b", 1, memory_mb=2048), now=0.0)
    core.update_host(make_report("huge", 1, memory_mb=2**30, enabled=False), now=0.0)
    assert _pick(core) == "a"  # RAM 1.0 beats 0.5 + 0.4


# -- host_subset_size -------------------------------------------------------------


def _ten_hosts(config: SchedulerConfig) -> SchedulerCore:
    core = _core(config)
    for i in range(10):
        core.update_host(make_report(f"h{i}", 1, memory_mb=1024 * (i + 1)), now=0.0)
    return core


def test_host_subset_size_one_always_takes_the_best() -> None:
    for seed in range(5):
        assert _pick(_ten_hosts(make_config(seed=seed))) == "h9"


def test_host_subset_size_picks_among_the_best_k() -> None:
    picks = {_pick(_ten_hosts(make_config(host_subset_size=3, seed=seed))) for seed in range(30)}
    assert picks <= {"h9", "h8", "h7"}
    assert len(picks) > 1, "different seeds should be able to pick differently"


def test_host_subset_size_is_reproducible_with_a_seed() -> None:
    def picks(seed: int) -> list[str]:
        core = _ten_hosts(make_config(host_subset_size=4, seed=seed))
        return [_pick(core, f"vm{i}", memory_mb=1) for i in range(8)]

    assert picks(11) == picks(11)
    assert any(picks(s) != picks(11) for s in range(12, 20))


def test_host_subset_larger_than_the_cluster() -> None:
    core = _core(make_config(host_subset_size=50, seed=3))
    core.update_host(make_report("only", 1), now=0.0)
    assert _pick(core) == "only"


# -- alternates ---------------------------------------------------------------------


def test_alternates_are_the_next_best_hosts() -> None:
    core = _ten_hosts(ram_only_config())
    [sel] = core.select_destinations(make_spec("vm1"), now=1.0)
    assert (sel.host, sel.alternates) == ("h9", ["h8", "h7"])


@pytest.mark.parametrize("max_attempts", [1, 2, 4, 12])
def test_alternates_count_is_max_attempts_minus_one(max_attempts: int) -> None:
    core = _ten_hosts(ram_only_config(max_attempts=max_attempts))
    [sel] = core.select_destinations(make_spec("vm1"), now=1.0)
    expected = [f"h{i}" for i in range(8, -1, -1)][: max_attempts - 1]
    assert sel.alternates == expected


def test_alternates_pass_the_filters_and_are_not_claimed() -> None:
    core = _ten_hosts(ram_only_config(max_attempts=4))
    core.update_host(make_report("h8", 2, memory_mb=9 * 1024, enabled=False), now=0.0)
    states = core.host_states()
    [sel] = core.select_destinations(make_spec("vm1", ignore_hosts=["h7"]), now=1.0)
    assert sel.host == "h9"
    assert sel.alternates == ["h6", "h5", "h4"]
    after = core.host_states()
    for host in sel.alternates:
        assert after[host] == states[host]
    assert after["h9"].assumed_claims == 1


def test_fewer_alternates_when_few_hosts_pass() -> None:
    core = _ten_hosts(ram_only_config(max_attempts=5))
    [sel] = core.select_destinations(make_spec("vm1", memory_mb=8 * 1024), now=1.0)
    assert (sel.host, sel.alternates) == ("h9", ["h8", "h7"])


def test_alternates_never_hold_the_selected_host_with_a_random_subset() -> None:
    for seed in range(20):
        core = _ten_hosts(ram_only_config(host_subset_size=3, max_attempts=3, seed=seed))
        for sel in core.select_destinations(make_spec("a", "b", "c"), now=1.0):
            assert sel.host not in sel.alternates
            assert len(sel.alternates) == 2
            assert len(set(sel.alternates)) == 2


def test_alternates_respect_hard_anti_affinity() -> None:
    # chosen once both are claimed: neither instance's host is the other's alternate
    core = _ten_hosts(ram_only_config(max_attempts=3))
    first, second = core.select_destinations(
        make_spec("a", "b", group=("g", "anti-affinity")), now=1.0
    )
    assert (first.host, first.alternates) == ("h9", ["h7", "h6"])
    assert (second.host, second.alternates) == ("h8", ["h7", "h6"])


# -- custom filters and weighers ----------------------------------------------------


class MinFreeRam:
    """A custom filter through the protocol: ``name`` and ``filter_all``."""

    name = "MinFreeRam"

    def __init__(self, spare_mb: int) -> None:
        self.spare_mb = spare_mb

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        passed: NDArray[np.bool_] = table.column("free_ram") >= ctx.spec.memory_mb + self.spare_mb
        return passed


class NeverApplies:
    name = "NeverApplies"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        return None


def test_custom_objects_satisfy_the_protocols() -> None:
    assert isinstance(MinFreeRam(0), HostFilter)
    assert isinstance(NeverApplies(), HostFilter)
    assert isinstance(HostValues({}, 1.0), HostWeigher)
    assert isinstance(PerHostFilter("p", lambda h, s: True), HostFilter)


def test_custom_filter_via_protocol() -> None:
    core = _core(make_config(), filters=[MinFreeRam(spare_mb=1024), NeverApplies()])
    core.update_host(make_report("tight", 1, memory_mb=1500), now=0.0)
    core.update_host(make_report("roomy", 1, memory_mb=1600), now=0.0)
    assert _pick(core, memory_mb=512) == "roomy"  # 1600 - 512 >= 1024, then 1088 left
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(make_spec("vm2", memory_mb=512), now=1.0)
    assert info.value.filter_counts == {"MinFreeRam": 2}
    assert "MinFreeRam" in str(info.value)


def test_custom_weigher_via_protocol() -> None:
    weigher = HostValues({"b": 10.0}, multiplier=3.0, name="Preferred")
    core = _core(make_config(), weighers=[weigher])
    core.update_host(make_report("a", 1, memory_mb=8192), now=0.0)
    core.update_host(make_report("b", 1, memory_mb=4096), now=0.0)
    assert _pick(core) == "b"
    negative = _core(make_config(), weighers=[HostValues({"a": 10.0}, multiplier=-3.0)])
    negative.update_host(make_report("a", 1, memory_mb=8192), now=0.0)
    negative.update_host(make_report("b", 1, memory_mb=4096), now=0.0)
    assert _pick(negative) == "b"


def test_per_host_filter_adapter() -> None:
    seen: list[tuple[str, int]] = []

    def predicate(host: HostState, spec: RequestSpec) -> bool:
        seen.append((host.host, spec.memory_mb))
        return host.host.endswith("-gpu")

    core = _core(make_config(), filters=[PerHostFilter("GpuHosts", predicate)])
    core.update_host(make_report("n1", 1, memory_mb=8192), now=0.0)
    core.update_host(make_report("n2-gpu", 1), now=0.0)
    core.update_host(make_report("n3", 1), now=0.0)
    core.remove_host("n3", now=0.0)
    assert _pick(core, memory_mb=700) == "n2-gpu"
    assert ("n2-gpu", 700) in seen
    assert {h for h, _ in seen} == {"n1", "n2-gpu"}  # removed hosts are not asked
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(make_spec("vm2", ignore_hosts=["n2-gpu"]), now=1.0)
    assert info.value.filter_counts == {"IgnoreHosts": 1, "GpuHosts": 1}


def test_per_host_filter_sees_current_figures() -> None:
    core = _core(
        make_config(),
        filters=[PerHostFilter("TwoGbFree", lambda h, s: h.free_ram_mb - s.memory_mb >= 2048)],
    )
    core.update_host(make_report("h1", 1, memory_mb=4096), now=0.0)
    assert _pick(core, "a", memory_mb=1024) == "h1"  # 3072 left
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("b", memory_mb=1025), now=1.0)
    assert _pick(core, "c", memory_mb=1024) == "h1"


# -- HypervisorVersionWeigher (Nova 34's test_weights_hypervisor_version.py) ------------

# Nova's hosts: host1 ... host4 with hypervisor versions 1, 200, 100 and 1000
_VERSIONS = {"host1": 1, "host2": 200, "host3": 100, "host4": 1000}
_VERSION_ONLY: dict[str, object] = {  # every other weigher off: its weight alone
    "ram_weight_multiplier": 0.0,
    "cpu_weight_multiplier": 0.0,
    "disk_weight_multiplier": 0.0,
    "io_ops_weight_multiplier": 0.0,
    "nova_release": 34,
}


def _versions_plan(**config: object) -> list[tuple[str, float]]:
    """(host, weight) of every host, best first, as the plan ranks them."""
    core = make_core(make_config(max_attempts=10, **{**_VERSION_ONLY, **config}))
    for host, version in _VERSIONS.items():
        core.update_host(make_report(host, hypervisor_version=version), now=0.0)
    plan = core.plan(make_spec("vm"), now=1.0)
    return [(c.host, c.total) for c in plan.instances[0].candidates]


def test_hypervisor_version_multiplier_default() -> None:
    # Nova 34's default multiplier 1.0 (a nova.conf sets it): the newest weighs 1.0
    ranked = _versions_plan(hypervisor_version_weight_multiplier=1.0)
    assert ranked[0][0] == "host4"
    assert ranked[0][1] == pytest.approx(1.0)


def test_hypervisor_version_multiplier_default_full_ordering() -> None:
    ranked = _versions_plan(hypervisor_version_weight_multiplier=1.0)
    assert [host for host, _ in ranked] == ["host4", "host2", "host3", "host1"]


def test_hypervisor_version_multiplier_none() -> None:
    ranked = _versions_plan(hypervisor_version_weight_multiplier=0.0)
    assert ranked[0][1] == 0.0


def test_hypervisor_version_multiplier_positive() -> None:
    ranked = _versions_plan(hypervisor_version_weight_multiplier=2.0)
    assert ranked[0][0] == "host4"
    assert ranked[0][1] == pytest.approx(2.0)


def test_hypervisor_version_multiplier_negative() -> None:
    ranked = _versions_plan(hypervisor_version_weight_multiplier=-1.0)
    assert ranked[0][0] == "host1"


def test_hypervisor_version_weigher_reads_an_aggregates_multiplier_and_none_is_zero() -> None:
    # get_weight_multiplier: an aggregate's hypervisor_version_weight_multiplier; a
    # host that reports no version weighs as version 0
    config = {**_VERSION_ONLY, "hypervisor_version_weight_multiplier": 1.0}
    core = make_core(make_config(max_attempts=10, **config))
    core.update_host(make_report("old", hypervisor_version=1000), now=0.0)
    core.update_host(make_report("new", hypervisor_version=2000), now=0.0)
    core.update_host(make_report("none"), now=0.0)
    assert _pick(core, "a") == "new"
    core.create_aggregate("flip", {"hypervisor_version_weight_multiplier": "-1"}, ["new"])
    assert _pick(core, "b") == "old"  # new: -1 x 1.0, old: 1 x 0.5, none: 0
    # a multiplier of 0 configured: an aggregate's still turns it on for its hosts
    core = make_core(make_config(max_attempts=10, **_VERSION_ONLY))
    core.update_host(make_report("old", hypervisor_version=1000), now=0.0)
    core.update_host(make_report("new", hypervisor_version=2000), now=0.0)
    assert _pick(core, "c") == "old"  # nothing weighs: the first row
    core.create_aggregate("on", {"hypervisor_version_weight_multiplier": "3"}, ["new"])
    assert _pick(core, "d") == "new"


def test_hypervisor_version_weigher_is_nova_34s_and_silent_on_one_version() -> None:
    # Nova 18 had no such weigher: not built by default, nor under Nova 18's rules
    names = {w.name for w in make_core().weighers}
    assert "HypervisorVersionWeigher" not in names
    nova_34 = make_core(make_config(nova_release=34, hypervisor_version_weight_multiplier=1.0))
    assert "HypervisorVersionWeigher" in {w.name for w in nova_34.weighers}
    # every host of one version: it says nothing, and the shortcut still answers
    for host in ("h1", "h2"):
        nova_34.update_host(make_report(host, hypervisor_version=5), now=0.0)
    [weigher] = [w for w in nova_34.weighers if w.name == "HypervisorVersionWeigher"]
    ctx = PlacementContext(make_spec(), nova_34.config, 1.0, nova_34.ledger, nova_34.locate)
    assert weigher.weigh_all(nova_34.table, ctx) is None
    nova_34.update_host(make_report("h3", hypervisor_version=6), now=0.0)
    assert _pick(nova_34) == "h3"
