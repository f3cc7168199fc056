"""Host aggregates in the core: the admin commands, zones, the Aggregate* filters, ratios.

Each Nova rule is checked against the Nova 18.0.0 unit test it mirrors
(``nova/tests/unit/scheduler/filters/...``), named in the test's name or docstring;
where Nova 34's rule differs, a test with ``nova_release=34`` pins it too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import InvalidRequest, NoValidHost
from actorsched.core import SchedulerCore
from actorsched.core.aggregates import match_extra_spec, scoped_extra_specs
from actorsched.core.filters import (
    AggregateInstanceExtraSpecsFilter,
    AggregateMultiTenancyIsolation,
    AggregateTypeAffinityFilter,
    PlacementContext,
)
from actorsched.core.ledger import asks_resources_only, request_fingerprint
from actorsched.models import AGGREGATE_FILTERS, BUILTIN_FILTERS

ALL_FILTERS = [*BUILTIN_FILTERS, *AGGREGATE_FILTERS]


def _core(*hosts: str, filters: list[str] | None = None, **config: Any) -> SchedulerCore:
    core = make_core(make_config(enabled_filters=filters or ALL_FILTERS, **config))
    for host in hosts:
        core.update_host(make_report(host), 1.0)
    return core


def _passing(core: SchedulerCore, **fields: Any) -> set[str]:
    """The hosts a request with ``fields`` may go to (every placement tried, then undone)."""
    hosts: set[str] = set()
    uuid = 0
    while True:
        uuid += 1
        spec = make_spec(f"probe-{uuid}", ignore_hosts=sorted(hosts) or [], **fields)
        try:
            [selection] = core.select_destinations(spec, 2.0)
        except NoValidHost:
            break
        hosts.add(selection.host)
    for n in range(1, uuid):
        core.release(f"probe-{n}", 2.0)
    return hosts


# -- extra_specs_ops (nova/tests/unit/scheduler/filters/test_extra_specs_ops.py) --

NOVA_EXTRA_SPECS_OPS = [
    ("test_extra_specs_matches_simple", "1", "1", True),
    ("test_extra_specs_fails_simple", "", "1", False),
    ("test_extra_specs_fails_simple2", "3", "1", False),
    ("test_extra_specs_fails_simple3", "222", "2", False),
    ("test_extra_specs_fails_with_bogus_ops", "4", "> 2", False),
    ("test_extra_specs_matches_with_op_eq", "123", "= 123", True),
    ("test_extra_specs_matches_with_op_eq2", "124", "= 123", True),
    ("test_extra_specs_fails_with_op_eq", "34", "= 234", False),
    ("test_extra_specs_fails_with_op_eq3", "34", "=", False),
    ("test_extra_specs_matches_with_op_seq", "123", "s== 123", True),
    ("test_extra_specs_fails_with_op_seq", "1234", "s== 123", False),
    ("test_extra_specs_matches_with_op_sneq", "1234", "s!= 123", True),
    ("test_extra_specs_fails_with_op_sneq", "123", "s!= 123", False),
    ("test_extra_specs_fails_with_op_sge", "1000", "s>= 234", False),
    ("test_extra_specs_fails_with_op_sle", "1234", "s<= 1000", False),
    ("test_extra_specs_fails_with_op_sl", "2", "s< 12", False),
    ("test_extra_specs_fails_with_op_sg", "12", "s> 2", False),
    ("test_extra_specs_matches_with_op_in", "12311321", "<in> 11", True),
    ("test_extra_specs_matches_with_op_in2", "12311321", "<in> 12311321", True),
    ("test_extra_specs_matches_with_op_in3", "12311321", "<in> 12311321 <in>", True),
    ("test_extra_specs_fails_with_op_in", "12310321", "<in> 11", False),
    ("test_extra_specs_fails_with_op_in2", "12310321", "<in> 11 <in>", False),
    ("test_extra_specs_matches_with_op_or", "12", "<or> 11 <or> 12", True),
    ("test_extra_specs_matches_with_op_or2", "12", "<or> 11 <or> 12 <or>", True),
    ("test_extra_specs_fails_with_op_or", "13", "<or> 11 <or> 12", False),
    ("test_extra_specs_fails_with_op_or2", "13", "<or> 11 <or> 12 <or>", False),
    ("test_extra_specs_matches_with_op_le", "2", "<= 10", True),
    ("test_extra_specs_fails_with_op_le", "3", "<= 2", False),
    ("test_extra_specs_matches_with_op_ge", "3", ">= 1", True),
    ("test_extra_specs_fails_with_op_ge", "2", ">= 3", False),
    (
        "test_extra_specs_matches_all_with_op_allin",
        "['aes', 'mmx', 'aux']",
        "<all-in> aes mmx",
        True,
    ),
    ("test_extra_specs_matches_one_with_op_allin", "['aes', 'mmx', 'aux']", "<all-in> mmx", True),
    ("test_extra_specs_fails_with_op_allin", "['aes', 'mmx', 'aux']", "<all-in>  txt", False),
    (
        "test_extra_specs_fails_all_with_op_allin",
        "['aes', 'mmx', 'aux']",
        "<all-in> txt 3dnow",
        False,
    ),
    (
        "test_extra_specs_fails_match_one_with_op_allin",
        "['aes', 'mmx', 'aux']",
        "<all-in> txt aes",
        False,
    ),
    # not Nova's (it raises ValueError): a numeric operator over a word is no match
    ("numeric_operator_over_a_word_is_no_match", "fast", ">= 2", False),
]


@pytest.mark.parametrize(
    ("value", "requested", "matches"),
    [case[1:] for case in NOVA_EXTRA_SPECS_OPS],
    ids=[case[0] for case in NOVA_EXTRA_SPECS_OPS],
)
def test_extra_specs_ops_match_as_nova(value: str, requested: str, matches: bool) -> None:
    assert match_extra_spec(value, requested) is matches


# -- AggregateInstanceExtraSpecsFilter (test_aggregate_instance_extra_specs_filters.py) --


def _extra_specs_core() -> SchedulerCore:
    """h1 in an aggregate with opt1=1,3 and opt2=2; h2 in one with opt1=1; h3 in none."""
    core = _core("h1", "h2", "h3")
    core.create_aggregate("a1", {"opt1": "1, 3", "opt2": "2"}, ["h1"])
    core.create_aggregate("a2", {"opt1": "1"}, ["h2"])
    return core


def test_aggregate_filter_passes_no_extra_specs() -> None:
    """Nova: test_aggregate_filter_passes_no_extra_specs and ..._empty_extra_specs."""
    core = _extra_specs_core()
    ctx = PlacementContext(
        make_spec(), core.config, 2.0, core.ledger, core.locate, [], core.aggregates
    )
    assert AggregateInstanceExtraSpecsFilter().filter_all(core.table, ctx) is None
    assert _passing(core, extra_specs={}) == {"h1", "h2", "h3"}


def test_aggregate_filter_passes_extra_specs_simple() -> None:
    """Nova: test_aggregate_filter_passes_extra_specs_simple (unscoped and scoped keys)."""
    core = _extra_specs_core()
    specs = {"opt1": "1", "aggregate_instance_extra_specs:opt2": "2"}
    assert _passing(core, extra_specs=specs) == {"h1"}


def test_aggregate_filter_passes_extra_specs_simple_comma() -> None:
    """Nova: test_aggregate_filter_passes_extra_specs_simple_comma: each comma value counts."""
    core = _extra_specs_core()
    specs = {"opt1": "1", "aggregate_instance_extra_specs:opt1": "3"}
    assert _passing(core, extra_specs=specs) == {"h1"}
    assert _passing(core, extra_specs={"opt1": "1"}) == {"h1", "h2"}


def test_aggregate_filter_passes_with_key_same_as_scope() -> None:
    """Nova: test_aggregate_filter_passes_with_key_same_as_scope."""
    core = _core("h1", "h2")
    core.create_aggregate("a1", {"aggregate_instance_extra_specs": "1"}, ["h1"])
    assert _passing(core, extra_specs={"aggregate_instance_extra_specs": "1"}) == {"h1"}


def test_aggregate_filter_fails_extra_specs_simple() -> None:
    """Nova: test_aggregate_filter_fails_extra_specs_simple: a host in no aggregate fails too."""
    core = _extra_specs_core()
    with pytest.raises(NoValidHost, match="AggregateInstanceExtraSpecsFilter removed 3"):
        core.select_destinations(make_spec(extra_specs={"opt1": "1", "opt2": "222"}), 2.0)


def test_extra_specs_of_other_scopes_are_not_this_filters() -> None:
    """Nova's scoping: ``hw:...`` and other scoped keys are skipped."""
    assert scoped_extra_specs({"hw:cpu_policy": "dedicated", "capabilities:x": "1"}) == ()
    core = _extra_specs_core()
    assert _passing(core, extra_specs={"hw:cpu_policy": "dedicated"}) == {"h1", "h2", "h3"}


