"""``make mutate``: a seeded sample of mutants of the core, each against the tests that run it.

What is mutated: every module of ``actorsched/core/`` and ``actorsched/actor.py``,
with the changes :mod:`mutants` lists (operators, comparisons, ``and``/``or``,
constants, defaults, deleted statements, ``return None``). The sample is
``--sample`` of all of them (120), drawn by ``random.Random(--seed)``; the
default seed is the day's date (``20250131``), so no fixed sample can be
tuned to, and a run is repeated by naming its seed.

How, in order (``mutants/report.txt`` keeps the report):

1. a copy of the work tree, so that edits made during the run change nothing;
2. the tests (``--tests``, ``tests/core`` and ``tests/actor``) once under
   coverage.py with a context per test (pytest-cov's ``--cov-context=test``),
   in ``--jobs`` processes: the per-test coverage map, and which tests pass
   (one that fails unmutated is left out, and named);
3. each mutant against the passing tests that run one of its lines, fastest
   file first, stopping at the first failure (``-x``). A change that runs when
   its module is imported (a module constant, a class attribute such as a
   dataclass field's default, a decorator) has no test context: it runs
   against every test. A parameter's default runs against the tests of its
   function's body. A line no test runs is a survivor without a run. Each
   mutant runs in a process forked from one that has imported pytest, NumPy
   and pydantic, with the mutated module served by an import hook (no file
   is written), and is killed, and counted as caught, past its time bound;
4. the score: the raw one (killed / sampled: every survivor counts, listed as
   equivalent or not) beside the one without the survivors
   ``tests/mutation/equivalent.json`` lists as equivalent (each matched by its
   file and its line before and after the change, not by its place); then
   each survivor with its file, line and change.

The run fails (exit 1) when the raw score is under ``--target`` (92 %).
"""

from __future__ import annotations

# the forked runs share one copy of these libraries' threads: one each
import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import importlib.abc  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from collections.abc import Iterable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from mutants import Mutant, mutants_of  # noqa: E402

ROOT = HERE.parent
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.json"
REPORT = ROOT / "mutants" / "report.txt"
MUTATED = ("actorsched/core/*.py", "actorsched/actor.py")
TESTS = ("tests/core", "tests/actor")
# imported once, before any fork: what each run would import again (not actorsched)
PRELOAD = (
    "numpy",
    "pydantic",
    "pydantic_settings",
    "prometheus_client",
    "psutil",
    "asyncio",
    "hypothesis",
    "pytest",
    "psycopg",
    "sqlite3",
    "ssl",
    "ctypes",
    "concurrent.futures",
    "http.server",
    "wsgiref.simple_server",
)
_IGNORED = shutil.ignore_patterns(
    ".git",
    ".venv*",
    "mutants",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "*.egg-info",
    ".coverage*",
)
KILLED = {"killed", "timeout", "crashed", "broken"}  # the tests noticed
_CHILD_FAILED = 70  # the forked run's own error, not the tests'
_CONFTEST_BROKEN = "ImportError while loading conftest"


# -- what to run ----------------------------------------------------------------------


def population(tree: Path, patterns: Sequence[str] = MUTATED) -> list[Mutant]:
    """Every mutant of the modules ``patterns`` name under ``tree``, file by file."""
    files = sorted({p for pattern in patterns for p in tree.glob(pattern)})
    found: list[Mutant] = []
    for path in files:
        found.extend(mutants_of(path.relative_to(tree).as_posix(), path.read_text()))
    return found


def draw(pool: Sequence[Mutant], size: int, seed: int) -> list[Mutant]:
    """``size`` mutants of ``pool`` chosen by ``seed``, in the pool's order."""
    chosen = random.Random(seed).sample(range(len(pool)), min(size, len(pool)))
    return [pool[i] for i in sorted(chosen)]


def default_seed(today: datetime.date | None = None) -> int:
    """The day's date as a number (20250131): a new sample each day."""
    return int((today or datetime.date.today()).strftime("%Y%m%d"))


