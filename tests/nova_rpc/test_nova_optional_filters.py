"""Nova's opt-in filters and HypervisorVersionWeigher through the Nova adapter: a
nova.conf enables and configures them, and a RequestSpec from Nova's own
serializer (``nova_oracle.py spec``) carries what they read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_nova_conf_objects import _oracle, needs_nova

from actorsched import SchedulerConfig
from actorsched.nova import objects
from actorsched.nova.conf import read

OPTIONAL = (
    "AggregateNumInstancesFilter",
    "AggregateIoOpsFilter",
    "IsolatedHostsFilter",
    "AggregateImagePropertiesIsolation",
    "JsonFilter",
)


def _config(path: Path, text: str) -> tuple[SchedulerConfig, tuple[str, ...]]:
    path.write_text(text)
    conf = read(str(path))
    values = {name: value for name, (value, _) in conf.scheduler.items()}
    return SchedulerConfig(**values), conf.warnings


def test_a_nova_conf_enables_and_configures_the_optional_filters(tmp_path: Path) -> None:
    config, warnings = _config(
        tmp_path / "nova.conf",
        "[filter_scheduler]\n"
        f"enabled_filters = ComputeFilter,{','.join(OPTIONAL)}\n"
        "isolated_images = img-1, img-2\n"
        "isolated_hosts = h1\n"
        "restrict_isolated_hosts_to_isolated_images = false\n"
        "aggregate_image_properties_isolation_namespace = os\n"
        "aggregate_image_properties_isolation_separator = _\n"
        "max_io_ops_per_host = 3\n",
    )
    assert config.enabled_filters[-len(OPTIONAL) :] == list(OPTIONAL)
    assert not [w for w in warnings if "not built in actorsched: hosts" in w]
    assert config.isolated_images == ["img-1", "img-2"]
    assert config.isolated_hosts == ["h1"]
    assert not config.restrict_isolated_hosts_to_isolated_images
    assert config.aggregate_image_properties_isolation_namespace == "os"
    assert config.aggregate_image_properties_isolation_separator == "_"
    assert config.max_io_ops_per_host == 3
    assert "aggregate_image_properties_isolation_namespace is set" in "\n".join(warnings)


def test_hypervisor_version_and_build_failure_weighers_are_built(tmp_path: Path) -> None:
    config, warnings = _config(tmp_path / "nova.conf", "[filter_scheduler]\n")
    assert config.nova_release == 34
    assert config.hypervisor_version_weight_multiplier == 1.0  # Nova 34's default
    assert config.build_failure_weight_multiplier == 1000000.0  # Nova 34's default
    text = "\n".join(warnings)
    assert "HypervisorVersionWeigher" not in text
    assert "BuildFailureWeigher" not in text
    config, _ = _config(
        tmp_path / "nova.conf",
        "[filter_scheduler]\nweight_classes = nova.scheduler.weights.ram.RAMWeigher\n",
    )
    assert config.hypervisor_version_weight_multiplier == 0.0  # left out of weight_classes
    assert config.build_failure_weight_multiplier == 0.0
    # a configuration written for Nova 18: Nova 18 had no such weigher
    config, _ = _config(
        tmp_path / "nova.conf", "[filter_scheduler]\nenabled_filters = RamFilter,ComputeFilter\n"
    )
    assert config.nova_release == 18
    assert config.hypervisor_version_weight_multiplier == 0.0


@needs_nova
def test_a_request_spec_carries_what_the_optional_filters_read(tmp_path: Path) -> None:
    query = json.dumps([">=", "$free_ram_mb", 1024])
    specs: list[dict[str, Any]] = [
        {
            "image_properties": {
                "hw_architecture": "x86_64",
                "os_type": "linux",
                "hw_cpu_cores": 2,
                "os_require_quiesce": True,
                "os_distro": "x" * 300,  # longer than any aggregate value
                "hw_qemu_guest_agent": False,  # false: the filter passes it over
            },
            "scheduler_hints": {"query": [query]},
        },
    ]
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    [primitive] = _oracle("spec", str(path))
    image_id = primitive["nova_object.data"]["image"]["nova_object.data"]["id"]
    every = objects.request_from_primitive(primitive, None, filters=OPTIONAL).spec
    assert every.image_id == image_id
    assert every.query == query
    assert every.image_properties == {
        "hw_architecture": "x86_64",
        "os_type": "linux",
        "hw_cpu_cores": "2",
        "os_require_quiesce": "True",
        "os_distro": ",",  # no aggregate's value can be it
    }
    # without the filters that read them: the image id, and only what
    # ImagePropertiesFilter reads of the image
    plain = objects.request_from_primitive(primitive, None, filters=()).spec
    assert plain.image_id == image_id
    assert plain.query is None
    assert plain.image_properties == {"hw_architecture": "x86_64"}


def test_a_query_hint_that_is_not_one_text_is_refused_by_name() -> None:
    with pytest.raises(objects.Unsupported, match="scheduler hint query"):
        objects._query({"query": ["a", "b"]})
    assert objects._query({"query": ["[]"]}) == "[]"
    assert objects._query({}) is None
