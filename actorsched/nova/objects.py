"""Nova's versioned objects in and out: a RequestSpec becomes actorsched's request,
Selections and Aggregates go back as Nova builds them (no I/O, no ``nova`` import).

Rules this module keeps:

* A primitive is oslo.versionedobjects' ``{"nova_object.name", ".namespace",
  ".version", ".data", ".changes"}``. Only the object names and major
  versions below are read (:data:`ACCEPTED`); another version is
  :class:`UnsupportedObject`, an answer the caller can act on, never a guess.
* Resources are Nova's ``resources_from_request_spec``: vCPUs and RAM of the
  flavor, disk = ephemeral + swap (in GB, rounded up) + root unless the
  instance boots from volume, and a flavor's ``resources:VCPU``/
  ``MEMORY_MB``/``DISK_GB`` extra spec overrides its figure. Required and
  forbidden traits come from ``trait:<NAME>=required|forbidden`` extra
  specs, the image's ``traits_required`` and the request's
  ``request_level_params``, as Nova's ``ResourceRequest`` gathers them.
* Nothing an enabled filter reads is dropped: what actorsched cannot honour
  yet (another resource class, PCI aliases, NUMA and CPU pinning, requested
  aggregates) refuses the request with :class:`Unsupported`, naming the
  field. The image properties ImagePropertiesFilter reads become
  ``image_properties`` (every property of the image, as Nova's ``str()`` of
  it, when AggregateImagePropertiesIsolation is enabled or
  ImagePropertiesWeigher built); the image's id,
  which IsolatedHostsFilter reads, ``image_id``; the ``query`` scheduler
  hint, when JsonFilter is enabled, ``query``; the flavor's extra specs,
  which ComputeCapabilitiesFilter and AggregateInstanceExtraSpecsFilter
  read, ``extra_specs``.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..models import IMAGE_PROPERTIES, Aggregate, Destination, RequestSpec, ServerGroup

__all__ = [
    "ACCEPTED",
    "NODE_NAMESPACE",
    "NovaAggregate",
    "NovaRequest",
    "Unsupported",
    "UnsupportedObject",
    "aggregate_from_primitive",
    "compute_node_uuid",
    "legacy_destination",
    "request_from_primitive",
    "selection_primitive",
]

# the object versions this module reads: name -> the major version it knows
ACCEPTED: Mapping[str, int] = {
    "RequestSpec": 1,
    "Flavor": 1,
    "ImageMeta": 1,
    "ImageMetaProps": 1,
    "InstanceGroup": 1,
    "Destination": 1,
    "SchedulerRetries": 1,
    "SchedulerLimits": 1,
    "RequestLevelParams": 1,
    "Aggregate": 1,
}
SELECTION_VERSION = "1.1"
LIMITS_VERSION = "1.0"
# compute_node_uuid until host state comes from Placement (its provider uuids):
# uuid5 of the node name in this namespace, stable across restarts
NODE_NAMESPACE = uuid.UUID("5d1f6b52-8c0e-4f7e-9b9a-6b5c2a0f3e11")
_RESOURCE_OVERRIDES = {
    "resources:VCPU": "vcpus",
    "resources:MEMORY_MB": "memory_mb",
    "resources:DISK_GB": "disk_gb",
}
# extra specs and image properties that ask for what actorsched does not do yet
_UNSUPPORTED_SPEC_PREFIXES = ("hw:numa_", "pci_passthrough:", "accel:")
_UNSUPPORTED_SPECS = ("hw:cpu_policy", "hw:mem_page_size", "hw:cpu_thread_policy")
_MAX_FORCED = 10_000
_MAX_PROPERTY = 255  # an aggregate metadata value's length, Nova's and actorsched's
_POLICIES: tuple[Policy, ...] = ("affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity")


Policy = Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]


class UnsupportedObject(ValueError):
    """A versioned object of a name or version this endpoint does not read."""


class Unsupported(ValueError):
    """A request asking for what actorsched cannot honour yet; the message names it."""


@dataclass(frozen=True, slots=True)
class NovaRequest:
    """A decoded ``select_destinations``: actorsched's request and what only Nova reads."""

    spec: RequestSpec
    is_rebuild: bool
    # Nova's instance_group.hosts: the members' hosts as Nova knows them
    group_hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NovaAggregate:
    """A Nova host aggregate as the API's casts carry it."""

    name: str
    uuid: str | None
    hosts: tuple[str, ...]
    metadata: dict[str, str]


