"""Prometheus metrics of the AMQP service, and a tiny asyncio endpoint that serves them.

Each service gets its own registry, so several services (as in the tests)
can live in one process. The endpoint runs on the service's event loop
rather than in a thread: the gauges read the scheduler's counters, which
only that loop may touch, and shutting down is a plain ``await close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from ..metrics import SchedulerMetrics
from ..scheduler import Scheduler

__all__ = ["MetricsServer", "ServiceMetrics"]

log = logging.getLogger("actorsched.amqp.metrics")

# Placement calls take well under a millisecond in the owner; the tail is the broker.
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)


class ServiceMetrics:
    """The service's counters and gauges, in a registry of their own.

    They share the registry of the scheduler's own
    :class:`~actorsched.metrics.SchedulerMetrics` (made here when it has
    none). Outcomes, in lower snake case: ``ok``; the error of a call the
    scheduler refused (``no_valid_host``, ``invalid_request``, ``mailbox_full``
    ...); ``bad_input`` (dead-lettered);
    ``requeued`` (handed back to the broker); ``unacked`` (the channel went
    away before the ack, so the broker will deliver it again). The items of
    a ``batch`` message are counted one by one under their own operation.
    """

    def __init__(self, scheduler: Scheduler, registry: CollectorRegistry | None = None) -> None:
        if scheduler.metrics is None:  # the scheduler's own metrics, in the same registry
            scheduler.attach_metrics(SchedulerMetrics(registry))
        assert scheduler.metrics is not None
        if registry is not None and scheduler.metrics.registry is not registry:
            raise ValueError("the scheduler's metrics are in another registry than the one given")
        self.registry = scheduler.metrics.registry
        self.scheduler = scheduler
        self.requests = Counter(
            "actorsched_requests",
            "AMQP requests handled, by operation and outcome",
            ["op", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "actorsched_request_duration_seconds",
            "Time from delivery to ack, by operation",
            ["op"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.denied = Counter(
            "actorsched_denied",
            "Operations refused because the caller's roles do not allow them (a user the "
            "[auth] table does not name is counted as other)",
            ["operation", "user"],
            registry=self.registry,
        )
        # Nova's scheduler RPC API (serve --nova-config): methods outside Nova's API
        # are counted as "unknown", so the label's vocabulary is bounded
        self.nova_requests = Counter(
            "actorsched_nova_requests",
            "Nova RPC calls and casts handled, by method and outcome",
            ["method", "outcome"],
            registry=self.registry,
        )
        self.nova_latency = Histogram(
            "actorsched_nova_request_duration_seconds",
            "Time from a Nova message's delivery to its answer (or, for a cast, its ack)",
            ["method"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_items = Histogram(
            "actorsched_batch_items",
            "Operations per batch message (each is also counted in actorsched_requests_total)",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.dead_lettered = Counter(
            "actorsched_dead_lettered",
            "Messages dead-lettered as bad input, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.redelivered = Counter(
            "actorsched_redelivered",
            "Deliveries the broker marked as delivered before, by operation",
            ["op"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "actorsched_in_flight",
            "Deliveries being handled now (at most the prefetch)",
            registry=self.registry,
        )

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


class MetricsServer:
    """Serves ``GET /metrics`` on ``host:port`` from the running event loop.

    Also ``GET /readyz``: 200 while the scheduler is the active owner, 503 as
    a standby (so a load balancer or probe sees which one answers), and
    ``GET /healthz``: 200 while the process serves at all.

    ``port=0`` picks a free port; read it back from :attr:`port`.
    """

    def __init__(
        self,
        metrics: ServiceMetrics,
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        connected: Callable[[], bool] | None = None,
    ) -> None:
        self._metrics = metrics
        self._connected = connected
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    def _ready(self) -> str:
        """``active`` when ready; else ``failed`` once the journal failed,
        ``commit_overdue`` while a journal write is past its limit (the watchdog fails
        it soon), ``broker_disconnected``, ``standby`` or ``stopped``."""
        scheduler = self._metrics.scheduler
        journal = scheduler.journal
        if journal is not None and journal.failed is not None:
            return "failed"
        if journal is not None and journal.overdue:
            return "commit_overdue"
        if self._connected is not None and not self._connected():
            return "broker_disconnected"
        return scheduler.role

    def _health(self) -> str:
        """``ok`` while the process serves, with its owner task (active) or its journal
        follower (standby) running; else what stopped (``Scheduler.health``)."""
        return self._metrics.scheduler.health

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
            parts = head.split(b"\r\n", 1)[0].split()
            path = parts[1].split(b"?", 1)[0] if len(parts) >= 2 else b""
            method_ok = len(parts) >= 2 and parts[0] in (b"GET", b"HEAD")
            if method_ok and path in (b"/metrics", b"/"):
                body = self._metrics.render()
                status, ctype = b"200 OK", CONTENT_TYPE_LATEST.encode()
            elif method_ok and path == b"/readyz":
                role = self._ready()
                status = b"200 OK" if role == "active" else b"503 Service Unavailable"
                body, ctype = f"{role}\n".encode(), b"text/plain"
            elif method_ok and path == b"/healthz":
                health = self._health()
                status = b"200 OK" if health == "ok" else b"503 Service Unavailable"
                body, ctype = f"{health}\n".encode(), b"text/plain"
            else:
                body, status, ctype = (
                    b"only GET /metrics, /readyz and /healthz are served\n",
                    b"404 Not Found",
                    b"text/plain",
                )
            if parts and parts[0] == b"HEAD":
                body = b""
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype
                + b"\r\nContent-Length: " + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n" + body
            )  # fmt: skip
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # a scraper that hung up or sent garbage: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