def test_extra_specs_with_no_aggregate_at_all_fail_every_host() -> None:
    core = _core("h1")
    with pytest.raises(NoValidHost, match="AggregateInstanceExtraSpecsFilter removed 1"):
        core.select_destinations(make_spec(extra_specs={"ssd": "true"}), 2.0)


def test_extra_specs_operators_against_aggregate_metadata() -> None:
    core = _core("big", "small")
    core.create_aggregate("big", {"cpu_gen": "9", "flags": "aes"}, ["big"])
    core.create_aggregate("small", {"cpu_gen": "4"}, ["small"])
    assert _passing(core, extra_specs={"cpu_gen": ">= 5"}) == {"big"}
    assert _passing(core, extra_specs={"cpu_gen": "<or> 4 <or> 9"}) == {"big", "small"}
    assert _passing(core, extra_specs={"flags": "<in> ae"}) == {"big"}


def test_a_numeric_operator_over_a_value_that_is_not_a_number_is_no_match_in_nova_18() -> None:
    """actorsched's rule with the default nova_release 18: ``float('fast')`` is no
    match (Nova raises; see the test below for nova_release 34), nothing else fails."""
    core = _core("h0", "h1")
    core.create_aggregate("agg0", {"tier": "fast"}, ["h0"])
    core.create_aggregate("agg1", {"tier": "3"}, ["h1"])
    assert _passing(core, extra_specs={"aggregate_instance_extra_specs:tier": ">= 2"}) == {"h1"}
    assert _passing(core, extra_specs={"tier": "= x"}) == set()