def _data(primitive: Any, name: str, where: str) -> dict[str, Any]:
    if not isinstance(primitive, dict) or "nova_object.data" not in primitive:
        raise UnsupportedObject(f"{where} is not a Nova versioned object (no nova_object.data)")
    got = primitive.get("nova_object.name")
    if got != name:
        raise UnsupportedObject(f"{where} is a {got!r}, not a {name!r}")
    version = str(primitive.get("nova_object.version", ""))
    major, _, minor = version.partition(".")
    if not (major.isdigit() and minor.isdigit()) or int(major) != ACCEPTED[name]:
        raise UnsupportedObject(
            f"{where}: {name} version {version!r} is not supported; this endpoint reads "
            f"{name} {ACCEPTED[name]}.x"
        )
    data = primitive["nova_object.data"]
    if not isinstance(data, dict):
        raise UnsupportedObject(f"{where}: nova_object.data must be an object")
    return data


def _optional(data: Mapping[str, Any], key: str, name: str, where: str) -> dict[str, Any] | None:
    value = data.get(key)
    if value is None:
        return None
    return _data(value, name, f"{where}.{key}")


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UnsupportedObject(f"{where} must be a list of strings")
    if len(value) > _MAX_FORCED:
        raise UnsupportedObject(f"{where} lists {len(value):,} names, over {_MAX_FORCED:,}")
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnsupportedObject(f"{where} must be an integer, got {value!r}")
    return value


def _extra_int(value: str, key: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise Unsupported(f"flavor extra spec {key}={value!r} is not an integer") from None
    if number < 0:
        raise Unsupported(f"flavor extra spec {key}={value!r} is negative")
    return number


def _traits(
    extra_specs: Mapping[str, str], image_props: Mapping[str, Any], level: Mapping[str, Any] | None
) -> tuple[list[str], list[str]]:
    required: set[str] = set()
    forbidden: set[str] = set()
    for key, value in extra_specs.items():
        # trait:NAME and a numbered group's traitN:NAME are one provider's here
        scope, _, trait = key.partition(":")
        if trait and (scope == "trait" or (scope.startswith("trait") and scope[5:].isdigit())):
            if value == "required":
                required.add(trait)
            elif value == "forbidden":
                forbidden.add(trait)
    required.update(_strings(image_props.get("traits_required"), "image traits_required"))
    if level is not None:
        required.update(_strings(level.get("root_required"), "root_required"))
        forbidden.update(_strings(level.get("root_forbidden"), "root_forbidden"))
    return sorted(required), sorted(forbidden)


def _check_supported(extra_specs: Mapping[str, str]) -> None:
    for key, value in extra_specs.items():
        other = key.startswith("resources") and ":" in key and key not in _RESOURCE_OVERRIDES
        if other and _extra_int(value, key) != 0:
            raise Unsupported(
                f"flavor extra spec {key}={value}: actorsched places VCPU, MEMORY_MB "
                "and DISK_GB only (other resource classes come with Placement)"
            )
        if key.startswith(_UNSUPPORTED_SPEC_PREFIXES) or key in _UNSUPPORTED_SPECS:
            raise Unsupported(
                f"flavor extra spec {key}={value}: NUMA topology, CPU pinning, huge pages "
                "and PCI devices are not placed by actorsched yet (NUMATopologyFilter, "
                "PCIPassthroughFilter)"
            )


def _image_properties(props: Mapping[str, Any], every: bool) -> dict[str, str]:
    """The image properties ImagePropertiesFilter reads, as text (Nova sends
    ``hw_maxphysaddr_bits`` as a number); with ``every`` (AggregateImagePropertiesIsolation
    is enabled) all of them, each as Nova's ``str()`` of it, but those Nova holds
    as false (that filter passes them over)."""
    found: dict[str, str] = {}
    for key in IMAGE_PROPERTIES:
        value = props.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise UnsupportedObject(f"image property {key} must be text, got {value!r}")
        found[key] = str(value)
    if not every:
        return found
    for key, value in props.items():
        if key in found or not value:
            continue
        scalars = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int | float) for v in scalars):
            raise Unsupported(
                f"image property {key}={value!r}: AggregateImagePropertiesIsolation compares "
                "text, numbers and lists of them only"
            )
        text = str(value)  # as Nova's filter: str(prop)
        if len(text) > _MAX_PROPERTY or not text.isprintable():
            # no aggregate's value can be it (a value is at most that long, printable),
            # and none can be a text with a comma (the filter splits values at
            # commas): as Nova, a host with that key in its aggregates fails
            text = ","
        found[key] = text
    return found


def _query(hints: Mapping[str, Any]) -> str | None:
    """The ``query`` scheduler hint (Nova's ``get_scheduler_hint``: a list of one
    text is that text), or None."""
    value = hints.get("query")
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if value is None:
        return None
    if not isinstance(value, str):
        raise Unsupported(
            f"scheduler hint query={value!r}: JsonFilter reads one JSON text (Nova's "
            "JsonFilter raises TypeError on anything else)"
        )
    return value


