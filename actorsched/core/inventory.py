"""Placement's allocation units: which amounts of a class one allocation may ask of a host.

Rules this module keeps:

* Placement allows an allocation of ``amount`` (more than 0) of a resource
  class on a host only when ``min_unit <= amount <= max_unit``, ``amount`` is
  a multiple of ``step_size``, and ``used + amount <= (total - reserved) x
  allocation_ratio``. The upper bounds (``max_unit`` and the capacity) are
  the table's headroom (``HostTable._derive``), which the resource filters
  compare; ``min_unit`` and ``step_size`` are :func:`unit_rules`, here, the
  rule :class:`PlacementUnits` applies.
* A request asking 0 of a class asks nothing of it (Nova leaves a class
  asked 0 of out of its query to Placement): no rule of that class applies.
* Hosts with a ``min_unit`` or ``step_size`` above 1 are rare: the table
  keeps them apart (``HostTable.unit_steps``), and :class:`PlacementUnits`
  reads those rows only. With none, the engine leaves it out of the filter
  chain, so a request pays nothing for it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..models import RequestSpec
from .filters import RESOURCE_RULES, PlacementContext
from .table import HostTable, RowUnits

__all__ = ["CLASSES", "NO_UNITS", "UNIT_FIELDS", "PlacementUnits", "unit_rules"]

# Placement's name of each class, in the table's headroom order (RAM, vCPUs, disk)
CLASSES = ("MEMORY_MB", "VCPU", "DISK_GB")
# the HostReport field of each class's units, in the same order
UNIT_FIELDS = ("memory_mb_units", "vcpus_units", "local_gb_units")
NO_UNITS: RowUnits = (None, None, None)
# what a request asks of each class, in the same order (the resource filters' fields)
_ASKED = operator.attrgetter(*(field for _, field in RESOURCE_RULES))
assert tuple(row for row, _ in RESOURCE_RULES) == (0, 1, 2), "RESOURCE_RULES order RAM, vCPU, disk"
# the rules of unit_rules, as a NoValidHost names them
RULES = ("min_unit", "step_size")


def unit_rules(amount: int, min_unit: Any, step_size: Any) -> tuple[Any, Any]:
    """Where an allocation of ``amount`` (more than 0) breaks Placement's
    ``min_unit`` rule, and where its ``step_size`` rule (one bool, or one per
    element of array bounds).

    >>> unit_rules(3, 2, 2)
    (False, True)
    """
    return amount < min_unit, amount % step_size != 0


@dataclass(frozen=True, slots=True)
class _StepRows:
    """The table's ``unit_steps`` as arrays, as of one ``steps_version``."""

    version: int
    rows: NDArray[np.intp]
    mins: NDArray[np.int64]  # (class, row): min_unit
    steps: NDArray[np.int64]  # (class, row): step_size


class PlacementUnits:
    """Hosts whose ``min_unit`` or ``step_size`` of a class refuses what a request
    asks of it (Placement's rule, :func:`unit_rules`); a class asked 0 of is not
    checked. None (no say) while no row has such units, or none refuses the request.
    """

    name = "PlacementUnits"

    def __init__(self) -> None:
        self._kept: _StepRows | None = None

    def _step_rows(self, table: HostTable) -> _StepRows:
        kept = self._kept
        if kept is None or kept.version != table.steps_version:
            entries = sorted(table.unit_steps.items())
            rows = np.array([row for row, _ in entries], dtype=np.intp)
            figures = np.array([steps for _, steps in entries], dtype=np.int64).reshape(-1, 3, 2)
            kept = _StepRows(
                table.steps_version, rows, figures[:, :, 0].T.copy(), figures[:, :, 1].T.copy()
            )
            self._kept = kept
        return kept

    def refusals(
        self, table: HostTable, spec: RequestSpec
    ) -> tuple[NDArray[np.intp], list[tuple[str, str, int, NDArray[np.bool_]]]]:
        """The rows with units, and per (class, rule) that refuses some of them:
        (class, rule, amount asked, which of those rows it refuses)."""
        kept = self._step_rows(table)
        found: list[tuple[str, str, int, NDArray[np.bool_]]] = []
        for c, amount in enumerate(_ASKED(spec)):
            if not amount:
                continue  # asking 0 of a class asks nothing of it
            for rule, refused in zip(
                RULES, unit_rules(amount, kept.mins[c], kept.steps[c]), strict=True
            ):
                if refused.any():
                    found.append((CLASSES[c], rule, amount, refused))
        return kept.rows, found

    def filter_all(self, table: HostTable, ctx: PlacementContext) -> NDArray[np.bool_] | None:
        if not table.unit_steps:
            return None
        rows, found = self.refusals(table, ctx.spec)
        if not found:
            return None
        refused = np.logical_or.reduce([which for *_, which in found])
        mask = np.ones(table.n, dtype=np.bool_)
        mask[rows[refused]] = False
        return mask

    def explain(self, table: HostTable, spec: RequestSpec) -> str:
        """What the rules refuse of ``spec`` on the live hosts, as a NoValidHost
        says it ("VCPU min_unit 2 refuses 1 on 1 host ..."), or ""."""
        if not table.unit_steps:
            return ""
        # a removed host's units go with it: every row with units is a live host's,
        # and each rule found refuses some of them
        _, found = self.refusals(table, spec)
        kept = self._step_rows(table)
        parts: list[str] = []
        for name, rule, amount, which in found:
            c = CLASSES.index(name)
            count = int(np.count_nonzero(which))
            bounds = np.unique((kept.mins if rule == "min_unit" else kept.steps)[c][which]).tolist()
            shown = ", ".join(str(b) for b in bounds[:5]) + (" ..." if len(bounds) > 5 else "")
            parts.append(
                f"{name} {rule} {shown} refuses {amount} on {count} host{'s' * (count != 1)}"
            )
        return "; ".join(parts)
