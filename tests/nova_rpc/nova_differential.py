"""Nova 34's own filters and weighers over seeded random clusters (never imports actorsched).

The generator half is plain Python, imported by ``test_differential.py`` in
actorsched's venv as well: :func:`generate` makes one case (hosts of random
sizes, usage, hypervisor versions, failed builds and metrics, host aggregates with availability
zones, allocation ratios and metadata, server groups with members on hosts,
traits, a flavor with extra specs, an image's id and properties, a query
hint, one request) from a seed, and :func:`tags` names the known
differences a case can hit. The Nova half runs in Nova's venv::

    .venv-nova/bin/python tests/nova_rpc/nova_differential.py CASES.json

prints one JSON list, one answer per case: for each instance of the request,
the hosts Nova's ``HostFilterHandler`` passed, as Nova's ``HostWeightHandler``
weighed them (host and weight, best first), and the host the claim took.
What runs is Nova's own code: ``HostState`` refreshed from ``ComputeNode``
records (``HostState.update``), ``HostManager.get_filtered_hosts`` over the
configuration's ``enabled_filters`` and ``get_weighed_hosts`` over all of
Nova's weighers, ``SchedulerManager._consume_selected_host`` after each claim,
as ``SchedulerManager._schedule`` walks a multi-instance request. An API
database naming the hosts' cell and that cell's database (SQLite files) are
there for ImagePropertiesWeigher, which looks them up; each listed instance
carries its image's properties in its system_metadata, as the cell holds it.

Placement's part (RAM, vCPU and disk with each provider's own allocation
ratio and ``max_unit``, a class asked 0 of not asked at all; required and
forbidden traits; the ``map_az_to_placement_aggregate`` request filter;
``compute_status_filter``'s disabled hosts; the claim of each instance) is
done by a plain Python stand-in, :func:`placement_fits` and
:func:`placement_candidates`, as ``benchmarks/nova_real.py`` does.
"""

from __future__ import annotations

import datetime
import json
import logging
import random
import sys
import uuid
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "CONFIGS",
    "FORMER",
    "IMAGE_CONFIGS",
    "KNOWN_TAGS",
    "features",
    "generate",
    "nova_conf_text",
    "placement_candidates",
    "placement_fits",
    "ratio",
    "refuses",
    "run_nova",
    "tags",
]

Case = dict[str, Any]

# Nova 34.0.0's [filter_scheduler] enabled_filters default (nova/conf/scheduler.py:323)
NOVA_DEFAULT_FILTERS = (
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
)
_AGGREGATE_FILTERS = (
    "AggregateInstanceExtraSpecsFilter",
    "AggregateMultiTenancyIsolation",
    "AggregateTypeAffinityFilter",
)
_LIMIT_FILTERS = ("NumInstancesFilter", "IoOpsFilter")
# Nova's opt-in filters: per-aggregate limits, image isolation, the query hint
_OPTIONAL_FILTERS = (
    "AggregateNumInstancesFilter",
    "AggregateIoOpsFilter",
    "IsolatedHostsFilter",
    "AggregateImagePropertiesIsolation",
    "JsonFilter",
)
# the images IsolatedHostsFilter isolates, and another one (Glance ids are uuids)
ISOLATED_IMAGE = "11111111-1111-4111-8111-111111111111"
OTHER_IMAGE = "22222222-2222-4222-8222-222222222222"

