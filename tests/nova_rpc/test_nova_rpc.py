"""Nova's own scheduler client (Nova 34.0.0, in its venv) against actorsched over RabbitMQ.

Each test runs an owner with its native service and its Nova endpoint on the
machine's broker, under names of its own (a control exchange, a topic and a
queue per test, deleted afterwards), and drives
``nova.scheduler.rpcapi.SchedulerAPI`` in a child process of Nova's venv
(``tests/nova_rpc/nova_client.py``). The venv is made by ``make nova-venv``
(``make test`` makes it); without it these tests skip and say so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from actorsched import HostReport, Scheduler, SchedulerConfig
from actorsched.amqp import SchedulerService
from actorsched.amqp.metrics import ServiceMetrics
from actorsched.amqp.service import dead_letter_names
from actorsched.auth import ROLES, Role
from actorsched.nova import wire
from actorsched.nova.conf import read
from actorsched.nova.endpoint import NovaEndpoint
from actorsched.nova.placing import PlacementLink
from benchmarks.cluster import delete_names

pytestmark = pytest.mark.amqp

ROOT = Path(__file__).resolve().parents[2]
NOVA_PYTHON = Path(os.environ.get("ACTORSCHED_NOVA_PYTHON", ROOT / ".venv-nova" / "bin" / "python"))
# `make nova-venv` writes this once Nova is installed (a venv left half-made has none)
NOVA_READY = NOVA_PYTHON.parent.parent / ".installed"
CLIENT = Path(__file__).with_name("nova_client.py")
AMQP_URL = os.environ.get("ACTORSCHED_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
CELL = "5b0c9e04-4d7a-4c55-8d3c-0d6f1d0a7c11"

if not NOVA_READY.exists():
    pytest.skip(
        f"Nova 34's venv is missing ({NOVA_PYTHON}): `make nova-venv` makes it "
        "(pip install nova==34.0.0); it could not be made here",
        allow_module_level=True,
    )


def _report(host: str, memory_mb: int, generation: int = 1, **fields: Any) -> HostReport:
    return HostReport(
        host=host,
        generation=generation,
        memory_mb=memory_mb,
        memory_mb_used=0,
        vcpus=16,
        vcpus_used=0,
        local_gb=500,
        local_gb_used=0,
        **fields,
    )


@dataclass
class NovaStack:
    scheduler: Scheduler
    endpoint: NovaEndpoint
    conf_path: Path
    topic: str
    exchange: str

    async def nova(self, *steps: dict[str, Any], within: float = 120) -> list[dict[str, Any]]:
        """Run ``steps`` through Nova's client; one outcome per step."""
        script = self.conf_path.with_name(f"steps-{uuid.uuid4().hex[:6]}.json")
        script.write_text(json.dumps(list(steps)))
        process = await asyncio.create_subprocess_exec(
            str(NOVA_PYTHON),
            str(CLIENT),
            str(self.conf_path),
            str(script),
            self.topic,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), within)
        lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
        assert len(lines) == len(steps), err.decode()[-3000:]
        return lines


def nova_conf(path: Path, exchange: str, host: str, extra: str = "") -> Path:
    path.write_text(
        "[DEFAULT]\n"
        "transport_url = rabbit://guest:guest@127.0.0.1:5672/\n"
        f"control_exchange = {exchange}\n"
        f"host = {host}\n"
        "rpc_response_timeout = 20\n"
        "long_rpc_timeout = 60\n"
        "[scheduler]\nmax_attempts = 3\n" + extra
    )
    return path


