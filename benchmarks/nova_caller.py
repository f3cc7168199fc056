"""The callers of :mod:`benchmarks.nova_endpoint` and :mod:`benchmarks.nova_manager`, each a
process of its own: Nova's own client, or actorsched's; and the hosts both benchmarks hold.

``.venv-nova/bin/python -m benchmarks.nova_caller nova CONF TOPIC N MEMORY_MB HOSTS`` makes
N ``select_destinations`` calls one after the other through Nova 34's ``SchedulerAPI``
(its venv; nothing of actorsched is imported), each for a ``RequestSpec`` hydrated as
Nova's API makes it for a boot (Nova's own ``SchedulerManager`` reads every field).
``.venv/bin/python -m benchmarks.nova_caller native URL QUEUE N MEMORY_MB HOSTS`` makes the
same requests through actorsched's ``SchedulerClient``. Either prints one JSON object:
the seconds of each answered call, the errors by type, and how many answers named a
host that is not one of the HOSTS (each must name one of them, and alternates only
from them).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

_R = TypeVar("_R")


def host_name(i: int) -> str:
    return f"n{i:06d}"


def node_uuid(i: int) -> str:
    """Host i's compute node, and its resource provider in Placement."""
    return f"00000000-0000-4000-8000-{i:012d}"


def figures(i: int) -> dict[str, int]:
    """Host i's sizes and usage, the same for every scheduler measured."""
    return {
        "memory_mb": 262_144 + 1024 * (i % 97),
        "memory_mb_used": 1024 * (i % 13),
        "vcpus": 64,
        "vcpus_used": i % 7,
        "local_gb": 4_000,
        "local_gb_used": i % 300,
    }


async def _timed(
    calls: int, hosts: int, make: Callable[[], _R], send: Callable[[_R], Awaitable[list[list[str]]]]
) -> dict[str, Any]:
    """Send ``calls`` requests one after the other, each made before its clock starts; each
    answer lists its one instance's hosts, chosen first."""
    known = {host_name(i) for i in range(hosts)}
    took: list[float] = []
    errors: dict[str, int] = {}
    unknown = 0
    for _ in range(calls):
        request = make()
        started = time.perf_counter()
        try:
            answer = await send(request)
        except Exception as exc:
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            continue
        took.append(time.perf_counter() - started)
        if len(answer) != 1 or not answer[0] or not known.issuperset(answer[0]):
            unknown += 1
    return {"took": took, "errors": errors, "unknown_hosts": unknown}


def _nova(conf: str, topic: str, calls: int, memory_mb: int, hosts: int) -> dict[str, Any]:
    from nova import config, context, objects
    from nova.scheduler import rpcapi

    rpcapi.RPC_TOPIC = topic
    objects.register_all()
    config.parse_args(["bench", "--config-file", conf], init_rpc=True)
    ctxt = context.get_admin_context()
    api = rpcapi.SchedulerAPI()
    flavor = objects.Flavor(
        name="b1", flavorid="b1", memory_mb=memory_mb, vcpus=1, root_gb=1, ephemeral_gb=0,
        swap=0, extra_specs={},
    )  # fmt: skip

    def make() -> Any:
        spec = objects.RequestSpec.from_components(
            ctxt, str(uuid.uuid4()), objects.ImageMeta.from_dict({"properties": {}}), flavor,
            None, objects.InstancePCIRequests(requests=[]), {}, None, None, project_id="p",
            user_id="u",
        )  # fmt: skip
        spec.is_bfv = False
        return spec

    async def send(spec: Any) -> list[list[str]]:  # blocks the loop: nothing else runs on it
        answer = api.select_destinations(
            ctxt, spec, [spec.instance_uuid], return_objects=True, return_alternates=True
        )
        return [[s.service_host for s in alternates] for alternates in answer]

    return asyncio.run(_timed(calls, hosts, make, send))


def _native(url: str, queue: str, calls: int, memory_mb: int, hosts: int) -> dict[str, Any]:
    from actorsched import RequestSpec
    from actorsched.amqp import SchedulerClient

    async def run() -> dict[str, Any]:
        async with SchedulerClient(url, queue=queue, timeout=60) as client:

            def make() -> RequestSpec:
                return RequestSpec(
                    instance_uuids=[str(uuid.uuid4())], memory_mb=memory_mb, vcpus=1, disk_gb=1
                )

            async def send(spec: RequestSpec) -> list[list[str]]:
                return [[s.host, *s.alternates] for s in await client.select_destinations(spec)]

            return await _timed(calls, hosts, make, send)

    return asyncio.run(run())


def main() -> int:
    kind, where, name, calls, memory_mb, hosts = sys.argv[1:7]
    run = _nova if kind == "nova" else _native
    print(json.dumps(run(where, name, int(calls), int(memory_mb), int(hosts))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
