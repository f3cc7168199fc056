"""The instruction counter (``python -m benchmarks.instructions``) at tiny sizes.

Its workloads run directly here (no valgrind); one real valgrind count
checks the arithmetic where valgrind is installed.
"""

from __future__ import annotations

import shutil

import pytest

from benchmarks import instructions


@pytest.mark.parametrize("kind", instructions.KINDS)
@pytest.mark.parametrize("run", [True, False])
def test_each_workload_builds_and_runs(kind: str, run: bool) -> None:
    instructions._child(kind, 30, 40, run)


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        instructions.count_instructions("zones", 10, 5)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_placement_costs_a_plausible_number_of_instructions() -> None:
    # the interpreter, imports and the cluster's setup cancel out: what is left
    # is one placement, tens to hundreds of thousands of instructions
    each = instructions.count_instructions("plain", 20, 20)
    assert 20_000 < each < 2_000_000