@asynccontextmanager
async def nova_stack(
    tmp_path: Path,
    hosts: list[HostReport],
    roles: frozenset[Role] = frozenset(ROLES),
    extra: str = "",
    placement: Callable[[Scheduler], PlacementLink] | None = None,
    config: dict[str, Any] | None = None,
    max_body_bytes: int = 1 << 20,
) -> AsyncIterator[NovaStack]:
    tag = uuid.uuid4().hex[:10]
    exchange, topic, queue, host = f"nova-{tag}", f"scheduler-{tag}", f"as-{tag}", f"sched-{tag}"
    conf = read(str(nova_conf(tmp_path / "nova.conf", exchange, host, extra)))
    settings = {name: value for name, (value, _) in conf.scheduler.items()}
    scheduler = Scheduler(SchedulerConfig(seed=3, **{**settings, **(config or {})}))
    metrics = ServiceMetrics(scheduler)
    endpoint = NovaEndpoint(
        scheduler,
        conf,
        cell_uuid=CELL,
        max_body_bytes=max_body_bytes,
        topic=topic,
        metrics=metrics,
        roles=roles,
        placement=None if placement is None else placement(scheduler),
    )
    service = SchedulerService(
        scheduler, AMQP_URL, queue=queue, probe_interval=0.2, metrics=metrics
    )
    terms: list[asyncio.Task[None]] = []
    service.term_listeners.append(
        lambda active: terms.append(
            asyncio.get_running_loop().create_task(
                endpoint.begin_term() if active else endpoint.end_term()
            )
        )
    )
    try:
        async with scheduler:
            await scheduler.update_hosts(hosts)
            try:
                await endpoint.start()
                await service.start()
                for _ in range(200):  # the probe begins the term: the endpoint consumes
                    if endpoint._consuming:
                        break
                    await asyncio.sleep(0.05)
                assert endpoint._consuming, "the service never began a term"
                yield NovaStack(scheduler, endpoint, tmp_path / "nova.conf", topic, exchange)
            finally:
                # also when the test failed: a service left running would keep the loop
                # from closing, and the failure would hang instead of being reported
                await service.stop()
                await endpoint.stop()
    finally:
        if endpoint.placement is not None:
            await endpoint.placement.client.close()
        dead = dead_letter_names(queue)
        await delete_names(
            AMQP_URL,
            [queue, dead[1], topic, f"{topic}.{host}", endpoint.fanout_queue, endpoint.dead_queue],
            [exchange, f"{topic}_fanout", dead[0]],
        )


def _uuids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


async def test_nova_client_gets_selections_with_alternates_for_native_hosts(
    tmp_path: Path,
) -> None:
    hosts = [_report(f"h{i}", 4096 * i) for i in range(1, 6)]
    async with nova_stack(tmp_path, hosts) as stack:
        uuids = _uuids(2)
        (got,) = await stack.nova(
            {"op": "select", "uuids": uuids, "spec": {"memory_mb": 1024, "root_gb": 10}}
        )
        assert got["ok"], got
        per_instance = got["result"]
        assert len(per_instance) == 2
        for selections in per_instance:
            # the chosen host then max_attempts - 1 = 2 alternates, all Nova Selections 1.1
            assert len(selections) == 3
            assert {s["object"] for s in selections} == {"Selection"}
            assert {s["version"] for s in selections} == {"1.1"}
            assert len({s["service_host"] for s in selections}) == 3
            assert all(s["nodename"] == s["service_host"] for s in selections)
            assert {s["cell_uuid"] for s in selections} == {CELL}
        chosen = [s[0]["service_host"] for s in per_instance]
        # RAM weigher: the two largest hosts take the two instances
        assert sorted(chosen) == ["h4", "h5"]
        claims = await stack.scheduler.claims()
        assert sorted(c.instance_uuid for c in claims.claims) == sorted(uuids)
        assert {c.instance_uuid: c.host for c in claims.claims} == dict(
            zip(uuids, chosen, strict=True)
        )


