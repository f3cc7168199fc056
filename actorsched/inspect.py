"""``actorsched hosts``: what a running ``serve`` holds, as a table or as JSON.

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
from typing import Any, TypeVar

import aiormq.exceptions

from . import settings
from .amqp.client import SchedulerClient
from .errors import SchedulerError
from .models import HostState

__all__ = ["hosts_arguments", "hosts_main", "render_table"]

T = TypeVar("T")

# the broker and queue to ask, and how to print
INSPECT_FLAGS = ("--amqp-url", "--queue", "--service-down-time")


def _common(parser: argparse.ArgumentParser) -> None:
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


def ask(args: argparse.Namespace, call: Callable[[SchedulerClient], Awaitable[T]]) -> T | None:
    """``call`` on a client of the configured scheduler; None (and one line) when it fails."""
    chosen = settings.load(args)

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
    _common(parser)


def _host_row(state: HostState, now: float, down_time: float) -> list[Any]:
    age = max(0.0, now - state.reported_at)
    return [
        state.host,
        state.availability_zone,
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
    "HOST", "ZONE", "FREE/TOTAL MB", "USED/TOTAL VCPU", "FREE/TOTAL GB", "INSTANCES",
    "CLAIMS", "AGE S", "ENABLED", "STALE",
)  # fmt: skip


def hosts_main(args: argparse.Namespace) -> int:
    """``actorsched hosts``: every host, its figures, claims and last report's age."""

    async def fetch(client: SchedulerClient) -> dict[str, HostState]:
        return await client.host_states()

    states = ask(args, fetch)
    if states is None:
        return 1
    if args.json:
        print(json.dumps({name: s.model_dump(mode="json") for name, s in states.items()}))
        return 0
    down_time = settings.load(args).scheduler.service_down_time
    now = time.time()
    rows = [_host_row(states[name], now, down_time) for name in sorted(states)]
    print(render_table(_HOST_HEADERS, rows))
    return 0
