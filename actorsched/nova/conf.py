"""nova.conf read as Nova 34 reads it: the options that decide placement, and the broker.

Rules this module keeps:

* The file is oslo.config's INI: ``[DEFAULT]`` is a section like the others
  (not configparser's defaults for every section), a repeated option keeps
  its last value, list options are comma-separated, booleans are oslo's
  words (true/false, yes/no, on/off, 1/0), ``#`` and ``;`` start comments.
* Nova 34's defaults apply where the file is silent (:data:`DEFAULTS`,
  checked against Nova 34.0.0's ``nova/conf`` by a test in Nova's venv).
* Each option becomes an actorsched setting with the file as its source, so
  ``actorsched config`` shows ``nova.conf PATH [filter_scheduler] X``.
* What changes scheduling and that actorsched does not build is named in
  :attr:`NovaConfig.warnings`, never ignored silently: the filters in one
  line, the options in another (each with its value and why it has no
  effect); so are Nova 18's filters, which Nova 34 no longer has.
* In Nova 34, RAM, vCPU and disk, the zone and traits are Placement's
  decision: actorsched always enables its own filters for them (each
  host's own allocation ratio, as a resource provider's inventory has it).
* A nova.conf is Nova 34's (``nova_release`` 34: Nova 34's rules hold where
  Nova 18's differ, ``SchedulerConfig.nova_release``), unless its
  ``enabled_filters`` names a filter only Nova 18 had (RamFilter,
  AvailabilityZoneFilter ...): a configuration written for Nova 18 keeps
  Nova 18's rules, and a warning says so.
"""

from __future__ import annotations

import configparser
import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..logs import redact
from ..models import ARCHITECTURES

__all__ = [
    "DEFAULTS",
    "NovaConfig",
    "NovaConfigError",
    "PlacementAuth",
    "read",
]


class NovaConfigError(ValueError):
    """A nova.conf that cannot be read, or a value Nova itself would refuse; one line."""


