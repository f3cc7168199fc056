"""Resident memory of a Scheduler holding N hosts, measured in a fresh process.

The parent benchmark has allocated hundreds of MB by the time it gets here,
and freed memory is rarely given back to the OS, so its RSS says nothing
about the scheduler. :func:`measure_rss` therefore starts a new interpreter
(``python -m benchmarks.memory N``) that imports everything, notes its RSS,
feeds N host reports through the Scheduler API one chunk at a time (the
reports are dropped as they are applied, so only what the scheduler keeps
stays resident), and prints the RSS before and after as JSON.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["measure_rss"]

_ROOT = Path(__file__).resolve().parent.parent


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _fill(hosts: int, chunk: int = 1_000) -> dict[str, float]:
    from actorsched import Scheduler

    from .workload import bench_config, make_reports

    make_reports(10)  # warm the generator and pydantic before the baseline reading
    gc.collect()
    before = _rss_mib()
    async with Scheduler(bench_config()) as scheduler:
        for start in range(0, hosts, chunk):
            batch = make_reports(min(chunk, hosts - start), seed=start + 1)
            renamed = [
                r.model_copy(update={"host": f"node{start + i:06d}"}) for i, r in enumerate(batch)
            ]
            await asyncio.gather(*(scheduler.update_host(r) for r in renamed))
            del batch, renamed
        gc.collect()
        after = _rss_mib()
        count = scheduler.host_count
    return {
        "hosts": float(count),
        "rss_before_mib": before,
        "rss_after_mib": after,
        "rss_delta_mib": after - before,
    }


def measure_rss(hosts: int, *, timeout: float = 600.0) -> dict[str, float]:
    """Run :func:`_fill` in a new interpreter and return its readings."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", str(hosts)],
        cwd=_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory probe failed ({done.returncode}): {done.stderr.strip()}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_fill(int(sys.argv[1])))))
