"""The commands the core takes: the one list every other layer derives its tables from.

Rules this module keeps:

* A command is a small frozen, slotted dataclass, typed by what the core
  answers (``Command[bool]``, ``Command[list[Selection]]`` ...), so the
  facade and the actor hand back typed results with no casts.
* :data:`COMMANDS` lists every command once with the names the other layers
  know it by: the :class:`~actorsched.Scheduler` method, the AMQP operation
  (None when it has none of its own), and the journal record it makes when
  it changes state (None for a read). The journal, the AMQP routes and the
  tests check themselves against this list, so a new command that one of
  them forgets fails at import or in a test, not in production.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from ..answers import ClaimsPage, Location, Plan
from ..models import Aggregate, HostReport, RequestSpec, Selection
from .views import HostStatesImage, ImageBuffers

__all__ = [
    "AGGREGATE_COMMANDS",
    "COMMANDS",
    "AddHostToAggregate",
    "Command",
    "CommandInfo",
    "ConfirmMove",
    "CreateAggregate",
    "DeleteAggregate",
    "GetAggregates",
    "GetClaims",
    "GetHostStates",
    "Locate",
    "Move",
    "NovaInstances",
    "PlanPlacement",
    "Release",
    "RemoveHost",
    "RemoveHostFromAggregate",
    "Reschedule",
    "RevertMove",
    "SelectDestinations",
    "UpdateAggregate",
    "UpdateHost",
    "UpdateHosts",
    "info",
]

R = TypeVar("R", covariant=True)


class Command(Generic[R]):
    """A message for the core whose answer is an ``R``."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class UpdateHost(Command[bool]):
    """Apply one host report; True when applied, False when stale (no change)."""

    report: HostReport


@dataclass(frozen=True, slots=True)
class UpdateHosts(Command[list[bool]]):
    """Apply several reports in order; one applied flag each."""

    reports: tuple[HostReport, ...]


@dataclass(frozen=True, slots=True)
class SelectDestinations(Command[list[Selection]]):
    """Claim a host for every instance of the request, or raise and claim nothing."""

    spec: RequestSpec


@dataclass(frozen=True, slots=True)
class Release(Command[bool]):
    """Free an instance's claim; False when it holds none."""

    instance_uuid: str
    caller: str | None = None  # a tenant: only the claims it made (else Forbidden); None: any


@dataclass(frozen=True, slots=True)
class RemoveHost(Command[bool]):
    """Forget a host and its claims; False when unknown."""

    host: str


@dataclass(frozen=True, slots=True)
class GetHostStates(Command[HostStatesImage]):
    """Copy the figures of rows ``start`` on (``limit`` of them, all when None).

    The answer is a :class:`~actorsched.core.views.HostStatesImage`: its
    ``states()`` builds the HostState objects outside the owner.
    """

    start: int = 0
    limit: int | None = None
    into: ImageBuffers | None = None  # room the caller allocated (off the owner)


@dataclass(frozen=True, slots=True)
class PlanPlacement(Command[Plan]):
    """A dry run of SelectDestinations: where each instance would go and why; no claim."""

    spec: RequestSpec


@dataclass(frozen=True, slots=True)
class GetClaims(Command[ClaimsPage]):
    """Up to ``limit`` live claims from cursor ``start`` (on ``host`` only, when given)."""

    host: str | None = None
    start: int = 0
    limit: int = 1_000
    caller: str | None = None  # a tenant: only the claims it made (else Forbidden); None: any


@dataclass(frozen=True, slots=True)
class Locate(Command[Location]):
    """Where an instance is: its claim's host, or the host whose report lists it."""

    instance_uuid: str
    caller: str | None = None  # a tenant: only the claims it made (else Forbidden); None: any


@dataclass(frozen=True, slots=True)
class CreateAggregate(Command[Aggregate]):
    """Create host aggregate ``name`` with ``metadata`` and ``hosts``; the aggregate.

    The same aggregate asked for again (a redelivery) answers it and changes
    nothing; a name taken otherwise is InvalidRequest (Nova's AggregateNameExists).
    """

    name: str
    metadata: Mapping[str, str | None] = field(default_factory=dict)
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UpdateAggregate(Command[Aggregate]):
    """Merge ``metadata`` into aggregate ``name``'s; a None value deletes its key."""

    name: str
    metadata: Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class DeleteAggregate(Command[bool]):
    """Delete aggregate ``name`` (it must have no hosts); False when there is none."""

    name: str


@dataclass(frozen=True, slots=True)
class AddHostToAggregate(Command[Aggregate]):
    """Add ``host`` (reported or not) to aggregate ``name``; the aggregate."""

    name: str
    host: str


