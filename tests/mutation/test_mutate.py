"""``make mutate`` itself (scripts/mutate.py, scripts/mutants.py): which mutants it
makes, how it samples and scores, the equivalents it lists, and one whole run
on a toy package (a killed mutant, a survivor, a line no test runs)."""

from __future__ import annotations

import ast
import datetime
import json
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import mutate  # noqa: E402
from mutants import Mutant, mutants_of  # noqa: E402

ROOT = SCRIPTS.parent


def _changes(source: str) -> set[tuple[str, str, str]]:
    """(kind, line before, line after) of every mutant of ``source``."""
    text = textwrap.dedent(source)
    return {(m.kind, m.before, m.after) for m in mutants_of("m.py", text)}


# -- the mutants -------------------------------------------------------------------


def test_each_operator_comparison_and_connective_is_changed_both_ways() -> None:
    found = _changes(
        """
        def f(a, b):
            x = a + b * 2 // a
            x -= 1
            return a < b and (a is not None or b in x) and not a
        """
    )
    assert ("operator", "x = a + b * 2 // a", "x = a - b * 2 // a") in found
    assert ("operator", "x = a + b * 2 // a", "x = a + b / 2 // a") in found
    assert ("operator", "x = a + b * 2 // a", "x = a + b * 2 / a") in found
    assert ("operator", "x -= 1", "x += 1") in found
    line = "return a < b and (a is not None or b in x) and not a"
    assert ("comparison", line, line.replace("a < b", "a <= b")) in found
    assert ("comparison", line, line.replace("is not", "is")) in found
    assert ("comparison", line, line.replace("b in x", "b not in x")) in found
    assert ("boolean", line, line.replace(" or ", " and ")) in found
    assert ("boolean", line, "return a < b or (a is not None or b in x) and not a") in found
    assert ("boolean", line, line.replace("not a", "a")) in found
    assert ("return", line, "return None") in found


def test_constants_defaults_and_statements() -> None:
    found = _changes(
        """
        @dataclass(frozen=True)
        class C:
            priority: int = 0
            name: str = ""

        def g(items, evacuate=False):
            log.info("moved %s", items)
            for item in items:
                if item:
                    continue
                raise KeyError(item)
        """
    )
    assert ("constant", "@dataclass(frozen=True)", "@dataclass(frozen=False)") in found
    assert ("default", "priority: int = 0", "priority: int = 1") in found
    assert ("default", 'name: str = ""', "name: str = 'XXXX'") in found
    assert ("default", "def g(items, evacuate=False):", "def g(items, evacuate=True):") in found
    assert ("constant", 'log.info("moved %s", items)', "log.info('XXmoved %sXX', items)") in found
    assert ("statement", 'log.info("moved %s", items)', "pass") in found
    assert ("statement", "continue", "pass") in found
    assert ("statement", "raise KeyError(item)", "pass") in found


def test_what_says_nothing_the_code_does_is_left_alone() -> None:
    found = _changes(
        '''
        """Docstring."""
        from typing import TYPE_CHECKING, TypeVar
        __all__ = ["f"]
        R = TypeVar("R")
        if TYPE_CHECKING:
            X = 1
        def f(a: int | None = None) -> str | None:
            """Docstring."""
            assert a != 2
            b = 3  # pragma: no mutate
            return f"{a + 1}"
        '''
    )
    # only the return's None: no docstring, annotation, __all__, TypeVar name,
    # TYPE_CHECKING block, assert, pragma line or f-string part
    assert found == {("return", 'return f"{a + 1}"', "return None")}


def test_where_a_mutant_runs_decides_the_tests_it_runs_against() -> None:
    text = textwrap.dedent(
        """
        LIMIT = 4

        class C:
            flag: bool = False

            def m(self, n=3):
                return n > LIMIT
        """
    )
    by_after = {m.after: m for m in mutants_of("m.py", text)}
    assert by_after["LIMIT = 5"].definition  # a module constant: every test
    assert by_after["flag: bool = True"].definition  # a class attribute: every test
    default = by_after["def m(self, n=4):"]
    assert not default.definition
    assert default.cover == (8, 8)  # the body's tests
    compare = by_after["return n >= LIMIT"]
    assert not compare.definition
    assert compare.cover == (8, 8)


