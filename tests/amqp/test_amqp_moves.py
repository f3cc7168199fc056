"""Moves and reschedules over AMQP (the real broker): move, confirm_move, revert_move
and reschedule through SchedulerClient, their errors, and bodies that do not parse."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from amqp_support import Stack, host_report, running_stack

from actorsched import (
    InvalidRequest,
    MaxRetriesExceeded,
    NoValidHost,
    RequestSpec,
    SchedulerConfig,
)
from actorsched.amqp.protocol import BadMessage, decode_request

pytestmark = pytest.mark.amqp

CONFIG = SchedulerConfig(seed=1, ram_allocation_ratio=1.0)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack(config=CONFIG) as running:
        yield running


def spec(uuid: str, memory_mb: int = 4096) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=memory_mb, vcpus=1, disk_gb=1)


async def test_move_confirm_and_revert_through_the_client(stack: Stack) -> None:
    client = stack.client
    for host in ("h1", "h2"):
        await client.update_host(host_report(host))  # 8192 MB each
    [placed] = await client.select_destinations(spec("vm1"))
    source = placed.host
    moved = await client.move("vm1", "mig1")
    assert moved.host != source
    assert moved.instance_uuid == "vm1"
    assert await client.move("vm1", "mig1") == moved  # a redelivery
    states = await client.host_states()
    assert {h: s.free_ram_mb for h, s in states.items()} == {"h1": 4096, "h2": 4096}
    with pytest.raises(InvalidRequest, match="memory_mb"):
        await client.move("vm1", "mig1", spec("vm1", 2048))
    # both holds are kept: nothing of 4097 MB fits anywhere
    with pytest.raises(NoValidHost):
        await client.select_destinations(spec("vm2", 4097))
    assert await client.confirm_move("mig1") is True
    assert await client.confirm_move("mig1") is False
    free = {h: s.free_ram_mb for h, s in (await client.host_states()).items()}
    assert free == {source: 8192, moved.host: 4096}
    # a resize back, reverted: the instance holds its claim where it was
    back = await client.move("vm1", "mig2", spec("vm1", 6000))
    assert back.host == source
    assert await client.revert_move("mig2") is True
    assert await client.revert_move("mig2") is False
    assert (await client.where("vm1")).host == moved.host
    free = {h: s.free_ram_mb for h, s in (await client.host_states()).items()}
    assert free == {source: 8192, moved.host: 4096}


async def test_move_errors_come_back_typed(stack: Stack) -> None:
    client = stack.client
    await client.update_host(host_report("h1"))
    await client.select_destinations(spec("vm1"))
    with pytest.raises(InvalidRequest, match="nothing to move"):
        await client.move("ghost", "mig1")
    with pytest.raises(NoValidHost):
        await client.move("vm1", "mig1")  # only its own host
    same = await client.move("vm1", "mig1", allow_same_host=True)
    assert same.host == "h1"
    assert set(stack.scheduler.core.claims()) == {"vm1", "mig1"}


def test_a_move_body_is_checked() -> None:
    op, request = decode_request(
        "move", b'{"instance_uuid": "vm1", "migration_uuid": "m1", "evacuate": true}'
    )
    assert op.name == "move"
    assert request.model_dump()["evacuate"] is True
    with pytest.raises(BadMessage, match="migration_uuid"):
        decode_request("move", b'{"instance_uuid": "vm1"}')
    with pytest.raises(BadMessage):
        decode_request("confirm_move", b'{"migration_uuid": 3}')


async def test_reschedule_through_the_client(stack: Stack) -> None:
    client = stack.client
    for n, host in enumerate(("h1", "h2", "h3")):
        await client.update_host(host_report(host, memory_mb=8192 - 100 * n))
    [first] = await client.select_destinations(spec("vm1", 1024))
    assert (first.host, first.alternates) == ("h1", ["h2", "h3"])
    again = await client.reschedule("vm1", "h1")
    assert (again.host, again.alternates) == ("h2", ["h3"])
    with pytest.raises(InvalidRequest, match="not on h1"):
        await client.reschedule("vm1", "h1")
    await client.select_destinations(
        RequestSpec(instance_uuids=["big"], memory_mb=7500, vcpus=1, disk_gb=1, force_hosts=["h3"])
    )
    with pytest.raises(MaxRetriesExceeded) as raised:
        await client.reschedule("vm1", "h2")  # h3 no longer fits
    assert raised.value.instance_uuid == "vm1"
    assert (await client.where("vm1")).claimed is False


async def test_an_evacuation_through_the_client_holds_the_source_until_it_reports(
    stack: Stack,
) -> None:
    client = stack.client
    for host in ("h1", "h2"):
        await client.update_host(host_report(host))  # 8192 MB each
    [placed] = await client.select_destinations(spec("vm1"))
    source = placed.host
    listed = host_report(source, 2).model_copy(
        update={"memory_mb_used": 4096, "instances": ["vm1"]}
    )
    assert await client.update_host(listed)  # the source runs it: confirmed
    moved = await client.move("vm1", "evac1", evacuate=True)
    assert moved.host != source
    assert await client.move("vm1", "evac1", evacuate=True) == moved  # a redelivery
    free = {h: s.free_ram_mb for h, s in (await client.host_states()).items()}
    assert free == {source: 4096, moved.host: 4096}  # the source held under evac1
    assert (await client.where("evac1")).claimed is True
    # the source is back and no longer runs the instance: its hold is dropped
    back = host_report(source, 3)
    assert await client.update_host(back)
    free = {h: s.free_ram_mb for h, s in (await client.host_states()).items()}
    assert free == {source: 8192, moved.host: 4096}
    assert (await client.where("evac1")).claimed is False
    assert (await client.where("vm1")).host == moved.host
