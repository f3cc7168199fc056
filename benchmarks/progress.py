"""A one-line progress bar on stderr: ``\\r`` and rewrite, no dependency."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """Steps done out of a known total, with the current step's label and detail.

    >>> p = Progress(3, enabled=False)
    >>> p.step("placements 100 hosts")
    >>> p.done
    0
    """

    def __init__(self, total: int, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.total = max(1, total)
        self.done = 0
        self.enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        self._label = ""
        self._started = time.perf_counter()
        self._last_draw = 0.0
        self._width = 0

    def step(self, label: str) -> None:
        """Start the next step (the previous one counts as done)."""
        self._label = label
        self._draw("", force=True)

    def advance(self) -> None:
        self.done = min(self.total, self.done + 1)
        self._draw("", force=True)

    def detail(self, text: str) -> None:
        """Update the detail shown after the label (redrawn at most 10 times a second)."""
        self._draw(text)

    def close(self) -> None:
        if self.enabled:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()

    def _draw(self, detail: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        cells = 24
        filled = cells * self.done // self.total
        bar = "#" * filled + "." * (cells - filled)
        line = (
            f"[{bar}] {self.done}/{self.total} {now - self._started:5.0f}s  {self._label}"
            f"{'  ' + detail if detail else ''}"
        )[:120]
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self._stream.write("\r" + line + " " * pad)
        self._stream.flush()
