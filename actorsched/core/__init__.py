"""Sans-IO core: commands, host table, claim ledger, filters, weighers, ranking, engine.

No asyncio here.
"""

from .commands import (
    AGGREGATE_COMMANDS,
    COMMANDS,
    AddHostToAggregate,
    Command,
    CommandInfo,
    CreateAggregate,
    DeleteAggregate,
    GetAggregates,
    GetClaims,
    GetHostStates,
    Locate,
    PlanPlacement,
    Release,
    RemoveHost,
    RemoveHostFromAggregate,
    SelectDestinations,
    UpdateAggregate,
    UpdateHost,
    UpdateHosts,
)
from .engine import SchedulerCore
from .filters import HostFilter, PerHostFilter, PlacementContext
from .ledger import Claim, ClaimLedger
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
    "CreateAggregate",
    "DeleteAggregate",
    "GetAggregates",
    "GetClaims",
    "GetHostStates",
    "HostFilter",
    "HostTable",
    "HostWeigher",
    "Locate",
    "PerHostFilter",
    "PlacementContext",
    "PlanPlacement",
    "Release",
    "RemoveHost",
    "RemoveHostFromAggregate",
    "SchedulerCore",
    "SelectDestinations",
    "UpdateAggregate",
    "UpdateHost",
    "UpdateHosts",
]
