"""update_hosts writes a batch's figures in one go: exactly the state of one update_host each."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from conftest import make_report, make_spec

from actorsched import HostReport, NoValidHost, SchedulerConfig
from actorsched.core import SchedulerCore

CONFIG = SchedulerConfig(max_instances_per_host=4, max_io_ops_per_host=3, cpu_allocation_ratio=1.5)


def _report(rng: random.Random, host: str, generation: int, uuids: list[str]) -> HostReport:
    return make_report(
        host,
        generation,
        memory_mb=rng.choice([4_096, 8_192, 2**40]),  # a huge one: float rounding of big ints
        memory_mb_used=rng.randrange(0, 2_048),
        memory_mb_reserved=rng.choice([0, 512]),
        vcpus=rng.randrange(1, 9),
        vcpus_used=rng.randrange(0, 6),
        local_gb=rng.randrange(10, 400),
        local_gb_used=rng.randrange(0, 20),
        availability_zone=rng.choice([None, "az1", "az2", f"az-{generation}"]),
        traits=rng.sample(["SSD", "GPU", "AVX"], rng.randrange(0, 3)),
        enabled=rng.random() > 0.2,
        num_io_ops=rng.randrange(0, 5),
        # some hosts list instances (claims placed on them, or strangers)
        instances=[u for u in uuids if rng.random() < 0.5] if rng.random() < 0.3 else [],
    )


def _state(core: SchedulerCore) -> tuple[object, ...]:
    t = core.table
    n = t.n
    return (
        core.digest(),
        t.raw[:n].tolist(),
        t.derived[:, :n].tolist(),
        t.row_ok[:n].tolist(),
        t.enabled[:n].tolist(),
        t.zone[:n].tolist(),
        t.traits[:n].tolist(),
        t.stale[:n].tolist(),
        t.floats["reported_at"][:n].tolist(),
        sorted(t.row_of.items()),
    )


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_batch_leaves_the_state_one_report_at_a_time_leaves(seed: int) -> None:
    rng = random.Random(seed)
    one, many = SchedulerCore(CONFIG), SchedulerCore(CONFIG)
    written: list[int] = []
    set_many = many.table.set_reported_many

    def spy(rows: list[int], *args: Any) -> None:
        written.extend(rows)
        set_many(rows, *args)

    many.table.set_reported_many = spy  # type: ignore[method-assign,assignment]
    generation = dict.fromkeys((f"h{i}" for i in range(60)), 0)
    uuids: list[str] = []
    now = 0.0
    batched = 0
    for step in range(30):
        now += 1.0
        hosts = rng.sample(sorted(generation), rng.randrange(1, 40))
        if rng.random() < 0.2:
            hosts.append(hosts[0])  # a host twice in one batch
        batch = []
        for host in hosts:
            # now and then an old generation: stale, must be skipped
            generation[host] += 1 if rng.random() > 0.1 else 0
            batch.append(_report(rng, host, generation[host], uuids))
        expected = [one.update_host(r, now) for r in batch]
        assert many.update_hosts(batch, now) == expected
        batched += len(batch)
        # claims, releases and removals between batches, the same on both
        for k in range(rng.randrange(0, 6)):
            spec = make_spec(f"vm{step}-{k}", memory_mb=rng.choice([256, 1_024]))
            placed: list[object] = []
            for core in (one, many):
                try:
                    placed.append(core.select_destinations(spec, now=now))
                except NoValidHost as exc:
                    placed.append(exc.filter_counts)
            assert placed[0] == placed[1]
            uuids.append(spec.instance_uuids[0])
        if uuids and rng.random() < 0.3:
            victim = rng.choice(uuids)
            assert one.release(victim, now) == many.release(victim, now)
        if rng.random() < 0.1:
            gone = rng.choice(sorted(generation))
            assert one.remove_host(gone, now) == many.remove_host(gone, now)
        assert _state(one) == _state(many)
    assert batched > 300
    assert len(written) > 100  # many reports took the whole-batch path
    assert len(one.ledger.claims) > 0  # claims were held while batches came in


def test_a_batch_marks_the_rows_fresh_and_keeps_the_weigher_extremes_right() -> None:
    core = SchedulerCore(SchedulerConfig(service_down_time=10.0))
    core.update_hosts([make_report(f"h{i}", 1, memory_mb=4_096 + i) for i in range(20)], 0.0)
    spec = make_spec("a")
    assert core.select_destinations(spec, now=5.0)[0].host == "h19"
    core.release("a", now=5.0)
    # all stale at now=20, then the batch makes half of them fresh again
    core.update_hosts([make_report(f"h{i}", 2, memory_mb=4_096 + i) for i in range(10)], 20.0)
    assert core.select_destinations(spec, now=21.0)[0].host == "h9"
    assert not core.table.stale[:10].any()
    assert core.table.stale[10:20].all()
    rows, values, _ = core.table.extremes()
    n = core.table.n
    k = core.table.in_use
    for j in range(k):
        assert core.table.hi_view[j, rows[j]] == core.table.hi_view[j, :n].max()
        # the lowest the normalization counts from: min(floor, lowest view)
        assert values[k + j] == min(core.table.floors[j], core.table.lo_view[j, :n].min())
    assert np.isfinite(core.table.hi_view[0, :10]).all()