def test_every_mutant_of_the_core_is_one_valid_change_of_its_module() -> None:
    # the whole population is made (every module), and a spread sample of it compiles
    pool = mutate.population(ROOT)
    assert {m.path for m in pool} >= {"actorsched/actor.py", "actorsched/core/engine.py"}
    assert len({m.name for m in pool}) == len(pool)
    texts = {path: (ROOT / path).read_text() for path in {m.path for m in pool}}
    trees: dict[str, str] = {}
    for m in pool[:: max(1, len(pool) // 40)]:
        if m.path not in trees:
            trees[m.path] = ast.dump(ast.parse(texts[m.path]))
        assert ast.dump(ast.parse(m.apply(texts[m.path]))) != trees[m.path], m.name


# -- sampling and scoring ---------------------------------------------------------------


def _mutant(line: int, *, definition: bool = False, path: str = "m.py") -> Mutant:
    return Mutant(path, line, line + 1, "x", "constant", line, (line, line), definition, "a", "b")


def test_the_sample_is_the_seeds_and_the_default_seed_is_the_day() -> None:
    pool = [_mutant(n) for n in range(1, 500)]
    first = mutate.draw(pool, 40, 7)
    assert first == mutate.draw(pool, 40, 7)
    assert first != mutate.draw(pool, 40, 8)
    assert first == sorted(first, key=lambda m: m.line)
    assert mutate.default_seed(datetime.date(2025, 1, 31)) == 20250131


def test_a_mutant_runs_the_passing_tests_of_its_lines_or_every_one_for_an_import() -> None:
    coverage = mutate.CoverageMap(
        by_line={"m.py": {3: frozenset({"t.py::a", "t.py::b"}), 4: frozenset({"t.py::c"})}},
        executed={"m.py": frozenset({1, 3, 4})},
        durations={"t.py::a": 1.0, "t.py::c": 0.5, "t.py::d": 0.1},  # b failed unmutated
    )
    assert coverage.tests_for(_mutant(3)) == ("tests", frozenset({"t.py::a"}))
    assert coverage.tests_for(_mutant(1)) == ("import", frozenset(coverage.durations))
    assert coverage.tests_for(_mutant(4, definition=True))[0] == "import"
    assert coverage.tests_for(_mutant(9)) == ("none", frozenset())
    assert mutate.plan(_mutant(9), coverage).status == "not covered"


def test_the_raw_score_counts_every_survivor_and_the_other_leaves_the_listed_out() -> None:
    runs = []
    for line, status in enumerate(["killed"] * 7 + ["timeout", "survived", "not covered"], 1):
        run = mutate.Run(_mutant(line), "tests", [], 60.0)
        run.status = status
        runs.append(run)
    listed = [{"file": "m.py", "before": "a", "after": "b", "reason": "same"}]
    assert mutate.score(runs, []).raw == 80.0
    both = mutate.score(runs, listed)  # both survivors are a -> b in m.py
    assert (both.raw, both.adjusted) == (80.0, 100.0)


@pytest.mark.parametrize(
    ("code", "log", "status"),
    [
        (0, "", "survived"),
        (1, "", "killed"),
        (2, "", "broken"),  # an import the mutant broke, while collecting
        (4, "ImportError while loading conftest 'tests/conftest.py'.", "broken"),
        (4, "usage: pytest [options]", "error"),  # the run itself is wrong: not counted
        (5, "no tests ran", "error"),
        (-9, "", "crashed"),
    ],
)
def test_what_a_runs_exit_says_of_its_mutant(
    tmp_path: Path, code: int, log: str, status: str
) -> None:
    (tmp_path / "mutant.0.log").write_text(log)
    run = mutate.Run(_mutant(1), "tests", ["t.py::a"], 60.0)
    mutate._outcome(run, code, tmp_path, 0)
    assert run.status == status
    assert (status in mutate.KILLED) is (status in {"killed", "broken", "crashed"})


# -- the equivalents list -------------------------------------------------------------------


def test_each_listed_equivalent_is_a_mutant_of_todays_code_with_its_reason() -> None:
    entries = json.loads(mutate.EQUIVALENT.read_text())
    keys = [(e["file"], e["before"], e["after"]) for e in entries]
    assert len(set(keys)) == len(keys)
    made = {(m.path, m.before, m.after) for m in mutate.population(ROOT)}
    for entry, key in zip(entries, keys, strict=True):
        assert set(entry) == {"file", "before", "after", "reason"}
        assert entry["reason"].strip(), key
        # a line the code no longer has: the entry is stale, delete it
        assert key in made, f"{key} is no mutant of today's code"


# -- one whole run -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_on_a_toy_package_kills_catches_and_leaves_what_it_should(tmp_path: Path) -> None:
    pytest.importorskip("pytest_cov", reason="make mutate's extra: pip install -e '.[mutate]'")
    tree = tmp_path / "tree"
    (tree / "toy").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (tree / "toy" / "__init__.py").write_text("")
    (tree / "toy" / "calc.py").write_text(
        textwrap.dedent(
            """
            def add(a, b):
                return a + b

            def label(n):
                return "even" if n % 2 == 0 else "odd"

            def unused(n):
                return n - 1
            """
        )
    )
    (tree / "tests" / "test_calc.py").write_text(
        textwrap.dedent(
            """
            from toy.calc import add, label

            def test_add():
                assert add(2, 3) == 5

            def test_label_runs():
                label(3)  # runs label, pins nothing
            """
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    coverage = mutate.map_coverage(tree, work, ["tests/test_calc.py"], 1, source="toy")
    assert set(coverage.durations) == {
        "tests/test_calc.py::test_add",
        "tests/test_calc.py::test_label_runs",
    }
    pool = mutate.population(tree, ["toy/*.py"])
    chosen = {
        "add": next(m for m in pool if m.after == "return a - b"),
        "label": next(m for m in pool if m.after.startswith("return 'XXevenXX'")),
        "unused": next(m for m in pool if m.after == "return n + 1"),
    }
    runs = {name: mutate.plan(m, coverage) for name, m in chosen.items()}
    assert runs["add"].tests == ["tests/test_calc.py::test_add"]
    mutate.run_all(list(runs.values()), tree, work, 2, progress=False)
    assert runs["add"].status == "killed"
    assert runs["add"].failed == "tests/test_calc.py::test_add"
    assert runs["label"].status == "survived"
    assert runs["unused"].status == "not covered"
    assert (tree / "toy" / "calc.py").read_text().count("a + b") == 1  # no file was changed


def test_a_float_too_large_for_plus_one_is_doubled_not_left_equal() -> None:
    """1e300 + 1.0 is 1e300: that mutant changed nothing (its repr, 1e+300, is the
    same number), which the sample test above caught once the population moved."""
    import mutants

    assert mutants._constant_change(1e300) == repr(2e300)
    assert mutants._constant_change(2.5) == "3.5"
    assert mutants._constant_change(1.7e308) is None  # twice it is no number
