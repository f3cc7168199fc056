"""``actorsched bench`` / ``make bench``: every figure the README quotes, in one process.

What one run measures, on the same hosts and requests for every scheduler:

* placements/s and p50/p99 latency of the embedded ``Scheduler`` at each host
  count (``--hosts``) and number of concurrent callers (``--concurrency``),
  default filters and weighers, every host considered; the core alone
  (no asyncio) at the same sizes, to show what the actor costs;
* the baselines from :mod:`actorsched.baselines` (``LockedHostManager``,
  ``UnsynchronizedHostManager`` with its over-commit count, the Nova-style
  per-host filter chain), each with its ratio to actorsched;
* host reports applied per second (Scheduler API and core alone);
* resident memory of 100,000 hosts, in a fresh process;
* the journal on against off, and AMQP end to end, when those have landed;
* the realistic mix (:mod:`benchmarks.realistic`): requests/s filling an
  empty cluster to 90 % beside the plain workload's figure, and real
  OpenStack Nova's scheduler code on the same events when ``make nova-venv``
  has made its venv (:mod:`benchmarks.realbench`);
* boots through Nova 34's own functional environment (API, conductor, 20 fake
  computes, Placement, the broker), with Nova's scheduler and with actorsched
  side by side: boots/s and the scheduler's share of a boot, from the two runs'
  RESULT documents (:mod:`benchmarks.nova_boots`; not in ``--quick``);
* Nova's own client calling ``select_destinations`` against actorsched's Nova
  endpoint, the same requests on its native protocol, and Nova 34's own
  ``nova-scheduler`` on a SQLite cell of the same 1,000 hosts
  (:mod:`benchmarks.nova_manager`; not in ``--quick``).

It prints a progress bar on stderr, a summary with PASS/FAIL per target on
stdout, and writes a JSON file and PNG plots (``--out``). Every figure is a
median of ``--repeat`` runs; ratios compare runs made in this same process.

Example::

    actorsched bench --hosts 1000,10000 --repeat 3 --profile
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from actorsched import HostReport, NoValidHost, RequestSpec, Scheduler
from actorsched.amqp.service import DEFAULT_URL as DEFAULT_AMQP_URL
from actorsched.core import SchedulerCore

from . import integrations, nova_boots, nova_endpoint, nova_manager
from .auth_cost import auth_cost
from .failover import failover
from .hostile import body_flood, trait_flood
from .measure import (
    RunStats,
    count_over_capacity,
    feed_reports,
    place_timed,
    summarize_latencies,
)
from .memory import measure_rss
from .preemption import run_preemption
from .progress import Progress
from .realbench import DEFAULT_NOVA_PYTHON, realistic_section
from .realistic import Components
from .report import evaluate_targets, format_summary
from .stall import host_states_stall
from .waiting import run_waiting
from .workload import bench_config, capacity_requests, make_reports, make_specs, next_generation

__all__ = ["add_arguments", "main"]

_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = _ROOT / "benchmarks" / "results" / "latest.json"
DOCS_DIR = _ROOT / "docs" / "bench"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
# hosts, caller processes, calls each: Nova's nova-scheduler spends about 0.4 s of CPU a
# call at 1,000 hosts (5 s at 10,000: python -m benchmarks.nova_manager --hosts 10000)
NOVA_MANAGER_SIZE = (1_000, 2, 10)
_T = TypeVar("_T")


# -- options -------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v.replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 100,1000; got {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers; got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actorsched bench``."""
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and budgets (the smoke test)"
    )
    parser.add_argument(
        "--hosts", type=_int_list, default=None, help="host counts (default 100,1000,10000,100000)"
    )
    parser.add_argument(
        "--concurrency", type=_int_list, default=None, help="concurrent callers (default 1,64,1000)"
    )
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure (median); 3")
    parser.add_argument(
        "--seconds", type=float, default=None, help="time budget of one placement run (2.0)"
    )
    parser.add_argument(
        "--baseline-seconds",
        type=float,
        default=None,
        help="time budget of one baseline run (3.0); baselines are slow, so fewer requests",
    )
    parser.add_argument(
        "--memory-hosts", type=int, default=None, help="hosts for the RSS probe (100000)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON file ({DEFAULT_OUT})")
    parser.add_argument(
        "--copy-to-docs",
        action="store_true",
        help=f"copy the JSON, plots and profile to {DOCS_DIR}",
    )
    parser.add_argument("--no-baselines", action="store_true", help="skip the baselines")
    parser.add_argument("--no-amqp", action="store_true", help="skip the AMQP end-to-end run")
    parser.add_argument("--no-journal", action="store_true", help="skip journal on/off")
    parser.add_argument(
        "--stall-hosts",
        type=int,
        default=None,
        help="hosts for the host_states owner-stall probe (1000000)",
    )
    parser.add_argument("--no-stall", action="store_true", help="skip the owner-stall probe")
    parser.add_argument(
        "--no-failover",
        action="store_true",
        help="skip the fail-over of an active/standby pair (needs PostgreSQL)",
    )
    parser.add_argument(
        "--journal-url",
        default=os.environ.get("ACTORSCHED_BENCH_PG_URL", DEFAULT_PG_URL),
        help="PostgreSQL for the fail-over run (default $ACTORSCHED_BENCH_PG_URL or %(default)s)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the RSS probe")
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile placements at 10,000 hosts with pyinstrument (text file beside the JSON)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--realistic-hosts",
        type=_int_list,
        default=None,
        help="host counts of the realistic workload, filled to 90%% (default 1000,10000)",
    )
    parser.add_argument("--no-realistic", action="store_true", help="skip the realistic workload")
    parser.add_argument(
        "--no-waiting", action="store_true", help="skip the waiting requests (wake-up latency)"
    )
    parser.add_argument(
        "--no-preemption", action="store_true", help="skip the preempting placements (latency)"
    )
    parser.add_argument(
        "--realistic-repeat",
        type=int,
        default=None,
        help="fills per realistic figure (median; default --repeat). One fill of 10,000 "
        "hosts is about 230,000 requests, some 40 s",
    )
    parser.add_argument(
        "--realistic-mix",
        default="",
        help='components of the realistic mix, e.g. "-groups" or "none,zones,reports" '
        "(default all but aggregates)",
    )
    parser.add_argument(
        "--nova-python",
        type=Path,
        default=DEFAULT_NOVA_PYTHON,
        help=f"the Python of Nova's venv, for real Nova (default {DEFAULT_NOVA_PYTHON}; "
        "make nova-venv)",
    )
    parser.add_argument(
        "--nova-budget", type=float, default=None, help="seconds real Nova gets per host count (60)"
    )
    parser.add_argument("--no-nova", action="store_true", help="skip real Nova")
    parser.add_argument(
        "--no-nova-boots",
        action="store_true",
        help="skip the boots through Nova's functional environment (about 5 minutes; "
        "never in --quick)",
    )
    parser.add_argument(
        "--no-nova-manager",
        action="store_true",
        help="skip Nova's nova-scheduler against the Nova endpoint (about 30 s; never in --quick)",
    )


