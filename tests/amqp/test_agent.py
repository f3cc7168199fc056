"""``actorsched report``, the host agent, against a real service on the real broker."""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
from pathlib import Path

import psutil
import pytest
from amqp_support import AMQP_URL, running_stack

from actorsched import agent
from actorsched.settings import (
    AGENT_FLAGS,
    AgentSettings,
    Settings,
    SettingsError,
    add_arguments,
    load,
)

pytestmark = pytest.mark.amqp


def _settings(queue: str, *argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_arguments(parser, AGENT_FLAGS)
    args = parser.parse_args(
        ["--amqp-url", AMQP_URL, "--queue", queue, "--interval", "0.05", *argv]
    )
    return load(args)


async def test_the_agent_reports_this_machine_with_its_zone_traits_and_instances(
    tmp_path: Path,
) -> None:
    instances = tmp_path / "instances.json"
    instances.write_text(
        json.dumps(
            [
                {"uuid": "vm-a", "memory_mb": 1, "vcpus": 1, "disk_gb": 1},
                {"uuid": "vm-b", "memory_mb": 2**20, "vcpus": 3, "disk_gb": 0},
            ]
        )
    )
    async with running_stack() as stack:
        chosen = _settings(
            stack.queue,
            "--host",
            "agent-host",
            "--availability-zone",
            "az7",
            "--traits",
            "CUSTOM_SSD,CUSTOM_GPU",
            "--rounds",
            "3",
            "--disk-path",
            str(tmp_path),
            "--instances-file",
            str(instances),
        )
        assert await agent.run(chosen) == 0
        (state,) = (await stack.scheduler.host_states()).values()
    memory = psutil.virtual_memory()
    disk = psutil.disk_usage(str(tmp_path))
    assert state.host == "agent-host"
    assert state.availability_zone == "az7"
    assert sorted(state.traits) == ["CUSTOM_GPU", "CUSTOM_SSD"]
    assert state.memory_mb == memory.total // 2**20
    assert state.vcpus_total == psutil.cpu_count(logical=True)
    assert state.vcpus_used == 4  # the listed instances' flavors
    assert state.local_gb == disk.total // 2**30
    # used: the flavors' sum (1 TiB + 1 MB of RAM here), never less than the machine uses
    assert state.memory_mb - state.free_ram_mb == max(2**20 + 1, _in_use_mb(memory))
    assert state.local_gb - state.free_disk_gb == -(-(disk.total - disk.free) // 2**30)
    assert state.num_instances == 2
    assert state.generation > 1_600_000_000_000  # milliseconds: rising across restarts too


async def test_an_unreadable_instance_list_sends_no_report_and_the_agent_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps([{"uuid": "vm-a", "memory_mb": 1, "vcpus": 1, "disk_gb": 0}]))
    async with running_stack() as stack:
        common = ["--host", "h", "--disk-path", str(tmp_path), "--instances-file", str(instances)]
        assert await agent.run(_settings(stack.queue, *common, "--rounds", "1")) == 0
        (first,) = (await stack.scheduler.host_states()).values()
        instances.write_text("[vm-a")  # damaged: not JSON
        with caplog.at_level(logging.ERROR, logger="actorsched.agent"):
            # rounds that sent nothing: exit 1, so a one-shot run can tell
            assert await agent.run(_settings(stack.queue, *common, "--rounds", "2")) == 1
        (after,) = (await stack.scheduler.host_states()).values()
    # no report replaced the one listing vm-a: an empty list would have dropped it
    assert after.generation == first.generation
    assert after.num_instances == 1
    lines = [r.getMessage() for r in caplog.records if "no report this round" in r.getMessage()]
    assert len(lines) == 2
    assert f"instances file {instances} is not JSON" in lines[0]


def _in_use_mb(memory: object) -> int:
    total, available = memory.total, memory.available  # type: ignore[attr-defined]
    return int(-(-(total - available) // 2**20))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"uuid": "x"}', "must be a JSON list, got dict"),
        ('["vm-1"]', 'item 0 must be an object with "uuid", "memory_mb", "vcpus" and "disk_gb"'),
        ('[{"uuid": "x", "memory_mb": 1, "vcpus": -1, "disk_gb": 0}]',
         "item 0: vcpus must be a whole number >= 0, got -1"),
        ('[{"uuid": "x", "vcpus": 1, "disk_gb": 0}]',
         "item 0: memory_mb must be a whole number >= 0, got None"),
    ],
)  # fmt: skip
def test_a_bad_instance_list_is_refused_naming_the_item(
    content: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "i.json"
    path.write_text(content)
    settings = AgentSettings(instances_file=str(path))
    with pytest.raises(agent.InstancesUnreadable, match=re.escape(message)):
        agent.read_instances(settings)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["a", "a"], "instances: Value error, instances must list each uuid once"),
        ([""], "instances.0: String should have at least 1 character"),
    ],
)
def test_a_list_that_would_make_an_invalid_report_skips_the_round(
    items: list[str], message: str, tmp_path: Path
) -> None:
    path = tmp_path / "i.json"
    flavor = {"memory_mb": 1, "vcpus": 1, "disk_gb": 0}
    path.write_text(json.dumps([{"uuid": u, **flavor} for u in items]))
    settings = AgentSettings(instances_file=str(path))
    with pytest.raises(agent.InstancesUnreadable, match=re.escape(message)):
        agent.measure(settings, 1)


