"""Hundreds of concurrent callers while host reports and releases arrive; then the
per-host invariants: no host over capacity, and figures that match the claims.
"""

from __future__ import annotations

import asyncio
import random

from conftest import make_config, make_report, make_spec

from actorsched import HostReport, NoValidHost, Scheduler, Selection

HOSTS = [f"node{i:02d}" for i in range(50)]
MEM, VCPUS, DISK = 4096, 8, 200  # per host; cpu_allocation_ratio 4.0 -> 32 vCPUs
CAPACITY = (MEM, VCPUS * 4.0, DISK)
SIZE = (512, 1, 10)  # every instance: so free RAM credits come in multiples of 512
CALLERS = 300
TIMEOUT = 60.0


def report(host: str, generation: int, instances: list[str]) -> HostReport:
    n = len(instances)
    return make_report(
        host,
        generation,
        memory_mb=MEM,
        memory_mb_used=n * SIZE[0],
        vcpus=VCPUS,
        vcpus_used=n * SIZE[1],
        local_gb=DISK,
        local_gb_used=n * SIZE[2],
        instances=instances,
    )


async def test_concurrent_callers_reports_and_releases_keep_every_host_within_capacity() -> None:
    rng = random.Random(2015)
    config = make_config(mailbox_size=64, max_batch=16, max_instances_per_host=10**6)
    placed: dict[str, str] = {}  # uuid -> host, for instances not being released
    released: set[str] = set()
    failed: set[str] = set()
    last_applied: dict[str, HostReport] = {}
    generation = dict.fromkeys(HOSTS, 0)

    async with Scheduler(config) as s:

        async def send_report(host: str) -> None:
            generation[host] += 1
            r = report(host, generation[host], sorted(u for u, h in placed.items() if h == host))
            assert await s.update_host(r) is True  # generations only rise
            last_applied[host] = r

        async def caller(i: int) -> list[Selection] | NoValidHost:
            uuids = [f"c{i}-{k}" for k in range(1 + i % 3)]
            # the last few arrive after the rest, so the end sees some claims still assumed
            await asyncio.sleep(rng.random() / 20 if i < CALLERS - 20 else 0.08)
            try:
                selections = await s.select_destinations(
                    make_spec(*uuids, memory_mb=SIZE[0], vcpus=SIZE[1], disk_gb=SIZE[2])
                )
            except NoValidHost as exc:
                failed.update(uuids)
                return exc
            assert [sel.instance_uuid for sel in selections] == uuids
            for sel in selections:
                assert sel.host not in sel.alternates
                placed[sel.instance_uuid] = sel.host
            if i % 3 == 0 and i < CALLERS - 20:  # some are deleted again soon after
                await asyncio.sleep(rng.random() / 50)
                uuid = uuids[0]
                del placed[uuid]  # the node stops listing it from its next report
                released.add(uuid)
                assert await s.release(uuid) is True
            return selections

        async def reporter() -> None:
            # until the callers are done, so some claims are still assumed at the end
            while not callers_done.is_set():
                for host in rng.sample(HOSTS, len(HOSTS)):
                    if callers_done.is_set():
                        return
                    await send_report(host)
                    if rng.random() < 0.3:
                        await asyncio.sleep(0)

        max_vcpus = VCPUS * config.cpu_allocation_ratio
        mid_run = {"snapshots": 0, "busy": 0}

        async def snapshots() -> None:
            # for as long as the callers run: claims never over-commit, so every
            # snapshot taken meanwhile is within capacity on every host
            while not callers_done.is_set():
                states = await s.host_states()
                assert set(states) == set(HOSTS)
                for host, state in states.items():
                    assert state.free_ram_mb >= 0, (host, state)
                    assert state.free_disk_gb >= 0, (host, state)
                    assert state.vcpus_total == VCPUS, (host, state)
                    assert state.vcpus_used <= max_vcpus, (host, state)
                mid_run["snapshots"] += 1
                mid_run["busy"] += any(state.vcpus_used > 0 for state in states.values())
                await asyncio.sleep(0.001)

        async def callers() -> list[list[Selection] | NoValidHost]:
            try:
                return await asyncio.gather(*(caller(i) for i in range(CALLERS)))
            finally:
                callers_done.set()

        callers_done = asyncio.Event()
        for host in HOSTS:
            await send_report(host)
        _, _, results = await asyncio.wait_for(
            asyncio.gather(reporter(), snapshots(), callers()), TIMEOUT
        )
        assert len(results) == CALLERS
        assert mid_run["snapshots"] > 0, "no snapshot was taken while the callers ran"
        assert mid_run["busy"] > 0, "no mid-run snapshot saw a claim"
        assert all(isinstance(r, list | NoValidHost) for r in results)
        assert any(isinstance(r, NoValidHost) for r in results), "capacity was never reached"
        assert sum(isinstance(r, list) for r in results) > CALLERS // 2

        # -- invariants before the nodes catch up ---------------------------------------
        claims = s.core.claims()
        states = await s.host_states()
        assert set(claims) == set(placed), "claims are exactly the placed, unreleased instances"
        assert not (set(claims) & (released | failed))
        for uuid, (host, _) in claims.items():
            assert placed[uuid] == host
        for host in HOSTS:
            mine = {u: confirmed for u, (h, confirmed) in claims.items() if h == host}
            held = len(mine)
            # no host over capacity: the claims it holds fit in it
            for resource in range(3):
                assert held * SIZE[resource] <= CAPACITY[resource], host
            last = last_applied[host]
            listed = set(last.instances)
            # a claim is confirmed exactly when the last applied report lists it
            for uuid, confirmed in mine.items():
                assert confirmed == (uuid in listed), (host, uuid)
            assumed = sum(not c for c in mine.values())
            state = states[host]
            assert state.generation == last.generation
            assert state.assumed_claims == assumed
            # free = total - used - assumed + credits, credits only for released
            # instances the last report still lists
            credit_mb = state.free_ram_mb - (MEM - last.memory_mb_used - assumed * SIZE[0])
            assert credit_mb % SIZE[0] == 0
            credits = credit_mb // SIZE[0]
            assert 0 <= credits <= len(listed & released), (host, credits)
            assert state.vcpus_used == last.vcpus_used + assumed - credits
            assert state.free_disk_gb == DISK - last.local_gb_used - (assumed - credits) * SIZE[2]
            assert state.num_instances == len(listed) + assumed - credits

        # -- the nodes catch up: every claim listed, figures exact -----------------------
        for host in HOSTS:
            await send_report(host)
        claims = s.core.claims()
        assert set(claims) == set(placed)
        assert all(confirmed for _, confirmed in claims.values())
        states = await s.host_states()
        for host in HOSTS:
            n = sum(1 for h, _ in claims.values() if h == host)
            state = states[host]
            assert state.free_ram_mb == MEM - n * SIZE[0] >= 0
            assert state.vcpus_used == n * SIZE[1]
            assert state.free_disk_gb == DISK - n * SIZE[2]
            assert state.num_instances == n
            assert state.assumed_claims == 0
