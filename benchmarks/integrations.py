"""The parts of the benchmark that use other people's modules: baselines, journal, AMQP.

Each is looked up when the run starts; a part whose module has not landed
(or cannot reach its broker) is skipped with a note in the results rather
than failing the whole run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import itertools
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actorsched import HostReport, HostState, RequestSpec, SchedulerConfig, Selection

from .workload import bench_config

__all__ = ["Baseline", "amqp", "baselines", "journal"]


@dataclass(frozen=True, slots=True)
class Baseline:
    """A scheduler to compare with: a name, how to make one, and whether it blocks."""

    name: str
    factory: Callable[[], Any]
    synchronous: bool = False


class ChainPlacer:
    """The Nova-style per-host chain as a plain, synchronous placement loop.

    ``NovaStyleChain.select`` filters and weighs a list of per-host Python
    objects; this keeps those objects (one per reported host) and consumes
    the best host of each request, so it does the same work per request as
    the other schedulers minus everything about concurrency. Its methods are
    ``async`` only to share the harness: nothing inside them yields.
    """

    def __init__(self, config: SchedulerConfig) -> None:
        from actorsched.baselines import NovaHostState, NovaStyleChain

        self._host_state = NovaHostState
        self.chain = NovaStyleChain(config)
        self.hosts: dict[str, Any] = {}

    async def update_host(self, report: HostReport) -> bool:
        host = self.hosts.get(report.host)
        now = time.time()
        if host is None:
            self.hosts[report.host] = self._host_state.from_report(report, now)
            return True
        if report.generation <= host.generation:
            return False
        host.generation = report.generation
        host.apply_figures(report, now)
        return True

    async def select_destinations(self, spec: RequestSpec) -> list[Selection]:
        now = time.time()
        ranked = self.chain.select(spec, self.hosts.values(), now)
        best = ranked[0]
        best.consume(spec.memory_mb, spec.vcpus, spec.disk_gb)
        alternates = [h.host for h in ranked[1 : self.chain.config.max_attempts]]
        return [
            Selection.model_construct(
                instance_uuid=spec.instance_uuids[0], host=best.host, alternates=alternates
            )
        ]

    async def host_states(self) -> dict[str, HostState]:
        return {name: host.state() for name, host in self.hosts.items()}


def baselines(config: SchedulerConfig | None = None) -> list[Baseline]:
    """The baselines that :mod:`actorsched.baselines` provides, with the benchmark's config."""
    config = config or bench_config()
    try:
        module = importlib.import_module("actorsched.baselines")
    except ImportError:
        return []
    found: list[Baseline] = []
    for name, label in (
        ("LockedHostManager", "locked"),
        ("UnsynchronizedHostManager", "unsynchronized"),
    ):
        cls: Callable[[SchedulerConfig], Any] | None = getattr(module, name, None)
        if cls is not None:
            found.append(Baseline(label, functools.partial(cls, config)))
    if hasattr(module, "NovaStyleChain") and hasattr(module, "NovaHostState"):
        found.append(Baseline("nova-chain", lambda: ChainPlacer(config), synchronous=True))
    return found


async def journal(
    hosts: int, requests: int, concurrency: int, tmpdir: Path, notes: list[str], *, repeat: int = 1
) -> dict[str, Any] | None:
    """``benchmarks.journal_bench.run_journal_bench`` (``repeat`` off/on pairs), when it exists."""
    try:
        module = importlib.import_module("benchmarks.journal_bench")
    except ImportError as exc:
        notes.append(f"journal bench skipped: benchmarks.journal_bench not importable ({exc})")
        return None
    result: dict[str, Any] = await module.run_journal_bench(
        hosts=hosts, requests=requests, concurrency=concurrency, tmpdir=tmpdir, repeat=repeat
    )
    return result


