"""The pydantic v2 types every layer shares, and the AMQP wire carries.

Messages are strict (``"1"`` is not an int), reject unknown fields and are
frozen, so a model that passed validation stays valid. Sizes are bounded so
hostile numbers cannot overflow the int64 host table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

__all__ = [
    "AGGREGATE_FILTERS",
    "BUILTIN_FILTERS",
    "HOST_FACTS_FILTERS",
    "IMAGE_PROPERTIES",
    "OPTIONAL_FILTERS",
    "Aggregate",
    "AggregateHostRequest",
    "AggregateNameRequest",
    "AggregatesRequest",
    "CreateAggregateRequest",
    "Destination",
    "HostReport",
    "HostState",
    "RequestSpec",
    "SchedulerConfig",
    "Selection",
    "ServerGroup",
    "Units",
    "UpdateAggregateRequest",
]

# 2**40 MB is an exabyte of RAM: far past any host, far below int64 overflow.
_MAX_SIZE = 2**40
_MAX_LIST = 10_000
# the most claims one placement may release to make room (a Selection's preempted)
MAX_PREEMPTION_VICTIMS = 1_000
# the longest a request may wait for room (RequestSpec.wait), in seconds
MAX_WAIT = 3_600.0


def _printable(value: str) -> str:
    # a newline forges log lines, NUL and bidi overrides (U+202E) hide what a name is
    if not value.isprintable():
        at, bad = next((i, c) for i, c in enumerate(value) if not c.isprintable())
        raise ValueError(
            f"must not contain control or format characters: U+{ord(bad):04X} at "
            f"position {at}; names are printable text"
        )
    return value


Name = Annotated[str, Field(min_length=1, max_length=255), AfterValidator(_printable)]
Size = Annotated[int, Field(ge=0, le=_MAX_SIZE)]
Count = Annotated[int, Field(ge=0, le=2**31)]
# An allocation ratio a host reports (Placement keeps one per resource provider)
Ratio = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]
# A metadata or extra-spec value: Nova's 255 characters, possibly empty
MetaValue = Annotated[str, Field(max_length=255), AfterValidator(_printable)]


# -- Nova's hypervisor vocabulary (nova/objects/fields.py, Nova 34.0.0) -------------
# What an image may ask of a hypervisor and what a host says it runs are both
# made canonical when validated (Nova's Architecture, HVType and VMMode
# ``canonicalize``), so the filters compare plain strings.
ARCHITECTURES = (
    "alpha", "armv6", "armv7l", "armv7b", "aarch64", "cris", "i686", "ia64", "lm32",
    "m68k", "microblaze", "microblazeel", "mips", "mipsel", "mips64", "mips64el",
    "openrisc", "parisc", "parisc64", "ppc", "ppcle", "ppc64", "ppc64le", "ppcemb",
    "s390", "s390x", "sh4", "sh4eb", "sparc", "sparc64", "unicore32", "x86_64",
    "xtensa", "xtensaeb",
)  # fmt: skip
HV_TYPES = (
    "baremetal", "bhyve", "docker", "fake", "hyperv", "ironic", "kqemu", "kvm", "lxc",
    "lxd", "openvz", "parallels", "phyp", "qemu", "test", "uml", "vbox", "vz", "vmware",
    "xen", "zvm", "prsm",
)  # fmt: skip
VM_MODES = ("hvm", "xen", "uml", "exe")
# the old names Nova still reads, each as its canonical one
_ARCH_ALIASES = {
    "i386": "i686", "i486": "i686", "i586": "i686", "x86_32": "i686", "x86_32p": "i686",
    "amd64": "x86_64",
}  # fmt: skip
_HV_ALIASES = {"xapi": "xen"}
_VM_ALIASES = {"pv": "xen", "hv": "hvm", "baremetal": "hvm"}
_VOCABULARY = {
    "architecture": (ARCHITECTURES, _ARCH_ALIASES),
    "hypervisor type": (HV_TYPES, _HV_ALIASES),
    "vm mode": (VM_MODES, _VM_ALIASES),
}


def canonical(kind: str, name: str) -> str:
    """Nova's canonical name of an architecture, hypervisor type or vm mode
    (``kind`` as in ``_VOCABULARY``); ValueError for a name Nova does not know.

    >>> canonical("architecture", "AMD64"), canonical("vm mode", "pv")
    ('x86_64', 'xen')
    """
    known, aliases = _VOCABULARY[kind]
    low = name.lower()
    low = aliases.get(low, low)
    if low not in known:
        raise ValueError(f"{name!r} is not one of Nova's {kind} names {list(known)}")
    return low


def _hv_spec(triple: list[str]) -> list[str]:
    arch, hv_type, vm_mode = triple
    return [
        canonical("architecture", arch),
        canonical("hypervisor type", hv_type),
        canonical("vm mode", vm_mode),
    ]


# a hypervisor version predicate (Nova's img_hv_requested_version): one or
# more comparisons, comma-separated, of dotted numbers
_PREDICATE = re.compile(r"^\s*(<=|>=|<|>|!=|==)\s*[vV]?(\d+(?:\.\d+)*)\s*$")
VersionPredicate = tuple[tuple[str, tuple[int, ...]], ...]


def release(numbers: Iterable[int]) -> tuple[int, ...]:
    """A version's numbers as compared (PEP 440: ``6.0`` is ``6``, trailing zeros go)."""
    parts = list(numbers)
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def version_predicate(text: str) -> VersionPredicate:
    """The comparisons of ``text`` (oslo's ``VersionPredicate``: ``">=6.0,<6.2"``),
    each an operator and a release; ValueError for what is not one.

    Versions are dotted numbers (what ``hypervisor_version`` can be); a
    pre-, post- or dev-release (``6.2rc1``) is refused by name.

    >>> version_predicate(">=6.0, <6.2")
    (('>=', (6,)), ('<', (6, 2)))
    """
    out: list[tuple[str, tuple[int, ...]]] = []
    for part in text.split(","):
        found = _PREDICATE.match(part)
        if found is None:
            raise ValueError(
                f"{part.strip()!r} of {text!r} is not a comparison (<, <=, ==, !=, >=, >) "
                "with a dotted version such as 6.0; comma-separate several"
            )
        out.append((found.group(1), release(map(int, found.group(2).split(".")))))
    return tuple(out)