@dataclass
class CoverageMap:
    """Which passing test runs which line, from one run of the tests under coverage."""

    by_line: dict[str, dict[int, frozenset[str]]]  # file -> line -> test node ids
    executed: dict[str, frozenset[int]]  # file -> every line run (by a test or an import)
    durations: dict[str, float]  # passing test -> seconds
    failing: list[str] = field(default_factory=list)  # failed unmutated: left out

    def tests_for(self, mutant: Mutant) -> tuple[str, frozenset[str]]:
        """How ``mutant`` is covered ("tests", "import" or "none") and the tests to run."""
        passing = frozenset(self.durations)
        if mutant.definition:
            return "import", passing
        lines = range(mutant.cover[0], mutant.cover[1] + 1)
        of_file = self.by_line.get(mutant.path, {})
        tests = frozenset().union(*(of_file.get(n, frozenset()) for n in lines)) & passing
        if tests:
            return "tests", tests
        if any(n in self.executed.get(mutant.path, frozenset()) for n in lines):
            return "import", passing  # run only while the tests were collected
        return "none", frozenset()


def read_coverage(
    tree: Path, data_files: Iterable[Path], outcomes: dict[str, dict[str, object]]
) -> CoverageMap:
    """The map of coverage data files (contexts ``nodeid|run`` ...) and test outcomes."""
    from coverage import CoverageData

    passing = {
        nodeid: float(entry["duration"])  # type: ignore[arg-type]
        for nodeid, entry in outcomes.items()
        if entry["outcome"] == "passed"
    }
    failing = sorted(n for n, e in outcomes.items() if e["outcome"] == "failed")
    by_line: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    executed: dict[str, set[int]] = defaultdict(set)
    root = tree.resolve()
    for data_file in data_files:
        data = CoverageData(basename=str(data_file))
        data.read()
        for measured in data.measured_files():
            path = Path(measured).resolve()
            if not path.is_relative_to(root):
                continue
            rel = path.relative_to(root).as_posix()
            for line, contexts in data.contexts_by_lineno(measured).items():
                executed[rel].add(line)
                for context in contexts:
                    nodeid = context.rpartition("|")[0] if "|" in context else context
                    if nodeid in passing:
                        by_line[rel][line].add(nodeid)
    return CoverageMap(
        {f: {n: frozenset(t) for n, t in lines.items()} for f, lines in by_line.items()},
        {f: frozenset(lines) for f, lines in executed.items()},
        passing,
        failing,
    )


def test_files(tree: Path, where: Sequence[str]) -> list[str]:
    found: set[str] = set()
    for place in where:
        path = tree / place
        if path.is_file():
            found.add(place)
        else:
            found.update(p.relative_to(tree).as_posix() for p in path.rglob("test_*.py"))
    return sorted(found)


def shards(files: Sequence[str], tree: Path, count: int) -> list[list[str]]:
    """``files`` in ``count`` groups of about the same size (largest first)."""
    groups: list[list[str]] = [[] for _ in range(max(1, count))]
    sizes = [0] * len(groups)
    for name in sorted(files, key=lambda f: -(tree / f).stat().st_size):
        at = sizes.index(min(sizes))
        groups[at].append(name)
        sizes[at] += (tree / name).stat().st_size
    return [g for g in groups if g]


def _env(tree: Path, **more: str) -> dict[str, str]:
    path = [str(HERE), str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "ACTORSCHED_MUTATE": "1", "PYTHONPATH": os.pathsep.join(path), **more}