# Each configuration: Nova's enabled_filters, the [filter_scheduler] options it
# sets and its [metrics] ones (the rest are Nova 34's defaults; weight_classes is
# all_weighers: BuildFailureWeigher at 1000000 unless set)
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {"filters": list(NOVA_DEFAULT_FILTERS), "options": {}},
    "aggregates": {"filters": [*NOVA_DEFAULT_FILTERS, *_AGGREGATE_FILTERS], "options": {}},
    "limits": {
        "filters": [*NOVA_DEFAULT_FILTERS, *_LIMIT_FILTERS],
        "options": {"max_instances_per_host": 6, "max_io_ops_per_host": 3},
    },
    "everything": {
        "filters": [
            *NOVA_DEFAULT_FILTERS,
            *_AGGREGATE_FILTERS,
            *_LIMIT_FILTERS,
            "SameHostFilter",
            "DifferentHostFilter",
        ],
        "options": {"max_instances_per_host": 7, "max_io_ops_per_host": 4},
    },
    "multipliers": {
        "filters": [*NOVA_DEFAULT_FILTERS, "AggregateInstanceExtraSpecsFilter"],
        "options": {
            "ram_weight_multiplier": 2.5,
            "cpu_weight_multiplier": 0.5,
            "disk_weight_multiplier": 3.0,
            "io_ops_weight_multiplier": -4.0,
            "num_instances_weight_multiplier": 1.5,
            "soft_affinity_weight_multiplier": 2.0,
            "soft_anti_affinity_weight_multiplier": 0.5,
            "build_failure_weight_multiplier": 3.0,
        },
    },
    "negative": {
        "filters": [*NOVA_DEFAULT_FILTERS, *_LIMIT_FILTERS, "AggregateMultiTenancyIsolation"],
        "options": {
            "ram_weight_multiplier": -1.0,
            "cpu_weight_multiplier": -2.0,
            "disk_weight_multiplier": -0.5,
            "io_ops_weight_multiplier": 2.0,
            "num_instances_weight_multiplier": -1.0,
            "max_instances_per_host": 9,
            "max_io_ops_per_host": 5,
            "build_failure_weight_multiplier": -2.0,
        },
    },
    "optional": {
        "filters": [*NOVA_DEFAULT_FILTERS, *_OPTIONAL_FILTERS],
        "options": {
            "max_instances_per_host": 6,
            "max_io_ops_per_host": 4,
            "isolated_images": [ISOLATED_IMAGE],
            "isolated_hosts": ["h00", "h03"],
        },
    },
    "optional_loose": {
        "filters": [*NOVA_DEFAULT_FILTERS, *_LIMIT_FILTERS, *_OPTIONAL_FILTERS],
        "options": {
            "isolated_images": [ISOLATED_IMAGE],
            "isolated_hosts": ["h01"],
            "restrict_isolated_hosts_to_isolated_images": False,
            "aggregate_image_properties_isolation_namespace": "os",
            "aggregate_image_properties_isolation_separator": "_",
            "hypervisor_version_weight_multiplier": -2.0,
        },
    },
    "ram_only": {
        "filters": [*NOVA_DEFAULT_FILTERS, "AggregateTypeAffinityFilter"],
        "options": {
            "cpu_weight_multiplier": 0.0,
            "disk_weight_multiplier": 0.0,
            "io_ops_weight_multiplier": 0.0,
            "build_failure_weight_multiplier": 0.0,
        },
    },
    # ImagePropertiesWeigher on (Nova 34's default multiplier 0 turns it off): the
    # instances the hosts list carry images (``instance_images``)
    "image_props": {
        "filters": [*NOVA_DEFAULT_FILTERS, "AggregateInstanceExtraSpecsFilter"],
        "options": {"image_props_weight_multiplier": 2.0},
    },
    # negative: images spread; per-property ratios (an unnamed property weighs 0)
    "image_props_setting": {
        "filters": [*NOVA_DEFAULT_FILTERS, *_LIMIT_FILTERS],
        "options": {
            "image_props_weight_multiplier": -1.5,
            "image_props_weight_setting": ["os_distro=1.0", "os_type=0.5", "hw_cpu_cores=0.25"],
            "ram_weight_multiplier": 0.5,
            "max_instances_per_host": 9,
        },
    },
    # MetricsFilter with MetricsWeigher (required, Nova's pairing)
    "metrics": {
        "filters": [*NOVA_DEFAULT_FILTERS, "MetricsFilter"],
        "options": {"build_failure_weight_multiplier": 5.0},
        "metrics": {"weight_setting": ["cpu.idle.time=0.001", "cpu.kernel.time=-1"]},
    },
    # not required: a host without a metric weighs weight_of_unavailable
    "metrics_loose": {
        "filters": [*NOVA_DEFAULT_FILTERS, "AggregateInstanceExtraSpecsFilter"],
        "options": {},
        "metrics": {
            "weight_setting": ["cpu.frequency=0.01", "cpu.user.time=-0.5", "cpu.iowait.time=0"],
            "required": False,
            "weight_of_unavailable": -50.0,
            "weight_multiplier": -2.0,
        },
    },
    # required without MetricsFilter: a weighed host without the metric fails the
    # request (Nova raises ComputeHostMetricNotFound, actorsched InvalidRequest)
    "metrics_required": {
        "filters": [*NOVA_DEFAULT_FILTERS, *_LIMIT_FILTERS],
        "options": {"max_instances_per_host": 8},
        "metrics": {"weight_setting": ["cpu.idle.time=1", "cpu.user.time=0"]},
    },
}
CONFIG_NAMES = tuple(CONFIGS)
# the configurations whose hosts' instances carry images (ImagePropertiesWeigher)
IMAGE_CONFIGS = frozenset(
    name for name, c in CONFIGS.items() if c["options"].get("image_props_weight_multiplier")
)

# The ratio a compute node reports when nova.conf sets none ([DEFAULT]
# initial_*_allocation_ratio, nova/conf/compute.py:530-564), which is also
# actorsched's configured ratio read from that nova.conf
INITIAL_RATIOS = {"ram": 1.0, "cpu": 4.0, "disk": 1.0}

# Known differences between actorsched and Nova 34 that a case may hit: each is a
# flag of the generator, and :func:`tags` names those a case hits. The asserted
# cases are generated with no flag on. None is left (the former ones, now
# asserted: :data:`FORMER`); the machinery stays for the next one.
KNOWN_TAGS: dict[str, str] = {}
# Former known differences: actorsched agrees with Nova 34 there now. The generator
# makes them in the asserted cases (no flag); :func:`features` names those a case
# exercises, so the coverage test sees that the asserted cases hold enough of each.
FORMER: dict[str, str] = {
    "negative_free": (
        "a host Placement names has its free RAM, free vCPUs (ratio applied) or free disk "
        "below 0: both clamp each raw weight to the weigher's minval 0 (nova/weights.py "
        "BaseWeigher.weigh_objects) and normalize from it"
    ),
    "default_zone": (
        "the request names the default zone 'nova': map_az_to_placement_aggregate limits it "
        "to the aggregates of that zone, or not at all when no aggregate names it"
    ),
    "tenant_key_prefix": (
        "an aggregate has a filter_tenant_id<suffix> key: AggregateMultiTenancyIsolation reads "
        "every key that starts with filter_tenant_id"
    ),
    "zero_disk_full_host": (
        "the request asks 0 GB of disk and a host's disk is used past its capacity: a class "
        "asked 0 of is not asked, the host passes"
    ),
    "zero_vcpu_host": (
        "a host reports 0 vCPUs: it has no VCPU inventory, no request with vCPUs fits it"
    ),
    "extra_spec_not_a_number": (
        "a numeric extra-spec operator meets an aggregate value of a reported host that is "
        "not a number: actorsched refuses the request (InvalidRequest) whenever that is so "
        "(:func:`refuses`); Nova's extra_specs_ops raises ValueError when its filter gets "
        "to the value, so whenever Nova raises actorsched refuses"
    ),
    "aggregate_weight_multiplier": (
        "an aggregate of a host Placement names sets a *_weight_multiplier ('0' and negative "
        "ones too): both weigh that host with it, the smallest of its aggregates' values "
        "(nova/scheduler/utils.py get_weight_multiplier)"
    ),
    "several_instances_weigh_full_hosts": (
        "a later instance of a multi-create over hosts that fill after an instance or two: "
        "Nova weighs Placement's candidates for one instance (nova/scheduler/manager.py "
        "_schedule), hosts an earlier instance filled too, so their figures (clamped to the "
        "minval) move the normalization, and claims on the first in weighed order that has "
        "room; actorsched too under nova_release 34"
    ),
    "aggregate_allocation_ratio": (
        "an aggregate of a host Placement names sets a *_allocation_ratio (maybe '0'): Nova "
        "34 has no Aggregate*Filter and ignores it, Placement and the CPUWeigher read the "
        "compute node's own ratio; so does actorsched under nova_release 34"
    ),
}

