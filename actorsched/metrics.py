"""What a scheduler decided and how long it took: decision log lines and metrics.

Embedded users opt in, at no cost otherwise::

    metrics = SchedulerMetrics()           # its own prometheus registry
    async with Scheduler(metrics=metrics) as s:
        ...
    text = metrics.render()                # Prometheus text; or scrape metrics.registry

``serve`` always has one (its ``/metrics`` endpoint adds the AMQP service's own).

Decision lines go to the ``actorsched.decisions`` logger at INFO: one per
placed instance (its host, alternates, the request's size and the time from
sending to answer) and one per NoValidHost with its filter counts; each also
carries these as ``extra`` fields, which ``--log-format json`` writes out.

Label values are lower snake case everywhere (``scheduled``,
``no_valid_host``, ``invalid_request``).
"""

from __future__ import annotations

import logging
import platform
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.exposition import generate_latest

from .core.commands import COMMANDS, SelectDestinations
from .errors import NoValidHost
from .models import RequestSpec, Selection
from .version import __version__

if TYPE_CHECKING:
    from .actor import Envelope


class Observed(Protocol):
    """What the gauges read of the scheduler they are bound to (a ``Scheduler``)."""

    @property
    def mailbox_depth(self) -> int: ...
    @property
    def waiting_for_room(self) -> int: ...
    @property
    def host_count(self) -> int: ...
    @property
    def silent_host_count(self) -> int: ...
    @property
    def claim_count(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def pending_requests(self) -> int: ...


# commands that the journal writes (a batch of reads alone commits nothing)
_WRITES = frozenset(entry.command for entry in COMMANDS if entry.record is not None)

__all__ = ["DECISIONS", "SchedulerMetrics", "label"]

DECISIONS = logging.getLogger("actorsched.decisions")

# a placement takes tens of microseconds in the owner; the tail is the mailbox and the journal
_DECISION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip
_COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_VICTIM_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1000)