@dataclass(frozen=True, slots=True)
class RemoveHostFromAggregate(Command[Aggregate]):
    """Take ``host`` out of aggregate ``name``; the aggregate."""

    name: str
    host: str


@dataclass(frozen=True, slots=True)
class GetAggregates(Command[list[Aggregate]]):
    """Every host aggregate, by name."""


@dataclass(frozen=True, slots=True)
class Move(Command[Selection]):
    """Claim a destination for a claimed or reported instance, holding its source
    under ``migration_uuid`` (a resize with ``spec``'s flavor, else a migration)."""

    instance_uuid: str
    migration_uuid: str
    spec: RequestSpec | None = None
    allow_same_host: bool = False
    evacuate: bool = False
    caller: str | None = None  # a tenant: only the claims it made (else Forbidden); None: any


@dataclass(frozen=True, slots=True)
class ConfirmMove(Command[bool]):
    """Free a move's source hold; False when no such move is open."""

    migration_uuid: str
    caller: str | None = None  # a tenant: only the claims it made (else Forbidden); None: any


@dataclass(frozen=True, slots=True)
class RevertMove(Command[bool]):
    """Free a move's destination claim and give the source back to the instance."""

    migration_uuid: str
    caller: str | None = None  # a tenant: only the claims it made (else Forbidden); None: any


@dataclass(frozen=True, slots=True)
class Reschedule(Command[Selection]):
    """Free the instance's claim on ``failed_host`` and claim its first alternate
    that still passes the filters; MaxRetriesExceeded (no claim left) when none does."""

    instance_uuid: str
    failed_host: str
    caller: str | None = None  # a tenant: only the claims it made (else Forbidden); None: any


@dataclass(frozen=True, slots=True)
class NovaInstances(Command[bool]):
    """What Nova's compute says ``host`` runs: ``instances`` added to it (``add``),
    taken off it (``remove``) or all of it (``sync``), as Nova's host manager keeps
    the computes' instance casts; False when ``host`` is unknown."""

    host: str
    instances: tuple[str, ...]
    mode: Literal["add", "remove", "sync"]


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """The names one command goes by in the other layers."""

    command: type[Command[Any]]
    method: str  # of Scheduler
    operation: str | None  # AMQP message type; None: none of its own (a batch carries it)
    record: str | None  # journal record kind; None: a read, never journaled


COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo(UpdateHost, "update_host", "host_report", "report"),
    CommandInfo(UpdateHosts, "update_hosts", None, "report"),
    CommandInfo(SelectDestinations, "select_destinations", "select_destinations", "claim"),
    CommandInfo(Release, "release", "release", "release"),
    CommandInfo(RemoveHost, "remove_host", "remove_host", "remove"),
    CommandInfo(GetHostStates, "host_states", "host_states", None),
    CommandInfo(PlanPlacement, "plan", "plan", None),
    CommandInfo(GetClaims, "claims", "claims", None),
    CommandInfo(Locate, "where", "where", None),
    CommandInfo(CreateAggregate, "create_aggregate", "create_aggregate", "aggregate_create"),
    CommandInfo(UpdateAggregate, "update_aggregate", "update_aggregate", "aggregate_update"),
    CommandInfo(DeleteAggregate, "delete_aggregate", "delete_aggregate", "aggregate_delete"),
    CommandInfo(
        AddHostToAggregate, "add_host_to_aggregate", "add_host_to_aggregate", "aggregate_add_host"
    ),
    CommandInfo(
        RemoveHostFromAggregate,
        "remove_host_from_aggregate",
        "remove_host_from_aggregate",
        "aggregate_remove_host",
    ),
    CommandInfo(GetAggregates, "aggregates", "aggregates", None),
    CommandInfo(Move, "move", "move", "move"),
    CommandInfo(ConfirmMove, "confirm_move", "confirm_move", "move_confirm"),
    CommandInfo(RevertMove, "revert_move", "revert_move", "move_revert"),
    CommandInfo(Reschedule, "reschedule", "reschedule", "reschedule"),
    # soft state from Nova's computes, never journaled (they sync it again)
    CommandInfo(NovaInstances, "nova_instances", None, None),
)
# the admin commands that change host aggregates (each journaled as its own record)
AGGREGATE_COMMANDS: tuple[type[Command[Any]], ...] = (
    CreateAggregate,
    UpdateAggregate,
    DeleteAggregate,
    AddHostToAggregate,
    RemoveHostFromAggregate,
)
_BY_CLASS = {entry.command: entry for entry in COMMANDS}


def info(command: type[Command[Any]]) -> CommandInfo:
    """The :class:`CommandInfo` of a command class (KeyError for one not listed)."""
    return _BY_CLASS[command]