async def test_a_nova_call_is_in_the_decision_log_and_the_placement_metrics(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A placement Nova asked for is logged and counted as a native one is: one
    decision line naming the instance and its host, and one scheduled sample."""
    hosts = [_report("h1", 4096), _report("h2", 8192)]
    async with nova_stack(tmp_path, hosts) as stack:
        instance = str(uuid.uuid4())
        metrics = stack.endpoint.metrics
        assert metrics is not None
        count = "actorsched_scheduling_attempt_duration_seconds_count"
        before = metrics.registry.get_sample_value(count, {"result": "scheduled"}) or 0.0
        with caplog.at_level(logging.INFO, logger="actorsched.decisions"):
            (got,) = await stack.nova(
                {"op": "select", "uuids": [instance], "spec": {"memory_mb": 512}}
            )
        assert got["ok"], got
        lines = [r.getMessage() for r in caplog.records if r.name == "actorsched.decisions"]
        assert any(line.startswith(f"placed instance {instance} on h2") for line in lines), lines
        after = metrics.registry.get_sample_value(count, {"result": "scheduled"})
        assert after == before + 1


async def test_a_request_that_cannot_fit_raises_nova_no_valid_host(tmp_path: Path) -> None:
    async with nova_stack(tmp_path, [_report("h1", 2048), _report("h2", 2048)]) as stack:
        uuid_ = _uuids(1)
        (got,) = await stack.nova(
            {"op": "select", "uuids": uuid_, "spec": {"memory_mb": 4096, "root_gb": 1}}
        )
        assert not got["ok"]
        assert got["is_no_valid_host"], got  # nova.exception.NoValidHost, rebuilt by oslo
        assert got["module"].startswith("nova.exception")
        assert "No valid host was found." in got["message"]
        assert "RamFilter removed 2" in got["message"]  # actorsched's explanation
        assert (await stack.scheduler.claims()).claims == []


async def test_update_aggregates_moves_hosts_into_a_zone_and_delete_takes_it_back(
    tmp_path: Path,
) -> None:
    hosts = [_report("h1", 4096), _report("h2", 8192), _report("h3", 16384)]
    async with nova_stack(tmp_path, hosts) as stack:
        zone = {"memory_mb": 512, "root_gb": 1, "availability_zone": "az-x"}

        async def applied(names: list[str]) -> None:
            # a cast is not answered, and the endpoint handles messages concurrently
            # (as Nova's does): the next call waits until the cast is in the state
            for _ in range(300):
                if [a.name for a in await stack.scheduler.aggregates()] == names:
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"the aggregates never became {names}")

        before, _ = await stack.nova(
            {"op": "select", "uuids": _uuids(1), "spec": zone},
            {
                "op": "update_aggregates",
                "name": "rack-x",
                "hosts": ["h1"],
                "metadata": {"availability_zone": "az-x"},
            },
        )
        await applied(["rack-x"])
        placed, _ = await stack.nova(
            {"op": "select", "uuids": _uuids(1), "spec": zone},
            {"op": "delete_aggregate", "name": "rack-x", "hosts": ["h1"]},
        )
        await applied([])
        (after,) = await stack.nova({"op": "select", "uuids": _uuids(1), "spec": zone})
        # no aggregate names az-x: it limits nothing (Nova 34's map_az_to_placement_aggregate
        # adds no member_of): every host is the chosen one or an alternate
        assert before["ok"], before
        assert {s["service_host"] for s in before["result"][0]} == {"h1", "h2", "h3"}
        assert placed["ok"], placed
        (selection,) = placed["result"][0][:1]
        assert selection["service_host"] == "h1"  # the smallest host: the only one in az-x
        assert selection["availability_zone"] == "az-x"
        assert after["ok"], after  # the aggregate gone: no limit again
        assert {s["service_host"] for s in after["result"][0]} == {"h1", "h2", "h3"}
        assert await stack.scheduler.aggregates() == []


async def test_return_objects_false_answers_nova_legacy_host_dicts(tmp_path: Path) -> None:
    async with nova_stack(tmp_path, [_report("h1", 4096), _report("h2", 8192)]) as stack:
        (got,) = await stack.nova(
            {
                "op": "select",
                "uuids": _uuids(1),
                "spec": {"memory_mb": 512},
                "return_objects": False,
            }
        )
        assert got == {
            "ok": True,
            "result": [{"host": "h2", "nodename": "h2", "limits": {}}],
            "seconds": got["seconds"],
        }


async def test_an_unknown_request_spec_version_fails_and_the_service_goes_on(
    tmp_path: Path,
) -> None:
    async with nova_stack(tmp_path, [_report("h1", 4096)]) as stack:
        spec = {
            "nova_object.name": "RequestSpec",
            "nova_object.namespace": "nova",
            "nova_object.version": "2.0",
            "nova_object.data": {},
        }
        bad, good = await stack.nova(
            {
                "op": "raw_call",
                "method": "select_destinations",
                "args": {"spec_obj": spec, "instance_uuids": _uuids(1)},
            },
            {"op": "select", "uuids": _uuids(1), "spec": {"memory_mb": 512}},
        )
        assert not bad["ok"]
        assert bad["class"].startswith("ValueError")
        assert "RequestSpec version '2.0' is not supported" in bad["message"]
        assert good["ok"]
        assert good["result"][0][0]["service_host"] == "h1"
        assert stack.endpoint.counts[("select_destinations", "bad_input")] == 1


async def test_a_malformed_envelope_is_answered_dead_lettered_and_the_service_goes_on(
    tmp_path: Path,
) -> None:
    async with nova_stack(tmp_path, [_report("h1", 4096)]) as stack:
        connection = await aio_pika.connect(AMQP_URL)
        async with connection:
            channel = await connection.channel()
            reply = await channel.declare_queue(exclusive=True)
            exchange = await channel.get_exchange(stack.exchange)
            msg_id = uuid.uuid4().hex
            inner = {"method": 17, "_msg_id": msg_id, "_reply_q": reply.name}
            body = json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)})
            await exchange.publish(aio_pika.Message(body.encode()), routing_key=stack.topic)
            await exchange.publish(aio_pika.Message(b"\xff not json"), routing_key=stack.topic)
            message = await _one(reply)
            answer = json.loads(json.loads(message.body)["oslo.message"])
            assert answer["_msg_id"] == msg_id
            assert answer["ending"] is True
            failure = json.loads(answer["failure"])
            assert failure["class"] == "ValueError"
            assert "method must be a name" in failure["message"]
            dead = await channel.get_queue(stack.endpoint.dead_queue)
            reasons = [str((await _one(dead)).headers["x-actorsched-reason"]) for _ in range(2)]
            assert sorted(reasons) == ["method", "not_json"]
        (good,) = await stack.nova({"op": "select", "uuids": _uuids(1), "spec": {"memory_mb": 512}})
        assert good["ok"]
        assert stack.endpoint.counts[("unknown", "bad_input")] == 2
        metrics = stack.endpoint.metrics
        assert metrics is not None
        sample = metrics.registry.get_sample_value
        labels = {"method": "unknown", "outcome": "bad_input"}
        assert sample("actorsched_nova_requests_total", labels) == 2
        ok = {"method": "select_destinations", "outcome": "ok"}
        assert sample("actorsched_nova_requests_total", ok) == 1
        count = "actorsched_nova_request_duration_seconds_count"
        assert sample(count, {"method": "select_destinations"}) == 1


async def test_nova_messages_past_a_bound_are_dead_lettered_naming_it_and_the_service_goes_on(
    tmp_path: Path,
) -> None:
    """A body over max_body_bytes is cut as it arrives (its first 4 KiB kept for the
    dead letter, the rest never held) and a cast listing over 100,000 instances is
    refused: each dead-lettered naming its bound, and Nova's next call is answered."""
    limit = 5 << 20  # room for a cast of 100,001 uuids (about 4.2 MB), not for more
    async with nova_stack(tmp_path, [_report("h1", 4096)], max_body_bytes=limit) as stack:
        seen: list[tuple[int, int | None]] = []  # what the endpoint is handed of each body
        handle = stack.endpoint._handle

        async def spy(
            message: aio_pika.abc.AbstractIncomingMessage, cut: int | None = None
        ) -> None:
            seen.append((len(message.body), cut))
            await handle(message, cut)

        stack.endpoint._handle = spy  # type: ignore[method-assign]
        connection = await aio_pika.connect(AMQP_URL)
        async with connection:
            channel = await connection.channel()
            exchange = await channel.get_exchange(stack.exchange)
            reply = await channel.declare_queue(exclusive=True)
            call = {
                "method": "select_destinations",
                "args": {"padding": "x" * (limit + 1)},
                "version": "4.5",
                "_msg_id": uuid.uuid4().hex,
                "_reply_q": reply.name,
            }
            cast = {
                "method": "sync_instance_info",
                "args": {"host_name": "compute-a", "instance_uuids": _uuids(100_001)},
                "version": "4.5",
            }
            sizes = []
            for inner in (call, cast):
                body = json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)})
                sizes.append(len(body))
                await exchange.publish(aio_pika.Message(body.encode()), routing_key=stack.topic)
            dead = await channel.get_queue(stack.endpoint.dead_queue)
            letters = {}
            for _ in range(2):
                letter = await _one(dead)
                letters[str(letter.headers["x-actorsched-reason"])] = letter
            assert sorted(letters) == ["bad_input", "too_large"]
            too_large = letters["too_large"]
            assert f"over max_body_bytes {limit:,}" in str(too_large.headers["x-actorsched-error"])
            assert len(too_large.body) == 4096  # the head only
            # the endpoint was never handed the whole body over the cap, only its head
            # and the size it declared; the cast within the cap, whole
            assert sorted(seen) == [(4096, sizes[0]), (sizes[1], None)]
            failure = json.loads(str(letters["bad_input"].headers["x-actorsched-error"]))
            assert failure["message"] == (
                "sync_instance_info lists 100,001 instances, over 100,000"
            )
        (good,) = await stack.nova({"op": "select", "uuids": _uuids(1), "spec": {"memory_mb": 512}})
        assert good["ok"], good
        counts = stack.endpoint.counts
        assert counts[("unknown", "bad_input")] == 1
        assert counts[("sync_instance_info", "bad_input")] == 1