def test_a_numeric_operator_over_a_value_that_is_not_a_number_refuses_the_request() -> None:
    """Nova 34's extra_specs_ops (``'>=': lambda x, y: float(x) >= float(y)``) raises
    ValueError for ``float('fast')`` out of AggregateInstanceExtraSpecsFilter and the
    request fails (no Nova unit test covers it: the differential's minimal case does).
    With nova_release 34 actorsched refuses it whenever such a value is on a host that
    reported: InvalidRequest naming the key, the value and its aggregate, nothing placed."""
    core = _core("h0", "h1", nova_release=34)
    core.create_aggregate("agg0", {"tier": "fast"}, ["h0"])
    core.create_aggregate("agg1", {"tier": "3"}, ["h1"])
    numeric = {"aggregate_instance_extra_specs:tier": ">= 2"}
    refused = r"'tier' asks '>= 2'.* aggregate 'agg0' of host 'h0' has tier='fast', not a number"
    with pytest.raises(InvalidRequest, match=refused):
        core.select_destinations(make_spec("vm1", "vm2", extra_specs=numeric), 2.0)
    with pytest.raises(InvalidRequest, match=refused):
        core.plan(make_spec("vm1", extra_specs=numeric), 2.0)
    assert core.claims() == {}
    # a host's other value that is a number does not help (Nova's set order decides)
    core.update_aggregate("agg1", {"tier": "3"})
    core.add_host_to_aggregate("agg1", "h0")
    with pytest.raises(InvalidRequest, match=refused):
        core.select_destinations(make_spec("vm1", extra_specs=numeric), 2.0)
    # an operand that is not a number, whatever the aggregates say
    with pytest.raises(InvalidRequest, match=r"'tier' asks '= x'.*'x', which is not a number"):
        core.select_destinations(make_spec("vm1", extra_specs={"tier": "= x"}), 2.0)
    # string operators, other keys and the other operators compare no number
    assert _passing(core, extra_specs={"tier": "s== fast"}) == {"h0"}
    assert _passing(core, extra_specs={"tier": "<in> fa"}) == {"h0"}
    assert _passing(core, extra_specs={"tier": "3"}) == {"h0", "h1"}
    # a value on no host that reported does not count
    core.remove_host_from_aggregate("agg0", "h0")
    core.add_host_to_aggregate("agg0", "ghost")
    assert _passing(core, extra_specs=numeric) == {"h0", "h1"}
    core.update_host(make_report("ghost"), 3.0)
    with pytest.raises(InvalidRequest, match="host 'ghost' has tier='fast'"):
        core.select_destinations(make_spec("vm1", extra_specs=numeric), 3.0)


# -- AggregateMultiTenancyIsolation (test_aggregate_multitenancy_isolation_filters.py) --


def _tenancy_core() -> SchedulerCore:
    core = _core("h1", "h2", "free")
    core.create_aggregate("isolated", {"filter_tenant_id": "my_tenantid"}, ["h1"])
    core.create_aggregate("shared", {"filter_tenant_id": "my_tenantid, other"}, ["h2"])
    return core


def test_aggregate_multi_tenancy_isolation_with_meta_passes() -> None:
    """Nova: test_aggregate_multi_tenancy_isolation_with_meta_passes (and _comma)."""
    assert _passing(_tenancy_core(), project_id="my_tenantid") == {"h1", "h2", "free"}
    assert _passing(_tenancy_core(), project_id="other") == {"h2", "free"}


def test_aggregate_multi_tenancy_isolation_fails() -> None:
    """Nova: test_aggregate_multi_tenancy_isolation_fails (and _fails_comma)."""
    assert _passing(_tenancy_core(), project_id="otherid") == {"free"}


def test_aggregate_multi_tenancy_isolation_applies_to_a_request_of_resources_only() -> None:
    """A request naming no project is of none of the listed ones: the shortcut of a plain
    request must not place it on an isolated host."""
    core = _tenancy_core()
    core.update_host(make_report("h1", 2, memory_mb=65536), 1.0)  # the best host by far
    assert _passing(core) == {"free"}


def test_aggregate_multi_tenancy_isolation_with_prefix() -> None:
    """Nova 34: test_aggregate_multi_tenancy_isolation_with_prefix: every key that starts
    with filter_tenant_id counts (aggregate_multitenancy_isolation.py:
    ``name.startswith("filter_tenant_id")``), over the host's aggregates together
    (nova_release 34)."""
    core = _core("h1", "free", nova_release=34)
    core.create_aggregate("old", {"filter_tenant_id": "my_tenantid"}, ["h1"])
    core.create_aggregate(
        "groups",
        {
            "filter_tenant_id_gr1": "my_tenantid1, my_tenantid2",
            "filter_tenant_id_gr2": "my_tenantid5,my_tenantid4",
        },
        ["h1"],
    )
    # my_tenantid passes as before, my_tenantid2 by the new keys, my_tenantid6 still not
    assert _passing(core, project_id="my_tenantid") == {"h1", "free"}
    assert _passing(core, project_id="my_tenantid2") == {"h1", "free"}
    assert _passing(core, project_id="my_tenantid6") == {"free"}


def test_aggregate_multi_tenancy_isolation_reads_only_filter_tenant_id_in_nova_18() -> None:
    """Nova 18.0.0 reads ``filter_tenant_id`` only (the default nova_release): a
    filter_tenant_id2 key isolates nothing, a request of resources only included."""
    core = _core("h0", "h1")
    core.create_aggregate("agg0", {"filter_tenant_id2": "p2"}, ["h0"])
    assert _passing(core, project_id="p1") == {"h0", "h1"}
    assert _passing(core) == {"h0", "h1"}
    core.update_aggregate("agg0", {"filter_tenant_id": "p2"})
    assert _passing(core, project_id="p1") == {"h1"}


