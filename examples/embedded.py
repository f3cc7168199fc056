"""Embed actorsched: report hosts, place an anti-affinity server group, release it.

Run it with ``.venv/bin/python examples/embedded.py``.
"""

from __future__ import annotations

import asyncio

from actorsched import (
    HostReport,
    HostState,
    RequestSpec,
    Scheduler,
    SchedulerConfig,
    Selection,
    ServerGroup,
)

HOSTS = ("compute-1", "compute-2", "compute-3", "compute-4")


def _report(host: str, memory_mb: int) -> HostReport:
    return HostReport(
        host=host,
        generation=1,
        memory_mb=memory_mb,
        memory_mb_used=0,
        vcpus=16,
        vcpus_used=0,
        local_gb=500,
        local_gb_used=0,
        availability_zone="az1",
    )


def _print_states(title: str, states: dict[str, HostState]) -> None:
    print(title)
    for name in sorted(states):
        s = states[name]
        print(
            f"  {name}: free RAM {s.free_ram_mb} MB, vCPUs {s.vcpus_used}/{s.vcpus_total}, "
            f"instances {s.num_instances}"
        )


async def run() -> tuple[list[Selection], dict[str, HostState]]:
    """Place a group of three web servers on three different hosts, then free them.

    Returns the selections and the host states after the release.
    """
    async with Scheduler(SchedulerConfig(seed=1)) as scheduler:
        for i, host in enumerate(HOSTS):
            await scheduler.update_host(_report(host, memory_mb=16384 + 4096 * i))

        web = RequestSpec(
            instance_uuids=["web-1", "web-2", "web-3"],
            memory_mb=4096,
            vcpus=2,
            disk_gb=40,
            availability_zone="az1",
            group=ServerGroup(id="web-servers", policy="anti-affinity"),
        )
        selections = await scheduler.select_destinations(web)
        for sel in selections:
            print(f"{sel.instance_uuid} -> {sel.host} (alternates: {', '.join(sel.alternates)})")
        _print_states("while placed:", await scheduler.host_states())

        for sel in selections:
            await scheduler.release(sel.instance_uuid)
        states = await scheduler.host_states()
        _print_states("after release:", states)
        return selections, states


def main() -> None:
    """Run the example."""
    asyncio.run(run())


if __name__ == "__main__":
    main()