async def test_a_redelivered_call_is_answered_alike_with_one_claim(tmp_path: Path) -> None:
    hosts = [_report(f"h{i}", 8192) for i in range(1, 9)]
    async with nova_stack(tmp_path, hosts) as stack:
        instance = str(uuid.uuid4())
        step = {"op": "select", "uuids": [instance], "spec": {"memory_mb": 1024}}
        first, second = await stack.nova(step, step)
        assert first["ok"]
        assert second["ok"]
        assert first["result"] == second["result"]
        claims = (await stack.scheduler.claims()).claims
        assert [c.instance_uuid for c in claims] == [instance]


def test_a_heartbeat_is_what_oslo_reads_as_one() -> None:
    # the wire of one heartbeat, as oslo's ReplyWaiter reads it: no result, not ending
    body = wire.encode_heartbeat("m1")
    inner = json.loads(json.loads(body)["oslo.message"])
    assert inner["ending"] is False
    assert inner["result"] is None
    assert inner["failure"] is None
    assert inner["_msg_id"] == "m1"
    assert inner["_unique_id"]


async def _one(queue: aio_pika.abc.AbstractQueue) -> aio_pika.abc.AbstractIncomingMessage:
    for _ in range(200):
        message = await queue.get(no_ack=True, fail=False)
        if message is not None:
            return message
        await asyncio.sleep(0.05)
    raise AssertionError("no reply")