def test_aggregate_multi_tenancy_isolation_with_only_a_suffixed_key() -> None:
    """filter_tenant_id2 alone isolates its hosts (the differential's minimal case;
    nova_release 34): the filter applies once some aggregate has such a key, a
    request of resources only included, and stops when the key goes."""
    core = _core("h0", "h1", nova_release=34)
    core.create_aggregate("agg0", {"filter_tenant_id2": "p2"}, ["h0"])
    assert _passing(core, project_id="p1") == {"h1"}
    assert _passing(core, project_id="p2") == {"h0", "h1"}
    assert _passing(core) == {"h1"}
    core.update_aggregate("agg0", {"filter_tenant_id2": None})
    assert _passing(core, project_id="p1") == {"h0", "h1"}


def test_aggregate_multi_tenancy_isolation_no_meta_passes() -> None:
    """Nova: test_aggregate_multi_tenancy_isolation_no_meta_passes: no key, no filter."""
    core = _core("h1", "h2")
    core.create_aggregate("plain", {"other": "x"}, ["h1"])
    ctx = PlacementContext(
        make_spec(project_id="p"), core.config, 2.0, core.ledger, core.locate, [], core.aggregates
    )
    assert AggregateMultiTenancyIsolation().filter_all(core.table, ctx) is None
    assert _passing(core, project_id="p") == {"h1", "h2"}


# -- AggregateTypeAffinityFilter (test_type_filters.py) ---------------------------


def test_aggregate_type_filter_no_metadata() -> None:
    """Nova: test_aggregate_type_filter_no_metadata: no instance_type key, every host."""
    core = _core("h1", "h2")
    core.create_aggregate("a", {"x": "y"}, ["h1"])
    ctx = PlacementContext(
        make_spec(flavor_name="m1"), core.config, 2.0, core.ledger, core.locate, [], core.aggregates
    )
    assert AggregateTypeAffinityFilter().filter_all(core.table, ctx) is None


def test_aggregate_type_filter_single_instance_type() -> None:
    """Nova: test_aggregate_type_filter_single_instance_type."""
    core = _core("h1", "h2")
    core.create_aggregate("small", {"instance_type": "fake1"}, ["h1"])
    assert _passing(core, flavor_name="fake1") == {"h1", "h2"}
    assert _passing(core, flavor_name="fake2") == {"h2"}


def test_aggregate_type_filter_multi_aggregate() -> None:
    """Nova: test_aggregate_type_filter_multi_aggregate: one of the host's aggregates suffices."""
    core = _core("h1")
    core.create_aggregate("a1", {"instance_type": "fake1"}, ["h1"])
    core.create_aggregate("a2", {"instance_type": "fake2"}, ["h1"])
    assert _passing(core, flavor_name="fake1") == {"h1"}
    assert _passing(core, flavor_name="fake2") == {"h1"}
    assert _passing(core, flavor_name="fake3") == set()


def test_aggregate_type_filter_multi_instance_type() -> None:
    """Nova: test_aggregate_type_filter_multi_instance_type: a comma list of flavors."""
    core = _core("h1", "h2")
    core.create_aggregate("a1", {"instance_type": "fake1, fake2"}, ["h1"])
    assert _passing(core, flavor_name="fake2") == {"h1", "h2"}
    assert _passing(core, flavor_name="fake3") == {"h2"}
    assert _passing(core) == {"h2"}  # no flavor name: none of the listed ones


# -- Aggregate{Ram,Core,Disk}Filter (test_ram_filters.py, test_core_filters.py ...) --

RATIO_FILTERS = {
    "ram": ("AggregateRamFilter", "ram_allocation_ratio", "memory_mb", 4096),
    "cpu": ("AggregateCoreFilter", "cpu_allocation_ratio", "vcpus", 4),
    "disk": ("AggregateDiskFilter", "disk_allocation_ratio", "disk_gb", 100),
}


def _ratio_core(*, aggregate_filter: bool = True) -> SchedulerCore:
    """h1 with every Aggregate*Filter on (or the plain resource filters instead)."""
    filters = [f for f in BUILTIN_FILTERS if f not in ("RamFilter", "CoreFilter", "DiskFilter")]
    filters += ["RamFilter", "CoreFilter", "DiskFilter"] if not aggregate_filter else []
    if aggregate_filter:
        filters += ["AggregateRamFilter", "AggregateCoreFilter", "AggregateDiskFilter"]
    return _core("h1", filters=filters, cpu_allocation_ratio=1.0)


def _effective(core: SchedulerCore, resource: str) -> float:
    field = RATIO_FILTERS[resource][1]
    value: float = getattr(core.host_states()["h1"], field)
    return value


@pytest.mark.parametrize("resource", sorted(RATIO_FILTERS))
def test_aggregate_filter_conflict_values(resource: str) -> None:
    """Nova: test_aggregate_{ram,core}_filter_conflict_values: the smallest ratio counts."""
    _, key, field, total = RATIO_FILTERS[resource]
    core = _ratio_core()
    core.create_aggregate("a1", {key: "3.0"}, ["h1"])
    core.create_aggregate("a2", {key: "2.0"}, ["h1"])
    assert _effective(core, resource) == 2.0
    others = {"memory_mb": 0, "vcpus": 0, "disk_gb": 0}  # only this resource counts
    core.select_destinations(make_spec("fits1", **{**others, field: total}), 2.0)
    core.select_destinations(make_spec("fits2", **{**others, field: total}), 2.0)  # 2 x total
    with pytest.raises(NoValidHost, match=RATIO_FILTERS[resource][0]):
        core.select_destinations(make_spec("over", **{**others, field: 1}), 2.0)