def _group(data: Mapping[str, Any] | None) -> tuple[ServerGroup | None, tuple[str, ...]]:
    if data is None:
        return None, ()
    policy = data.get("policy")
    if policy is None:  # InstanceGroup before 1.11 listed policies
        policies = _strings(data.get("policies"), "instance_group.policies")
        policy = policies[0] if policies else None
    if policy is None:
        return None, ()
    if policy not in _POLICIES:
        raise UnsupportedObject(f"instance_group.policy {policy!r} is not one of {_POLICIES}")
    rules = data.get("_rules", data.get("rules")) or {}  # the wire's key is _rules
    if not isinstance(rules, dict):
        raise UnsupportedObject("instance_group.rules must be an object")
    per_host = rules.get("max_server_per_host")
    hosts = tuple(_strings(data.get("hosts"), "instance_group.hosts"))
    group_id = data.get("uuid") or data.get("id")
    # Nova's hosts name each host once; actorsched counts its own claims of the
    # group, so a host is passed once (a member actorsched placed is not doubled)
    # the members: counted where each is, as Nova's anti-affinity filter and soft
    # weighers count them among a host's instances (the hosts then bound affinity)
    members = _strings(data.get("members"), "instance_group.members")
    group = ServerGroup(
        id=str(group_id),
        policy=_POLICIES[_POLICIES.index(policy)],
        max_server_per_host=int(per_host) if per_host is not None else None,
        hosts=sorted(set(hosts)),
        members=sorted(set(members)),
    )
    return group, hosts


def _legacy_uuids(first: str, count: Any) -> list[str]:
    """The further instances of a call without ``instance_uuids`` (API 4.3, a very old
    conductor): Nova schedules ``num_instances`` of them (``_legacy_find_hosts``) and
    claims none; actorsched claims each under a uuid derived from the request's own
    (the same on a redelivery), which no host will list: the claim holds its room
    until ``claim_timeout``, so nothing is over-committed meanwhile."""
    if count is None:
        return []
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= _MAX_FORCED:
        raise UnsupportedObject(f"spec_obj.num_instances {count!r} is not 1 to {_MAX_FORCED:,}")
    return [str(uuid.uuid5(uuid.NAMESPACE_URL, f"{first}/{k}")) for k in range(1, count)]


def request_from_primitive(
    primitive: Any,
    instance_uuids: Sequence[str] | None,
    *,
    filters: Collection[str] = (),
    weighs_images: bool = False,
) -> NovaRequest:
    """The actorsched request of a Nova ``RequestSpec`` primitive.

    ``filters`` are Nova's enabled filters (from nova.conf). Every filter of
    Nova's that reads the request is built now (ComputeCapabilitiesFilter and
    ImagePropertiesFilter too), so none refuses it by itself; what no filter
    of actorsched's honours yet is refused whatever is enabled. ``weighs_images``
    (ImagePropertiesWeigher is built) reads every image property, as
    AggregateImagePropertiesIsolation does.
    Raises :class:`UnsupportedObject` for a primitive it cannot read and
    pydantic's ``ValidationError`` for a field out of actorsched's bounds.
    """
    spec = _data(primitive, "RequestSpec", "spec_obj")
    flavor = _data(spec.get("flavor"), "Flavor", "spec_obj.flavor")
    image = _optional(spec, "image", "ImageMeta", "spec_obj")
    props = (
        (_optional(image, "properties", "ImageMetaProps", "spec_obj.image") or {}) if image else {}
    )
    extra_specs = flavor.get("extra_specs") or {}
    if not isinstance(extra_specs, dict):
        raise UnsupportedObject("spec_obj.flavor.extra_specs must be an object")
    extra_specs = {str(k): str(v) for k, v in extra_specs.items()}
    _check_supported(extra_specs)
    level = _optional(spec, "request_level_params", "RequestLevelParams", "spec_obj")
    required, forbidden = _traits(extra_specs, props, level)
    figures = {
        "vcpus": _int(flavor.get("vcpus", 0), "flavor.vcpus"),
        "memory_mb": _int(flavor.get("memory_mb", 0), "flavor.memory_mb"),
    }
    swap_mb = _int(flavor.get("swap", 0) or 0, "flavor.swap")
    disk = _int(flavor.get("ephemeral_gb", 0) or 0, "flavor.ephemeral_gb") + math.ceil(
        swap_mb / 1024
    )
    if not spec.get("is_bfv", False):
        disk += _int(flavor.get("root_gb", 0) or 0, "flavor.root_gb")
    figures["disk_gb"] = disk
    for key, field in _RESOURCE_OVERRIDES.items():
        if key in extra_specs:
            figures[field] = _extra_int(extra_specs[key], key)
    uuids = list(instance_uuids) if instance_uuids else []
    if not uuids:
        single = spec.get("instance_uuid")
        if not isinstance(single, str):
            raise UnsupportedObject("no instance_uuids and the RequestSpec names no instance_uuid")
        uuids = [single, *_legacy_uuids(single, spec.get("num_instances"))]
    group, group_hosts = _group(_optional(spec, "instance_group", "InstanceGroup", "spec_obj"))
    hints = spec.get("scheduler_hints") or {}
    if not isinstance(hints, dict):
        raise UnsupportedObject("spec_obj.scheduler_hints must be an object")
    destination = _optional(spec, "requested_destination", "Destination", "spec_obj")
    requested = None
    if destination is not None:
        if destination.get("aggregates") or destination.get("forbidden_aggregates"):
            raise Unsupported(
                "requested_destination.aggregates / forbidden_aggregates (Placement member_of) "
                "are not read by actorsched yet"
            )
        host, node = destination.get("host"), destination.get("node")
        if host is not None or node is not None:
            requested = Destination(host=host, node=node)
    request = RequestSpec(
        instance_uuids=uuids,
        memory_mb=figures["memory_mb"],
        vcpus=figures["vcpus"],
        disk_gb=figures["disk_gb"],
        availability_zone=spec.get("availability_zone"),
        required_traits=required,
        forbidden_traits=forbidden,
        group=group,
        same_host=_strings(hints.get("same_host"), "scheduler_hints.same_host"),
        different_host=_strings(hints.get("different_host"), "scheduler_hints.different_host"),
        ignore_hosts=_strings(spec.get("ignore_hosts"), "spec_obj.ignore_hosts"),
        flavor_name=flavor.get("name"),
        extra_specs=extra_specs,
        project_id=spec.get("project_id"),
        image_properties=_image_properties(
            props, weighs_images or "AggregateImagePropertiesIsolation" in filters
        ),
        image_id=_image_id(image),
        query=_query(hints) if "JsonFilter" in filters else None,
        force_hosts=_strings(spec.get("force_hosts"), "spec_obj.force_hosts"),
        force_nodes=_strings(spec.get("force_nodes"), "spec_obj.force_nodes"),
        requested_destination=requested,
    )
    rebuild = hints.get("_nova_check_type") == ["rebuild"]
    return NovaRequest(spec=request, is_rebuild=rebuild, group_hosts=group_hosts)


