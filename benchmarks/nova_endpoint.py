"""``select_destinations`` from Nova's own client through the Nova endpoint, against the
same requests on actorsched's native protocol, in one run.

Run as ``.venv/bin/python -m benchmarks.nova_endpoint [--hosts 10000] [--callers 4]
[--calls 200]`` (``make nova-venv`` first). One owner (no journal) holds
``--hosts`` hosts; its native service and its Nova endpoint consume the local
broker under names of this run's own. ``--callers`` processes each make
``--calls`` calls one after the other: first through Nova 34's
``SchedulerAPI`` (oslo.messaging, in Nova's venv), then, on a fresh owner with
the same hosts, the same requests through ``SchedulerClient``
(:mod:`benchmarks.nova_caller`). It prints one JSON object: calls/s, p50 and
p99 per protocol, the serving process's CPU seconds per call (the callers are
other processes), and the ratios. A failed call, or an answer naming a host that
is not one of the hosts, fails the run. :mod:`benchmarks.nova_manager` runs
these two and Nova's own ``nova-scheduler`` on the same calls.
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

from actorsched import HostReport, Scheduler, SchedulerConfig
from actorsched.amqp import SchedulerService
from actorsched.amqp.service import dead_letter_names
from actorsched.nova.conf import read
from actorsched.nova.endpoint import NovaEndpoint

from .cluster import delete_names
from .nova_caller import figures, host_name

ROOT = Path(__file__).resolve().parent.parent
NOVA_PYTHON = ROOT / ".venv-nova" / "bin" / "python"
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
CELL = "5b0c9e04-4d7a-4c55-8d3c-0d6f1d0a7c11"
MEMORY_MB = 512  # each call's one instance


def host_reports(count: int) -> list[HostReport]:
    """The hosts of both benchmarks (:func:`benchmarks.nova_caller.figures`)."""
    return [
        HostReport.model_validate({"host": host_name(i), "generation": 1, **figures(i)})
        for i in range(count)
    ]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_callers(argv: list[list[str]]) -> dict[str, Any]:
    """Run these :mod:`benchmarks.nova_caller` processes at once; their calls put together."""
    processes = [
        await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=ROOT
        )
        for args in argv
    ]
    took: list[float] = []
    errors: dict[str, int] = {}
    unknown = 0
    for process in processes:
        out, _ = await process.communicate()
        if process.returncode != 0:
            errors["caller exited"] = errors.get("caller exited", 0) + 1
            continue
        got = json.loads(out.decode().splitlines()[-1])
        took.extend(got["took"])
        unknown += got["unknown_hosts"]
        for name, n in got["errors"].items():
            errors[name] = errors.get(name, 0) + n
    return {"took": took, "errors": errors, "unknown_hosts": unknown}


def caller_argv(
    python: Path, kind: str, where: tuple[str, str], callers: int, calls: int, hosts: int
) -> list[list[str]]:
    """``callers`` processes, each making ``calls`` calls (:mod:`benchmarks.nova_caller`)."""
    caller = [str(python), "-m", "benchmarks.nova_caller", kind, *where]
    return [[*caller, str(calls), str(MEMORY_MB), str(hosts)] for _ in range(callers)]


def summarize(got: dict[str, Any], callers: int, cpu: float) -> dict[str, Any]:
    """Calls/s, p50 and p99 of the calls :func:`run_callers` got, and the serving CPU per call."""
    took = got["took"]
    if not took:
        return {"calls": 0, "errors": got["errors"], "unknown_hosts": got["unknown_hosts"]}
    # the callers' start (Nova's imports) is not the server's: rate over the calls' own time
    per_caller = sum(took) / callers
    return {
        "calls": len(took),
        "calls_per_s": round(len(took) / per_caller, 2),
        "p50_ms": round(statistics.median(took) * 1000, 2),
        "p99_ms": round(_percentile(took, 0.99) * 1000, 2),
        "server_cpu_ms_per_call": round(cpu / len(took) * 1000, 3),
        "errors": got["errors"],
        "unknown_hosts": got["unknown_hosts"],
    }


async def protocol(
    kind: str, reports: list[HostReport], callers: int, calls: int, python: Path
) -> dict[str, Any]:
    """One owner holding ``reports`` behind its native service and its Nova endpoint; the
    calls through ``kind``'s client ("nova" or "native"), from ``python``'s venv."""
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
    endpoint = NovaEndpoint(scheduler, conf, cell_uuid=CELL, max_body_bytes=1 << 20, topic=topic)
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
            await scheduler.update_hosts(reports)
            await endpoint.start()
            await service.start()
            await asyncio.wait_for(began.wait(), 30)  # the probe began a term
            where = (str(conf_path), topic) if kind == "nova" else (AMQP_URL, queue)
            argv = caller_argv(python, kind, where, callers, calls, len(reports))
            cpu = time.process_time()
            got = await run_callers(argv)
            cpu = time.process_time() - cpu
            await service.stop()
            await endpoint.stop()
    finally:
        await asyncio.to_thread(conf_path.unlink)
        dead = dead_letter_names(queue)
        await delete_names(
            AMQP_URL,
            [queue, dead[1], topic, f"{topic}.b-{tag}", endpoint.fanout_queue, endpoint.dead_queue],
            [exchange, f"{topic}_fanout", dead[0]],
        )
    return summarize(got, callers, cpu)


def check_calls(parts: dict[str, dict[str, Any]], calls: int) -> None:
    """Raise when a part had an error, an answer naming no known host, or a call missing."""
    bad = {
        name: (part["errors"], part["unknown_hosts"])
        for name, part in parts.items()
        if part["errors"] or part["unknown_hosts"] or part["calls"] != calls
    }
    if bad:
        tails = " ".join(part.get("log_tail", "") for part in parts.values())
        raise RuntimeError(f"calls failed (errors, answers naming no known host): {bad} {tails}")


async def run(
    hosts: int, callers: int, calls: int, *, nova_python: Path = NOVA_PYTHON
) -> dict[str, Any]:
    """The figures of both protocols (see the module's docstring)."""
    if not (nova_python.parent.parent / ".installed").exists():
        raise RuntimeError(f"no Nova venv at {nova_python}: make nova-venv")
    reports = host_reports(hosts)
    nova = await protocol("nova", reports, callers, calls, nova_python)
    native = await protocol("native", reports, callers, calls, Path(sys.executable))
    check_calls({"nova_endpoint": nova, "native": native}, callers * calls)
    return {
        "hosts": hosts,
        "callers": callers,
        "nova_endpoint": nova,
        "native": native,
        "nova_over_native_calls_per_s": round(nova["calls_per_s"] / native["calls_per_s"], 3),
        "nova_over_native_p99": round(nova["p99_ms"] / native["p99_ms"], 3),
    }


def sizes(doc: str, calls: int) -> argparse.ArgumentParser:
    """The options of both benchmarks: --hosts, --callers and --calls (each caller's)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--callers", type=int, default=4)
    parser.add_argument("--calls", type=int, default=calls)
    return parser


def no_nova() -> bool:
    """Whether Nova's venv is missing (said as the run's JSON)."""
    if NOVA_PYTHON.exists():
        return False
    print(json.dumps({"skipped": f"no Nova venv at {NOVA_PYTHON}: make nova-venv"}))
    return True


def main(argv: list[str] | None = None) -> int:
    args = sizes(__doc__, 200).parse_args(argv)
    if not no_nova():
        print(json.dumps(asyncio.run(run(args.hosts, args.callers, args.calls)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
