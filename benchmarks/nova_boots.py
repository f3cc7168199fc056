"""Boots through Nova 34's own functional environment: with Nova's scheduler and with
actorsched, side by side.

``tests/nova_functional/scenario.py`` (run in Nova's venv) builds Nova's functional
test environment (API, conductor, 20 fake computes, Placement over HTTP, the real
broker on a vhost of its own), boots 50 servers at once until NoValidHost, moves
and deletes them, checks every step and prints one ``RESULT {...}`` document. This
module runs it twice, as the acceptance test (``tests/nova_functional``) and
``make bench`` do, and takes the figures from each RESULT's ``timing``:

* :func:`run_with_nova`: ``--scheduler nova`` (Nova's own scheduler service);
* :func:`run_with_actorsched`: ``--scheduler external`` with ``actorsched serve
  --nova-config --placement-url`` answering on the bus (no nova-scheduler);
* :func:`boots`: both, one after the other, and the figures beside each other.

The figures are the functional environment's (all of Nova in one eventlet
thread of one process), not a deployment's; ``tests/nova_functional/NOTES.md``
says what each one measures.

Run it alone from the repository root (``make nova-venv`` first)::

    .venv/bin/python -m benchmarks.nova_boots
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "placement"))
from placement_fixture import import_error

__all__ = [
    "NOVA_PYTHON",
    "SCENARIO",
    "STEPS",
    "Run",
    "boots",
    "explain",
    "missing",
    "run_with_actorsched",
    "run_with_nova",
    "side_by_side",
]

ROOT = Path(__file__).resolve().parent.parent
NOVA_PYTHON = Path(os.environ.get("ACTORSCHED_NOVA_PYTHON", ROOT / ".venv-nova" / "bin" / "python"))
SCENARIO = ROOT / "tests" / "nova_functional" / "scenario.py"
# what nova.test needs beyond `pip install nova` (Nova's test-requirements.txt, in
# part; openstack-placement for PlacementFixture)
TEST_REQUIREMENTS = ("oslotest", "testtools", "wsgi_intercept", "placement")
# the scenario's steps, in order (each run must report every one)
STEPS = (
    "boot",
    "make_room",
    "resize_confirm",
    "migrate_confirm",
    "migrate_revert",
    "evacuate",
    "delete",
)
# the RESULT's timing fields shown side by side
FIGURES = (
    "boots_per_second",
    "scheduler_share_of_boot",
    "scheduler_share_of_boot_mean",
    "select_destinations_seconds_p50",
    "select_destinations_seconds_max",
    "boot_seconds_mean",
    "wall_seconds",
    "posted_seconds",
)


def missing(nova_python: Path = NOVA_PYTHON) -> str | None:
    """Why the scenario cannot run here (one line), or None."""
    if not (nova_python.parent.parent / ".installed").exists():
        return (
            f"Nova 34's venv is missing ({nova_python}): `make nova-venv` makes it "
            "(pip install nova==34.0.0)"
        )
    failed = import_error(nova_python, TEST_REQUIREMENTS)
    if failed:
        return (
            "Nova's functional tests need more than nova in its venv: "
            f"{nova_python.parent / 'pip'} install -r {SCENARIO.with_name('requirements.txt')} "
            f"({failed})"
        )
    if subprocess.run(["which", "rabbitmqctl"], capture_output=True, check=False).returncode:
        return "rabbitmqctl is not on PATH: the scenario makes a vhost of its own with it"
    return None


@dataclass
class Run:
    """One run of the scenario: its RESULT document, exit code and output."""

    result: dict[str, Any]
    returncode: int | None
    seconds: float
    stdout: list[str] = field(default_factory=list)
    serve_log: list[str] = field(default_factory=list)

    @property
    def steps(self) -> dict[str, dict[str, Any]]:
        return {s["step"]: s for s in self.result.get("steps", [])}


def _result(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise AssertionError(f"the scenario printed no RESULT:\n{stdout[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def explain(result: Mapping[str, Any]) -> str:
    """What failed and where (for an assertion message or a bench note)."""
    return json.dumps(
        {
            "failed_steps": result.get("failed_steps"),
            "harness_errors": result.get("harness_errors"),
            "setup_error": result.get("setup_error"),
            "external": result.get("external", {}).get("error"),
        },
        indent=1,
    )[:6000]


async def _drop_vhosts(stdout: str) -> None:
    """Delete the vhost of a scenario killed before it could (its VHOST line)."""
    for line in stdout.splitlines():
        if line.startswith("VHOST "):
            # the machine's node answers root's rabbitmqctl only: through sudo, never
            # prompting, when we are not root (as the scenario made the vhost)
            sudo = ("sudo", "-n", "--") if os.geteuid() != 0 else ()
            drop = await asyncio.create_subprocess_exec(
                *sudo,
                "rabbitmqctl",
                "delete_vhost",
                line.split()[1],
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(drop.wait(), 60)


async def _drain(stream: asyncio.StreamReader | None, into: list[str], echo: bool = False) -> None:
    while stream is not None and (line := await stream.readline()):
        into.append(line.decode())
        if echo and line.startswith(b"STEP "):
            print(line.decode(), end="", flush=True)


async def _stop(process: asyncio.subprocess.Process | None) -> None:
    if process is not None and process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _scenario(
    workdir: Path, nova_python: Path, scheduler: str, *more: str
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(nova_python),
        str(SCENARIO),
        "--scheduler",
        scheduler,
        "--workdir",
        str(workdir),
        "--log-file",
        str(workdir / "nova.log"),
        *more,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 24,  # the RESULT line is one JSON document of ~100 KB
    )


def _finish(run: Run, workdir: Path) -> Run:
    (workdir / "result.json").write_text(json.dumps(run.result, indent=1))
    return run


async def run_with_nova(
    workdir: Path, *, nova_python: Path = NOVA_PYTHON, within: float = 540.0, echo: bool = False
) -> Run:
    """The scenario through Nova's own scheduler service (``echo``: print its STEP lines)."""
    started = time.monotonic()
    scenario = await _scenario(workdir, nova_python, "nova")
    out: list[str] = []
    try:
        await asyncio.wait_for(_drain(scenario.stdout, out, echo), timeout=within)
        await asyncio.wait_for(scenario.wait(), timeout=30)
    finally:
        await _stop(scenario)
        if not any(line.startswith("RESULT ") for line in out):
            await _drop_vhosts("".join(out))  # killed before its own clean-up
    run = Run(_result("".join(out)), scenario.returncode, time.monotonic() - started, out)
    return _finish(run, workdir)