_ZONES = ("az1", "az2", "az3")
_TRAITS = ("HW_CPU_X86_AVX2", "HW_CPU_X86_AVX512F", "CUSTOM_SSD", "CUSTOM_GPU")
_PROJECTS = ("p1", "p2", "p3")
# name: (vcpus, memory_mb, root disk gb); "boot" boots from a volume (no local disk)
_FLAVORS: dict[str, tuple[int, int, int]] = {
    "m1.tiny": (1, 512, 1),
    "m1.small": (1, 2048, 20),
    "m1.medium": (2, 4096, 40),
    "m1.large": (4, 8192, 80),
    "m1.xlarge": (8, 16384, 160),
    "boot.small": (2, 2048, 0),
}
# (memory_mb, vcpus, local_gb): small hosts, so that requests fill them
_HOST_MODELS = (
    (4096, 4, 100),
    (8192, 8, 200),
    (16384, 16, 400),
    (32768, 32, 800),
    (65536, 48, 1600),
)
# metadata key -> the values an aggregate may give it (AggregateInstanceExtraSpecsFilter)
_SPEC_VALUES: dict[str, tuple[str, ...]] = {
    "ssd": ("true", "false"),
    "gpu": ("a100", "h100", "a100,h100"),
    "cpu_model": ("icelake", "sapphire"),
    "tier": ("1", "2", "3"),
}
# extra specs a flavor may carry: (key, requirement); unscoped keys that name no
# HostState attribute or stat (ComputeCapabilitiesFilter passes them then)
_EXTRA_SPECS: tuple[tuple[str, str], ...] = (
    ("aggregate_instance_extra_specs:ssd", "true"),
    ("ssd", "true"),
    ("aggregate_instance_extra_specs:ssd", "s!= false"),
    ("aggregate_instance_extra_specs:gpu", "<in> a100"),
    ("aggregate_instance_extra_specs:gpu", "h100"),
    ("aggregate_instance_extra_specs:gpu", "<all-in> a100 h100"),
    ("aggregate_instance_extra_specs:cpu_model", "<or> icelake <or> sapphire"),
    ("cpu_model", "s== icelake"),
    ("aggregate_instance_extra_specs:tier", ">= 2"),
    ("aggregate_instance_extra_specs:tier", "<= 1"),
    ("aggregate_instance_extra_specs:tier", "== 3"),
    ("tier", "= 2"),
    ("hw:watchdog_action", "none"),  # another scope: neither filter reads it
)
_WEIGHT_MULTIPLIER_KEYS = (
    "ram_weight_multiplier",
    "cpu_weight_multiplier",
    "disk_weight_multiplier",
    "io_ops_weight_multiplier",
    "build_failure_weight_multiplier",
    "metrics_weight_multiplier",
    "image_props_weight_multiplier",
)
_RATIO_KEYS = ("ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio")
# image properties AggregateImagePropertiesIsolation compares (none ImagePropertiesFilter
# reads): the values an aggregate may give each, and an image (Nova's ImageMetaProps
# coerces each, and the filter compares str() of it: the text here)
_IMAGE_PROPERTIES: dict[str, tuple[str, ...]] = {
    "os_type": ("linux", "windows"),
    "os_distro": ("ubuntu", "rhel", "ubuntu,rhel"),
    "hw_cpu_cores": ("2", "4"),
    "os_require_quiesce": ("True",),
}
# JsonFilter queries over what actorsched holds of Nova's HostState
_QUERIES: tuple[Any, ...] = (
    [">=", "$free_ram_mb", 4096],
    ["<", "$num_instances", 4],
    ["not", ["=", "$host", "h01"]],
    ["or", [">", "$vcpus_total", 16], ["<=", "$num_io_ops", 1]],
    ["and", [">=", "$free_disk_mb", 102400], [">=", "$total_usable_ram_mb", 8192]],
    ["in", "$hypervisor_version", 8002000, 9001000],
    [">", "$hypervisor_version", 8002000],
    ["=", "$foo", 1, 1],
    ["not", ["<", "$free_ram_mb", 2048], False],
    [],
)
# hypervisor versions a compute reports (HypervisorVersionWeigher, JsonFilter)
_VERSIONS = (8002000, 8002000, 9001000, 7000000)
# failed builds a compute's stats count (BuildFailureWeigher)
_FAILED_BUILDS = (1, 1, 2, 3, 10)
# metrics a compute's monitors report (Nova's MonitorMetric values are integers),
# and the values each takes
_METRICS: dict[str, tuple[int, ...]] = {
    "cpu.idle.time": (100, 512, 2048, 8192),
    "cpu.kernel.time": (0, 1, 2, 5),
    "cpu.user.time": (0, 3, 7),
    "cpu.frequency": (1000, 2400, 3600),
    "cpu.iowait.time": (0, 9),
}
_NUMERIC_OPS = ("=", "==", "!=", ">=", "<=")
# an instance's image may hold, besides those, a property no request asks for
_INSTANCE_IMAGE_PROPERTIES = {**_IMAGE_PROPERTIES, "hw_machine_type": ("pc", "q35")}


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def ratio(host: Mapping[str, Any], kind: str) -> float:
    """The allocation ratio of ``kind`` (ram, cpu, disk) the host's compute node has."""
    value = host["ratios"][kind]
    return float(INITIAL_RATIOS[kind] if value is None else value)


# -- the generator (plain Python, both venvs) ----------------------------------


