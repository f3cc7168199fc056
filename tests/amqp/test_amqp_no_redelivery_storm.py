"""No redelivery storm: a reply or ack slower than its timeout never requeues done work.

Before, a reply publish or an ack that outlived its timeout on a live
connection was nacked with requeue: the broker delivered the message again,
the work was redone, and at the delivery limit good messages were
dead-lettered. Here the service's timeouts are made tiny (a fraction of a
millisecond, shorter than any real round trip), so nearly every reply and ack
outlives its bound under a flood on a small prefetch; each delivery must
still be handled exactly once.
"""

from __future__ import annotations

import asyncio

import aio_pika
import pytest
from amqp_support import ROOMY, host_report, running_stack

from actorsched import RequestSpec
from actorsched.amqp.service import dead_letter_names

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(120)]

HOSTS = 20
REPORTS = 300  # host reports, generations rising per host
PLACEMENTS = 300


async def test_slow_replies_and_acks_never_redeliver_or_dead_letter_done_work() -> None:
    async with running_stack(
        config=ROOMY, client_timeout=30, prefetch=4, ack_timeout=0.0002, publish_timeout=0.0002
    ) as stack:
        client, service = stack.client, stack.service
        for i in range(HOSTS):
            assert await client.update_host(host_report(f"h{i:02d}"))
        sent_before = service.accepted

        async def report(n: int) -> bool:
            return await client.update_host(host_report(f"h{n % HOSTS:02d}", 2 + n // HOSTS))

        async def place(n: int) -> str:
            spec = RequestSpec(instance_uuids=[f"vm-{n}"], memory_mb=16, vcpus=1, disk_gb=1)
            [selection] = await client.select_destinations(spec)
            return selection.host

        results = await asyncio.gather(
            *(report(n) for n in range(REPORTS)), *(place(n) for n in range(PLACEMENTS))
        )
        assert all(results[:REPORTS]), "every report newer than the last was applied"
        placed = results[REPORTS:]
        assert len(placed) == PLACEMENTS
        # the bounds were really outlived (else this test shows nothing)
        assert service.ack_failures + service.replies_slow > 0, "no reply or ack was slow"
        assert service.replies_lost == 0
        # each delivery handled once: none delivered again, none handed back
        assert service.redelivered == 0
        assert service.returned == 0
        # every caller was answered on its first try: deliveries == calls sent (the
        # client packs concurrent calls into batches, so count the claims instead)
        claims = (await stack.scheduler.claims()).claims
        assert sorted(c.instance_uuid for c in claims) == sorted(
            f"vm-{n}" for n in range(PLACEMENTS)
        )
        assert service.accepted - sent_before <= REPORTS + PLACEMENTS
        # nothing dead-lettered
        connection = await aio_pika.connect(stack.url)
        async with connection:
            channel = await connection.channel()
            dead = await channel.declare_queue(dead_letter_names(stack.queue)[1], passive=True)
            assert dead.declaration_result.message_count == 0
