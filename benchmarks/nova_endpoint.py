"""``select_destinations`` from Nova's own client through the Nova endpoint, against the
same requests on actorsched's native protocol, in one run.

Run as ``.venv/bin/python -m benchmarks.nova_endpoint [--hosts 10000] [--callers 4]
[--calls 200]`` (``make nova-venv`` first). One owner (no journal) holds
``--hosts`` hosts; its native service and its Nova endpoint consume the local
broker under names of this run's own. ``--callers`` processes each make
``--calls`` calls one after the other: first through Nova 34's
``SchedulerAPI`` (oslo.messaging, in Nova's venv), then, on a fresh owner with
the same hosts, the same requests through ``SchedulerClient``. It prints one
JSON object: calls/s, p50 and p99 per protocol, the serving process's CPU
seconds per call (the callers are other processes), and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aio_pika

from actorsched import HostReport, Scheduler, SchedulerConfig
from actorsched.amqp import SchedulerService
from actorsched.amqp.service import dead_letter_names
from actorsched.nova.conf import read
from actorsched.nova.endpoint import NovaEndpoint

ROOT = Path(__file__).resolve().parent.parent
NOVA_PYTHON = ROOT / ".venv-nova" / "bin" / "python"
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
_CELL = "5b0c9e04-4d7a-4c55-8d3c-0d6f1d0a7c11"
_MEMORY_MB = 512


def _hosts(count: int) -> list[HostReport]:
    return [
        HostReport(
            host=f"n{i:06d}",
            generation=1,
            memory_mb=262_144 + 1024 * (i % 97),
            memory_mb_used=1024 * (i % 13),
            vcpus=64,
            vcpus_used=i % 7,
            local_gb=4_000,
            local_gb_used=i % 300,
        )
        for i in range(count)
    ]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _callers(argv: list[list[str]]) -> tuple[list[float], float]:
    started = time.perf_counter()
    processes = [
        await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=ROOT
        )
        for args in argv
    ]
    took: list[float] = []
    for process in processes:
        out, _ = await process.communicate()
        assert process.returncode == 0, "a caller failed"
        took.extend(json.loads(out.decode().splitlines()[-1]))
    return took, time.perf_counter() - started


async def _one(
    kind: str, hosts: list[HostReport], callers: int, calls: int, nova_python: Path
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:10]
    exchange, topic, queue = f"bench-nova-{tag}", f"scheduler-{tag}", f"bench-{tag}"
    conf_path = Path(f"/tmp/bench-nova-{tag}.conf")
    await asyncio.to_thread(
        conf_path.write_text,
        f"[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n"
        f"control_exchange = {exchange}\nhost = b-{tag}\nrpc_response_timeout = 60\n",
    )
    conf = read(str(conf_path))
    config = SchedulerConfig(**{n: v for n, (v, _) in conf.scheduler.items()}, seed=1)
    scheduler = Scheduler(config)
    endpoint = NovaEndpoint(scheduler, conf, cell_uuid=_CELL, max_body_bytes=1 << 20, topic=topic)
    service = SchedulerService(scheduler, AMQP_URL, queue=queue, probe_interval=0.2)
    began = asyncio.Event()
    terms: set[asyncio.Task[None]] = set()

    def follow(active: bool) -> None:
        task = asyncio.get_running_loop().create_task(
            endpoint.begin_term() if active else endpoint.end_term()
        )
        terms.add(task)
        task.add_done_callback(lambda _: began.set())

    service.term_listeners.append(follow)
    try:
        async with scheduler:
            await scheduler.update_hosts(hosts)
            await endpoint.start()
            await service.start()
            await asyncio.wait_for(began.wait(), 30)  # the probe began a term
            where = (str(conf_path), topic) if kind == "nova" else (AMQP_URL, queue)
            caller = [str(nova_python), "-m", "benchmarks.nova_caller", kind, *where]
            argv = [[*caller, str(calls), str(_MEMORY_MB)] for _ in range(callers)]
            cpu = time.process_time()
            took, wall = await _callers(argv)
            cpu = time.process_time() - cpu
            await service.stop()
            await endpoint.stop()
    finally:
        await asyncio.to_thread(conf_path.unlink)
        connection = await aio_pika.connect(AMQP_URL)
        async with connection:
            channel = await connection.channel()
            dead = dead_letter_names(queue)
            for name in (queue, dead[1], topic, f"{topic}.b-{tag}", endpoint.fanout_queue):
                await channel.queue_delete(name)
            await channel.queue_delete(endpoint.dead_queue)
            for name in (exchange, f"{topic}_fanout", dead[0]):
                await channel.exchange_delete(name)
    # the callers' start (Nova's imports) is not the endpoint's: rate over the calls' own time
    per_caller = sum(took) / callers
    return {
        "calls": len(took),
        "calls_per_s": round(len(took) / per_caller, 1),
        "p50_ms": round(statistics.median(took) * 1000, 2),
        "p99_ms": round(_percentile(took, 0.99) * 1000, 2),
        "server_cpu_ms_per_call": round(cpu / len(took) * 1000, 3),
        "wall_s_with_caller_start": round(wall, 1),
    }


async def run(
    hosts: int, callers: int, calls: int, *, nova_python: Path = NOVA_PYTHON
) -> dict[str, Any]:
    """The figures of both protocols (see the module's docstring)."""
    if not (nova_python.parent.parent / ".installed").exists():
        raise RuntimeError(f"no Nova venv at {nova_python}: make nova-venv")
    reports = _hosts(hosts)
    nova = await _one("nova", reports, callers, calls, nova_python)
    native = await _one("native", reports, callers, calls, Path(sys.executable))
    return {
        "hosts": hosts,
        "callers": callers,
        "nova_endpoint": nova,
        "native": native,
        "nova_over_native_calls_per_s": round(nova["calls_per_s"] / native["calls_per_s"], 3),
        "nova_over_native_p99": round(nova["p99_ms"] / native["p99_ms"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--callers", type=int, default=4)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    if not NOVA_PYTHON.exists():
        print(json.dumps({"skipped": f"no Nova venv at {NOVA_PYTHON}: make nova-venv"}))
        return 0
    print(json.dumps(asyncio.run(run(args.hosts, args.callers, args.calls)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
