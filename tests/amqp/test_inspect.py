"""The inspection commands (``actorsched hosts`` ...) against a running service."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from amqp_support import AMQP_URL, host_report, running_stack

from actorsched import RequestSpec
from actorsched.inspect import render_table

pytestmark = pytest.mark.amqp


async def _cli(*argv: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "actorsched.cli",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_hosts_lists_each_host_with_its_figures_as_json_and_as_a_table() -> None:
    async with running_stack() as stack:
        await stack.client.update_host(host_report("h1", memory_mb=8192))
        await stack.client.update_host(host_report("h2", memory_mb=4096))
        await stack.client.select_destinations(
            RequestSpec(instance_uuids=["vm-1"], memory_mb=1024, vcpus=1, disk_gb=1)
        )
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await _cli("hosts", *where, "--json")
        assert code == 0, err
        hosts = json.loads(out)
        assert sorted(hosts) == ["h1", "h2"]
        assert hosts["h1"]["assumed_claims"] == 1  # the most free RAM took vm-1
        code, out, err = await _cli("hosts", *where)
        assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["HOST", "ZONE", "FREE/TOTAL"]
    h1 = next(line for line in lines if line.startswith("h1 "))
    assert f"{hosts['h1']['free_ram_mb']}/8192" in h1.split()


async def test_an_inspection_of_a_queue_nobody_serves_is_one_line_and_exit_1() -> None:
    code, _, err = await _cli("hosts", "--amqp-url", AMQP_URL, "--queue", "nobody.here")
    assert code == 1
    assert err.strip() == (
        "actorsched hosts: no queue 'nobody.here' on the broker: start `actorsched serve "
        "--queue nobody.here` first"
    )


def test_a_table_pads_each_column_to_its_widest_cell() -> None:
    text = render_table(["A", "BB"], [["xyz", True], [None, ["p", "q"]]])
    assert text.splitlines() == ["A    BB", "---  ---", "xyz  yes", "-    p,q"]
