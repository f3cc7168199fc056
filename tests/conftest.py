"""Shared factories for the test suite.

Import them with ``from conftest import make_report, make_spec``: pytest puts
``tests/`` on ``sys.path`` because it is not a package. (A second
``conftest.py`` in a sub-directory without ``__init__.py`` would take the
module name ``conftest`` over; keep sub-directory fixtures elsewhere.)

The factories fill every required field with a small, valid default so a
test names only the figures it is about.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from actorsched import HostReport, RequestSpec, SchedulerConfig, ServerGroup
from actorsched.core import SchedulerCore

# Subprocesses the tests start (serve, examples, crash workers) import the
# package from this source tree, not from wherever the venv installed it.
_TREE = str(Path(__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_TREE, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)

__all__ = [
    "REPORT_FIELDS",
    "code_under_test_env",
    "make_config",
    "make_core",
    "make_report",
    "make_spec",
    "over_committed_hosts",
    "ram_only_config",
    "start_serve",
    "until_pending",
]


def code_under_test_env() -> dict[str, str]:
    """The environment for a child Python process that must run this checkout's
    ``actorsched`` (a work tree beside the one the venv installed, too), not
    whichever one is installed: the repository root first on PYTHONPATH."""
    root = str(Path(__file__).resolve().parent.parent)
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )


async def start_serve(
    amqp_url: str, queue: str, journal: Path, *more: str, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """``actorsched serve`` on ``queue`` with ``journal``, once it logs that it is
    ready (its stderr is left to the caller to drain or read)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "actorsched.cli",
        "serve",
        "--amqp-url",
        amqp_url,
        "--queue",
        queue,
        "--journal",
        str(journal),
        "--create-journal",
        *more,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**code_under_test_env(), **(env or {})},
    )
    assert process.stderr is not None
    seen: list[str] = []
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), timeout=30)).decode()
        if not line:
            raise AssertionError(f"serve exited before it was ready:\n{''.join(seen)}")
        seen.append(line)
        if "ready" in line:
            return process


async def until_pending(scheduler: Any, count: int) -> None:
    """Wait (bounded, never a fixed sleep) until ``count`` requests wait for room."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if scheduler.pending_requests == count:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{scheduler.pending_requests} waiting, not {count}")


def over_committed_hosts(states: dict[str, Any]) -> int:
    """How many hosts (HostState by name) have a negative free figure or more
    vCPUs used than they have: every fault and load test wants 0."""
    return sum(
        1
        for s in states.values()
        if s.free_ram_mb < 0 or s.free_disk_gb < 0 or s.vcpus_used > s.vcpus_total
    )


# The fields of a valid HostReport: 4096 MB, 4 vCPUs, 100 GB, nothing used.
REPORT_FIELDS: dict[str, Any] = {
    "host": "h1",
    "generation": 1,
    "memory_mb": 4096,
    "memory_mb_used": 0,
    "vcpus": 4,
    "vcpus_used": 0,
    "local_gb": 100,
    "local_gb_used": 0,
}


def make_report(host: str = "h1", generation: int = 1, **fields: Any) -> HostReport:
    """A valid HostReport: :data:`REPORT_FIELDS` unless overridden."""
    return HostReport(**{**REPORT_FIELDS, "host": host, "generation": generation, **fields})


def make_spec(
    *instance_uuids: str,
    memory_mb: int = 512,
    vcpus: int = 1,
    disk_gb: int = 1,
    **fields: Any,
) -> RequestSpec:
    """A valid RequestSpec for ``instance_uuids`` (default ``["vm1"]``).

    ``group`` may also be given as an ``(id, policy)`` tuple.
    """
    group = fields.pop("group", None)
    if isinstance(group, tuple):
        group = ServerGroup(id=group[0], policy=group[1])
    return RequestSpec(
        instance_uuids=list(instance_uuids or ("vm1",)),
        memory_mb=memory_mb,
        vcpus=vcpus,
        disk_gb=disk_gb,
        group=group,
        **fields,
    )


def make_config(**fields: Any) -> SchedulerConfig:
    """SchedulerConfig with a fixed seed (so host_subset_size > 1 is reproducible)."""
    fields.setdefault("seed", 0)
    return SchedulerConfig(**fields)


def ram_only_config(**fields: Any) -> SchedulerConfig:
    """Only the RAM weigher counts: CPU, disk and I/O weighers are switched off.

    Makes the expected choice easy to state: the host with the most free RAM.
    """
    values: dict[str, Any] = {
        "cpu_weight_multiplier": 0.0,
        "disk_weight_multiplier": 0.0,
        "io_ops_weight_multiplier": 0.0,
    }
    values.update(fields)
    return make_config(**values)


def make_core(config: SchedulerConfig | None = None, **kwargs: Any) -> SchedulerCore:
    """A SchedulerCore (custom ``filters=``/``weighers=`` pass through)."""
    return SchedulerCore(config or make_config(), **kwargs)


@pytest.fixture
def core() -> SchedulerCore:
    """A core with the default (Nova) configuration and a fixed seed."""
    return make_core()


@pytest.fixture(scope="session", autouse=True)
def machine_services_untouched() -> Any:
    """Fail the run if it restarted, or cut other clients of, the machine's own
    RabbitMQ or PostgreSQL (see :mod:`machine_sentinel`)."""
    from machine_sentinel import MachineSentinel

    sentinel = MachineSentinel(
        os.environ.get("ACTORSCHED_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
        os.environ.get("ACTORSCHED_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    sentinel.open()
    yield sentinel
    try:
        disturbed = sentinel.disturbed()
    finally:
        sentinel.close()
    assert disturbed == [], "; ".join(disturbed)
