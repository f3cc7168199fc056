"""Settings of ``serve`` (and of ``config``, which shows them), in layers.

Every :class:`~actorsched.models.SchedulerConfig` field and every
:class:`ServiceSettings` field is taken from, the later winning:

1. its default;
2. the TOML file given by ``--config FILE`` (or ``$ACTORSCHED_CONFIG``): a
   ``[scheduler]`` table with SchedulerConfig's field names, a ``[service]``
   table with ServiceSettings' field names;
3. the environment: ``ACTORSCHED_<FIELD>``, for example
   ``ACTORSCHED_CPU_ALLOCATION_RATIO=1.0`` (lists and tables as JSON,
   ``ACTORSCHED_ENABLED_FILTERS='["RamFilter"]'``);
4. a flag of ``serve``, for the common ones (:data:`FLAGS`).

Each value is checked by the model that owns it; a bad one is
:class:`SettingsError`, one line naming the setting, the value, where it came
from and the rule (the command exits 2). :func:`load` also returns where
each value came from, for ``actorsched config``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import socket
import tomllib
import typing
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict
from pydantic_settings import SettingsError as _SourceError
from yarl import URL

from .amqp.protocol import (
    DEFAULT_DELIVERY_LIMIT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_REPLY_BYTES,
    DEFAULT_QUEUE,
    DEFAULT_URL,
)
from .auth import ROLES, Role
from .journal import DEFAULT_COMMIT_TIMEOUT, DEFAULT_OWNER_CHECK_INTERVAL, DEFAULT_SHARD
from .models import Name, SchedulerConfig
from .nova.conf import NovaConfig, NovaConfigError
from .nova.conf import read as read_nova_conf
from .nova.placement import DEFAULT_MAX_CONNECTIONS
from .scheduler import DEFAULT_FOLLOW_INTERVAL

__all__ = [
    "AGENT_FLAGS",
    "ENV_PREFIX",
    "FLAGS",
    "SERVE_FLAGS",
    "AgentSettings",
    "AuthSettings",
    "NovaSettings",
    "ServiceSettings",
    "Settings",
    "SettingsError",
    "add_arguments",
    "computed_default",
    "default_journal_path",
    "load",
    "main",
]

ENV_PREFIX = "ACTORSCHED_"
CONFIG_ENV = f"{ENV_PREFIX}CONFIG"


class SettingsError(ValueError):
    """A bad settings file or value: one line naming the setting, the value and the rule."""


def default_journal_path() -> Path:
    """Where ``serve`` keeps its SQLite journal unless told: an absolute state directory.

    ``$STATE_DIRECTORY`` (systemd's ``StateDirectory=``), else
    ``/var/lib/actorsched`` for root, else ``$XDG_STATE_HOME/actorsched``
    (``~/.local/state/actorsched``).
    """
    state = os.environ.get("STATE_DIRECTORY")
    if state:
        base = Path(state.split(":")[0])
    elif os.geteuid() == 0:
        base = Path("/var/lib/actorsched")
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "actorsched"
    return base / "journal.sqlite"


def _computed(words: str) -> JsonDict:
    """The mark of a default computed where the command runs, and what it is in words:
    ``--help`` and the settings reference say those words, never one machine's value."""
    return {"computed_default": words}


def computed_default(field: FieldInfo) -> str | None:
    """A field's default in words when it is computed where the command runs, else None."""
    extra = field.json_schema_extra
    words = extra.get("computed_default") if isinstance(extra, dict) else None
    return words if isinstance(words, str) else None


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _amqp_url(value: str) -> str:
    try:
        url = URL(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a URL: {exc}") from None
    if url.scheme not in ("amqp", "amqps") or not url.host:
        raise ValueError("must be amqp://[user:password@]host[:port]/[vhost] (or amqps://)")
    return value


class ServiceSettings(BaseModel):
    """How ``serve`` runs: the broker, the journal, the endpoints, the logs."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    amqp_url: Annotated[str, AfterValidator(_amqp_url)] = Field(
        DEFAULT_URL, description="broker URL"
    )
    queue: Name = Field(DEFAULT_QUEUE, description="request queue to consume")
    # None: the smaller of protocol.DEFAULT_PREFETCH and mailbox_size
    prefetch: int | None = Field(
        None, ge=1, le=65_535, description="deliveries in flight at most (<= mailbox size)"
    )
    max_body_bytes: int = Field(
        DEFAULT_MAX_BODY_BYTES,
        ge=1,
        description="larger messages are cut and dead-lettered as they arrive",
    )
    max_reply_bytes: int = Field(
        DEFAULT_MAX_REPLY_BYTES, ge=1, description="larger replies are refused with InvalidRequest"
    )
    delivery_limit: int = Field(
        DEFAULT_DELIVERY_LIMIT, ge=1, description="x-delivery-limit of the quorum queue"
    )
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65_535,
        description="serve /metrics, /healthz and /readyz on this port (default: off)",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="address the metrics endpoint binds (no authentication: keep it behind "
        "your firewall)",
    )
    drain_timeout: float = Field(
        30.0, ge=0, description="seconds to finish in-flight requests on SIGTERM/SIGINT"
    )
    # SQLite: one serve per file
    journal: str = Field(
        default_factory=lambda: str(default_journal_path()),
        min_length=1,
        description="SQLite file path, or a postgresql:// URL shared by an active/standby pair",
        json_schema_extra=_computed("a file in the state directory"),
    )
    no_journal: bool = Field(
        False, description="keep state in memory only: a restart forgets every claim"
    )
    create_journal: bool = Field(
        False,
        description="make the journal if it does not exist (without it a missing --journal "
        "or --shard refuses to start; the default journal file is made on first use)",
    )
    shard: Name = Field(
        DEFAULT_SHARD, description="name of this scheduler's state in a postgresql:// journal"
    )
    follow_interval: float = Field(
        DEFAULT_FOLLOW_INTERVAL,
        gt=0,
        description="seconds between a standby's reads of the journal",
    )
    commit_timeout: float = Field(
        DEFAULT_COMMIT_TIMEOUT,
        gt=0,
        description="seconds a journal commit may take before serve fail-stops so its "
        "standby takes over",
    )
    # the longest two serves may both say "active"
    owner_check_interval: float = Field(
        DEFAULT_OWNER_CHECK_INTERVAL,
        gt=0,
        description="seconds an idle active goes without confirming in a postgresql:// "
        "journal that it still owns the shard (taken over: it fail-stops)",
    )
    # a line per attempt; 0: try once
    connect_timeout: float = Field(
        30.0, ge=0, description="seconds to keep trying the broker at start"
    )
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], BeforeValidator(_upper)] = (
        Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    )
    log_format: Annotated[Literal["text", "json"], BeforeValidator(_lower)] = Field(
        "text", description="text, or json for log pipelines"
    )
    log_decisions: bool = Field(
        True,
        description="a line per placement and per NoValidHost on the actorsched.decisions logger",
    )


class AgentSettings(BaseModel):
    """What ``actorsched report`` (the host agent) says of the machine it runs on.

    It reads memory, vCPUs and disk from the machine; the rest is set here.
    The broker and queue are the ``[service]`` table's ``amqp_url`` and ``queue``.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    host: Name = Field(
        default_factory=socket.gethostname,
        description="the name to report",
        json_schema_extra=_computed("this machine's"),
    )
    availability_zone: Name | None = Field(None, description="the zone to report")
    traits: list[Name] = Field(
        default_factory=list, max_length=1_000, description="comma-separated traits to report"
    )
    enabled: bool = Field(
        True, description="whether the host takes new placements (false: reported disabled)"
    )
    interval: float = Field(10.0, gt=0, description="seconds between reports")
    rounds: int | None = Field(
        None, ge=1, description="reports to send, then stop (default: until stopped)"
    )
    # the file system instances live on
    disk_path: str = Field("/", min_length=1, description="the file system whose size to report")
    memory_mb_reserved: int = Field(0, ge=0, description="memory kept for the host")
    # the instances running here: a JSON list of objects with "uuid" and their
    # flavor's "memory_mb", "vcpus" and "disk_gb", read from this file or printed
    # by this command
    instances_file: str | None = Field(None, description="a JSON list of the instances here")
    instances_command: str | None = Field(None, description="a command printing that list")
    # or the running domains of libvirt at this URI (qemu:///system), through virsh
    libvirt_uri: str | None = Field(
        None, min_length=1, description="read the running instances from libvirt here (virsh)"
    )
    no_instances: bool = Field(
        False,
        description="this host runs nothing actorsched placed: report 0 instances, no source "
        "needed",
    )


def _uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError("must be a UUID, as Nova's cell mappings have") from None


def _http_url(value: str) -> str:
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value):
        raise ValueError("must be http://host[:port][/path] (or https://)")
    return value


