"""The README's embedded example is real code: run it and check what it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _first_python_block() -> str:
    match = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert match is not None, "README has no python example"
    return match.group(1)


def test_readme_embedded_example_runs_and_places() -> None:
    code = _first_python_block()
    assert "async with Scheduler()" in code
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("vm-1 -> compute-1")
    assert lines[1].startswith("vm-2 -> compute-1")
    # 64 GB host, 2 GB used, vm-2 (4 GB) still claimed after vm-1 was released
    assert lines[2] == str(65536 - 2048 - 4096)