def map_coverage(
    tree: Path, work: Path, files: Sequence[str], jobs: int, source: str = "actorsched"
) -> CoverageMap:
    """Run ``files`` once under coverage of package ``source`` (``jobs`` processes at
    a time): the per-test map."""
    running = []
    for index, group in enumerate(shards(files, tree, jobs)):
        data, results = work / f"coverage.{index}", work / f"baseline.{index}.json"
        log = (work / f"baseline.{index}.log").open("w")
        command = [
            sys.executable,
            "-m",
            "pytest",
            *group,
            "-p",
            "mutate_plugin",
            "-p",
            "no:cacheprovider",
            f"--cov={source}",
            "--cov-context=test",
            "--cov-report=",
            "-q",
        ]
        env = _env(tree, COVERAGE_FILE=str(data), MUTATE_RESULTS=str(results))
        process = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
        running.append((process, data, results, log))
    outcomes: dict[str, dict[str, object]] = {}
    for process, _, results, log in running:
        process.wait()
        log.close()
        if not results.exists():
            sys.exit(f"the coverage run wrote no results; see {log.name}")
        outcomes.update(json.loads(results.read_text()))
    return read_coverage(tree, [d for _, d, _, _ in running], outcomes)


# -- running one mutant -----------------------------------------------------------------


class _MutantLoader(importlib.machinery.SourceFileLoader):
    """Loads one module from mutated source text: no bytecode read or written."""

    def __init__(self, fullname: str, path: str, source: str) -> None:
        super().__init__(fullname, path)
        self.source = source

    def get_data(self, path: str) -> bytes:
        if path == self.path:
            return self.source.encode()
        raise OSError(path)  # its cached bytecode: never

    def set_data(self, path: str, data: object, *, _mode: int = 0o666) -> None:
        return None


class _MutantFinder(importlib.abc.MetaPathFinder):
    def __init__(self, fullname: str, path: str, source: str) -> None:
        self.fullname, self.path, self.source = fullname, path, source

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.fullname:
            return None
        loader = _MutantLoader(fullname, self.path, self.source)
        return importlib.util.spec_from_file_location(fullname, self.path, loader=loader)


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass
class Run:
    """One mutant's run: what it ran and what came of it."""

    mutant: Mutant
    covered: str  # tests, import, none
    tests: list[str]  # node ids, in the order run
    budget: float  # seconds before it is killed
    status: str = "not run"  # killed, timeout, crashed, broken, survived, not covered, error
    failed: str = ""  # the first test that failed
    seconds: float = 0.0


def plan(mutant: Mutant, coverage: CoverageMap) -> Run:
    covered, tests = coverage.tests_for(mutant)
    durations = coverage.durations
    by_file: dict[str, list[str]] = defaultdict(list)
    for nodeid in tests:
        by_file[nodeid.partition("::")[0]].append(nodeid)
    cost = {f: sum(durations[n] for n in ids) for f, ids in by_file.items()}
    ordered = [n for f in sorted(by_file, key=lambda f: (cost[f], f)) for n in by_file[f]]
    budget = 60.0 + 3.0 * sum(cost.values())
    run = Run(mutant, covered, ordered, budget)
    if covered == "none":
        run.status = "not covered"
    return run