async def _drain(stream: asyncio.StreamReader | None, into: list[str]) -> None:
    while stream is not None and (line := await stream.readline()):
        into.append(line.decode())


async def test_kill_9_of_serve_while_nova_waits_answers_after_the_restart_with_one_claim(
    tmp_path: Path,
) -> None:
    """serve --nova-config is stopped (SIGSTOP) with a Nova call delivered to it and not
    answered, killed with -9, and started again on its journal: Nova's client, still
    waiting, gets its Selection, and the instance holds one claim."""
    import signal

    from conftest import start_serve

    from actorsched.amqp import SchedulerClient

    tag = uuid.uuid4().hex[:10]
    exchange, topic, queue, host = f"nova-{tag}", f"scheduler-{tag}", f"as-{tag}", f"sched-{tag}"
    conf = nova_conf(tmp_path / "nova.conf", exchange, host)
    journal = tmp_path / "journal.sqlite"
    env = {"ACTORSCHED_NOVA_TOPIC": topic}
    args = ("--nova-config", str(conf))
    serve = await start_serve(AMQP_URL, queue, journal, *args, env=env)
    logs: list[str] = []
    drain = asyncio.create_task(_drain(serve.stderr, logs))
    stack = NovaStack(
        scheduler=None,  # type: ignore[arg-type]  # the owner is the serve process
        endpoint=None,  # type: ignore[arg-type]
        conf_path=conf,
        topic=topic,
        exchange=exchange,
    )
    restarted: asyncio.subprocess.Process | None = None
    try:
        async with SchedulerClient(AMQP_URL, queue=queue, timeout=20) as client:
            for i in range(1, 4):
                assert await client.update_host(_report(f"h{i}", 8192 * i))
            (warm,) = await stack.nova(
                {"op": "select", "uuids": _uuids(1), "spec": {"memory_mb": 256}}
            )
            assert warm["ok"], warm  # the endpoint answers before the fault
            serve.send_signal(signal.SIGSTOP)
            instance = str(uuid.uuid4())
            waiting = asyncio.create_task(
                stack.nova(
                    {"op": "select", "uuids": [instance], "spec": {"memory_mb": 1024}},
                    within=120,
                )
            )
            await asyncio.sleep(8)  # Nova's client starts and its call reaches the queue
            assert not waiting.done()
            serve.kill()
            await serve.wait()
            drain.cancel()
            restarted = await start_serve(AMQP_URL, queue, journal, *args, env=env)
            restart_logs: list[str] = []
            restart_drain = asyncio.create_task(_drain(restarted.stderr, restart_logs))
            (answered,) = await asyncio.wait_for(waiting, timeout=120)
            assert answered["ok"], (answered, "".join(restart_logs)[-2000:])
            chosen = answered["result"][0][0]["service_host"]
            claims = [c for c in await client.claims() if c.instance_uuid == instance]
            assert [c.host for c in claims] == [chosen]  # one claim, where Nova was told
            (again,) = await stack.nova(
                {"op": "select", "uuids": [instance], "spec": {"memory_mb": 1024}}
            )
            assert again["result"][0][0]["service_host"] == chosen
            assert len([c for c in await client.claims() if c.instance_uuid == instance]) == 1
            restart_drain.cancel()
    finally:
        for process in (serve, restarted):
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()
        dead = dead_letter_names(queue)
        await delete_names(
            AMQP_URL,
            [queue, dead[1], topic, f"{topic}.{host}", f"actorsched.nova.dead.{topic}"],
            [exchange, f"{topic}_fanout", dead[0]],
        )


