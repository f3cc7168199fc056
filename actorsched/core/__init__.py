"""Sans-IO core: commands, host table, claim ledger, filters, weighers, ranking, engine.

No asyncio here.
"""

from .commands import (
    AGGREGATE_COMMANDS,
    COMMANDS,
    AddHostToAggregate,
    Command,
    CommandInfo,
    ConfirmMove,
    CreateAggregate,
    DeleteAggregate,
    GetAggregates,
    GetClaims,
    GetHostStates,
    Locate,
    Move,
    NovaInstances,
    PlanPlacement,
    Release,
    RemoveHost,
    RemoveHostFromAggregate,
    Reschedule,
    RevertMove,
    SelectDestinations,
    UpdateAggregate,
    UpdateHost,
    UpdateHosts,
)
from .engine import SchedulerCore
from .filters import HostFilter, PerHostFilter, PlacementContext
from .ledger import Claim, ClaimLedger, Migration
from .table import HostTable
from .weighers import HostWeigher

__all__ = [
    "AGGREGATE_COMMANDS",
    "COMMANDS",
    "AddHostToAggregate",
    "Claim",
    "ClaimLedger",
    "Command",
    "CommandInfo",
    "ConfirmMove",
    "CreateAggregate",
    "DeleteAggregate",
    "GetAggregates",
    "GetClaims",
    "GetHostStates",
    "HostFilter",
    "HostTable",
    "HostWeigher",
    "Locate",
    "Migration",
    "Move",
    "NovaInstances",
    "PerHostFilter",
    "PlacementContext",
    "PlanPlacement",
    "Release",
    "RemoveHost",
    "RemoveHostFromAggregate",
    "Reschedule",
    "RevertMove",
    "SchedulerCore",
    "SelectDestinations",
    "UpdateAggregate",
    "UpdateHost",
    "UpdateHosts",
]
