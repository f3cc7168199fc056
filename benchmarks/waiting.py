"""Waiting requests under load: placements/s while a share of the requests wait for room,
and the wake-up latency (from the release that frees room to the waiter's answer).

The cluster is filled with resident claims of 1,024 MB to 1,024 MB free per host.
Plain requests (1 MB) fit at once; a waiting request (1,025 MB, ``wait``) fits
nowhere until a resident is released, and each release frees room for exactly
one of them (the freer releases only while a request waits). A freer task
releases random residents, one after the other, each once the request the last
one woke has its answer, while 64 callers send the requests. The same requests with no waiters,
in the same process, are the baseline of the ratio.

    python -m benchmarks.waiting --hosts 1000 --requests 20000
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import time
from typing import Any

from actorsched import HostReport, RequestSpec, Scheduler, SchedulerConfig

__all__ = ["main", "run_waiting"]

_HOST_MB = 8_192
_RESIDENT_MB = 1_024
_PLAIN_MB = 1
_WAITING_MB = _RESIDENT_MB + 1  # fits only where a resident's room was freed


def _config(requests: int) -> SchedulerConfig:
    return SchedulerConfig(
        seed=0,
        max_instances_per_host=10**6,
        max_io_ops_per_host=10**6,
        max_waiting_requests=max(1_000, requests),
        max_claims=10**7,
    )


async def _fill(s: Scheduler, hosts: int) -> list[str]:
    reports = [
        HostReport(host=f"w{i}", generation=1, memory_mb=_HOST_MB, memory_mb_used=0,
                   vcpus=10**4, vcpus_used=0, local_gb=10**5, local_gb_used=0)
        for i in range(hosts)
    ]  # fmt: skip
    await s.update_hosts(reports)
    per_host = _HOST_MB // _RESIDENT_MB - 1  # leaves one resident's room free
    residents = [f"r{i}" for i in range(hosts * per_host)]
    for start in range(0, len(residents), 1_000):
        await asyncio.gather(
            *(
                s.select_destinations(
                    RequestSpec(instance_uuids=[u], memory_mb=_RESIDENT_MB, vcpus=1, disk_gb=0)
                )
                for u in residents[start : start + 1_000]
            )
        )
    return residents


async def _one_run(
    hosts: int, requests: int, waiting_share: float, callers: int, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    async with Scheduler(_config(requests)) as s:
        residents = await _fill(s, hosts)
        kinds = ["wait" if rng.random() < waiting_share else "plain" for _ in range(requests)]
        waiters = kinds.count("wait")
        latencies: list[float] = []
        woken: asyncio.Queue[float] = asyncio.Queue()
        done = asyncio.Event()
        answered = 0

        async def caller(share: list[tuple[int, str]]) -> None:
            nonlocal answered
            for i, kind in share:
                if kind == "plain":
                    spec = RequestSpec(
                        instance_uuids=[f"p{i}"], memory_mb=_PLAIN_MB, vcpus=1, disk_gb=0
                    )
                    await s.select_destinations(spec)
                else:
                    spec = RequestSpec(
                        instance_uuids=[f"q{i}"], memory_mb=_WAITING_MB, vcpus=1, disk_gb=0
                    )
                    await s.select_destinations(spec, wait=60.0)
                    woken.put_nowait(time.perf_counter())
                answered += 1
            if answered == requests:
                done.set()

        async def freer() -> None:
            order = residents[:]
            rng.shuffle(order)
            for uuid in order[:waiters]:
                for _ in itertools.count():  # free room only for a request that waits for it
                    if s.pending_requests or done.is_set():
                        break
                    await asyncio.sleep(0)
                if done.is_set():
                    return
                released = time.perf_counter()
                await s.release(uuid)
                answered_at = await woken.get()  # the one request this release made room for
                latencies.append((answered_at - released) * 1e3)

        work = list(enumerate(kinds))
        started = time.perf_counter()
        await asyncio.gather(freer(), *(caller(work[c::callers]) for c in range(callers)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": requests,
        "waiting": waiters,
        "placements_per_s": requests / elapsed,
        "wake_p50_ms": statistics.median(latencies) if latencies else None,
        "wake_p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        if latencies
        else None,
    }


async def run_waiting(
    hosts: int = 1_000,
    requests: int = 20_000,
    *,
    waiting_share: float = 0.1,
    callers: int = 64,
    repeat: int = 3,
) -> dict[str, Any]:
    """Medians of ``repeat`` runs with ``waiting_share`` of waiting requests, and of
    the same requests with none (the plain baseline), in this process."""
    mixed = [
        await _one_run(hosts, requests, waiting_share, callers, seed) for seed in range(repeat)
    ]
    plain = [await _one_run(hosts, requests, 0.0, callers, seed) for seed in range(repeat)]
    with_waiters = statistics.median(r["placements_per_s"] for r in mixed)
    without = statistics.median(r["placements_per_s"] for r in plain)
    p50 = [r["wake_p50_ms"] for r in mixed if r["wake_p50_ms"] is not None]
    p99 = [r["wake_p99_ms"] for r in mixed if r["wake_p99_ms"] is not None]
    return {
        "hosts": hosts,
        "requests": requests,
        "waiting_share": waiting_share,
        "callers": callers,
        "placements_per_s": with_waiters,
        "plain_placements_per_s": without,
        "ratio": with_waiters / without,
        "wake_p50_ms": statistics.median(p50) if p50 else None,
        "wake_p99_ms": statistics.median(p99) if p99 else None,
        "waiting_requests": statistics.median(r["waiting"] for r in mixed),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.waiting", description=__doc__)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    result = asyncio.run(run_waiting(args.hosts, args.requests, repeat=args.repeat))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
