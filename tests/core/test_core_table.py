"""Rules of the host table (``actorsched.core.table.HostTable``) no other test
pinned: the bounds of its arguments."""

from __future__ import annotations

import re

import pytest

from actorsched.core.table import WEIGH_COLUMNS, HostTable


@pytest.mark.parametrize("in_use", [-1, len(WEIGH_COLUMNS) + 1])
def test_a_table_weighing_fewer_than_none_or_more_than_every_column_is_refused(
    in_use: int,
) -> None:
    message = f"in_use must be 0..{len(WEIGH_COLUMNS)}, got {in_use}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        HostTable(1.0, 1.0, 1.0, WEIGH_COLUMNS, in_use, (0.0,) * max(in_use, 0))


@pytest.mark.parametrize("in_use", [0, len(WEIGH_COLUMNS)])
def test_a_table_may_weigh_none_up_to_every_column(in_use: int) -> None:
    table = HostTable(1.0, 1.0, 1.0, WEIGH_COLUMNS, in_use)
    assert table.in_use == in_use
    assert table.floors == (0.0,) * in_use


def test_a_table_whose_weigh_columns_are_not_the_known_ones_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=re.escape(f"weigh_columns must order {WEIGH_COLUMNS}")):
        HostTable(1.0, 1.0, 1.0, WEIGH_COLUMNS[:-1])
