"""What hostile input costs the owner: a flood of reports that each bring 1,000 new trait names.

Before the vocabulary was bounded, 2,000 such reports grew the trait bitset
to 488 MiB and took 666 ms a report. Now the first report fills most of the
vocabulary (``max_traits``, 1,024 names) and the rest are refused before any
change: this measures the time per report and the resident memory it adds.
"""

from __future__ import annotations

import resource
import statistics
import time
from typing import Any

from actorsched import InvalidRequest
from actorsched.core import SchedulerCore

from .workload import bare_report, bench_config

__all__ = ["trait_flood"]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def trait_flood(reports: int = 2_000, traits_per_report: int = 1_000) -> dict[str, Any]:
    """Apply ``reports`` reports of ``traits_per_report`` new trait names each, one at a time."""
    core = SchedulerCore(bench_config())
    floods = [
        bare_report(f"flood{n:05d}", traits=[f"T{n}-{k}" for k in range(traits_per_report)])
        for n in range(reports)
    ]
    before = _rss_mib()
    times: list[float] = []
    refused = 0
    for report in floods:
        started = time.perf_counter()
        try:
            core.update_host(report, 1.0)
        except InvalidRequest:
            refused += 1
        times.append(time.perf_counter() - started)
    return {
        "reports": reports,
        "traits_per_report": traits_per_report,
        "refused": refused,
        "vocabulary": len(core.table.trait_names),
        "per_report_ms_median": statistics.median(times) * 1000,
        "per_report_ms_max": max(times) * 1000,
        "peak_rss_growth_mib": _rss_mib() - before,
        "bitset_mib": core.table.traits.nbytes / 2**20,
    }