def _image_id(image: Mapping[str, Any] | None) -> str | None:
    """The image's id (Nova's ``spec_obj.image.id``; None when unset: a boot from
    volume may have none)."""
    found = image.get("id") if image else None
    if found is not None and not isinstance(found, str):
        raise UnsupportedObject(f"spec_obj.image.id must be text, got {found!r}")
    return found


def compute_node_uuid(node: str) -> str:
    """The compute node uuid a Selection names for ``node`` (stable, until Placement's)."""
    return str(uuid.uuid5(NODE_NAMESPACE, node))


def _primitive(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": data,
        "nova_object.changes": sorted(data),
    }


def selection_primitive(host: str, node: str, zone: str | None, cell_uuid: str) -> dict[str, Any]:
    """A Nova ``Selection`` 1.1 primitive for ``host``/``node``."""
    limits = _primitive(
        "SchedulerLimits",
        LIMITS_VERSION,
        {"numa_topology": None, "vcpu": None, "disk_gb": None, "memory_mb": None},
    )
    return _primitive(
        "Selection",
        SELECTION_VERSION,
        {
            "compute_node_uuid": compute_node_uuid(node),
            "service_host": host,
            "nodename": node,
            "cell_uuid": cell_uuid,
            "limits": limits,
            "allocation_request": None,
            "allocation_request_version": None,
            "availability_zone": zone,
        },
    )


def legacy_destination(host: str, node: str) -> dict[str, Any]:
    """A destination as ``return_objects=False`` answers it (Nova before Queens)."""
    return {"host": host, "nodename": node, "limits": {}}


def aggregate_from_primitive(primitive: Any) -> NovaAggregate:
    """A Nova ``Aggregate`` primitive; its availability zone is its metadata's."""
    data = _data(primitive, "Aggregate", "aggregate")
    name = data.get("name")
    if not isinstance(name, str):
        raise UnsupportedObject("aggregate.name must be a string")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise UnsupportedObject("aggregate.metadata must be an object")
    hosts = tuple(_strings(data.get("hosts"), "aggregate.hosts"))
    agg_uuid = data.get("uuid")
    return NovaAggregate(
        name=name,
        uuid=agg_uuid if isinstance(agg_uuid, str) else None,
        hosts=hosts,
        metadata={str(k): str(v) for k, v in metadata.items()},
    )


def as_aggregate(aggregate: NovaAggregate) -> Aggregate:
    """The actorsched :class:`~actorsched.models.Aggregate` it becomes."""
    return Aggregate(
        name=aggregate.name, hosts=list(aggregate.hosts), metadata=dict(aggregate.metadata)
    )
