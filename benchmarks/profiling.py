"""Where the time of a placement goes: a pyinstrument profile, bucketed by layer.

pyinstrument samples Python stacks, so time spent inside a NumPy ufunc is
charged to the Python frame that called it (a filter's ``filter_all``, the
ranking's ``_ranked``); C calls and NumPy's own Python wrappers are charged
the same way here. :func:`breakdown` then buckets each frame's self time by
the file it belongs to: asyncio's own code, pydantic, the
actorsched filters and weighers (vectorized NumPy work), the rest of the
engine (per-request Python bookkeeping), the actor and facade, and the
benchmark's own callers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["breakdown", "format_breakdown"]

# first match wins: (bucket, substring of the frame's file path, function names or None)
_BUCKETS: tuple[tuple[str, str, frozenset[str] | None], ...] = (
    ("filters (numpy)", "actorsched/core/filters.py", None),
    ("weighers (numpy)", "actorsched/core/weighers.py", None),
    ("ranking: filter/weigh loop (numpy)", "actorsched/core/ranking.py", None),
    ("ranking: filter/weigh loop (numpy)", "actorsched/core/table.py", frozenset({"extremes"})),
    ("engine: claims and bookkeeping", "actorsched/core/", None),
    ("actor and facade", "actorsched/actor.py", None),
    ("actor and facade", "actorsched/scheduler.py", None),
    ("pydantic", "/pydantic", None),
    ("asyncio event loop", "/asyncio/", None),
    ("asyncio event loop", "selectors.py", None),
    ("benchmark callers", "/benchmarks/", None),
)


def _bucket(file_path: str | None, function: str) -> str:
    path = (file_path or "").replace("\\", "/")
    for name, fragment, functions in _BUCKETS:
        if fragment in path and (functions is None or function in functions):
            return name
    return "other"


def _frames(frame: Any) -> Iterator[Any]:
    stack = [frame]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _charged_to(frame: Any) -> Any:
    """The frame whose layer pays for ``frame``: C calls and NumPy's Python wrappers
    count for the code that called them (a ufunc.reduce under ``_ranked`` is ranking)."""
    current = frame
    while current is not None:
        path = (current.file_path or "").replace("\\", "/")
        if not current.is_synthetic and "/" in path and "/numpy/" not in path:
            return current
        current = getattr(current, "parent", None)
    return frame


def breakdown(root: Any) -> dict[str, float]:
    """Seconds of self time per bucket under pyinstrument ``root`` frame."""
    totals: dict[str, float] = {}
    for frame in _frames(root):
        own = float(frame.time) - sum(float(c.time) for c in frame.children)
        if own <= 0:
            continue
        payer = _charged_to(frame)
        name = _bucket(payer.file_path, payer.function)
        totals[name] = totals.get(name, 0.0) + own
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def format_breakdown(totals: dict[str, float]) -> str:
    whole = sum(totals.values()) or 1.0
    lines = [f"  {name:<36} {sec:8.3f}s {100 * sec / whole:5.1f}%" for name, sec in totals.items()]
    return "\n".join(lines)
