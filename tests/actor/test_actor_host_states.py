"""Scheduler.host_states on a large table: room allocated off the owner, objects built off it."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import make_report

from actorsched import Scheduler
from actorsched.core import Command, GetHostStates
from actorsched.core.views import HostStatesImage, ImageBuffers, host_state


async def test_host_states_past_the_inline_size_gives_the_owner_room_and_matches_the_table() -> (
    None
):
    reports = [make_report(f"h{i:05d}", memory_mb_used=i % 512) for i in range(6_000)]
    async with Scheduler() as scheduler:
        assert await scheduler.update_hosts(reports) == [True] * len(reports)
        seen: list[GetHostStates] = []
        ask = scheduler._ask

        def spy(command: Command[Any], wait: bool = True) -> asyncio.Future[object]:
            if isinstance(command, GetHostStates):
                seen.append(command)
            return ask(command, wait)

        scheduler._ask = spy  # type: ignore[method-assign,assignment]
        states = await scheduler.host_states()
        [command] = seen
        assert isinstance(command.into, ImageBuffers)
        assert command.into.rows >= 6_000
        table = scheduler.core.table
        assert states == {host: host_state(table, row) for host, row in table.row_of.items()}
        image = scheduler.core.handle(GetHostStates(), 1.0)
        assert isinstance(image, HostStatesImage)
        assert image.states() == states