class NovaSettings(BaseModel):
    """Nova's scheduler RPC API (``serve --nova-config``): off unless ``config`` names a nova.conf.

    Read from the ``[nova]`` table and ``ACTORSCHED_NOVA_<FIELD>`` variables.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    # read as Nova 34 reads it; None: no Nova endpoint
    config: str | None = Field(
        None,
        min_length=1,
        description="answer Nova's scheduler RPC API as configured by this nova.conf "
        "(default: off)",
    )
    cell_uuid: Annotated[str, AfterValidator(_uuid)] = Field(
        "00000000-0000-0000-0000-000000000001",
        description="the cell the Selections name (Nova's cell mapping uuid of the cell served)",
    )
    nova_prefetch: int = Field(
        64, ge=1, le=65_535, description="Nova messages in flight at most (<= mailbox size)"
    )
    # another only to run beside a nova-scheduler on one vhost, as the tests do (queue
    # names are global)
    topic: Name = Field(
        "scheduler",
        description="Nova's scheduler topic (its queues scheduler and scheduler.<host>)",
    )
    # None: hosts come from native reports and nothing is written to Placement
    placement_url: Annotated[str, AfterValidator(_http_url)] | None = Field(
        None,
        description="with --nova-config: follow this Placement for host state and write "
        "claims to it before Nova is answered (default: off)",
    )
    # unless nova.conf's [placement] says auth_type = password: a Keystone token then
    placement_token: str = Field(
        "admin",
        min_length=1,
        max_length=4_096,
        description='the X-Auth-Token sent to Placement (its noauth2 reads "user[:project]")',
    )
    placement_poll_interval: float = Field(
        1.0, gt=0, le=3_600, description="seconds between polls of Placement's providers"
    )
    placement_timeout: float = Field(
        10.0, gt=0, le=600, description="seconds a call to Placement may take"
    )
    # each on a kept-alive connection of its own: the follower's reads of changed
    # providers and the claims alike
    placement_max_connections: int = Field(
        DEFAULT_MAX_CONNECTIONS, ge=1, le=256, description="Placement calls in flight at most"
    )
    # ({node: {"hypervisor_type", "hypervisor_version", "supported_instances", ...}}),
    # which Nova's scheduler reads from its compute node records
    placement_host_facts: str | None = Field(
        None,
        min_length=1,
        description="a JSON file of the hypervisor facts of followed hosts, which Placement "
        "does not hold",
    )


class AuthSettings(BaseModel):
    """Who may do what on the bus (:mod:`actorsched.auth`): the ``[auth]`` table and
    ``ACTORSCHED_AUTH_<FIELD>`` variables (JSON).

    With no ``users``, serve's own broker user has every role and every other
    caller (``anonymous`` too) none.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    users: dict[Name, list[Role]] = Field(
        default_factory=dict,
        max_length=10_000,
        description='broker user (or "anonymous") -> its roles',
    )
    max_priority: dict[Role, int] = Field(
        default_factory=dict,
        description="role -> the highest priority its requests may ask (admin: no cap; unnamed: 0)",
    )
    # oslo.messaging sets no user_id: Nova's vhost and exchange permissions are its security
    nova: list[Role] = Field(
        default_factory=lambda: list(ROLES),
        description="the roles of what comes through the Nova endpoint",
    )


