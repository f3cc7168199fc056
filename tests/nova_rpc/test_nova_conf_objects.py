"""nova.conf and Nova's objects read as Nova 34 reads and writes them, with Nova's own
code as the oracle (``tests/nova_rpc/nova_oracle.py`` in Nova's venv)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from actorsched import cli
from actorsched.nova import objects
from actorsched.nova.conf import DEFAULTS, NovaConfigError, read

ROOT = Path(__file__).resolve().parents[2]
NOVA_PYTHON = Path(os.environ.get("ACTORSCHED_NOVA_PYTHON", ROOT / ".venv-nova" / "bin" / "python"))
# `make nova-venv` writes this once Nova is installed (a venv left half-made has none)
NOVA_READY = NOVA_PYTHON.parent.parent / ".installed"
ORACLE = Path(__file__).with_name("nova_oracle.py")

needs_nova = pytest.mark.skipif(
    not NOVA_READY.exists(),
    reason=f"Nova 34's venv is missing ({NOVA_PYTHON}): `make nova-venv` makes it",
)


def _oracle(*args: str) -> Any:
    done = subprocess.run(
        [str(NOVA_PYTHON), str(ORACLE), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _nova_values(conf: Path, tmp_path: Path) -> dict[str, Any]:
    options = tmp_path / "options.json"
    options.write_text(json.dumps([list(key) for key in DEFAULTS]))
    values: dict[str, Any] = _oracle("conf", str(conf), str(options))
    return values


@needs_nova
def test_the_defaults_are_nova_34s_own(tmp_path: Path) -> None:
    nova = _nova_values(tmp_path / "absent.conf", tmp_path)
    for (group, option), ours in DEFAULTS.items():
        theirs = nova[f"{group}.{option}"]
        if (group, option) == ("DEFAULT", "host"):
            assert ours is None  # socket.gethostname() at read time, as Nova's default
            continue
        if (group, option) == ("DEFAULT", "transport_url"):
            assert theirs in (None, "rabbit://")  # both: the local broker as guest
            continue
        assert ours == theirs, f"[{group}] {option}: ours {ours!r}, Nova 34's {theirs!r}"


SYNTAX = """\
# a comment line
[DEFAULT]
host = sched-1
cpu_allocation_ratio = 2.5
reserved_host_memory_mb = 1024
control_exchange = "quoted"
[filter_scheduler]
; another comment
enabled_filters = ComputeFilter , ServerGroupAffinityFilter,
    NumInstancesFilter
