"""A random workload for journal tests: reports, placements, releases, removals."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable

from actorsched import HostReport, RequestSpec, Scheduler, SchedulerError, ServerGroup


class StepClock:
    """A clock that moves on by ``step`` seconds each time it is read."""

    def __init__(self, start: float = 1000.0, step: float = 0.5) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def report(
    host: str, generation: int, *, instances: list[str] | None = None, **kw: object
) -> HostReport:
    fields: dict[str, object] = {
        "host": host,
        "generation": generation,
        "memory_mb": 16384,
        "memory_mb_used": 512,
        "vcpus": 8,
        "vcpus_used": 0,
        "local_gb": 200,
        "local_gb_used": 10,
        "instances": instances or [],
    }
    fields.update(kw)
    return HostReport.model_validate(fields)


async def random_workload(s: Scheduler, rng: random.Random, steps: int, hosts: int = 8) -> None:
    """Drive ``s`` with ``steps`` random calls, sent in concurrent rounds."""
    generations = dict.fromkeys(range(hosts), 0)
    zones = ["az1", "az2", None]
    next_vm = 0
    sent: list[RequestSpec] = []
    # report every host first (a placement on an empty table is not what this tests)
    await s.update_hosts([report(f"h{h}", 0) for h in range(hosts)])
    done = 0
    while done < steps:
        calls: list[Awaitable[object]] = []
        for _ in range(rng.randint(1, 12)):
            op = rng.random()
            if op < 0.3:
                h = rng.randrange(hosts)
                generations[h] += rng.choice([1, 1, 1, 0])  # sometimes stale
                mine = [u for u, (host, _) in s.core.claims().items() if host == f"h{h}"]
                listed = rng.sample(mine, k=rng.randint(0, len(mine)))
                if rng.random() < 0.2:
                    listed.append(f"stray-{rng.randrange(5)}")
                calls.append(
                    s.update_host(
                        report(
                            f"h{h}",
                            generations[h],
                            instances=sorted(set(listed)),
                            memory_mb_used=rng.randrange(0, 4096),
                            vcpus_used=rng.randrange(0, 4),
                            availability_zone=zones[h % 3],
                            traits=["SSD"] if h % 2 else ["HDD", "GPU"][: 1 + h % 3 // 2],
                            enabled=rng.random() > 0.05,
                            num_io_ops=rng.randrange(0, 4),
                        )
                    )
                )
            elif op < 0.65:
                count = rng.choice([1, 1, 2, 3])
                uuids = [f"vm-{next_vm + i}" for i in range(count)]
                next_vm += count
                group = None
                if rng.random() < 0.3:
                    policy = rng.choice(["affinity", "anti-affinity", "soft-anti-affinity"])
                    group = ServerGroup.model_validate(
                        {"id": f"g{rng.randrange(3)}", "policy": policy}
                    )
                spec = RequestSpec(
                    instance_uuids=uuids,
                    memory_mb=rng.choice([512, 1024, 4096]),
                    vcpus=rng.choice([1, 2, 4]),
                    disk_gb=rng.choice([1, 10, 40]),
                    group=group,
                )
                sent.append(spec)
                calls.append(s.select_destinations(spec))
            elif op < 0.72 and sent:
                calls.append(s.select_destinations(rng.choice(sent)))  # a redelivery
            elif op < 0.9 and sent:
                calls.append(s.release(rng.choice(rng.choice(sent).instance_uuids)))
            elif op < 0.93:
                calls.append(s.remove_host(f"h{rng.randrange(hosts)}"))
            else:
                h = rng.randrange(hosts)
                generations[h] += 1
                calls.append(s.update_hosts([report(f"h{h}", generations[h]), report("h0", 0)]))
        for result in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(result, BaseException) and not isinstance(result, SchedulerError):
                raise result
        done += len(calls)
