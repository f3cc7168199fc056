"""PNG plots of a run: throughput against hosts, and latency distributions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["write_plots"]


def write_plots(
    results: dict[str, Any],
    latencies: Mapping[tuple[str, int, int], NDArray[np.float64]],
    out: Path,
) -> list[Path]:
    """Write ``throughput.png`` and ``latency.png`` next to ``out``; return their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    folder = out.parent
    written: list[Path] = []
    machine = results["meta"]["machine"]
    subtitle = f"{machine['cpu']}, {machine['cores']} cores, Python {machine['python']}"

    # throughput against hosts, one line per scheduler and concurrency
    fig, ax = plt.subplots(figsize=(8, 5))
    series: dict[str, list[tuple[int, float]]] = {}
    for p in results.get("placements", []):
        label = f"{p['scheduler']} ({p['concurrency']} caller{'s' if p['concurrency'] > 1 else ''})"
        series.setdefault(label, []).append((p["hosts"], p["placements_per_s"]))
    core = results.get("core_placements", [])
    if core:
        series["core alone, no asyncio"] = [(int(c["hosts"]), c["placements_per_s"]) for c in core]
    for label, points in series.items():
        points.sort()
        style = "-o" if label.startswith("actorsched") else ("--x" if "core" in label else ":s")
        ax.plot([h for h, _ in points], [r for _, r in points], style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("hosts")
    ax.set_ylabel("placements per second")
    ax.set_title(f"Placement throughput\n{subtitle}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = folder / "throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # latency: empirical CDFs of actorsched at each host count, one panel per concurrency
    ours = {k: v for k, v in latencies.items() if k[0] == "actorsched" and v.size}
    concurrencies = sorted({k[2] for k in ours})
    if concurrencies:
        fig, axes = plt.subplots(
            1, len(concurrencies), figsize=(4 * len(concurrencies), 4), squeeze=False
        )
        for ax, conc in zip(axes[0], concurrencies, strict=True):
            for (_, hosts, c), lat in sorted(ours.items()):
                if c != conc:
                    continue
                ms = np.sort(lat) * 1e3
                ax.plot(ms, np.arange(1, ms.size + 1) / ms.size, label=f"{hosts:,} hosts")
            ax.set_xscale("log")
            # plain numbers at 1 and 3 of each decade (the default minor labels overlap)
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 3.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("latency (ms)")
            ax.set_ylabel("fraction of calls")
            ax.axhline(0.99, color="grey", lw=0.6, ls="--")
            ax.set_title(f"{conc} concurrent caller{'s' if conc > 1 else ''}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"actorsched select_destinations latency (CDF)\n{subtitle}", fontsize=10)
        fig.tight_layout()
        path = folder / "latency.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