# Nova 34.0.0's defaults of what actorsched reads (nova/conf/scheduler.py,
# compute.py; oslo.messaging's control_exchange as nova/rpc.py sets it)
DEFAULTS: Mapping[tuple[str, str], Any] = {
    ("DEFAULT", "transport_url"): None,
    ("DEFAULT", "control_exchange"): "nova",
    ("DEFAULT", "host"): None,  # socket.gethostname()
    ("DEFAULT", "cpu_allocation_ratio"): None,
    ("DEFAULT", "ram_allocation_ratio"): None,
    ("DEFAULT", "disk_allocation_ratio"): None,
    ("DEFAULT", "initial_cpu_allocation_ratio"): 4.0,
    ("DEFAULT", "initial_ram_allocation_ratio"): 1.0,
    ("DEFAULT", "initial_disk_allocation_ratio"): 1.0,
    ("DEFAULT", "reserved_host_memory_mb"): 512,
    ("DEFAULT", "reserved_host_disk_mb"): 0,
    ("DEFAULT", "reserved_host_cpus"): 0,
    ("filter_scheduler", "enabled_filters"): [
        "ComputeFilter",
        "ComputeCapabilitiesFilter",
        "ImagePropertiesFilter",
        "ServerGroupAntiAffinityFilter",
        "ServerGroupAffinityFilter",
    ],
    ("filter_scheduler", "weight_classes"): ["nova.scheduler.weights.all_weighers"],
    ("filter_scheduler", "ram_weight_multiplier"): 1.0,
    ("filter_scheduler", "cpu_weight_multiplier"): 1.0,
    ("filter_scheduler", "disk_weight_multiplier"): 1.0,
    ("filter_scheduler", "io_ops_weight_multiplier"): -1.0,
    ("filter_scheduler", "num_instances_weight_multiplier"): 0.0,
    ("filter_scheduler", "soft_affinity_weight_multiplier"): 1.0,
    ("filter_scheduler", "soft_anti_affinity_weight_multiplier"): 1.0,
    ("filter_scheduler", "build_failure_weight_multiplier"): 1000000.0,
    ("filter_scheduler", "cross_cell_move_weight_multiplier"): 1000000.0,
    ("filter_scheduler", "hypervisor_version_weight_multiplier"): 1.0,
    ("filter_scheduler", "pci_weight_multiplier"): 1.0,
    ("filter_scheduler", "image_props_weight_multiplier"): 0.0,
    ("filter_scheduler", "image_props_weight_setting"): [],
    ("filter_scheduler", "host_subset_size"): 1,
    ("filter_scheduler", "shuffle_best_same_weighed_hosts"): False,
    ("filter_scheduler", "max_instances_per_host"): 50,
    ("filter_scheduler", "max_io_ops_per_host"): 8,
    ("filter_scheduler", "isolated_images"): [],
    ("filter_scheduler", "isolated_hosts"): [],
    ("filter_scheduler", "restrict_isolated_hosts_to_isolated_images"): True,
    ("filter_scheduler", "aggregate_image_properties_isolation_namespace"): None,
    ("filter_scheduler", "aggregate_image_properties_isolation_separator"): ".",
    ("filter_scheduler", "image_properties_default_architecture"): None,
    ("filter_scheduler", "track_instance_changes"): True,
    ("filter_scheduler", "pci_in_placement"): False,
    ("metrics", "weight_multiplier"): 1.0,
    ("metrics", "weight_setting"): [],
    ("metrics", "required"): True,
    ("metrics", "weight_of_unavailable"): -10000.0,
    ("scheduler", "max_attempts"): 3,
    ("scheduler", "max_placement_results"): 1000,
    ("scheduler", "limit_tenants_to_placement_aggregate"): False,
    ("scheduler", "placement_aggregate_required_for_tenants"): False,
    ("scheduler", "enable_isolated_aggregate_filtering"): False,
    ("scheduler", "query_placement_for_image_type_support"): False,
    ("scheduler", "query_placement_for_routed_network_aggregates"): False,
    ("scheduler", "image_metadata_prefilter"): False,
}
# Nova 18's names of two options (group DEFAULT, before Pike's [filter_scheduler])
_NOVA18_NAMES = {
    ("DEFAULT", "scheduler_default_filters"): ("filter_scheduler", "enabled_filters"),
    ("DEFAULT", "scheduler_weight_classes"): ("filter_scheduler", "weight_classes"),
    ("DEFAULT", "scheduler_host_subset_size"): ("filter_scheduler", "host_subset_size"),
    ("DEFAULT", "scheduler_max_attempts"): ("scheduler", "max_attempts"),
}

# Nova's filters actorsched builds under the same name
_SAME_NAME = (
    "ComputeFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "SameHostFilter",
    "DifferentHostFilter",
    "NumInstancesFilter",
    "IoOpsFilter",
    "AggregateInstanceExtraSpecsFilter",
    "AggregateMultiTenancyIsolation",
    "AggregateTypeAffinityFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "AggregateNumInstancesFilter",
    "AggregateIoOpsFilter",
    "IsolatedHostsFilter",
    "AggregateImagePropertiesIsolation",
    "JsonFilter",
    "MetricsFilter",
)
# gone from Nova (Stein removed the resource filters, 2024.1 the zone filter); kept
# under their names for a configuration written for Nova 18
_REMOVED = (
    "RamFilter",
    "CoreFilter",
    "DiskFilter",
    "AggregateRamFilter",
    "AggregateCoreFilter",
    "AggregateDiskFilter",
    "AvailabilityZoneFilter",
)
# Placement's part of the decision in Nova 34, always on here
PLACEMENT_FILTERS = (
    "RamFilter",
    "CoreFilter",
    "DiskFilter",
    "RequiredTraitsFilter",
    "ForbiddenTraitsFilter",
    "AvailabilityZoneFilter",
)
# passes every host: nothing to build
_NO_OP_FILTERS = ("AllHostsFilter",)
# Nova's weighers that actorsched builds, and the setting of each one's multiplier
_WEIGHERS = {
    "RAMWeigher": "ram_weight_multiplier",
    "CPUWeigher": "cpu_weight_multiplier",
    "DiskWeigher": "disk_weight_multiplier",
    "IoOpsWeigher": "io_ops_weight_multiplier",
    "NumInstancesWeigher": "num_instances_weight_multiplier",
    "ServerGroupSoftAffinityWeigher": "soft_affinity_weight_multiplier",
    "ServerGroupSoftAntiAffinityWeigher": "soft_anti_affinity_weight_multiplier",
    "HypervisorVersionWeigher": "hypervisor_version_weight_multiplier",
    "BuildFailureWeigher": "build_failure_weight_multiplier",
    "MetricsWeigher": "metrics_weight_multiplier",
    "ImagePropertiesWeigher": "image_props_weight_multiplier",
}
# where each multiplier is read: [filter_scheduler] <setting>, but these
_MULTIPLIER_OPTIONS = {"metrics_weight_multiplier": ("metrics", "weight_multiplier")}
# Nova's other weighers: each reads what actorsched's hosts do not report (or is
# not built), so every host weighs the same on it and it changes no order
_NO_OP_WEIGHERS = {
    "CrossCellWeigher": "actorsched serves one cell",
    "PCIWeigher": "hosts report no PCI devices",
}
# and each one's multiplier, which no actorsched setting takes
_NO_OP_MULTIPLIERS = {
    "CrossCellWeigher": "cross_cell_move_weight_multiplier",
    "PCIWeigher": "pci_weight_multiplier",
}
_ALL_WEIGHERS = "all_weighers"
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