def _host(rng: random.Random, name: str, several: bool, over: bool) -> dict[str, Any]:
    """One host; ``over``: its RAM and disk over-committed, used past its own size;
    ``several``: it fills by its RAM after an instance or two."""
    memory_mb, vcpus, local_gb = rng.choice(_HOST_MODELS)
    if several:  # little RAM beside many vCPUs or much disk: a host fills by its RAM
        memory_mb = rng.choice((4096, 8192))
    if rng.random() < 0.03:
        vcpus = 0  # a node whose CPU count is not reported (Ironic-like)
    reserved = rng.choice((0, 0, 512, 1024))
    ratios: dict[str, float | None] = {
        "ram": rng.choice((1.5, 1.5, 1.0) if over else (None, 1.0, 1.0, 1.5)),
        "cpu": rng.choice((None, 1.0, 2.0, 4.0, 16.0)),
        "disk": rng.choice((1.5, 1.5, 1.0) if over else (None, 1.0, 1.0, 1.5)),
    }
    host: dict[str, Any] = {"host": name, "ratios": ratios}
    usable = memory_mb - reserved
    # over-committed RAM and disk may be used past the host's own size
    ram_cap = usable * ratio(host, "ram") if over else usable
    disk_cap = local_gb * ratio(host, "disk") if over else local_gb
    cpu_cap = vcpus * ratio(host, "cpu")
    full = rng.random() < 0.15  # some hosts close to full
    share = rng.choice((0.0, 0.25, 0.5, 0.75, 1.0)) if not full else 1.0
    if several:  # each fills after an instance or two
        share = rng.choice((0.25, 0.5, 0.75))
    host.update(
        memory_mb=memory_mb,
        memory_mb_reserved=reserved,
        memory_mb_used=int(ram_cap * share * rng.choice((1.0, 0.9, 0.6))) // 512 * 512,
        vcpus=vcpus,
        vcpus_used=int(cpu_cap * share * rng.choice((1.0, 0.5))),
        local_gb=local_gb,
        local_gb_used=int(disk_cap * share * rng.choice((1.0, 0.8, 0.3))),
        traits=sorted(t for t in _TRAITS if rng.random() < 0.4),
        enabled=rng.random() > 0.1,
        num_io_ops=rng.choice((0, 0, 1, 2, 3, 4, 5)),
        instances=[],
    )
    if over and rng.random() < 0.1:  # a ratio lowered under the usage
        host["ratios"]["cpu"] = 1.0
        host["vcpus_used"] = vcpus * 2
    if rng.random() < 0.04:  # likewise, its disk
        host["ratios"]["disk"] = 1.0
        host["local_gb_used"] = local_gb + 10
    host["hypervisor_version"] = rng.choice(_VERSIONS)
    host["failed_builds"] = rng.choice(_FAILED_BUILDS) if rng.random() < 0.15 else 0
    host["metrics"] = {
        metric: rng.choice(values) for metric, values in _METRICS.items() if rng.random() >= 0.2
    }
    return host


def _image(rng: random.Random) -> dict[str, str]:
    """The properties of a listed instance's image (none, or one to three)."""
    keys = rng.sample(sorted(_INSTANCE_IMAGE_PROPERTIES), rng.choice((0, 1, 2, 2, 3)))
    return {key: rng.choice(_INSTANCE_IMAGE_PROPERTIES[key]).split(",")[0] for key in keys}


def _aggregates(
    rng: random.Random, hosts: list[dict[str, Any]], optional: bool
) -> list[dict[str, Any]]:
    """The cluster's aggregates; ``optional``: Nova's opt-in filters are on, so the
    keys they read are more frequent."""
    names = [h["host"] for h in hosts]
    zone_of: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for index in range(rng.choice((0, 1, 2, 2, 3, 4))):
        members = [n for n in names if rng.random() < 0.45]
        metadata: dict[str, str] = {}
        if rng.random() < 0.4:
            zone = rng.choice(_ZONES)
            if rng.random() < 0.15:
                zone = "nova"  # an aggregate may name the default zone as its own
            members = [n for n in members if zone_of.get(n, zone) == zone]  # one zone a host
            zone_of.update(dict.fromkeys(members, zone))
            metadata["availability_zone"] = zone
        for key, values in _SPEC_VALUES.items():
            if rng.random() < 0.3:
                metadata[key] = rng.choice(values)
        if rng.random() < 0.25:
            metadata["filter_tenant_id"] = ",".join(rng.sample(_PROJECTS, rng.randint(1, 2)))
        if rng.random() < 0.12:  # a list of projects too long for one value goes on
            metadata[rng.choice(("filter_tenant_id2", "filter_tenant_id_x"))] = rng.choice(
                _PROJECTS
            )
        if rng.random() < 0.2:
            metadata["instance_type"] = ",".join(rng.sample(sorted(_FLAVORS), rng.randint(1, 3)))
        if rng.random() < 0.15:
            metadata["tier"] = "fast"  # not a number for the numeric operators
        if rng.random() < 0.15:  # a weigher's multiplier for the aggregate's hosts
            metadata[rng.choice(_WEIGHT_MULTIPLIER_KEYS)] = rng.choice(("2.0", "-1.0", "0"))
        if rng.random() < 0.15:  # Nova 34 reads no aggregate's allocation ratio
            metadata[rng.choice(_RATIO_KEYS)] = rng.choice(("0", "0.5", "2.0"))
        if rng.random() < 0.12:  # AggregateNumInstancesFilter's limit
            metadata["max_instances_per_host"] = rng.choice(("2", "3", "XXX"))
        if rng.random() < 0.12:  # AggregateIoOpsFilter's limit
            metadata["max_io_ops_per_host"] = rng.choice(("1", "2", "XXX"))
        if rng.random() < (0.7 if optional else 0.3):  # AggregateImagePropertiesIsolation's
            key = rng.choice(sorted(_IMAGE_PROPERTIES))
            metadata[key] = rng.choice(_IMAGE_PROPERTIES[key])
        out.append({"name": f"agg{index}", "hosts": members, "metadata": metadata})
    return out


def _group(
    rng: random.Random, hosts: list[dict[str, Any]], request_count: int
) -> dict[str, Any] | None:
    if rng.random() >= 0.35:
        return None
    policy = rng.choice(("affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"))
    members: dict[str, str] = {}
    count = rng.choice((0, 0, 1, 2, 3, 4))
    if policy == "affinity" and request_count > 1 and rng.random() < 0.5:
        count = 0
    one = rng.choice(hosts)["host"]
    for _ in range(count):
        # affinity members are on one host, as Nova put them; the others anywhere
        members[_uuid(rng)] = one if policy == "affinity" else rng.choice(hosts)["host"]
    per_host = None
    if policy == "anti-affinity" and rng.random() < 0.3:
        per_host = rng.choice((2, 3))
    return {
        "id": f"sg-{rng.getrandbits(32):08x}",
        "uuid": _uuid(rng),
        "policy": policy,
        "max_server_per_host": per_host,
        "members": members,
    }