@pytest.mark.parametrize("resource", sorted(RATIO_FILTERS))
def test_aggregate_filter_value_error(resource: str) -> None:
    """Nova: test_aggregate_{ram,core,disk}_filter_value_error: a value that is no number
    makes the host's own ratio count (validate_num_values raises, the filter falls back)."""
    _, key, _, _ = RATIO_FILTERS[resource]
    core = _ratio_core()
    core.update_host(make_report("h1", 2, **{key: 1.5}), 1.0)
    core.create_aggregate("a1", {key: "XXX"}, ["h1"])
    core.create_aggregate("a2", {key: "0.5"}, ["h1"])
    assert _effective(core, resource) == 1.5


@pytest.mark.parametrize("resource", sorted(RATIO_FILTERS))
def test_aggregate_filter_ratio_of_zero(resource: str) -> None:
    """An aggregate ratio "0" is 0.0, as Nova's validate_num_values reads it (Nova 34's
    filters/test_utils.py test_validate_num_values: ``f({"1"}, cast_to=float) == 1.0``,
    the smallest of several: ``f({"10", "9"}) == 9``); Nova 18's Aggregate*Filter then
    takes ``total x 0 - used``: nothing of that resource, whatever the host's own ratio
    (RamFilter: usable_ram = memory_mb_limit - used_ram_mb; CoreFilter: free_vcpus =
    vcpus_total x ratio - vcpus_used; DiskFilter likewise)."""
    name, key, field, _ = RATIO_FILTERS[resource]
    core = _ratio_core()
    core.update_host(make_report("h1", 2, **{key: 1.5}), 1.0)
    core.create_aggregate("a1", {key: "10"}, ["h1"])
    core.create_aggregate("a2", {key: "0"}, ["h1"])
    assert _effective(core, resource) == 0.0
    others = {"memory_mb": 0, "vcpus": 0, "disk_gb": 0}
    with pytest.raises(NoValidHost, match=f"{name} removed 1"):
        core.select_destinations(make_spec("one", **{**others, field: 1}), 2.0)
    # asking none of it still passes a host that uses none (0 x total - 0 >= 0, as Nova)
    assert _passing(core, **others) == {"h1"}
    core.remove_host_from_aggregate("a2", "h1")
    assert _effective(core, resource) == 10.0


@pytest.mark.parametrize("resource", sorted(RATIO_FILTERS))
def test_aggregate_filter_default_value(resource: str) -> None:
    """Nova: test_aggregate_{ram,core,disk}_filter_default_value: no aggregate value, the
    host's ratio; then the aggregate's."""
    _, key, _, _ = RATIO_FILTERS[resource]
    core = _ratio_core()
    default = _effective(core, resource)
    core.create_aggregate("a1", {"other": "1"}, ["h1"])
    assert _effective(core, resource) == default
    core.update_aggregate("a1", {key: "7.5"})
    assert _effective(core, resource) == 7.5
    core.update_aggregate("a1", {key: None})  # deleted again: the host's own
    assert _effective(core, resource) == default


@pytest.mark.parametrize("resource", sorted(RATIO_FILTERS))
def test_aggregate_ratio_counts_only_with_its_aggregate_filter(resource: str) -> None:
    """RamFilter (not AggregateRamFilter) keeps the host's ratio whatever aggregates say."""
    _, key, _, _ = RATIO_FILTERS[resource]
    core = _ratio_core(aggregate_filter=False)
    core.update_host(make_report("h1", 2, **{key: 1.5}), 1.0)
    core.create_aggregate("a1", {key: "9"}, ["h1"])
    assert _effective(core, resource) == 1.5


@pytest.mark.parametrize(
    ("filters", "fits"),
    [
        (["RamFilter"], False),
        (["AggregateRamFilter"], True),
        (["RamFilter", "AggregateRamFilter"], False),
        (["AggregateRamFilter", "RamFilter"], False),
    ],
)
def test_ram_filter_keeps_the_hosts_ratio_beside_aggregate_ram_filter(
    filters: list[str], fits: bool
) -> None:
    """Nova 18 with both on: RamFilter reads the host's own ratio, AggregateRamFilter
    the aggregate's, and a host must pass both. A host of 1,000 MB, 1,500 used, its own
    ratio 2.0 (500 MB left) in an aggregate of ratio 3.0 (1,500 left): 800 MB fits by
    AggregateRamFilter alone, not with RamFilter on."""
    core = make_core(make_config(enabled_filters=["ComputeFilter", *filters]))
    report = make_report("h1", memory_mb=1000, memory_mb_used=1500, ram_allocation_ratio=2.0)
    core.update_host(report, 1.0)
    core.create_aggregate("a1", {"ram_allocation_ratio": "3.0"}, ["h1"])
    assert _passing(core, memory_mb=800, vcpus=0, disk_gb=0) == ({"h1"} if fits else set())
    assert _passing(core, memory_mb=500, vcpus=0, disk_gb=0) == {"h1"}


def test_ratio_precedence_aggregate_then_host_then_config() -> None:
    # AggregateRamFilter on (RamFilter off: beside it, the smaller ratio counts)
    filters = [f for f in ALL_FILTERS if f != "RamFilter"]
    core = _core("h1", filters=filters, ram_allocation_ratio=1.0)
    assert core.host_states()["h1"].ram_allocation_ratio == 1.0  # the configured one
    core.update_host(make_report("h1", 2, ram_allocation_ratio=1.5), 1.0)
    assert core.host_states()["h1"].ram_allocation_ratio == 1.5  # the host's own
    core.create_aggregate("a", {"ram_allocation_ratio": "3"}, ["h1"])
    assert core.host_states()["h1"].ram_allocation_ratio == 3.0  # AggregateRamFilter on
    core.remove_host_from_aggregate("a", "h1")
    assert core.host_states()["h1"].ram_allocation_ratio == 1.5
    core.update_host(make_report("h1", 3), 1.0)  # reports no ratio any more
    assert core.host_states()["h1"].ram_allocation_ratio == 1.0


