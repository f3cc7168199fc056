"""Drive a scheduler with concurrent callers and time what it does.

Everything here works on any object with the :class:`Placer` shape (the
``Scheduler`` facade and the baselines share it), so every scheduler is
measured by the same code on the same hosts and requests.

A run is bounded by a time budget rather than a request count: callers stop
taking new requests once the budget is spent and the in-flight ones finish.
That lets fast and slow schedulers share one harness without a calibration
pass; throughput is completed calls over elapsed time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from actorsched import HostReport, HostState, NoValidHost, RequestSpec, SchedulerConfig
from actorsched.baselines import over_capacity

from .progress import Progress

__all__ = [
    "Placer",
    "RunStats",
    "count_over_capacity",
    "feed_reports",
    "place_timed",
    "summarize_latencies",
]


class Placer(Protocol):
    """What the benchmark needs of a scheduler (the Scheduler API)."""

    async def update_host(self, report: HostReport) -> bool: ...

    async def select_destinations(self, spec: RequestSpec) -> Any: ...

    async def host_states(self) -> dict[str, HostState]: ...


@dataclass(slots=True)
class RunStats:
    """The outcome of one timed run of placements."""

    calls: int = 0
    placed: int = 0
    no_valid_host: int = 0
    errors: int = 0
    elapsed: float = 0.0
    latencies: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    @property
    def rate(self) -> float:
        """Calls answered per second (placed or NoValidHost)."""
        return self.calls / self.elapsed if self.elapsed > 0 else 0.0


def summarize_latencies(latencies: NDArray[np.float64]) -> dict[str, float]:
    """p50/p90/p99/p99.9/max in milliseconds."""
    if latencies.size == 0:
        return {"p50_ms": 0.0, "p90_ms": 0.0, "p99_ms": 0.0, "p999_ms": 0.0, "max_ms": 0.0}
    p50, p90, p99, p999 = np.percentile(latencies, [50, 90, 99, 99.9]) * 1e3
    return {
        "p50_ms": float(p50),
        "p90_ms": float(p90),
        "p99_ms": float(p99),
        "p999_ms": float(p999),
        "max_ms": float(latencies.max() * 1e3),
    }


async def feed_reports(
    update: Callable[[HostReport], Awaitable[bool]],
    reports: Sequence[HostReport],
    *,
    concurrency: int = 64,
    progress: Progress | None = None,
) -> tuple[int, float]:
    """Apply ``reports`` through ``update`` with concurrent reporters: (applied, seconds)."""
    it = iter(reports)
    applied = 0
    total = len(reports)

    async def reporter() -> None:
        nonlocal applied
        for report in it:
            if await update(report):
                applied += 1
            if progress is not None and applied % 1024 == 0:
                progress.detail(f"host reports {applied:,}/{total:,}")

    started = time.perf_counter()
    await asyncio.gather(*(reporter() for _ in range(max(1, min(concurrency, total)))))
    return applied, time.perf_counter() - started


async def place_timed(
    select: Callable[[RequestSpec], Awaitable[object]],
    specs: Sequence[RequestSpec],
    *,
    concurrency: int,
    budget: float,
    progress: Progress | None = None,
) -> RunStats:
    """Send ``specs`` from ``concurrency`` callers until they run out or ``budget`` s pass."""
    it = iter(specs)
    stats = RunStats()
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + budget
    clock = time.perf_counter

    async def caller() -> None:
        for spec in it:
            t0 = clock()
            try:
                await select(spec)
            except NoValidHost:
                stats.no_valid_host += 1
            except Exception:
                stats.errors += 1
            else:
                stats.placed += 1
            t1 = clock()
            latencies.append(t1 - t0)
            if progress is not None:
                progress.detail(f"{len(latencies):,} calls, {t1 - started:4.1f}s")
            if t1 >= deadline:
                return

    await asyncio.gather(*(caller() for _ in range(concurrency)))
    stats.elapsed = time.perf_counter() - started
    stats.calls = len(latencies)
    stats.latencies = np.asarray(latencies, dtype=np.float64)
    return stats


def count_over_capacity(states: dict[str, HostState], config: SchedulerConfig) -> int:
    """Hosts whose RAM, disk or vCPUs are claimed past capacity (allocation ratios applied)."""
    return sum(over_capacity(s, config) for s in states.values())
