"""Models: strict, closed, frozen, bounded, and JSON round-trips; Nova's defaults."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import REPORT_FIELDS, make_core, make_report, make_spec
from pydantic import BaseModel, ValidationError

from actorsched import (
    HostReport,
    HostState,
    RequestSpec,
    SchedulerConfig,
    Selection,
    ServerGroup,
)

MAX_SIZE = 2**40

REPORT: dict[str, Any] = {**REPORT_FIELDS, "host": "node1"}
SPEC: dict[str, Any] = {"instance_uuids": ["vm1"], "memory_mb": 512, "vcpus": 1, "disk_gb": 1}


# -- strict -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "base", "field", "value"),
    [
        (HostReport, REPORT, "generation", "1"),
        (HostReport, REPORT, "memory_mb", "4096"),
        (HostReport, REPORT, "memory_mb", 4096.0),
        (HostReport, REPORT, "enabled", 1),
        (HostReport, REPORT, "enabled", "true"),
        (HostReport, REPORT, "host", 7),
        (RequestSpec, SPEC, "vcpus", "1"),
        (RequestSpec, SPEC, "instance_uuids", "vm1"),
        (RequestSpec, SPEC, "instance_uuids", ("vm1",)),
    ],
)
def test_strict_rejects_coercion(
    model: type[BaseModel], base: dict[str, Any], field: str, value: object
) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate({**base, field: value})
    assert info.value.errors()[0]["loc"][0] == field


def test_strict_applies_to_json_too() -> None:
    body = (
        HostReport.model_validate(REPORT)
        .model_dump_json()
        .replace('"generation":1', '"generation":"1"')
    )
    assert '"generation":"1"' in body
    with pytest.raises(ValidationError):
        HostReport.model_validate_json(body)


@pytest.mark.parametrize(
    ("model", "base"),
    [
        (HostReport, REPORT),
        (RequestSpec, SPEC),
        (ServerGroup, {"id": "g", "policy": "affinity"}),
        (Selection, {"instance_uuid": "vm1", "host": "h1"}),
    ],
)
def test_extra_fields_forbidden(model: type[BaseModel], base: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate({**base, "flavor": "m1.small"})
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_config_rejects_unknown_setting() -> None:
    with pytest.raises(ValidationError) as info:
        SchedulerConfig(ram_allocation_ration=2.0)  # type: ignore[call-arg]
    assert "ram_allocation_ration" in str(info.value)


def test_messages_are_frozen() -> None:
    report = make_report()
    with pytest.raises(ValidationError):
        report.memory_mb_used = 10  # type: ignore[misc]
    assert report.memory_mb_used == 0


# -- defaults and documented fields ---------------------------------------------


def test_host_report_defaults() -> None:
    report = HostReport.model_validate(REPORT)
    assert report.memory_mb_reserved == 0
    assert report.availability_zone is None
    assert report.enabled is True
    assert report.traits == []
    assert report.instances == []
    assert report.num_io_ops == 0


def test_request_spec_defaults() -> None:
    spec = RequestSpec.model_validate(SPEC)
    assert spec.availability_zone is None
    assert spec.required_traits == []
    assert spec.forbidden_traits == []
    assert spec.group is None
    assert spec.same_host == []
    assert spec.different_host == []
    assert spec.ignore_hosts == []


def test_default_lists_are_fresh_per_instance_and_documented() -> None:
    one, two = RequestSpec.model_validate(SPEC), RequestSpec.model_validate(SPEC)
    lists = ("required_traits", "forbidden_traits", "same_host", "different_host", "ignore_hosts")
    for name in lists:
        assert getattr(one, name) is not getattr(two, name), name  # never one shared list
    one.required_traits.append("CUSTOM_X")  # frozen models, but a list is a list
    assert two.required_traits == []
    assert RequestSpec.model_validate(SPEC).required_traits == []
    first, second = HostReport.model_validate(REPORT), HostReport.model_validate(REPORT)
    assert first.traits is not second.traits
    assert first.instances is not second.instances
    # the JSON schema still tells clients these may be left out
    properties = RequestSpec.model_json_schema()["properties"]
    assert all(properties[name]["default"] == [] for name in lists)
    assert "required_traits" not in RequestSpec.model_json_schema()["required"]


# -- RequestSpec rules ------------------------------------------------------------


def test_request_spec_needs_one_instance() -> None:
    with pytest.raises(ValidationError):
        RequestSpec.model_validate({**SPEC, "instance_uuids": []})


def test_request_spec_uuids_unique_and_the_error_names_the_repeat() -> None:
    with pytest.raises(ValidationError) as info:
        RequestSpec.model_validate({**SPEC, "instance_uuids": ["a", "b", "a"]})
    [error] = info.value.errors()
    assert "unique" in error["msg"]
    assert "['a']" in error["msg"]  # names the repeated uuid, and only that one


def test_request_spec_keeps_uuid_order() -> None:
    spec = RequestSpec.model_validate({**SPEC, "instance_uuids": ["c", "a", "b"]})
    assert spec.instance_uuids == ["c", "a", "b"]


@pytest.mark.parametrize(
    "policy", ["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]
)
def test_server_group_policies_accepted(policy: str) -> None:
    assert ServerGroup.model_validate({"id": "g", "policy": policy}).policy == policy


@pytest.mark.parametrize("policy", ["anti_affinity", "Affinity", "spread", ""])
def test_server_group_other_policies_rejected(policy: str) -> None:
    with pytest.raises(ValidationError):
        ServerGroup.model_validate({"id": "g", "policy": policy})


# -- bounds -----------------------------------------------------------------------


@pytest.mark.parametrize("field", ["memory_mb", "memory_mb_used", "memory_mb_reserved", "local_gb"])
def test_sizes_bounded(field: str) -> None:
    assert getattr(HostReport.model_validate({**REPORT, field: MAX_SIZE}), field) == MAX_SIZE
    for bad in (MAX_SIZE + 1, -1, 2**63):
        with pytest.raises(ValidationError):
            HostReport.model_validate({**REPORT, field: bad})


@pytest.mark.parametrize("field", ["memory_mb", "disk_gb", "vcpus"])
def test_request_sizes_bounded(field: str) -> None:
    for bad in (-1, 2**63):
        with pytest.raises(ValidationError):
            RequestSpec.model_validate({**SPEC, field: bad})


def test_generation_non_negative_int() -> None:
    assert HostReport.model_validate({**REPORT, "generation": 0}).generation == 0
    with pytest.raises(ValidationError):
        HostReport.model_validate({**REPORT, "generation": -1})


@pytest.mark.parametrize("name", ["", "x" * 256])
def test_names_bounded(name: str) -> None:
    with pytest.raises(ValidationError):
        HostReport.model_validate({**REPORT, "host": name})
    with pytest.raises(ValidationError):
        RequestSpec.model_validate({**SPEC, "instance_uuids": [name]})


def test_lists_bounded() -> None:
    with pytest.raises(ValidationError):
        RequestSpec.model_validate({**SPEC, "instance_uuids": [f"vm{i}" for i in range(1_001)]})
    with pytest.raises(ValidationError):
        HostReport.model_validate({**REPORT, "instances": [f"vm{i}" for i in range(10_001)]})


# -- JSON round trip ------------------------------------------------------------


def _host_state() -> HostState:
    core = make_core()
    core.update_host(
        make_report(
            "h1",
            availability_zone="az1",
            traits=["HW_CPU_X86_AVX2"],
            instances=["old"],
            memory_mb_used=256,
            memory_mb_reserved=128,
            num_io_ops=2,
        ),
        now=5.0,
    )
    core.select_destinations(make_spec("vm1"), now=6.0)
    return core.host_states()["h1"]


ROUND_TRIP: list[BaseModel] = [
    make_report(
        availability_zone="az1",
        enabled=False,
        traits=["A", "B"],
        instances=["vm1", "vm2"],
        num_io_ops=3,
        memory_mb_reserved=512,
    ),
    make_spec(
        "vm1",
        "vm2",
        availability_zone="az1",
        required_traits=["A"],
        forbidden_traits=["B"],
        group=("g1", "soft-anti-affinity"),
        same_host=["x"],
        different_host=["y"],
        ignore_hosts=["h9"],
    ),
    ServerGroup(id="g1", policy="anti-affinity"),
    Selection(instance_uuid="vm1", host="h1", alternates=["h2", "h3"]),
    SchedulerConfig(),
    SchedulerConfig(
        ram_allocation_ratio=1.5,
        enabled_filters=["ComputeFilter", "RamFilter"],
        host_subset_size=3,
        seed=42,
    ),
]


@pytest.mark.parametrize("model", ROUND_TRIP, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    again = type(model).model_validate_json(model.model_dump_json())
    assert again == model
    assert again.model_dump() == model.model_dump()


def test_host_state_snapshot_is_valid_and_round_trips() -> None:
    # snapshots are built without validation on the hot path: they must still be valid
    state = _host_state()
    again = HostState.model_validate_json(state.model_dump_json())
    assert again == state
    assert type(again.free_ram_mb) is int
    assert again.free_ram_mb == 4096 - 128 - 256 - 512


# -- SchedulerConfig: Nova's defaults ---------------------------------------------


def test_config_defaults_are_novas() -> None:
    c = SchedulerConfig()
    assert (c.ram_allocation_ratio, c.cpu_allocation_ratio, c.disk_allocation_ratio) == (
        1.0,
        4.0,
        1.0,
    )
    assert c.ram_weight_multiplier == 1.0
    assert c.cpu_weight_multiplier == 1.0
    assert c.disk_weight_multiplier == 1.0
    assert c.io_ops_weight_multiplier == -1.0
    assert c.num_instances_weight_multiplier == 0.0
    assert c.soft_affinity_weight_multiplier == 1.0
    assert c.soft_anti_affinity_weight_multiplier == 1.0
    assert c.host_subset_size == 1
    assert c.max_attempts == 3
    assert c.max_io_ops_per_host == 8
    assert c.max_instances_per_host == 50
    assert c.service_down_time == 60
    assert c.claim_timeout > 0
    assert c.mailbox_size >= 1


def test_config_enables_every_builtin_filter_by_default() -> None:
    assert set(SchedulerConfig().enabled_filters) == {
        "ComputeFilter",
        "AvailabilityZoneFilter",
        "RamFilter",
        "CoreFilter",
        "DiskFilter",
        "RequiredTraitsFilter",
        "ForbiddenTraitsFilter",
        "SameHostFilter",
        "DifferentHostFilter",
        "ServerGroupAffinityFilter",
        "ServerGroupAntiAffinityFilter",
        "NumInstancesFilter",
        "IoOpsFilter",
    }


def test_config_rejects_unknown_filter_with_a_clear_message() -> None:
    with pytest.raises(ValidationError) as info:
        SchedulerConfig(enabled_filters=["ComputeFilter", "RamFiltre"])
    message = str(info.value)
    assert "RamFiltre" in message
    assert "unknown filter" in message
    assert "RamFilter" in message  # lists what is available


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("host_subset_size", 0),
        ("max_attempts", 0),
        ("ram_allocation_ratio", 0.0),
        ("cpu_allocation_ratio", -1.0),
        ("service_down_time", 0.0),
        ("mailbox_size", 0),
        ("max_waiting", -1),
        ("soft_affinity_weight_multiplier", -1.0),
    ],
)
def test_config_rejects_out_of_range(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as info:
        SchedulerConfig.model_validate({field: value})
    assert info.value.errors()[0]["loc"][0] == field


def test_nova_release_is_18_unless_set_to_34() -> None:
    assert SchedulerConfig().nova_release == 18  # the default keeps Nova 18's rules
    assert SchedulerConfig(nova_release=34).nova_release == 34
    for bad in (19, "34", True):
        with pytest.raises(ValidationError, match="nova_release"):
            SchedulerConfig.model_validate({"nova_release": bad})


def test_scheduler_config_is_strict_about_types() -> None:
    with pytest.raises(ValidationError, match="host_subset_size"):
        SchedulerConfig(host_subset_size="2")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="ram_allocation_ratio"):
        SchedulerConfig(ram_allocation_ratio="1.5")  # type: ignore[arg-type]
    assert SchedulerConfig(ram_allocation_ratio=2).ram_allocation_ratio == 2.0


def test_host_report_lists_each_instance_once() -> None:
    with pytest.raises(ValidationError, match=r"repeated: \['vm-1'\]"):
        HostReport(
            host="h1",
            generation=1,
            memory_mb=1024,
            memory_mb_used=0,
            vcpus=1,
            vcpus_used=0,
            local_gb=10,
            local_gb_used=0,
            instances=["vm-1", "vm-2", "vm-1"],
        )


@pytest.mark.parametrize(
    "bad",
    ["h1\nINFO forged line", "h1\x00", "h1\u202egnp.exe", "h1\u200b", "h1\x1b[31m", "h1\r"],
)
@pytest.mark.parametrize("field", ["host", "availability_zone", "traits"])
def test_names_with_control_or_format_characters_are_refused(field: str, bad: str) -> None:
    fields: dict[str, Any] = {field: [bad] if field == "traits" else bad}
    with pytest.raises(ValidationError, match=r"control or format characters: U\+"):
        make_report(**fields)


@pytest.mark.parametrize("bad", ["vm\n1", "vm\x001", "vm\u202e1"])
def test_instance_uuids_and_groups_with_control_characters_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="control or format characters"):
        make_spec(bad)
    with pytest.raises(ValidationError, match="control or format characters"):
        ServerGroup(id=bad, policy="affinity")


def test_printable_names_in_any_script_pass() -> None:
    report = make_report("compute-ü-東京 1", availability_zone="zone a", traits=["CUSTOM_É"])
    assert report.host == "compute-ü-東京 1"
