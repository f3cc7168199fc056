"""JsonFilter: Nova's ``query`` scheduler hint, over the host state actorsched holds.

Rules this module keeps (Nova's ``nova/scheduler/filters/json_filter.py``, the
same in 18.0.0 and 34.0.0; no code of theirs):

* The query is the hint's JSON text (``RequestSpec.query``): a list whose
  first item is an operator (``=``, ``<``, ``>``, ``in``, ``<=``, ``>=``,
  ``not``, ``or``, ``and``) and the rest its arguments: nested queries, text
  (``"$name.key"`` reads a host's attribute, then keys of a dict inside it;
  other text is itself; empty text is nothing), numbers and the rest as they
  are. An argument that is nothing (``None``, an attribute the host does not
  have) is left out. A comparison needs two arguments or more and holds
  between the first and every other one; ``not`` gives a list, of which the
  host passes when any item is true. An empty query passes every host.
  :func:`evaluate` is that rule, written once.
* The attributes are Nova's ``HostState``'s (:data:`~.host_facts.HOST_STATE_ATTRIBUTES`):
  a host's figures (``free_ram_mb`` ...) as the claims leave them (Nova runs
  this filter for each instance of a request), and its facts (``stats``,
  ``hypervisor_version`` ...). One actorsched does not hold
  (:data:`~.host_facts.UNHELD_ATTRIBUTES`: ``service``, ``metrics`` ...) is
  refused with InvalidRequest naming it; a name that is no attribute of
  Nova's is nothing, as in Nova.
* The query is decided once per distinct combination of the values it
  reads (a facts id for each fact, the distinct figures for each figure)
  and answered per row with one gather.
* What makes Nova's filter raise (text that is not JSON, an unknown
  operator, a key looked up in what is not a dict, values Python does not
  order) fails the request: InvalidRequest, whenever a host that reported
  has values that raise it (Nova only on the hosts left by the filters
  before it), so the same request never fails on one call and passes on
  the next. A query nested deeper than :data:`MAX_DEPTH` is refused too.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..errors import InvalidRequest
from .host_facts import (
    FACT_ATTRIBUTES,
    ROW_ATTRIBUTES,
    UNHELD_ATTRIBUTES,
    HostFacts,
    row_values,
)

if TYPE_CHECKING:
    from .filters import PlacementContext
    from .table import HostTable

__all__ = ["MAX_DEPTH", "OPERATORS", "JsonFilter", "evaluate", "variables"]

BoolColumn = NDArray[np.bool_]
# the deepest nesting of lists a query may have (Nova's is Python's recursion limit)
MAX_DEPTH = 64
# distinct query texts kept parsed
_PARSED = 256


def _compare(op: Callable[[Any, Any], Any]) -> Callable[[list[Any]], bool]:
    def compare(args: list[Any]) -> bool:
        if len(args) < 2:
            return False
        if op is operator.contains:
            return args[0] in args[1:]
        return all(op(args[0], arg) for arg in args[1:])

    return compare


# Nova's JsonFilter.commands: operator -> what it makes of its cooked arguments
OPERATORS: Mapping[str, Callable[[list[Any]], Any]] = {
    "=": _compare(operator.eq),
    "<": _compare(operator.lt),
    ">": _compare(operator.gt),
    "in": _compare(operator.contains),
    "<=": _compare(operator.le),
    ">=": _compare(operator.ge),
    "not": lambda args: [not arg for arg in args],
    "or": any,
    "and": all,
}

# a variable's value on one host, by its text ("$free_ram_mb")
Lookup = Callable[[str], Any]


def _cook(text: str, lookup: Lookup) -> Any:
    """Nova's ``_parse_string``: nothing for empty text, a variable's value, or the text."""
    if not text:
        return None
    if not text.startswith("$"):
        return text
    return lookup(text)


def _process(query: Any, lookup: Lookup) -> Any:
    """Nova's ``_process_filter`` of ``query`` (any JSON value) on one host."""
    if not query:
        return True
    method = OPERATORS[query[0]]  # KeyError (TypeError: unhashable) as Nova's
    cooked = []
    for arg in query[1:]:
        if isinstance(arg, list):
            arg = _process(arg, lookup)
        elif isinstance(arg, str):
            arg = _cook(arg, lookup)
        if arg is not None:
            cooked.append(arg)
    return method(cooked)


def evaluate(query: Any, lookup: Lookup) -> bool:
    """Whether a host passes ``query`` (parsed JSON), its variables read by ``lookup``.

    Raises what Nova's filter raises on such a host (KeyError for an unknown
    operator, TypeError, AttributeError).

    >>> values = {"$free_ram_mb": 2048, "$stats.ssd": "yes"}
    >>> evaluate([">=", "$free_ram_mb", 1024], values.get)
    True
    >>> evaluate(["and", ["=", "$stats.ssd", "yes"], ["not", ["<", 1, 2]]], values.get)
    False
    """
    result = _process(query, lookup)
    if isinstance(result, list):
        result = any(result)
    return bool(result)


