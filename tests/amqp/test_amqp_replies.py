"""Every reply is bounded: host_states pages or one host; no batch multiplies a large reply."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aio_pika
import pytest
from amqp_support import Stack, host_report, running_stack
from conftest import make_core, make_report

from actorsched import InvalidRequest
from actorsched.amqp.protocol import MAX_PAGE_HOSTS
from actorsched.amqp.service import _one_host
from actorsched.core.views import capture_host_states

pytestmark = pytest.mark.amqp


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack(max_reply_bytes=64 * 1024) as running:
        for i in range(25):
            assert await running.client.update_host(host_report(f"h{i:02d}"))
        yield running


async def test_host_states_come_a_page_at_a_time_and_cover_every_host(stack: Stack) -> None:
    first = await stack.client.host_states_page(limit=10)
    assert len(first.hosts) == 10
    assert first.next_cursor is not None
    second = await stack.client.host_states_page(first.next_cursor, limit=10)
    assert not set(first.hosts) & set(second.hosts)
    everything = await stack.client.host_states(page_size=7)  # four pages
    assert sorted(everything) == [f"h{i:02d}" for i in range(25)]
    last = await stack.client.host_states_page(limit=100)
    assert last.next_cursor is None


async def _raw(stack: Stack, op: str, body: dict[str, object]) -> dict[str, object]:
    connection = await aio_pika.connect(stack.url)
    async with connection:
        channel = await connection.channel()
        replies = await channel.declare_queue("", exclusive=True, auto_delete=True)
        await channel.default_exchange.publish(
            aio_pika.Message(json.dumps(body).encode(), type=op, reply_to=replies.name),
            routing_key=stack.queue,
        )
        async with replies.iterator(timeout=10) as stream:
            reply = await anext(stream)
            await reply.ack()
        answer: dict[str, object] = json.loads(reply.body)
        return answer


async def test_one_host_is_read_alone_and_an_unknown_one_is_no_host(stack: Stack) -> None:
    every = await stack.scheduler.host_states()
    assert await stack.client.host_state("h07") == every["h07"]
    assert await stack.client.host_state("nope") is None
    reply = await _raw(stack, "host_states", {"host": "h07"})
    assert reply["ok"] is True
    assert reply["result"] == {
        "hosts": {"h07": json.loads(every["h07"].model_dump_json())},
        "next_cursor": None,
    }
    assert await stack.client.remove_host("h07")
    assert await stack.client.host_state("h07") is None
    reply = await _raw(stack, "host_states", {"host": "h08", "cursor": 3})
    assert reply["ok"] is False
    assert "cursor 3 with host" in str(reply["error"])


def test_a_row_that_holds_another_host_by_the_owners_step_answers_no_host() -> None:
    # the service looks the row up off the owner; the host may be removed (and its row
    # given to another) before the owner copies that row
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    row = core.table.row_of["h1"]
    core.remove_host("h1", 2.0)
    core.update_host(make_report("h2"), 3.0)
    assert core.table.row_of["h2"] == row  # the row freed is the next one used
    image = capture_host_states(core.table, row, 1)
    assert _one_host("h1", image).hosts == {}
    assert list(_one_host("h2", image).hosts) == ["h2"]


async def test_a_page_larger_than_the_maximum_is_bad_input(stack: Stack) -> None:
    reply = await _raw(stack, "host_states", {"limit": MAX_PAGE_HOSTS + 1})
    assert reply["ok"] is False
    assert "limit" in str(reply["error"])


async def test_a_batch_of_many_pages_is_refused_before_the_work(stack: Stack) -> None:
    # each page of 25 hosts is about 9 KB; twenty of them pass 64 KB
    items = [{"type": "host_states", "body": {"limit": 1000}} for _ in range(20)]
    before = stack.scheduler.core.table.count
    reply = await _raw(stack, "batch", {"requests": items})
    assert reply["ok"] is True
    results = reply["result"]
    assert isinstance(results, list)
    done = [r for r in results if r["ok"]]
    refused = [r for r in results if not r["ok"]]
    assert done, "the first pages fit"
    assert refused, "the rest would pass the cap"
    assert all("--max-reply-bytes" in r["error"]["message"] for r in refused)
    assert len(json.dumps(reply)) <= 64 * 1024 + 1024
    assert stack.scheduler.core.table.count == before


async def test_one_page_over_the_cap_is_refused_with_what_to_do() -> None:
    async with running_stack(max_reply_bytes=4096) as small:
        for i in range(25):
            assert await small.client.update_host(host_report(f"h{i:02d}"))
        with pytest.raises(InvalidRequest, match="smaller pages"):
            await small.client.host_states_page(limit=100)
        page = await small.client.host_states_page(limit=5)  # what fits still works
        assert len(page.hosts) == 5
