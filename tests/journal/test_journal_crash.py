"""kill -9 under load, restart on the same journal: no acknowledged claim is lost."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

WORKER = Path(__file__).with_name("journal_crash_worker.py")
HOSTS = 20
HOST_RAM = 8192
CLAIM_RAM = 512  # 16 claims fill a host: 320 in all, fewer than the requests sent
REQUESTS = 600


class Worker:
    """The worker process, its answers read on a thread into a queue."""

    def __init__(self, journal: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(journal)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        self.ready = self.next()
        assert self.ready.get("ready"), self.ready

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.answers.put(json.loads(line))

    def next(self) -> dict[str, Any]:
        return self.answers.get(timeout=30)

    def send(self, requests: list[dict[str, Any]]) -> None:
        assert self.proc.stdin is not None
        try:
            for request in requests:
                self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # killed while we wrote: those requests were never acknowledged

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.send([request])
        return self.next()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._close_pipes()

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0
        self._close_pipes()

    def _close_pipes(self) -> None:
        self._reader.join(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


def _report(host: str) -> dict[str, Any]:
    return {
        "host": host,
        "generation": 1,
        "memory_mb": HOST_RAM,
        "memory_mb_used": 0,
        "vcpus": 64,
        "vcpus_used": 0,
        "local_gb": 1000,
        "local_gb_used": 0,
    }


def _spec(i: int) -> dict[str, Any]:
    uuids = [f"vm-{i}"] if i % 5 else [f"vm-{i}-a", f"vm-{i}-b"]  # some multi-instance
    return {"instance_uuids": uuids, "memory_mb": CLAIM_RAM, "vcpus": 1, "disk_gb": 1}


@pytest.mark.timeout(120)
def test_kill_9_under_load_loses_no_acknowledged_claim(tmp_path: Path) -> None:
    journal = tmp_path / "claims.sqlite"
    worker = Worker(journal)
    for h in range(HOSTS):
        assert worker.ask({"id": f"r{h}", "op": "report", "report": _report(f"h{h}")})["ok"]

    specs = {f"s{i}": _spec(i) for i in range(REQUESTS)}
    sender = threading.Thread(
        target=worker.send,
        args=([{"id": rid, "op": "select", "spec": spec} for rid, spec in specs.items()],),
    )
    sender.start()
    acknowledged: dict[str, list[dict[str, Any]]] = {}
    answered = 0
    while answered < 150:  # kill while most requests are still in flight
        answer = worker.next()
        answered += 1
        if "ok" in answer:
            acknowledged[answer["id"]] = answer["ok"]
    worker.kill()
    sender.join(timeout=30)
    while not worker.answers.empty():  # answers already written before the kill count too
        answer = worker.answers.get()
        if "ok" in answer:
            acknowledged[answer["id"]] = answer["ok"]
    assert len(acknowledged) >= 100

    worker = Worker(journal)
    try:
        dump = worker.ask({"id": "dump", "op": "dump"})["ok"]
        claims: dict[str, str] = dump["claims"]
        # every acknowledged claim is still held, on the host the client was told
        for selections in acknowledged.values():
            for sel in selections:
                assert claims.get(sel["instance_uuid"]) == sel["host"], sel
        # none is doubled: each host counts each of its claims exactly once
        for host, state in dump["hosts"].items():
            on_host = sum(1 for h in claims.values() if h == host)
            assert state["free_ram_mb"] == HOST_RAM - CLAIM_RAM * on_host, host
            assert state["free_ram_mb"] >= 0
            assert state["assumed_claims"] == on_host
        # asking again for the same instance uuids returns the same hosts
        again = [{"id": rid, "op": "select", "spec": specs[rid]} for rid in acknowledged]
        worker.send(again)
        for _ in again:
            answer = worker.next()
            assert answer.get("ok") == acknowledged[answer["id"]], answer
        after = worker.ask({"id": "dump2", "op": "dump"})["ok"]
        assert after["claims"] == claims
    finally:
        worker.stop()
