"""Nova's opt-in filters in the core: AggregateNumInstancesFilter, AggregateIoOpsFilter,
IsolatedHostsFilter, AggregateImagePropertiesIsolation and JsonFilter.

Each Nova rule is checked against the Nova 34.0.0 unit test it mirrors
(``nova/tests/unit/scheduler/filters/test_num_instances_filters.py``,
``test_io_ops_filters.py``, ``test_isolated_hosts_filter.py``,
``test_aggregate_image_properties_isolation_filters.py`` and
``test_json_filters.py``), named in the test or the case's id. Nova's tests
mock ``utils.aggregate_values_from_key`` / ``aggregate_metadata_get_by_host``:
here a host aggregate with that metadata holds the host. Nova's tests give a
fake ``HostState`` arbitrary attributes; a host report has none, so those
become the host's own figures or ``stats`` entries. The five filters are the
same in Nova 18 and 34: each test runs under both (``nova_release``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import InvalidRequest, NoValidHost
from actorsched.core import SchedulerCore
from actorsched.core.json_filter import MAX_DEPTH, JsonFilter, evaluate, variables
from actorsched.core.ledger import asks_resources_only, request_fingerprint
from actorsched.models import BUILTIN_FILTERS, OPTIONAL_FILTERS

RELEASES = pytest.mark.parametrize("release", [18, 34])
IMAGE = "9f1c3f62-6f3b-4a36-9f55-5b3b2e7c1a01"  # uuids.image_ref
OTHER_IMAGE = "0d2b1a8e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"  # uuids.fake_image_ref
MB = 1024


def _core(
    filters: list[str],
    *reports: dict[str, Any],
    aggregates: dict[str, dict[str, str]] | None = None,
    **config: Any,
) -> SchedulerCore:
    """A core with ``filters`` on, a host per report (host1 ...), and an aggregate
    holding host1 per entry of ``aggregates`` (name -> metadata)."""
    core = make_core(make_config(enabled_filters=filters, **config))
    for i, fields in enumerate(reports):
        core.update_host(make_report(f"host{i + 1}", **fields), 1.0)
    for name, metadata in (aggregates or {}).items():
        core.create_aggregate(name, metadata, ["host1"])
    return core


def _passes(core: SchedulerCore, host: str = "host1", **spec: Any) -> bool:
    """Whether ``host`` passes for a one-instance request (a plan: nothing kept)."""
    plan = core.plan(make_spec("probe", memory_mb=0, vcpus=0, disk_gb=0, **spec), 2.0)
    return plan.placed and host in {c.host for c in plan.instances[0].candidates}


def _instances(count: int) -> list[str]:
    return [f"vm{i}" for i in range(count)]


# -- AggregateNumInstancesFilter (test_num_instances_filters.py) -------------------------


@RELEASES
def test_filter_num_instances_passes_and_fails(release: int) -> None:
    # NumInstancesFilter, max_instances_per_host=5: 4 instances pass, 5 do not
    for filters in (["NumInstancesFilter"], ["AggregateNumInstancesFilter"]):
        config: dict[str, Any] = {"max_instances_per_host": 5, "nova_release": release}
        assert _passes(_core(filters, {"instances": _instances(4)}, **config))
        assert not _passes(_core(filters, {"instances": _instances(5)}, **config))


@RELEASES
def test_filter_aggregate_num_instances_value(release: int) -> None:
    config: dict[str, Any] = {"max_instances_per_host": 4, "nova_release": release}
    host = {"instances": _instances(5)}
    # no aggregate defined for that host
    assert not _passes(_core(["AggregateNumInstancesFilter"], host, **config))
    # aggregate defined for that host
    core = _core(
        ["AggregateNumInstancesFilter"],
        host,
        aggregates={"agg1": {"max_instances_per_host": "6"}},
        **config,
    )
    assert _passes(core)


@RELEASES
def test_filter_aggregate_num_instances_value_error(release: int) -> None:
    config: dict[str, Any] = {"max_instances_per_host": 6, "nova_release": release}
    core = _core(
        ["AggregateNumInstancesFilter"],
        {},
        aggregates={"agg1": {"max_instances_per_host": "XXX"}},
        **config,
    )
    assert _passes(core)


def test_aggregate_num_instances_takes_the_smallest_and_counts_claims() -> None:
    # two aggregates say 3 and 2: the host takes 2 instances (its claims count)
    core = _core(
        ["AggregateNumInstancesFilter"],
        {},
        {},
        aggregates={"a": {"max_instances_per_host": "3"}, "b": {"max_instances_per_host": " 2 "}},
    )
    spec = make_spec("a1", "a2", "a3", memory_mb=0, vcpus=0, disk_gb=0)
    hosts = [s.host for s in core.select_destinations(spec, 2.0)]
    assert hosts.count("host1") <= 2
    # a value that is not an integer among them: the configured one (50) for all
    core.update_aggregate("b", {"max_instances_per_host": "1.5"})
    assert _passes(core)
    # "0" takes nothing; a limit far past int64 is no limit
    core.update_aggregate("b", {"max_instances_per_host": "0"})
    assert not _passes(core)
    core.update_aggregate("b", {"max_instances_per_host": "9" * 40})
    core.update_aggregate("a", {"max_instances_per_host": "9" * 40})
    assert _passes(core)


def test_aggregate_limits_check_every_request() -> None:
    # a request of resources only is checked too (the ranking's shortcut is not taken)
    core = _core(
        ["AggregateNumInstancesFilter"],
        {"instances": _instances(2)},
        aggregates={"agg1": {"max_instances_per_host": "2"}},
    )
    spec = make_spec("vm", memory_mb=0, vcpus=0, disk_gb=0)
    assert asks_resources_only(spec)
    with pytest.raises(NoValidHost, match="AggregateNumInstancesFilter removed 1"):
        core.select_destinations(spec, 2.0)


# -- AggregateIoOpsFilter (test_io_ops_filters.py) ----------------------------------------


@RELEASES
def test_filter_num_iops_passes_and_fails(release: int) -> None:
    for filters in (["IoOpsFilter"], ["AggregateIoOpsFilter"]):
        config: dict[str, Any] = {"max_io_ops_per_host": 8, "nova_release": release}
        assert _passes(_core(filters, {"num_io_ops": 7}, **config))
        assert not _passes(_core(filters, {"num_io_ops": 8}, **config))


@RELEASES
def test_aggregate_filter_num_iops_value(release: int) -> None:
    config: dict[str, Any] = {"max_io_ops_per_host": 7, "nova_release": release}
    assert not _passes(_core(["AggregateIoOpsFilter"], {"num_io_ops": 7}, **config))
    core = _core(
        ["AggregateIoOpsFilter"],
        {"num_io_ops": 7},
        aggregates={"agg1": {"max_io_ops_per_host": "8"}},
        **config,
    )
    assert _passes(core)


@RELEASES
def test_aggregate_filter_num_iops_value_error(release: int) -> None:
    config: dict[str, Any] = {"max_io_ops_per_host": 8, "nova_release": release}
    core = _core(
        ["AggregateIoOpsFilter"],
        {"num_io_ops": 7},
        aggregates={"agg1": {"max_io_ops_per_host": "XXX"}},
        **config,
    )
    assert _passes(core)


def test_aggregate_io_ops_limits_are_decided_once_per_membership() -> None:
    core = _core(
        ["AggregateIoOpsFilter"],
        {"num_io_ops": 3},
        {"num_io_ops": 3},
        aggregates={"agg1": {"max_io_ops_per_host": "3"}},
    )
    assert not _passes(core, "host1")
    assert _passes(core, "host2")
    limits = core.aggregates.limits("max_io_ops_per_host", 8)
    assert limits is core.aggregates.limits("max_io_ops_per_host", 8)  # kept
    core.add_host_to_aggregate("agg1", "host2")  # a change: worked out again
    assert not _passes(core, "host2")


# -- IsolatedHostsFilter (test_isolated_hosts_filter.py) ----------------------------------


def _isolated(
    host_in_list: bool,
    image_in_list: bool,
    set_flags: bool = True,
    restrict_isolated_hosts_to_isolated_images: bool = True,
    release: int = 34,
    **flags: Any,
) -> bool:
    config: dict[str, Any] = dict(flags)
    if set_flags:
        config.update(
            isolated_images=[IMAGE],
            isolated_hosts=["isolated_host"],
            restrict_isolated_hosts_to_isolated_images=restrict_isolated_hosts_to_isolated_images,
        )
    core = make_core(
        make_config(enabled_filters=["IsolatedHostsFilter"], nova_release=release, **config)
    )
    name = "isolated_host" if host_in_list else "free_host"
    core.update_host(make_report(name), 1.0)
    image = IMAGE if image_in_list else OTHER_IMAGE
    return _passes(core, name, image_id=image)


@RELEASES
def test_isolated_hosts_matrix(release: int) -> None:
    # test_isolated_hosts_fails_isolated_on_non_isolated ... passes_non_isolated_on_non_isolated
    assert not _isolated(False, True, release=release)
    assert not _isolated(True, False, release=release)
    assert _isolated(True, True, release=release)
    assert _isolated(False, False, release=release)


def test_isolated_hosts_no_config() -> None:
    # no hosts nor isolated images in the config: the filter does not filter at all
    for host, image in ((False, True), (True, False), (True, True), (False, False)):
        assert _isolated(host, image, False)


def test_isolated_hosts_no_hosts_config() -> None:
    # no hosts in the config: only the listed images are filtered out
    flags: dict[str, Any] = {"isolated_images": [IMAGE]}
    assert not _isolated(False, True, False, **flags)
    assert _isolated(True, False, False, **flags)
    assert not _isolated(True, True, False, **flags)
    assert _isolated(False, False, False, **flags)


def test_isolated_hosts_no_images_config() -> None:
    # no images in the config: only the isolated hosts are filtered out
    flags: dict[str, Any] = {"isolated_hosts": ["isolated_host"]}
    assert _isolated(False, True, False, **flags)
    assert not _isolated(True, False, False, **flags)
    assert not _isolated(True, True, False, **flags)
    assert _isolated(False, False, False, **flags)


def test_isolated_hosts_less_restrictive() -> None:
    assert _isolated(True, False, True, False)  # isolated host, non isolated image
    assert _isolated(True, True, True, False)  # isolated host, isolated image
    assert _isolated(False, False, True, False)  # non isolated host and image
    assert not _isolated(False, True, True, False)  # non isolated host, isolated image


def test_isolated_hosts_check_requests_without_an_image() -> None:
    # a boot from volume names no image: it is of no isolated image, and every request
    # is checked while the configuration isolates hosts (the shortcut is not taken)
    config = make_config(enabled_filters=["IsolatedHostsFilter"], isolated_hosts=["host1"])
    core = make_core(config)
    core.update_host(make_report("host1"), 1.0)
    core.update_host(make_report("host2", memory_mb=1024), 1.0)
    spec = make_spec("vm")
    assert asks_resources_only(spec)
    assert [s.host for s in core.select_destinations(spec, 2.0)] == ["host2"]
    assert request_fingerprint(make_spec("vm", image_id=IMAGE)) != request_fingerprint(spec)


# -- AggregateImagePropertiesIsolation (test_aggregate_image_properties_isolation...) -----

AIPI: list[tuple[str, dict[str, str], dict[str, str], bool]] = [
    ("passes", {"hw_vm_mode": "hvm"}, {"hw_vm_mode": "hvm"}, True),
    ("passes_comma", {"hw_vm_mode": "hvm,xen"}, {"hw_vm_mode": "hvm"}, True),
    ("props_bad_comma", {"os_distro": "windows,linux"}, {"os_distro": "windows,"}, False),
    (
        "multi_props_passes",
        {"hw_vm_mode": "hvm", "hw_cpu_cores": "2"},
        {"hw_vm_mode": "hvm", "hw_cpu_cores": "2"},
        True,
    ),
    ("props_with_meta_passes", {"hw_vm_mode": "hvm"}, {}, True),
    ("props_imgprops_passes", {}, {"hw_vm_mode": "hvm"}, True),
    ("props_not_match_fails", {"hw_vm_mode": "hvm"}, {"hw_vm_mode": "xen"}, False),
    (
        "props_not_match2_fails",
        {"hw_vm_mode": "hvm", "hw_cpu_cores": "1"},
        {"hw_vm_mode": "hvm", "hw_cpu_cores": "2"},
        False,
    ),
    ("iso_props_with_custom_meta", {"os": "linux"}, {"os_type": "linux"}, True),
    ("iso_props_with_matching_meta_pass", {"os_type": "linux"}, {"os_type": "linux"}, True),
    ("iso_props_with_matching_meta_fail", {"os_type": "windows"}, {"os_type": "linux"}, False),
]


@RELEASES
@pytest.mark.parametrize(
    ("metadata", "props", "expected"),
    [pytest.param(m, p, e, id=f"test_aggregate_image_properties_{n}") for n, m, p, e in AIPI],
)
def test_aggregate_image_properties_isolation(
    metadata: dict[str, str], props: dict[str, str], expected: bool, release: int
) -> None:
    aggregates = {"agg1": metadata} if metadata else {}
    core = _core(
        ["AggregateImagePropertiesIsolation"],
        {},
        aggregates=aggregates,
        nova_release=release,
    )
    assert _passes(core, image_properties=props) is expected


def test_aggregate_image_properties_isolation_props_namespace() -> None:
    # namespace "hw", separator "_": img_owner_id is not in it, so "wrong" passes
    core = _core(
        ["AggregateImagePropertiesIsolation"],
        {},
        aggregates={"agg1": {"hw_vm_mode": "hvm", "img_owner_id": "foo"}},
        aggregate_image_properties_isolation_namespace="hw",
        aggregate_image_properties_isolation_separator="_",
    )
    assert _passes(core, image_properties={"hw_vm_mode": "hvm", "img_owner_id": "wrong"})
    assert not _passes(core, image_properties={"hw_vm_mode": "xen", "img_owner_id": "foo"})


def test_aggregate_image_properties_isolation_merges_the_hosts_aggregates() -> None:
    # the values of a key over every aggregate of the host; a host in none passes
    core = _core(
        ["AggregateImagePropertiesIsolation"],
        {},
        {},
        aggregates={"a": {"os_type": "linux"}, "b": {"os_type": " windows "}},
    )
    for os_type, on_host1 in (("linux", True), ("windows", True), ("bsd", False)):
        assert _passes(core, "host1", image_properties={"os_type": os_type}) is on_host1
        assert _passes(core, "host2", image_properties={"os_type": os_type})


# -- JsonFilter (test_json_filters.py) ------------------------------------------------------

JSON_QUERY = json.dumps(["and", [">=", "$free_ram_mb", 1024], [">=", "$free_disk_mb", 200 * MB]])


def _json(query: Any, release: int = 34, **host: Any) -> bool:
    core = _core(["JsonFilter"], host, nova_release=release)
    text = query if isinstance(query, str) or query is None else json.dumps(query)
    return _passes(core, query=text)


@RELEASES
def test_json_filter_passes(release: int) -> None:
    assert _json(JSON_QUERY, release, memory_mb=1024, local_gb=200)


def test_json_filter_passes_with_no_query() -> None:
    assert _json(None, memory_mb=0, local_gb=0)


def test_json_filter_fails_on_memory() -> None:
    assert not _json(JSON_QUERY, memory_mb=1023, local_gb=200)


def test_json_filter_fails_on_disk() -> None:
    # Nova's host has one MB too few; a report's disk is in GB, so one GB too few
    assert not _json(JSON_QUERY, memory_mb=1024, local_gb=199)


def test_json_filter_fails_on_service_disabled() -> None:
    # Nova's HostState has a service; actorsched holds none: refused, naming it
    query = ["and", [">=", "$free_ram_mb", 1024], ["not", "$service.disabled"]]
    with pytest.raises(InvalidRequest, match=r"reads \['\$service.disabled'\]: Nova's HostState"):
        _json(query, memory_mb=1024, local_gb=200)


def test_json_filter_happy_day() -> None:
    # Nova's test reads '$capabilities.*', an attribute its fake host has (Nova 34's
    # HostState has none); here the same as the host's stats (text: false is "")
    # and disk figures in GB (a report's)
    raw = [
        "and",
        "$stats.enabled",
        ["=", "$stats.opt1", "match"],
        [
            "or",
            ["and", ["<", "$free_ram_mb", 30], ["<", "$free_disk_mb", 300 * MB]],
            ["and", [">", "$free_ram_mb", 30], [">", "$free_disk_mb", 300 * MB]],
        ],
    ]
    for ram, disk, stats, expected in (
        (10, 200, {"opt1": "match"}, True),
        (40, 400, {"opt1": "match"}, True),
        (40, 400, {"enabled": "", "opt1": "match"}, False),  # capabilities disabled
        (30, 300, {"enabled": "True", "opt1": "match"}, False),  # exact memory/disk
        (20, 400, {"enabled": "True", "opt1": "match"}, False),  # memory lower, disk higher
        (20, 400, {"enabled": "True", "opt1": "no-match"}, False),  # opt1 not equal
    ):
        assert _json(raw, memory_mb=ram, local_gb=disk, stats=stats) is expected, (ram, disk)


BASIC_OPERATORS: list[tuple[str, list[Any], bool]] = [
    ("=", [1, 1], True),
    ("=", [1, 2], False),
    ("<", [1, 2], True),
    ("<", [1, 1], False),
    ("<", [2, 1], False),
    (">", [2, 1], True),
    (">", [2, 2], False),
    (">", [2, 3], False),
    ("<=", [1, 2], True),
    ("<=", [1, 1], True),
    ("<=", [2, 1], False),
    (">=", [2, 1], True),
    (">=", [2, 2], True),
    (">=", [2, 3], False),
    ("in", [1, 1], True),
    ("in", [1, 1, 2, 3], True),
    ("in", [4, 1, 2, 3], False),
    ("not", [True], False),
    ("not", [False], True),
    ("or", [True, False], True),
    ("or", [False, False], False),
    ("and", [True, True], True),
    ("and", [False, False], False),
    ("and", [True, False], False),
    # nested ((True or False) and (2 > 1)) passes
    ("and", [["or", True, False], [">", 2, 1]], True),
]


@pytest.mark.parametrize(("op", "args", "expected"), BASIC_OPERATORS)
def test_json_filter_basic_operators(op: str, args: list[Any], expected: bool) -> None:
    assert evaluate([op, *args], lambda name: None) is expected


def test_json_filter_basic_operators_on_a_host() -> None:
    assert all(_json([op, *args]) is expected for op, args, expected in BASIC_OPERATORS[::5])
    # [False, True, False, True]: one is true, the host passes
    assert _json(["not", True, False, True, False])
    # [False, False, False]: it does not
    assert not _json(["not", True, True, True])


def test_json_filter_unknown_operator_raises() -> None:
    # Nova's raises KeyError, and the request fails
    with pytest.raises(InvalidRequest, match="raises KeyError"):
        _json(["!=", 1, 2])


def test_json_filter_empty_filters_pass() -> None:
    assert _json([])
    assert _json({})


def test_json_filter_invalid_num_arguments_fails() -> None:
    assert not _json([">", ["and", ["or", ["not", ["<", [">=", ["<=", ["in"]]]]]]]])
    assert not _json([">", 1])


def test_json_filter_unknown_variable_ignored() -> None:
    assert _json(["=", "$........", 1, 1])
    assert _json(["=", "$foo", 2, 2])


def test_json_filter_reads_the_figures_as_the_claims_leave_them() -> None:
    # Nova runs JsonFilter for each instance, after the earlier ones' claims
    query = json.dumps([">=", "$free_ram_mb", 2048])
    core = _core(["JsonFilter"], {"memory_mb": 4 * MB, "vcpus": 8})
    three = make_spec("a", "b", "c", memory_mb=1024, vcpus=1, disk_gb=0, query=query)
    # after two claims host1 has 2048 MB: the third still passes (>= 2048), a fourth not
    assert [s.host for s in core.select_destinations(three, 2.0)] == ["host1"] * 3
    with pytest.raises(NoValidHost, match="JsonFilter removed 1"):
        core.select_destinations(make_spec("d", memory_mb=1024, query=query), 2.0)


def test_json_filter_reads_facts_and_names() -> None:
    core = _core(
        ["JsonFilter"],
        {"hypervisor_type": "QEMU", "hypervisor_version": 8_002_000, "stats": {"gpu": "2"}},
        {"hypervisor_type": "QEMU", "hypervisor_version": 7_000_000},
        {"node": "node-3"},
    )

    def passing(query: Any) -> set[str]:
        plan = core.plan(
            make_spec("p", memory_mb=0, vcpus=0, disk_gb=0, query=json.dumps(query)), 2.0
        )
        return {c.host for c in plan.instances[0].candidates} if plan.placed else set()

    assert passing([">=", "$hypervisor_version", 8_000_000]) == {"host1"}
    assert passing(["=", "$hypervisor_type", "QEMU"]) == {"host1", "host2"}
    assert passing(["=", "$stats.gpu", "2"]) == {"host1"}
    assert passing(["in", "$nodename", "node-3", "host1"]) == {"host1", "host3"}
    assert passing(["=", "$host", "host2"]) == {"host2"}
    assert passing(["<", "$num_instances", 1]) == {"host1", "host2", "host3"}


def test_json_filter_decides_once_per_distinct_values(monkeypatch: pytest.MonkeyPatch) -> None:
    core = _core(["JsonFilter"], *([{"memory_mb": 4 * MB}] * 50 + [{"memory_mb": 8 * MB}] * 50))
    calls = []
    decide = JsonFilter._decide

    def counted(*args: Any) -> bool:
        calls.append(args)
        return decide(*args)

    monkeypatch.setattr(JsonFilter, "_decide", staticmethod(counted))
    query = json.dumps([">", "$free_ram_mb", 5000])
    spec = make_spec("p", memory_mb=0, vcpus=0, disk_gb=0, query=query)
    [one] = core.select_destinations(spec, 2.0)
    assert one.host == "host51"
    assert len(calls) == 2  # two distinct free_ram_mb values, 100 hosts
    assert core.plan(make_spec("q", query=query), 2.0).instances[0].passing_hosts == 50


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("[>=", "is not JSON"),
        (json.dumps(["<", "$host", 5]), "raises TypeError"),
        (json.dumps(["=", "$free_ram_mb.x", 1]), "raises AttributeError"),
        (json.dumps(["=", "$metrics", 1]), r"reads \['\$metrics'\]"),
        (json.dumps(5), "raises TypeError"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nests lists deeper than {MAX_DEPTH}"),
    ],
)
def test_json_filter_refuses_what_nova_raises_on(query: str, why: str) -> None:
    core = _core(["JsonFilter"], {})
    with pytest.raises(InvalidRequest, match=why):
        core.select_destinations(make_spec("vm", query=query), 2.0)
    assert core.claims() == {}


def _nested(depth: int) -> str:
    """A query whose lists nest ``depth`` deep, true of every host."""
    query: list[Any] = ["=", 1, 1]
    for _ in range(depth - 1):
        query = ["and", query]
    return json.dumps(query)


def test_json_filter_evaluates_a_query_nested_max_depth_deep_and_refuses_one_deeper() -> None:
    core = _core(["JsonFilter"], {})
    assert _passes(core, query=_nested(MAX_DEPTH))
    with pytest.raises(InvalidRequest, match=f"nests lists deeper than {MAX_DEPTH}"):
        core.select_destinations(make_spec("vm", query=_nested(MAX_DEPTH + 1)), 2.0)


def test_json_filter_refusal_shows_a_long_query_cut_at_200_characters() -> None:
    core = _core(["JsonFilter"], {})
    query = "[" + "1, " * 80 + "oops]"  # not JSON, 246 characters
    with pytest.raises(InvalidRequest) as refused:
        core.select_destinations(make_spec("vm", query=query), 2.0)
    assert str(refused.value).startswith(
        f"the JsonFilter query {query[:200] + '...'!r} is not JSON"
    )


def test_json_filter_query_is_asked_and_in_the_fingerprint() -> None:
    spec = make_spec("vm", query='["=", 1, 1]')
    assert not asks_resources_only(spec)
    assert '"query":"[\\"=\\", 1, 1]"' in request_fingerprint(spec)
    assert variables(["and", ["=", "$a", 1], "$b", {"x": "$c"}]) == ("$a", "$b")


def test_the_optional_filters_are_off_by_default_and_change_no_nova_18_answer() -> None:
    assert not set(OPTIONAL_FILTERS) & set(BUILTIN_FILTERS)
    # every optional filter on, nothing asked of them: the same host as without
    plain = _core(list(BUILTIN_FILTERS), {"memory_mb": 2 * MB}, {"memory_mb": 4 * MB})
    every = _core(
        [*BUILTIN_FILTERS, *OPTIONAL_FILTERS], {"memory_mb": 2 * MB}, {"memory_mb": 4 * MB}
    )
    for core in (plain, every):
        assert [s.host for s in core.select_destinations(make_spec("vm"), 2.0)] == ["host2"]
