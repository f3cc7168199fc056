"""What hostile input costs: a flood of new trait names, and a flood of oversized bodies.

Before the vocabulary was bounded, 2,000 such reports grew the trait bitset
to 488 MiB and took 666 ms a report. Now the first report fills most of the
vocabulary (``max_traits``, 1,024 names) and the rest are refused before any
change: this measures the time per report and the resident memory it adds.
"""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from actorsched import InvalidRequest
from actorsched.core import SchedulerCore

from .cluster import ServeProcess, delete_queue
from .workload import bare_report, bench_config

__all__ = ["body_flood", "trait_flood"]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def trait_flood(reports: int = 2_000, traits_per_report: int = 1_000) -> dict[str, Any]:
    """Apply ``reports`` reports of ``traits_per_report`` new trait names each, one at a time."""
    core = SchedulerCore(bench_config())
    floods = [
        bare_report(f"flood{n:05d}", traits=[f"T{n}-{k}" for k in range(traits_per_report)])
        for n in range(reports)
    ]
    before = _rss_mib()
    times: list[float] = []
    refused = 0
    for report in floods:
        started = time.perf_counter()
        try:
            core.update_host(report, 1.0)
        except InvalidRequest:
            refused += 1
        times.append(time.perf_counter() - started)
    return {
        "reports": reports,
        "traits_per_report": traits_per_report,
        "refused": refused,
        "vocabulary": len(core.table.trait_names),
        "per_report_ms_median": statistics.median(times) * 1000,
        "per_report_ms_max": max(times) * 1000,
        "peak_rss_growth_mib": _rss_mib() - before,
        "bitset_mib": core.table.traits.nbytes / 2**20,
    }


def _status_mib(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise ValueError(f"no {field} in /proc/{pid}/status")


async def _flood_one(
    amqp_url: str, *, bodies: int, body_mib: int, max_body_bytes: int
) -> dict[str, float]:
    import aio_pika

    queue = f"bench-body-flood-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as scratch:
        serve = await ServeProcess.start(
            amqp_url=amqp_url,
            queue=queue,
            journal=str(Path(scratch) / "journal.db"),
            extra=["--max-body-bytes", str(max_body_bytes), "--prefetch", str(bodies)],
        )
        try:
            pid = serve.process.pid
            before = _status_mib(pid, "VmRSS")
            body = b'{"host": "' + b"x" * (body_mib * 2**20) + b'"}'
            connection = await aio_pika.connect(amqp_url)
            async with connection:
                channel = await connection.channel()
                replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
                started = time.perf_counter()
                for n in range(bodies):
                    await channel.default_exchange.publish(
                        aio_pika.Message(
                            body, type="host_report", reply_to=replies.name, correlation_id=str(n)
                        ),
                        routing_key=queue,
                    )
                del body
                answered = 0
                async with replies.iterator(timeout=120) as stream:
                    async for reply in stream:
                        await reply.ack()
                        answered += 1
                        if answered == bodies:
                            break
                elapsed = time.perf_counter() - started
            return {
                "rss_before_mib": before,
                "peak_rss_growth_mib": _status_mib(pid, "VmHWM") - before,
                "seconds": elapsed,
            }
        finally:
            await serve.stop()
            await delete_queue(amqp_url, queue)


async def body_flood(amqp_url: str, *, bodies: int = 16, body_mib: int = 64) -> dict[str, Any]:
    """``bodies`` bodies of ``body_mib`` MiB sent to ``serve``, with the cap and without it.

    The baseline raises ``--max-body-bytes`` above the bodies, so ``serve``
    reads each whole before refusing it, as it did before bodies were cut as
    they arrive. Peak resident memory is the process's own high-water mark
    (``VmHWM``) less its resident size before the flood.
    """
    capped = await _flood_one(amqp_url, bodies=bodies, body_mib=body_mib, max_body_bytes=1 << 20)
    whole = await _flood_one(
        amqp_url, bodies=bodies, body_mib=body_mib, max_body_bytes=(body_mib + 1) * 2**20
    )
    return {
        "bodies": bodies,
        "body_mib": body_mib,
        "peak_rss_growth_mib": capped["peak_rss_growth_mib"],
        "seconds": capped["seconds"],
        "uncapped_peak_rss_growth_mib": whole["peak_rss_growth_mib"],
        "uncapped_seconds": whole["seconds"],
    }
