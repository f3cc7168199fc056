"""How long ``host_states`` stops the owner, at up to a million hosts.

The owner's share of ``Scheduler.host_states()`` is one ``GetHostStates``
step: copying the host columns (``actorsched.core.views``) into room the
caller allocated beforehand; the same step into fresh memory (page faults
paid in the owner) is timed beside it. Building the
HostState objects from that copy happens outside the owner. Both are timed
here on the core alone, beside the old way (every object built in the owner
step), which is timed on a sample of the hosts and scaled, since at a
million hosts it takes many seconds.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from actorsched import HostReport
from actorsched.core import GetHostStates, SchedulerCore
from actorsched.core.views import HostStatesImage, ImageBuffers, host_state

from .workload import ZONES, bare_report, bench_config

__all__ = ["host_states_stall"]

_CHUNK = 10_000
_OLD_WAY_SAMPLE = 50_000


def _reports(start: int, stop: int) -> list[HostReport]:
    # built without validation: a million validated reports would take longer than the run
    return [
        bare_report(
            f"node{i:07d}",
            memory_mb=262_144,
            memory_mb_used=8_192,
            memory_mb_reserved=512,
            vcpus=64,
            vcpus_used=4,
            local_gb=2_000,
            local_gb_used=100,
            availability_zone=ZONES[i % len(ZONES)],
            traits=["SSD"] if i % 2 else [],
        )
        for i in range(start, stop)
    ]


def host_states_stall(hosts: int, *, repeat: int = 3) -> dict[str, Any]:
    """Owner step and total time of host_states at ``hosts`` hosts (medians of ``repeat``)."""
    core = SchedulerCore(bench_config())
    for start in range(0, hosts, _CHUNK):
        core.update_hosts(_reports(start, min(hosts, start + _CHUNK)), 1.0)
    steps: list[float] = []
    fresh: list[float] = []
    builds: list[float] = []
    for _ in range(repeat):
        # as Scheduler.host_states does: the room allocated and touched off the owner
        into = ImageBuffers.for_rows(core.table.n)
        started = time.perf_counter()
        image = core.handle(GetHostStates(into=into), 2.0)
        steps.append(time.perf_counter() - started)
        started = time.perf_counter()
        fresh_image = core.handle(GetHostStates(), 2.0)
        fresh.append(time.perf_counter() - started)
        del fresh_image
        assert isinstance(image, HostStatesImage)
        started = time.perf_counter()
        states = image.states()
        builds.append(time.perf_counter() - started)
        assert len(states) == hosts
        del states, image
    table = core.table
    sample = list(table.row_of.items())[: min(hosts, _OLD_WAY_SAMPLE)]
    started = time.perf_counter()
    old = {host: host_state(table, row) for host, row in sample}
    old_s = (time.perf_counter() - started) * hosts / len(sample)
    assert len(old) == len(sample)
    return {
        "hosts": hosts,
        "owner_step_ms": statistics.median(steps) * 1000,
        "owner_step_max_ms": max(steps) * 1000,
        "owner_step_fresh_memory_ms": statistics.median(fresh) * 1000,
        "owner_step_fresh_memory_max_ms": max(fresh) * 1000,
        "build_outside_s": statistics.median(builds),
        "old_owner_step_s": old_s,
        "old_sampled_hosts": len(sample),
    }