@dataclass(slots=True)
class Plan:
    hosts: list[int]
    concurrency: list[int]
    repeat: int
    seconds: float
    baseline_seconds: float
    memory_hosts: int
    report_hosts: int
    journal_hosts: int
    journal_requests: int
    amqp_hosts: int
    profile_hosts: int
    stall_hosts: int
    failover_hosts: int
    failover_claims: int
    failover_rounds: int
    realistic_hosts: list[int]
    realistic_concurrency: list[int]
    nova_budget: float


def make_plan(args: argparse.Namespace) -> Plan:
    quick = bool(args.quick)
    hosts = args.hosts or ([50, 300] if quick else [100, 1_000, 10_000, 100_000])
    concurrency = args.concurrency or ([1, 16] if quick else [1, 64, 1_000])
    repeat = args.repeat or (1 if quick else 3)
    if repeat < 1:
        raise SystemExit(f"--repeat must be at least 1, got {repeat}")
    return Plan(
        hosts=sorted(set(hosts)),
        concurrency=sorted(set(concurrency)),
        repeat=repeat,
        seconds=args.seconds or (0.15 if quick else 2.0),
        baseline_seconds=args.baseline_seconds or (0.15 if quick else 3.0),
        memory_hosts=args.memory_hosts or (2_000 if quick else 100_000),
        report_hosts=500 if quick else 10_000,
        journal_hosts=200 if quick else 10_000,
        journal_requests=200 if quick else 10_000,
        amqp_hosts=300 if quick else 1_000,
        profile_hosts=300 if quick else 10_000,
        stall_hosts=args.stall_hosts or (5_000 if quick else 1_000_000),
        failover_hosts=200 if quick else 10_000,
        failover_claims=1_000 if quick else 100_000,
        failover_rounds=2 if quick else 10,
        realistic_hosts=sorted(
            set(args.realistic_hosts or ([50, 300] if quick else [1_000, 10_000]))
        ),
        realistic_concurrency=[c for c in sorted(set(concurrency)) if c <= 64] or [1],
        nova_budget=args.nova_budget or (3.0 if quick else 60.0),
    )


