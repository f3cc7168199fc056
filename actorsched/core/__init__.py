"""Sans-IO core: commands, host table, claim ledger, filters, weighers, ranking, engine.

No asyncio here.
"""

from .commands import (
    COMMANDS,
    Command,
    CommandInfo,
    GetClaims,
    GetHostStates,
    Locate,
    PlanPlacement,
    Release,
    RemoveHost,
    SelectDestinations,
    UpdateHost,
    UpdateHosts,
)
from .engine import SchedulerCore
from .filters import HostFilter, PerHostFilter, PlacementContext
from .ledger import Claim, ClaimLedger
from .table import HostTable
from .weighers import HostWeigher

__all__ = [
    "COMMANDS",
    "Claim",
    "ClaimLedger",
    "Command",
    "CommandInfo",
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
    "SchedulerCore",
    "SelectDestinations",
    "UpdateHost",
    "UpdateHosts",
]
