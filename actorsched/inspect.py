"""``actorsched hosts``, ``claims``, ``where`` and ``plan``: what a running ``serve``
holds and what it would do, as tables for people or ``--json`` for scripts.

It asks over AMQP (``--amqp-url``, ``--queue``, or the settings file and
environment as ``serve`` reads them) and claims nothing. Exit codes: 0
answered, 1 the scheduler could not be asked (broker unreachable, no such
queue, no answer in ``--timeout``), 2 bad usage or settings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiormq.exceptions
from pydantic import ValidationError

from . import settings
from .amqp.client import SchedulerClient
from .answers import ClaimInfo, Location, Plan
from .errors import SchedulerError
from .models import HostState, RequestSpec

__all__ = [
    "ask",
    "ask_flags",
    "claims_arguments",
    "claims_main",
    "hosts_arguments",
    "hosts_main",
    "plan_arguments",
    "plan_main",
    "render_table",
    "where_arguments",
    "where_main",
]

T = TypeVar("T")

# the broker and queue to ask, and how to print
INSPECT_FLAGS = ("--amqp-url", "--queue", "--service-down-time")


def ask_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of every command that asks a running serve: where it is, how long to
    wait, and ``--json``."""
    settings.add_arguments(parser, INSPECT_FLAGS)
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for the answer (default 10)"
    )
    parser.add_argument("--json", action="store_true", help="JSON for scripts, not a table")


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``rows`` under ``headers``, in columns padded to their widest cell."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]  # fmt: skip
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "-"
    return "-" if value is None else str(value)


def ask(
    args: argparse.Namespace,
    call: Callable[[SchedulerClient], Awaitable[T]],
    chosen: settings.Settings | None = None,
) -> T | None:
    """``call`` on a client of the configured scheduler (``chosen``, else the settings
    of ``args``); None (and one line) when it fails."""
    chosen = chosen if chosen is not None else settings.load(args)

    async def run() -> T:
        client = SchedulerClient(
            chosen.service.amqp_url, queue=chosen.service.queue, timeout=args.timeout, batch=False
        )
        async with client:
            return await call(client)

    try:
        return asyncio.run(run())
    except (SchedulerError, TimeoutError, OSError, aiormq.exceptions.AMQPError) as exc:
        print(f"actorsched {args.command}: {exc or type(exc).__name__}", file=sys.stderr)
        return None


def hosts_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched hosts``."""
    ask_flags(parser)


def _host_row(state: HostState, now: float, down_time: float) -> list[Any]:
    age = max(0.0, now - state.reported_at)
    return [
        state.host,
        state.availability_zone,
        state.aggregates,
        f"{state.free_ram_mb}/{state.memory_mb}",
        f"{state.vcpus_used}/{state.vcpus_total}",
        f"{state.free_disk_gb}/{state.local_gb}",
        state.num_instances,
        state.assumed_claims,
        age,
        state.enabled,
        age > down_time,
    ]


_HOST_HEADERS = (
    "HOST", "ZONE", "AGGREGATES", "FREE/TOTAL MB", "USED/TOTAL VCPU", "FREE/TOTAL GB", "INSTANCES",
    "CLAIMS", "AGE S", "ENABLED", "STALE",
)  # fmt: skip


def hosts_main(args: argparse.Namespace) -> int:
    """``actorsched hosts``: every host, its figures, claims and last report's age."""

    async def fetch(client: SchedulerClient) -> dict[str, HostState]:
        return await client.host_states()

    chosen = settings.load(args)
    states = ask(args, fetch, chosen)
    if states is None:
        return 1
    if args.json:
        print(json.dumps({name: s.model_dump(mode="json") for name, s in states.items()}))
        return 0
    down_time = chosen.scheduler.service_down_time
    now = time.time()
    rows = [_host_row(states[name], now, down_time) for name in sorted(states)]
    print(render_table(_HOST_HEADERS, rows))
    return 0


def claims_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched claims``."""
    ask_flags(parser)
    parser.add_argument("--host", dest="on_host", default=None, help="only this host's claims")


def claims_main(args: argparse.Namespace) -> int:
    """``actorsched claims [--host H]``: every live claim."""

    async def fetch(client: SchedulerClient) -> list[ClaimInfo]:
        return await client.claims(args.on_host)

    claims = ask(args, fetch)
    if claims is None:
        return 1
    if args.json:
        print(json.dumps([c.model_dump(mode="json") for c in claims]))
        return 0
    now = time.time()
    rows = [
        [c.instance_uuid, c.host, c.memory_mb, c.vcpus, c.disk_gb, c.group_id,
         "confirmed" if c.confirmed else "assumed", max(0.0, now - c.created_at), c.alternates]
        for c in claims
    ]  # fmt: skip
    headers = ("INSTANCE", "HOST", "MB", "VCPU", "GB", "GROUP", "STATE", "AGE S", "ALTERNATES")
    print(render_table(headers, rows))
    return 0


def where_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched where``."""
    ask_flags(parser)
    parser.add_argument("instance_uuid", metavar="INSTANCE_UUID")