_MODELS: dict[str, type[BaseModel]] = {
    "scheduler": SchedulerConfig,
    "service": ServiceSettings,
    "agent": AgentSettings,
    "nova": NovaSettings,
    "auth": AuthSettings,
}
# the variables of a section: ACTORSCHED_<FIELD>, or ACTORSCHED_NOVA_<FIELD> for [nova]
# and ACTORSCHED_AUTH_<FIELD> for [auth]
_ENV_PREFIXES = dict.fromkeys(_MODELS, ENV_PREFIX) | {
    "nova": f"{ENV_PREFIX}NOVA_",
    "auth": f"{ENV_PREFIX}AUTH_",
}
_ALL_NAMES = [
    name
    for section, model in _MODELS.items()
    if _ENV_PREFIXES[section] == ENV_PREFIX
    for name in model.model_fields
]
assert len(_ALL_NAMES) == len(set(_ALL_NAMES)), "one environment variable per setting"


@dataclass(frozen=True)
class Flag:
    """A command-line flag for one setting: ``--`` and the field's name with dashes,
    unless ``option`` names it otherwise. Its help is the field's description (the
    one text of a setting, shown by ``--help`` and the settings reference) unless
    ``help`` says otherwise: a switch that sets the opposite of its field's sense."""

    section: str
    field: str
    kind: Literal["value", "switch", "list"] = "value"
    option: str = ""
    help: str = ""

    def __post_init__(self) -> None:
        if not self.option:
            object.__setattr__(self, "option", "--" + self.field.replace("_", "-"))
        if not self.help:
            description = _MODELS[self.section].model_fields[self.field].description
            object.__setattr__(self, "help", description or "")