async def run_with_actorsched(
    workdir: Path,
    *,
    nova_python: Path = NOVA_PYTHON,
    within: float = 540.0,
    env: Mapping[str, str] | None = None,
    echo: bool = False,
) -> Run:
    """The scenario with no nova-scheduler: ``actorsched serve --nova-config
    --placement-url`` answers, following the run's Placement (``env``: serve's
    environment, this process's by default)."""
    started = time.monotonic()
    go = workdir / "go"
    scenario = await _scenario(
        workdir,
        nova_python,
        "external",
        "--go-file",
        str(go),
        "--wait-timeout",
        "60",
        "--step-timeout",
        "90",
    )
    assert scenario.stdout is not None
    out: list[str] = []
    serve: asyncio.subprocess.Process | None = None
    serve_log: list[str] = []
    try:
        ready = await _read_until_ready(scenario.stdout, out)
        serve = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "actorsched",
            "serve",
            "--nova-config",
            ready["nova_conf"],
            "--amqp-url",
            ready["amqp_url"],
            "--queue",
            f"actorsched-nf-{workdir.name[-12:]}",
            "--placement-url",
            ready["placement_url"],
            "--no-journal",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={
                **(os.environ if env is None else env),
                "ACTORSCHED_NOVA_CELL_UUID": ready["cell_uuid"],
                # the hypervisor facts Placement does not hold (supported_instances ...)
                "ACTORSCHED_NOVA_PLACEMENT_HOST_FACTS": ready["host_facts_json"],
            },
        )
        assert serve.stderr is not None
        while "ready" not in (
            line := (await asyncio.wait_for(serve.stderr.readline(), 30)).decode()
        ):
            if not line:
                raise AssertionError("serve exited before it was ready:\n" + "".join(serve_log))
            serve_log.append(line)
        drain = asyncio.create_task(_drain(serve.stderr, serve_log))
        go.touch()
        await asyncio.wait_for(_drain(scenario.stdout, out, echo), timeout=within)
        await asyncio.wait_for(scenario.wait(), timeout=30)
        drain.cancel()
    finally:
        for process in (scenario, serve):
            await _stop(process)
        if not any(line.startswith("RESULT ") for line in out):
            await _drop_vhosts("".join(out))  # killed before its own clean-up
    (workdir / "serve.log").write_text("".join(serve_log))
    run = Run(
        _result("".join(out)), scenario.returncode, time.monotonic() - started, out, serve_log
    )
    return _finish(run, workdir)


