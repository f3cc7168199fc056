"""The operator's commands (``actorsched host``, ``claim``, ``aggregate``, ``plan``
flags) change a running service over the broker, with clear errors and exit codes."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from amqp_support import AMQP_URL, host_report, run_cli, running_stack

from actorsched import InvalidRequest, RequestSpec
from actorsched.operate import _show

pytestmark = pytest.mark.amqp


def _spec(uuid: str, memory_mb: int = 1024) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=memory_mb, vcpus=1, disk_gb=1)


async def test_host_show_gives_capacity_after_ratios_used_free_and_claims() -> None:
    async with running_stack() as stack:
        await stack.client.update_host(host_report("h1", memory_mb=8192))
        await stack.client.select_destinations(_spec("vm-1"))
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await run_cli("host", "show", "h1", *where, "--json")
        assert code == 0, err
        shown = json.loads(out)
        memory = next(row for row in shown["usage"] if row["resource"] == "MEMORY_MB")
        state = shown["host"]
        assert memory["total"] == 8192
        assert memory["used"] == 8192 - state["memory_mb_reserved"] - state["free_ram_mb"]
        assert memory["capacity"] == int(
            (8192 - state["memory_mb_reserved"]) * state["ram_allocation_ratio"]
        )
        assert memory["free_after_ratio"] == memory["capacity"] - memory["used"]
        assert [c["instance_uuid"] for c in shown["claims"]] == ["vm-1"]
        code, out, err = await run_cli("host", "show", "h1", *where)
        assert code == 0, err
        assert "MEMORY_MB" in out
        assert "vm-1" in out
        code, _, err = await run_cli("host", "show", "nope", *where)
        assert code == 1
        assert "no host 'nope'" in err


async def test_host_show_reads_that_host_alone_where_every_host_is_over_the_reply_cap() -> None:
    # 40 hosts are about 18 KB of host_states, over this service's 4 KB reply cap, which
    # the one host asked for fits: a host show that asked for every host failed here
    async with running_stack(max_reply_bytes=4096) as stack:
        for i in range(40):
            await stack.client.update_host(host_report(f"h{i:02d}"))
        (placed,) = await stack.client.select_destinations(_spec("vm-1"))
        with pytest.raises(InvalidRequest, match="max-reply-bytes"):
            await stack.client.host_states()
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await run_cli("host", "show", placed.host, *where, "--json")
        assert code == 0, err
        shown = json.loads(out)
        state = (await stack.scheduler.host_states())[placed.host]
        assert shown["host"] == state.model_dump(mode="json")
        assert [c["instance_uuid"] for c in shown["claims"]] == ["vm-1"]
        # the table, as it was printed from every host's states (but the report's age)
        code, out, err = await run_cli("host", "show", placed.host, *where)
        assert code == 0, err
        claims = await stack.client.claims(placed.host)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            _show(state, claims, as_json=False)
        aged = ("report:",)
        assert [line for line in out.splitlines() if not line.startswith(aged)] == [
            line for line in printed.getvalue().splitlines() if not line.startswith(aged)
        ]
        code, out, err = await run_cli("host", "show", "h-none", *where)
        assert (code, out) == (1, "")
        assert err == "actorsched host show: no host 'h-none' (actorsched hosts lists them)\n"


async def test_host_drain_moves_every_claim_and_says_what_it_could_not() -> None:
    async with running_stack() as stack:
        for name in ("h1", "h2"):
            await stack.client.update_host(host_report(name, memory_mb=8192))
        placed = {}
        for i in range(4):
            (selection,) = await stack.client.select_destinations(_spec(f"vm-{i}"))
            placed[f"vm-{i}"] = selection.host
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        source = placed["vm-0"]
        on_source = sorted(u for u, h in placed.items() if h == source)
        code, out, err = await run_cli("host", "drain", source, *where, "--json")
        assert code == 0, err
        drained = json.loads(out)
        assert sorted(m["instance_uuid"] for m in drained["moved"]) == on_source
        assert drained["not_moved"] == []
        claims = await stack.scheduler.claims()
        assert {c.host for c in claims.claims} == {"h1", "h2"} - {source}
        assert len(claims.claims) == 4, "each move confirmed: no hold left behind"
        # nowhere to go: the other host is too full for a big one
        await stack.client.select_destinations(_spec("big", memory_mb=7000))
        big_host = (await stack.scheduler.where("big")).host
        assert big_host is not None
        await stack.client.update_host(host_report(source, generation=2, memory_mb=1024))
        code, out, err = await run_cli("host", "drain", big_host, *where)
        assert code == 1
        assert "big: not moved" in out
        assert "moved, 1 not moved" in out.splitlines()[-1]


async def test_host_remove_and_claim_release() -> None:
    async with running_stack() as stack:
        await stack.client.update_host(host_report("h1"))
        await stack.client.update_host(host_report("h2"))
        await stack.client.select_destinations(_spec("vm-1"))
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await run_cli("claim", "release", "vm-1", *where)
        assert (code, out.strip()) == (0, "vm-1: released"), err
        code, _, err = await run_cli("claim", "release", "vm-1", *where)
        assert code == 1
        assert "vm-1 holds no claim" in err
        code, out, err = await run_cli("host", "remove", "h2", *where, "--json")
        assert code == 0, err
        assert json.loads(out) == {"host": "h2", "removed": True}
        assert sorted(await stack.scheduler.host_states()) == ["h1"]
        code, _, err = await run_cli("host", "remove", "h2", *where)
        assert code == 1
        assert "no host 'h2'" in err


async def test_aggregate_create_set_unset_members_list_and_delete() -> None:
    async with running_stack() as stack:
        await stack.client.update_host(host_report("h1"))
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await run_cli(
            "aggregate", "create", "fast", "ssd=true", "--zone", "az9", "--host", "h1", *where
        )
        assert code == 0, err
        assert "availability_zone=az9" in out
        assert (await stack.scheduler.host_states())["h1"].availability_zone == "az9"
        code, _, err = await run_cli("aggregate", "set", "fast", "tier=gold", *where)
        assert code == 0, err
        code, _, err = await run_cli("aggregate", "unset", "fast", "ssd", *where)
        assert code == 0, err
        (aggregate,) = await stack.scheduler.aggregates()
        assert aggregate.metadata == {"availability_zone": "az9", "tier": "gold"}
        code, _, err = await run_cli("aggregate", "delete", "fast", *where)
        assert code == 1, "not empty: Nova refuses it, so does the scheduler"
        assert "still has 1 host" in err
        code, _, err = await run_cli("aggregate", "remove-host", "fast", "h1", *where)
        assert code == 0, err
        code, out, err = await run_cli("aggregate", "list", *where, "--json")
        assert code == 0, err
        assert json.loads(out)[0]["hosts"] == []
        code, out, err = await run_cli("aggregate", "delete", "fast", *where)
        assert (code, out.strip()) == (0, "fast: deleted"), err
        code, _, err = await run_cli("aggregate", "set", "fast", "bad", *where)
        assert code != 0
        assert "'bad' is not KEY=VALUE" in err


async def test_plan_takes_the_request_as_flags() -> None:
    async with running_stack() as stack:
        await stack.client.update_host(host_report("h1", memory_mb=8192))
        where = ["--amqp-url", AMQP_URL, "--queue", stack.queue]
        code, out, err = await run_cli("plan", "--vcpus", "2", "--memory", "4096", *where, "--json")
        assert code == 0, err
        plan = json.loads(out)
        assert plan["placed"] is True
        assert plan["instances"][0]["host"] == "h1"
        code, out, _ = await run_cli("plan", "--vcpus", "2", "--memory", "9000", *where)
        assert code == 1
        assert "no valid host" in out
        for name in ("h2", "h3", "h4", "h5"):
            await stack.client.update_host(host_report(name, memory_mb=8192))
        code, out, err = await run_cli("plan", "--vcpus", "1", "--memory", "512", *where)
        assert code == 0, err
        # the table lists max_attempts (3) of the 5 passing hosts, and says so
        assert "(the 3 best of 5 passing hosts" in out
        assert (await stack.scheduler.claims()).claims == [], "a plan claims nothing"
