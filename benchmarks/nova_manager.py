"""``select_destinations`` from Nova's own client: actorsched's Nova endpoint against
Nova 34's own ``SchedulerManager``, over the same broker, in one run, with the same
requests on actorsched's native protocol beside them.

Run as ``.venv/bin/python -m benchmarks.nova_manager [--hosts 10000] [--callers 4]
[--calls 25]`` (``make nova-venv`` first). ``--callers`` processes each make
``--calls`` calls one after the other (:mod:`benchmarks.nova_caller`), against:

* actorsched, through Nova 34's ``SchedulerAPI`` (in Nova's venv): one owner (no
  journal) holding ``--hosts`` hosts behind its Nova endpoint, without Placement
  (it decides RAM/CPU/disk itself, as ``serve`` without ``--placement-url``);
* actorsched, the same requests through its own ``SchedulerClient``, on a fresh
  owner holding the same hosts (these two are :func:`benchmarks.nova_endpoint.run`);
  then
* Nova, through ``SchedulerAPI``: ``nova-scheduler``
  (:mod:`benchmarks.nova_manager_side`: ``nova.service.Service.create``,
  threading backend, one worker) on a SQLite API database and cell holding the
  same hosts as compute nodes and services, asking a fake Placement served from
  memory by this process (``GET /allocation_candidates``, ``GET``/``PUT``/``DELETE
  /allocations/{consumer}``) with the same inventories and usage. That fake
  answers from dicts, not SQL: it flatters Nova. By default Placement returns
  every host that fits (``[scheduler] max_placement_results = --hosts``, so
  both consider every host); ``--placement-limit 1000`` is Nova's default.

It prints one JSON object: per scheduler calls/s (over the calls' own time),
p50, p99, the serving process's CPU seconds per call (its user+system time
during the calls; the callers and the fake Placement are other processes or
not counted), the errors, actorsched / Nova and the Nova endpoint / native. Any
failed call, or an answer naming a host that is not one of the hosts, fails the
run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from . import nova_endpoint
from .cluster import delete_names
from .nova_caller import node_uuid
from .nova_endpoint import (
    AMQP_URL,
    NOVA_PYTHON,
    ROOT,
    caller_argv,
    check_calls,
    host_reports,
    no_nova,
    run_callers,
    sizes,
    summarize,
)

_SERVICE_DOWN_S = 86_400
_READY_S = 900  # Nova's database of 10,000 hosts and its start
# Placement's root document, which keystoneauth's discovery reads first
_VERSIONS = json.dumps(
    {"versions": [{"id": "v1.0", "min_version": "1.0", "max_version": "1.39",
                   "status": "CURRENT", "links": [{"rel": "self", "href": ""}]}]}
).encode()  # fmt: skip
_RATIOS = {"VCPU": 4.0, "MEMORY_MB": 1.0, "DISK_GB": 1.0}  # Nova 34's initial ratios


def _cpu_seconds(pid: int) -> float:
    """User+system seconds of pid and its living descendants (oslo.service's threading
    backend serves from a forked worker process)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += (task / "children").read_text().split()
    return own + sum(_cpu_seconds(int(child)) for child in children)