# -- results -------------------------------------------------------------------


@dataclass(slots=True)
class Cell:
    """Repeated runs of one scheduler at one host count and concurrency."""

    scheduler: str
    hosts: int
    concurrency: int
    runs: list[RunStats] = field(default_factory=list)
    over_capacity_hosts: int | None = None

    def as_dict(self) -> dict[str, Any]:
        rates = [r.rate for r in self.runs]
        lat = [summarize_latencies(r.latencies) for r in self.runs]
        return {
            "scheduler": self.scheduler,
            "hosts": self.hosts,
            "concurrency": self.concurrency,
            "placements_per_s": statistics.median(rates) if rates else 0.0,
            "placements_per_s_runs": rates,
            "calls": sum(r.calls for r in self.runs),
            "placed": sum(r.placed for r in self.runs),
            "no_valid_host": sum(r.no_valid_host for r in self.runs),
            "errors": sum(r.errors for r in self.runs),
            **{k: statistics.median(d[k] for d in lat) if lat else 0.0 for k in _LAT_KEYS},
            "over_capacity_hosts": self.over_capacity_hosts,
        }

    def key(self) -> tuple[str, int, int]:
        return (self.scheduler, self.hosts, self.concurrency)

    def latencies(self) -> NDArray[np.float64]:
        return np.concatenate([r.latencies for r in self.runs]) if self.runs else np.zeros(0)


_LAT_KEYS = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")


# -- the measurements ----------------------------------------------------------


async def _open(stack: contextlib.AsyncExitStack, obj: Any) -> Any:
    if hasattr(obj, "__aenter__"):
        return await stack.enter_async_context(obj)
    return obj


async def _scheduler_cell(
    make: Callable[[], Any],
    reports: Sequence[HostReport],
    specs: Sequence[RequestSpec],
    concurrency: int,
    budget: float,
    progress: Progress,
    *,
    check_capacity: bool,
) -> tuple[RunStats, int | None]:
    """Feed a fresh scheduler the hosts, then time placements on it."""
    async with contextlib.AsyncExitStack() as stack:
        scheduler = await _open(stack, make())
        await feed_reports(scheduler.update_host, reports, concurrency=64, progress=progress)
        stats = await place_timed(
            scheduler.select_destinations,
            specs,
            concurrency=concurrency,
            budget=budget,
            progress=progress,
        )
        over = None
        if check_capacity:
            over = count_over_capacity(await scheduler.host_states(), bench_config())
    return stats, over


def _core_cell(
    reports: Sequence[HostReport], specs: Sequence[RequestSpec], budget: float
) -> dict[str, float]:
    """The core alone, no asyncio: host inserts/s and placements/s."""
    core = SchedulerCore(bench_config())
    now = time.time()
    t0 = time.perf_counter()
    for report in reports:
        core.update_host(report, now)
    inserted = time.perf_counter() - t0
    placed = calls = 0
    t0 = time.perf_counter()
    deadline = t0 + budget
    for spec in specs:
        try:
            core.select_destinations(spec, now)
            placed += 1
        except NoValidHost:
            pass
        calls += 1
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - t0
    return {
        "hosts": float(len(reports)),
        "host_inserts_per_s": len(reports) / inserted if inserted else 0.0,
        "placements_per_s": calls / elapsed if elapsed else 0.0,
        "calls": float(calls),
        "placed": float(placed),
    }