async def test_nova_messages_do_only_what_auth_nova_allows(tmp_path: Path) -> None:
    hosts = [_report("h1", 4096)]
    async with nova_stack(tmp_path, hosts, roles=frozenset({"report", "read"})) as stack:
        refused, aggregate = await stack.nova(
            {"op": "select", "uuids": _uuids(1), "spec": {"memory_mb": 512}},
            {"op": "update_aggregates", "name": "rack", "hosts": ["h1"], "metadata": {}},
        )
        assert not refused["ok"]
        assert refused["class"].startswith("PermissionError")
        assert "select_destinations needs the role 'place'" in refused["message"]
        assert aggregate["ok"]  # a cast: nothing to answer, and it changed nothing
        assert (await stack.scheduler.claims()).claims == []
        assert await stack.scheduler.aggregates() == []
        assert stack.endpoint.counts[("update_aggregates", "forbidden")] == 1


@pytest.mark.parametrize("pin", ["4.4", "4.3"])
async def test_an_older_conductor_pinned_below_4_5_gets_legacy_destinations(
    tmp_path: Path, pin: str
) -> None:
    # [upgrade_levels] scheduler pins Nova's client: 4.4 drops return_objects, 4.3
    # also instance_uuids (the RequestSpec's own instance_uuid is used)
    hosts = [_report("h1", 4096), _report("h2", 8192)]
    extra = f"[upgrade_levels]\nscheduler = {pin}\n"
    async with nova_stack(tmp_path, hosts, extra=extra) as stack:
        instance = str(uuid.uuid4())
        (got,) = await stack.nova(
            {
                "op": "select",
                "uuids": [instance],
                "spec": {"memory_mb": 512},
                "return_objects": False,
                "return_alternates": False,
            }
        )
        assert got["ok"], got
        assert got["result"] == [{"host": "h2", "nodename": "h2", "limits": {}}]
        claims = (await stack.scheduler.claims()).claims
        assert [(c.instance_uuid, c.host) for c in claims] == [(instance, "h2")]
        # several instances: Nova answers num_instances destinations, and so does
        # actorsched (4.3 names only the first instance; the others get derived uuids)
        three = _uuids(3)
        (got,) = await stack.nova(
            {
                "op": "select",
                "uuids": three,
                "spec": {"memory_mb": 3000},
                "return_objects": False,
                "return_alternates": False,
            }
        )
        assert got["ok"], got
        assert len(got["result"]) == 3, got  # 3000 MB each: h2 takes two, h1 one
        assert sorted(d["host"] for d in got["result"]) == ["h1", "h2", "h2"]
        held = {c.instance_uuid for c in (await stack.scheduler.claims()).claims}
        assert three[0] in held
        assert (set(three) <= held) is (pin == "4.4")  # 4.4 still sends instance_uuids
        assert len(held) == 4