def label(name: str) -> str:
    """A class or error name as a label value: ``NoValidHost`` -> ``no_valid_host``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


class SchedulerMetrics:
    """A scheduler's metrics, in a registry of their own (or the one given).

    Bind it with ``Scheduler(metrics=...)``; one SchedulerMetrics serves one
    Scheduler.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.decisions = Histogram(
            "actorsched_scheduling_attempt_duration_seconds",
            "Time from sending a placement request to its answer, by result",
            ["result"],
            buckets=_DECISION_BUCKETS,
            registry=r,
        )
        self._scheduled = self.decisions.labels("scheduled")
        self._unschedulable = self.decisions.labels("unschedulable")
        self._failed = self.decisions.labels("error")
        self.rejections = Counter(
            "actorsched_filter_rejections",
            "Hosts each filter removed, counted in every NoValidHost explanation",
            ["filter"],
            registry=r,
        )
        self.preemptions = Counter(
            "actorsched_preemption_attempts",
            "Instances placed by preempting lower-priority claims",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "actorsched_preemption_victims",
            "Claims released per preempting placement",
            buckets=_VICTIM_BUCKETS,
            registry=r,
        )
        self.commit = Histogram(
            "actorsched_journal_commit_duration_seconds",
            "Time from handing a batch to the journal to its being durable",
            buckets=_COMMIT_BUCKETS,
            registry=r,
        )
        self.commit_batch = Histogram(
            "actorsched_journal_batch_commands",
            "Commands per journal commit",
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        Gauge(
            "actorsched_build_info",
            "The running actorsched: version and Python, as labels (value 1)",
            ["version", "python"],
            registry=r,
        ).labels(__version__, platform.python_version()).set(1)
        if process:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
        self._bound = False
        self._gauges: list[tuple[str, str, Callable[[Observed], float]]] = [
            ("actorsched_mailbox_depth", "Messages waiting in the owner's mailbox",
             lambda s: s.mailbox_depth),
            ("actorsched_waiting_for_room", "Messages waiting in line for room in the mailbox",
             lambda s: s.waiting_for_room),
            ("actorsched_pending_requests", "Placement requests waiting for room (wait)",
             lambda s: s.pending_requests),
            ("actorsched_hosts", "Hosts the scheduler knows", lambda s: s.host_count),
            ("actorsched_hosts_silent", "Hosts silent for longer than service_down_time (down)",
             lambda s: s.silent_host_count),
            ("actorsched_claims", "Live claims (assumed or confirmed)", lambda s: s.claim_count),
            ("actorsched_active", "1 while this process owns the state and answers, else 0",
             lambda s: 1 if s.role == "active" else 0),
        ]  # fmt: skip

    def bind(self, scheduler: Observed) -> None:
        """Read the scheduler's gauges (called by ``Scheduler(metrics=...)``)."""
        if self._bound:
            raise ValueError("this SchedulerMetrics is bound to a scheduler already")
        self._bound = True
        for name, text, read in self._gauges:
            Gauge(name, text, registry=self.registry).set_function(
                lambda read=read: read(scheduler)  # type: ignore[misc]
            )

    def render(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    # -- observing -----------------------------------------------------------

    def observe_batch(self, batch: list[Envelope], commit_seconds: float | None) -> None:
        """One answered batch of the owner: each placement's time and decision lines,
        and the journal commit's time and size when it wrote anything.

        The owner calls this once per batch after answering it, so a
        placement costs a histogram observation and, with INFO on, its lines.
        """
        now = time.perf_counter()
        writes = 0
        for env in batch:
            command = env.command
            if isinstance(command, SelectDestinations) and env.sent:
                self.placed(command.spec, env.result, env.error, now - env.sent, env.preempted)
            if type(command) in _WRITES:
                writes += 1
        if commit_seconds is not None and writes:
            self.commit.observe(commit_seconds)
            self.commit_batch.observe(writes)

    def placed(
        self,
        spec: RequestSpec,
        result: Any,
        error: BaseException | None,
        took: float,
        preempted: bool = False,
    ) -> None:
        """One placement request answered: its duration, and its decision log lines
        (``preempted``: it released claims now, so its victims count; a repeat
        answering an earlier placement names them again but released nothing)."""
        if error is None:
            self._scheduled.observe(took)
            for selection in result if preempted else ():
                if selection.preempted:
                    self.preemptions.inc()
                    self.preemption_victims.observe(len(selection.preempted))
                    _log_preempted(spec, selection)
            if DECISIONS.isEnabledFor(logging.INFO):
                _log_placed(spec, result, took)
        elif isinstance(error, NoValidHost):
            self._unschedulable.observe(took)
            for name, count in error.filter_counts.items():
                self.rejections.labels(name).inc(count)
            DECISIONS.info(
                "no valid host for instance %s: %s (%.3f ms)",
                error.instance_uuid,
                error,
                took * 1e3,
                extra={
                    "decision": "no_valid_host",
                    "instance_uuid": error.instance_uuid,
                    "filter_counts": error.filter_counts,
                    "total_hosts": error.total_hosts,
                    "took_ms": round(took * 1e3, 3),
                },
            )
        else:
            self._failed.observe(took)


def _log_placed(spec: RequestSpec, selections: list[Selection], took: float) -> None:
    size = f"{spec.memory_mb} MB, {spec.vcpus} vCPU, {spec.disk_gb} GB"
    for selection in selections:
        DECISIONS.info(
            "placed instance %s on %s (alternates %s; request of %d instance(s), %s; %.3f ms)",
            selection.instance_uuid,
            selection.host,
            ", ".join(selection.alternates) or "none",
            len(spec.instance_uuids),
            size,
            took * 1e3,
            extra={
                "decision": "placed",
                "instance_uuid": selection.instance_uuid,
                "host": selection.host,
                "alternates": selection.alternates,
                "instances": len(spec.instance_uuids),
                "memory_mb": spec.memory_mb,
                "vcpus": spec.vcpus,
                "disk_gb": spec.disk_gb,
                "took_ms": round(took * 1e3, 3),
            },
        )


def _log_preempted(spec: RequestSpec, selection: Selection) -> None:
    DECISIONS.info(
        "preempted %d claim(s) on %s for instance %s of priority %d: %s",
        len(selection.preempted),
        selection.host,
        selection.instance_uuid,
        spec.priority,
        ", ".join(selection.preempted),
        extra={
            "decision": "preempted",
            "instance_uuid": selection.instance_uuid,
            "host": selection.host,
            "priority": spec.priority,
            "preempted": selection.preempted,
        },
    )