FLAGS: tuple[Flag, ...] = (
    Flag("service", "amqp_url"),
    Flag("service", "queue"),
    Flag("service", "prefetch"),
    Flag("service", "max_body_bytes"),
    Flag("service", "max_reply_bytes"),
    Flag("service", "delivery_limit"),
    Flag("service", "metrics_port"),
    Flag("service", "metrics_host"),
    Flag("service", "drain_timeout"),
    Flag("service", "journal"),
    Flag("service", "no_journal", kind="switch"),
    Flag("service", "create_journal", kind="switch"),
    Flag("service", "shard"),
    Flag("service", "follow_interval"),
    Flag("service", "commit_timeout"),
    Flag("service", "owner_check_interval"),
    Flag("service", "connect_timeout"),
    Flag("service", "log_level"),
    Flag("service", "log_format"),
    Flag("nova", "config", option="--nova-config"),
    Flag("nova", "placement_url"),
    Flag("scheduler", "mailbox_size"),
    Flag("scheduler", "max_waiting"),
    Flag("scheduler", "max_waiting_requests"),
    Flag("scheduler", "ram_allocation_ratio"),
    Flag("scheduler", "cpu_allocation_ratio"),
    Flag("scheduler", "disk_allocation_ratio"),
    Flag("scheduler", "enabled_filters", kind="list"),
    Flag("scheduler", "host_subset_size"),
    Flag("scheduler", "max_attempts"),
    Flag("scheduler", "service_down_time"),
    Flag("scheduler", "claim_timeout"),
    Flag("agent", "host"),
    Flag("agent", "availability_zone"),
    Flag("agent", "traits", kind="list"),
    Flag("agent", "enabled", kind="switch", option="--disabled", help="report the host disabled"),
    Flag("agent", "interval"),
    Flag("agent", "rounds"),
    Flag("agent", "disk_path"),
    Flag("agent", "memory_mb_reserved"),
    Flag("agent", "instances_file"),
    Flag("agent", "instances_command"),
    Flag("agent", "libvirt_uri"),
    Flag("agent", "no_instances", kind="switch"),
)
# the flags of each command
SERVE_FLAGS = tuple(f.option for f in FLAGS if f.section != "agent")
AGENT_FLAGS = (
    "--amqp-url",
    "--queue",
    "--connect-timeout",
    "--log-level",
    "--log-format",
    *(f.option for f in FLAGS if f.section == "agent"),
)


def _dest(flag: Flag) -> str:
    return f"set_{flag.field}"


def _metavar(field: str) -> str:
    if field.endswith("ratio"):
        return "RATIO"
    if field.endswith(("timeout", "time", "interval")):
        return "SECONDS"
    if field.endswith(("size", "bytes", "limit", "port", "prefetch", "waiting", "attempts")):
        return "N"
    return {"amqp_url": "URL", "journal": "PATH|URL", "metrics_host": "ADDRESS"}.get(
        field, field.split("_")[-1].upper()
    )


