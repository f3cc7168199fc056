"""Callers for :mod:`benchmarks.nova_endpoint`: Nova's own client, or actorsched's, in a process.

``.venv-nova/bin/python -m benchmarks.nova_caller nova CONF TOPIC N MEMORY_MB`` makes N
``select_destinations`` calls one after the other through Nova 34's
``SchedulerAPI`` (its venv; nothing of actorsched is imported) and prints the
seconds of each as a JSON list. ``.venv/bin/python -m benchmarks.nova_caller
native URL QUEUE N MEMORY_MB`` makes the same requests through actorsched's
``SchedulerClient``.
"""

from __future__ import annotations

import json
import sys
import time
import uuid


def _nova(conf: str, topic: str, calls: int, memory_mb: int) -> list[float]:
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
    took = []
    for _ in range(calls):
        instance = str(uuid.uuid4())
        spec = objects.RequestSpec(
            ctxt, flavor=flavor, num_instances=1, instance_uuid=instance, project_id="p",
            user_id="u", is_bfv=False, image=objects.ImageMeta.from_dict({"properties": {}}),
        )  # fmt: skip
        started = time.perf_counter()
        api.select_destinations(ctxt, spec, [instance], return_objects=True, return_alternates=True)
        took.append(time.perf_counter() - started)
    return took


def _native(url: str, queue: str, calls: int, memory_mb: int) -> list[float]:
    import asyncio

    from actorsched import RequestSpec
    from actorsched.amqp import SchedulerClient

    async def run() -> list[float]:
        took = []
        async with SchedulerClient(url, queue=queue, timeout=60) as client:
            for _ in range(calls):
                spec = RequestSpec(
                    instance_uuids=[str(uuid.uuid4())], memory_mb=memory_mb, vcpus=1, disk_gb=1
                )
                started = time.perf_counter()
                await client.select_destinations(spec)
                took.append(time.perf_counter() - started)
        return took

    return asyncio.run(run())


def main() -> int:
    kind, where, name, calls, memory_mb = sys.argv[1:6]
    run = _nova if kind == "nova" else _native
    print(json.dumps(run(where, name, int(calls), int(memory_mb))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