def test_a_reported_ratio_overrides_the_configured_one_for_that_host() -> None:
    core = make_core(make_config(ram_allocation_ratio=1.0, cpu_allocation_ratio=1.0))
    core.update_host(make_report("h1", memory_mb=4096, vcpus=4, ram_allocation_ratio=2.0), 1.0)
    core.update_host(make_report("h2", memory_mb=4096, vcpus=4, cpu_allocation_ratio=3.0), 1.0)
    states = core.host_states()
    assert (states["h1"].ram_allocation_ratio, states["h1"].cpu_allocation_ratio) == (2.0, 1.0)
    assert (states["h2"].ram_allocation_ratio, states["h2"].cpu_allocation_ratio) == (1.0, 3.0)
    # 6 GB fits only h1 (4 GB x 2 >= 6, but never more than its 4 GB per instance: no)
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("big", memory_mb=6144), 2.0)
    core.select_destinations(make_spec("a", memory_mb=4096), 2.0)
    core.select_destinations(make_spec("b", memory_mb=4096), 2.0)
    core.select_destinations(make_spec("c", memory_mb=2048), 2.0)
    assert core.ledger.claims["c"].host == "h1"  # h1 takes 8 GB in all, h2 4 GB
    # the CPU weigher's headroom uses the host's own cpu ratio: 4 x 3 - 1
    row = core.table.row_of["h2"]
    assert core.table.column("vcpu_headroom")[row] == 4 * 3.0 - 1


def test_the_batch_and_the_one_report_paths_derive_the_same_bits() -> None:
    """update_hosts (whole-array) and update_host (scalars) give identical figures, with
    ratios of hosts and aggregates in play."""
    ratios = [None, 1.3, 0.7, 3.1]

    def reports(generation: int) -> list[Any]:
        # the hosts from h40 on report no ratio: the batch derives them whole-array
        return [
            make_report(
                f"h{i}",
                generation,
                memory_mb=1000 + 7 * i,
                memory_mb_used=3 * i,
                vcpus=3 + i % 5,
                vcpus_used=i % 3,
                **(
                    {}
                    if i >= 40
                    else {
                        "ram_allocation_ratio": ratios[i % 4],
                        "cpu_allocation_ratio": ratios[(i + 1) % 4],
                    }
                ),
            )
            for i in range(60)
        ]

    one, batch = _core(), _core()
    for core in (one, batch):
        core.create_aggregate(
            "dense", {"disk_allocation_ratio": "1.7"}, [f"h{i}" for i in range(0, 60, 3)]
        )
        # AggregateCoreFilter's ratio, not the CPU weigher's (that stays the host's own)
        core.create_aggregate(
            "cores", {"cpu_allocation_ratio": "2.5"}, [f"h{i}" for i in range(1, 60, 4)]
        )
    for report in reports(1):
        one.update_host(report, 1.0)
    batch.update_hosts(reports(1), 1.0)
    n = one.table.n
    assert np.array_equal(one.table.derived[:, :n], batch.table.derived[:, :n])
    assert np.array_equal(one.table.ratios[:, :n], batch.table.ratios[:, :n])
    assert one.digest() == batch.digest()


# -- availability zones from aggregates (test_availability_zone_filters.py) ----------


def test_availability_zone_filter_same_and_different() -> None:
    """Nova: test_availability_zone_filter_same / _different: the aggregate's zone counts,
    a host in no zone aggregate is in default_availability_zone."""
    core = _core("h1", "h2")
    core.create_aggregate("az1", {"availability_zone": "az1"}, ["h1"])
    assert core.host_states()["h1"].availability_zone == "az1"
    assert _passing(core, availability_zone="az1") == {"h1"}
    assert _passing(core, availability_zone="nova") == {"h2"}
    assert _passing(core, availability_zone="az2") == set()


def test_map_az_to_placement_aggregate() -> None:
    """Nova 34 (nova_release 34): test_request_filter.py test_map_az (a zone an
    aggregate names: that aggregate's hosts, Placement's member_of),
    test_map_az_no_aggregates (a zone no aggregate names: no limit, the default zone
    or another) and test_map_az_no_hint."""
    core = _core("h1", "h2", nova_release=34)
    core.create_aggregate("az1", {"availability_zone": "az1"}, ["h1"])
    assert core.host_states()["h1"].availability_zone == "az1"
    assert _passing(core, availability_zone="az1") == {"h1"}
    assert _passing(core, availability_zone="nova") == {"h1", "h2"}
    assert _passing(core) == {"h1", "h2"}
    # an aggregate of the default zone: its hosts only, not the zoneless h3
    core.update_host(make_report("h3"), 1.0)
    core.create_aggregate("default", {"availability_zone": "nova"}, ["h2"])
    assert _passing(core, availability_zone="nova") == {"h2"}
    # an aggregate of a zone with no host: no candidate (member_of names no provider)
    core.create_aggregate("empty", {"availability_zone": "az3"}, [])
    assert _passing(core, availability_zone="az3") == set()
    core.delete_aggregate("empty")
    core.remove_host_from_aggregate("default", "h2")
    assert _passing(core, availability_zone="nova") == set()  # it still names the zone
    core.delete_aggregate("default")
    assert _passing(core, availability_zone="nova") == {"h1", "h2", "h3"}
    # a zone nothing names (test_map_az_no_aggregates): no member_of, no limit
    assert _passing(core, availability_zone="az2") == {"h1", "h2", "h3"}
    assert _passing(core, availability_zone="az3") == {"h1", "h2", "h3"}  # its aggregate gone


