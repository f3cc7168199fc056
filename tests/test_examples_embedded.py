"""examples/embedded.py runs and places its anti-affinity group on three hosts."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "embedded.py"


def load_example() -> ModuleType:
    module_spec = importlib.util.spec_from_file_location("embedded_example", EXAMPLE)
    assert module_spec is not None
    assert module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


async def test_example_spreads_the_group_and_releases_it() -> None:
    example = load_example()
    selections, states = await example.run()
    assert [s.instance_uuid for s in selections] == ["web-1", "web-2", "web-3"]
    assert len({s.host for s in selections}) == 3  # anti-affinity: three different hosts
    assert set(states) == set(example.HOSTS)
    # released: every host is back to its full free RAM and runs nothing
    for state in states.values():
        assert state.free_ram_mb == state.memory_mb - state.memory_mb_reserved
        assert state.num_instances == 0


def test_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    placed = [line for line in lines if " -> " in line]
    assert len(placed) == 3
    assert len({line.split(" -> ")[1].split()[0] for line in placed}) == 3
    assert "after release:" in lines


def test_main_prints_the_selections(capsys: pytest.CaptureFixture[str]) -> None:
    load_example().main()
    out = capsys.readouterr().out
    assert out.count(" -> ") == 3
    assert "instances 0" in out.split("after release:")[1]
