"""The pytest plugin of ``make mutate``: which tests run, and what each did.

Loaded with ``-p mutate_plugin`` (the coverage run: the environment says
where to write) or handed to ``pytest.main`` (each mutant's run). It

* keeps only the tests named in ``MUTATE_SELECT`` (a file of node ids, one
  a line) when that is set, in their collection order;
* writes each test's outcome and time (setup, call and teardown together)
  as JSON to ``MUTATE_RESULTS`` at the end of the session;
* makes Hypothesis repeatable: the same examples in every run (derandomized,
  no example database), so the coverage map holds for each mutant's run and
  a failure found for one mutant is not replayed against the next.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

PROFILE = "actorsched-mutate"


class MutatePlugin:
    def __init__(self, selected: frozenset[str] | None, results: Path | None) -> None:
        self.selected = selected
        self.results = results
        self.outcomes: dict[str, dict[str, Any]] = {}

    @classmethod
    def from_env(cls) -> MutatePlugin:
        select = os.environ.get("MUTATE_SELECT")
        results = os.environ.get("MUTATE_RESULTS")
        selected = frozenset(Path(select).read_text().split("\n")) - {""} if select else None
        return cls(selected, Path(results) if results else None)

    def pytest_configure(self, config: pytest.Config) -> None:
        from hypothesis import settings

        settings.register_profile(PROFILE, database=None, derandomize=True, print_blob=False)
        settings.load_profile(PROFILE)

    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.selected is None:
            return
        kept = [item for item in items if item.nodeid in self.selected]
        dropped = [item for item in items if item.nodeid not in self.selected]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0})
        entry["duration"] += report.duration
        if report.failed:
            entry["outcome"] = "failed"
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "skipped"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.results is not None:
            self.results.write_text(json.dumps(self.outcomes))


def pytest_configure(config: pytest.Config) -> None:
    """Loaded by ``-p mutate_plugin``: register the plugin the environment describes."""
    config.pluginmanager.register(MutatePlugin.from_env(), "actorsched-mutate")