def where_main(args: argparse.Namespace) -> int:
    """``actorsched where INSTANCE_UUID``: the host it is on; exit 1 when unknown."""

    async def fetch(client: SchedulerClient) -> Location:
        return await client.where(args.instance_uuid)

    found = ask(args, fetch)
    if found is None:
        return 1
    if args.json:
        print(found.model_dump_json())
    elif found.host is None:
        print(f"{found.instance_uuid}: not known to the scheduler", file=sys.stderr)
    else:
        how = "claimed" if found.claimed else "reported"
        if found.claimed:
            how += ", confirmed by a report" if found.confirmed else ", not reported yet"
        print(f"{found.instance_uuid}: {found.host} ({how})")
    return 0 if found.host is not None else 1


def plan_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``actorsched plan``."""
    ask_flags(parser)
    parser.add_argument(
        "spec",
        nargs="?",
        default="-",
        metavar="FILE",
        help="a RequestSpec as JSON (- : stdin), unless --vcpus and --memory say it",
    )
    asked = parser.add_argument_group("the request as flags (instead of FILE)")
    asked.add_argument("--vcpus", type=int, default=None, help="vCPUs per instance")
    asked.add_argument("--memory", type=int, default=None, help="MB of RAM per instance")
    asked.add_argument("--disk", type=int, default=0, help="GB of disk per instance (default 0)")
    asked.add_argument("--count", type=int, default=1, help="instances (default 1)")
    asked.add_argument("--zone", default=None, help="availability zone")
    asked.add_argument(
        "--trait", dest="traits", action="append", default=[], help="a required trait (repeat)"
    )


def plan_main(args: argparse.Namespace) -> int:
    """``actorsched plan [FILE]``: where a request would go and why; it claims nothing.

    Exit 0 when it would be placed, 1 when it would not (or the scheduler
    could not be asked), 2 for a spec that is not a valid RequestSpec.
    """
    try:
        if args.vcpus is not None or args.memory is not None:
            spec = RequestSpec(
                instance_uuids=[f"plan-{i}" for i in range(max(1, args.count))],
                vcpus=args.vcpus if args.vcpus is not None else 1,
                memory_mb=args.memory if args.memory is not None else 512,
                disk_gb=args.disk,
                availability_zone=args.zone,
                required_traits=args.traits,
            )
        else:
            text = sys.stdin.read() if args.spec == "-" else Path(args.spec).read_text()
            spec = RequestSpec.model_validate_json(text)
    except OSError as exc:
        print(f"actorsched plan: {args.spec}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "spec"
        print(f"actorsched plan: not a RequestSpec: {where}: {first['msg']}", file=sys.stderr)
        return 2

    async def fetch(client: SchedulerClient) -> Plan:
        return await client.plan(spec)

    plan = ask(args, fetch)
    if plan is None:
        return 1
    if args.json:
        print(plan.model_dump_json())
        return 0 if plan.placed else 1
    for instance in plan.instances:
        removed = ", ".join(f"{n} removed {c}" for n, c in instance.filter_counts.items())
        print(
            f"instance {instance.instance_uuid}: {instance.host or 'no valid host'} "
            f"({instance.passing_hosts}/{instance.total_hosts} hosts pass"
            f"{'; ' + removed if removed else ''})"
        )
        if instance.candidates:
            names = sorted({n for c in instance.candidates for n in c.weights})
            rows = [[c.host, *(f"{c.weights.get(n, 0.0):.3f}" for n in names), f"{c.total:.3f}"]
                    for c in instance.candidates]  # fmt: skip
            print(render_table(["HOST", *names, "TOTAL"], rows))
            if len(instance.candidates) < instance.passing_hosts:
                print(
                    f"(the {len(instance.candidates)} best of {instance.passing_hosts} passing "
                    "hosts: the chosen one and its alternates, as max_attempts keeps them)"
                )
        if instance.alternates:
            print(f"alternates: {', '.join(instance.alternates)}")
        if instance.preempted:
            print(f"would preempt: {', '.join(instance.preempted)}")
        print()
    if not plan.placed:
        print(plan.message)
    return 0 if plan.placed else 1