def add_arguments(parser: argparse.ArgumentParser, options: Sequence[str] = SERVE_FLAGS) -> None:
    """``--config`` and the ``options`` of :data:`FLAGS`, each defaulting to "not given"."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help=f"a TOML file with [scheduler] and [service] tables (default: ${CONFIG_ENV})",
    )
    for flag in FLAGS:
        if flag.option not in options:
            continue
        if flag.kind == "switch":
            # a switch sets the opposite of its field's default (--no-journal, --disabled)
            const = not _MODELS[flag.section].model_fields[flag.field].default
            parser.add_argument(
                flag.option, dest=_dest(flag), action="store_const", const=const, help=flag.help
            )
        else:
            metavar = "A,B,..." if flag.kind == "list" else _metavar(flag.field)
            parser.add_argument(
                flag.option, dest=_dest(flag), metavar=metavar, help=_with_default(flag)
            )


def _with_default(flag: Flag) -> str:
    """A flag's help with its field's default, unless the help already says one."""
    if "default" in flag.help:
        return flag.help
    field = _MODELS[flag.section].model_fields[flag.field]
    if words := computed_default(field):
        return f"{flag.help} (default: {words})"
    if field.default_factory is not None:
        return flag.help  # a list or a table: none given
    value = field.default
    if value is None:
        return f"{flag.help} (default: none)"
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value)) or "none"
    return f"{flag.help} (default: {value})".replace("%", "%%")  # argparse formats help


@dataclass(frozen=True)
class Settings:
    """The effective settings, and where each value came from."""

    scheduler: SchedulerConfig
    service: ServiceSettings
    agent: AgentSettings
    nova: NovaSettings
    auth: AuthSettings
    sources: Mapping[str, str]  # "section.field" -> "default", "file PATH", "$VAR" or "--flag"
    nova_conf: NovaConfig | None = None  # the nova.conf read, when nova.config names one
    # ACTORSCHED_* variables of the environment that name no setting (a typo, or a
    # variable of another tool): named in one line at start by serve and report
    unknown_env: tuple[str, ...] = ()

    def warn_unknown_env(self, logger: logging.Logger) -> None:
        """One line naming the ``ACTORSCHED_*`` variables that set nothing, if any."""
        if self.unknown_env:
            logger.warning(
                "environment variables %s name no setting and are ignored "
                "(`actorsched config` lists the settings)",
                ", ".join(self.unknown_env),
            )

    def rows(self) -> list[tuple[str, Any, str]]:
        """(``section.field``, value, source) of every setting, in field order."""
        rows: list[tuple[str, Any, str]] = []
        for section in _MODELS:
            model = getattr(self, section)
            for name in type(model).model_fields:
                key = f"{section}.{name}"
                rows.append((key, getattr(model, name), self.sources.get(key, "default")))
        return rows

    def nova_conf_rows(self) -> list[tuple[str, Any, str]]:
        """(``nova_conf.option``, value, source) of what the nova.conf read says that
        no setting takes (its broker, host and the weighers that change no order
        here), the passwords of its transport_url as ``***``; none without one."""
        conf = self.nova_conf
        if conf is None:
            return []
        return [
            (f"nova_conf.{name}", value, conf.source(option))
            for name, (value, option) in conf.shown.items()
        ]


def _integer(value: Any) -> Any:
    """Text that is an integer as that integer (a choice of numbers, ``nova_release``,
    from the environment or a flag: pydantic matches a Literal by value, never text)."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    return value


def _is_number_choice(annotation: Any) -> bool:
    choices = typing.get_args(annotation)
    return typing.get_origin(annotation) is Literal and all(type(c) is int for c in choices)


def _lax(section: str, *, strict: bool = False) -> type[BaseModel]:
    """A twin of the section's model that converts text (from the environment or a
    flag) to the field's type: each field optional, the same annotation."""
    model = _MODELS[section]
    fields: dict[str, Any] = {
        name: (
            Annotated[info.annotation, BeforeValidator(_integer)]
            if not strict and _is_number_choice(info.annotation)
            else info.annotation,
            info,
        )
        for name, info in model.model_fields.items()
    }
    return create_model(
        f"_Lax{model.__name__}",
        __config__=ConfigDict(extra="forbid", strict=strict),
        **fields,
    )


_LAX = {section: _lax(section) for section in _MODELS}
# a file's values are typed already: checked strictly (an int for a float is fine)
_STRICT = {section: _lax(section, strict=True) for section in _MODELS}


class _EnvReader(BaseSettings):
    # pydantic-settings reads ACTORSCHED_<FIELD> (JSON for lists and tables) and
    # converts it to the field's type; the section's model checks its rules after
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="ignore",
        case_sensitive=False,
        validate_default=False,
        env_ignore_empty=True,
    )


