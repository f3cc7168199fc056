"""The mutants of a Python module: every small change ``make mutate`` may try.

One mutant changes one place of the source text (the rest stays byte for
byte), so it can be shown as the line it changes, before and after:

* ``operator``: ``+ -``, ``* /``, ``//`` and ``%`` to ``/``, ``**`` to ``*``,
  ``<< >>``, ``& |``, ``^`` to ``&``, each way, and the same for ``+=`` ...;
* ``comparison``: ``<`` to ``<=``, ``<=`` to ``<``, ``>`` to ``>=``, ``>=``
  to ``>``, ``== !=``, ``in`` / ``not in``, ``is`` / ``is not``;
* ``boolean``: each ``and`` / ``or`` to the other, ``not x`` to ``x``;
* ``constant``: a number n to n + 1, ``True`` / ``False`` to the other, a
  text s to ``"XX" s "XX"`` (``""`` to ``"XXXX"``);
* ``default``: the same changes of a constant that is a default: of a
  function's parameter, or of a class attribute (a dataclass field's);
* ``statement``: a call made for its effect, a ``raise``, ``del``,
  ``continue`` or ``break`` deleted (made ``pass``);
* ``return``: ``return x`` made ``return None``.

Left alone, as they say nothing the code does: docstrings, annotations
(``int | None`` is no ``|``, nor is it in a type alias), ``__all__`` and ``__slots__``, ``assert``
statements (an internal check, not a rule), the names given to ``TypeVar``
and ``typing.cast``, ``if TYPE_CHECKING:`` blocks, f-strings, and any line
that ends with ``# pragma: no mutate``.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Mutant", "mutants_of"]

_BINARY: dict[type[ast.operator], tuple[str, str]] = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "/"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"),
    ast.Mod: ("%", "/"),
    ast.Pow: ("**", "*"),
    ast.LShift: ("<<", ">>"),
    ast.RShift: (">>", "<<"),
    ast.BitAnd: ("&", "|"),
    ast.BitOr: ("|", "&"),
    ast.BitXor: ("^", "&"),
}
_COMPARE: dict[type[ast.cmpop], tuple[str, str]] = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
}
_NOT_MUTATED_CALLS = {"TypeVar", "cast", "NewType", "ParamSpec"}
_DECLARATIONS = {"__all__", "__slots__"}
_PRAGMA = re.compile(r"#\s*pragma:\s*no mutate\b")


@dataclass(frozen=True, slots=True)
class Mutant:
    """One change of one module's source: ``text[start:end]`` becomes ``replacement``."""

    path: str  # the module's file, relative to the repository (posix)
    start: int  # character offsets into the source text
    end: int
    replacement: str
    kind: str  # operator, comparison, boolean, constant, default, statement, return
    line: int  # the line the change is on (1-based)
    cover: tuple[int, int]  # the lines whose tests run the change (first, last)
    definition: bool  # the change runs when the module is imported, not in a call
    before: str  # the changed line(s), as written (whitespace runs made one space)
    after: str  # the same, mutated

    @property
    def name(self) -> str:
        """A name for this mutant that holds while the code above it does not move."""
        return f"{self.path}:{self.line}:{self.start}:{self.kind}:{self.replacement}"

    def apply(self, text: str) -> str:
        return text[: self.start] + self.replacement + text[self.end :]


def _squash(text: str) -> str:
    return " ".join(text.split())


