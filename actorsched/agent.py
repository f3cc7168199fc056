"""``actorsched report``: the host agent, publishing this machine's host reports.

It reads the machine it runs on with psutil (memory, logical CPUs, the size
of the file system at ``disk_path``) and, optionally, the instances running
here (a JSON list from ``instances_file`` or printed by
``instances_command``: uuids, or objects with ``uuid`` and optionally
``vcpus``), and sends a :class:`~actorsched.models.HostReport` every
``interval`` seconds with a rising generation, the zone and traits of its
settings (``[agent]`` table, ``ACTORSCHED_<FIELD>`` or flags; see
:mod:`actorsched.settings`).

Figures: ``memory_mb`` is the machine's memory and ``memory_mb_used`` what
is in use now (total minus available); ``vcpus`` its logical CPUs and
``vcpus_used`` the sum of the listed instances' ``vcpus``; ``local_gb`` and
``local_gb_used`` the file system's size and use, in GiB.

When the instance list cannot be read, that round sends no report (a report
with an empty list would tell the scheduler that nothing runs here) and
says why in one line; the agent goes on. Exit codes: 0 after ``rounds``
reports or SIGTERM/SIGINT, 1 when the broker stays unreachable, 2 for bad
settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shlex
import signal
import subprocess
import time
from pathlib import Path

import aiormq.exceptions
import psutil

from . import settings
from .amqp.client import SchedulerClient
from .errors import SchedulerError
from .logs import configure_logging
from .models import HostReport
from .settings import AgentSettings

__all__ = ["InstancesUnreadable", "add_arguments", "main", "measure", "run"]

log = logging.getLogger("actorsched.agent")
_MB = 2**20
_GB = 2**30
# bound what an instance list may be: a runaway command must not fill the agent
MAX_INSTANCES_BYTES = 16 * _MB


class InstancesUnreadable(Exception):
    """The instance list could not be read or is not a JSON list of instances."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched report``."""
    settings.add_arguments(parser, settings.AGENT_FLAGS)


def _parse_instances(text: str, origin: str) -> tuple[list[str], int]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstancesUnreadable(f"{origin} is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise InstancesUnreadable(f"{origin} must be a JSON list, got {type(items).__name__}")
    uuids: list[str] = []
    vcpus = 0
    for index, item in enumerate(items):
        if isinstance(item, str):
            uuids.append(item)
        elif isinstance(item, dict) and isinstance(item.get("uuid"), str):
            uuids.append(item["uuid"])
            cpus = item.get("vcpus", 0)
            if not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 0:
                raise InstancesUnreadable(
                    f"{origin}: item {index}: vcpus must be a whole number >= 0, got {cpus!r}"
                )
            vcpus += cpus
        else:
            raise InstancesUnreadable(
                f'{origin}: item {index} must be a uuid or an object with "uuid", got {item!r}'
            )
    return uuids, vcpus


def read_instances(agent: AgentSettings) -> tuple[list[str], int] | None:
    """The instances here and the sum of their vCPUs, or None when none is configured.

    Raises :class:`InstancesUnreadable` naming what went wrong.
    """
    if agent.instances_file is not None:
        path = Path(agent.instances_file)
        try:
            with path.open("rb") as file:
                data = file.read(MAX_INSTANCES_BYTES + 1)
        except OSError as exc:
            raise InstancesUnreadable(f"instances file {path}: {exc.strerror or exc}") from None
        origin = f"instances file {path}"
    elif agent.instances_command is not None:
        origin = f"instances command {agent.instances_command!r}"
        try:
            done = subprocess.run(
                shlex.split(agent.instances_command),
                capture_output=True,
                timeout=max(1.0, agent.interval),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstancesUnreadable(f"{origin}: {exc}") from None
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip().splitlines()
            raise InstancesUnreadable(
                f"{origin} exited {done.returncode}: {err[-1] if err else 'no output'}"
            )
        data = done.stdout
    else:
        return None
    if len(data) > MAX_INSTANCES_BYTES:
        raise InstancesUnreadable(f"{origin} is over {MAX_INSTANCES_BYTES} bytes")
    return _parse_instances(data.decode(errors="replace"), origin)


def measure(agent: AgentSettings, generation: int) -> HostReport:
    """This machine's report now (raises :class:`InstancesUnreadable`)."""
    listed = read_instances(agent)
    memory = psutil.virtual_memory()
    disk = psutil.disk_usage(agent.disk_path)
    return HostReport(
        host=agent.host,
        generation=generation,
        memory_mb=memory.total // _MB,
        memory_mb_used=min(memory.total, memory.total - memory.available) // _MB,
        memory_mb_reserved=agent.memory_mb_reserved,
        vcpus=psutil.cpu_count(logical=True) or 0,
        vcpus_used=0 if listed is None else listed[1],
        local_gb=disk.total // _GB,
        local_gb_used=disk.used // _GB,
        availability_zone=agent.availability_zone,
        enabled=agent.enabled,
        traits=list(agent.traits),
        instances=[] if listed is None else listed[0],
    )


def _next_generation(last: int) -> int:
    # milliseconds since the epoch: still rising after the agent restarts
    return max(last + 1, int(time.time() * 1000))


async def run(chosen: settings.Settings, stop: asyncio.Event | None = None) -> int:
    """Send reports until ``rounds`` are sent or ``stop`` is set; the exit code."""
    agent = chosen.agent
    service = chosen.service
    stop = stop if stop is not None else asyncio.Event()
    client = SchedulerClient(service.amqp_url, queue=service.queue, batch=False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + service.connect_timeout
    while True:
        try:
            await client.connect()
            break
        except (aiormq.exceptions.AMQPConnectionError, OSError) as exc:
            if loop.time() >= deadline:
                log.error(
                    "broker unreachable for %g s, giving up: %s", service.connect_timeout, exc
                )
                return 1
            log.warning("broker unreachable (%s); trying again in 1 s", exc)
            await asyncio.sleep(1.0)
    generation = 0
    rounds = 0
    try:
        while agent.rounds is None or rounds < agent.rounds:
            rounds += 1
            generation = _next_generation(generation)
            try:
                report = measure(agent, generation)
                applied = await client.update_host(report, timeout=max(5.0, agent.interval))
            except InstancesUnreadable as exc:
                log.error("no report this round: %s", exc)
            except (SchedulerError, TimeoutError) as exc:
                log.error("report of %s not delivered this round: %s", agent.host, exc)
            else:
                log.info(
                    "report of %s sent (generation %d, %d instances): %s",
                    report.host,
                    generation,
                    len(report.instances),
                    "applied" if applied else "not newer than the last one, ignored",
                )
            if agent.rounds is not None and rounds >= agent.rounds:
                break
            try:
                await asyncio.wait_for(stop.wait(), timeout=agent.interval)
                break
            except TimeoutError:
                pass
    finally:
        await client.close()
    return 0


def main(args: argparse.Namespace) -> int:
    """Entry point of ``actorsched report``."""
    chosen = settings.load(args)
    configure_logging(chosen.service.log_level, chosen.service.log_format)
    stop = asyncio.Event()

    async def _main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await run(chosen, stop)

    return asyncio.run(_main())