async def _host_report_rates(
    reports: Sequence[HostReport], repeat: int, progress: Progress
) -> dict[str, float]:
    """Reports applied per second on hosts already known (the steady state)."""
    generations = [list(reports)]
    for _ in range(2 * repeat):
        generations.append(next_generation(generations[-1]))
    core_rates: list[float] = []
    core = SchedulerCore(bench_config())
    now = time.time()
    for report in generations[0]:
        core.update_host(report, now)
    for gen in generations[1 : repeat + 1]:
        t0 = time.perf_counter()
        applied = sum(core.update_host(r, now) for r in gen)
        core_rates.append(applied / (time.perf_counter() - t0))
    one: list[float] = []
    many: list[float] = []
    batched: list[float] = []
    for _ in range(repeat):
        generations.append(next_generation(generations[-1]))
    async with Scheduler(bench_config()) as scheduler:
        await feed_reports(scheduler.update_host, generations[0], progress=progress)
        for r in range(repeat):
            applied, secs = await feed_reports(
                scheduler.update_host, generations[1 + 2 * r], concurrency=1, progress=progress
            )
            one.append(applied / secs)
            applied, secs = await feed_reports(
                scheduler.update_host, generations[2 + 2 * r], concurrency=64, progress=progress
            )
            many.append(applied / secs)
        # then whole batches in one message each (later generations, so none is stale)
        for gen in generations[2 * repeat + 1 :]:
            t0 = time.perf_counter()
            applied = 0
            for start in range(0, len(gen), 1_000):
                applied += sum(await scheduler.update_hosts(gen[start : start + 1_000]))
            batched.append(applied / (time.perf_counter() - t0))
    return {
        "hosts": float(len(reports)),
        "core_per_s": statistics.median(core_rates),
        "scheduler_1_caller_per_s": statistics.median(one),
        "scheduler_64_callers_per_s": statistics.median(many),
        "scheduler_update_hosts_1000_per_s": statistics.median(batched),
    }


async def _profile(
    reports: Sequence[HostReport],
    specs: Sequence[RequestSpec],
    budget: float,
    out_dir: Path,
    progress: Progress,
) -> dict[str, Any]:
    from pyinstrument import Profiler

    from .profiling import breakdown, format_breakdown

    async with Scheduler(bench_config()) as scheduler:
        await feed_reports(scheduler.update_host, reports, progress=progress)
        profiler = Profiler(interval=0.0005, async_mode="disabled")
        profiler.start()
        stats = await place_timed(
            scheduler.select_destinations, specs, concurrency=64, budget=budget, progress=progress
        )
        session = profiler.stop()
    buckets = breakdown(session.root_frame())
    path = out_dir / f"profile-{len(reports)}hosts.txt"
    header = (
        f"pyinstrument, {len(reports):,} hosts, 64 concurrent callers, "
        f"{stats.calls:,} placements in {stats.elapsed:.2f}s ({stats.rate:,.0f}/s)\n\n"
        f"self time by layer:\n{format_breakdown(buckets)}\n\n"
    )
    path.write_text(header + profiler.output_text(unicode=False, color=False, show_all=False))
    return {
        "path": str(path),
        "hosts": len(reports),
        "placements_per_s": stats.rate,
        "self_seconds_by_layer": buckets,
    }


# -- orchestration -------------------------------------------------------------


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    import os

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


def _steps(plan: Plan, args: argparse.Namespace, baselines: int) -> int:
    n = 1 + len(plan.hosts) * (len(plan.concurrency) * plan.repeat + 1 + baselines) + 1
    n += 0 if args.no_memory else 1
    n += 0 if args.no_journal else 1
    n += 0 if args.no_amqp else 2
    n += 0 if args.no_amqp or args.no_nova else 1
    n += 0 if _skip_nova_boots(args) else 1
    n += 0 if _skip_nova_manager(args) else 1
    n += 0 if args.no_failover else 1
    n += 0 if args.no_stall else 2
    n += 1 if args.profile else 0
    n += 0 if args.no_realistic else 1
    n += 0 if args.no_waiting else 1
    n += 0 if args.no_preemption else 1
    return n