def _is_complex(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (list, dict)


def _env_reader(section: str) -> type[BaseSettings]:
    # lists and tables keep their type (pydantic-settings reads them as JSON);
    # the rest stay text for the section's lax twin to convert and check
    fields: dict[str, Any] = {
        name: (info.annotation if _is_complex(info.annotation) else Any, None)
        for name, info in _MODELS[section].model_fields.items()
    }
    base: type[BaseSettings] = _EnvReader
    if _ENV_PREFIXES[section] != ENV_PREFIX:
        base = create_model(
            f"_EnvBase{section.title()}",
            __base__=_EnvReader,
            __config__=None,
        )
        base.model_config = {**_EnvReader.model_config, "env_prefix": _ENV_PREFIXES[section]}
    reader: type[BaseSettings] = create_model(f"_Env{section.title()}", __base__=base, **fields)
    return reader


_ENV = {section: _env_reader(section) for section in _MODELS}


def _one_line(errors: ValidationError, origin: Mapping[str, str], raw: Mapping[str, Any]) -> str:
    lines = []
    for error in errors.errors():
        field = str(error["loc"][0]) if error["loc"] else "?"
        where = origin.get(field, "default")
        value = raw.get(field, error.get("input"))
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        lines.append(f"setting {field}={text} (from {where}): {error['msg']}")
    return "; ".join(lines)


def _check(
    section: str, values: dict[str, Any], origin: Mapping[str, str], *, strict: bool = False
) -> dict[str, Any]:
    """``values`` converted by the section's lax twin (checked by its strict one, for
    a file's typed values); SettingsError naming a bad one."""
    if not values:
        return {}
    try:
        checked = (_STRICT if strict else _LAX)[section].model_validate(values)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc, origin, values)) from None
    return {name: getattr(checked, name) for name in values}


