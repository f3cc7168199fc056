"""actorsched: a cloud placement scheduler whose host state one asyncio task owns.

>>> from actorsched import Scheduler, HostReport, RequestSpec
"""

from .core import HostFilter, HostWeigher, PerHostFilter, PlacementContext
from .errors import (
    InvalidRequest,
    MailboxFull,
    MaxRetriesExceeded,
    NoValidHost,
    SchedulerError,
    SchedulerStopped,
)
from .models import (
    Aggregate,
    Destination,
    HostReport,
    HostState,
    RequestSpec,
    SchedulerConfig,
    Selection,
    ServerGroup,
)
from .scheduler import Scheduler
from .version import __version__ as __version__

__all__ = [
    "Aggregate",
    "Destination",
    "HostFilter",
    "HostReport",
    "HostState",
    "HostWeigher",
    "InvalidRequest",
    "MailboxFull",
    "MaxRetriesExceeded",
    "NoValidHost",
    "PerHostFilter",
    "PlacementContext",
    "RequestSpec",
    "Scheduler",
    "SchedulerConfig",
    "SchedulerError",
    "SchedulerStopped",
    "Selection",
    "ServerGroup",
]