class FakePlacement:
    """Placement's answers to nova-scheduler, from memory: one resource provider per host."""

    def __init__(self, hosts: int) -> None:
        self.uuids = [node_uuid(i) for i in range(hosts)]
        self.total: dict[str, dict[str, int]] = {}
        self.used: dict[str, dict[str, int]] = {}
        for rp, h in zip(self.uuids, host_reports(hosts), strict=True):
            self.total[rp] = {"VCPU": h.vcpus, "MEMORY_MB": h.memory_mb, "DISK_GB": h.local_gb}
            self.used[rp] = {
                "VCPU": h.vcpus_used,
                "MEMORY_MB": h.memory_mb_used,
                "DISK_GB": h.local_gb_used,
            }
        self.consumers: dict[str, dict[str, Any]] = {}
        self._summary: dict[str, str] = {}  # provider -> its JSON, until its usage changes
        self.requests = 0

    def capacity(self, rp: str, rc: str) -> int:
        return int(self.total[rp][rc] * _RATIOS[rc])

    def _fits(self, rp: str, resources: dict[str, int]) -> bool:
        return all(
            rc in self.total[rp] and self.used[rp][rc] + n <= self.capacity(rp, rc)
            for rc, n in resources.items()
        )

    def summary(self, rp: str) -> str:
        text = self._summary.get(rp)
        if text is None:
            res = {
                rc: {"capacity": self.capacity(rp, rc), "used": self.used[rp][rc]}
                for rc in self.total[rp]
            }
            summary = {"resources": res, "traits": [], "root_provider_uuid": rp}
            text = self._summary[rp] = json.dumps({**summary, "parent_provider_uuid": None})
        return text

    def candidates(self, query: dict[str, list[str]]) -> tuple[int, bytes]:
        groups = [k for k in query if k.startswith("resources") and k != "resources"]
        if groups or "member_of" in query or "in_tree" in query:
            return 400, b'{"errors": [{"detail": "the fake Placement has one group only"}]}'
        resources = {
            rc: int(n) for rc, n in (p.split(":") for p in query["resources"][0].split(","))
        }
        required = query.get("required", [""])[0]
        if any(t and not t.startswith("!") for t in required.split(",")):
            return 200, b'{"allocation_requests": [], "provider_summaries": {}}'
        limit = int(query.get("limit", [str(len(self.uuids))])[0])
        found = [rp for rp in self.uuids if self._fits(rp, resources)][:limit]
        res = json.dumps(resources)
        requests = ",".join(
            f'{{"allocations": {{"{rp}": {{"resources": {res}}}}}, "mappings": {{"": ["{rp}"]}}}}'
            for rp in found
        )
        summaries = ",".join(f'"{rp}": {self.summary(rp)}' for rp in found)
        body = f'{{"allocation_requests": [{requests}], "provider_summaries": {{{summaries}}}}}'
        return 200, body.encode()

    def _release(self, consumer: str) -> None:
        held = self.consumers.pop(consumer, None)
        for rp, alloc in (held or {}).get("allocations", {}).items():
            for rc, n in alloc["resources"].items():
                self.used[rp][rc] -= n
            self._summary.pop(rp, None)

    def put(self, consumer: str, body: dict[str, Any]) -> tuple[int, bytes]:
        held = self.consumers.get(consumer)
        self._release(consumer)
        allocations = body["allocations"]
        if all(self._fits(rp, a["resources"]) for rp, a in allocations.items()):
            for rp, alloc in allocations.items():
                for rc, n in alloc["resources"].items():
                    self.used[rp][rc] += n
                self._summary.pop(rp, None)
            generation = 0 if held is None else held["consumer_generation"] + 1
            self.consumers[consumer] = {**body, "consumer_generation": generation}
            return 204, b""
        if held is not None:
            self.put(consumer, held)
        return 409, json.dumps(
            {"errors": [{"code": "placement.undefined_code", "detail": "capacity exceeded"}]}
        ).encode()

    def answer(self, method: str, target: str, body: bytes) -> tuple[int, bytes]:
        self.requests += 1
        url = urlsplit(target)
        path = url.path.rstrip("/")
        if path == "":
            return 200, _VERSIONS
        if method == "GET" and path == "/allocation_candidates":
            return self.candidates(parse_qs(url.query))
        if path.startswith("/allocations/"):
            consumer = path.rsplit("/", 1)[1]
            if method == "GET":
                held = self.consumers.get(consumer, {"allocations": {}})
                return 200, json.dumps(held).encode()
            if method == "PUT":
                return self.put(consumer, json.loads(body))
            if method == "DELETE":
                self._release(consumer)
                return 204, b""
        return 404, b'{"errors": [{"detail": "not in the fake Placement"}]}'

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                method, target, _ = line.decode().split(" ", 2)
                length = 0
                while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode().partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                status, out = self.answer(method, target, body)
                writer.write(
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(out)}\r\n"
                    f"OpenStack-API-Version: placement 1.36\r\n\r\n".encode()
                    + out
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def timed_callers(
    pid: int,
    nova_python: Path,
    conf_path: Path,
    topic: str,
    callers: int,
    calls: int,
    hosts: int,
) -> tuple[dict[str, Any], float]:
    """Nova's callers against the RPC server of process ``pid`` once its consumers are
    up: what they measured, and the CPU seconds the server spent meanwhile."""
    await asyncio.sleep(2)  # the RPC server's consumers
    cpu = _cpu_seconds(pid)
    where = (str(conf_path), topic)
    got = await run_callers(caller_argv(nova_python, "nova", where, callers, calls, hosts))
    return got, _cpu_seconds(pid) - cpu


