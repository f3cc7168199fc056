"""A full disk under ``actorsched serve`` (a small tmpfs): fail-stop, no ack that is not durable."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import aio_pika
import pytest

from actorsched import HostReport, RequestSpec, SchedulerError
from actorsched.amqp import SchedulerClient
from actorsched.core import SchedulerCore
from actorsched.journal import SqliteJournal
from actorsched.models import SchedulerConfig
from benchmarks.cluster import ServeProcess, delete_queue

AMQP_URL = os.environ.get("ACTORSCHED_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(180)]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Write a file until the filesystem is full; its path."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65_536, 1):  # big writes, then bytes, until nothing fits
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def _host(i: int) -> HostReport:
    return HostReport(
        host=f"h{i}",
        generation=1,
        memory_mb=65_536,
        memory_mb_used=0,
        vcpus=64,
        vcpus_used=0,
        local_gb=1000,
        local_gb_used=0,
    )


def _spec(name: str) -> RequestSpec:
    return RequestSpec(instance_uuids=[name], memory_mb=256, vcpus=1, disk_gb=1)


async def _queue_depth(queue: str) -> int:
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        return declared.declaration_result.message_count or 0


async def test_a_full_disk_fail_stops_serve_and_a_restart_on_it_is_refused(
    small_disk: Path,
) -> None:
    queue = f"actorsched.test.disk.{uuid.uuid4().hex[:10]}"
    journal = small_disk / "claims.sqlite"
    try:
        serve = await ServeProcess.start(amqp_url=AMQP_URL, queue=queue, journal=str(journal))
        async with SchedulerClient(AMQP_URL, queue=queue, timeout=10) as client:
            for i in range(4):
                assert await client.update_host(_host(i))
            acked = {}
            for n in range(10):
                [selection] = await client.select_destinations(_spec(f"before-{n}"))
                acked[selection.instance_uuid] = selection.host
            filler = _fill(small_disk)
            answers = await asyncio.gather(
                *(client.select_destinations(_spec(f"after-{n}"), timeout=5) for n in range(20)),
                return_exceptions=True,
            )
            successes = [a for a in answers if not isinstance(a, BaseException)]
            assert successes == [], "nothing is answered as done once the disk is full"
            assert all(isinstance(a, TimeoutError | SchedulerError) for a in answers), answers
            code = await serve.wait_exit(30)
        assert code == 1, "\n".join(serve.lines)
        stops = [line for line in serve.lines if "stopping:" in line]
        assert len(stops) == 1, serve.lines
        assert "full" in stops[0], stops
        errors = [line for line in serve.lines if " ERROR actorsched." in line]
        # the journal's line, the stop, the exit, and no storm (the broker library's own
        # lines about the closing channel are not ours to count)
        assert len(errors) <= 3, "\n".join(errors)
        assert await _queue_depth(queue) >= 1, "the unanswered requests wait in the broker"

        # a restart on the still-full disk is refused at start, not at its first write
        again = await ServeProcess.start(
            amqp_url=AMQP_URL, queue=queue, journal=str(journal), ready=False
        )
        assert await again.wait_exit(30) == 1
        assert any("bytes free on its filesystem" in line for line in again.lines), again.lines

        # with room again, every acknowledged claim is there
        filler.unlink()
        core = SchedulerCore(SchedulerConfig())
        recovered = SqliteJournal(journal)
        recovered.open(core)
        recovered.close_now()
        held = core.claims()
        assert {u: held[u][0] for u in acked} == acked
    finally:
        await delete_queue(AMQP_URL, queue)