# The image properties ImagePropertiesFilter reads (Nova 34, image_props_filter.py),
# made canonical and checked in RequestSpec.image_properties (which takes any other
# property too, as text: AggregateImagePropertiesIsolation compares any of them)
IMAGE_PROPERTIES = (
    "hw_architecture",
    "img_hv_type",
    "hw_vm_mode",
    "img_hv_requested_version",
    "hw_maxphysaddr_bits",
)
_IMAGE_VOCABULARY = {
    "hw_architecture": "architecture",
    "img_hv_type": "hypervisor type",
    "hw_vm_mode": "vm mode",
}


def _image_properties(props: dict[str, str]) -> dict[str, str]:
    # canonical names, as Nova's ImageMetaProps coerces them; the rest checked
    out = dict(props)
    for key, kind in _IMAGE_VOCABULARY.items():
        if key in out:
            out[key] = canonical(kind, out[key])
    predicate = out.get("img_hv_requested_version")
    if predicate is not None:
        version_predicate(predicate)
    bits = out.get("hw_maxphysaddr_bits")
    if bits is not None and not (bits.isascii() and bits.isdigit()):
        raise ValueError(f"hw_maxphysaddr_bits {bits!r} must be a whole number of bits, e.g. 42")
    return out


def _architecture(name: str | None) -> str | None:
    if name is not None and name not in ARCHITECTURES:
        raise ValueError(
            f"image_properties_default_architecture {name!r} is not one of Nova's "
            f"architectures {list(ARCHITECTURES)}"
        )
    return name


def _repeated(values: list[str]) -> set[str]:
    seen: set[str] = set()
    dupes: set[str] = set()
    for v in values:
        (dupes if v in seen else seen).add(v)
    return dupes