def variables(query: Any) -> tuple[str, ...]:
    """The variables (``$...`` text) ``query`` reads where Nova reads them, sorted.

    >>> variables(["and", [">", "$free_ram_mb", 5], "$stats.a", ["=", "x", "$x"]])
    ('$free_ram_mb', '$stats.a', '$x')
    """
    found: set[str] = set()

    def walk(q: Any) -> None:
        if not q or not isinstance(q, list | str):
            return  # nothing, or what evaluate() raises on
        for arg in q[1:]:
            if isinstance(arg, list):
                walk(arg)
            elif isinstance(arg, str) and arg.startswith("$"):
                found.add(arg)

    walk(query)
    return tuple(sorted(found))


def _depth(value: Any) -> int:
    """How deep lists nest in ``value`` (0: not a list), counting no further than
    one past MAX_DEPTH."""
    depth = 0
    level = [value]
    while depth <= MAX_DEPTH:
        lists = [v for v in level if isinstance(v, list)]
        if not lists:
            break
        depth += 1
        level = [item for v in lists for item in v]
    return depth


def _refuse(text: str, why: str) -> InvalidRequest:
    shown = text if len(text) <= 200 else text[:200] + "..."
    return InvalidRequest(
        f"the JsonFilter query {shown!r} {why}; nothing was placed: fix the query scheduler hint"
    )


@lru_cache(maxsize=_PARSED)
def _parse(text: str) -> tuple[Any, tuple[str, ...]]:
    """The query of ``text`` and its variables; InvalidRequest when it is not JSON,
    nests too deep or names an attribute actorsched does not hold."""
    try:
        query = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _refuse(text, f"is not JSON ({exc}); Nova's JsonFilter raises there") from None
    if _depth(query) > MAX_DEPTH:
        raise _refuse(text, f"nests lists deeper than {MAX_DEPTH}")
    names = variables(query)
    unheld = sorted({n for n in names if n[1:].split(".")[0] in UNHELD_ATTRIBUTES})
    if unheld:
        raise _refuse(
            text,
            f"reads {unheld}: Nova's HostState has them, actorsched does not hold them "
            f"(it holds {sorted((*ROW_ATTRIBUTES, *FACT_ATTRIBUTES))})",
        )
    return query, names


def _down(value: Any, path: Sequence[str]) -> Any:
    """Nova's ``_parse_string`` past the attribute: each key of ``path`` looked up
    with ``.get`` (AttributeError on what has none, as Nova's); None once nothing."""
    for key in path:
        if value is None:
            return None
        value = value.get(key, None)
    return value


def _figure(distinct: list[Any], path: Sequence[str], code: int) -> Any:
    return _down(distinct[code], path)


def _fact(facts: Sequence[HostFacts], attribute: str, path: Sequence[str], code: int) -> Any:
    return _down(facts[code].attribute(attribute), path)


class JsonFilter:
    """Hosts that pass the request's ``query`` scheduler hint (Nova's JsonFilter).

    No query, or an empty one: the filter does not apply. See the module's
    rules for the query language and what it reads.

    >>> JsonFilter.name
    'JsonFilter'
    """

    name = "JsonFilter"

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> BoolColumn | None:
        text = ctx.spec.query
        if not text:
            return None
        query, names = _parse(text)
        if not query:
            return None  # Nova: an empty query passes every host
        n = table.n
        rows = np.flatnonzero(table.active[:n])
        passed = np.zeros(n, dtype=np.bool_)
        if not rows.size:
            return passed
        # per variable: each row's code (a facts id, or its distinct figure's index)
        # and the value of each code; names no attribute of Nova's have: nothing
        codes: list[NDArray[np.intp]] = []
        values: list[Callable[[int], Any]] = []
        read: list[str] = []
        for name in names:
            attribute, *path = name[1:].split(".")
            if attribute in ROW_ATTRIBUTES:
                distinct, inverse = np.unique(
                    row_values(table, ctx, attribute, before_request=False)[rows],
                    return_inverse=True,
                )
                codes.append(inverse.astype(np.intp))
                values.append(partial(_figure, distinct.tolist(), path))
            elif attribute in FACT_ATTRIBUTES:
                codes.append(table.facts_id[rows].astype(np.intp))
                values.append(partial(_fact, table.host_facts.values, attribute, path))
            else:
                continue
            read.append(name)
        if codes:
            combos, inverse = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        else:
            combos, inverse = np.zeros((1, 0), dtype=np.intp), np.zeros(rows.size, dtype=np.intp)
        answers = np.fromiter(
            (self._decide(text, query, read, values, combo.tolist()) for combo in combos),
            dtype=np.bool_,
            count=len(combos),
        )
        passed[rows] = answers[inverse.reshape(-1)]
        return passed

    @staticmethod
    def _decide(
        text: str,
        query: Any,
        read: list[str],
        values: list[Callable[[int], Any]],
        combo: list[int],
    ) -> bool:
        try:
            known = {
                name: value(code) for name, value, code in zip(read, values, combo, strict=True)
            }
            return evaluate(query, lambda name: known.get(name))
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise _refuse(
                text,
                f"raises {type(exc).__name__} ({exc}) on a host that reported (as Nova's "
                "JsonFilter does: an unknown operator, a key looked up in what is not a "
                "dict, or values that do not compare)",
            ) from None
