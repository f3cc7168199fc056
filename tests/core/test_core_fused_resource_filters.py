"""The three resource filters run as one comparison when all are on; pin that it changes nothing."""

from __future__ import annotations

import random

import pytest
from conftest import make_report

from actorsched import NoValidHost, RequestSpec, SchedulerConfig
from actorsched.core import SchedulerCore
from actorsched.core.filters import CoreFilter, DiskFilter, RamFilter
from actorsched.models import BUILTIN_FILTERS


class _Ram(RamFilter):
    pass


class _Core(CoreFilter):
    pass


class _Disk(DiskFilter):
    pass


def _run(core: SchedulerCore, seed: int) -> list[object]:
    rng = random.Random(seed)
    for i in range(60):
        core.update_host(
            make_report(
                f"h{i}",
                1,
                memory_mb=rng.choice([4096, 8192, 16384]),
                memory_mb_used=rng.randrange(0, 4096, 512),
                vcpus=rng.choice([2, 4, 8]),
                vcpus_used=rng.randrange(0, 2),
                local_gb=rng.choice([40, 80, 160]),
                local_gb_used=rng.randrange(0, 40, 10),
            ),
            now=0.0,
        )
    outcomes: list[object] = []
    for k in range(400):
        spec = RequestSpec(
            instance_uuids=[f"vm{k}"],
            memory_mb=rng.choice([512, 1024, 2048, 4096]),
            vcpus=rng.choice([1, 2, 4]),
            disk_gb=rng.choice([10, 20, 40]),
        )
        try:
            [sel] = core.select_destinations(spec, now=1.0)
            outcomes.append((sel.host, tuple(sel.alternates)))
        except NoValidHost as exc:
            outcomes.append(exc.filter_counts)
    return outcomes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fused_resource_filters_place_exactly_as_the_separate_ones(seed: int) -> None:
    fused = SchedulerCore(SchedulerConfig(cpu_allocation_ratio=1.5, disk_allocation_ratio=1.2))
    others = [f for f in BUILTIN_FILTERS if f not in ("RamFilter", "CoreFilter", "DiskFilter")]
    separate = SchedulerCore(
        SchedulerConfig(
            cpu_allocation_ratio=1.5, disk_allocation_ratio=1.2, enabled_filters=others
        ),
        filters=[_Ram(), _Core(), _Disk()],  # subclasses: run one by one, as plug-ins
    )
    a, b = _run(fused, seed), _run(separate, seed)
    assert a == b
    assert any(isinstance(o, dict) for o in a)  # the cluster filled: NoValidHost was reached
    assert any(isinstance(o, tuple) for o in a)
