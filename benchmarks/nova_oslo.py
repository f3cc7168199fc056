"""``select_destinations`` from Nova's own client: actorsched's Nova endpoint (oslo's wire
spoken over aio-pika) against an oslo.messaging RPC server placing with actorsched's
embedded ``Scheduler`` (what an ``actorsched[nova]`` extra built on oslo.messaging and
oslo.versionedobjects would be), over the same broker, in one run.

Run as ``.venv/bin/python -m benchmarks.nova_oslo [--hosts 10000] [--callers 4]
[--calls 200] [--rounds 1]`` (``make nova-venv`` first). ``--callers`` processes each make
``--calls`` calls one after the other through Nova 34's ``SchedulerAPI``
(:mod:`benchmarks.nova_caller`, the requests of :mod:`benchmarks.nova_manager`),
against, on the same ``--hosts`` hosts:

* actorsched's Nova endpoint: one owner (no journal) behind its native service and
  its Nova endpoint (:func:`benchmarks.nova_endpoint.protocol`); and
* the oslo server (:mod:`benchmarks.nova_oslo_side`, in Nova's venv with actorsched's
  packages after Nova's on its path): ``oslo_messaging.get_rpc_server`` on the rabbit
  transport, oslo's threading executor, Nova's ``NovaObjectSerializer`` making the
  ``RequestSpec`` object and serializing the ``Selection`` objects answered, the owner
  (no journal) on an asyncio loop in the same process. Its exchange and topic are
  this run's own.

It prints one JSON object: per server calls/s (over the calls' own time), p50, p99,
the serving process's CPU seconds per call (all its threads, from the callers' start
to their end), the errors, and the ratios of the endpoint to the oslo server; with
``--rounds N``, N such rounds (the endpoint first, the oslo server first in every
second one) and the ratios' medians. Any failed call, or an answer naming a host
that is not one of the hosts, fails the run.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import sysconfig
import time
import uuid
from pathlib import Path
from typing import Any

from .cluster import delete_names
from .nova_endpoint import (
    AMQP_URL,
    NOVA_PYTHON,
    ROOT,
    check_calls,
    host_reports,
    no_nova,
    protocol,
    sizes,
    summarize,
)
from .nova_manager import timed_callers

_READY_S = 300
_TRANSIENT_TTL_S = 120  # the fanout and reply queues oslo declares expire when unused


async def _oslo(hosts: int, callers: int, calls: int, nova_python: Path) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:10]
    exchange, topic = f"bench-oslo-{tag}", f"scheduler-{tag}"
    conf_path = Path(f"/tmp/bench-oslo-{tag}.conf")
    await asyncio.to_thread(
        conf_path.write_text,
        f"[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n"
        f"control_exchange = {exchange}\nhost = b-{tag}\nrpc_response_timeout = 60\n"
        f"[oslo_messaging_rabbit]\nrabbit_transient_queues_ttl = {_TRANSIENT_TTL_S}\n",
    )
    site = sysconfig.get_path("purelib")  # actorsched's venv: its packages for the server
    service = await asyncio.create_subprocess_exec(
        str(nova_python), "-W", "ignore", "-m", "benchmarks.nova_oslo_side",
        str(conf_path), str(hosts), topic, site,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    err = b""
    try:
        assert service.stdout is not None
        started = time.perf_counter()
        line = await asyncio.wait_for(service.stdout.readline(), _READY_S)
        if line.strip() != b"READY":
            service.kill()
            _, err = await service.communicate()
            raise RuntimeError(f"the oslo server did not start: {err.decode()[-2000:]}")
        setup = time.perf_counter() - started
        got, cpu = await timed_callers(
            service.pid, nova_python, conf_path, topic, callers, calls, hosts
        )
    finally:
        if service.returncode is None:
            service.terminate()
            _, err = await service.communicate()
        await asyncio.to_thread(conf_path.unlink)
        await delete_names(AMQP_URL, [topic, f"{topic}.b-{tag}"], [exchange, f"{topic}_fanout"])
    out = summarize(got, callers, cpu)
    if got["errors"]:
        out["log_tail"] = err.decode()[-3000:]
    out["setup_s"] = round(setup, 1)
    return out


def _ratios(direct: dict[str, Any], oslo: dict[str, Any]) -> dict[str, float]:
    return {
        "endpoint_over_oslo_calls_per_s": round(direct["calls_per_s"] / oslo["calls_per_s"], 2),
        "oslo_over_endpoint_p99": round(oslo["p99_ms"] / direct["p99_ms"], 2),
        "oslo_over_endpoint_cpu_per_call": round(
            oslo["server_cpu_ms_per_call"] / direct["server_cpu_ms_per_call"], 2
        ),
    }


async def run(
    hosts: int, callers: int, calls: int, *, rounds: int = 1, nova_python: Path = NOVA_PYTHON
) -> dict[str, Any]:
    """The figures of both servers (see the module's docstring); raises if a call failed.

    With ``rounds`` above 1, each round measures both, the oslo server first in every
    second round, and the ratios are also given as their medians over the rounds."""
    if not (nova_python.parent.parent / ".installed").exists():
        raise RuntimeError(f"no Nova venv at {nova_python}: make nova-venv")
    reports = host_reports(hosts)
    measured: list[dict[str, Any]] = []
    for index in range(rounds):
        parts: dict[str, dict[str, Any]] = {}
        for part in ("oslo_messaging", "nova_endpoint")[:: -1 if index % 2 == 0 else 1]:
            if part == "nova_endpoint":
                parts[part] = await protocol("nova", reports, callers, calls, nova_python)
            else:
                parts[part] = await _oslo(hosts, callers, calls, nova_python)
        check_calls(parts, callers * calls)
        direct, oslo = parts["nova_endpoint"], parts["oslo_messaging"]
        measured.append({"nova_endpoint": direct, "oslo_messaging": oslo, **_ratios(direct, oslo)})
    out: dict[str, Any] = {"hosts": hosts, "callers": callers, **measured[0]}
    if rounds > 1:
        out = {"hosts": hosts, "callers": callers, "rounds": measured}
        for key in _ratios(measured[0]["nova_endpoint"], measured[0]["oslo_messaging"]):
            out[f"median_{key}"] = statistics.median(r[key] for r in measured)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = sizes(__doc__, 200)
    parser.add_argument("--rounds", type=int, default=1, help="both measured this many times")
    args = parser.parse_args(argv)
    if not no_nova():
        result = asyncio.run(run(args.hosts, args.callers, args.calls, rounds=args.rounds))
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
