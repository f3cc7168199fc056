"""``actorsched report``: the host agent, publishing this machine's host reports.

It reads the machine it runs on with psutil (memory, logical CPUs, the size
of the file system at ``disk_path``) and the instances running here, from
exactly one source: a JSON list from ``instances_file`` or printed by
``instances_command`` (objects with ``uuid`` and the instance's flavor,
``memory_mb``, ``vcpus`` and ``disk_gb``: the one format), or libvirt's
running domains at ``libvirt_uri`` (through ``virsh``: each domain's uuid,
maximum memory and vCPUs; libvirt holds no flavor disk, so disk comes from
the file system alone). Without a source it refuses to start, unless
``no_instances`` says this host runs nothing actorsched placed: a report
that lists nothing would make the scheduler drop every claim on the host
after ``claim_timeout``. It sends a
:class:`~actorsched.models.HostReport` every ``interval`` seconds with a
rising generation, the zone and traits of its settings (``[agent]`` table,
``ACTORSCHED_<FIELD>`` or flags; see :mod:`actorsched.settings`).

Figures: ``memory_mb``, ``vcpus`` and ``local_gb`` are the machine's memory,
logical CPUs and file system size (GiB). The used figures are what Nova's
resource tracker reports, the sums of the listed instances' flavors, but
never less than the machine uses now (memory not available, disk not free,
rounded up): a scheduler that confirms a claim by a report counts it by the
report's figures alone, so an instance must be counted by its flavor.

When the instance list cannot be read, or would make an invalid report,
that round sends no report (a report with an empty list would tell the
scheduler that nothing runs here) and says why in one line; the agent goes
on. Exit codes: 0 after ``rounds`` reports or SIGTERM/SIGINT, 1 when the
broker stays unreachable or ``rounds`` ended with no report sent, 2 for bad
settings (a ``disk_path`` that is not a directory, no instance source or
more than one, too).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import aiormq.exceptions
import psutil
from pydantic import ValidationError

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
# seconds between the INFO lines that say reports are being sent
_LINE_EVERY = 60.0


class InstancesUnreadable(Exception):
    """The instance list could not be read or is not a JSON list of instances."""


@dataclass(frozen=True, slots=True)
class Listed:
    """The instances running here, and the sums of their flavors."""

    uuids: list[str]
    memory_mb: int
    vcpus: int
    disk_gb: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched report``."""
    settings.add_arguments(parser, settings.AGENT_FLAGS)


_SIZES = ("memory_mb", "vcpus", "disk_gb")


def _parse_instances(text: str, origin: str) -> Listed:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstancesUnreadable(f"{origin} is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise InstancesUnreadable(f"{origin} must be a JSON list, got {type(items).__name__}")
    uuids: list[str] = []
    sums = dict.fromkeys(_SIZES, 0)
    for index, item in enumerate(items):
        if not (isinstance(item, dict) and isinstance(item.get("uuid"), str)):
            raise InstancesUnreadable(
                f'{origin}: item {index} must be an object with "uuid", "memory_mb", "vcpus" '
                f'and "disk_gb" (its flavor), got {item!r}'
            )
        uuids.append(item["uuid"])
        for size in _SIZES:
            value = item.get(size)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InstancesUnreadable(
                    f"{origin}: item {index}: {size} must be a whole number >= 0, got {value!r}"
                )
            sums[size] += value
    return Listed(uuids, sums["memory_mb"], sums["vcpus"], sums["disk_gb"])


def read_instances(agent: AgentSettings) -> Listed | None:
    """The instances here and their flavors' sums, or None when none is configured.

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
    elif agent.libvirt_uri is not None:
        return _libvirt_instances(agent.libvirt_uri, max(1.0, agent.interval))
    elif agent.instances_command is not None:
        origin = f"instances command {agent.instances_command!r}"
        data = _output(shlex.split(agent.instances_command), origin, max(1.0, agent.interval))
    else:
        return None
    if len(data) > MAX_INSTANCES_BYTES:
        raise InstancesUnreadable(f"{origin} is over {MAX_INSTANCES_BYTES} bytes")
    return _parse_instances(data.decode(errors="replace"), origin)


def _output(argv: list[str], origin: str, timeout: float) -> bytes:
    """What ``argv`` prints (the caller checks its bound); InstancesUnreadable
    naming ``origin`` when it cannot run or fails."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InstancesUnreadable(f"{origin}: {exc}") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise InstancesUnreadable(
            f"{origin} exited {done.returncode}: {err[-1] if err else 'no output'}"
        )
    return done.stdout


def _virsh(uri: str, args: list[str], timeout: float) -> str:
    origin = f"libvirt at {uri}: virsh {args[0]}"
    if shutil.which("virsh") is None:
        raise InstancesUnreadable(
            f"{origin}: no virsh on PATH (Debian: apt-get install libvirt-clients)"
        )
    data = _output(["virsh", "--quiet", "-c", uri, *args], origin, timeout)
    if len(data) > MAX_INSTANCES_BYTES:
        raise InstancesUnreadable(f"{origin} printed over {MAX_INSTANCES_BYTES} bytes")
    return data.decode(errors="replace")


