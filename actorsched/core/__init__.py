"""Sans-IO core: host table, claim ledger, filters, weighers, engine. No asyncio here."""

from .engine import (
    Command,
    GetHostStates,
    Release,
    RemoveHost,
    SchedulerCore,
    SelectDestinations,
    UpdateHost,
    UpdateHosts,
)
from .filters import HostFilter, PerHostFilter, PlacementContext
from .ledger import Claim, ClaimLedger
from .table import HostTable
from .weighers import HostWeigher

__all__ = [
    "Claim",
    "ClaimLedger",
    "Command",
    "GetHostStates",
    "HostFilter",
    "HostTable",
    "HostWeigher",
    "PerHostFilter",
    "PlacementContext",
    "Release",
    "RemoveHost",
    "SchedulerCore",
    "SelectDestinations",
    "UpdateHost",
    "UpdateHosts",
]