def generate(seed: int, hits: Iterable[str] = ()) -> Case:
    """One case from ``seed``: a cluster, a configuration and one request.

    ``hits`` names the known differences (:data:`KNOWN_TAGS`) the case may
    hit (the generator's flags). With none, :func:`tags` of the case is
    empty. Every case may hold what the former differences (:data:`FORMER`)
    are about: hosts used past their capacity, the default zone asked,
    filter_tenant_id<suffix> keys, 0-vCPU hosts, boots from volume beside
    full disks, a numeric extra spec against "fast", aggregate weight
    multipliers and allocation ratios, multi-creates over hosts that fill.
    """
    wanted = frozenset(hits)
    unknown = wanted - set(KNOWN_TAGS)
    if unknown:
        raise ValueError(f"unknown differences {sorted(unknown)}; known: {sorted(KNOWN_TAGS)}")
    rng = random.Random(f"nova-differential-{seed}-{','.join(sorted(wanted))}")
    config = CONFIG_NAMES[seed % len(CONFIG_NAMES)]
    # a multi-create over hosts that fill by their RAM after an instance or two
    several = rng.random() < 0.2
    count = rng.choice((3, 4, 5, 6) if several else (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24))
    hosts: list[dict[str, Any]] = []
    over = rng.random() < 0.3  # hosts over-committed past their own RAM and disk
    for i in range(count):
        if hosts and rng.random() < 0.3:  # the same figures as another host: exact ties
            twin = json.loads(json.dumps(rng.choice(hosts)))
            twin["host"] = f"h{i:02d}"
            hosts.append(twin)
        else:
            hosts.append(_host(rng, f"h{i:02d}", several, over))
    images = config in IMAGE_CONFIGS
    for h in hosts:
        h["instances"] = [_uuid(rng) for _ in range(rng.choice((0, 0, 1, 2, 3, 5, 6, 8)))]
        if images:  # most of them with an image (a server group's members have none)
            h["instance_images"] = {u: _image(rng) for u in h["instances"] if rng.random() < 0.8}
    optional = "JsonFilter" in CONFIGS[config]["filters"]  # the opt-in filters are on
    aggregates = _aggregates(rng, hosts, optional)
    flavor = rng.choice(("m1.small", "m1.medium") if several else sorted(_FLAVORS))
    if rng.random() < 0.1:
        flavor = "boot.small"  # boot from volume: no DISK_GB asked
    vcpus, memory_mb, disk_gb = _FLAVORS[flavor]
    instances = [
        _uuid(rng) for _ in range(rng.choice((2, 3, 4) if several else (1, 1, 1, 1, 2, 3)))
    ]
    extra_specs: dict[str, str] = {}
    if rng.random() < 0.4:
        for key, requirement in rng.sample(_EXTRA_SPECS, rng.randint(1, 2)):
            extra_specs[key] = requirement
    if rng.random() < 0.2:
        extra_specs["aggregate_instance_extra_specs:tier"] = rng.choice((">= 2", "= 1"))
    required = [rng.choice(_TRAITS)] if rng.random() < 0.2 else []
    forbidden = [t for t in _TRAITS if t not in required and rng.random() < 0.07]
    for trait in required:
        extra_specs[f"trait:{trait}"] = "required"
    for trait in forbidden:
        extra_specs[f"trait:{trait}"] = "forbidden"
    zones = [z for z in (a["metadata"].get("availability_zone") for a in aggregates) if z]
    zone = None
    if rng.random() < 0.3 and zones:
        zone = rng.choice(sorted(set(zones)))
    if rng.random() < 0.1:
        zone = "nova"  # the default zone, whether an aggregate names it or not
    group = _group(rng, hosts, len(instances))
    if images and len(instances) > 1:
        # Nova 34 raises OrphanedObjectError there: _consume_selected_host lists a
        # stub Instance (no context, no system_metadata) for each instance placed in
        # a group, which ImagePropertiesWeigher then fails to load for the next one
        group = None
    if group is not None:  # a member runs on its host: its instance list says so
        by_name = {h["host"]: h for h in hosts}
        for member, host in group["members"].items():
            by_name[host]["instances"].append(member)
    listed = [u for h in hosts for u in h["instances"]]
    same_host: list[str] = []
    different_host: list[str] = []
    if config == "everything" and listed:
        if rng.random() < 0.2:
            same_host = rng.sample(listed, min(len(listed), rng.randint(1, 3)))
        if rng.random() < 0.3:
            different_host = rng.sample(listed, min(len(listed), rng.randint(1, 4)))
    ignore_hosts: list[str] = []
    if rng.random() < 0.08:
        name = rng.choice(hosts)["host"]
        ignore_hosts = [name.upper() if rng.random() < 0.5 else name]
    image_id = rng.choice((ISOLATED_IMAGE, OTHER_IMAGE, None, None))
    image_properties: dict[str, str] = {}
    if rng.random() < (0.85 if optional or images else 0.3):
        for key in rng.sample(sorted(_IMAGE_PROPERTIES), rng.randint(1, 2)):
            image_properties[key] = rng.choice(_IMAGE_PROPERTIES[key]).split(",")[0]
    query = rng.choice(_QUERIES) if rng.random() < (0.6 if optional else 0.3) else None
    request: dict[str, Any] = {
        "instances": instances,
        "flavor": flavor,
        "vcpus": vcpus,
        "memory_mb": memory_mb,
        "disk_gb": disk_gb,
        "extra_specs": extra_specs,
        "project_id": rng.choice(_PROJECTS),
        "availability_zone": zone,
        "required_traits": required,
        "forbidden_traits": forbidden,
        "group": group,
        "same_host": same_host,
        "different_host": different_host,
        "ignore_hosts": ignore_hosts,
        "image_id": image_id,
        "image_properties": image_properties,
        "query": query,
        "bare": False,
    }
    keys = {k for a in aggregates for k in a["metadata"]}
    if (
        not (extra_specs or zone or group or same_host or different_host or ignore_hosts)
        and not any(k.startswith("filter_tenant_id") or k == "instance_type" for k in keys)
        and not images
        and rng.random() < 0.8
    ):
        # actorsched is not told the flavor's name and project (the ranking's
        # shortcut for a request of resources only); no filter here reads them;
        # nor is Nova or actorsched told of an image or a query
        request.update(bare=True, image_id=None, image_properties={}, query=None)
    return {
        "seed": seed,
        "hits": sorted(wanted),
        "config": config,
        "hosts": hosts,
        "aggregates": aggregates,
        "request": request,
    }


