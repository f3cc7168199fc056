"""Journal on against off: placements per second at a given number of concurrent callers.

The journal commits each batch the owner applied in one SQLite transaction
(WAL, ``synchronous=FULL``) on a writer thread, and callers wait for it; with
many concurrent callers the batches are large and the cost is shared, with
one caller at a time every placement pays a whole commit (an fsync).

Run alone: ``python -m benchmarks.journal_bench [hosts] [requests]`` prints
the figures for 1, 64 and 256 concurrent callers.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actorsched import NoValidHost, Scheduler

from .workload import bench_config, make_reports, make_specs

__all__ = ["run_journal_bench"]


async def _placements_per_s(
    hosts: int, requests: int, concurrency: int, journal: Path | None
) -> tuple[float, dict[str, float]]:
    reports = make_reports(hosts)
    specs = make_specs(requests)
    async with Scheduler(bench_config(), journal=journal) as s:
        for start in range(0, len(reports), 1_000):
            await s.update_hosts(reports[start : start + 1_000])
        it = iter(specs)
        placed = 0

        async def caller() -> None:
            nonlocal placed
            for spec in it:
                try:
                    await s.select_destinations(spec)
                except NoValidHost:
                    continue
                placed += 1

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(max(1, concurrency))))
        elapsed = time.perf_counter() - started
        extra: dict[str, float] = {}
        if s.journal is not None:
            stats = s.journal.stats
            extra = {
                "transactions": float(stats.transactions),
                "batches_per_transaction": stats.batches / max(1, stats.transactions),
                "records_per_transaction": stats.records / max(1, stats.transactions),
            }
    return placed / elapsed if elapsed > 0 else 0.0, extra


async def run_journal_bench(
    hosts: int, requests: int, concurrency: int, tmpdir: Path, *, repeat: int = 1
) -> dict[str, Any]:
    """Placements/s with the journal off and on, for ``concurrency`` concurrent callers.

    Off and on run in turns, ``repeat`` pairs, so both see the same spells
    of a noisy machine. Returns the medians ``placements_per_s_off`` and
    ``placements_per_s_on``, ``ratio`` (the median of the pairs' on/off),
    ``ratios`` (every pair's), ``concurrency`` and the last on-run's journal
    ``transactions``, ``batches_per_transaction`` and
    ``records_per_transaction``. The journal files are made in ``tmpdir``
    and deleted afterwards.
    """
    offs: list[float] = []
    ons: list[float] = []
    extra: dict[str, float] = {}
    for _ in range(max(1, repeat)):
        off, _ = await _placements_per_s(hosts, requests, concurrency, None)
        path = Path(tmpdir) / f"journal-bench-{concurrency}-{time.monotonic_ns()}.sqlite"
        try:
            on, extra = await _placements_per_s(hosts, requests, concurrency, path)
        finally:
            _delete(path)
        offs.append(off)
        ons.append(on)
    ratios = [on / off if off else 0.0 for off, on in zip(offs, ons, strict=True)]
    return {
        "concurrency": float(concurrency),
        "placements_per_s_off": statistics.median(offs),
        "placements_per_s_on": statistics.median(ons),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        **extra,
    }


def _delete(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def _main(hosts: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for concurrency in (1, 64, 256):
            figures = await run_journal_bench(hosts, requests, concurrency, Path(tmp))
            print(
                f"{concurrency:>4} callers: off {figures['placements_per_s_off']:9,.0f}/s  "
                f"on {figures['placements_per_s_on']:9,.0f}/s  ratio {figures['ratio']:.2f}  "
                f"({figures.get('batches_per_transaction', 0):.1f} batches, "
                f"{figures.get('records_per_transaction', 0):.0f} records per transaction)"
            )


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(_main(*(args + [1_000, 5_000][len(args) :])))
