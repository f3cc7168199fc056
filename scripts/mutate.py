"""``make mutate``: a seeded sample of mutants of ``actorsched/core/`` against the fast tests.

The tool is mutmut 3 (``[tool.mutmut]`` in pyproject.toml says what it
mutates and which tests it runs). Chosen over cosmic-ray because it runs,
for each mutant, only the tests that reach the mutated function, in a
forked process with everything already imported: a mutant costs a fraction
of a second instead of a fresh pytest run, which is what lets a few hundred
mutants fit in a few minutes here.

Steps:

1. start clean (``mutants/`` removed), let mutmut write every mutant and
   learn which tests reach which function (it runs the tests once);
2. take ``--sample`` of the mutant names, chosen by ``random.Random(--seed)``
   from the sorted list, so that two runs of the same code compare;
3. run those, then print the score and each surviving mutant's diff.

A survivor that changes nothing a user can see is listed once in
``tests/mutation/equivalent.json`` with the reason. It is matched by its
function and its diff (not by mutmut's number, which moves when the
function changes), and left out of the score's denominator; any other
survivor is new, printed in full, and fails the run when the score is under
``--target``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.json"
MUTMUT = [sys.executable, "-m", "mutmut"]
KILLED = {"killed", "timeout", "segfault"}  # the tests noticed
_NUMBER = re.compile(r"__mutmut_\d+$")


@dataclass(frozen=True)
class Mutant:
    name: str
    status: str

    @property
    def function(self) -> str:
        return _NUMBER.sub("", self.name)


def _mutmut(*args: str, check: bool = True) -> str:
    env = {**os.environ, "ACTORSCHED_MUTATE": "1"}  # the stateful test runs fewer, fixed cases
    done = subprocess.run(
        [*MUTMUT, *args], cwd=ROOT, capture_output=True, text=True, check=False, env=env
    )
    if check and done.returncode != 0:
        sys.exit(f"mutmut {' '.join(args[:2])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def _results() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in _mutmut("results", "--all", "true").splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep:
            out[name] = status
    return out


def diff_of(name: str) -> tuple[list[str], list[str]]:
    """The lines a mutant removes and adds, stripped (its signature with its function)."""
    shown = _mutmut("show", name)
    removed = [
        ln[1:].strip()
        for ln in shown.splitlines()
        if ln.startswith("-") and not ln.startswith("---")
    ]
    added = [
        ln[1:].strip()
        for ln in shown.splitlines()
        if ln.startswith("+") and not ln.startswith("+++")
    ]
    return removed, added


def _load_equivalent() -> list[dict[str, object]]:
    if not EQUIVALENT.exists():
        return []
    entries: list[dict[str, object]] = json.loads(EQUIVALENT.read_text())
    return entries


def _is_listed(
    entries: list[dict[str, object]], mutant: Mutant, diff: tuple[list[str], list[str]]
) -> bool:
    return any(
        e["function"] == mutant.function and e["removed"] == diff[0] and e["added"] == diff[1]
        for e in entries
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=120, help="mutants to run (default 120)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--target", type=float, default=92.0, help="score to reach, in %% (92)")
    parser.add_argument("--max-children", type=int, default=2, help="mutants run at once (2)")
    parser.add_argument(
        "--only",
        default="",
        help="sample only mutants whose name holds one of these texts (comma-separated)",
    )
    parser.add_argument(
        "--list-survivors",
        action="store_true",
        help="print every survivor as a JSON entry for equivalent.json (reason left blank)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()

    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    # writes every mutant and maps tests to functions; asking for no mutant
    # by name makes it stop there (with an error we expect)
    _mutmut("run", "no-such-mutant", check=False)
    wanted = [part for part in args.only.split(",") if part] or [""]
    everything = sorted(name for name in _results() if any(w in name for w in wanted))
    if not everything:
        sys.exit(
            f"mutmut wrote no mutants{' matching ' + repr(args.only) if args.only else ''}: "
            "check [tool.mutmut] in pyproject.toml"
        )
    sample = sorted(random.Random(args.seed).sample(everything, min(args.sample, len(everything))))
    print(
        f"{len(everything)} mutants of actorsched/core/; running {len(sample)} (seed {args.seed})"
    )
    _mutmut("run", "--max-children", str(args.max_children), *sample, check=False)
    statuses = _results()
    mutants = [Mutant(name, statuses.get(name, "not checked")) for name in sample]

    entries = _load_equivalent()
    killed = [m for m in mutants if m.status in KILLED]
    survivors = [m for m in mutants if m.status not in KILLED]
    listed: list[Mutant] = []
    new: list[tuple[Mutant, tuple[list[str], list[str]]]] = []
    for m in survivors:
        diff = diff_of(m.name)
        if _is_listed(entries, m, diff):
            listed.append(m)
        else:
            new.append((m, diff))
    counted = len(mutants) - len(listed)
    score = 100.0 * len(killed) / counted if counted else 100.0
    raw = 100.0 * len(killed) / len(mutants)

    for m, diff in new:
        print(f"\nSURVIVED ({m.status}) {m.name}")
        for line in diff[0]:
            print(f"  - {line}")
        for line in diff[1]:
            print(f"  + {line}")
    if args.list_survivors:
        print(
            json.dumps(
                [
                    {"function": m.function, "removed": d[0], "added": d[1], "reason": ""}
                    for m, d in new
                ],
                indent=2,
                ensure_ascii=False,
            )
        )
    minutes = (time.monotonic() - started) / 60
    print(
        f"\nmutation score {score:.1f}% ({len(killed)} killed of {counted}; {len(listed)} "
        f"equivalent survivors left out, listed in {EQUIVALENT.relative_to(ROOT)}; "
        f"raw {raw:.1f}%), {len(new)} new survivors, {minutes:.1f} min"
    )
    return 0 if score >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