def tags(case: Mapping[str, Any]) -> list[str]:
    """The known differences (:data:`KNOWN_TAGS`) ``case`` may hit, sorted."""
    return []


def features(case: Mapping[str, Any]) -> list[str]:
    """The former known differences (:data:`FORMER`) ``case`` exercises, sorted."""
    found: set[str] = set()
    request = case["request"]
    filters = CONFIGS[case["config"]]["filters"]
    options = CONFIGS[case["config"]]["options"]
    candidates = set(placement_candidates(case))
    several = len(request["instances"]) > 1
    for h in case["hosts"]:
        if several and h["host"] in candidates and not placement_fits(h, request, 2):
            found.add("several_instances_weigh_full_hosts")  # one instance fills it
        free = (
            ("ram", h["memory_mb"] - h["memory_mb_reserved"] - h["memory_mb_used"]),
            ("cpu", h["vcpus"] * ratio(h, "cpu") - h["vcpus_used"]),
            ("disk", h["local_gb"] - h["local_gb_used"]),
        )
        # a weigher that weighs (its multiplier is not 0) a host Placement names
        if h["host"] in candidates and any(
            value < 0 and options.get(f"{kind}_weight_multiplier", 1.0) != 0 for kind, value in free
        ):
            found.add("negative_free")
        if h["vcpus"] == 0:
            found.add("zero_vcpu_host")
        if request["disk_gb"] == 0 and h["local_gb_used"] > h["local_gb"] * ratio(h, "disk"):
            found.add("zero_disk_full_host")
    if request["availability_zone"] == "nova":
        found.add("default_zone")
    if "AggregateMultiTenancyIsolation" in filters and any(
        key.startswith("filter_tenant_id") and key != "filter_tenant_id"
        for a in case["aggregates"]
        for key in a["metadata"]
    ):
        found.add("tenant_key_prefix")
    if refuses(case) is not None:
        found.add("extra_spec_not_a_number")
    for a in case["aggregates"]:
        if not candidates & set(a["hosts"]):
            continue
        for key in a["metadata"]:
            if key.endswith("_weight_multiplier"):
                found.add("aggregate_weight_multiplier")
            if key.endswith("_allocation_ratio"):
                found.add("aggregate_allocation_ratio")
    return sorted(found)


def refuses(case: Mapping[str, Any]) -> str | None:
    """Why actorsched refuses ``case``'s request as invalid, or None.

    With AggregateInstanceExtraSpecsFilter on: an extra spec it reads (unscoped
    or of its scope) with a numeric operator whose operand is not a number, or
    whose key has a value that is not a number (comma-split) in an aggregate of
    a host that reports. Nova's float() raises ValueError there when its filter
    gets to that value, so whenever Nova raises, this says so too.
    """
    if "AggregateInstanceExtraSpecsFilter" not in CONFIGS[case["config"]]["filters"]:
        return None
    numeric: dict[str, str] = {}
    for spec_key, requirement in case["request"]["extra_specs"].items():
        scope, colon, rest = spec_key.partition(":")
        if colon and scope != "aggregate_instance_extra_specs":
            continue
        words = requirement.split()
        if len(words) > 1 and words[0] in _NUMERIC_OPS:
            if not _is_number(words[1]):
                return f"{spec_key}={requirement!r}: the operand is not a number"
            numeric[rest if colon else spec_key] = requirement
    reported = {h["host"] for h in case["hosts"]}
    for a in case["aggregates"]:
        for key in sorted(numeric):
            value = a["metadata"].get(key)
            if value is not None and not _is_number(value) and reported & set(a["hosts"]):
                return f"{a['name']} has {key}={value!r} for {numeric[key]!r}"
    return None


def _is_number(text: str) -> bool:
    try:
        for part in text.split(","):
            float(part)
    except ValueError:
        return False
    return True


def nova_conf_text(config: str) -> str:
    """The nova.conf of configuration ``config`` (what actorsched reads to configure
    itself through ``actorsched.nova.conf.read``)."""
    spec = CONFIGS[config]
    lines = ["[filter_scheduler]", "enabled_filters = " + ",".join(spec["filters"])]
    for group, options in (("filter_scheduler", spec["options"]), ("metrics", _metrics(spec))):
        if group != "filter_scheduler":
            lines.append(f"[{group}]")
        lines += [
            f"{option} = {','.join(value) if isinstance(value, list) else value}"
            for option, value in options.items()
        ]
    return "\n".join(lines) + "\n"