def _skip_nova_boots(args: argparse.Namespace) -> bool:
    """Nova's functional environment needs the broker and Nova's venv, and 5 minutes."""
    return bool(args.no_amqp or args.no_nova or args.no_nova_boots or args.quick)


def _skip_nova_manager(args: argparse.Namespace) -> bool:
    """Nova's nova-scheduler needs the broker and Nova's venv, and about 30 seconds."""
    return bool(args.no_amqp or args.no_nova or args.no_nova_manager or args.quick)


def _pick_concurrency(concurrency: list[int], want: int) -> int:
    return min(concurrency, key=lambda c: abs(c - want))


async def _run(args: argparse.Namespace, plan: Plan) -> dict[str, Any]:
    out: Path = args.out
    await asyncio.to_thread(out.parent.mkdir, parents=True, exist_ok=True)
    found = [] if args.no_baselines else integrations.baselines()
    progress = Progress(_steps(plan, args, len(found)), enabled=not args.no_progress)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "meta": {
            "machine": _machine(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": "actorsched bench " + " ".join(sys.argv[2:] if len(sys.argv) > 2 else []),
            "plan": {k: getattr(plan, k) for k in plan.__dataclass_fields__},
            "config": bench_config().model_dump(),
        },
        "notes": [],
    }
    notes: list[str] = results["notes"]
    try:
        progress.step("building hosts and requests")
        all_reports = make_reports(
            max([*plan.hosts, plan.report_hosts, plan.profile_hosts, plan.amqp_hosts])
        )
        spec_count = min(capacity_requests(max(plan.hosts)), max(2_000, int(30_000 * plan.seconds)))
        all_specs = make_specs(spec_count)
        progress.advance()

        cells: list[Cell] = []
        core_rows: list[dict[str, float]] = []
        for hosts in plan.hosts:
            reports = all_reports[:hosts]
            specs = all_specs[: capacity_requests(hosts)]
            for conc in plan.concurrency:
                cell = Cell("actorsched", hosts, conc)
                for r in range(plan.repeat):
                    progress.step(f"actorsched {hosts:,} hosts x {conc} callers, run {r + 1}")
                    stats, over = await _scheduler_cell(
                        lambda: Scheduler(bench_config()),
                        reports,
                        specs,
                        conc,
                        plan.seconds,
                        progress,
                        check_capacity=r == plan.repeat - 1,
                    )
                    cell.runs.append(stats)
                    cell.over_capacity_hosts = over
                    progress.advance()
                cells.append(cell)
            progress.step(f"core alone, {hosts:,} hosts")
            core_rows.append(_core_cell(reports, specs, plan.seconds / 2))
            progress.advance()
            for baseline in found:
                conc = 1 if baseline.synchronous else _pick_concurrency(plan.concurrency, 64)
                progress.step(f"{baseline.name} {hosts:,} hosts x {conc} callers")
                cell = Cell(baseline.name, hosts, conc)
                try:
                    stats, over = await _scheduler_cell(
                        baseline.factory,
                        reports,
                        specs,
                        conc,
                        plan.baseline_seconds,
                        progress,
                        check_capacity=True,
                    )
                except Exception as exc:  # a baseline bug must not sink the whole run
                    notes.append(f"{baseline.name} at {hosts} hosts failed: {exc!r}")
                else:
                    cell.runs.append(stats)
                    cell.over_capacity_hosts = over
                    cells.append(cell)
                progress.advance()
        results["placements"] = [c.as_dict() for c in cells]
        results["core_placements"] = core_rows
        results["ratios"] = _ratios(results["placements"], plan)

        progress.step(f"host reports/s, {plan.report_hosts:,} hosts")
        results["host_reports"] = await _optional(
            "host reports/s",
            notes,
            _host_report_rates(all_reports[: plan.report_hosts], plan.repeat, progress),
        )
        progress.advance()

        if not args.no_memory:
            progress.step(f"RSS of {plan.memory_hosts:,} hosts (fresh process)")
            results["memory"] = await _optional(
                "RSS probe", notes, asyncio.to_thread(measure_rss, plan.memory_hosts)
            )
            progress.advance()

        if not args.no_journal:
            progress.step("journal on vs off")
            with tempfile.TemporaryDirectory(prefix="actorsched-bench-") as tmp:
                results["journal"] = await _optional(
                    "journal on vs off",
                    notes,
                    integrations.journal(
                        plan.journal_hosts,
                        plan.journal_requests,
                        64,
                        Path(tmp),
                        notes,
                        repeat=plan.repeat,
                    ),
                )
            progress.advance()

        if not args.no_amqp and not args.no_nova:
            hosts, callers, calls = (1_000, 2, 30) if args.quick else (10_000, 4, 150)
            progress.step(
                f"Nova's client through the Nova endpoint against native, {hosts:,} hosts"
            )
            results["nova_endpoint"] = await _optional(
                "the Nova endpoint",
                notes,
                nova_endpoint.run(hosts, callers, calls, nova_python=args.nova_python),
            )
            progress.advance()

        if not _skip_nova_manager(args):
            hosts, callers, calls = NOVA_MANAGER_SIZE
            progress.step(f"Nova's nova-scheduler against the Nova endpoint, {hosts:,} hosts")
            results["nova_manager"] = await _optional(
                "Nova's nova-scheduler against the Nova endpoint",
                notes,
                nova_manager.run(hosts, callers, calls, nova_python=args.nova_python),
            )
            progress.advance()

        if not _skip_nova_boots(args):
            progress.step(
                "boots through Nova 34's functional environment: Nova's scheduler, then actorsched"
            )
            results["nova_boots"] = await _optional(
                "Nova boots", notes, nova_boots.boots(args.nova_python, notes)
            )
            progress.advance()

        # what serve's authorization adds to each message (in-process pairs, no broker)
        results["auth_cost"] = auth_cost(5_000 if args.quick else 20_000)
        if not args.no_amqp:
            progress.step("AMQP end to end, 64 callers on one shared SchedulerClient")
            results["amqp"] = await _optional(
                "AMQP end to end",
                notes,
                integrations.amqp(
                    all_reports[: plan.amqp_hosts],
                    all_specs[: capacity_requests(plan.amqp_hosts)],
                    64,
                    max(plan.seconds, 0.5 if args.quick else 3.0),
                    notes,
                ),
            )
            progress.advance()

            flood = (4, 16) if args.quick else (16, 64)
            progress.step(f"body flood: {flood[0]} bodies of {flood[1]} MiB sent to serve")
            results["body_flood"] = await _optional(
                "body flood",
                notes,
                body_flood(
                    os.environ.get("ACTORSCHED_AMQP_URL", DEFAULT_AMQP_URL),
                    bodies=flood[0],
                    body_mib=flood[1],
                ),
            )
            progress.advance()

        if not args.no_stall:
            progress.step("trait flood: 2,000 reports of 1,000 new trait names")
            results["trait_flood"] = await _optional(
                "trait flood", notes, asyncio.to_thread(trait_flood, 200 if args.quick else 2_000)
            )
            progress.advance()

            progress.step(f"host_states owner stall at {plan.stall_hosts:,} hosts")
            results["host_states_stall"] = await _optional(
                "host_states stall",
                notes,
                asyncio.to_thread(host_states_stall, plan.stall_hosts, repeat=plan.repeat),
            )
            progress.advance()

        if not args.no_failover:
            progress.step(
                f"fail-over of a pair: {plan.failover_hosts:,} hosts, "
                f"{plan.failover_claims:,} claims, {plan.failover_rounds} x kill -9"
            )
            results["failover"] = await _optional(
                "fail-over",
                notes,
                failover(
                    os.environ.get("ACTORSCHED_AMQP_URL", DEFAULT_AMQP_URL),
                    args.journal_url,
                    hosts=plan.failover_hosts,
                    claims=plan.failover_claims,
                    rounds=plan.failover_rounds,
                ),
            )
            progress.advance()

        if not args.no_realistic:
            progress.step(
                f"realistic workload to 90% at {', '.join(f'{h:,}' for h in plan.realistic_hosts)}"
                " hosts, and real Nova"
            )
            results["realistic"] = await _optional(
                "realistic workload",
                notes,
                realistic_section(
                    plan.realistic_hosts,
                    plan.realistic_concurrency,
                    args.realistic_repeat or plan.repeat,
                    results["placements"],
                    notes,
                    progress,
                    components=Components.parse(args.realistic_mix),
                    nova_python=None if args.no_nova else args.nova_python,
                    nova_budget=plan.nova_budget,
                    crosscheck_hosts=20 if args.quick else 100,
                ),
            )
            progress.advance()

        if not args.no_waiting:
            hosts, requests = (100, 1_000) if args.quick else (1_000, 20_000)
            progress.step(f"waiting requests: 10% of {requests:,} wait for room, {hosts:,} hosts")
            results["waiting"] = await _optional(
                "waiting requests",
                notes,
                run_waiting(hosts, requests, repeat=1 if args.quick else plan.repeat),
            )
            progress.advance()

        if not args.no_preemption:
            hosts, requests = (100, 20) if args.quick else (10_000, 200)
            progress.step(f"preempting placements: {requests:,} on {hosts:,} full hosts")
            results["preemption"] = await _optional(
                "preemption",
                notes,
                run_preemption(hosts, requests, repeat=1 if args.quick else plan.repeat),
            )
            progress.advance()

        if args.profile:
            progress.step(f"profiling {plan.profile_hosts:,} hosts")
            results["profile"] = await _optional(
                "profile",
                notes,
                _profile(
                    all_reports[: plan.profile_hosts],
                    all_specs[: capacity_requests(plan.profile_hosts)],
                    max(plan.seconds, 1.0),
                    out.parent,
                    progress,
                ),
            )
            progress.advance()

        results["targets"] = evaluate_targets(results)
        results["meta"]["duration_s"] = time.perf_counter() - started
        if not args.no_plots:
            progress.step("plots")
            from .plots import write_plots

            latencies = {c.key(): c.latencies() for c in cells}
            plots = await asyncio.to_thread(write_plots, results, latencies, out)
            results["plots"] = [str(p) for p in plots]
        progress.advance()
    finally:
        progress.close()
    return results