class _Offsets:
    """Character offsets of ``ast`` positions (whose columns count UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def at(self, line: int, col: int) -> int:
        raw = self.lines[line - 1].encode()[:col]
        return self.starts[line - 1] + len(raw.decode())

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:  # the last line start <= offset
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def start(self, node: ast.AST) -> int:
        return self.at(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]


def _blank_comments(snippet: str) -> str:
    """``snippet`` (code between two operands: no strings) with comments blanked."""
    return re.sub(r"#[^\n]*", lambda m: " " * len(m.group()), snippet)


def _token(snippet: str, word: str) -> int | None:
    """Where operator ``word`` stands in ``snippet`` (between two operands), or None."""
    pattern = r"\s+".join(re.escape(part) for part in word.split())
    if word[0].isalpha():
        pattern = rf"(?<![\w.]){pattern}(?!\w)"
    found = list(re.finditer(pattern, _blank_comments(snippet)))
    return found[0].start() if len(found) == 1 else None


def _constant_change(value: object) -> str | None:
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int):
        return repr(value + 1)
    if isinstance(value, float):
        changed = value + 1.0
        if changed == value:  # too large for + 1 to change it (1e300): twice it
            changed = value * 2.0
        return repr(changed) if math.isfinite(changed) and changed != value else None
    if isinstance(value, str):
        return repr(f"XX{value}XX")
    return None


class _Finder:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.offsets = _Offsets(text)
        self.found: list[Mutant] = []
        self.skipped_lines = {
            number for number, line in enumerate(text.splitlines(), 1) if _PRAGMA.search(line)
        }

    # -- recording ---------------------------------------------------------------

    def add(
        self,
        start: int,
        end: int,
        replacement: str,
        kind: str,
        cover: tuple[int, int],
        definition: bool,
    ) -> None:
        offsets = self.offsets
        line = offsets.line_of(start)
        last = offsets.line_of(max(start, end - 1))
        if any(n in self.skipped_lines for n in range(line, last + 1)):
            return
        first = offsets.starts[line - 1]
        stop = offsets.starts[last]
        before = self.text[first:stop]
        after = self.text[first:start] + replacement + self.text[end:stop]
        self.found.append(
            Mutant(
                self.path,
                start,
                end,
                replacement,
                kind,
                line,
                cover,
                definition,
                _squash(before),
                _squash(after),
            )
        )

    # -- walking -------------------------------------------------------------------

    def module(self, tree: ast.Module) -> None:
        self.body(tree.body, definition=True, in_class=False)

    def body(self, statements: list[ast.stmt], *, definition: bool, in_class: bool) -> None:
        for index, statement in enumerate(statements):
            if index == 0 and _is_docstring(statement):
                continue
            self.statement(statement, definition=definition, in_class=in_class)

    def statement(self, node: ast.stmt, *, definition: bool, in_class: bool) -> None:
        lines = (node.lineno, node.end_lineno or node.lineno)
        block = getattr(node, "body", None)
        if isinstance(block, list) and block:  # a compound statement: its header alone
            lines = (node.lineno, max(node.lineno, block[0].lineno - 1))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body_lines = (node.body[0].lineno, node.end_lineno or node.lineno)
            for decorator in node.decorator_list:
                self.expression(decorator, lines, definition=definition, kind="constant")
            arguments = node.args
            defaults = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
            for default in defaults:
                # a parameter's default is read by each call: the body's tests run it
                self.expression(default, body_lines, definition=False, kind="default")
            self.body(node.body, definition=False, in_class=False)
            return
        if isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                self.expression(decorator, lines, definition=definition, kind="constant")
            for base in [*node.bases, *(k.value for k in node.keywords)]:
                self.expression(base, lines, definition=definition, kind="constant")
            self.body(node.body, definition=definition, in_class=True)
            return
        if isinstance(node, ast.Assert | ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal):
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            self.body(node.orelse, definition=definition, in_class=in_class)
            return
        kind = "default" if in_class else "constant"
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in _DECLARATIONS for t in targets):
                return
            if isinstance(node, ast.AugAssign):
                self.augmented(node, lines, definition)
            for target in targets:
                self.expression(target, lines, definition=definition, kind="constant")
            if node.value is not None:
                self.expression(node.value, lines, definition=definition, kind=kind)
            return
        if isinstance(node, ast.Expr):
            if isinstance(node.value, ast.Call | ast.Await):
                self.delete(node, lines, definition)
            self.expression(node.value, lines, definition=definition, kind="constant")
            return
        if isinstance(node, ast.Raise | ast.Delete | ast.Continue | ast.Break):
            self.delete(node, lines, definition)
        if (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            start, end = self.offsets.start(node.value), self.offsets.end(node.value)
            self.add(start, end, "None", "return", lines, definition)
        # every other statement: its expressions, then its blocks
        for field_name, value in ast.iter_fields(node):
            if field_name in {"body", "orelse", "finalbody", "handlers", "cases"}:
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.expr):
                    self.expression(child, lines, definition=definition, kind="constant")
                elif isinstance(child, ast.withitem):
                    self.expression(child.context_expr, lines, definition=definition)
        for block in ("body", "orelse", "finalbody"):
            statements = getattr(node, block, None)
            if statements:
                self.body(statements, definition=definition, in_class=in_class)
        for handler in getattr(node, "handlers", []):
            if handler.type is not None:
                at = (handler.lineno, handler.type.end_lineno or handler.lineno)
                self.expression(handler.type, at, definition=definition)
            self.body(handler.body, definition=definition, in_class=in_class)
        for case in getattr(node, "cases", []):
            self.body(case.body, definition=definition, in_class=in_class)

    def delete(self, node: ast.stmt, lines: tuple[int, int], definition: bool) -> None:
        self.add(
            self.offsets.start(node), self.offsets.end(node), "pass", "statement", lines, definition
        )

    def augmented(self, node: ast.AugAssign, lines: tuple[int, int], definition: bool) -> None:
        change = _BINARY.get(type(node.op))
        if change is None:
            return
        start, end = self.offsets.end(node.target), self.offsets.start(node.value)
        at = _token(self.text[start:end], change[0] + "=")
        if at is not None:
            at += start
            self.add(at, at + len(change[0]) + 1, change[1] + "=", "operator", lines, definition)

    def expression(
        self,
        node: ast.expr,
        lines: tuple[int, int],
        *,
        definition: bool,
        kind: str = "constant",
    ) -> None:
        """Mutants of ``node`` and what it holds; ``kind`` names a constant it is."""
        offsets = self.offsets
        text = self.text
        if isinstance(node, ast.Constant):
            literal = _constant_change(node.value)
            if literal is not None:
                start, end = offsets.start(node), offsets.end(node)
                self.add(start, end, literal, kind, lines, definition)
            return
        if isinstance(node, ast.JoinedStr):
            return
        if isinstance(node, ast.Lambda):  # its body runs when called: its own lines
            body = node.body
            self.expression(body, (body.lineno, body.end_lineno or body.lineno), definition=False)
            return
        if isinstance(node, ast.Call):
            called = node.func
            name = called.id if isinstance(called, ast.Name) else getattr(called, "attr", "")
            if name in _NOT_MUTATED_CALLS:
                return
        if isinstance(node, ast.BinOp):
            change = None if _is_type_union(node) else _BINARY.get(type(node.op))
            start, end = offsets.end(node.left), offsets.start(node.right)
            if change is not None and (at := _token(text[start:end], change[0])) is not None:
                at += start
                self.add(at, at + len(change[0]), change[1], "operator", lines, definition)
        elif isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                start, end = offsets.end(left), offsets.start(right)
                word, other = _COMPARE[type(op)]
                snippet = _blank_comments(text[start:end])
                pattern = r"\s+".join(re.escape(p) for p in word.split())
                if word[0].isalpha():
                    pattern = rf"(?<!\w){pattern}(?!\w)"
                found = re.search(pattern, snippet)
                if found is not None:
                    self.add(
                        start + found.start(),
                        start + found.end(),
                        other,
                        "comparison",
                        lines,
                        definition,
                    )
                left = right
        elif isinstance(node, ast.BoolOp):
            word, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            for left, right in zip(node.values, node.values[1:], strict=False):
                start, end = offsets.end(left), offsets.start(right)
                at = _token(text[start:end], word)
                if at is not None:
                    self.add(
                        start + at, start + at + len(word), other, "boolean", lines, definition
                    )
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            start = offsets.start(node)
            written = re.match(r"not[ \t]*", text[start:])
            if written is not None:
                self.add(start, start + written.end(), "", "boolean", lines, definition)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expression(child, lines, definition=definition)
            elif isinstance(child, ast.comprehension):
                for part in (child.iter, *child.ifs):
                    self.expression(part, lines, definition=definition)
            elif isinstance(child, ast.keyword):
                self.expression(child.value, lines, definition=definition)


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_type_union(node: ast.BinOp) -> bool:
    """``X | None`` outside an annotation (a type alias, a ``cast``): a type, not a ``|``."""
    return isinstance(node.op, ast.BitOr) and any(
        isinstance(side, ast.Constant) and side.value is None for side in (node.left, node.right)
    )


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def mutants_of(path: str, text: str) -> list[Mutant]:
    """Every mutant of module ``text`` (its file ``path``), in the order of the source."""
    finder = _Finder(path, text)
    finder.module(ast.parse(text))
    finder.found.sort(key=lambda m: (m.start, m.end, m.replacement))
    return finder.found


def iter_lines(mutant: Mutant) -> Iterator[str]:
    """The mutant as two lines of a diff."""
    yield f"- {mutant.before}"
    yield f"+ {mutant.after}"
