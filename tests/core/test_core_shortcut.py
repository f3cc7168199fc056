"""The unfiltered shortcut, the kept weigher extremes and the stale sweep change no placement."""

from __future__ import annotations

import math
import random
from typing import Literal

import numpy as np
import pytest
from conftest import make_report

from actorsched import HostReport, NoValidHost, RequestSpec, SchedulerConfig
from actorsched.core import SchedulerCore
from actorsched.core.filters import PlacementContext
from actorsched.core.ranking import RowMultipliers
from actorsched.core.table import HostTable

CONFIG = SchedulerConfig(
    cpu_allocation_ratio=2.0,
    ram_allocation_ratio=1.5,  # so a host with negative free RAM can still pass
    # no signed sum of these is zero, so no two hosts tie by accident
    cpu_weight_multiplier=math.sqrt(2) / 3,
    disk_weight_multiplier=math.pi / 10,
    io_ops_weight_multiplier=-math.e / 9,
    service_down_time=30.0,
    max_instances_per_host=6,
)


def _report(rng: random.Random, host: str, generation: int) -> HostReport:
    memory_mb = rng.randrange(2_048, 16_384)
    # now and then over-committed: free RAM below 0, the RAM weigher's minval
    over = rng.random() < 0.04
    used = rng.randrange(memory_mb, memory_mb * 7 // 5) if over else rng.randrange(0, 2_048)
    return make_report(
        host,
        generation,
        memory_mb=memory_mb,
        memory_mb_used=used,
        vcpus=rng.randrange(2, 16),
        local_gb=rng.randrange(50, 500),
        availability_zone=rng.choice(["az1", "az2"]),
        num_io_ops=rng.randrange(0, 3),
        enabled=rng.random() > 0.1,
    )


# Aggregates that override multipliers of weighers in use for some hosts (h10 to
# h14 are in both: the smallest counts; h30 to h35's value is no number: the
# configured one): the shortcut then scores with a multiplier per row.
MULTIPLIER_AGGREGATES: list[tuple[str, dict[str, str], list[str]]] = [
    (
        "stack",
        {"ram_weight_multiplier": "-0.8", "disk_weight_multiplier": str(math.pi / 7)},
        [f"h{i}" for i in range(15)],
    ),
    (
        "busy",
        {"io_ops_weight_multiplier": str(math.e / 5), "ram_weight_multiplier": "0.3"},
        [f"h{i}" for i in range(10, 25)],
    ),
    ("bad", {"cpu_weight_multiplier": "x"}, [f"h{i}" for i in range(30, 36)]),
]


def _run(
    core: SchedulerCore,
    seed: int,
    aggregates: list[tuple[str, dict[str, str], list[str]]] | None = None,
) -> list[object]:
    """Requests (mostly with no zone or hints) mixed with reports, releases,
    removals, hosts falling silent, and a clock that once goes back."""
    rng = random.Random(seed)
    generation = dict.fromkeys((f"h{i}" for i in range(40)), 0)
    now = 0.0
    for host in generation:
        generation[host] += 1
        core.update_host(_report(rng, host, generation[host]), now=now)
    for name, metadata, hosts in aggregates or []:
        core.create_aggregate(name, metadata, hosts)
    outcomes: list[object] = []
    for k in range(400):
        now += rng.choice([0.0, 0.5, 2.0])
        if k == 250:
            now -= 40.0  # an injected clock that went back: silent hosts count again
        roll = rng.random()
        if roll < 0.1:
            # a few hosts keep reporting; the others fall silent and go stale
            host = f"h{rng.randrange(20)}"
            generation[host] += 1
            core.update_host(_report(rng, host, generation[host]), now=now)
        elif roll < 0.15 and k:
            core.release(f"vm{rng.randrange(k)}-0", now=now)
        elif roll < 0.16:
            core.remove_host(f"h{rng.randrange(40)}", now=now)
        spec = RequestSpec(
            instance_uuids=[f"vm{k}-{i}" for i in range(rng.choice([1, 1, 3]))],
            # big requests often do not fit the hosts that weigh best
            memory_mb=12_000 if rng.random() < 0.05 else rng.choice([256, 512, 1_024, 2_048]),
            vcpus=rng.randrange(1, 4),
            disk_gb=rng.randrange(1, 100),
            availability_zone="az1" if rng.random() < 0.1 else None,
        )
        try:
            selections = core.select_destinations(spec, now=now)
            outcomes.append([(s.host, tuple(s.alternates)) for s in selections])
        except NoValidHost as exc:
            outcomes.append(exc.filter_counts)
    return outcomes


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize(
    "aggregates", [None, MULTIPLIER_AGGREGATES], ids=["configured", "aggregate-multipliers"]
)
def test_shortcut_places_exactly_as_the_full_mask(
    seed: int, aggregates: list[tuple[str, dict[str, str], list[str]]] | None
) -> None:
    plain = SchedulerCore(CONFIG)
    plain.ranker.shortcut = False
    fast = SchedulerCore(CONFIG)
    answered: list[bool] = []
    unfiltered = fast.ranker._top_unfiltered

    def spy(ctx: PlacementContext, want: int, per_row: RowMultipliers | None) -> list[int] | None:
        top = unfiltered(ctx, want, per_row)
        answered.append(top is not None)
        return top

    fast.ranker._top_unfiltered = spy  # type: ignore[method-assign]
    a, b = _run(plain, seed, aggregates), _run(fast, seed, aggregates)
    assert a == b
    assert plain.digest() == fast.digest()
    # both branches of the shortcut ran: answered, and handed over to the mask
    assert answered.count(True) >= 20
    assert answered.count(False) >= 1
    assert any(isinstance(o, list) for o in a)
    assert any(isinstance(o, dict) for o in a)


def test_a_silent_host_is_skipped_until_it_reports_and_revives_if_the_clock_goes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = SchedulerCore(SchedulerConfig(service_down_time=60.0))
    core.update_host(make_report("big", 1, memory_mb=65_536), now=0.0)
    core.update_host(make_report("small", 1, memory_mb=4_096), now=50.0)
    spec = RequestSpec(instance_uuids=["a"], memory_mb=512, vcpus=1, disk_gb=1)
    assert core.select_destinations(spec, now=55.0)[0].host == "big"
    core.release("a", now=55.0)
    # "big" last reported 61 s before: stale, so the smaller host wins
    assert core.select_destinations(spec, now=61.0)[0].host == "small"
    core.release("a", now=61.0)
    assert core.table.stale[core.table.row_of["big"]]
    silent = [r.getMessage() for r in caplog.records if "have not reported" in r.getMessage()]
    assert silent == [
        "1 host(s) have not reported for over 60.0s: big; no placements there "
        "until they report again"
    ]
    core.select_destinations(spec, now=62.0)  # still silent: not logged again
    core.release("a", now=62.0)
    assert sum("have not reported" in r.getMessage() for r in caplog.records) == 1
    # a request stamped earlier (an injected clock) sees "big" fresh again
    assert core.select_destinations(spec, now=59.0)[0].host == "big"
    core.release("a", now=59.0)
    # a new report makes it fresh at once
    core.update_host(make_report("big", 2, memory_mb=65_536), now=195.0)
    assert not core.table.stale[core.table.row_of["big"]]
    assert core.select_destinations(spec, now=195.0)[0].host == "big"


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("floor", [0.0, math.inf])
@pytest.mark.parametrize("nova_release", [18, 34])
def test_kept_extremes_always_equal_a_fresh_scan(
    seed: int, floor: float, nova_release: Literal[18, 34]
) -> None:
    rng = random.Random(seed)
    table = HostTable(1.0, 1.0, 1.0, floors=(floor,) * 5, nova_release=nova_release)
    rows: list[int] = []
    for step in range(2_000):
        roll = rng.random()
        if roll < 0.3 or not rows:
            row = table.add_row(f"h{step}")
            rows.append(row)
        elif roll < 0.35:
            row = rows.pop(rng.randrange(len(rows)))
            table.remove_row(row)
            continue
        else:
            row = rng.choice(rows)
        table.enabled[row] = rng.random() > 0.1
        # few distinct values, so ties and moving extremes are common; used past
        # the total now and then, so free RAM and disk go below the floor 0
        table.set_reported(
            row,
            (
                step,
                8,
                0,
                rng.randrange(0, 10),
                4,
                rng.randrange(0, 5),
                6,
                rng.choice([0, 0, 0, 7]),
                rng.randrange(3),
                0,
            ),
        )
        if rng.random() < 0.7:
            continue  # let several changes pile up before the next look
        got, values, figures = table.extremes()
        n = table.n
        k = table.in_use
        ok = table.row_ok[:n]
        bounding = got[:k]
        for j in range(k):
            hi = table.hi_view[j, :n]
            assert hi[got[j]] == hi.max() == values[j]
            column = table.weigh_matrix[j, :n][ok]
            # the lowest value the normalization uses: min(floor, lowest passing)
            assert values[k + j] == min(floor, column.min(initial=np.inf))
            if values[k + j] < floor:
                assert table.lo_view[j, got[k + j]] == values[k + j]
                # Nova 34 normalizes from a floor whatever the values: no bound then
                if nova_release == 18 or floor == math.inf:
                    bounding.append(got[k + j])
        # Nova 34: the table says whether some value is below its column's floor (the
        # ranking clamps it then), the kept lowest's own answer; never under Nova 18
        below = any(values[k + j] < floor for j in range(k)) and floor != math.inf
        assert table.below_floor == (below and nova_release == 34), step
        assert len(figures) == len(bounding)
        for r, figs in zip(bounding, figures, strict=True):
            assert figs == table.derived[:, r].tolist()
    assert np.isfinite(table.derived).any()
