"""The realistic section of ``make bench``: actorsched on the realistic mix, and real Nova.

For each host count it generates the realistic workload
(:mod:`benchmarks.realistic`), fills the cluster to 90 % with actorsched
``repeat`` times at each concurrency (median requests/s), puts the plain
workload's figure of the same run beside it, and, when Nova's venv is there
(``make nova-venv``), runs real Nova's scheduler code
(:mod:`benchmarks.nova_real`) on a prefix of the same events in a subprocess
within a time budget, then actorsched on exactly the requests Nova got
through, for the ratio; and, as a cross-check of the two runners, both fill
a 100-host cluster to the line on the same events (their placed and
NoValidHost counts should nearly agree).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .progress import Progress
from .realistic import Components, generate, write
from .realistic_run import build_specs, run_actorsched

__all__ = ["DEFAULT_NOVA_PYTHON", "nova_subprocess", "realistic_section"]

_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_NOVA_PYTHON = _ROOT / ".venv-nova" / "bin" / "python"


async def nova_subprocess(
    python: Path, workload: dict[str, Any], budget: float, *, max_events: int
) -> dict[str, Any]:
    """Real Nova on the first ``max_events`` events, in its own venv: its JSON figures."""
    prefix = {**workload, "events": workload["events"][:max_events]}
    with tempfile.TemporaryDirectory(prefix="actorsched-nova-") as tmp:
        path = await asyncio.to_thread(write, prefix, Path(tmp) / "workload.json")
        process = await asyncio.create_subprocess_exec(
            str(python),
            "-m",
            "benchmarks.nova_real",
            str(path),
            "--budget",
            str(budget),
            cwd=str(_ROOT),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), budget + 300)
    if process.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"exit {process.returncode}: {' | '.join(tail)}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def _median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["requests_per_s"] for r in runs]
    mid = sorted(runs, key=lambda r: r["requests_per_s"])[len(runs) // 2]
    return {
        **{k: mid[k] for k in ("scheduler", "hosts", "concurrency")},
        "requests_per_s": statistics.median(rates),
        "requests_per_s_runs": rates,
        **{
            k: mid[k]
            for k in (
                "requests",
                "placed",
                "instances",
                "no_valid_host",
                "reports",
                "elapsed_s",
                "fill",
                "reached_fill",
            )
        },
    }


def _plain(placements: Sequence[dict[str, Any]], hosts: int, concurrency: int) -> float | None:
    for p in placements:
        if (p["scheduler"], p["hosts"], p["concurrency"]) == ("actorsched", hosts, concurrency):
            return float(p["placements_per_s"])
    return None


async def realistic_section(
    hosts: Sequence[int],
    concurrency: Sequence[int],
    repeat: int,
    placements: Sequence[dict[str, Any]],
    notes: list[str],
    progress: Progress,
    *,
    components: Components | None = None,
    nova_python: Path | None = DEFAULT_NOVA_PYTHON,
    nova_budget: float = 60.0,
    nova_max_events: int = 20_000,
    crosscheck_hosts: int = 100,
) -> dict[str, Any]:
    """The realistic rows, the plain figures beside them, and real Nova's when it is there."""
    rows: list[dict[str, Any]] = []
    nova_rows: list[dict[str, Any]] = []
    nova_ok = nova_python is not None and await asyncio.to_thread(nova_python.exists)
    if nova_python is None:
        notes.append("real Nova not measured: --no-nova")
    elif not nova_ok:
        notes.append(
            f"real Nova not measured: no Nova venv at {nova_python} (make nova-venv makes one)"
        )
    for n in hosts:
        progress.detail(f"realistic workload, {n:,} hosts: generating")
        workload = await asyncio.to_thread(generate, n, components=components)
        specs = await asyncio.to_thread(build_specs, workload)
        for conc in concurrency:
            runs = []
            for r in range(repeat):
                progress.detail(f"realistic, {n:,} hosts x {conc} callers, run {r + 1}")
                runs.append(await run_actorsched(workload, concurrency=conc, specs=specs))
            row = _median_row(runs)
            plain = _plain(placements, n, conc)
            row["plain_placements_per_s"] = plain
            row["realistic_over_plain"] = row["requests_per_s"] / plain if plain else None
            rows.append(row)
        if nova_ok:
            assert nova_python is not None
            progress.detail(f"real Nova, {n:,} hosts, {nova_budget:.0f}s budget")
            try:
                nova = await nova_subprocess(
                    nova_python, workload, nova_budget, max_events=nova_max_events
                )
            except Exception as exc:  # not installed whole, or broken: say so once
                notes.append(f"real Nova at {n:,} hosts failed: {type(exc).__name__}: {exc}")
                nova_ok = False
                continue
            same = [
                await run_actorsched(workload, concurrency=1, limit=nova["requests"], specs=specs)
                for _ in range(5)  # a short run (Nova's few requests): five, the median
            ]
            ours = statistics.median(r["requests_per_s"] for r in same)
            nova["actorsched_same_events_per_s"] = ours
            nova["actorsched_same_events_no_valid_host"] = same[0]["no_valid_host"]
            nova["ratio"] = ours / nova["requests_per_s"] if nova["requests_per_s"] else None
            nova_rows.append(nova)
    crosscheck = None
    if nova_ok and crosscheck_hosts:
        assert nova_python is not None
        progress.detail(
            f"real Nova and actorsched, both to the fill line, {crosscheck_hosts} hosts"
        )
        crosscheck = await _optional_crosscheck(
            nova_python, generate(crosscheck_hosts, components=components), notes
        )
    return {
        "components": repr(components or Components()),
        "rows": rows,
        "nova": nova_rows,
        "crosscheck": crosscheck,
    }


async def _optional_crosscheck(
    nova_python: Path, workload: dict[str, Any], notes: list[str]
) -> dict[str, Any] | None:
    """Both schedulers fill the same small cluster to the line: their counts side by side
    (the two runners read the events alike when these agree)."""
    keys = ("requests", "placed", "instances", "no_valid_host", "reports", "fill")
    try:
        nova = await nova_subprocess(
            nova_python, workload, 300.0, max_events=len(workload["events"])
        )
    except Exception as exc:
        notes.append(f"real Nova cross-check failed: {type(exc).__name__}: {exc}")
        return None
    ours = await run_actorsched(workload)
    return {
        "hosts": len(workload["hosts"]),
        "nova": {k: nova[k] for k in (*keys, "reached_fill", "requests_per_s")},
        "actorsched": {k: ours[k] for k in (*keys, "reached_fill", "requests_per_s")},
    }
