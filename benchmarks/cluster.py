"""Several ``actorsched serve`` processes on one queue and one journal, and an audit of them.

The fault tests (``tests/ha``) and the fail-over benchmark both drive real
processes on the real broker and database through this module:
:class:`ServeProcess` starts one and reads its log, :func:`place_all` places
uuids through plain clients that retry each uuid unchanged until answered,
and :func:`audit` counts what must be 0: lost, doubled and over-committed
claims, and uuids answered with two hosts.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import aio_pika

from actorsched import NoValidHost, RequestSpec
from actorsched.amqp import SchedulerClient
from actorsched.core import SchedulerCore
from actorsched.models import SchedulerConfig

__all__ = ["Audit", "ServeProcess", "Tally", "audit", "delete_names", "delete_queue", "place_all"]

ACTIVE_LINE = "active: this service owns"
STANDBY_LINE = "ready as standby"
STEP_DOWN_LINE = "stepping down to standby"


@dataclass
class ServeProcess:
    """One ``actorsched serve`` subprocess; its log lines are kept as they come."""

    process: asyncio.subprocess.Process
    name: str
    lines: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        *,
        amqp_url: str,
        queue: str,
        journal: str,
        shard: str = "default",
        name: str = "serve",
        extra: Sequence[str] = (),
        ready: bool = True,
    ) -> ServeProcess:
        """Start one; with ``ready``, wait for its standby line (it consumes from then on)."""
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
            journal,
            *(["--shard", shard] if shard != "default" else []),
            "--follow-interval",
            "0.02",
            "--create-journal",  # each run's shard or file is new
            *extra,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        serve = cls(process, name)
        serve.reader = asyncio.ensure_future(serve._read())
        if ready:
            await serve.wait_line(STANDBY_LINE, timeout=60)
        return serve

    async def _read(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while line := await stream.readline():
            self.lines.append(line.decode(errors="replace").rstrip())

    def count(self, pattern: str) -> int:
        return sum(1 for line in self.lines if re.search(pattern, line))

    async def wait_line(self, pattern: str, *, timeout: float, after: int = 0) -> str:  # noqa: ASYNC109
        """The first log line from index ``after`` on that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        seen = after
        while True:
            for line in self.lines[seen:]:
                if re.search(pattern, line):
                    return line
            seen = max(seen, len(self.lines))
            if self.process.returncode is not None and self.reader is not None:
                await self.reader
                if not any(re.search(pattern, line) for line in self.lines[after:]):
                    raise AssertionError(
                        f"{self.name} exited ({self.process.returncode}) before {pattern!r}:\n"
                        + "\n".join(self.lines[-30:])
                    )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name}: no line {pattern!r} within {timeout}s:\n"
                    + "\n".join(self.lines[-30:])
                )
            await asyncio.sleep(0.01)

    @property
    def is_active(self) -> bool:
        """Its log says it owns the queue now (activated, and not stepped down since)."""
        for line in reversed(self.lines):
            if ACTIVE_LINE in line:
                return self.process.returncode is None
            if STEP_DOWN_LINE in line or "stopping:" in line:
                return False
        return False

    def signal(self, sig: signal.Signals) -> None:
        if self.process.returncode is None:
            self.process.send_signal(sig)

    async def wait_exit(self, timeout: float = 30.0) -> int:  # noqa: ASYNC109
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self.reader is not None:
            await self.reader
        return code

    async def kill(self) -> None:
        self.signal(signal.SIGKILL)
        await self.wait_exit()

    async def stop(self) -> None:
        """SIGTERM, and SIGKILL if it does not exit within 20 s (SIGCONT first if frozen)."""
        if self.process.returncode is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            await self.wait_exit(20)
        except TimeoutError:
            await self.kill()


