"""The inspection commands (``actorsched hosts`` ...) against a running service."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from amqp_support import AMQP_URL, host_report, run_cli, running_stack

from actorsched import RequestSpec, SchedulerConfig
from actorsched.inspect import render_table

pytestmark = pytest.mark.amqp


async def test_hosts_lists_each_host_with_its_figures_as_json_and_as_a_table() -> None:
    async with running_stack() as stack:
        await stack.client.update_host(host_report("h1", memory_mb=8192))
        await stack.client.update_host(host_report("h2", memory_mb=4096))
        await stack.client.create_aggregate("ssd", {"ssd": "true"}, ["h1"])
        await stack.client.select_destinations(
            RequestSpec(instance_uuids=["vm-1"], memory_mb=1024, vcpus=1, disk_gb=1)
        )
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await run_cli("hosts", *where, "--json")
        assert code == 0, err
        hosts = json.loads(out)
        assert sorted(hosts) == ["h1", "h2"]
        assert hosts["h1"]["assumed_claims"] == 1  # the most free RAM took vm-1
        code, out, err = await run_cli("hosts", *where)
        assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["HOST", "ZONE", "AGGREGATES", "FREE/TOTAL"]
    h1 = next(line for line in lines if line.startswith("h1 "))
    assert h1.split()[2] == "ssd"  # its aggregates
    assert f"{hosts['h1']['free_ram_mb']}/8192" in h1.split()


async def test_an_inspection_of_a_queue_nobody_serves_is_one_line_and_exit_1() -> None:
    code, _, err = await run_cli("hosts", "--amqp-url", AMQP_URL, "--queue", "nobody.here")
    assert code == 1
    assert err.strip() == (
        "actorsched hosts: no queue 'nobody.here' on the broker: start `actorsched serve "
        "--queue nobody.here` first"
    )


def test_a_table_pads_each_column_to_its_widest_cell() -> None:
    text = render_table(["A", "BB"], [["xyz", True], [None, ["p", "q"]]])
    assert text.splitlines() == ["A    BB", "---  ---", "xyz  yes", "-    p,q"]


async def test_claims_where_and_plan_over_the_broker() -> None:
    async with running_stack() as stack:
        await stack.client.update_host(host_report("h1", memory_mb=8192))
        await stack.client.update_host(host_report("h2", memory_mb=4096))
        (placed,) = await stack.client.select_destinations(
            RequestSpec(instance_uuids=["vm-1"], memory_mb=1024, vcpus=1, disk_gb=1)
        )
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await run_cli("claims", *where, "--json")
        assert code == 0, err
        (claim,) = json.loads(out)
        assert (claim["instance_uuid"], claim["host"], claim["memory_mb"]) == (
            "vm-1",
            placed.host,
            1024,
        )
        assert placed.host == "h1"  # the most free RAM
        code, out, _ = await run_cli("claims", *where, "--host", "h1")
        assert code == 0
        assert out.splitlines()[2].split()[:3] == ["vm-1", "h1", "1024"]
        code, out, _ = await run_cli("claims", *where, "--host", "h2")
        assert code == 0
        assert len(out.splitlines()) == 2  # the headers alone
        code, out, _ = await run_cli("where", *where, "vm-1")
        assert (code, out.strip()) == (0, f"vm-1: {placed.host} (claimed, not reported yet)")
        code, _, err = await run_cli("where", *where, "vm-unknown")
        assert (code, err.strip()) == (1, "vm-unknown: not known to the scheduler")
        spec = RequestSpec(instance_uuids=["vm-2"], memory_mb=2048, vcpus=1, disk_gb=1)
        planned = spec.model_dump_json()
        code, out, err = await _plan(where, planned)
        assert code == 0, err
        plan = json.loads(out)
        assert plan["placed"] is True
        (instance,) = plan["instances"]
        assert instance["host"] == instance["candidates"][0]["host"]
        assert set(instance["candidates"][0]["weights"]) >= {"RAMWeigher"}
        code, out, err = await _plan(where, planned, json_out=False)
        assert code == 0, err
        assert out.startswith(f"instance vm-2: {instance['host']} (2/2 hosts pass)")
        assert "TOTAL" in out
        code, out, err = await _plan(
            where,
            RequestSpec(
                instance_uuids=["vm-3"], memory_mb=10**6, vcpus=1, disk_gb=1
            ).model_dump_json(),
        )
        assert code == 1
        assert json.loads(out)["message"].endswith("RamFilter removed 2")
        code, _, err = await _plan(where, '{"memory_mb": 1}')
        assert code == 2
        assert err.startswith("actorsched plan: not a RequestSpec: ")
        # the embedded client says the same, and nothing was claimed by any plan
        assert (await stack.client.where("vm-2")).host is None
        assert [c.instance_uuid for c in await stack.client.claims()] == ["vm-1"]


async def _plan(where: list[str], spec: str, *, json_out: bool = True) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "actorsched.cli",
        "plan",
        *where,
        *(["--json"] if json_out else []),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(spec.encode()), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_plan_says_which_claims_a_placement_would_preempt() -> None:
    config = SchedulerConfig(seed=1, preemption=True)
    async with running_stack(config=config) as stack:
        await stack.client.update_host(host_report("h1", memory_mb=2048))
        await stack.client.select_destinations(
            RequestSpec(instance_uuids=["low"], memory_mb=2048, vcpus=1, disk_gb=1)
        )
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        spec = RequestSpec(instance_uuids=["high"], memory_mb=2048, vcpus=1, disk_gb=1, priority=5)
        code, out, err = await _plan(where, spec.model_dump_json())
        assert code == 0, err
        (instance,) = json.loads(out)["instances"]
        assert (instance["host"], instance["preempted"]) == ("h1", ["low"])
        code, out, err = await _plan(where, spec.model_dump_json(), json_out=False)
        assert code == 0, err
        assert "would preempt: low" in out.splitlines()
        assert [c.instance_uuid for c in await stack.client.claims()] == ["low"]  # still there
