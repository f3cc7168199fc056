"""A compute node reporter: publishes ``host_report`` messages to ``actorsched serve``.

It uses plain aio-pika, no actorsched client, to show what any publisher
does: set the AMQP ``type`` property to the operation and send the JSON of a
HostReport to the request queue, with ``user_id`` set to the broker user it
logs in as (the broker checks it; ``serve`` gives that user its roles, and
refuses a message without one). It asks for no reply (fire and forget,
with a publisher confirm); a report whose generation is not newer than the
last one applied is ignored by the scheduler, so sending again is harmless.

    python examples/compute_node_reporter.py --hosts 3 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import os

import aio_pika
from yarl import URL

from actorsched import HostReport


def report(host: str, generation: int, instances: list[str]) -> HostReport:
    return HostReport(
        host=host,
        generation=generation,
        memory_mb=16384,
        memory_mb_used=512 * len(instances),
        memory_mb_reserved=512,
        vcpus=16,
        vcpus_used=len(instances),
        local_gb=500,
        local_gb_used=10 * len(instances),
        instances=instances,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--amqp-url",
        default=os.environ.get("ACTORSCHED_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    )
    parser.add_argument("--queue", default="actorsched.requests")
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between rounds")
    args = parser.parse_args()

    connection = await aio_pika.connect_robust(args.amqp_url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        for generation in range(1, args.rounds + 1):
            for i in range(args.hosts):
                body = report(f"compute-{i}", generation, instances=[]).model_dump_json()
                await channel.default_exchange.publish(
                    aio_pika.Message(
                        body.encode(),
                        type="host_report",
                        content_type="application/json",
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        user_id=URL(args.amqp_url).user or "guest",  # who sends it
                    ),
                    routing_key=args.queue,
                )
            print(f"round {generation}: reported {args.hosts} hosts")
            if generation < args.rounds:
                await asyncio.sleep(args.interval)


if __name__ == "__main__":
    asyncio.run(main())