async def test_a_disk_path_that_is_not_a_directory_is_a_settings_error(tmp_path: Path) -> None:
    chosen = _settings("q", "--disk-path", str(tmp_path / "missing"), "--rounds", "1")
    with pytest.raises(SettingsError, match=r"setting disk_path=.*missing \(from --disk-path\)"):
        await agent.run(chosen)


def test_the_instance_list_may_come_from_a_command(tmp_path: Path) -> None:
    items = [{"uuid": f"vm-{i}", "memory_mb": 512, "vcpus": 2, "disk_gb": 10} for i in (1, 2)]
    script = tmp_path / "list.py"
    script.write_text(f"print({json.dumps(items)!r})")
    settings = AgentSettings(instances_command=f"{sys.executable} {script}")
    assert agent.read_instances(settings) == agent.Listed(["vm-1", "vm-2"], 1024, 4, 20)
    failing = AgentSettings(instances_command=f"{sys.executable} -c 'raise SystemExit(3)'")
    with pytest.raises(agent.InstancesUnreadable, match="exited 3"):
        agent.read_instances(failing)


async def test_without_an_instance_source_the_agent_refuses_to_start(tmp_path: Path) -> None:
    common = ["--host", "h", "--disk-path", str(tmp_path), "--rounds", "1"]
    with pytest.raises(SettingsError, match="no instance source: give --instances-file"):
        await agent.run(_settings("nobody", *common))
    with pytest.raises(SettingsError, match="one instance source, not 2: --libvirt-uri, --no"):
        await agent.run(
            _settings("nobody", *common, "--libvirt-uri", "test:///default", "--no-instances")
        )


async def test_no_instances_reports_a_host_that_runs_nothing(tmp_path: Path) -> None:
    async with running_stack() as stack:
        common = ["--host", "empty", "--disk-path", str(tmp_path), "--no-instances"]
        assert await agent.run(_settings(stack.queue, *common, "--rounds", "1")) == 0
        state = (await stack.scheduler.host_states())["empty"]
    assert state.num_instances == 0


@pytest.mark.skipif(shutil.which("virsh") is None, reason="no virsh (Debian: libvirt-clients)")
async def test_the_instances_come_from_libvirts_test_driver(tmp_path: Path) -> None:
    # libvirt's own test driver: one running domain "test", 8 GiB maximum, 2 vCPUs
    async with running_stack() as stack:
        common = ["--host", "kvm-1", "--disk-path", str(tmp_path)]
        uri = ["--libvirt-uri", "test:///default", "--rounds", "1"]
        assert await agent.run(_settings(stack.queue, *common, *uri)) == 0
        state = (await stack.scheduler.host_states())["kvm-1"]
        located = await stack.scheduler.where("6695eb01-f6a4-8304-79aa-97f2502e193f")
    assert state.num_instances == 1
    assert state.vcpus_used == 2
    assert located.host == "kvm-1"
    assert located.reported
    listed = agent.read_instances(_settings("q", *common, *uri).agent)
    assert listed is not None
    assert (listed.memory_mb, listed.vcpus, listed.disk_gb) == (8192, 2, 0)


def test_an_unreachable_libvirt_is_named(tmp_path: Path) -> None:
    if shutil.which("virsh") is None:
        pytest.skip("no virsh (Debian: libvirt-clients)")
    chosen = _settings(
        "q", "--disk-path", str(tmp_path), "--libvirt-uri", "test:///nonexistent.xml"
    )
    with pytest.raises(
        agent.InstancesUnreadable, match=r"libvirt at test:///nonexistent.xml: virsh list exited 1"
    ):
        agent.read_instances(chosen.agent)


async def test_the_agent_says_it_is_reporting_once_a_minute_not_once_a_report(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_stack() as stack:
        common = ["--host", "quiet", "--disk-path", str(tmp_path), "--no-instances"]
        with caplog.at_level(logging.DEBUG, logger="actorsched.agent"):
            assert await agent.run(_settings(stack.queue, *common, "--rounds", "4")) == 0
    sent = [r for r in caplog.records if r.getMessage().startswith("report of quiet sent")]
    assert len(sent) == 4
    assert [r.levelno for r in sent] == [logging.INFO] + [logging.DEBUG] * 3
    assert sent[-1].getMessage().endswith("4 sent so far")