async def _nova(
    hosts: int, callers: int, calls: int, limit: int, nova_python: Path
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:10]
    topic = f"scheduler-{tag}"
    placement = FakePlacement(hosts)
    server = await asyncio.start_server(placement.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    workdir = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="bench-nm-"))
    conf_path = workdir / "nova.conf"
    await asyncio.to_thread(
        conf_path.write_text,
        f"[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n"
        f"control_exchange = bench-nm-{tag}\nhost = b-{tag}\nrpc_response_timeout = 300\n"
        # no nova-compute runs to heartbeat: its services stay up for the run
        f"service_down_time = {_SERVICE_DOWN_S}\n"
        f"[placement]\nendpoint_override = http://127.0.0.1:{port}\nauth_type = none\n"
        f"[scheduler]\nmax_placement_results = {limit}\nworkers = 1\n"
        f"[database]\nconnection = sqlite:///{workdir / 'cell1.db'}\n"
        f"[api_database]\nconnection = sqlite:///{workdir / 'api.db'}\n"
        f"[oslo_concurrency]\nlock_path = {workdir}\n",
    )
    log = await asyncio.to_thread(open, workdir / "nova-scheduler.log", "wb")
    service = await asyncio.create_subprocess_exec(
        str(nova_python), "-m", "benchmarks.nova_manager_side",
        str(conf_path), str(workdir), str(hosts), topic,
        stdout=asyncio.subprocess.PIPE, stderr=log, cwd=ROOT,
    )  # fmt: skip
    try:
        assert service.stdout is not None
        started = time.perf_counter()
        line = await asyncio.wait_for(service.stdout.readline(), _READY_S)
        if line.strip() != b"READY":
            tail = (workdir / "nova-scheduler.log").read_text()[-2000:]
            raise RuntimeError(f"nova-scheduler did not start: {tail}")
        setup = time.perf_counter() - started
        got, cpu = await timed_callers(
            service.pid, nova_python, conf_path, topic, callers, calls, hosts
        )
        if got["errors"]:
            got["log_tail"] = (workdir / "nova-scheduler.log").read_text()[-3000:]
    finally:
        if service.returncode is None:
            service.terminate()
            await service.wait()
        log.close()
        server.close()
        await delete_names(
            AMQP_URL, [topic, f"{topic}.b-{tag}"], [f"bench-nm-{tag}", f"{topic}_fanout"]
        )
        await asyncio.to_thread(shutil.rmtree, workdir, True)
    out = summarize(got, callers, cpu)
    if "log_tail" in got:
        out["log_tail"] = got["log_tail"]
    out["setup_s"] = round(setup, 1)
    out["placement_requests"] = placement.requests
    out["max_placement_results"] = limit
    return out


async def run(
    hosts: int,
    callers: int,
    calls: int,
    *,
    placement_limit: int | None = None,
    nova_python: Path = NOVA_PYTHON,
) -> dict[str, Any]:
    """The figures of both schedulers (see the module's docstring); raises if a call failed."""
    both = await nova_endpoint.run(hosts, callers, calls, nova_python=nova_python)
    ours, native = both["nova_endpoint"], both["native"]
    nova = await _nova(hosts, callers, calls, placement_limit or hosts, nova_python)
    check_calls({"nova": nova}, callers * calls)
    return {
        "hosts": hosts,
        "callers": callers,
        "actorsched": ours,
        "actorsched_native": native,
        "nova": nova,
        "actorsched_over_nova_calls_per_s": round(ours["calls_per_s"] / nova["calls_per_s"], 1),
        "nova_over_actorsched_p99": round(nova["p99_ms"] / ours["p99_ms"], 1),
        "nova_over_actorsched_cpu_per_call": round(
            nova["server_cpu_ms_per_call"] / ours["server_cpu_ms_per_call"], 1
        ),
        "nova_endpoint_over_native_calls_per_s": both["nova_over_native_calls_per_s"],
        "nova_endpoint_over_native_p99": both["nova_over_native_p99"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = sizes(__doc__, 25)
    parser.add_argument(
        "--placement-limit", type=int, default=None, help="max_placement_results (--hosts)"
    )
    args = parser.parse_args(argv)
    if not no_nova():
        result = asyncio.run(
            run(args.hosts, args.callers, args.calls, placement_limit=args.placement_limit)
        )
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