def _child(run: Run, tree: Path, work: Path, index: int) -> int:
    """In the forked process: the mutant's tests, against the mutated module."""
    import pytest
    from mutate_plugin import MutatePlugin

    os.setpgid(0, 0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    log = os.open(work / f"mutant.{index}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.chdir(tree)
    sys.path.insert(0, str(tree))
    mutant = run.mutant
    path = tree / mutant.path
    source = mutant.apply(path.read_text())
    sys.meta_path.insert(0, _MutantFinder(module_name(mutant.path), str(path), source))
    files = list(dict.fromkeys(n.partition("::")[0] for n in run.tests))
    plugin = MutatePlugin(frozenset(run.tests), work / f"mutant.{index}.json")
    args = [*files, "-x", "-q", "-p", "no:cacheprovider", "-p", "no:cov", "--no-header"]
    # hypothesis was imported before the fork: its asserts are not rewritten (nor need be)
    args += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
    return int(pytest.main(args, plugins=[plugin]))


def _outcome(run: Run, code: int, work: Path, index: int) -> None:
    def log_text() -> str:
        return (work / f"mutant.{index}.log").read_text(errors="replace")

    results = work / f"mutant.{index}.json"
    failed = []
    if results.exists():
        outcomes = json.loads(results.read_text())
        failed = [n for n, e in outcomes.items() if e["outcome"] == "failed"]
    run.failed = failed[0] if failed else ""
    if code == 0:
        run.status = "survived"
    elif code == 1:
        run.status = "killed"
    elif code in (2, 3) or (code == 4 and _CONFTEST_BROKEN in log_text()):
        # interrupted (an import the mutant broke), pytest's own error, or a
        # conftest that could not import the mutated package: caught at import
        run.status = "broken"
    elif code < 0:
        run.status = "crashed"  # a signal
    else:  # 4: usage, 5: no test collected, 70: this script's own error: the run is wrong
        run.status = "error"
        run.failed = log_text()[-2000:]


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_all(runs: Sequence[Run], tree: Path, work: Path, jobs: int, progress: bool) -> None:
    """Each run in a forked process, ``jobs`` at a time. Interrupted (Ctrl-C, SIGTERM),
    it stops the runs under way and leaves those not finished "not run"."""
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        _run_all(runs, tree, work, jobs, progress)
    except KeyboardInterrupt:
        print("interrupted: the report counts the mutants that ran", flush=True)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_all(runs: Sequence[Run], tree: Path, work: Path, jobs: int, progress: bool) -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    pending = [(i, r) for i, r in enumerate(runs) if r.status == "not run"]
    pending.reverse()
    total = len(pending)
    active: dict[int, tuple[int, Run, float]] = {}
    try:
        _loop(pending, active, total, tree, work, jobs, progress)
    finally:
        for pid in active:  # interrupted: stop the runs under way
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _loop(
    pending: list[tuple[int, Run]],
    active: dict[int, tuple[int, Run, float]],
    total: int,
    tree: Path,
    work: Path,
    jobs: int,
    progress: bool,
) -> None:
    done = 0
    while pending or active:
        while pending and len(active) < jobs:
            index, run = pending.pop()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = _CHILD_FAILED
                try:
                    code = _child(run, tree, work, index)
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            with contextlib.suppress(OSError):  # the child does it too: whichever is first
                os.setpgid(pid, pid)
            active[pid] = (index, run, time.monotonic())
        time.sleep(0.05)
        for pid, (index, run, started) in list(active.items()):
            finished, status = os.waitpid(pid, os.WNOHANG)
            elapsed = time.monotonic() - started
            if finished == 0 and elapsed > run.budget:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                run.status = "timeout"
            elif finished == 0:
                continue
            else:
                _outcome(run, os.waitstatus_to_exitcode(status), work, index)
            run.seconds = elapsed
            del active[pid]
            done += 1
            if progress:
                by = f" by {run.failed}" if run.status == "killed" and run.failed else ""
                print(
                    f"  [{done}/{total}] {run.status:8} "
                    f"{run.mutant.path}:{run.mutant.line} ({len(run.tests)} tests, "
                    f"{elapsed:.0f} s){by}",
                    flush=True,
                )


# -- the score -------------------------------------------------------------------------------


def load_equivalent(path: Path = EQUIVALENT) -> list[dict[str, str]]:
    if not path.exists():
        return []
    entries: list[dict[str, str]] = json.loads(path.read_text())
    return entries


def listed(entries: Sequence[dict[str, str]], mutant: Mutant) -> dict[str, str] | None:
    """The entry of ``entries`` that lists ``mutant`` as equivalent, if one does."""
    for entry in entries:
        if (entry["file"], entry["before"], entry["after"]) == (
            mutant.path,
            mutant.before,
            mutant.after,
        ):
            return entry
    return None


@dataclass
class Score:
    sampled: int
    killed: int
    equivalent: int  # survivors listed as equivalent

    @property
    def raw(self) -> float:
        return 100.0 * self.killed / self.sampled if self.sampled else 100.0

    @property
    def adjusted(self) -> float:
        counted = self.sampled - self.equivalent
        return 100.0 * self.killed / counted if counted else 100.0


def score(runs: Sequence[Run], entries: Sequence[dict[str, str]]) -> Score:
    killed = sum(r.status in KILLED for r in runs)
    equivalent = sum(r.status not in KILLED and listed(entries, r.mutant) is not None for r in runs)
    return Score(len(runs), killed, equivalent)


def report(
    runs: Sequence[Run],
    entries: Sequence[dict[str, str]],
    *,
    pool: Sequence[Mutant],
    seed: int,
    command: str,
    coverage: CoverageMap,
    minutes: float,
    stale: Sequence[dict[str, str]] = (),
) -> list[str]:
    """The report's lines: the scores, the counts, each survivor."""
    result = score(runs, entries)
    statuses = Counter(r.status for r in runs)
    per_file: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for m in pool:
        per_file[m.path][0] += 1
    for r in runs:
        per_file[r.mutant.path][1] += 1
        per_file[r.mutant.path][2] += r.status in KILLED
    lines = [
        f"make mutate: {len(runs)} of {len(pool)} mutants (seed {seed}), {minutes:.1f} min",
        f"  again: {command}",
        f"raw score {result.raw:.1f}% ({result.killed} killed of {result.sampled}: "
        "every survivor counts)",
        f"score without the listed equivalents {result.adjusted:.1f}% ({result.killed} of "
        f"{result.sampled - result.equivalent}; {result.equivalent} survivors listed in "
        "tests/mutation/equivalent.json)",
        "  " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
        "",
        "module                          mutants  sampled  killed",
    ]
    for path in sorted(per_file):
        total, sampled, killed = per_file[path]
        lines.append(f"  {path:<30}{total:>7}{sampled:>9}{killed:>8}")
    if stale:
        lines.append("")
        lines.append(f"{len(stale)} listed equivalents are no mutant of this code (delete them):")
        lines.extend(f"  {e['file']}: {e['before']} -> {e['after']}" for e in stale)
    if coverage.failing:
        lines.append("")
        lines.append(f"{len(coverage.failing)} tests fail on the unmutated code and were left out:")
        lines.extend(f"  {n}" for n in coverage.failing)
    survivors = [r for r in runs if r.status not in KILLED]
    lines.append("")
    lines.append(f"{len(survivors)} survivors:")
    for r in survivors:
        m = r.mutant
        entry = listed(entries, m)
        why = f"equivalent: {entry['reason']}" if entry else "NEW"
        ran = "no test runs this line" if r.covered == "none" else f"{len(r.tests)} tests passed"
        lines.append(f"{m.path}:{m.line} [{m.kind}] ({ran}) {why}")
        lines.append(f"    - {m.before}")
        lines.append(f"    + {m.after}")
    return lines


def stale_entries(
    entries: Sequence[dict[str, str]], pool: Iterable[Mutant]
) -> list[dict[str, str]]:
    """The entries that list no mutant of ``pool`` (the code they name has changed)."""
    made = {(m.path, m.before, m.after) for m in pool}
    return [e for e in entries if (e["file"], e["before"], e["after"]) not in made]


def survivor_entries(runs: Sequence[Run], entries: Sequence[dict[str, str]]) -> str:
    """The new survivors as entries for equivalent.json, their reasons left blank."""
    new = [
        {"file": r.mutant.path, "before": r.mutant.before, "after": r.mutant.after, "reason": ""}
        for r in runs
        if r.status not in KILLED and listed(entries, r.mutant) is None
    ]
    return json.dumps(new, indent=2, ensure_ascii=False)


# -- the command ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=120, help="mutants to run (120)")
    parser.add_argument(
        "--seed", type=int, default=default_seed(), help="the sample's seed (today's date)"
    )
    parser.add_argument("--target", type=float, default=92.0, help="raw score to reach, %% (92)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 2, help="runs at once (the CPU count)"
    )
    parser.add_argument(
        "--tests", default=",".join(TESTS), help="the tests, comma-separated (tests/core,...)"
    )
    parser.add_argument(
        "--only",
        default="",
        help="sample only mutants whose file:line holds one of these texts (comma-separated)",
    )
    parser.add_argument(
        "--listed",
        action="store_true",
        help="run every mutant equivalent.json lists instead of a sample (do they survive?)",
    )
    parser.add_argument(
        "--list-survivors",
        action="store_true",
        help="print each new survivor as an entry for equivalent.json (reason left blank)",
    )
    parser.add_argument(
        "--equivalent",
        type=Path,
        default=EQUIVALENT,
        help="the listed equivalents (tests/mutation/equivalent.json)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the copy and the logs")
    parser.add_argument("--quiet", action="store_true", help="no line per mutant")
    args = parser.parse_args(argv)
    started = time.monotonic()
    load_at_start = os.getloadavg()[0]
    command = f'make mutate MUTATE_ARGS="--seed {args.seed} --sample {args.sample}'
    command += f" --only {args.only}" if args.only else ""
    command += " --listed" if args.listed else ""
    command += '"'

    scratch = Path(tempfile.mkdtemp(prefix="actorsched-mutate-"))
    tree, work = scratch / "tree", scratch / "work"
    work.mkdir()
    try:
        shutil.copytree(ROOT, tree, ignore=_IGNORED, symlinks=True)
        pool = everything = population(tree)
        wanted = [w for w in args.only.split(",") if w]
        if wanted:
            pool = [m for m in pool if any(w in f"{m.path}:{m.line}" for w in wanted)]
        if not pool:
            sys.exit("no mutants: check MUTATED in scripts/mutate.py and --only")
        entries = load_equivalent(args.equivalent)
        if args.listed:
            sample = [m for m in pool if listed(entries, m) is not None]
        else:
            sample = draw(pool, args.sample, args.seed)
        modules = len({m.path for m in pool})
        print(
            f"{len(pool)} mutants of {modules} modules; {len(sample)} drawn (seed {args.seed})",
            flush=True,
        )
        files = test_files(tree, [t for t in args.tests.split(",") if t])
        print(f"coverage map: {len(files)} test files, {args.jobs} at a time", flush=True)
        coverage = map_coverage(tree, work, files, args.jobs)
        print(
            f"  {len(coverage.durations)} tests pass ({sum(coverage.durations.values()):.0f} s), "
            f"{len(coverage.failing)} fail and are left out; "
            f"{(time.monotonic() - started) / 60:.1f} min so far",
            flush=True,
        )
        runs = [plan(m, coverage) for m in sample]
        run_all(runs, tree, work, args.jobs, progress=not args.quiet)
        if any(r.status == "not run" for r in runs):
            print(f"only {sum(r.status != 'not run' for r in runs)} of {len(runs)} ran")
            runs = [r for r in runs if r.status != "not run"]
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    lines = report(
        runs,
        entries,
        pool=pool,
        seed=args.seed,
        command=command,
        coverage=coverage,
        minutes=minutes,
        stale=stale_entries(entries, everything),
    )
    lines.insert(
        1,
        f"  {(used.ru_utime + used.ru_stime) / 60:.1f} CPU-minutes in the runs; load average "
        f"{load_at_start:.1f} at the start, {load:.1f} at the end ({os.cpu_count()} CPUs)",
    )
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
    if args.list_survivors:
        print(survivor_entries(runs, entries))
    print(f"\n(the report is kept in {REPORT.relative_to(ROOT)}; {shlex.quote(command)})")
    errors = [r for r in runs if r.status == "error"]
    for r in errors:
        print(f"\nERROR: the run of {r.mutant.name} went wrong:\n{r.failed}", file=sys.stderr)
    if errors:
        return 2
    return 0 if score(runs, entries).raw >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
