"""Place a server group through ``actorsched serve`` with SchedulerClient, then release it.

python examples/placement_client.py --instances 3 --policy anti-affinity

With ``--name web --keep`` the instance uuids are ``web-0``, ``web-1`` ... and
the claims are kept: run it again after restarting ``actorsched serve`` on the
same journal (even after ``kill -9``) and the same hosts come back.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid

from actorsched import NoValidHost, RequestSpec, ServerGroup
from actorsched.amqp import SchedulerClient


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--amqp-url",
        default=os.environ.get("ACTORSCHED_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    )
    parser.add_argument("--queue", default="actorsched.requests")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument(
        "--policy",
        default="anti-affinity",
        choices=["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"],
    )
    parser.add_argument(
        "--name", help="name the instances NAME-0, NAME-1 ... (default: random uuids)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the claims (do not release)")
    args = parser.parse_args()

    if args.name:
        uuids = [f"{args.name}-{i}" for i in range(args.instances)]
        group_id = args.name
    else:
        uuids = [str(uuid.uuid4()) for _ in range(args.instances)]
        group_id = str(uuid.uuid4())
    spec = RequestSpec(
        instance_uuids=uuids,
        memory_mb=2048,
        vcpus=2,
        disk_gb=20,
        group=ServerGroup(id=group_id, policy=args.policy),
    )
    async with SchedulerClient(args.amqp_url, queue=args.queue, timeout=10) as client:
        try:
            # a timeout here is safe to retry: the same uuids never claim twice
            selections = await client.select_destinations(spec)
        except NoValidHost as exc:
            print(f"no valid host: {exc}")
            return 1
        for selection in selections:
            print(
                f"{selection.instance_uuid} -> {selection.host} (alternates {selection.alternates})"
            )
        states = await client.host_states()
        for name in sorted(states):
            print(f"{name}: {states[name].free_ram_mb} MB free")
        if args.keep:
            print(f"kept {len(selections)} claims")
        else:
            released = [await client.release(u) for u in spec.instance_uuids]
            print(f"released {sum(released)} of {len(released)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