async def test_a_move_of_a_claimed_instance_is_no_valid_host_naming_why(tmp_path: Path) -> None:
    # Nova's migrate asks select_destinations again for an instance actorsched placed,
    # its source host ignored; moves through Nova come with Placement (issue 23): until
    # then the conductor gets the NoValidHost it handles (the instance stays put)
    async with nova_stack(tmp_path, [_report("h1", 4096), _report("h2", 8192)]) as stack:
        instance = str(uuid.uuid4())
        boot, move = await stack.nova(
            {"op": "select", "uuids": [instance], "spec": {"memory_mb": 512}},
            {
                "op": "select",
                "uuids": [instance],
                "spec": {"memory_mb": 512, "ignore_hosts": ["h2"]},
            },
        )
        assert boot["result"][0][0]["service_host"] == "h2"
        assert move["is_no_valid_host"], move
        assert "already holds a claim on h2" in move["message"]
        claims = (await stack.scheduler.claims()).claims
        assert [(c.instance_uuid, c.host) for c in claims] == [(instance, "h2")]


async def _cast_done(stack: NovaStack, method: str, count: int) -> None:
    for _ in range(200):
        if stack.endpoint.counts.get((method, "ok"), 0) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{method} not handled {count} times: {stack.endpoint.counts}")


async def test_instance_casts_change_what_each_host_runs_for_the_hints(tmp_path: Path) -> None:
    """update_instance_info, sync_instance_info and delete_instance_info change what
    each host runs, as Nova's host manager keeps them: a same_host or different_host
    hint naming an instance actorsched did not place finds it there."""
    hosts = [_report("h1", 4096), _report("h2", 8192)]
    filters = (
        "[filter_scheduler]\nenabled_filters = ComputeFilter,SameHostFilter,DifferentHostFilter\n"
    )
    async with nova_stack(tmp_path, hosts, extra=filters) as stack:
        booted = str(uuid.uuid4())  # placed before the switch: no claim here
        near = {"memory_mb": 512, "scheduler_hints": {"same_host": [booted]}}
        away = {"memory_mb": 512, "scheduler_hints": {"different_host": [booted]}}
        await stack.nova({"op": "update_instance_info", "host": "h1", "uuids": [booted]})
        await _cast_done(stack, "update_instance_info", 1)
        (got,) = await stack.nova({"op": "select", "uuids": _uuids(1), "spec": near})
        assert got["result"][0][0]["nodename"] == "h1", got  # not h2, the roomier
        # it moved: h1's sync no longer lists it, h2 says it runs it
        await stack.nova(
            {"op": "sync_instance_info", "host": "h1", "uuids": []},
            {"op": "update_instance_info", "host": "h2", "uuids": [booted]},
        )
        await _cast_done(stack, "update_instance_info", 2)
        await _cast_done(stack, "sync_instance_info", 1)
        here, there = await stack.nova(
            {"op": "select", "uuids": _uuids(1), "spec": near},
            {"op": "select", "uuids": _uuids(1), "spec": away},
        )
        assert [s["nodename"] for s in here["result"][0]] == ["h2"], here
        assert [s["nodename"] for s in there["result"][0]] == ["h1"], there
        # deleted: no host runs it, the hint finds nothing and limits nothing (Nova)
        await stack.nova({"op": "delete_instance_info", "host": "h2", "uuid": booted})
        await _cast_done(stack, "delete_instance_info", 1)
        (anywhere,) = await stack.nova({"op": "select", "uuids": _uuids(1), "spec": away})
        assert {s["nodename"] for s in anywhere["result"][0]} == {"h1", "h2"}, anywhere