async def _read_until_ready(stream: asyncio.StreamReader, out: list[str]) -> dict[str, Any]:
    while line := (await asyncio.wait_for(stream.readline(), timeout=120)).decode():
        out.append(line)
        if line.startswith("READY "):
            ready: dict[str, Any] = json.loads(line[len("READY ") :])
            return ready
    raise AssertionError("the scenario exited before READY:\n" + "".join(out)[-3000:])


def _figures(run: Run) -> dict[str, Any]:
    timing = run.result.get("timing", {})
    boot = run.steps.get("boot", {}).get("detail", {})
    return {
        "ok": bool(run.result.get("ok")),
        **{name: timing.get(name) for name in FIGURES},
        "active": boot.get("active"),
        "no_valid_host": boot.get("no_valid_host"),
        "select_destinations_calls": timing.get("select_destinations_calls"),
        "scenario_seconds": run.result.get("seconds"),
        "failed_steps": [s["step"] for s in run.result.get("failed_steps", [])],
    }


def side_by_side(nova: Run, ours: Run, notes: list[str] | None = None) -> dict[str, Any]:
    """The figures of a run through Nova's scheduler and one through actorsched."""
    out = {
        "servers": nova.steps.get("boot", {}).get("detail", {}).get("servers"),
        "computes": len(nova.result.get("environment", {}).get("computes", {})),
        "nova": _figures(nova),
        "actorsched": _figures(ours),
        "note": nova.result.get("timing", {}).get("note"),
    }
    mine, theirs = out["actorsched"]["boots_per_second"], out["nova"]["boots_per_second"]
    out["boots_per_second_ratio"] = mine / theirs if mine and theirs else None
    for name, run in (("Nova's scheduler", nova), ("actorsched", ours)):
        if not run.result.get("ok") and notes is not None:
            notes.append(f"Nova boots with {name}: a check failed: {explain(run.result)[:600]}")
    return out


async def boots(nova_python: Path = NOVA_PYTHON, notes: list[str] | None = None) -> dict[str, Any]:
    """Both runs, one after the other, and their figures side by side."""
    why = await asyncio.to_thread(missing, nova_python)
    if why:
        raise RuntimeError(why)
    with tempfile.TemporaryDirectory(prefix="actorsched-nova-boots-") as tmp:
        nova_dir, ours_dir = Path(tmp) / "nova", Path(tmp) / "actorsched"
        nova_dir.mkdir()
        ours_dir.mkdir()
        nova = await run_with_nova(nova_dir, nova_python=nova_python)
        ours = await run_with_actorsched(ours_dir, nova_python=nova_python)
    return side_by_side(nova, ours, notes)


def _cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.nova_boots", description=__doc__)
    parser.add_argument("--nova-python", type=Path, default=NOVA_PYTHON)
    args = parser.parse_args(argv)
    notes: list[str] = []
    print(json.dumps(asyncio.run(boots(args.nova_python, notes)), indent=1))
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
