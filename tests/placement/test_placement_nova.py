"""Nova's own client through actorsched with Placement kept in step (issue 23, items 1 and 2).

A real Placement (openstack-placement in Nova's venv), compute node providers
seeded as Nova's computes make them, the Nova endpoint with a PlacementLink,
and Nova 34's scheduler client over the real broker: every Selection it gets
was claimed in Placement first and carries its allocation request, alternates
carry theirs, a host Placement refuses is never answered, nothing is ever
over capacity in Placement, and a call delivered twice claims once. A
followed host that does not change stays up past ``service_down_time``, and
the hypervisor facts Placement lacks come from the link's host facts.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from placement_fixture import PlacementServer, placement_missing, running_placement
from placement_seed import Seeder

from actorsched import Scheduler
from actorsched.nova.placement import MICROVERSION, PlacementClient, token_auth
from actorsched.nova.placing import PlacementLink, load_host_facts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nova_rpc"))
from test_nova_rpc import NovaStack, nova_stack

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(300)]

GB = 1024


@pytest.fixture(scope="module")
def placement(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    reason = placement_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_placement(tmp_path_factory.mktemp("placement-nova")) as server:
        yield server


@pytest.fixture
def seed(placement: PlacementServer) -> Iterator[Seeder]:
    seeder = Seeder(placement.url)
    made: list[str] = []
    seeder.made = made  # type: ignore[attr-defined]
    yield seeder
    seeder.close()


def _link(url: str, poll_interval: float, timeout: float = 5.0) -> Any:
    def make(scheduler: Scheduler) -> PlacementLink:
        client = PlacementClient(url, timeout=timeout, auth=token_auth())
        return PlacementLink(scheduler, client, poll_interval=poll_interval, max_attempts=3)

    return make


def _used_and_capacity(seed: Seeder, provider: str) -> tuple[int, int]:
    """MEMORY_MB used in Placement, and its capacity ((total - reserved) x ratio)."""
    inventory = seed.expect(200, "GET", f"/resource_providers/{provider}/inventories")[
        "inventories"
    ]["MEMORY_MB"]
    capacity = int((inventory["total"] - inventory["reserved"]) * inventory["allocation_ratio"])
    return seed.usages(provider).get("MEMORY_MB", 0), capacity


def _cleanup(seed: Seeder, consumers: list[str], providers: list[str]) -> None:
    for consumer in consumers:
        seed.call("DELETE", f"/allocations/{consumer}")
    for provider in providers:
        seed.delete_provider(provider)


async def _select(stack: NovaStack, uuids: list[str], memory_mb: int) -> dict[str, Any]:
    (got,) = await stack.nova(
        {"op": "select", "uuids": uuids, "spec": {"memory_mb": memory_mb, "root_gb": 1}}
    )
    return got


async def test_nova_gets_selections_claimed_in_placement_and_never_over_capacity(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    nodes = {
        f"pn-{tag}-{size}": seed.compute_node(
            f"pn-{tag}-{size}", memory_mb=size * GB, reserved_mb=512, ram_ratio=1.0
        )
        for size in (4, 8, 16)
    }
    consumers: list[str] = []
    try:
        async with nova_stack(tmp_path, [], placement=_link(placement.url, 0.2)) as stack:
            link = stack.endpoint.placement
            assert link is not None
            assert await link.ready(10)
            uuids = [str(uuid.uuid4()) for _ in range(2)]
            got = await _select(stack, uuids, 2 * GB)
            assert got["ok"], got
            consumers += uuids
            for instance, selections in zip(uuids, got["result"], strict=True):
                chosen, *alternates = selections
                provider = nodes[chosen["nodename"]]
                # claimed before the answer: Placement holds exactly this allocation
                request = json.loads(chosen["allocation_request"])
                assert chosen["allocation_request_version"] == MICROVERSION
                assert request["allocations"] == {
                    provider: {"resources": {"MEMORY_MB": 2 * GB, "VCPU": 1, "DISK_GB": 1}}
                }
                held = seed.consumer(instance)["allocations"]
                assert {rp: a["resources"] for rp, a in held.items()} == {
                    provider: {"MEMORY_MB": 2 * GB, "VCPU": 1, "DISK_GB": 1}
                }
                # each alternate carries its own allocation request, not claimed
                for alternate in alternates:
                    other = json.loads(alternate["allocation_request"])
                    assert list(other["allocations"]) == [nodes[alternate["nodename"]]]
            # the same call again (a redelivery), then fill up, in one run of Nova's client
            fills = [str(uuid.uuid4()) for _ in range(14)]
            again, *filled = await stack.nova(
                {"op": "select", "uuids": uuids, "spec": {"memory_mb": 2 * GB, "root_gb": 1}},
                *(
                    {"op": "select", "uuids": [one], "spec": {"memory_mb": 2 * GB, "root_gb": 1}}
                    for one in fills
                ),
            )
            # answered alike, claimed once
            assert again["result"] == got["result"]
            for instance in uuids:
                assert len(seed.consumer(instance)["allocations"]) == 1
            # every answer fits in Placement, then NoValidHost:
            # (4 - 0.5) // 2 + (8 - 0.5) // 2 + (16 - 0.5) // 2 = 1 + 3 + 7 = 11 in all
            oks = [step["ok"] for step in filled]
            consumers += [one for one, step in zip(fills, filled, strict=True) if step["ok"]]
            assert oks == [True] * 9 + [False] * 5, filled
            assert all(step["is_no_valid_host"] for step in filled[9:]), filled
            for provider in nodes.values():
                used, capacity = _used_and_capacity(seed, provider)
                assert used <= capacity, (provider, used, capacity)
    finally:
        _cleanup(seed, consumers, list(nodes.values()))


async def test_a_host_taken_behind_its_back_is_refused_by_placement_and_the_next_is_answered(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    big = seed.compute_node(f"pr-{tag}-big", memory_mb=16 * GB, reserved_mb=0, ram_ratio=1.0)
    small = seed.compute_node(f"pr-{tag}-small", memory_mb=8 * GB, reserved_mb=0, ram_ratio=1.0)
    thief = str(uuid.uuid4())
    consumers = [thief]
    try:
        # one poll at the start, then none for a minute: actorsched's figures go stale
        async with nova_stack(tmp_path, [], placement=_link(placement.url, 60.0)) as stack:
            link = stack.endpoint.placement
            assert link is not None
            assert await link.ready(10)
            # another writer takes 12 GB of the big host: actorsched has not seen it
            seed.allocate(thief, {big: {"MEMORY_MB": 12 * GB}})
            instance = str(uuid.uuid4())
            got = await _select(stack, [instance], 6 * GB)
            assert got["ok"], got
            consumers.append(instance)
            [chosen, *_] = got["result"][0]
            # it would have been the big host; Placement refused it, the small one fits
            assert chosen["nodename"] == f"pr-{tag}-small"
            assert link.refusals == 1
            assert list(seed.consumer(instance)["allocations"]) == [small]
            used, capacity = _used_and_capacity(seed, big)
            assert (used, capacity) == (12 * GB, 16 * GB)
            # Nova deletes the instance: its claim goes at once
            await stack.nova(
                {"op": "delete_instance_info", "host": f"pr-{tag}-small", "uuid": instance}
            )
    finally:
        _cleanup(seed, consumers, [big, small])


async def test_a_followed_host_that_does_not_change_stays_up(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    # Placement answering for a provider is its liveness: a provider whose generation
    # never moves is reported again before service_down_time, not left to go stale
    tag = uuid.uuid4().hex[:6]
    quiet = seed.compute_node(f"pq-{tag}", memory_mb=8 * GB, reserved_mb=0, ram_ratio=1.0)
    consumers: list[str] = []
    try:
        async with nova_stack(
            tmp_path,
            [],
            placement=_link(placement.url, 0.2),
            config={"service_down_time": 1.5},
        ) as stack:
            link = stack.endpoint.placement
            assert link is not None
            assert await link.ready(10)
            await asyncio.sleep(4)  # over twice service_down_time with nothing changed
            instance = str(uuid.uuid4())
            got = await _select(stack, [instance], 2 * GB)
            assert got["ok"], got
            consumers.append(instance)
            assert list(seed.consumer(instance)["allocations"]) == [quiet]
    finally:
        _cleanup(seed, consumers, [quiet])


async def test_hypervisor_facts_placement_lacks_come_from_host_facts(
    seed: Seeder, placement: PlacementServer, tmp_path: Path
) -> None:
    # Placement holds no supported_instances: ImagePropertiesFilter reads them from
    # the link's host facts ([nova] placement_host_facts), by node
    tag = uuid.uuid4().hex[:6]
    x86, bare = f"pf-{tag}-x86", f"pf-{tag}-bare"
    nodes = {
        name: seed.compute_node(name, memory_mb=size * GB, reserved_mb=0, ram_ratio=1.0)
        for name, size in ((x86, 4), (bare, 16))  # the bigger one would win on RAM
    }
    facts = tmp_path / "host_facts.json"
    facts.write_text(
        json.dumps(
            {x86: {"hypervisor_type": "fake", "supported_instances": [["x86_64", "fake", "hvm"]]}}
        )
    )

    def make(scheduler: Scheduler) -> PlacementLink:
        client = PlacementClient(placement.url, timeout=5.0, auth=token_auth())
        return PlacementLink(
            scheduler, client, poll_interval=0.2, host_facts=load_host_facts(facts)
        )

    consumers: list[str] = []
    try:
        async with nova_stack(
            tmp_path,
            [],
            placement=make,
            extra="[filter_scheduler]\nenabled_filters = ComputeFilter,ImagePropertiesFilter\n",
        ) as stack:
            link = stack.endpoint.placement
            assert link is not None
            assert await link.ready(10)
            arm, x86_64 = str(uuid.uuid4()), str(uuid.uuid4())
            wrong, right = await stack.nova(
                {
                    "op": "select",
                    "uuids": [arm],
                    "spec": {"memory_mb": GB, "image_properties": {"hw_architecture": "aarch64"}},
                },
                {
                    "op": "select",
                    "uuids": [x86_64],
                    "spec": {"memory_mb": GB, "image_properties": {"hw_architecture": "x86_64"}},
                },
            )
            assert wrong["is_no_valid_host"], wrong
            assert right["ok"], right
            consumers.append(x86_64)
            assert right["result"][0][0]["nodename"] == x86
            assert list(seed.consumer(x86_64)["allocations"]) == [nodes[x86]]
    finally:
        _cleanup(seed, consumers, list(nodes.values()))