def _unique(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError(f"instance_uuids must be unique; repeated: {sorted(_repeated(values))}")
    return values


def _unique_instances(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError(
            f"instances must list each uuid once; repeated: {sorted(_repeated(values))}"
        )
    return values


# The default of a list field: a fresh empty list per instance from a factory
# (pydantic deep-copies a plain ``= []`` default for every instance, several
# microseconds a model), still shown as ``[]`` in the JSON schema.
def _empty_list() -> Any:
    return Field(default_factory=list, json_schema_extra={"default": []})


# A host's supported instances: an [architecture, hypervisor type, vm mode] triple
HVSpec = Annotated[list[Name], Field(min_length=3, max_length=3), AfterValidator(_hv_spec)]
_MAX_HV_SPECS = 64
_MAX_CPU_INFO = 16_384  # characters of cpu_info's JSON text
_MAX_STATS = 256
_MAX_IMAGE_PROPERTIES = 256  # Nova's ImageMetaProps has fewer fields
_MAX_METRICS = 256  # a compute's monitors report a few dozen
_MAX_QUERY = 16_384  # characters of a JsonFilter query's JSON text


class _Message(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# a unit of an allocation: at least 1 (Placement's min_unit, max_unit, step_size)
Unit = Annotated[int, Field(ge=1, le=_MAX_SIZE)]


def _zero(value: int) -> bool:
    return value == 0


def _none(value: object) -> bool:
    return value is None


def _empty(value: object) -> bool:
    return not value


# a metric's value (Nova's MonitorMetric.value): finite, within what float64
# sums of a few weighted metrics hold exactly enough to order hosts
MetricValue = Annotated[float, Field(ge=-1e15, le=1e15, allow_inf_nan=False)]


class Units(_Message):
    """What one allocation of a resource class may ask of a host, as Placement's
    inventory of that class says (``min_unit``, ``max_unit``, ``step_size``).

    An allocation of ``amount`` (more than 0) is allowed when ``min_unit <= amount
    <= max_unit`` and ``amount`` is a multiple of ``step_size``; ``max_unit``
    None is the class's total (Nova's default). A request asking 0 of a class
    asks nothing of it, so these rules do not apply to it.

    >>> Units(min_unit=2, step_size=2).max_unit is None
    True
    """

    min_unit: Unit = 1
    max_unit: Unit | None = None  # None: the total of the class
    step_size: Unit = 1

    @model_validator(mode="after")
    def _ordered(self) -> Units:
        if self.max_unit is not None and self.min_unit > self.max_unit:
            raise ValueError(
                f"min_unit {self.min_unit} is above max_unit {self.max_unit}: no "
                "allocation could be made; Placement refuses such an inventory"
            )
        return self


class HostReport(_Message):
    """What a compute node says about itself (Nova's ``update_from_compute_node``).

    ``generation`` must grow with every report of a host; a report whose
    generation is not above the last applied one is stale and ignored.
    ``instances`` lists the instance uuids the node runs: a claim stays
    assumed until its instance shows up here. ``node`` is the hypervisor
    node's name (Nova's ``nodename``, what ``force_nodes`` and
    ``requested_destination`` match), the host's own name when None; a
    host has one node (a host of many, as Ironic's, reports each as a host).

    >>> HostReport(host="node1", generation=1, memory_mb=4096, memory_mb_used=0,
    ...            vcpus=4, vcpus_used=0, local_gb=100, local_gb_used=0).host
    'node1'
    """

    host: Name
    generation: Annotated[int, Field(ge=0, le=2**62)]
    memory_mb: Size
    memory_mb_used: Size
    memory_mb_reserved: Size = 0
    vcpus: Count
    vcpus_used: Count
    local_gb: Size
    local_gb_used: Size
    # what each class keeps back for the host itself, as Placement's inventory
    # ``reserved`` (capacity is (total - reserved) x ratio); left out of the JSON
    # when 0, so a report without them is written as before
    vcpus_reserved: Count = Field(0, exclude_if=_zero)
    local_gb_reserved: Size = Field(0, exclude_if=_zero)
    # each class's allocation rules (Placement's min_unit, max_unit, step_size);
    # None: Placement's defaults (1, the total, 1), left out of the JSON
    memory_mb_units: Units | None = Field(None, exclude_if=_none)
    vcpus_units: Units | None = Field(None, exclude_if=_none)
    local_gb_units: Units | None = Field(None, exclude_if=_none)
    availability_zone: Name | None = None
    enabled: bool = True
    traits: Annotated[list[Name], Field(max_length=1_000)] = _empty_list()
    instances: Annotated[
        list[Name], Field(max_length=_MAX_LIST), AfterValidator(_unique_instances)
    ] = _empty_list()
    num_io_ops: Count = 0
    # this host's own allocation ratios (None: the configured one), as
    # Placement keeps them per resource provider
    ram_allocation_ratio: Ratio | None = None
    cpu_allocation_ratio: Ratio | None = None
    disk_allocation_ratio: Ratio | None = None
    # the hypervisor node (Nova's nodename); None: the node is named as the host
    node: Name | None = None
    # What the hypervisor is and runs (Nova's compute node fields of these
    # names), read by ComputeCapabilitiesFilter and ImagePropertiesFilter; most
    # hosts of a fleet report the same, and the core keeps each distinct set
    # once. ``supported_instances``: [architecture, hypervisor type, vm mode]
    # triples, made canonical ("amd64" is "x86_64"); ``cpu_info``: the JSON
    # text Nova's compute reports; ``stats``: Nova's compute node stats.
    hypervisor_type: Name | None = None
    hypervisor_version: Annotated[int, Field(ge=0, le=2**62)] | None = None
    supported_instances: Annotated[list[HVSpec], Field(max_length=_MAX_HV_SPECS)] = _empty_list()
    cpu_info: Annotated[str, Field(max_length=_MAX_CPU_INFO)] | None = None
    stats: Annotated[dict[Name, MetaValue], Field(max_length=_MAX_STATS)] = Field(
        default_factory=dict, json_schema_extra={"default": {}}
    )
    # Nova's HostState.failed_builds: the builds that failed on the host since
    # its last success (Nova's compute keeps the count in its stats, a success
    # resets it; with 0 here, a ``failed_builds`` stat is read, as Nova's
    # HostState does), read by BuildFailureWeigher; and its monitors' metrics by name
    # (Nova's compute node metrics), read by MetricsFilter and MetricsWeigher.
    # Both are facts (kept once per distinct value), left out of the JSON when
    # at their defaults
    failed_builds: Count = Field(0, exclude_if=_zero)
    metrics: Annotated[dict[Name, MetricValue], Field(max_length=_MAX_METRICS)] = Field(
        default_factory=dict, json_schema_extra={"default": {}}, exclude_if=_empty
    )

    @model_validator(mode="after")
    def _reserved_within_total(self) -> HostReport:
        # memory_mb_reserved is not checked: reports have carried any value of it
        if self.vcpus_reserved > self.vcpus or self.local_gb_reserved > self.local_gb:
            field, reserved, total, name = (
                ("vcpus_reserved", self.vcpus_reserved, self.vcpus, "vcpus")
                if self.vcpus_reserved > self.vcpus
                else ("local_gb_reserved", self.local_gb_reserved, self.local_gb, "local_gb")
            )
            raise ValueError(
                f"{field} {reserved} is above {name} {total}: a host cannot keep back "
                f"more than it has (Placement refuses reserved > total)"
            )
        return self


class ServerGroup(_Message):
    """A server group and its policy; ``id`` is shared by every request of the group.

    The members' hosts are those of the claims actorsched holds for the group
    plus ``hosts``: the host of each member actorsched did not place (Nova's
    ``instance_group.hosts``), one entry per member, so a host named twice
    holds two. Do not list members actorsched holds claims for: they would
    count twice. ``max_server_per_host`` (Nova's rule of API 2.64, only with
    ``anti-affinity``): a host may hold up to that many members; unset, one.

    ``members`` (Nova's ``instance_group.members``, instance uuids) counts
    them as Nova's anti-affinity filter and soft weighers do instead: each
    member once, on the host that holds its claim or else lists it, and
    ``hosts`` then only bounds hard affinity (Nova's affinity filter reads
    them), whatever the claims.

    >>> ServerGroup(id="g", policy="anti-affinity", max_server_per_host=2).max_server_per_host
    2
    """

    id: Name
    policy: Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]
    max_server_per_host: Annotated[int, Field(ge=1, le=2**31)] | None = None
    hosts: Annotated[list[Name], Field(max_length=_MAX_LIST)] = _empty_list()
    members: Annotated[list[Name], Field(max_length=_MAX_LIST)] = _empty_list()

    @model_validator(mode="after")
    def _rule_needs_anti_affinity(self) -> ServerGroup:
        if self.max_server_per_host is not None and self.policy != "anti-affinity":
            raise ValueError(
                f"max_server_per_host is a rule of the anti-affinity policy only (Nova "
                f"API 2.64), not of {self.policy!r}: drop it, or use policy 'anti-affinity'"
            )
        return self


class Destination(_Message):
    """Where a request must go (Nova's ``requested_destination``): a host, a node, or both.

    Unlike ``force_hosts``, the filters still run on it.

    >>> Destination(host="node1").node is None
    True
    """

    host: Name | None = None
    node: Name | None = None

    @model_validator(mode="after")
    def _names_something(self) -> Destination:
        if self.host is None and self.node is None:
            raise ValueError("requested_destination names neither a host nor a node: give one")
        return self


class RequestSpec(_Message):
    """A request to place one or more instances of one flavor (Nova's ``RequestSpec``).

    Placing is all or nothing: every instance gets a host or none does.
    ``same_host``/``different_host`` are Nova's scheduler hints (instance
    uuids); ``ignore_hosts`` names hosts never to pick, in any case (``"Node1"``
    ignores ``node1``, as Nova's host manager matches them).

    ``force_hosts`` (in any case, as ``ignore_hosts``) and ``force_nodes``
    (node names, exact) restrict the request to those hosts and skip every
    filter, as Nova does; with both, a host must match both. actorsched
    never over-commits: a forced host must still have room for the
    resources asked (as Placement's claim refuses one without). Ignored
    hosts are taken out first. ``requested_destination`` restricts the
    request to one host and/or node (exact names) and the filters still run.
    """

    instance_uuids: Annotated[
        list[Name], Field(min_length=1, max_length=1_000), AfterValidator(_unique)
    ]
    memory_mb: Size
    vcpus: Count
    disk_gb: Size
    availability_zone: Name | None = None
    required_traits: Annotated[list[Name], Field(max_length=1_000)] = _empty_list()
    forbidden_traits: Annotated[list[Name], Field(max_length=1_000)] = _empty_list()
    group: ServerGroup | None = None
    same_host: Annotated[list[Name], Field(max_length=_MAX_LIST)] = _empty_list()
    different_host: Annotated[list[Name], Field(max_length=_MAX_LIST)] = _empty_list()
    ignore_hosts: Annotated[list[Name], Field(max_length=_MAX_LIST)] = _empty_list()
    # the flavor's name and extra specs, and the requesting project (Nova's
    # spec_obj.flavor.name, flavor.extra_specs and project_id): read by the
    # aggregate filters only
    flavor_name: Name | None = None
    extra_specs: Annotated[dict[Name, MetaValue], Field(max_length=256)] = Field(
        default_factory=dict, json_schema_extra={"default": {}}
    )
    project_id: Name | None = None
    # the image's properties (Nova's ImageMetaProps), each as its text (Nova's
    # ``str(prop)``): ImagePropertiesFilter reads IMAGE_PROPERTIES, their names made
    # canonical as Nova's ("pv" is "xen"); AggregateImagePropertiesIsolation any key
    # an aggregate has. A property Nova holds as false (0, "", False) is left out.
    image_properties: Annotated[
        dict[Name, MetaValue],
        Field(max_length=_MAX_IMAGE_PROPERTIES),
        AfterValidator(_image_properties),
    ] = Field(default_factory=dict, json_schema_extra={"default": {}})
    # the image's id (Nova's spec_obj.image.id; None: a boot from volume without
    # one), read by IsolatedHostsFilter
    image_id: Name | None = None
    # the ``query`` scheduler hint: JsonFilter's query, as JSON text
    query: Annotated[str, Field(max_length=_MAX_QUERY)] | None = None
    force_hosts: Annotated[list[Name], Field(max_length=_MAX_LIST)] = _empty_list()
    force_nodes: Annotated[list[Name], Field(max_length=_MAX_LIST)] = _empty_list()
    requested_destination: Destination | None = None
    # issue 16: how urgent (higher first, among waiting requests) and how long
    # a request that fits nowhere may wait, inside the owner, for room (None or
    # 0: it raises NoValidHost at once). Neither changes what is asked: they are
    # not in the fingerprint, and a repeat with another value is the same request.
    priority: int = Field(0, ge=-1_000_000, le=1_000_000)
    wait: float | None = Field(None, ge=0, le=MAX_WAIT)
    # who placed it: on the bus, the broker user that sent it (the service sets it
    # from the message's user_id and replaces what a caller wrote); None embedded.
    # A tenant releases, moves and reads only its own claims. Not what is asked:
    # not in the fingerprint (a repeat by another owner is refused, not re-placed).
    owner: Name | None = None


class Selection(_Message):
    """The host chosen for one instance, the next best hosts to retry on, and the
    claims its placement released to make room (``preempted``, left out when none)."""

    instance_uuid: Name
    host: Name
    alternates: list[Name] = _empty_list()
    # the claims this placement released to make room (SchedulerConfig.preemption):
    # the caller evicts these instances
    # (left out of the JSON when empty: a reply without preemption is as before)
    preempted: Annotated[list[Name], Field(max_length=MAX_PREEMPTION_VICTIMS)] = Field(
        default_factory=list, json_schema_extra={"default": []}, exclude_if=lambda v: not v
    )


class HostState(_Message):
    """A read-only snapshot of one host, as the scheduler counts it.

    ``free_ram_mb`` is memory_mb - memory_mb_reserved - memory_mb_used -
    claimed-not-yet-reported + released-still-reported, with no allocation
    ratio applied (as Nova's ``free_ram_mb``); ``free_disk_gb`` likewise with
    local_gb_reserved, and ``vcpus_used`` is the reported, claimed and
    released vCPUs alone (the reserved ones are not used: Nova's
    ``vcpus_used``, which its CPUWeigher reads).
    """

    host: Name
    node: str  # the hypervisor node; the host's name unless its report names another
    generation: int
    enabled: bool
    availability_zone: str | None
    traits: list[str]
    memory_mb: int
    memory_mb_reserved: int
    vcpus_reserved: int = 0
    local_gb_reserved: int = 0
    free_ram_mb: int
    local_gb: int
    free_disk_gb: int
    vcpus_total: int
    vcpus_used: int
    num_instances: int
    num_io_ops: int
    assumed_claims: int
    reported_at: float
    # the ratios the resource filters and the CPU weigher use for this host:
    # an aggregate's (Aggregate*Filter on), else the host's own, else the config's
    ram_allocation_ratio: float
    cpu_allocation_ratio: float
    disk_allocation_ratio: float
    aggregates: list[str] = _empty_list()  # the host aggregates it is in, by name


class Aggregate(_Message):
    """A host aggregate: a named set of hosts with string metadata (Nova's aggregate).

    A host may be in any number of aggregates, and an aggregate may name a
    host that has not reported yet. ``availability_zone`` metadata puts its
    hosts in that zone; ``*_allocation_ratio``, ``filter_tenant_id``,
    ``instance_type`` and other keys are read by the Aggregate* filters.

    >>> Aggregate(name="ssd", hosts=["n1"], metadata={"ssd": "true"}).hosts
    ['n1']
    """

    name: Name
    hosts: list[Name]
    metadata: dict[Name, MetaValue]


# Metadata keys one admin message may carry (the scheduler's own bound,
# max_aggregate_metadata, is checked when it is applied), and hosts.
_MAX_METADATA = 1_000
_MAX_AGGREGATE_HOSTS = 100_000
Metadata = Annotated[dict[Name, MetaValue | None], Field(max_length=_MAX_METADATA)]


class CreateAggregateRequest(_Message):
    """Create a host aggregate (``create_aggregate``); a None metadata value is left out."""

    name: Name
    metadata: Metadata = Field(default_factory=dict, json_schema_extra={"default": {}})
    hosts: Annotated[list[Name], Field(max_length=_MAX_AGGREGATE_HOSTS)] = _empty_list()


class UpdateAggregateRequest(_Message):
    """Merge metadata into an aggregate's (``update_aggregate``); None deletes a key."""

    name: Name
    metadata: Metadata


class AggregateNameRequest(_Message):
    """Name one host aggregate (``delete_aggregate``)."""

    name: Name


class AggregateHostRequest(_Message):
    """A host and an aggregate (``add_host_to_aggregate``, ``remove_host_from_aggregate``)."""

    name: Name
    host: Name


class AggregatesRequest(_Message):
    """List every host aggregate (``aggregates``): an empty body, ``{}``."""


BUILTIN_FILTERS: tuple[str, ...] = (
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
)


# Built-in, not enabled by default (as in Nova): the host aggregate filters.
AGGREGATE_FILTERS: tuple[str, ...] = (
    "AggregateInstanceExtraSpecsFilter",
    "AggregateMultiTenancyIsolation",
    "AggregateTypeAffinityFilter",
    "AggregateRamFilter",
    "AggregateCoreFilter",
    "AggregateDiskFilter",
)
# Built-in, not enabled by default (Nova 34's defaults have both; a nova.conf
# enables them): the filters of what a hypervisor is and runs, read from the
# host reports' hypervisor_type, hypervisor_version, supported_instances,
# cpu_info and stats. Not default here: ComputeCapabilitiesFilter reads an
# unscoped extra spec named as one of Nova's HostState attributes (host,
# free_ram_mb ...), so a request that sends one for the aggregates would be
# filtered by it where it was not.
HOST_FACTS_FILTERS: tuple[str, ...] = ("ComputeCapabilitiesFilter", "ImagePropertiesFilter")
# Built-in, not enabled by default (nor by Nova's defaults: a nova.conf's
# enabled_filters names them): the per-aggregate instance and I/O limits, the
# isolation of images to hosts and to aggregates, the query scheduler hint, and
# the hosts that report every metric metrics_weight_setting names.
OPTIONAL_FILTERS: tuple[str, ...] = (
    "AggregateNumInstancesFilter",
    "AggregateIoOpsFilter",
    "IsolatedHostsFilter",
    "AggregateImagePropertiesIsolation",
    "JsonFilter",
    "MetricsFilter",
)


def _known_filters(names: list[str]) -> list[str]:
    known = (*BUILTIN_FILTERS, *AGGREGATE_FILTERS, *HOST_FACTS_FILTERS, *OPTIONAL_FILTERS)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown filter(s) {unknown}; built-in filters are {list(known)} "
            "(custom filters are passed to Scheduler(filters=...))"
        )
    return names


def _pairs(value: Any) -> Any:
    """Each ``[name, number]`` array of a list as the pair it stands for."""
    if isinstance(value, list):
        return [tuple(item) if isinstance(item, list) else item for item in value]
    return value


class SchedulerConfig(BaseModel):
    """Tunables, named and defaulted as in Nova's ``[filter_scheduler]`` section.

    >>> SchedulerConfig(cpu_allocation_ratio=16.0).ram_allocation_ratio
    1.0
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    ram_allocation_ratio: float = Field(1.0, gt=0, description="RAM overcommit")
    cpu_allocation_ratio: float = Field(4.0, gt=0, description="vCPU overcommit")
    disk_allocation_ratio: float = Field(1.0, gt=0, description="disk overcommit")
    enabled_filters: Annotated[list[str], AfterValidator(_known_filters)] = Field(
        list(BUILTIN_FILTERS), description="comma-separated filter names"
    )
    ram_weight_multiplier: float = Field(
        1.0, description="RAMWeigher's multiplier: more free RAM first (negative: stack)"
    )
    cpu_weight_multiplier: float = Field(
        1.0, description="CPUWeigher's multiplier: more free vCPUs first (negative: stack)"
    )
    disk_weight_multiplier: float = Field(
        1.0, description="DiskWeigher's multiplier: more free disk first (negative: stack)"
    )
    io_ops_weight_multiplier: float = Field(
        -1.0, description="IoOpsWeigher's multiplier: negative puts hosts with fewer I/O ops first"
    )
    num_instances_weight_multiplier: float = Field(
        0.0, description="NumInstancesWeigher's multiplier: positive puts hosts with more first"
    )
    soft_affinity_weight_multiplier: float = Field(
        1.0, ge=0, description="ServerGroupSoftAffinityWeigher's multiplier"
    )
    soft_anti_affinity_weight_multiplier: float = Field(
        1.0, ge=0, description="ServerGroupSoftAntiAffinityWeigher's multiplier"
    )
    host_subset_size: int = Field(1, ge=1, description="pick at random among this many best hosts")
    shuffle_best_same_weighed_hosts: bool = Field(
        False,
        description="shuffle the hosts of equal best weight before the subset choice (Nova Rocky)",
    )
    max_attempts: int = Field(3, ge=1, description="the chosen host and its alternates")
    # NumInstancesFilter's and IoOpsFilter's limits, and AggregateNumInstancesFilter's
    # and AggregateIoOpsFilter's where a host's aggregates set none (as a metadata key
    # of the same name)
    max_io_ops_per_host: int = Field(
        8, ge=0, description="IoOpsFilter's limit of I/O-heavy operations (builds, moves) on a host"
    )
    max_instances_per_host: int = Field(
        50, ge=0, description="NumInstancesFilter's limit of instances on a host"
    )
    service_down_time: float = Field(
        60.0, gt=0, description="seconds of silence after which a host is down"
    )
    default_availability_zone: Name = Field(
        "nova",
        description="the zone of a host that reports none (Nova's [DEFAULT] "
        "default_availability_zone)",
    )
    image_properties_default_architecture: Annotated[Name | None, AfterValidator(_architecture)] = (
        Field(
            None,
            description="the architecture ImagePropertiesFilter asks for an image that names none",
        )
    )
    # IsolatedHostsFilter (Nova's [filter_scheduler] options of these names)
    isolated_images: Annotated[
        list[Name],
        Field(
            max_length=_MAX_LIST,
            description="IsolatedHostsFilter: the images that may go to the isolated hosts only",
        ),
    ] = _empty_list()
    isolated_hosts: Annotated[
        list[Name],
        Field(max_length=_MAX_LIST, description="IsolatedHostsFilter: the isolated hosts"),
    ] = _empty_list()
    restrict_isolated_hosts_to_isolated_images: bool = Field(
        True, description="IsolatedHostsFilter: the isolated hosts take the isolated images only"
    )
    # Nova 34's request filters ([scheduler] in nova.conf): a project's hosts are
    # its aggregates' (filter_tenant_id* = the project) and, when required, a
    # project without any gets none; an aggregate with trait:X=required takes only
    # requests that require X
    limit_tenants_to_placement_aggregate: bool = Field(
        False, description="a project's hosts are those of its aggregates (filter_tenant_id*)"
    )
    placement_aggregate_required_for_tenants: bool = Field(
        False,
        description="with limit_tenants_to_placement_aggregate: a project in none gets no host",
    )
    enable_isolated_aggregate_filtering: bool = Field(
        False,
        description="an aggregate with trait:X=required takes only requests that require X",
    )
    # AggregateImagePropertiesIsolation: only the aggregate metadata keys that start
    # with the namespace and the separator are compared (no namespace: every key)
    aggregate_image_properties_isolation_namespace: Name | None = Field(
        None,
        description="AggregateImagePropertiesIsolation compares only the metadata keys "
        "in this namespace (none: every key)",
    )
    aggregate_image_properties_isolation_separator: Annotated[str, Field(max_length=255)] = Field(
        ".", description="AggregateImagePropertiesIsolation: between the namespace and the key"
    )
    # 0, off, by default, as Nova 18 had no such weigher; a nova.conf sets Nova 34's (1.0)
    hypervisor_version_weight_multiplier: float = Field(
        0.0, description="HypervisorVersionWeigher's multiplier: newer hypervisors first"
    )
    # Nova's default: hosts with recent failed builds last; its weight is
    # -failed_builds normalized, times this
    build_failure_weight_multiplier: float = Field(
        1_000_000.0, description="BuildFailureWeigher's multiplier: hosts with failed builds last"
    )
    # Nova's [metrics] options: (metric, ratio) pairs in order, a name possibly
    # twice (MetricsFilter passes the hosts that report every name; MetricsWeigher
    # weighs the sum of value x ratio), MetricsWeigher's multiplier, whether a
    # weighed host without one of them fails the request (InvalidRequest) or
    # weighs weight_of_unavailable
    metrics_weight_setting: Annotated[
        list[tuple[Name, Annotated[float, Field(allow_inf_nan=False)]]],
        Field(
            max_length=_MAX_METRICS,
            description="MetricsWeigher's (metric, ratio) pairs, in order ([metrics] "
            "weight_setting)",
        ),
        BeforeValidator(_pairs),  # a TOML file or JSON gives each pair as an array
    ] = _empty_list()
    metrics_weight_multiplier: float = Field(1.0, description="MetricsWeigher's multiplier")
    metrics_required: bool = Field(
        True,
        description="a weighed host without a metric fails the request (else it weighs "
        "metrics_weight_of_unavailable)",
    )
    metrics_weight_of_unavailable: float = Field(
        -10_000.0, description="the weight of a host without a metric, when not required"
    )
    # ImagePropertiesWeigher (Nova's [filter_scheduler] image_props_weight_*): 0, its
    # default, builds no weigher; else a host weighs the instances it holds whose
    # image shares a property (name and value) with the request's, each property
    # weighed by its ratio in the setting (every one 1.0 when the setting is empty;
    # a name given twice: the last ratio, as Nova's dict of them)
    image_props_weight_multiplier: float = Field(
        0.0,
        description="ImagePropertiesWeigher's multiplier: hosts of instances with the same "
        "image properties (0: off)",
    )
    image_props_weight_setting: Annotated[
        list[tuple[Name, Annotated[float, Field(allow_inf_nan=False)]]],
        Field(
            max_length=_MAX_IMAGE_PROPERTIES,
            description="ImagePropertiesWeigher's (property, ratio) pairs (empty: each 1.0)",
        ),
        BeforeValidator(_pairs),
    ] = _empty_list()
    claim_timeout: float = Field(600.0, gt=0, description="seconds an unreported claim is held")
    # what the state may hold: past these, a report or a request is refused with
    # InvalidRequest naming the bound (memory grows with each, and never past it)
    max_hosts: int = Field(1_000_000, ge=1, description="hosts the state may hold")
    max_claims: int = Field(5_000_000, ge=1, description="live claims the state may hold")
    max_traits: int = Field(1_024, ge=1, description="distinct trait names ever reported")
    max_zones: int = Field(1_024, ge=1, description="distinct availability zones ever reported")
    max_aggregates: int = Field(1_000, ge=0, description="host aggregates at once")
    max_aggregate_hosts: int = Field(100_000, ge=1, description="hosts named by one aggregate")
    max_aggregate_members: int = Field(
        1_000_000,
        ge=1,
        description="host memberships of every aggregate together (a host in 3 counts 3)",
    )
    max_aggregate_metadata: int = Field(64, ge=0, description="metadata keys of one aggregate")
    mailbox_size: int = Field(1024, ge=1, description="the owner's bounded mailbox")
    # past max_waiting, submit() raises MailboxFull and awaiting callers wait unsent
    max_waiting: int = Field(
        1024, ge=0, description="messages that may wait for room while the mailbox is full"
    )
    max_batch: int = Field(256, ge=1, description="messages the owner handles per wake-up")
    # past max_waiting_requests, one that fits nowhere raises NoValidHost at once,
    # saying the waiting line is full
    max_waiting_requests: int = Field(
        1_000, ge=0, description="placement requests that may wait for room (RequestSpec.wait)"
    )
    # priority and preemption (issue 16): a request that fits nowhere may free
    # one host by releasing claims of a priority lower than its own by at least
    # preemption_min_priority_delta, at most max_preemption_victims of them
    preemption: bool = Field(
        False,
        description="a request that fits nowhere may free a host of lower-priority claims",
    )
    preemption_min_priority_delta: int = Field(
        1, ge=1, description="how much lower a victim's priority must be than the request's"
    )
    max_preemption_victims: int = Field(
        64, ge=1, le=MAX_PREEMPTION_VICTIMS, description="claims one preemption may release"
    )
    # kube's minCandidateNodesAbsolute: the bound on a preemption's work in the owner
    preemption_candidates: int = Field(
        100, ge=1, description="candidate hosts a preemption weighs before it picks the best"
    )
    seed: int | None = Field(
        None, description="seed of the random choices among equal hosts (none: unseeded)"
    )
    # which Nova release's rules where Nova 18 and Nova 34 differ: a weight below its
    # weigher's minval (18: lowers the low end to itself; 34: counts as the minval), the
    # zone asked (18: AvailabilityZoneFilter, zoneless hosts in the default zone; 34:
    # the request filter map_az_to_placement_aggregate), AggregateMultiTenancyIsolation's
    # keys (18: filter_tenant_id; 34: every filter_tenant_id* key), a class asked 0 of
    # (34: asks nothing of it), a host reporting 0 vCPUs (18: CoreFilter passes it; 34:
    # no inventory, takes no vCPU), a numeric extra spec against a value that is not a
    # number (18: no match; 34: InvalidRequest), a later instance of a multi-create (34:
    # weighed beside the hosts the earlier ones filled, as Nova 34's _schedule weighs
    # Placement's candidates for one instance). A nova.conf read sets 34.
    nova_release: Literal[18, 34] = Field(
        18, description="whose rules where Nova 18 and 34 differ (a nova.conf read sets 34)"
    )
