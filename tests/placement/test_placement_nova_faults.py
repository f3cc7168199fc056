"""Faults between Nova, actorsched and Placement, counted (issue 23, item 4).

Nova's own client through the Nova endpoint, a real Placement (killed, frozen,
its inventory changed behind actorsched's back) and ``serve`` killed with -9
in the middle of a storm of Nova calls. After each: no instance holds two
allocations, no provider is over its capacity, and every instance Nova was
told about holds its allocation on the host it was told.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from placement_fixture import PlacementServer, placement_missing, running_placement
from placement_seed import Seeder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nova_rpc"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journal"))
from stall_proxy import StallProxy
from test_nova_rpc import AMQP_URL, NovaStack, nova_conf, nova_stack
from test_placement_nova import _cleanup, _link, _used_and_capacity

from actorsched.amqp.service import dead_letter_names
from benchmarks.cluster import delete_names

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(400)]

GB = 1024
TIMEOUT = 2.0  # seconds per call to Placement, as the link is configured here


@pytest.fixture(scope="module")
def placement(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    reason = placement_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_placement(tmp_path_factory.mktemp("placement-faults")) as server:
        yield server


@pytest.fixture
def seed(placement: PlacementServer) -> Iterator[Seeder]:
    seeder = Seeder(placement.url)
    yield seeder
    seeder.close()


def _select(uuids: list[str], memory_mb: int) -> dict[str, Any]:
    return {"op": "select", "uuids": uuids, "spec": {"memory_mb": memory_mb, "root_gb": 1}}


def _census(seed: Seeder, providers: dict[str, str], told: dict[str, str]) -> dict[str, Any]:
    """Doubled (instances with allocations on more than one provider, or more than one
    flavor's), over capacity (providers), lost (an instance Nova was told of without
    its allocation on that node), over the instances of ``told`` (instance -> node)."""
    doubled, lost = [], []
    for instance, node in told.items():
        held = seed.consumer(instance)["allocations"]
        if len(held) > 1:
            doubled.append(instance)
        if providers[node] not in held:
            lost.append(instance)
    over = []
    for provider in providers.values():
        used, capacity = _used_and_capacity(seed, provider)
        if used > capacity:
            over.append(provider)
    return {"doubled": doubled, "over": over, "lost": lost}


async def _until_claimed(seed: Seeder, instances: list[str], at_least: int) -> int:
    """Wait (bounded) until ``at_least`` of ``instances`` hold allocations; how many do."""
    for _ in range(600):
        held = sum(bool(seed.consumer(one)["allocations"]) for one in instances)
        if held >= at_least:
            return held
        await asyncio.sleep(0.1)
    raise AssertionError(f"only {held} of {len(instances)} instances were claimed")


async def test_placement_down_or_frozen_is_a_prompt_no_valid_host_and_back_again_places(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    node = f"pd-{tag}"
    providers = {node: seed.compute_node(node, memory_mb=16 * GB, reserved_mb=0, ram_ratio=1.0)}
    told: dict[str, str] = {}
    try:
        async with nova_stack(tmp_path, [], placement=_link(placement.url, 0.2, TIMEOUT)) as stack:
            link = stack.endpoint.placement
            assert link is not None
            assert await link.ready(10)
            down, frozen = str(uuid.uuid4()), str(uuid.uuid4())
            placement.kill()
            (refused,) = await stack.nova(_select([down], GB))
            assert refused["is_no_valid_host"], refused
            assert "Placement cannot be asked" in refused["message"]
            assert refused["seconds"] < TIMEOUT + 5, refused  # refused at once, no hang
            placement.start()  # its database is kept: the same providers
            placement.pause()
            try:
                (stalled,) = await stack.nova(_select([frozen], GB))
            finally:
                placement.resume()
            assert stalled["is_no_valid_host"], stalled
            assert "Placement cannot be asked" in stalled["message"]
            # one call timed out (the first, reading the consumer), then the answer
            assert TIMEOUT <= stalled["seconds"] < 2 * TIMEOUT + 5, stalled
            # neither holds a claim nor an allocation
            assert (await stack.scheduler.claims()).claims == []
            for instance in (down, frozen):
                assert seed.consumer(instance)["allocations"] == {}
            back = str(uuid.uuid4())
            (placed,) = await stack.nova(_select([back], GB))
            assert placed["ok"], placed
            told[back] = placed["result"][0][0]["nodename"]
        assert _census(seed, providers, told) == {"doubled": [], "over": [], "lost": []}
    finally:
        _cleanup(seed, list(told), list(providers.values()))


async def test_a_call_that_outlives_novas_call_monitor_timeout_is_kept_alive_and_answered(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    """Nova's client asks select_destinations with call_monitor_timeout (its
    rpc_response_timeout, 2 s here: oslo's own servers send no heartbeat below 2)
    and gives up after that long without a word; actorsched's heartbeats (every
    second) keep it waiting while the claim waits on a frozen Placement for 5 s,
    and the answer comes (not MessagingTimeout). A proxy in front of Placement
    tells when the claim has asked it."""
    tag = uuid.uuid4().hex[:6]
    node = f"hb-{tag}"
    providers = {node: seed.compute_node(node, memory_mb=16 * GB, reserved_mb=0, ram_ratio=1.0)}
    instance = str(uuid.uuid4())
    monitor = "[DEFAULT]\nrpc_response_timeout = 2\nlong_rpc_timeout = 60\n"
    try:
        async with StallProxy(placement.url) as proxy:
            # one poll (no other call to Placement while it is frozen), each call up to 10 s
            link = _link(proxy.url, 3600.0, 10.0)
            async with nova_stack(tmp_path, [], extra=monitor, placement=link) as stack:
                following = stack.endpoint.placement
                assert following is not None
                assert await following.ready(10)
                sent = proxy.requests
                placement.pause()
                try:
                    call = asyncio.create_task(stack.nova(_select([instance], GB)))
                    asked = await proxy.until_requests(sent + 1, within=60)  # the claim's first
                    assert asked > sent
                    await asyncio.sleep(5.0)
                finally:
                    placement.resume()
                (answer,) = await call
        assert answer["ok"], answer
        assert answer["seconds"] >= 5.0, answer  # 2.5 times the monitor's timeout
        told = {instance: answer["result"][0][0]["nodename"]}
        assert _census(seed, providers, told) == {"doubled": [], "over": [], "lost": []}
    finally:
        _cleanup(seed, [instance], list(providers.values()))


async def test_an_inventory_shrunk_behind_actorscheds_back_is_refused_and_the_next_host_taken(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    big, small = f"pi-{tag}-big", f"pi-{tag}-small"
    providers = {
        big: seed.compute_node(big, memory_mb=16 * GB, reserved_mb=0, ram_ratio=1.0),
        small: seed.compute_node(small, memory_mb=8 * GB, reserved_mb=0, ram_ratio=1.0),
    }
    told: dict[str, str] = {}
    cleanup: list[str] = []
    try:
        # one poll, then none for a minute: actorsched still sees 16 GB on the big host
        async with nova_stack(tmp_path, [], placement=_link(placement.url, 60.0, TIMEOUT)) as stack:
            link = stack.endpoint.placement
            assert link is not None
            assert await link.ready(10)
            # the compute's inventory shrinks (a host reconfigured): 2 GB
            inventory = seed.expect(200, "GET", f"/resource_providers/{providers[big]}/inventories")
            memory = dict(inventory["inventories"]["MEMORY_MB"], total=2 * GB, max_unit=2 * GB)
            seed.inventories(providers[big], {**inventory["inventories"], "MEMORY_MB": memory})
            instances = [str(uuid.uuid4()) for _ in range(3)]
            cleanup.extend(instances)
            answers = await stack.nova(*(_select([one], 3 * GB) for one in instances))
            assert [a["ok"] for a in answers] == [True, True, False], answers
            assert answers[2]["is_no_valid_host"]
            for instance, answer in zip(instances, answers[:2], strict=False):
                told[instance] = answer["result"][0][0]["nodename"]
            # the first went to the big host by actorsched's figures, was refused and
            # went to the small one (5 GB left); with the big host's 2 GB now read, the
            # second takes the small one too (2 left), and the third fits nowhere
            assert [told[one] for one in instances[:2]] == [small, small]
            assert link.refusals == 1
        assert _census(seed, providers, told) == {"doubled": [], "over": [], "lost": []}
    finally:
        _cleanup(seed, cleanup, list(providers.values()))


async def test_kill_9_of_serve_in_a_storm_of_nova_calls_loses_doubles_and_overcommits_nothing(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    from conftest import start_serve

    tag = uuid.uuid4().hex[:10]
    exchange, topic, queue, host = f"nova-{tag}", f"scheduler-{tag}", f"as-{tag}", f"sched-{tag}"
    conf = nova_conf(tmp_path / "nova.conf", exchange, host)
    journal = tmp_path / "journal.sqlite"
    env = {"ACTORSCHED_NOVA_TOPIC": topic, "ACTORSCHED_NOVA_PLACEMENT_POLL_INTERVAL": "0.2"}
    args = ("--nova-config", str(conf), "--placement-url", placement.url)
    providers = {
        f"pk-{tag}-{i}": seed.compute_node(
            f"pk-{tag}-{i}", memory_mb=8 * GB, reserved_mb=0, ram_ratio=1.0
        )
        for i in range(3)
    }
    stack = NovaStack(
        scheduler=None,  # type: ignore[arg-type]  # the owner is the serve process
        endpoint=None,  # type: ignore[arg-type]
        conf_path=conf,
        topic=topic,
        exchange=exchange,
    )
    serve = await start_serve(AMQP_URL, queue, journal, *args, env=env)
    restarted: asyncio.subprocess.Process | None = None
    # 3 callers of 10 calls, each of 1 GB: 30 GB asked of 24 GB
    callers = [[str(uuid.uuid4()) for _ in range(10)] for _ in range(3)]
    every = [one for caller in callers for one in caller]
    try:
        warm_instance = str(uuid.uuid4())
        every.append(warm_instance)
        (warm,) = await stack.nova(_select([warm_instance], 1))
        assert warm["ok"], warm  # Placement is followed and the endpoint answers
        # each caller paces its calls (0.3 s apart), so the kill lands mid-storm
        storm = [
            asyncio.create_task(
                stack.nova(
                    *(
                        step
                        for one in caller
                        for step in (_select([one], GB), {"op": "sleep", "seconds": 0.3})
                    ),
                    within=300,
                )
            )
            for caller in callers
        ]
        flat = [one for caller in callers for one in caller]
        claimed_before = await _until_claimed(seed, flat, 3)
        serve.send_signal(signal.SIGKILL)
        await serve.wait()
        restarted = await start_serve(AMQP_URL, queue, journal, *args, env=env)
        # every other outcome is a sleep's
        outcomes = [o for caller in await asyncio.gather(*storm) for o in caller[::2]]
        told = {
            one: outcome["result"][0][0]["nodename"]
            for one, outcome in zip(flat, outcomes, strict=True)
            if outcome["ok"]
        }
        refused = [o for o in outcomes if not o["ok"]]
        # every failure is Nova's NoValidHost (full) or its own timeout of a call that
        # reached the killed process: nothing else
        assert all(o["is_no_valid_host"] or o["class"] == "MessagingTimeout" for o in refused), (
            refused
        )
        assert len(told) <= 24  # 8 GB on each of 3 hosts
        assert len(told) > claimed_before  # the restarted process answered calls too
        assert _census(seed, providers, told) == {"doubled": [], "over": [], "lost": []}
        # and no instance at all (answered or not) holds two allocations
        for one in flat:
            assert len(seed.consumer(one)["allocations"]) <= 1, one
        print(
            json.dumps(
                {
                    "answered": len(told),
                    "before_the_kill": claimed_before,
                    "no_valid_host": sum(o["is_no_valid_host"] for o in refused),
                }
            )
        )
    finally:
        for process in (serve, restarted):
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()
        _cleanup(seed, every, list(providers.values()))
        dead = dead_letter_names(queue)
        await delete_names(
            AMQP_URL,
            [queue, dead[1], topic, f"{topic}.{host}", f"actorsched.nova.dead.{topic}"],
            [exchange, f"{topic}_fanout", dead[0]],
        )