def _from_file(path: str) -> dict[str, dict[str, Any]]:
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except OSError as exc:
        raise SettingsError(f"config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(_MODELS))
    if unknown:
        raise SettingsError(
            f"config file {path}: unknown table(s) {unknown}; the tables are {sorted(_MODELS)}"
        )
    tables: dict[str, dict[str, Any]] = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise SettingsError(f"config file {path}: {section} must be a table")
        names = _MODELS[section].model_fields
        bad = sorted(set(table) - set(names))
        if bad:
            raise SettingsError(
                f"config file {path}: unknown setting(s) {bad} in [{section}]; its settings "
                f"are {sorted(names)}"
            )
        tables[section] = table
    return tables


def _env_name(field: str, section: str = "scheduler") -> str:
    return f"${_ENV_PREFIXES[section]}{field.upper()}"


def _from_env(section: str) -> dict[str, Any]:
    """The section's fields set in the environment, converted to their types."""
    names = _MODELS[section].model_fields
    prefix = _ENV_PREFIXES[section]
    given = {
        key[len(prefix) :].lower(): value
        for key, value in os.environ.items()
        if key.upper().startswith(prefix)
        and key[len(prefix) :].lower() in names
        and value != ""  # set but empty: as if unset
    }
    if not given:
        return {}
    origin = {name: _env_name(name, section) for name in given}
    try:
        read = _ENV[section]()
    except _SourceError as exc:  # a list or table that is not JSON
        found = re.search(r'field "(\w+)"', str(exc))
        field = found.group(1) if found else "?"
        name = _env_name(field, section)
        raise SettingsError(
            f"setting {field}={given.get(field, '?')} (from {name}): not valid "
            "JSON (lists and tables are given as JSON, for example '[\"RamFilter\"]')"
        ) from None
    except ValidationError as exc:
        raise SettingsError(_one_line(exc, origin, given)) from None
    return {name: getattr(read, name) for name in given}


def _from_flags(args: argparse.Namespace | None) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {section: {} for section in _MODELS}
    if args is None:
        return found
    for flag in FLAGS:
        value = getattr(args, _dest(flag), None)
        if value is None:
            continue
        if flag.kind == "list":
            value = [part.strip() for part in str(value).split(",") if part.strip()]
        found[flag.section][flag.field] = value
    return found


def load(args: argparse.Namespace | None = None) -> Settings:
    """The effective settings from defaults, file, environment and flags (in that order).

    Raises :class:`SettingsError` (one line) for a bad file or value.
    """
    path = getattr(args, "config", None) or os.environ.get(CONFIG_ENV)
    file = _from_file(path) if path else {}
    flags = _from_flags(args)
    option_of = {(flag.section, flag.field): flag.option for flag in FLAGS}
    merged: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    nova_conf: NovaConfig | None = None
    for section in ("nova", *(s for s in _MODELS if s != "nova")):
        # (values, where each came from, typed already: checked strictly)
        layers: list[tuple[dict[str, Any], dict[str, str], bool]] = []
        if section == "scheduler" and merged["nova"].get("config"):
            nova_conf = _read_nova(merged["nova"]["config"])
            raw = {name: value for name, (value, _) in nova_conf.scheduler.items()}
            where = {n: nova_conf.source(o) for n, (_, o) in nova_conf.scheduler.items()}
            layers.append((raw, where, True))
        raw = file.get(section, {})
        layers.append((raw, dict.fromkeys(raw, f"file {path} [{section}]"), True))
        raw = _from_env(section)
        layers.append((raw, {name: _env_name(name, section) for name in raw}, False))
        raw = flags[section]
        layers.append((raw, {name: option_of[(section, name)] for name in raw}, False))
        values: dict[str, Any] = {}
        for raw, origin, typed in layers:
            values.update(_check(section, dict(raw), origin, strict=typed))
            sources.update({f"{section}.{name}": where for name, where in origin.items()})
        merged[section] = values
    origin = {key.split(".", 1)[1]: where for key, where in sources.items()}
    try:
        models = {section: model(**merged[section]) for section, model in _MODELS.items()}
    except ValidationError as exc:
        raise SettingsError(_one_line(exc, origin, {})) from None
    settings = Settings(
        sources=sources,
        nova_conf=nova_conf,
        unknown_env=unknown_env(),
        **models,  # type: ignore[arg-type]
    )
    if nova_conf is not None and settings.nova.placement_url is not None:
        # the Placement link authenticates as nova.conf's [placement] says: refused
        # now, in one line, rather than at the first call
        problem = nova_conf.placement_auth.problem()
        if problem:
            raise SettingsError(problem)
    prefetch = settings.service.prefetch
    mailbox = settings.scheduler.mailbox_size
    if prefetch is not None and prefetch > mailbox:
        raise SettingsError(
            f"setting prefetch={prefetch} (from {sources['service.prefetch']}): must be at most "
            f"mailbox_size={mailbox} (from {sources.get('scheduler.mailbox_size', 'default')}), "
            "so that every delivery fits in the mailbox"
        )
    return settings


# ACTORSCHED_* variables that are not settings but are read: the settings file's
# path, and those of the tests and benchmarks
_OTHER_ENV = frozenset({CONFIG_ENV, f"{ENV_PREFIX}NOVA_PYTHON"})
_OTHER_ENV_PREFIXES = (f"{ENV_PREFIX}TEST_", f"{ENV_PREFIX}BENCH_", f"{ENV_PREFIX}NF_")


def unknown_env() -> tuple[str, ...]:
    """The ``ACTORSCHED_*`` variables set in the environment that name no setting, sorted."""
    known = {
        f"{_ENV_PREFIXES[section]}{name}".upper()
        for section, model in _MODELS.items()
        for name in model.model_fields
    }
    return tuple(
        sorted(
            key
            for key in os.environ
            if key.upper().startswith(ENV_PREFIX)
            and key.upper() not in known
            and key not in _OTHER_ENV
            and not key.upper().startswith(_OTHER_ENV_PREFIXES)
        )
    )


def _read_nova(path: str) -> NovaConfig:
    try:
        return read_nova_conf(path)
    except NovaConfigError as exc:
        raise SettingsError(str(exc)) from None


def _shown(key: str, value: Any) -> Any:
    if key in ("service.amqp_url", "service.journal") and isinstance(value, str):
        from .amqp.service import redact  # the log lines' redaction

        return redact(value) if "://" in value else value
    return value


def config_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched config``: those of ``serve`` and ``report``, and ``--json``."""
    add_arguments(parser, tuple(flag.option for flag in FLAGS))
    parser.add_argument("--json", action="store_true", help="one JSON object, for scripts")


def main(args: argparse.Namespace) -> int:
    """``actorsched config``: print the effective settings and where each came from."""
    settings = load(args)
    rows = [(key, _shown(key, value), where) for key, value, where in settings.rows()]
    rows += settings.nova_conf_rows()
    if args.json:
        print(json.dumps({key: {"value": v, "source": w} for key, v, w in rows}, indent=2))
        return 0
    width = max(len(key) for key, _, _ in rows)
    for key, value, where in rows:
        text = json.dumps(value) if not isinstance(value, str) else value
        print(f"{key:<{width}}  {text}  ({where})")
    return 0