def _libvirt_instances(uri: str, timeout: float) -> Listed:
    """The running domains at ``uri``: their uuids, maximum memory and vCPUs."""
    uuids = _virsh(uri, ["list", "--uuid", "--state-running"], timeout).split()
    memory_mb = vcpus = 0
    for uuid in uuids:
        info: dict[str, str] = {}
        for line in _virsh(uri, ["dominfo", uuid], timeout).splitlines():
            key, sep, value = line.partition(":")
            if sep:
                info[key.strip()] = value.strip()
        try:
            memory_mb += int(info["Max memory"].split()[0]) // 1024  # KiB
            vcpus += int(info["CPU(s)"])
        except (KeyError, ValueError, IndexError):
            raise InstancesUnreadable(
                f"libvirt at {uri}: dominfo of {uuid} has no Max memory and CPU(s)"
            ) from None
    return Listed(uuids, memory_mb, vcpus, 0)


def instance_source_problem(agent: AgentSettings) -> str | None:
    """Why ``agent`` cannot start for want of exactly one instance source (None: it can)."""
    named = [
        name
        for name, value in (
            ("--instances-file", agent.instances_file),
            ("--instances-command", agent.instances_command),
            ("--libvirt-uri", agent.libvirt_uri),
        )
        if value is not None
    ]
    if agent.no_instances:
        named.append("--no-instances")
    if len(named) == 1:
        return None
    if not named:
        return (
            "no instance source: give --instances-file, --instances-command or --libvirt-uri "
            "(or [agent] in the settings file), or --no-instances for a host that runs nothing "
            "actorsched placed; a report listing nothing would make the scheduler drop every "
            "claim on this host"
        )
    return f"one instance source, not {len(named)}: {', '.join(named)}"


def measure(agent: AgentSettings, generation: int) -> HostReport:
    """This machine's report now (raises :class:`InstancesUnreadable`).

    Used figures are as Nova's resource tracker counts them, the listed
    instances' flavors, but never less than the machine uses now: a
    scheduler that confirms a claim by this report then counts the
    instance's whole flavor, whatever it touches yet.
    """
    listed = read_instances(agent)
    memory = psutil.virtual_memory()
    disk = psutil.disk_usage(agent.disk_path)
    in_use_mb = math.ceil((memory.total - memory.available) / _MB)
    in_use_gb = math.ceil((disk.total - disk.free) / _GB)  # what users cannot write
    try:
        return HostReport(
            host=agent.host,
            generation=generation,
            memory_mb=memory.total // _MB,
            memory_mb_used=max(in_use_mb, listed.memory_mb if listed else 0),
            memory_mb_reserved=agent.memory_mb_reserved,
            vcpus=psutil.cpu_count(logical=True) or 0,
            vcpus_used=listed.vcpus if listed else 0,
            local_gb=disk.total // _GB,
            local_gb_used=min(disk.total // _GB, max(in_use_gb, listed.disk_gb if listed else 0)),
            availability_zone=agent.availability_zone,
            enabled=agent.enabled,
            traits=list(agent.traits),
            instances=listed.uuids if listed else [],
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise InstancesUnreadable(f"the report would be invalid: {where}: {first['msg']}") from None


def _next_generation(last: int) -> int:
    # milliseconds since the epoch: still rising after the agent restarts
    return max(last + 1, int(time.time() * 1000))


async def run(chosen: settings.Settings, stop: asyncio.Event | None = None) -> int:
    """Send reports until ``rounds`` are sent or ``stop`` is set; the exit code."""
    agent = chosen.agent
    service = chosen.service
    stop = stop if stop is not None else asyncio.Event()
    if not os.path.isdir(agent.disk_path):  # noqa: ASYNC240 (once, before anything starts)
        raise settings.SettingsError(
            f"setting disk_path={agent.disk_path} (from "
            f"{chosen.sources.get('agent.disk_path', 'default')}): not a directory"
        )
    problem = instance_source_problem(agent)
    if problem is not None:
        raise settings.SettingsError(problem)
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
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            if stop.is_set():
                return 0
    generation = 0
    rounds = 0
    sent = 0
    next_line = loop.time()
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
                sent += 1
                # one INFO line a minute (and the first), not one per report
                now = loop.time()
                level = logging.INFO if now >= next_line else logging.DEBUG
                if level == logging.INFO:
                    next_line = now + _LINE_EVERY
                log.log(
                    level,
                    "report of %s sent (generation %d, %d instances): %s; %d sent so far",
                    report.host,
                    generation,
                    len(report.instances),
                    "applied" if applied else "not newer than the last one, ignored",
                    sent,
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
    if agent.rounds is not None and sent == 0:
        log.error("%d round(s) and no report sent", rounds)
        return 1
    return 0


def main(args: argparse.Namespace) -> int:
    """Entry point of ``actorsched report``."""
    chosen = settings.load(args)
    configure_logging(chosen.service.log_level, chosen.service.log_format)
    chosen.warn_unknown_env(log)
    stop = asyncio.Event()

    async def _main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await run(chosen, stop)

    return asyncio.run(_main())
