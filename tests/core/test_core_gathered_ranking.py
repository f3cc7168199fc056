"""Selective requests are weighed over a gathered copy of the passing rows: same placements."""

from __future__ import annotations

import math
import random

import pytest
from conftest import make_report

from actorsched import NoValidHost, RequestSpec, SchedulerConfig, ServerGroup
from actorsched.core import SchedulerCore

ZONES = ("az1", "az2", "az3")
TRAITS = ("SSD", "GPU", "AVX512")


# Aggregates that override every built-in weigher's multiplier for some hosts,
# the soft group weighers' and NumInstancesWeigher's (off in the config) too
MULTIPLIER_AGGREGATES: list[tuple[str, dict[str, str], list[str]]] = [
    (
        "a",
        {
            "ram_weight_multiplier": "-0.8",
            "num_instances_weight_multiplier": str(math.sqrt(7) / 5),
            "soft_affinity_weight_multiplier": str(math.pi / 4),
        },
        [f"h{i}" for i in range(0, 80, 3)],
    ),
    (
        "b",
        {
            "cpu_weight_multiplier": str(-math.sqrt(3) / 2),
            "disk_weight_multiplier": "0.25",
            "io_ops_weight_multiplier": str(math.e / 4),
            "soft_anti_affinity_weight_multiplier": str(math.sqrt(11) / 3),
            "num_instances_weight_multiplier": "-0.6",
        },
        [f"h{i}" for i in range(0, 80, 5)],
    ),
]


def _run(
    core: SchedulerCore,
    seed: int,
    aggregates: list[tuple[str, dict[str, str], list[str]]] | None = None,
) -> list[object]:
    rng = random.Random(seed)
    for name, metadata, hosts in aggregates or []:
        core.create_aggregate(name, metadata, hosts)
    for i in range(80):
        core.update_host(
            make_report(
                f"h{i}",
                1,
                # figures from wide ranges: no two hosts weigh exactly the same, so
                # the comparison does not hang on how the last bit of a tie rounds
                memory_mb=rng.randrange(8_192, 65_536),
                memory_mb_used=rng.randrange(0, 4_096),
                vcpus=rng.randrange(4, 64),
                local_gb=rng.randrange(100, 2_000),
                availability_zone=rng.choice(ZONES),
                traits=rng.sample(TRAITS, rng.randrange(0, 3)),
                num_io_ops=rng.randrange(0, 3),
                enabled=rng.random() > 0.05,
            ),
            now=0.0,
        )
    outcomes: list[object] = []
    for k in range(300):
        group = ServerGroup(
            id=f"g{k % 7}", policy=rng.choice(["soft-affinity", "soft-anti-affinity"])
        )
        spec = RequestSpec(
            instance_uuids=[f"vm{k}-{i}" for i in range(rng.choice([1, 1, 2]))],
            memory_mb=rng.randrange(512, 8_192),
            vcpus=rng.randrange(1, 8),
            disk_gb=rng.randrange(10, 200),
            availability_zone=rng.choice([None, None, *ZONES]),
            required_traits=rng.choice([[], [], ["SSD"], ["GPU"]]),
            group=group if rng.random() < 0.3 else None,
        )
        try:
            selections = core.select_destinations(spec, now=1.0)
            outcomes.append([(s.host, tuple(s.alternates)) for s in selections])
        except NoValidHost as exc:
            outcomes.append(exc.filter_counts)
        if rng.random() < 0.2 and k:
            core.release(f"vm{rng.randrange(k)}-0", now=1.0)
    return outcomes


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("max_attempts", [3, 20])
@pytest.mark.parametrize(
    "aggregates", [None, MULTIPLIER_AGGREGATES], ids=["configured", "aggregate-multipliers"]
)
def test_gathered_ranking_places_exactly_as_the_full_one(
    seed: int, max_attempts: int, aggregates: list[tuple[str, dict[str, str], list[str]]] | None
) -> None:
    # Multipliers no signed sum of which is zero: where only two hosts pass, each
    # weigher normalizes to 0 or 1, and equal multipliers would make exact ties
    # whose winner depends on the last bit of a float sum, not on the path.
    config = SchedulerConfig(
        max_attempts=max_attempts,
        cpu_allocation_ratio=2.0,
        cpu_weight_multiplier=math.sqrt(2) / 3,
        disk_weight_multiplier=math.pi / 10,
        io_ops_weight_multiplier=-math.e / 9,
        soft_affinity_weight_multiplier=math.sqrt(3) / 4,
        soft_anti_affinity_weight_multiplier=math.sqrt(5) / 7,
    )
    full = SchedulerCore(config)
    full.ranker.compress_below = 0.0  # never gather
    gathered = SchedulerCore(config)
    gathered.ranker.compress_below = 2.0  # always gather
    a, b = _run(full, seed, aggregates), _run(gathered, seed, aggregates)
    assert a == b
    assert full.digest() == gathered.digest()
    assert any(isinstance(o, list) for o in a)