@dataclass
class Tally:
    """What the clients were told, per uuid."""

    hosts: dict[str, list[str]] = field(default_factory=dict)  # every host answered
    no_valid_host: set[str] = field(default_factory=set)
    unanswered: set[str] = field(default_factory=set)
    retries: int = 0

    @property
    def answered(self) -> int:
        return len(self.hosts) + len(self.no_valid_host)

    async def wait_answered(self, count: int, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Until ``count`` uuids have their answer (a fault then lands mid-load)."""
        deadline = time.monotonic() + timeout
        while self.answered < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.answered} of {count} answered in {timeout}s")
            await asyncio.sleep(0.005)


async def _place_one(
    client: SchedulerClient, spec: RequestSpec, tally: Tally, try_timeout: float, deadline: float
) -> None:
    uuid = spec.instance_uuids[0]
    while time.monotonic() < deadline:
        try:
            [selection] = await client.select_destinations(spec, timeout=try_timeout)
        except TimeoutError:
            tally.retries += 1  # the same request, unchanged: claims are idempotent
            continue
        except NoValidHost:
            tally.no_valid_host.add(uuid)
            return
        tally.hosts.setdefault(uuid, []).append(selection.host)
        return
    tally.unanswered.add(uuid)


async def place_all(
    client: SchedulerClient,
    specs: Sequence[RequestSpec],
    tally: Tally,
    *,
    concurrency: int = 8,
    pause: float = 0.02,
    try_timeout: float = 3.0,
    give_up_after: float = 90.0,
) -> None:
    """Place every spec (one uuid each), ``concurrency`` at a time, retrying until answered.

    Each worker waits ``pause`` seconds between its requests, so that a load
    lasts long enough for a fault to land in the middle of it.
    """
    deadline = time.monotonic() + give_up_after
    todo = list(specs)

    async def worker() -> None:
        while todo:
            await _place_one(client, todo.pop(0), tally, try_timeout, deadline)
            await asyncio.sleep(pause)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


@dataclass(frozen=True)
class Audit:
    """The counts a fault must leave at 0, and what was placed."""

    lost: int  # answered with a host, but not held by the journal's final state
    doubled: int  # held on a host other than the one answered
    overcommitted: int  # claims beyond a host's capacity, summed over hosts
    two_hosts: int  # uuids answered with two different hosts
    unanswered: int
    placed: int
    refused: int

    def zero(self) -> bool:
        return not (self.lost or self.doubled or self.overcommitted or self.two_hosts)


def audit(core: SchedulerCore, tally: Tally, *, slots_per_host: int) -> Audit:
    """Compare what the clients were told with the state ``core`` recovered from the journal."""
    held = core.claims()
    lost = doubled = two_hosts = 0
    for uuid, answered in tally.hosts.items():
        if len(set(answered)) > 1:
            two_hosts += 1
        if uuid not in held:
            lost += 1
        elif held[uuid][0] != answered[0]:
            doubled += 1
    per_host: dict[str, int] = {}
    for host, _confirmed in held.values():
        per_host[host] = per_host.get(host, 0) + 1
    over = sum(max(0, n - slots_per_host) for n in per_host.values())
    over += sum(1 for state in core.host_states().values() if state.free_ram_mb < 0)
    return Audit(
        lost,
        doubled,
        over,
        two_hosts,
        len(tally.unanswered),
        len(tally.hosts),
        len(tally.no_valid_host),
    )


def recovered_core(journal_url: str, shard: str) -> SchedulerCore:
    """The state the journal holds now (read only: no epoch is taken)."""
    from actorsched.journal import open_journal

    core = SchedulerCore(SchedulerConfig())
    journal = open_journal(journal_url, shard=shard)
    journal.open(core)
    journal.close_now()
    return core


async def delete_queue(amqp_url: str, queue: str) -> None:
    """Delete a request queue with its dead-letter queue and exchange (missing ones are fine)."""
    await delete_names(amqp_url, [queue, f"{queue}.dead"], [f"{queue}.dlx"])


async def delete_names(amqp_url: str, queues: Sequence[str], exchanges: Sequence[str]) -> None:
    """Delete these queues, then these exchanges, of a run (missing ones are fine)."""
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        for name in queues:
            await channel.queue_delete(name)
        for name in exchanges:
            await channel.exchange_delete(name)
