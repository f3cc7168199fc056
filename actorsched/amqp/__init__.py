"""actorsched over RabbitMQ: the ``actorsched serve`` consumer and its client.

>>> from actorsched.amqp import SchedulerClient, SchedulerService
"""

from .client import SchedulerClient
from .metrics import MetricsServer, ServiceMetrics
from .protocol import DEFAULT_QUEUE, DEFAULT_URL, OPERATIONS, BadMessage
from .service import SchedulerService

__all__ = [
    "DEFAULT_QUEUE",
    "DEFAULT_URL",
    "OPERATIONS",
    "BadMessage",
    "MetricsServer",
    "SchedulerClient",
    "SchedulerService",
    "ServiceMetrics",
]