host_subset_size = 3
host_subset_size = 4
shuffle_best_same_weighed_hosts = yes
ram_weight_multiplier = -1.5
io_ops_weight_multiplier =
[scheduler]
max_attempts = 5
"""


@needs_nova
def test_a_nova_conf_is_read_as_oslo_config_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text(SYNTAX)
    nova = _nova_values(path, tmp_path)
    ours = read(str(path)).values
    for key in DEFAULTS:
        name = f"{key[0]}.{key[1]}"
        if key == ("filter_scheduler", "io_ops_weight_multiplier"):
            assert nova[name] is None  # oslo: an empty number is None; Nova's default stands
            assert ours[key] == -1.0
            continue
        if key in (("DEFAULT", "transport_url"),):
            continue
        assert ours[key] == nova[name], f"{name}: ours {ours[key]!r}, oslo.config's {nova[name]!r}"


def test_nova_conf_becomes_settings_and_names_what_is_not_built(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text(
        "[DEFAULT]\ntransport_url = rabbit://u:p@broker1:5672,u:p@broker2:5672/cell1\n"
        "[filter_scheduler]\nenabled_filters = ComputeFilter,RamFilter,NUMATopologyFilter,"
        "ServerGroupAffinityFilter\nweight_classes = nova.scheduler.weights.ram.RAMWeigher\n"
        "[scheduler]\nlimit_tenants_to_placement_aggregate = true\n"
        "image_metadata_prefilter = true\n"
    )
    conf = read(str(path))
    assert conf.amqp_url == "amqp://u:p@broker1:5672/cell1"
    assert conf.control_exchange == "nova"
    filters, source = conf.scheduler["enabled_filters"]
    assert source == "[filter_scheduler] enabled_filters"
    assert filters[:6] == [
        "RamFilter",
        "CoreFilter",
        "DiskFilter",
        "RequiredTraitsFilter",
        "ForbiddenTraitsFilter",
        "AvailabilityZoneFilter",
    ]
    assert filters[6:] == ["ComputeFilter", "ServerGroupAffinityFilter"]
    # a weigher left out of weight_classes weighs nothing
    assert conf.scheduler["ram_weight_multiplier"] == (
        1.0,
        "[filter_scheduler] ram_weight_multiplier",
    )
    assert conf.scheduler["cpu_weight_multiplier"] == (0.0, "[filter_scheduler] weight_classes")
    assert conf.scheduler["cpu_allocation_ratio"] == (4.0, "[DEFAULT] initial_cpu_allocation_ratio")
    text = "\n".join(conf.warnings)
    assert "filter(s) RamFilter were removed from Nova" in text
    # a configuration written for Nova 18 keeps Nova 18's rules
    assert conf.scheduler["nova_release"] == (
        18,
        "[filter_scheduler] enabled_filters names Nova 18's",
    )
    assert "read as written for Nova 18" in text
    assert "['NUMATopologyFilter'] are not built" in text
    assert "[scheduler] image_metadata_prefilter = true" in text
    # Nova 34's tenant request filter is built: read, not warned about
    assert conf.scheduler["limit_tenants_to_placement_aggregate"] == (
        True,
        "[scheduler] limit_tenants_to_placement_aggregate",
    )
    assert "limit_tenants_to_placement_aggregate" not in text


UNBUILT = """\
[scheduler]
max_placement_results = 50
query_placement_for_image_type_support = true
[filter_scheduler]
track_instance_changes = false
pci_in_placement = yes
"""
_UNBUILT_KEYS = (
    ("scheduler", "max_placement_results"),
    ("scheduler", "query_placement_for_image_type_support"),
    ("filter_scheduler", "track_instance_changes"),
    ("filter_scheduler", "pci_in_placement"),
)


@needs_nova
def test_options_that_change_nova_scheduling_but_are_not_built_are_named_in_one_line(
    tmp_path: Path,
) -> None:
    """max_placement_results (Nova weighs at most that many of Placement's candidates)
    and track_instance_changes off (Nova reads hosts' instances from its database)
    map onto no actorsched setting: read as oslo.config reads them, and named in the
    one line of options not built, with the others; silent at Nova's defaults."""
    path = tmp_path / "nova.conf"
    path.write_text(UNBUILT)
    nova = _nova_values(path, tmp_path)
    conf = read(str(path))
    for key in _UNBUILT_KEYS:
        assert conf.values[key] == nova[f"{key[0]}.{key[1]}"], key
    assert conf.values[("scheduler", "max_placement_results")] == 50
    assert conf.values[("filter_scheduler", "track_instance_changes")] is False
    [line] = [w for w in conf.warnings if w.startswith("options that change Nova's")]
    assert "[scheduler] max_placement_results = 50 (Nova weighs at most that many" in line
    assert "[filter_scheduler] track_instance_changes = false (Nova's scheduler" in line
    assert "[filter_scheduler] pci_in_placement = true (actorsched places no PCI" in line
    assert "[scheduler] query_placement_for_image_type_support = true" in line
    # no setting of actorsched's took them
    assert not {"max_placement_results", "track_instance_changes"} & set(conf.scheduler)
    # Nova's defaults (1000, true, false): nothing to name
    path.write_text("[scheduler]\nmax_attempts = 2\n")
    conf = read(str(path))
    assert conf.values[("scheduler", "max_placement_results")] == 1000
    assert not [w for w in conf.warnings if "options that change" in w], conf.warnings
    # a value Nova refuses (its minimum is 1)
    path.write_text("[scheduler]\nmax_placement_results = 0\n")
    with pytest.raises(NovaConfigError, match=r"max_placement_results=0: must be at least 1"):
        read(str(path))


def test_failed_builds_and_metrics_options_are_read_as_nova_34_reads_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """BuildFailureWeigher, MetricsFilter and MetricsWeigher are built: their options
    read (Nova's defaults where the file is silent), none named as a no-op, and
    ``actorsched config`` names the nova.conf option each came from."""
    path = tmp_path / "nova.conf"
    path.write_text("[filter_scheduler]\nenabled_filters = ComputeFilter,MetricsFilter\n")
    conf = read(str(path))
    assert conf.scheduler["build_failure_weight_multiplier"] == (
        1000000.0,
        "[filter_scheduler] build_failure_weight_multiplier",
    )
    assert conf.scheduler["metrics_weight_setting"] == ([], "[metrics] weight_setting")
    assert conf.scheduler["metrics_weight_multiplier"] == (1.0, "[metrics] weight_multiplier")
    assert conf.scheduler["metrics_required"] == (True, "[metrics] required")
    assert conf.scheduler["metrics_weight_of_unavailable"] == (
        -10000.0,
        "[metrics] weight_of_unavailable",
    )
    assert conf.scheduler["enabled_filters"][0][-1] == "MetricsFilter"
    text = "\n".join(conf.warnings)
    for built in ("BuildFailureWeigher", "MetricsWeigher", "MetricsFilter"):
        assert built not in text, text
    path.write_text(
        "[filter_scheduler]\nbuild_failure_weight_multiplier = 2.5\n"
        "[metrics]\nweight_setting = cpu.idle.time=1.0, bad, cpu.user.time=-2\n"
        "weight_multiplier = -1.5\nrequired = false\nweight_of_unavailable = -5\n"
    )
    conf = read(str(path))
    assert conf.scheduler["build_failure_weight_multiplier"][0] == 2.5
    assert conf.scheduler["metrics_weight_setting"][0] == [
        ("cpu.idle.time", 1.0),
        ("cpu.user.time", -2.0),
    ]
    assert conf.scheduler["metrics_weight_multiplier"][0] == -1.5
    assert conf.scheduler["metrics_required"][0] is False
    assert conf.scheduler["metrics_weight_of_unavailable"][0] == -5.0
    assert "[metrics] weight_setting: ignoring bad" in "\n".join(conf.warnings)
    # a weigher left out of weight_classes: no multiplier, and required fails nothing
    path.write_text(
        "[filter_scheduler]\nweight_classes = nova.scheduler.weights.ram.RAMWeigher\n"
        "[metrics]\nweight_setting = cpu.idle.time=1.0\n"
    )
    conf = read(str(path))
    assert conf.scheduler["build_failure_weight_multiplier"] == (
        0.0,
        "[filter_scheduler] weight_classes",
    )
    assert conf.scheduler["metrics_weight_multiplier"][0] == 0.0
    assert conf.scheduler["metrics_required"] == (False, "[metrics] weight_classes")
    monkeypatch.setenv("ACTORSCHED_NOVA_CONFIG", str(path))
    assert cli.main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["scheduler.metrics_weight_setting"] == {
        "value": [["cpu.idle.time", 1.0]],
        "source": f"nova.conf {path} [metrics] weight_setting",
    }
    assert shown["scheduler.build_failure_weight_multiplier"]["source"] == (
        f"nova.conf {path} [filter_scheduler] weight_classes"
    )


def test_nova_34s_default_filters_are_all_built(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text("[filter_scheduler]\nimage_properties_default_architecture = aarch64\n")
    conf = read(str(path))
    filters, _ = conf.scheduler["enabled_filters"]
    assert filters[6:] == [
        "ComputeFilter",
        "ComputeCapabilitiesFilter",
        "ImagePropertiesFilter",
        "ServerGroupAntiAffinityFilter",
        "ServerGroupAffinityFilter",
    ]
    assert not [w for w in conf.warnings if "not built in actorsched: hosts" in w]
    assert conf.scheduler["image_properties_default_architecture"] == (
        "aarch64",
        "[filter_scheduler] image_properties_default_architecture",
    )
    path.write_text("[filter_scheduler]\nimage_properties_default_architecture = amd64\n")
    with pytest.raises(NovaConfigError, match="image_properties_default_architecture='amd64'"):
        read(str(path))


def test_a_bad_nova_conf_value_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nova.conf"
    path.write_text("[filter_scheduler]\nhost_subset_size = many\n")
    with pytest.raises(NovaConfigError, match=r"\[filter_scheduler\] host_subset_size='many'"):
        read(str(path))
    with pytest.raises(NovaConfigError, match="No such file"):
        read(str(tmp_path / "missing.conf"))


def test_actorsched_config_shows_the_nova_file_as_the_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "nova.conf"
    path.write_text("[filter_scheduler]\nhost_subset_size = 3\n")
    monkeypatch.setenv("ACTORSCHED_NOVA_CONFIG", str(path))
    assert cli.main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["nova.config"] == {"value": str(path), "source": "$ACTORSCHED_NOVA_CONFIG"}
    assert shown["scheduler.host_subset_size"] == {
        "value": 3,
        "source": f"nova.conf {path} [filter_scheduler] host_subset_size",
    }
    assert shown["scheduler.max_attempts"]["source"] == f"nova.conf {path} [scheduler] max_attempts"
    # an actorsched setting still wins over the Nova file
    monkeypatch.setenv("ACTORSCHED_HOST_SUBSET_SIZE", "2")
    assert cli.main(["config", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scheduler.host_subset_size"]["value"] == 2


def test_actorsched_config_shows_the_broker_host_and_no_op_multipliers_of_the_nova_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What no actorsched setting takes is shown too, with the Nova file as its source:
    the broker (each broker's password as ***), the exchange, the host, and the
    multipliers of the weighers that change no order here (0 when weight_classes
    leaves the weigher out, as for the built ones)."""
    path = tmp_path / "nova.conf"
    path.write_text(
        "[DEFAULT]\ntransport_url = rabbit://nova:s3cret@mq1:5672,nova:0ther@mq2:5672/cell1\n"
        "control_exchange = nova-cell1\nhost = sched-9\n"
        "[filter_scheduler]\ncross_cell_move_weight_multiplier = -2.5\n"
    )
    monkeypatch.setenv("ACTORSCHED_NOVA_CONFIG", str(path))
    assert cli.main(["config", "--json"]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out
    assert "0ther" not in out
    shown = json.loads(out)
    source = f"nova.conf {path}"
    assert shown["nova_conf.transport_url"] == {
        "value": "rabbit://nova:***@mq1:5672,nova:***@mq2:5672/cell1",
        "source": f"{source} [DEFAULT] transport_url",
    }
    assert shown["nova_conf.control_exchange"] == {
        "value": "nova-cell1",
        "source": f"{source} [DEFAULT] control_exchange",
    }
    assert shown["nova_conf.host"] == {"value": "sched-9", "source": f"{source} [DEFAULT] host"}
    assert shown["nova_conf.cross_cell_move_weight_multiplier"] == {
        "value": -2.5,
        "source": f"{source} [filter_scheduler] cross_cell_move_weight_multiplier",
    }
    assert shown["nova_conf.pci_weight_multiplier"] == {  # Nova 34's default
        "value": 1.0,
        "source": f"{source} [filter_scheduler] pci_weight_multiplier",
    }
    assert cli.main(["config"]) == 0
    text = capsys.readouterr().out
    assert "s3cret" not in text
    assert "nova_conf.control_exchange" in text
    assert f"nova-cell1  ({source} [DEFAULT] control_exchange)" in text
    # Nova's defaults where the file is silent, the weighers left out of weight_classes
    path.write_text("[filter_scheduler]\nweight_classes = nova.scheduler.weights.ram.RAMWeigher\n")
    assert cli.main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["nova_conf.transport_url"]["value"] is None  # the local broker, as guest
    assert shown["nova_conf.control_exchange"]["value"] == "nova"
    assert shown["nova_conf.host"]["value"] == socket.gethostname()
    assert shown["nova_conf.pci_weight_multiplier"] == {
        "value": 0.0,
        "source": f"{source} [filter_scheduler] weight_classes",
    }
    # without a nova.conf, no such rows
    monkeypatch.delenv("ACTORSCHED_NOVA_CONFIG")
    assert cli.main(["config", "--json"]) == 0
    assert not [key for key in json.loads(capsys.readouterr().out) if key.startswith("nova_conf")]
    # a value Nova refuses (PCIWeigher's multiplier is at least 0)
    path.write_text("[filter_scheduler]\npci_weight_multiplier = -1\n")
    with pytest.raises(NovaConfigError, match=r"pci_weight_multiplier=-1.0: must be at least 0"):
        read(str(path))


@needs_nova
def test_a_request_spec_from_nova_becomes_the_request_nova_would_place(tmp_path: Path) -> None:
    group = str(uuid.uuid4())
    specs = [
        {
            "uuids": ["a", "b"],
            "memory_mb": 2048,
            "vcpus": 2,
            "root_gb": 20,
            "ephemeral_gb": 5,
            "swap": 1536,  # 1.5 GB: Nova rounds swap up to whole GB
            "extra_specs": {"trait:HW_CPU_X86_AVX2": "required", "trait:CUSTOM_X": "forbidden"},
            "image_properties": {"trait:CUSTOM_IMG": "required"},  # Nova's image traits
            "availability_zone": "az1",
            "group_policy": "anti-affinity",
            "group_uuid": group,
            "group_rules": {"max_server_per_host": "2"},
            "group_hosts": ["h9", "h9"],
            "ignore_hosts": ["H3"],
            "force_hosts": ["h1"],
            "scheduler_hints": {"same_host": ["i-1"], "different_host": ["i-2"]},
            "destination_host": "h1",
            "project_id": "p1",
            "name": "m1.big",
        },
        {"uuids": ["c"], "memory_mb": 512, "root_gb": 40, "is_bfv": True},
        {
            "uuids": ["d"],
            "memory_mb": 512,
            "extra_specs": {"resources:VCPU": "6", "resources:MEMORY_MB": "100"},
        },
    ]
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    first, bfv, overridden = _oracle("spec", str(path))
    got = objects.request_from_primitive(first, ["a", "b"])
    spec = got.spec
    assert (spec.memory_mb, spec.vcpus, spec.disk_gb) == (2048, 2, 20 + 5 + 2)
    assert spec.required_traits == ["CUSTOM_IMG", "HW_CPU_X86_AVX2"]
    assert spec.forbidden_traits == ["CUSTOM_X"]
    assert spec.availability_zone == "az1"
    assert spec.group is not None
    assert (spec.group.id, spec.group.policy, spec.group.max_server_per_host) == (
        group,
        "anti-affinity",
        2,
    )
    assert spec.group.hosts == ["h9"]
    assert got.group_hosts == ("h9", "h9")
    assert spec.ignore_hosts == ["H3"]
    assert spec.force_hosts == ["h1"]
    assert (spec.same_host, spec.different_host) == (["i-1"], ["i-2"])
    assert spec.requested_destination is not None
    assert spec.requested_destination.host == "h1"
    assert (spec.project_id, spec.flavor_name) == ("p1", "m1.big")
    assert spec.instance_uuids == ["a", "b"]
    assert not got.is_rebuild
    # a volume-backed instance takes no root disk on the host
    assert objects.request_from_primitive(bfv, None).spec.disk_gb == 0
    assert objects.request_from_primitive(bfv, None).spec.instance_uuids == ["c"]
    resized = objects.request_from_primitive(overridden, ["d"]).spec
    assert (resized.vcpus, resized.memory_mb) == (6, 100)


@needs_nova
def test_what_actorsched_cannot_honour_yet_is_refused_by_name(tmp_path: Path) -> None:
    specs = [
        {"extra_specs": {"hw:cpu_policy": "dedicated"}},
        {"extra_specs": {"resources:CUSTOM_GPU": "1"}},
        {"extra_specs": {"capabilities:cpu_info:vendor": "Intel"}},
        {
            "image_properties": {
                "hw_architecture": "aarch64",
                "hw_vm_mode": "hv",  # Nova's ImageMetaProps makes it hvm
                "img_hv_requested_version": ">=6.0,<6.2",
                "hw_maxphysaddr_bits": 42,
                "hw_disk_bus": "virtio",  # not read by ImagePropertiesFilter
            }
        },
    ]
    path = tmp_path / "specs.json"
    path.write_text(json.dumps(specs))
    cpu, gpu, capability, arch = _oracle("spec", str(path))
    defaults = ("ComputeCapabilitiesFilter", "ImagePropertiesFilter")
    with pytest.raises(objects.Unsupported, match="hw:cpu_policy=dedicated"):
        objects.request_from_primitive(cpu, None, filters=defaults)
    with pytest.raises(objects.Unsupported, match="resources:CUSTOM_GPU=1"):
        objects.request_from_primitive(gpu, None, filters=defaults)
    # ComputeCapabilitiesFilter and ImagePropertiesFilter are built: what they
    # read reaches the core, whichever filters Nova enables
    for filters in (defaults, ()):
        asked = objects.request_from_primitive(capability, None, filters=filters).spec
        assert asked.extra_specs == {"capabilities:cpu_info:vendor": "Intel"}
        image = objects.request_from_primitive(arch, None, filters=filters).spec
        assert image.image_properties == {
            "hw_architecture": "aarch64",
            "hw_vm_mode": "hvm",
            "img_hv_requested_version": ">=6.0,<6.2",
            "hw_maxphysaddr_bits": "42",
        }


def test_an_object_of_another_major_version_is_refused_by_name() -> None:
    primitive = {
        "nova_object.name": "RequestSpec",
        "nova_object.version": "2.0",
        "nova_object.data": {},
    }
    with pytest.raises(objects.UnsupportedObject, match=r"RequestSpec version '2\.0'"):
        objects.request_from_primitive(primitive, ["x"])
    with pytest.raises(objects.UnsupportedObject, match="is a 'Flavor', not a 'RequestSpec'"):
        objects.request_from_primitive({**primitive, "nova_object.name": "Flavor"}, ["x"])


@needs_nova
def test_image_props_weigher_options_and_every_image_property(tmp_path: Path) -> None:
    """ImagePropertiesWeigher is built: its multiplier and setting are read from
    nova.conf (off, 0, by default as in Nova 34; no line says it is not built), and
    with it on a request carries every property of its image as Nova's ``str()`` of
    it, as the weigher compares them (without it, only ImagePropertiesFilter's)."""
    path = tmp_path / "nova.conf"
    path.write_text("[filter_scheduler]\nenabled_filters = ComputeFilter\n")
    conf = read(str(path))
    assert conf.scheduler["image_props_weight_multiplier"] == (
        0.0,
        "[filter_scheduler] image_props_weight_multiplier",
    )
    assert not conf.weighs_images
    path.write_text(
        "[filter_scheduler]\nimage_props_weight_multiplier = -2.5\n"
        "image_props_weight_setting = os_distro=1.5, nope, hw_machine_type=0\n"
    )
    conf = read(str(path))
    assert conf.weighs_images
    assert conf.scheduler["image_props_weight_multiplier"][0] == -2.5
    assert conf.scheduler["image_props_weight_setting"] == (
        [("os_distro", 1.5), ("hw_machine_type", 0.0)],
        "[filter_scheduler] image_props_weight_setting",
    )
    text = "\n".join(conf.warnings)
    assert "image_props_weight_setting: ignoring nope" in text
    assert "ImagePropertiesWeigher" not in text, text
    specs = [
        {
            "image_properties": {
                "os_distro": "linux",
                "hw_machine_type": "pc",
                "hw_cpu_cores": 2,
                "hw_architecture": "x86_64",
            }
        }
    ]
    specs_path = tmp_path / "specs.json"
    specs_path.write_text(json.dumps(specs))
    [primitive] = _oracle("spec", str(specs_path))
    every = objects.request_from_primitive(primitive, None, weighs_images=True).spec
    assert every.image_properties == {
        "os_distro": "linux",
        "hw_machine_type": "pc",
        "hw_cpu_cores": "2",
        "hw_architecture": "x86_64",
    }
    only = objects.request_from_primitive(primitive, None).spec
    assert only.image_properties == {"hw_architecture": "x86_64"}