async def amqp(
    reports: list[HostReport],
    specs: list[RequestSpec],
    concurrency: int,
    budget: float,
    notes: list[str],
    *,
    url: str | None = None,
) -> dict[str, Any] | None:
    """Placements end to end through RabbitMQ, ``concurrency`` callers at a time.

    The target figure (``placements_per_s``) is ONE SchedulerClient shared by
    the callers, which coalesces calls waiting at the same moment into one
    ``batch`` message; ``placements_per_s_64_clients`` is the same load
    through ``concurrency`` separate clients without batching (one message
    per call), as measured before batching existed. The service runs in this
    process on a fresh queue of its own (deleted afterwards) in front of a
    Scheduler that already knows ``reports``; the clients and the service
    share this event loop and its two cores.
    """
    try:
        import aio_pika

        from actorsched.amqp import DEFAULT_URL, SchedulerClient, SchedulerService
        from actorsched.amqp.service import dead_letter_names
    except ImportError as exc:
        notes.append(f"AMQP skipped: actorsched.amqp is not importable ({exc})")
        return None
    from actorsched import Scheduler

    from .measure import RunStats, feed_reports, place_timed, summarize_latencies

    url = url or os.environ.get("ACTORSCHED_AMQP_URL", DEFAULT_URL)
    queue = f"actorsched.bench.{uuid.uuid4().hex[:12]}"
    try:
        probe = await asyncio.wait_for(aio_pika.connect(url), timeout=5)
    except Exception as exc:
        notes.append(f"AMQP skipped: no broker at {url} ({exc!r}); start one with `make rabbitmq`")
        return None
    # each run places fresh instance uuids (a repeated uuid would be an
    # idempotent replay, cheaper than a placement); the unbatched run is
    # several times slower, so it gets a fifth of them
    split = len(specs) - len(specs) // 5
    try:
        async with Scheduler(bench_config()) as scheduler:
            await feed_reports(scheduler.update_host, reports)
            async with SchedulerService(scheduler, url, queue=queue) as service:

                async def run(clients: list[Any], share: list[RequestSpec]) -> RunStats:
                    turn = itertools.count()

                    async def select(spec: RequestSpec) -> object:
                        return await clients[next(turn) % len(clients)].select_destinations(spec)

                    # a short warm-up, so connection set-up is not timed
                    warm_up = share[:concurrency]
                    await place_timed(select, warm_up, concurrency=concurrency, budget=1)
                    return await place_timed(
                        select, share[concurrency:], concurrency=concurrency, budget=budget
                    )

                async with SchedulerClient(url, queue=queue, timeout=60) as shared:
                    messages_before = service.accepted
                    stats = await run([shared], specs[:split])
                    messages = service.accepted - messages_before
                async with contextlib.AsyncExitStack() as stack:
                    separate = [
                        await stack.enter_async_context(
                            SchedulerClient(url, queue=queue, timeout=60, batch=False)
                        )
                        for _ in range(concurrency)
                    ]
                    separate_stats = await run(separate, specs[split:])
    finally:
        with contextlib.suppress(Exception):
            channel = await probe.channel()
            dlx, dead = dead_letter_names(queue)
            await channel.queue_delete(queue)
            await channel.queue_delete(dead)
            await channel.exchange_delete(dlx)
        await probe.close()
    separate_latency = summarize_latencies(separate_stats.latencies)
    return {
        "hosts": len(reports),
        "concurrency": concurrency,
        "clients": 1,
        "calls": stats.calls,
        "placed": stats.placed,
        "no_valid_host": stats.no_valid_host,
        "errors": stats.errors,
        "placements_per_s": stats.rate,
        # AMQP request messages per call, warm-up included (1.0 = no batching)
        "messages_per_call": messages / max(stats.calls + concurrency, 1),
        **summarize_latencies(stats.latencies),
        f"placements_per_s_{concurrency}_clients": separate_stats.rate,
        f"p99_ms_{concurrency}_clients": separate_latency["p99_ms"],
    }
