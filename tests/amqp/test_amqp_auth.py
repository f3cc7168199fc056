"""Who may do what on the bus (actorsched.auth), on the real broker.

The broker here is the machine's, whose only user the tests may use is
``guest``: the caller is told apart by the ``user_id`` a message carries
(RabbitMQ checks it against the connection's user: ``guest`` cannot send as
anyone else, which a test shows) and by the roles the service gives it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest
from amqp_support import AMQP_URL, host_report, raw_call, running_stack

from actorsched import RequestSpec, SchedulerConfig
from actorsched.amqp.service import dead_letter_names
from actorsched.auth import OPERATION_ROLES, OWN_CLAIMS, Authorizer
from actorsched.errors import Forbidden

pytestmark = pytest.mark.amqp


async def _raw_call(
    queue: str, op: str, body: dict[str, Any], user_id: str | None
) -> dict[str, Any]:
    return await raw_call(AMQP_URL, queue, op, body, user_id)


def test_every_operation_has_a_role() -> None:
    from actorsched.amqp.protocol import BATCH, OPERATIONS

    assert set(OPERATION_ROLES) == set(OPERATIONS) - {BATCH}


def test_every_operation_on_claims_has_a_command_that_takes_its_scope() -> None:
    from actorsched.core import COMMANDS

    scoped = {
        info.operation
        for info in COMMANDS
        if info.operation and "caller" in getattr(info.command, "__dataclass_fields__", {})
    }
    assert scoped == set(OWN_CLAIMS)


def test_roles_and_priority_caps() -> None:
    auth = Authorizer(
        {"tenant": ["place"], "ops": ["place", "read"], "root": ["admin"]},
        {"place": 10},
    )
    spec = RequestSpec(instance_uuids=["i"], memory_mb=1, vcpus=1, disk_gb=0)
    assert auth.check("select_destinations", "tenant", spec) is None
    refused = auth.check("remove_host", "tenant", spec)
    assert isinstance(refused, Forbidden)
    assert "remove_host needs the role 'admin'; 'tenant' has ['place']" in str(refused)
    assert isinstance(auth.check("host_states", "tenant", spec), Forbidden)
    assert auth.check("host_states", "ops", spec) is None
    # place reads and changes claims, scoped to its own; read lifts a read's scope,
    # admin every scope
    assert auth.check("claims", "tenant", spec) is None
    assert auth.scope("claims", "tenant") == "tenant"
    assert auth.scope("claims", "ops") is None
    assert auth.scope("release", "ops") == "ops"
    assert auth.scope("release", "root") is None
    assert auth.scope("select_destinations", "tenant") is None
    assert "'anonymous' has none" in str(auth.check("host_report", None, spec))
    urgent = RequestSpec(instance_uuids=["i"], memory_mb=1, vcpus=1, disk_gb=0, priority=11)
    assert "priority 11 is above 'tenant''s cap 10" in str(
        auth.check("select_destinations", "tenant", urgent)
    )
    assert auth.check("select_destinations", "root", urgent) is None  # admin: no cap
    assert auth.denied == 4


async def test_a_caller_without_the_role_is_refused_and_nothing_changes() -> None:
    # guest may report and place, not administer; anonymous may do nothing
    auth = Authorizer({"guest": ["report", "place"]}, {"place": 5})
    async with running_stack(config=SchedulerConfig(seed=1), authorizer=auth) as stack:
        client = stack.client
        for i in range(3):
            assert await client.update_host(host_report(f"h{i}"))
        spec = RequestSpec(instance_uuids=["i1"], memory_mb=512, vcpus=1, disk_gb=1)
        (placed,) = await client.select_destinations(spec)
        for op, body in (
            ("remove_host", {"host": "h0"}),
            ("create_aggregate", {"name": "a", "metadata": {}, "hosts": ["h1"]}),
            ("host_states", {}),
            ("host_states", {"host": "h1"}),  # one host: read as every host is
        ):
            reply = await _raw_call(stack.queue, op, body, "guest")
            assert reply["ok"] is False
            assert reply["error"]["type"] == "Forbidden"
            assert f"{op} needs the role" in reply["error"]["message"]
        urgent = spec.model_copy(update={"instance_uuids": ["i2"], "priority": 6})
        reply = await _raw_call(
            stack.queue, "select_destinations", json.loads(urgent.model_dump_json()), "guest"
        )
        assert reply["error"]["type"] == "Forbidden"
        assert "priority 6 is above 'guest''s cap 5" in reply["error"]["message"]
        reply = await _raw_call(
            stack.queue, "host_report", json.loads(host_report("h9").model_dump_json()), None
        )
        assert reply["error"]["type"] == "Forbidden"
        assert "'anonymous' has none" in reply["error"]["message"]
        # nothing changed: the hosts, the one claim, no aggregate
        states = await stack.scheduler.host_states()
        assert sorted(states) == ["h0", "h1", "h2"]
        claims = await stack.scheduler.claims()
        assert [(c.instance_uuid, c.host) for c in claims.claims] == [("i1", placed.host)]
        assert await stack.scheduler.aggregates() == []
        sample = stack.service.metrics.registry.get_sample_value
        assert sample("actorsched_denied_total", {"operation": "remove_host", "user": "guest"}) == 1
        assert (
            sample("actorsched_denied_total", {"operation": "host_report", "user": "anonymous"})
            == 1
        )
        # each refusal is dead-lettered with its reason
        connection = await aio_pika.connect(AMQP_URL)
        async with connection:
            channel = await connection.channel()
            dead = await channel.get_queue(dead_letter_names(stack.queue)[1])
            reasons = []
            while (message := await dead.get(no_ack=True, fail=False)) is not None:
                reasons.append(message.headers["x-actorsched-reason"])
            assert reasons == ["forbidden"] * 6


async def test_a_batch_refuses_the_items_the_caller_may_not_do_and_runs_the_rest() -> None:
    auth = Authorizer({"guest": ["report"]})
    async with running_stack(authorizer=auth) as stack:
        body = {
            "requests": [
                {"type": "host_report", "body": json.loads(host_report("h1").model_dump_json())},
                {"type": "remove_host", "body": {"host": "h1"}},
            ]
        }
        reply = await _raw_call(stack.queue, "batch", body, "guest")
        first, second = reply["result"]
        assert first["ok"] is True
        assert second["error"]["type"] == "Forbidden"
        assert sorted(await stack.scheduler.host_states()) == ["h1"]


async def test_the_broker_refuses_a_forged_user_id() -> None:
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        with pytest.raises(
            (aiormq.exceptions.ChannelPreconditionFailed, aiormq.exceptions.ChannelClosed)
        ):
            await channel.default_exchange.publish(
                aio_pika.Message(b"{}", type="claims", user_id="admin-of-everything"),
                routing_key=f"actorsched.test.{uuid.uuid4().hex[:8]}",
            )
