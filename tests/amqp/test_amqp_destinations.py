"""Forced and requested destinations, node names and group rules over the real broker;
bad values of those fields answered with an InvalidRequest naming the field."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import aio_pika
import pytest
from amqp_support import ROOMY, Stack, host_report, running_stack

from actorsched import Destination, NoValidHost, RequestSpec, ServerGroup

pytestmark = pytest.mark.amqp


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack(config=ROOMY) as running:
        for i in range(4):
            report = host_report(f"h{i}").model_copy(update={"node": f"node-{i}"})
            assert await running.client.update_host(report)
        yield running


def _spec(*uuids: str, **fields: object) -> RequestSpec:
    return RequestSpec.model_validate(
        {"instance_uuids": list(uuids), "memory_mb": 512, "vcpus": 1, "disk_gb": 1, **fields}
    )


async def test_forced_requested_and_grouped_placements_over_amqp(stack: Stack) -> None:
    client = stack.client
    [forced] = await client.select_destinations(_spec("f1", force_hosts=["H2"]))
    assert forced.host == "h2"
    [by_node] = await client.select_destinations(_spec("n1", force_nodes=["node-3"]))
    assert by_node.host == "h3"
    dest = Destination(host="h1", node="node-1")
    [there] = await client.select_destinations(_spec("d1", requested_destination=dest))
    assert (there.host, there.alternates) == ("h1", [])
    group = ServerGroup(id="g", policy="anti-affinity", max_server_per_host=2, hosts=["h0", "h0"])
    placed = await client.select_destinations(_spec("g1", "g2", "g3", group=group))
    hosts = [s.host for s in placed]
    assert "h0" not in hosts  # h0 holds two members already
    assert all(hosts.count(h) <= 2 for h in hosts)
    with pytest.raises(NoValidHost) as caught:
        await client.select_destinations(_spec("x", force_hosts=["nowhere"]))
    assert "force_hosts ['nowhere'] name no known host" in str(caught.value)
    assert caught.value.filter_counts == {"ForceHosts": 4}
    states = await client.host_states()
    assert states["h3"].node == "node-3"


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"group": {"id": "g", "policy": "affinity", "max_server_per_host": 2}}, "group"),
        ({"group": {"id": "g", "policy": "anti-affinity", "max_server_per_host": 0}}, "group"),
        ({"requested_destination": {}}, "requested_destination"),
        ({"requested_destination": {"host": "h1", "rack": "r1"}}, "requested_destination"),
        ({"force_hosts": "h1"}, "force_hosts"),
        ({"force_nodes": ["bad\nname"]}, "force_nodes"),
    ],
)
async def test_bad_destination_fields_are_refused_naming_the_field(
    stack: Stack, fields: dict[str, object], named: str
) -> None:
    body = {"instance_uuids": ["vm-1"], "memory_mb": 1, "vcpus": 1, "disk_gb": 1, **fields}
    connection = await aio_pika.connect(stack.url)
    async with connection:
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
        await channel.default_exchange.publish(
            aio_pika.Message(
                json.dumps(body).encode(),
                type="select_destinations",
                content_type="application/json",
                correlation_id=uuid.uuid4().hex,
                reply_to=replies.name,
            ),
            routing_key=stack.queue,
        )
        async with replies.iterator(timeout=10) as stream:
            reply = await anext(stream)
            await reply.ack()
    error = json.loads(reply.body)
    assert error["ok"] is False
    assert error["error"]["type"] == "InvalidRequest"
    assert named in error["error"]["message"]