# nova.conf's [placement] options of keystoneauth's password plugin that actorsched
# reads (keystoneauth1/loading/_plugins/identity/generic.py Password, the options
# Nova registers with ks_loading.register_auth_conf_options in nova/conf/placement.py)
_PLACEMENT_AUTH_OPTIONS = (
    "auth_type",
    "auth_url",
    "username",
    "user_id",
    "password",
    "user_domain_name",
    "user_domain_id",
    "project_name",
    "project_id",
    "project_domain_name",
    "project_domain_id",
    "default_domain_name",
    "default_domain_id",
    "system_scope",
)
# auth_type values that mean no Keystone (keystoneauth's "none" and "noauth" plugins)
NO_AUTH_TYPES = ("none", "noauth")
PASSWORD_AUTH_TYPES = ("password", "v3password")


@dataclass(frozen=True)
class PlacementAuth:
    """How Nova authenticates to Placement: nova.conf's ``[placement]`` auth options.

    ``auth_type`` None (the section names none) or ``none``/``noauth``: no Keystone
    (actorsched sends ``[nova] placement_token``); ``password`` or
    ``v3password``: a Keystone v3 password authentication at ``auth_url``, scoped
    to the project (or ``system_scope``) given. :meth:`problem` says what is
    missing or not built, in one line.
    """

    auth_type: str | None = None
    options: Mapping[str, str] = field(default_factory=dict, repr=False)  # a password too

    def get(self, option: str) -> str | None:
        """An option as given (None when absent or empty)."""
        return self.options.get(option) or None

    @property
    def keystone(self) -> bool:
        return self.auth_type is not None and self.auth_type.lower() in PASSWORD_AUTH_TYPES

    def domain(self, of: str) -> tuple[str, str] | None:
        """``("id", x)`` or ``("name", x)`` of the user's or project's domain
        (``of``: ``user`` or ``project``), keystoneauth's default_domain_* standing in."""
        for key in (f"{of}_domain_id", "default_domain_id"):
            if self.get(key):
                return "id", self.options[key]
        for key in (f"{of}_domain_name", "default_domain_name"):
            if self.get(key):
                return "name", self.options[key]
        return None

    def problem(self) -> str | None:
        """Why actorsched cannot authenticate as this section says, or None."""
        if self.auth_type is None or self.auth_type.lower() in NO_AUTH_TYPES:
            return None
        if not self.keystone:
            return (
                f"nova.conf [placement] auth_type = {self.auth_type}: actorsched authenticates "
                f"to Placement with {' or '.join(PASSWORD_AUTH_TYPES)} (Keystone v3) or none "
                "([nova] placement_token)"
            )
        wanted = ["auth_url", "password"]
        if not (self.get("username") or self.get("user_id")):
            wanted.append("username (or user_id)")
        missing = [name for name in wanted if not self.get(name.split()[0])]
        if self.get("username") and not self.get("user_id") and self.domain("user") is None:
            missing.append("user_domain_name (or user_domain_id)")
        if self.get("project_name") and not self.get("project_id") and not self.domain("project"):
            missing.append("project_domain_name (or project_domain_id)")
        if missing:
            return f"nova.conf [placement] auth_type = {self.auth_type} needs {', '.join(missing)}"
        if urlsplit(self.options["auth_url"]).scheme not in ("http", "https"):
            return f"nova.conf [placement] auth_url = {self.options['auth_url']}: not http(s)://"
        return None