async def _optional(what: str, notes: list[str], work: Awaitable[_T]) -> _T | None:
    """Run one optional part; a failure becomes a note, and the other figures still count."""
    try:
        return await work
    except Exception as exc:
        notes.append(f"{what} failed: {type(exc).__name__}: {exc}")
        return None


def _ratios(placements: list[dict[str, Any]], plan: Plan) -> list[dict[str, Any]]:
    """actorsched / baseline at the same hosts (and the same concurrency, when it has one)."""
    ours = {
        (p["hosts"], p["concurrency"]): p["placements_per_s"]
        for p in placements
        if p["scheduler"] == "actorsched"
    }
    rows = []
    for p in placements:
        if p["scheduler"] == "actorsched" or not p["placements_per_s"]:
            continue
        mine = ours.get((p["hosts"], p["concurrency"]))
        if mine is None:
            continue
        rows.append(
            {
                "baseline": p["scheduler"],
                "hosts": p["hosts"],
                "concurrency": p["concurrency"],
                "actorsched_per_s": mine,
                "baseline_per_s": p["placements_per_s"],
                "ratio": mine / p["placements_per_s"],
            }
        )
    return rows


def main(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 even when a target fails (the summary says which)."""
    plan = make_plan(args)
    results = asyncio.run(_run(args, plan))
    args.out.write_text(json.dumps(results, indent=1, default=float) + "\n")
    print(format_summary(results))
    print(f"\nresults: {args.out}")
    for plot in results.get("plots", []):
        print(f"plot:    {plot}")
    if args.copy_to_docs:
        DOCS_DIR.mkdir(parents=True, exist_ok=True)
        profile = results.get("profile") or {}
        extras = [Path(profile["path"])] if profile.get("path") else []
        for src in [args.out, *map(Path, results.get("plots", [])), *extras]:
            shutil.copy2(src, DOCS_DIR / Path(src).name)
        print(f"copied to {DOCS_DIR}")
    return 0


def _cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(_cli())