async def test_instance_casts_name_the_service_host_and_a_delete_frees_the_claim(
    tmp_path: Path,
) -> None:
    # the nodes report under their own names; Nova's computes cast under service hosts
    hosts = [
        _report("node-a.example", 8192, node="node-a.example"),
        _report("node-b.example", 4096, node="node-b.example"),
    ]
    async with nova_stack(tmp_path, hosts) as stack:
        first, second = _uuids(2)
        (got,) = await stack.nova({"op": "select", "uuids": [first], "spec": {"memory_mb": 1024}})
        assert got["ok"], got
        [[chosen, _alternate]] = got["result"]
        assert (chosen["service_host"], chosen["nodename"]) == ("node-a.example",) * 2
        # the compute that runs node-a says so: Selections name its service host now
        await stack.nova(
            {"op": "update_instance_info", "host": "compute-a", "uuids": [first]},
            {"op": "sync_instance_info", "host": "compute-a", "uuids": [first]},
        )
        await _cast_done(stack, "sync_instance_info", 1)
        # 5000 MB: only node-a fits
        (got,) = await stack.nova({"op": "select", "uuids": [second], "spec": {"memory_mb": 5000}})
        [[chosen]] = got["result"]
        assert (chosen["service_host"], chosen["nodename"]) == ("compute-a", "node-a.example")
        # and the other node, of no known service host, is named by itself
        (got,) = await stack.nova(
            {
                "op": "select",
                "uuids": _uuids(1),
                "spec": {"memory_mb": 3000},
                "return_alternates": False,
            }
        )
        [[other]] = got["result"]
        assert (other["service_host"], other["nodename"]) == ("node-b.example",) * 2
        # Nova names service hosts in ignore_hosts and force_hosts (in any case): they
        # stand for that service host's nodes
        ignored, forced = await stack.nova(
            {
                "op": "select",
                "uuids": _uuids(1),
                "spec": {"memory_mb": 256, "ignore_hosts": ["Compute-A"]},
            },
            {
                "op": "select",
                "uuids": _uuids(1),
                "spec": {"memory_mb": 256, "force_hosts": ["compute-a"]},
            },
        )
        assert {s["nodename"] for s in ignored["result"][0]} == {"node-b.example"}
        assert [s["nodename"] for s in forced["result"][0]] == ["node-a.example"]
        # a delete cast from another service host (a move's source) frees nothing
        await stack.nova({"op": "delete_instance_info", "host": "compute-b", "uuid": first})
        await _cast_done(stack, "delete_instance_info", 1)
        claims = {c.instance_uuid for c in (await stack.scheduler.claims()).claims}
        assert {first, second} <= claims
        # the one from the host it is on frees its claim at once
        await stack.nova({"op": "delete_instance_info", "host": "compute-a", "uuid": first})
        await _cast_done(stack, "delete_instance_info", 2)
        claims = {c.instance_uuid for c in (await stack.scheduler.claims()).claims}
        assert first not in claims
        assert second in claims
        # a cast Nova could not have sent is refused with its reason, and nothing changes
        await stack.nova(
            {
                "op": "raw_call",
                "method": "sync_instance_info",
                "args": {"host_name": "compute-a", "instance_uuids": "not a list"},
                "timeout": 5,
            }
        )
        assert stack.endpoint.counts.get(("sync_instance_info", "bad_input"), 0) == 1
        assert len((await stack.scheduler.claims()).claims) == len(claims)