def test_an_aggregate_zone_overrides_the_reported_one_until_the_host_leaves() -> None:
    core = _core()
    core.update_host(make_report("h1", availability_zone="reported"), 1.0)
    core.create_aggregate("az", {"availability_zone": "agg-zone"}, ["h1"])
    assert core.host_states()["h1"].availability_zone == "agg-zone"
    core.update_host(make_report("h1", 2, availability_zone="reported"), 1.0)  # still pinned
    assert _passing(core, availability_zone="agg-zone") == {"h1"}
    assert _passing(core, availability_zone="reported") == set()
    core.remove_host_from_aggregate("az", "h1")
    assert core.host_states()["h1"].availability_zone == "reported"
    assert _passing(core, availability_zone="reported") == {"h1"}


def test_availability_zone_filter_same_comma_is_refused_as_two_zones() -> None:
    """Nova: test_availability_zone_filter_same_comma has a host in two zones; Nova's
    aggregate API refuses that, and so do we (an aggregate zone is one name)."""
    core = _core("h1")
    core.create_aggregate("a", {"availability_zone": "az1"}, ["h1"])
    before = core.digest()
    with pytest.raises(InvalidRequest, match="one zone name"):
        core.create_aggregate("b", {"availability_zone": "az1,az2"}, ["h1"])
    with pytest.raises(InvalidRequest, match="is in availability zone 'az1' by host aggregate"):
        core.create_aggregate("b", {"availability_zone": "az2"}, ["h1"])
    core.create_aggregate("c", {"availability_zone": "az2"})
    with pytest.raises(InvalidRequest, match="cannot put it in 'az2'"):
        core.add_host_to_aggregate("c", "h1")
    core.update_aggregate("c", {"availability_zone": None})
    core.add_host_to_aggregate("c", "h1")  # c has no zone now: no conflict
    with pytest.raises(InvalidRequest, match="cannot put it in 'az3'"):
        core.update_aggregate("c", {"availability_zone": "az3"})
    core.remove_host_from_aggregate("c", "h1")
    core.delete_aggregate("c")
    assert core.digest() == before


def test_a_host_named_before_it_reports_joins_when_it_reports() -> None:
    core = _core("other", filters=[f for f in ALL_FILTERS if f != "RamFilter"])
    metadata = {"availability_zone": "az9", "ssd": "true", "ram_allocation_ratio": "2.5"}
    core.create_aggregate("az", metadata, ["later"])
    assert "later" not in core.host_states()
    core.update_host(make_report("later"), 1.0)
    state = core.host_states()["later"]
    assert (state.availability_zone, state.aggregates) == ("az9", ["az"])
    assert state.ram_allocation_ratio == 2.5
    assert _passing(core, availability_zone="az9") == {"later"}
    assert _passing(core, extra_specs={"ssd": "true"}) == {"later"}
    core.remove_host("later", 2.0)  # membership is by name: it holds on a report again
    core.update_hosts([make_report(f"b{i}") for i in range(10)] + [make_report("later", 5)], 3.0)
    state = core.host_states()["later"]  # through the batch path this time
    assert (state.availability_zone, state.ram_allocation_ratio) == ("az9", 2.5)


# -- the admin commands: errors, repeats, bounds --------------------------------------


def test_a_repeated_create_answers_and_another_definition_is_refused() -> None:
    core = _core("h1")
    first = core.create_aggregate("a", {"k": "v"}, ["h1"])
    assert core.create_aggregate("a", {"k": "v"}, ["h1"]) == first  # a redelivery
    before = core.digest()
    with pytest.raises(InvalidRequest, match="already exists with other hosts or metadata"):
        core.create_aggregate("a", {"k": "w"}, ["h1"])
    assert core.digest() == before


def test_unknown_aggregates_and_membership_errors_change_nothing() -> None:
    core = _core("h1")
    core.create_aggregate("a", {}, ["h1"])
    before = core.digest()
    with pytest.raises(InvalidRequest, match="no host aggregate named 'nope'"):
        core.update_aggregate("nope", {"k": "v"})
    with pytest.raises(InvalidRequest, match="no host aggregate named 'nope'"):
        core.add_host_to_aggregate("nope", "h1")
    with pytest.raises(InvalidRequest, match="already in host aggregate 'a'"):
        core.add_host_to_aggregate("a", "h1")
    with pytest.raises(InvalidRequest, match="is not in host aggregate 'a'"):
        core.remove_host_from_aggregate("a", "h2")
    with pytest.raises(InvalidRequest, match="still has 1 host"):
        core.delete_aggregate("a")
    assert core.delete_aggregate("nope") is False
    assert core.digest() == before
    core.remove_host_from_aggregate("a", "h1")
    assert core.delete_aggregate("a") is True
    assert core.aggregates.aggregates() == []


