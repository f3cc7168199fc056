"""A scheduler with a journal, served over stdin/stdout, for the kill -9 test.

Usage: ``python journal_crash_worker.py JOURNAL``. Each stdin line is a JSON
request ``{"id": ..., "op": "report" | "select" | "release" | "dump", ...}``,
handled concurrently; each answer is one JSON line on stdout, written and
flushed only once the scheduler answered (so only after its batch is
durable). The first line out is ``{"ready": ...}`` once recovery is done.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from actorsched import HostReport, RequestSpec, Scheduler, SchedulerConfig, SchedulerError

CONFIG = SchedulerConfig(max_io_ops_per_host=10_000, max_instances_per_host=10_000)


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def _handle(s: Scheduler, request: dict[str, Any]) -> None:
    op = request["op"]
    answer: dict[str, Any] = {"id": request.get("id")}
    try:
        if op == "report":
            answer["ok"] = await s.update_host(HostReport.model_validate(request["report"]))
        elif op == "select":
            selections = await s.select_destinations(RequestSpec.model_validate(request["spec"]))
            answer["ok"] = [sel.model_dump() for sel in selections]
        elif op == "release":
            answer["ok"] = await s.release(request["uuid"])
        elif op == "dump":
            states = await s.host_states()  # after everything sent before it
            answer["ok"] = {
                "claims": {u: host for u, (host, _) in s.core.claims().items()},
                "hosts": {h: st.model_dump() for h, st in states.items()},
            }
        else:
            answer["error"] = f"unknown op {op!r}"
    except SchedulerError as exc:
        answer["error"] = f"{type(exc).__name__}: {exc}"
    _say(answer)


async def main(path: str) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with Scheduler(CONFIG, journal=path) as s:
        recovery = s.journal.recovery if s.journal is not None else None
        _say({"ready": True, "claims": s.claim_count, "recovery": repr(recovery)})
        tasks: set[asyncio.Task[None]] = set()
        while line := await reader.readline():
            task = asyncio.ensure_future(_handle(s, json.loads(line)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