def _metrics(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration's [metrics] options."""
    metrics: dict[str, Any] = spec.get("metrics", {})
    return metrics


# -- Placement's part: a plain Python stand-in ----------------------------------


def placement_fits(host: Mapping[str, Any], request: Mapping[str, Any], count: int) -> bool:
    """Does ``host`` (its provider's inventories) take ``count`` instances of ``request``?

    Per resource class the request asks (a class asked 0 of is not asked):
    the provider has an inventory of it (a total above 0), the amount is at
    most its ``max_unit`` (Nova's computes set the total) and the usage plus
    ``count`` amounts is at most ``(total - reserved) * allocation_ratio``.
    """
    for total, reserved, used, kind, amount in (
        (host["memory_mb"], host["memory_mb_reserved"], host["memory_mb_used"], "ram", "memory_mb"),
        (host["vcpus"], 0, host["vcpus_used"], "cpu", "vcpus"),
        (host["local_gb"], 0, host["local_gb_used"], "disk", "disk_gb"),
    ):
        asked = request[amount]
        if asked == 0:
            continue
        if total == 0 or asked > total:
            return False
        if used + count * asked > (total - reserved) * ratio(host, kind):
            return False
    return True


def placement_candidates(case: Mapping[str, Any]) -> list[str]:
    """The hosts Placement's allocation candidates name for one instance, in host order."""
    request = case["request"]
    zone = request["availability_zone"]
    in_zone: set[str] | None = None
    if zone:  # map_az_to_placement_aggregate: member_of the aggregates of that zone, if any
        zoned = [a for a in case["aggregates"] if a["metadata"].get("availability_zone") == zone]
        if zoned:
            in_zone = {h for a in zoned for h in a["hosts"]}
    required = set(request["required_traits"])
    forbidden = set(request["forbidden_traits"])
    out = []
    for h in case["hosts"]:
        traits = set(h["traits"])
        if not h["enabled"]:  # compute_status_filter: COMPUTE_STATUS_DISABLED is forbidden
            continue
        if in_zone is not None and h["host"] not in in_zone:
            continue
        if not required <= traits or forbidden & traits:
            continue
        if placement_fits(h, request, 1):
            out.append(h["host"])
    return out


# -- Nova's half (Nova's venv only) ----------------------------------------------


class _Nova:
    """Nova's host manager and scheduler manager, without a database or RPC."""

    def __init__(self) -> None:
        import nova.conf
        from nova import objects

        objects.register_all()
        from nova.scheduler import filters, host_manager, manager, weights

        self.objects = objects
        self.HostState = host_manager.HostState
        self.manager = manager.SchedulerManager
        conf = nova.conf.CONF
        conf([], project="nova", default_config_files=[])
        self.conf = conf
        hm = host_manager.HostManager.__new__(host_manager.HostManager)
        hm.filter_handler = filters.HostFilterHandler()
        classes = hm.filter_handler.get_matching_classes(conf.filter_scheduler.available_filters)
        hm.filter_cls_map = {cls.__name__: cls for cls in classes}
        hm.filter_obj_map = {}
        hm.weight_handler = weights.HostWeightHandler()
        weigher_classes = hm.weight_handler.get_matching_classes(
            conf.filter_scheduler.weight_classes
        )
        hm.weighers = [cls() for cls in weigher_classes]
        self.hm = hm
        self.cell_uuid = str(uuid.UUID(int=7))
        self._cell_database()
        self.configured: str | None = None
        self.now = datetime.datetime.now(datetime.UTC)

    def _cell_database(self) -> None:
        """An API database naming the hosts' cell, and that cell's (empty) database, in
        SQLite files: ImagePropertiesWeigher looks the cell up and reads the instances'
        system_metadata in it (which each listed instance already has here)."""
        import importlib
        import tempfile

        sa = importlib.import_module("sqlalchemy")
        from nova.db.api import api as api_db
        from nova.db.api import models as api_models
        from nova.db.main import models as main_models

        folder = tempfile.mkdtemp(prefix="nova-differential-")
        cell_url = f"sqlite:///{folder}/cell1.db"
        api_url = f"sqlite:///{folder}/api.db"
        main_models.BASE.metadata.create_all(sa.create_engine(cell_url))
        api = sa.create_engine(api_url)
        api_models.BASE.metadata.create_all(api)
        with api.begin() as db:
            db.execute(
                sa.insert(api_models.CellMapping),
                [
                    {
                        "uuid": self.cell_uuid,
                        "name": "cell1",
                        "transport_url": "none:///",
                        "database_connection": cell_url,
                        "disabled": False,
                    }
                ],
            )
        api_db.context_manager.configure(connection=api_url)
        from oslo_messaging import opts

        # [DEFAULT] transport_url, which the cell mapping reads (its own, none:///,
        # opens no transport), as nova-scheduler has it registered
        self.conf.register_opts(dict(opts.list_opts())[None])

    def configure(self, config: str) -> None:
        if config == self.configured:
            return
        conf = self.conf
        for option in {o for c in CONFIGS.values() for o in c["options"]}:
            conf.clear_override(option, "filter_scheduler")
        for option in {o for c in CONFIGS.values() for o in _metrics(c)}:
            conf.clear_override(option, "metrics")
        spec = CONFIGS[config]
        conf.set_override("enabled_filters", list(spec["filters"]), "filter_scheduler")
        for option, value in spec["options"].items():
            conf.set_override(option, value, "filter_scheduler")
        for option, value in _metrics(spec).items():
            conf.set_override(option, value, "metrics")
        # MetricsFilter and MetricsWeigher read weight_setting when made: made again
        self.hm.filter_obj_map = {}
        self.hm.enabled_filters = self.hm._choose_host_filters(self.hm._load_filters())
        for weigher in self.hm.weighers:
            if hasattr(weigher, "_parse_setting"):
                weigher._parse_setting()
        self.configured = config

    def _compute_node(self, h: Mapping[str, Any], index: int) -> Any:
        objects = self.objects
        ram_used = h["memory_mb_used"] + h["memory_mb_reserved"]  # as the resource tracker
        return objects.ComputeNode(
            id=index + 1,
            uuid=str(uuid.UUID(int=index + 1)),
            host=h["host"],
            hypervisor_hostname=h["host"],
            hypervisor_type="QEMU",
            hypervisor_version=h.get("hypervisor_version", 8002000),
            cpu_info="{}",
            host_ip="192.0.2.1",
            memory_mb=h["memory_mb"],
            memory_mb_used=ram_used,
            free_ram_mb=h["memory_mb"] - ram_used,
            vcpus=h["vcpus"],
            vcpus_used=h["vcpus_used"],
            local_gb=h["local_gb"],
            local_gb_used=h["local_gb_used"],
            free_disk_gb=h["local_gb"] - h["local_gb_used"],
            disk_available_least=None,
            numa_topology=None,
            pci_device_pools=objects.PciDevicePoolList(objects=[]),
            supported_hv_specs=[],
            metrics=json.dumps(
                [
                    {
                        "name": name,
                        "value": value,
                        "timestamp": "2025-01-01T00:00:00Z",
                        "source": "d",
                    }
                    for name, value in h.get("metrics", {}).items()
                ]
            ),
            stats={
                "num_instances": str(len(h["instances"])),
                "io_workload": str(h["num_io_ops"]),
                "failed_builds": str(h.get("failed_builds", 0)),
            },
            cpu_allocation_ratio=ratio(h, "cpu"),
            ram_allocation_ratio=ratio(h, "ram"),
            disk_allocation_ratio=ratio(h, "disk"),
            updated_at=self.now,
        )

    def _instance(self, instance_uuid: str, image: Mapping[str, str]) -> Any:
        """A listed instance with its image's properties in its system_metadata (and
        an image_ref, which ImageMeta.from_instance reads too)."""
        system_metadata = {f"image_{key}": value for key, value in image.items()}
        return self.objects.Instance(
            uuid=instance_uuid, system_metadata=system_metadata, image_ref=OTHER_IMAGE
        )

    def _service(self, h: Mapping[str, Any], index: int) -> dict[str, Any]:
        now = datetime.datetime.now(datetime.UTC)
        return {
            "id": index + 1,
            "host": h["host"],
            "binary": "nova-compute",
            "topic": "compute",
            "disabled": not h["enabled"],
            "disabled_reason": None if h["enabled"] else "differential",
            "forced_down": False,
            "created_at": now,
            "updated_at": now,
            "last_seen_up": now,
        }

    def _spec(self, case: Case) -> Any:
        objects = self.objects
        request = case["request"]
        flavor = objects.Flavor(
            name=request["flavor"],
            memory_mb=request["memory_mb"],
            vcpus=request["vcpus"],
            root_gb=request["disk_gb"],
            ephemeral_gb=0,
            swap=0,
            extra_specs=dict(request["extra_specs"]),
        )
        group = None
        g = request["group"]
        if g is not None:
            rules = {}
            if g["max_server_per_host"] is not None:
                rules["max_server_per_host"] = str(g["max_server_per_host"])
            group = objects.InstanceGroup(
                uuid=g["uuid"],
                policy=g["policy"],
                policies=[g["policy"]],
                rules=rules,
                members=[*g["members"], *request["instances"]],
                hosts=sorted(set(g["members"].values())),  # InstanceGroup.get_hosts: each once
            )
        hints: dict[str, list[str]] = {}
        if request["same_host"]:
            hints["same_host"] = list(request["same_host"])
        if request["different_host"]:
            hints["different_host"] = list(request["different_host"])
        if request.get("query") is not None:
            hints["query"] = [json.dumps(request["query"])]
        image: dict[str, Any] = {"properties": dict(request.get("image_properties") or {})}
        if request.get("image_id") is not None:
            image["id"] = request["image_id"]
        return objects.RequestSpec(
            flavor=flavor,
            num_instances=len(request["instances"]),
            instance_uuid=request["instances"][0],
            image=objects.ImageMeta.from_dict(image),
            availability_zone=request["availability_zone"],
            instance_group=group,
            ignore_hosts=list(request["ignore_hosts"]) or None,
            force_hosts=None,
            force_nodes=None,
            requested_destination=None,
            scheduler_hints=hints,
            project_id=request["project_id"],
            user_id="differential",
            pci_requests=objects.InstancePCIRequests(requests=[]),
            numa_topology=None,
            is_bfv=request["disk_gb"] == 0,
            requested_resources=[],
        )

    def run(self, case: Case) -> dict[str, Any]:
        """Nova's answer for ``case`` (see the module's docstring)."""
        objects = self.objects
        self.configure(case["config"])
        hm = self.hm
        by_host: dict[str, list[Any]] = {}
        for i, a in enumerate(case["aggregates"]):
            agg = objects.Aggregate(
                id=i + 1,
                uuid=str(uuid.UUID(int=1000 + i)),
                name=a["name"],
                hosts=list(a["hosts"]),
                metadata=dict(a["metadata"]),
            )
            for name in a["hosts"]:
                by_host.setdefault(name, []).append(agg)
        figures = {h["host"]: h for h in case["hosts"]}
        states: dict[str, Any] = {}
        for i, h in enumerate(case["hosts"]):
            state = self.HostState(h["host"], h["host"], self.cell_uuid)
            images = h.get("instance_images", {})
            state.update(
                self._compute_node(h, i),
                self._service(h, i),
                by_host.get(h["host"], []),
                # system_metadata as the cell database holds it (fill_metadata reads
                # an instance's from there only when it has none)
                {u: self._instance(u, images.get(u, {})) for u in h["instances"]},
            )
            states[h["host"]] = state
        request = case["request"]
        spec = self._spec(case)
        names = placement_candidates(case)
        hosts = [states[n] for n in names]
        answers: list[dict[str, Any]] = []
        pending: dict[str, int] = {}
        for num, instance in enumerate(request["instances"]):
            spec.instance_uuid = instance
            spec.obj_reset_changes(["instance_uuid"])
            filtered = list(hm.get_filtered_hosts(hosts, spec, num)) if hosts else []
            weighed = hm.get_weighed_hosts(filtered, spec) if filtered else []
            # _get_sorted_hosts with host_subset_size 1 and no shuffle: this order
            hosts = [w.obj for w in weighed]
            # the hosts Placement's claim would take, in that order: the first one wins
            fits = [
                s
                for s in hosts
                if placement_fits(figures[s.host], request, pending.get(s.host, 0) + 1)
            ]
            # a later instance of a multi-create: Nova weighs Placement's candidates for
            # one instance, the hosts earlier instances filled too, and claims on the
            # first in weighed order that has room
            answers.append(
                {
                    "uuid": instance,
                    "weighed": [[w.obj.host, float(w.weight)] for w in weighed],
                    "fits": [s.host for s in fits],
                    "chosen": fits[0].host if fits else None,
                }
            )
            if not fits:
                break
            claimed = fits[0]
            pending[claimed.host] = pending.get(claimed.host, 0) + 1
            self.manager._consume_selected_host(claimed, spec, instance_uuid=instance)
        return {"seed": case["seed"], "placement": names, "instances": answers, "error": None}


def run_nova(cases: Iterable[Case]) -> list[dict[str, Any]]:
    """Nova's answer for each case, in order (an exception Nova raises is the answer's
    ``error``)."""
    nova = _Nova()
    out = []
    for case in cases:
        try:
            out.append(nova.run(case))
        except Exception as exc:
            out.append(
                {
                    "seed": case["seed"],
                    "placement": [],
                    "instances": [],
                    "error": f"{type(exc).__name__}: {exc}",
                }
            )
    return out


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.CRITICAL)  # Nova logs every filtered host
    warnings.simplefilter("ignore")
    if argv[:1] == ["generate"]:  # generate SEED [TAG ...]: one case, for a look
        case = generate(int(argv[1]), argv[2:])
        json.dump(case, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    with open(argv[0], encoding="utf-8") as file:
        cases = json.load(file)
    json.dump(run_nova(cases), sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