@pytest.mark.parametrize(
    ("config", "act", "message"),
    [
        ({"max_aggregates": 1}, lambda c: c.create_aggregate("b"), "max_aggregates 1"),
        (
            {"max_aggregate_hosts": 2},
            lambda c: c.create_aggregate("b", {}, ["x", "y", "z"]),
            "max_aggregate_hosts 2",
        ),
        (
            {"max_aggregate_hosts": 1},
            lambda c: c.add_host_to_aggregate("a", "y"),
            "max_aggregate_hosts 1",
        ),
        (
            {"max_aggregate_members": 2},
            lambda c: c.create_aggregate("b", {}, ["x", "y"]),
            "max_aggregate_members 2",
        ),
        (
            {"max_aggregate_metadata": 1},
            lambda c: c.update_aggregate("a", {"second": "v"}),
            "max_aggregate_metadata 1",
        ),
        (
            {"max_zones": 1},
            lambda c: c.create_aggregate("z", {"availability_zone": "new-zone"}),
            "max_zones 1",
        ),
    ],
    ids=["aggregates", "hosts", "hosts-added", "members", "metadata", "zones"],
)
def test_bounds_refuse_with_their_name_and_change_nothing(
    config: dict[str, Any], act: Any, message: str
) -> None:
    core = make_core(make_config(**config))
    core.update_host(make_report("h1", availability_zone="az0"), 1.0)
    core.create_aggregate("a", {"first": "v"}, ["h1"])
    before = core.digest()
    with pytest.raises(InvalidRequest, match=message):
        act(core)
    assert core.digest() == before


def test_aggregate_views_and_host_states_list_memberships() -> None:
    core = _core("h1", "h2")
    core.create_aggregate("b", {"k": "v"}, ["h1", "h2"])
    core.create_aggregate("a", {}, ["h1", "ghost"])
    assert [a.name for a in core.aggregates.aggregates()] == ["a", "b"]
    assert core.aggregates.get("a").hosts == ["h1", "ghost"]
    states = core.host_states()
    assert states["h1"].aggregates == ["a", "b"]
    assert states["h2"].aggregates == ["b"]


def test_memberships_churned_many_times_stay_right() -> None:
    """Membership ids are renumbered after much churn: every row is still in its aggregates."""
    core = _core(*(f"h{i}" for i in range(5)))
    core.create_aggregate("ssd", {"ssd": "true"}, ["h0"])
    for round_ in range(100):
        name = f"tmp{round_}"
        core.create_aggregate(name, {}, [f"h{round_ % 5}", f"h{(round_ + 1) % 5}"])
        core.remove_host_from_aggregate(name, f"h{round_ % 5}")
        core.remove_host_from_aggregate(name, f"h{(round_ + 1) % 5}")
        core.delete_aggregate(name)
    assert len(core.aggregates.memberships) < 100
    assert core.aggregates.members == 1  # h0 in ssd, counted once
    assert {h: s.aggregates for h, s in core.host_states().items()} == {
        "h0": ["ssd"],
        **{f"h{i}": [] for i in range(1, 5)},
    }
    assert _passing(core, extra_specs={"ssd": "true"}) == {"h0"}


# -- requests: fingerprints and the shortcut ----------------------------------------


def test_flavor_extra_specs_and_project_are_in_the_fingerprint() -> None:
    plain = make_spec("vm")
    for fields in ({"flavor_name": "m1"}, {"extra_specs": {"a": "b"}}, {"project_id": "p"}):
        spec = make_spec("vm", **fields)
        assert not asks_resources_only(spec)
        assert request_fingerprint(spec) != request_fingerprint(plain)
    core = _core("h1")
    core.select_destinations(make_spec("vm", project_id="p1"), 2.0)
    with pytest.raises(InvalidRequest, match='project_id "p1" then, "p2" now'):
        core.select_destinations(make_spec("vm", project_id="p2"), 2.0)
    assert core.select_destinations(make_spec("vm", project_id="p1"), 2.0)[0].host == "h1"


def test_the_shortcut_and_the_full_mask_agree_with_aggregate_filters_on() -> None:
    """Plain requests on a table with isolating aggregates: the shortcut (kept extremes)
    must give exactly the ranking of the full mask, or stand aside."""
    import random

    rng = random.Random(7)

    def build(shortcut: bool) -> SchedulerCore:
        core = SchedulerCore(make_config(enabled_filters=ALL_FILTERS), shortcut=shortcut)
        for i in range(30):
            core.update_host(
                make_report(f"h{i}", memory_mb=1024 * (1 + i % 7), vcpus=2 + i % 5), 1.0
            )
        core.create_aggregate("t", {"filter_tenant_id": "p1"}, [f"h{i}" for i in range(0, 30, 4)])
        core.create_aggregate("f", {"instance_type": "big"}, [f"h{i}" for i in range(1, 30, 6)])
        core.create_aggregate(
            "r", {"ram_allocation_ratio": "1.5"}, [f"h{i}" for i in range(2, 30, 5)]
        )
        return core

    fast, full = build(True), build(False)
    for n in range(120):
        fields: dict[str, Any] = rng.choice(
            [{}, {"project_id": "p1"}, {"flavor_name": "big"}, {"project_id": "p2"}]
        )
        spec = make_spec(f"vm{n}", memory_mb=rng.choice([256, 512, 1024]), **fields)
        outcomes: list[object] = []
        for core in (fast, full):
            try:
                outcomes.append(core.select_destinations(spec, 2.0))
            except NoValidHost as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
    assert fast.digest() == full.digest()
    isolated = {f"h{i}" for i in range(0, 30, 4)}
    placed = {c.host for u, c in fast.ledger.claims.items()}
    assert placed - isolated, "plain requests were placed"


def test_the_aggregate_book_takes_no_attribute_it_does_not_declare() -> None:
    # The book keeps a dozen caches cleared on every aggregate change: slotted,
    # a misspelt one (book._answer = ...) raises instead of becoming a cache
    # nothing clears, and a book carries no attribute dict.
    book = make_core().aggregates
    with pytest.raises(AttributeError):
        book._answer = {}  # type: ignore[attr-defined]
    assert "__dict__" not in dir(book)