@dataclass(frozen=True)
class NovaConfig:
    """What a nova.conf says, in actorsched's terms."""

    path: str
    amqp_url: str  # the transport_url's first broker, as an amqp:// URL
    control_exchange: str
    host: str
    nova_filters: tuple[str, ...]  # enabled_filters as Nova names them
    # SchedulerConfig fields -> (value, "[group] option" it came from)
    scheduler: dict[str, tuple[Any, str]] = field(default_factory=dict)
    # what the file says that no actorsched setting takes (the broker, the weighers
    # that change no order here), as ``actorsched config`` shows it: name -> (value,
    # "[group] option"); transport_url with its passwords as ***
    shown: dict[str, tuple[Any, str]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    values: Mapping[tuple[str, str], Any] = field(default_factory=dict)
    # [placement]: how Nova authenticates to Placement (keystoneauth options)
    placement_auth: PlacementAuth = field(default_factory=PlacementAuth)

    @property
    def weighs_images(self) -> bool:
        """ImagePropertiesWeigher is built (its multiplier is not 0)."""
        multiplier = self.scheduler.get("image_props_weight_multiplier", (0.0, ""))[0]
        return bool(multiplier)

    def source(self, option: str) -> str:
        """``nova.conf PATH [group] option``: how ``actorsched config`` names a source."""
        return f"nova.conf {self.path} {option}"


def _as(kind: Any, text: str, where: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]  # oslo.config strips one pair of quotes
    if text == "" and not isinstance(kind, str | list):
        return None  # an empty number or boolean: unset, as oslo.config reads it
    if isinstance(kind, bool):
        low = text.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise NovaConfigError(f"{where}={text!r}: not a boolean (true or false)")
    if isinstance(kind, int):
        try:
            return int(text)
        except ValueError:
            raise NovaConfigError(f"{where}={text!r}: not an integer") from None
    if isinstance(kind, float):
        try:
            return float(text)
        except ValueError:
            raise NovaConfigError(f"{where}={text!r}: not a number") from None
    if isinstance(kind, list):
        return [part.strip() for part in text.split(",") if part.strip()]
    return text.strip()


# options Nova's default is None for, and the type they take
_NONE_KINDS: Mapping[tuple[str, str], Any] = {
    ("DEFAULT", "cpu_allocation_ratio"): 0.0,
    ("DEFAULT", "ram_allocation_ratio"): 0.0,
    ("DEFAULT", "disk_allocation_ratio"): 0.0,
}


def _parse(path: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(
        default_section="\x00none",  # [DEFAULT] is an ordinary section in oslo.config
        strict=False,  # a repeated option keeps its last value, as oslo.config
        interpolation=None,
        comment_prefixes=("#", ";"),
        inline_comment_prefixes=None,  # oslo.config has no inline comments
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    try:
        with open(path, encoding="utf-8") as file:
            parser.read_file(file, source=path)
    except OSError as exc:
        raise NovaConfigError(f"nova.conf {path}: {exc.strerror or exc}") from None
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise NovaConfigError(f"nova.conf {path} is not an oslo.config file: {exc}") from None
    return parser


def weight_setting(items: list[str], where: str) -> tuple[list[tuple[str, float]], list[str]]:
    """Nova's ``utils.parse_options(..., sep='=', converter=float)`` of a list option:
    the ``(name, ratio)`` pairs in order (a name as written before the ``=``), and
    a warning naming the items ignored: no name, no ``=`` or no number after it
    (Nova ignores them and warns too), or a ratio that is not finite (Nova takes
    it, and weighs every host inf or nan)."""
    good: list[tuple[str, float]] = []
    bad: list[str] = []
    for item in items:
        key, sep, value = item.partition("=")
        try:
            ratio = float(value)
        except ValueError:
            ratio = math.nan
        if key and sep and math.isfinite(ratio):
            good.append((key, ratio))
        else:
            bad.append(item)
    if not bad:
        return good, []
    return good, [f"{where}: ignoring {', '.join(bad)} (not name=ratio, a finite ratio)"]


def _amqp(transport_url: str | None, where: str) -> str:
    if transport_url is None:
        return "amqp://guest:guest@localhost:5672/"
    parts = urlsplit(transport_url)
    if parts.scheme not in ("rabbit", "amqp"):
        raise NovaConfigError(
            f"{where}={transport_url!r}: actorsched speaks to RabbitMQ only (rabbit://)"
        )
    netloc = parts.netloc.split(",")[0]  # several brokers: the first (a cluster's node)
    vhost = parts.path or "/"
    return f"amqp://{netloc}{vhost if vhost != '/' else '/'}"


def read(path: str) -> NovaConfig:
    """The nova.conf at ``path``; :class:`NovaConfigError` (one line) when it cannot be."""
    parser = _parse(path)
    values: dict[tuple[str, str], Any] = dict(DEFAULTS)
    given: set[tuple[str, str]] = set()
    for (group, option), default in DEFAULTS.items():
        if parser.has_option(group, option):
            kind = _NONE_KINDS.get((group, option), default if default is not None else "")
            parsed = _as(kind, parser.get(group, option), f"[{group}] {option}")
            if parsed is not None or default is None:  # empty: Nova's default stands
                values[(group, option)] = parsed
                given.add((group, option))
    warnings: list[str] = []
    for old, new in _NOVA18_NAMES.items():
        if parser.has_option(*old) and new not in given:
            values[new] = _as(DEFAULTS[new], parser.get(*old), f"[{old[0]}] {old[1]}")
            given.add(new)
            warnings.append(
                f"nova.conf [{old[0]}] {old[1]} is Nova 18's name of [{new[0]}] {new[1]}; "
                "read as that"
            )
    scheduler: dict[str, tuple[Any, str]] = {}

    def put(setting: str, value: Any, group: str, option: str) -> None:
        scheduler[setting] = (value, f"[{group}] {option}")

    nova_filters = tuple(values[("filter_scheduler", "enabled_filters")])
    ours: list[str] = list(PLACEMENT_FILTERS)
    unbuilt: list[str] = []
    removed: list[str] = []
    for name in nova_filters:
        short = name.rsplit(".", 1)[-1]
        if short in _SAME_NAME or short in _REMOVED:
            if short not in ours:
                ours.append(short)
            if short in _REMOVED:
                removed.append(short)
        elif short not in _NO_OP_FILTERS:
            unbuilt.append(short)
    if unbuilt:
        warnings.append(
            f"enabled_filters {unbuilt} are not built in actorsched: hosts are not filtered by them"
        )
    put("enabled_filters", ours, "filter_scheduler", "enabled_filters")
    # Nova 34's rules where they differ from Nova 18's (SchedulerConfig.nova_release),
    # but a configuration written for Nova 18 keeps Nova 18's
    if removed:
        scheduler["nova_release"] = (18, "[filter_scheduler] enabled_filters names Nova 18's")
        warnings.append(
            f"filter(s) {', '.join(removed)} were removed from Nova (Placement decides them "
            "now); this nova.conf enables them, so it is read as written for Nova 18: Nova "
            "18's rules hold where the two releases differ (nova_release 18)"
        )
    else:
        scheduler["nova_release"] = (34, "Nova 34")
    architecture = values[("filter_scheduler", "image_properties_default_architecture")]
    if architecture:
        if architecture not in ARCHITECTURES:  # oslo.config's choices
            raise NovaConfigError(
                f"nova.conf [filter_scheduler] image_properties_default_architecture="
                f"{architecture!r}: not one of {list(ARCHITECTURES)}"
            )
        put(
            "image_properties_default_architecture",
            architecture,
            "filter_scheduler",
            "image_properties_default_architecture",
        )
    classes = [c.rsplit(".", 1)[-1] for c in values[("filter_scheduler", "weight_classes")]]
    every = _ALL_WEIGHERS in classes
    nova_18 = scheduler["nova_release"][0] == 18
    for weigher, setting in _WEIGHERS.items():
        on = every or weigher in classes
        if nova_18 and weigher == "HypervisorVersionWeigher" and weigher not in classes:
            put(setting, 0.0, "filter_scheduler", "enabled_filters (Nova 18 had no such weigher)")
            continue
        group, option = _MULTIPLIER_OPTIONS.get(setting, ("filter_scheduler", setting))
        multiplier = values[(group, option)] if on else 0.0
        put(
            setting,
            float(multiplier),
            group if on else "filter_scheduler",
            option if on else "weight_classes",
        )
    # [metrics]: the setting MetricsFilter and MetricsWeigher read; the weigher's
    # required and weight_of_unavailable (off with the weigher)
    metrics, ignored = weight_setting(
        values[("metrics", "weight_setting")], "[metrics] weight_setting"
    )
    warnings += ignored
    put("metrics_weight_setting", metrics, "metrics", "weight_setting")
    metrics_on = every or "MetricsWeigher" in classes
    put(
        "metrics_required",
        bool(values[("metrics", "required")]) and metrics_on,
        "metrics",
        "required" if metrics_on else "weight_classes",
    )
    put(
        "metrics_weight_of_unavailable",
        float(values[("metrics", "weight_of_unavailable")]),
        "metrics",
        "weight_of_unavailable",
    )
    noops = [w for w in _NO_OP_WEIGHERS if every or w in classes]
    if noops:
        warnings.append(
            "weighers that change no order here: "
            + "; ".join(f"{w} ({_NO_OP_WEIGHERS[w]})" for w in noops)
        )
    images, ignored = weight_setting(
        values[("filter_scheduler", "image_props_weight_setting")],
        "[filter_scheduler] image_props_weight_setting",
    )
    warnings += ignored
    put("image_props_weight_setting", images, "filter_scheduler", "image_props_weight_setting")
    unknown = [
        c for c in classes if c != _ALL_WEIGHERS and c not in _WEIGHERS and c not in _NO_OP_WEIGHERS
    ]
    if unknown:
        warnings.append(f"weight_classes {unknown} are not Nova 34 weighers: ignored")
    for setting in (
        "host_subset_size",
        "shuffle_best_same_weighed_hosts",
        "max_instances_per_host",
        "max_io_ops_per_host",
        "isolated_images",
        "isolated_hosts",
        "restrict_isolated_hosts_to_isolated_images",
        "aggregate_image_properties_isolation_separator",
    ):
        put(setting, values[("filter_scheduler", setting)], "filter_scheduler", setting)
    namespace = values[("filter_scheduler", "aggregate_image_properties_isolation_namespace")]
    if namespace:
        option = "aggregate_image_properties_isolation_namespace"
        put(option, namespace, "filter_scheduler", option)
        if "AggregateImagePropertiesIsolation" in (n.rsplit(".", 1)[-1] for n in nova_filters):
            warnings.append(
                f"[filter_scheduler] {option} is set: AggregateImagePropertiesIsolation compares "
                "only the aggregate keys in that namespace (Nova 34 warns that this option "
                "is deprecated: [scheduler] enable_isolated_aggregate_filtering replaces it)"
            )
    put("max_attempts", values[("scheduler", "max_attempts")], "scheduler", "max_attempts")
    for resource in ("cpu", "ram", "disk"):
        option = f"{resource}_allocation_ratio"
        ratio = values[("DEFAULT", option)]
        if ratio is None:  # Nova's computes use the initial ratio then
            option = f"initial_{option}"
            ratio = values[("DEFAULT", option)]
        if ratio <= 0:
            raise NovaConfigError(f"nova.conf [DEFAULT] {option}={ratio}: must be above 0")
        put(f"{resource}_allocation_ratio", float(ratio), "DEFAULT", option)
    # Nova 34's request filters that actorsched builds (filters.request_filters)
    for option in (
        "limit_tenants_to_placement_aggregate",
        "placement_aggregate_required_for_tenants",
        "enable_isolated_aggregate_filtering",
    ):
        put(option, bool(values[("scheduler", option)]), "scheduler", option)
    unbuilt_options = _unbuilt_options(values, given)
    if unbuilt_options:
        warnings.append(
            "options that change Nova's scheduling but are not built in actorsched (no "
            "effect here): " + "; ".join(unbuilt_options)
        )
    for option in ("reserved_host_memory_mb", "reserved_host_disk_mb", "reserved_host_cpus"):
        if ("DEFAULT", option) in given:
            warnings.append(
                f"[DEFAULT] {option} is a compute's setting: each host report carries its "
                "own reserved figures"
            )
    url = values[("DEFAULT", "transport_url")]
    host = values[("DEFAULT", "host")] or socket.gethostname()
    shown: dict[str, tuple[Any, str]] = {
        "transport_url": (None if url is None else redact(url), "[DEFAULT] transport_url"),
        "control_exchange": (values[("DEFAULT", "control_exchange")], "[DEFAULT] control_exchange"),
        "host": (host, "[DEFAULT] host"),
    }
    for weigher, option in _NO_OP_MULTIPLIERS.items():
        on = every or weigher in classes
        shown[option] = (
            float(values[("filter_scheduler", option)]) if on else 0.0,
            f"[filter_scheduler] {option if on else 'weight_classes'}",
        )
    return NovaConfig(
        path=path,
        amqp_url=_amqp(url, "[DEFAULT] transport_url"),
        control_exchange=values[("DEFAULT", "control_exchange")],
        host=host,
        nova_filters=tuple(n.rsplit(".", 1)[-1] for n in nova_filters),
        scheduler=scheduler,
        shown=shown,
        warnings=tuple(warnings),
        values=values,
        placement_auth=_placement_auth(parser),
    )


# options that change Nova's scheduling and that actorsched does not build, and why
# each has no effect here; named when on (a bool) or given (any other)
_UNBUILT_OPTIONS: Mapping[tuple[str, str], str] = {
    ("scheduler", "query_placement_for_image_type_support"): "",
    ("scheduler", "query_placement_for_routed_network_aggregates"): "",
    ("scheduler", "image_metadata_prefilter"): "",
    ("scheduler", "max_placement_results"): (
        "Nova weighs at most that many of Placement's candidates; actorsched weighs "
        "every host that passes the filters"
    ),
    ("filter_scheduler", "pci_in_placement"): (
        "actorsched places no PCI devices: a request for one is NoValidHost"
    ),
}
# options that change Nova's scheduling when off, and why they do not here
_UNBUILT_WHEN_OFF: Mapping[tuple[str, str], str] = {
    ("filter_scheduler", "track_instance_changes"): (
        "Nova's scheduler then reads each host's instances from its database; actorsched "
        "reads none: a host's instances are its claims and what its reports list"
    ),
}
# Nova's minimum of an option read here that no actorsched setting checks
_MINIMUMS: Mapping[tuple[str, str], float] = {
    ("scheduler", "max_placement_results"): 1,
    ("filter_scheduler", "pci_weight_multiplier"): 0.0,
}


def _unbuilt_options(
    values: Mapping[tuple[str, str], Any], given: set[tuple[str, str]]
) -> list[str]:
    """``[group] option = value (why)`` of each option of :data:`_UNBUILT_OPTIONS` that
    is on or given, and of :data:`_UNBUILT_WHEN_OFF` that is off; a value Nova
    refuses is :class:`NovaConfigError`."""
    for (group, option), least in _MINIMUMS.items():
        if values[(group, option)] < least:
            raise NovaConfigError(
                f"nova.conf [{group}] {option}={values[(group, option)]}: must be at least "
                f"{least}, as Nova requires"
            )
    named: list[tuple[tuple[str, str], str]] = []
    for key, why in _UNBUILT_OPTIONS.items():
        value = values[key]
        if value is True or (not isinstance(value, bool) and key in given):
            named.append((key, why))
    named += [(key, why) for key, why in _UNBUILT_WHEN_OFF.items() if values[key] is False]
    return [
        f"[{group}] {option} = {_conf_text(values[(group, option)])}" + (f" ({why})" if why else "")
        for (group, option), why in named
    ]


def _conf_text(value: Any) -> str:
    """A value as nova.conf writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _placement_auth(parser: configparser.RawConfigParser) -> PlacementAuth:
    if not parser.has_section("placement"):
        return PlacementAuth()
    options = {
        option: _as("", parser.get("placement", option), f"[placement] {option}")
        for option in _PLACEMENT_AUTH_OPTIONS
        if parser.has_option("placement", option)
    }
    auth_type = options.pop("auth_type", None) or None
    return PlacementAuth(auth_type, {k: v for k, v in options.items() if v})
