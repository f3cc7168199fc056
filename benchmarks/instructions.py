"""CPU instructions per placement and per host report, counted by valgrind.

Wall-clock figures on a shared VM swing by up to 2x from run to run, so a
change of a few percent cannot be seen in them. ``valgrind --tool=callgrind``
counts the instructions the process executes instead, which repeats to
within 0.01% when BLAS runs single-threaded, string hashing is seeded and
the garbage collector has frozen the setup's objects. Each figure is
(instructions with N operations - instructions with none) / N, so the
interpreter start and the cluster's setup cancel out.

Run: ``python -m benchmarks.instructions [--hosts 100,10000] [--requests 300]``
(about a minute per figure; valgrind must be installed).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["KINDS", "count_instructions"]

_ROOT = Path(__file__).resolve().parent.parent
# what one operation is: a placement of one kind of request, or one report
# applied in update_hosts batches of up to 1,000 distinct hosts
KINDS = ("plain", "zone", "trait", "report")


def _child(kind: str, hosts: int, operations: int, run: bool) -> None:
    """Build ``hosts`` hosts and ``operations`` operations of ``kind``; do them if ``run``.

    The run without them builds exactly the same, so the difference is the
    operations alone.
    """
    from actorsched import NoValidHost
    from actorsched.core import SchedulerCore

    from .workload import bench_config, make_reports, make_specs, next_generation

    reports = make_reports(hosts)
    core = SchedulerCore(bench_config())
    now = 1e9
    for report in reports:
        core.update_host(report, now)
    if kind == "report":
        # whole generations, each in batches of distinct hosts
        generations = [reports]
        while len(generations) * hosts < operations + hosts:
            generations.append(next_generation(generations[-1]))
        work = [r for generation in generations[1:] for r in generation][:operations]
        if not run:
            work = []
        size = min(1_000, hosts)
    else:
        specs = [
            s
            for s in make_specs(max(3_000, operations * 12))
            if kind
            == ("zone" if s.availability_zone else "trait" if s.required_traits else "plain")
        ]
        chosen = specs[:operations] if run else []
    gc.collect()
    gc.freeze()  # a full collection would walk the setup's objects: noise
    if kind == "report":
        for start in range(0, len(work), size):
            core.update_hosts(work[start : start + size], now)
    else:
        for spec in chosen:
            with contextlib.suppress(NoValidHost):
                core.select_destinations(spec, now)


def _collected(kind: str, hosts: int, operations: int, run: bool) -> int:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--child",
            kind,
            str(hosts),
            str(operations),
            "run" if run else "build",
        ],
        cwd=_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind run failed ({done.returncode}): {done.stderr[-500:]}")
    return int(found.group(1))


def count_instructions(kind: str, hosts: int, operations: int) -> float:
    """Instructions per operation of ``kind`` (see :data:`KINDS`) at ``hosts`` hosts."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if shutil.which("valgrind") is None:
        raise RuntimeError("valgrind is not installed (Debian: apt-get install valgrind)")
    done = _collected(kind, hosts, operations, True)
    return (done - _collected(kind, hosts, operations, False)) / operations


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("--hosts", default="100,10000", help="host counts (100,10000)")
    parser.add_argument("--requests", type=int, default=300, help="operations per figure (300)")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of {','.join(KINDS)}")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), int(args.child[2]), args.child[3] == "run")
        return 0
    print(f"{'operation':<10}{'hosts':>8}{'instructions each':>20}")
    for kind in args.kinds.split(","):
        for hosts in (int(h) for h in args.hosts.split(",")):
            n = args.requests * (10 if kind == "report" else 1)
            print(f"{kind:<10}{hosts:>8,}{count_instructions(kind, hosts, n):>20,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
