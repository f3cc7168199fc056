"""Who may do what, with real broker users (issue 24): the attacks, refused.

On a RabbitMQ node of this run's own (the machine's has only ``guest``), users
as an operator would make them: ``actorsched`` (the service), two tenants
that may place, ``operator`` (admin) and ``attacker``, whose broker permissions
allow only publishing (and its own reply queue). RabbitMQ vouches for each
message's ``user_id``; the service reads its roles from the ``[auth]`` table.

The attacks measured before roles existed: the publish-only user listed every
tenant's claims, released 20 of 20 claims in one batch, removed all 6 hosts,
emptied and deleted all 5 aggregates and preempted at priority 1,000,000.
Each is refused here with nothing changed; a tenant that may place still
cannot touch another's claims; the operator's same calls work.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest
from amqp_support import delete_topology, host_report, raw_call
from servers import PrivateRabbit, private_rabbitmq_fixture  # noqa: F401 (a fixture)

from actorsched import RequestSpec, Scheduler, SchedulerConfig
from actorsched.amqp import SchedulerClient, SchedulerService
from actorsched.auth import ROLES, Authorizer

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(240)]

PASSWORD = "tenants-test"
HOSTS = [f"h{i}" for i in range(6)]
AGGREGATES = [f"agg{i}" for i in range(5)]


@pytest.fixture(scope="module")
def node(private_rabbitmq: PrivateRabbit) -> Iterator[PrivateRabbit]:
    users = ("actorsched", "tenant-a", "tenant-b", "operator", "attacker")
    for user in users:
        private_rabbitmq.ctl("add_user", user, PASSWORD)
    for user in users[:-1]:
        private_rabbitmq.ctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
    # publish only: the default exchange, and its own server-named reply queue
    private_rabbitmq.ctl(
        "set_permissions",
        "-p",
        "/",
        "attacker",
        r"^amq\.gen-.*",
        r"^amq\.default$",
        r"^amq\.gen-.*",
    )
    yield private_rabbitmq
    for user in users:
        private_rabbitmq.ctl("delete_user", user)


def _url(node: PrivateRabbit, user: str) -> str:
    return f"amqp://{user}:{PASSWORD}@127.0.0.1:{node.port}/"


def _spec(uuid_: str, **extra: Any) -> dict[str, Any]:
    spec = RequestSpec(instance_uuids=[uuid_], memory_mb=512, vcpus=1, disk_gb=1, **extra)
    return json.loads(spec.model_dump_json(exclude_defaults=True))  # type: ignore[no-any-return]


def _refused(reply: dict[str, Any]) -> str:
    assert reply["ok"] is False, reply
    assert reply["error"]["type"] == "Forbidden", reply
    return str(reply["error"]["message"])


async def test_the_attacks_are_refused_and_each_tenants_claims_are_its_own(
    node: PrivateRabbit,
) -> None:
    auth = Authorizer(
        {"actorsched": ROLES, "tenant-a": ["place"], "tenant-b": ["place"], "operator": ["admin"]},
        {"place": 10},
    )
    queue = f"actorsched.tenants.{uuid.uuid4().hex[:8]}"
    own = _url(node, "actorsched")
    config = SchedulerConfig(seed=1, preemption=True)
    try:
        async with (
            Scheduler(config) as scheduler,
            SchedulerService(
                scheduler, own, queue=queue, authorizer=auth, reconnect_interval=0.2
            ) as service,
            SchedulerClient(own, queue=queue, timeout=10) as service_user,
            SchedulerClient(_url(node, "tenant-a"), queue=queue, timeout=10) as tenant_a,
            SchedulerClient(_url(node, "tenant-b"), queue=queue, timeout=10) as tenant_b,
            SchedulerClient(_url(node, "operator"), queue=queue, timeout=10) as operator,
        ):
            for name in HOSTS:
                assert await service_user.update_host(host_report(name, memory_mb=2048))
            for name in AGGREGATES:
                await operator.create_aggregate(name, {"k": name}, HOSTS)
            a_uuids = [f"a-{i}" for i in range(20)]
            for u in a_uuids:
                await tenant_a.select_destinations(RequestSpec(**_spec(u)))
            before = await scheduler.claims()
            assert {c.owner for c in before.claims} == {"tenant-a"}

            attacker = _url(node, "attacker")

            async def attack(op: str, body: dict[str, Any]) -> dict[str, Any]:
                return await raw_call(attacker, queue, op, body, "attacker")

            # the publish-only user, with no role: every attack refused
            assert "claims needs the role 'read'" in _refused(await attack("claims", {}))
            batch = {
                "requests": [{"type": "release", "body": {"instance_uuid": u}} for u in a_uuids]
            }
            released = await attack("batch", batch)
            assert [r["error"]["type"] for r in released["result"]] == ["Forbidden"] * 20
            for name in HOSTS:
                _refused(await attack("remove_host", {"host": name}))
            for name in AGGREGATES:
                _refused(await attack("remove_host_from_aggregate", {"name": name, "host": "h0"}))
                _refused(await attack("delete_aggregate", {"name": name}))
            _refused(await attack("select_destinations", _spec("x-1", priority=1_000_000)))

            # a tenant that may place: not another's claims, not above its cap
            assert await tenant_b.claims() == [], "b's pages list none of a's claims"
            for op, body in (
                ("where", {"instance_uuid": "a-0"}),
                ("release", {"instance_uuid": "a-0"}),
                ("move", {"instance_uuid": "a-0", "migration_uuid": "m-b"}),
                ("reschedule", {"instance_uuid": "a-0", "failed_host": "h0"}),
                ("select_destinations", _spec("a-0")),  # a repeat: it would say where a-0 is
            ):
                message = _refused(
                    await raw_call(_url(node, "tenant-b"), queue, op, body, "tenant-b")
                )
                assert "a-0" in message, message
            released = await raw_call(_url(node, "tenant-b"), queue, "batch", batch, "tenant-b")
            assert [r["error"]["type"] for r in released["result"]] == ["Forbidden"] * 20
            over_cap = await raw_call(
                _url(node, "tenant-b"),
                queue,
                "select_destinations",
                _spec("b-urgent", priority=1_000_000),
                "tenant-b",
            )
            assert "above 'tenant-b''s cap 10" in _refused(over_cap)

            # each refusal counted, the core's of another's claim too
            denied = service.metrics.registry.get_sample_value
            assert (
                denied("actorsched_denied_total", {"operation": "release", "user": "tenant-b"})
                == 21
            )
            assert (
                denied("actorsched_denied_total", {"operation": "release", "user": "other"}) == 20
            )

            # nothing changed
            after = await scheduler.claims()
            assert after.claims == before.claims
            assert sorted(await scheduler.host_states()) == HOSTS
            assert sorted(a.name for a in await scheduler.aggregates()) == AGGREGATES
            assert all(sorted(a.hosts) == HOSTS for a in await scheduler.aggregates())

            # the tenant works on its own claims; the operator on anyone's
            mine = await tenant_a.claims()
            assert sorted(c.instance_uuid for c in mine) == sorted(a_uuids)
            assert (await tenant_a.where("a-0")).claimed
            assert await tenant_a.release("a-0")
            assert len(await operator.claims()) == 19
            assert await operator.release("a-1")
            on_h5 = sum(1 for c in await operator.claims() if c.host == "h5")
            assert await operator.remove_host("h5")  # and the claims on it
            for name in HOSTS:  # emptied first, as Nova requires (a removed host stays named)
                await operator.remove_host_from_aggregate("agg4", name)
            assert await operator.delete_aggregate("agg4")
            assert len((await scheduler.claims()).claims) == 18 - on_h5
    finally:
        await delete_topology(own, queue)


async def test_the_broker_refuses_a_user_id_that_is_not_the_connections_user(
    node: PrivateRabbit,
) -> None:
    connection = await aio_pika.connect(_url(node, "attacker"))
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        with pytest.raises(
            (aiormq.exceptions.ChannelPreconditionFailed, aiormq.exceptions.ChannelClosed)
        ):
            await channel.default_exchange.publish(
                aio_pika.Message(b"{}", type="remove_host", user_id="operator"),
                routing_key="actorsched.tenants.none",
            )
