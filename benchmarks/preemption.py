"""Preempting placements: how long one takes when every host is full, against a
plain placement on the same cluster, in the same process.

Each host (8,192 MB) holds four claims of 2,048 MB, of priorities 0 to 3.
A preempting request (4,096 MB, priority 10) fits nowhere and frees one
host: the search weighs ``preemption_candidates`` candidates (100), chooses
by kube-scheduler's order and releases two claims. After each one, two
claims of priority 0 are placed back on the host it freed (as the evicted
instances would be rescheduled), so every measure sees full hosts. The
baseline is a plain placement of 1 MB on the same cluster, one after the
other: the ratio is what preempting costs more than placing.

    python -m benchmarks.preemption --hosts 10000 --requests 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from actorsched import HostReport, RequestSpec, Scheduler, SchedulerConfig

__all__ = ["main", "run_preemption"]

_HOST_MB = 8_192
_CLAIM_MB = 2_048
_PRIORITIES = (0, 1, 2, 3)
_PREEMPTOR_MB = 4_096
_PREEMPTOR_PRIORITY = 10


def _spec(uuid: str, memory_mb: int, priority: int = 0, **fields: Any) -> RequestSpec:
    return RequestSpec(
        instance_uuids=[uuid], memory_mb=memory_mb, vcpus=1, disk_gb=0, priority=priority, **fields
    )


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


async def _one_run(hosts: int, requests: int, seed: int) -> dict[str, Any]:
    config = SchedulerConfig(
        seed=seed,
        preemption=True,
        max_instances_per_host=10**6,
        max_io_ops_per_host=10**6,
        max_claims=10**7,
    )
    async with Scheduler(config) as s:
        reports = [
            HostReport(host=f"p{i}", generation=1, memory_mb=_HOST_MB + 1, memory_mb_used=0,
                       vcpus=10**4, vcpus_used=0, local_gb=10**5, local_gb_used=0)
            for i in range(hosts)
        ]  # fmt: skip
        await s.update_hosts(reports)
        for start in range(0, hosts, 250):  # four claims per host, by priority
            await asyncio.gather(
                *(
                    s.select_destinations(_spec(f"c{i}-{p}", _CLAIM_MB, p, force_hosts=[f"p{i}"]))
                    for i in range(start, min(hosts, start + 250))
                    for p in _PRIORITIES
                )
            )
        preempting: list[float] = []
        plain: list[float] = []
        victims = 0
        for n in range(requests):
            began = time.perf_counter()
            await s.select_destinations(_spec(f"plain{n}", 1))  # 1 MB left on each host
            plain.append((time.perf_counter() - began) * 1e3)
            await s.release(f"plain{n}")
            began = time.perf_counter()
            [selection] = await s.select_destinations(
                _spec(f"high{n}", _PREEMPTOR_MB, _PREEMPTOR_PRIORITY)
            )
            preempting.append((time.perf_counter() - began) * 1e3)
            victims += len(selection.preempted)
            # the host is full again with priority 0 claims (the evicted ones come back)
            await s.release(selection.instance_uuid)
            for k in range(2):
                await s.select_destinations(
                    _spec(f"back{n}-{k}", _CLAIM_MB, 0, force_hosts=[selection.host])
                )
    return {
        "preempting_p50_ms": statistics.median(preempting),
        "preempting_p99_ms": _percentile(preempting, 0.99),
        "plain_p50_ms": statistics.median(plain),
        "victims_per_preemption": victims / requests,
    }


async def run_preemption(
    hosts: int = 10_000, requests: int = 200, *, repeat: int = 3
) -> dict[str, Any]:
    """Medians over ``repeat`` runs of the preempting and the plain latencies."""
    runs = [await _one_run(hosts, requests, seed) for seed in range(repeat)]
    p50 = statistics.median(r["preempting_p50_ms"] for r in runs)
    plain = statistics.median(r["plain_p50_ms"] for r in runs)
    return {
        "hosts": hosts,
        "requests": requests,
        "preempting_p50_ms": p50,
        "preempting_p99_ms": statistics.median(r["preempting_p99_ms"] for r in runs),
        "plain_p50_ms": plain,
        "ratio": p50 / plain,
        "victims_per_preemption": statistics.median(r["victims_per_preemption"] for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.preemption", description=__doc__)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    result = asyncio.run(run_preemption(args.hosts, args.requests, repeat=args.repeat))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
