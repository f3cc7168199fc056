"""The acceptance test of the whole project: Nova 34's own functional environment, end to end.

``scenario.py`` (run in Nova's venv, ``.venv-nova``) builds Nova's functional
test environment (its API, conductor and 20 fake-driver computes of mixed sizes)
on the real RabbitMQ (a vhost of its own, deleted after) with Placement over
real HTTP, boots 50 servers at once until NoValidHost, resizes, migrates
(confirm, revert), evacuates a forced-down host and deletes everything,
checking servers, Placement usages, capacity and server groups after each
step. It prints one JSON document (``RESULT {...}``).

* ``--scheduler nova``: Nova's own scheduler service. Proves the harness: every
  check must pass.
* ``--scheduler external``: Nova's scheduler is not started; ``actorsched serve
  --nova-config --placement-url`` answers on the bus, follows the run's
  Placement for host state and writes each claim to it before it answers.
  Placement does not hold the hypervisor facts (``supported_instances``, which
  ImagePropertiesFilter reads for the fake image's ``hw_architecture``): the
  scenario writes them to ``host_facts.json`` and serve reads that file
  (``[nova] placement_host_facts``). No host report is sent on actorsched's
  native queue: usage, instances and disabled services come from Placement,
  and the down source of the evacuation is in ``ignore_hosts``. Every check
  must pass.

The run through Nova's own scheduler takes 2.5 minutes on this idle 2-vCPU
machine (twice as long loaded); the external one about 2 minutes (its 50
boots in 32 s; all of Nova in one eventlet thread): the module takes about 5.
``tests/nova_functional/NOTES.md`` says how the harness works.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOVA_PYTHON = Path(os.environ.get("ACTORSCHED_NOVA_PYTHON", ROOT / ".venv-nova" / "bin" / "python"))
NOVA_READY = NOVA_PYTHON.parent.parent / ".installed"
SCENARIO = Path(__file__).with_name("scenario.py")
# what nova.test needs beyond `pip install nova` (Nova's test-requirements.txt, in
# part; openstack-placement for PlacementFixture)
TEST_REQUIREMENTS = ("oslotest", "testtools", "wsgi_intercept", "placement")

pytestmark = [pytest.mark.amqp, pytest.mark.slow]
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
# seconds the external run may take from the go (a diagnosis by hand may want longer)
EXTERNAL_WITHIN = float(os.environ.get("ACTORSCHED_NF_EXTERNAL_WITHIN", "200"))


def _missing() -> str | None:
    if not NOVA_READY.exists():
        return (
            f"Nova 34's venv is missing ({NOVA_PYTHON}): `make nova-venv` makes it "
            "(pip install nova==34.0.0)"
        )
    probe = subprocess.run(
        [str(NOVA_PYTHON), "-c", f"import {', '.join(TEST_REQUIREMENTS)}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if probe.returncode != 0:
        return (
            "Nova's functional tests need more than nova in its venv: "
            f"{NOVA_PYTHON.parent / 'pip'} install -r {SCENARIO.with_name('requirements.txt')} "
            f"({(probe.stderr.strip().splitlines() or ['import failed'])[-1]})"
        )
    if subprocess.run(["which", "rabbitmqctl"], capture_output=True, check=False).returncode:
        return "rabbitmqctl is not on PATH: the scenario makes a vhost of its own with it"
    return None


MISSING = _missing()
if not MISSING and not os.environ.get("ACTORSCHED_NOVA_FUNCTIONAL"):
    # two whole runs of Nova's environment take 5 minutes on an idle 2-vCPU machine and
    # over 13 on a loaded one: not yet in `make test`'s budget (see the README)
    MISSING = (
        "Nova's functional environment runs only when asked: `make test-nova-functional` "
        "(ACTORSCHED_NOVA_FUNCTIONAL=1)"
    )
if MISSING:
    pytest.skip(MISSING, allow_module_level=True)


def _drop_vhosts(stdout: str | bytes | None) -> None:
    """Delete the vhost of a scenario that was killed before it could (its VHOST line)."""
    text = stdout.decode() if isinstance(stdout, bytes) else stdout or ""
    for line in text.splitlines():
        if line.startswith("VHOST "):
            subprocess.run(
                ["rabbitmqctl", "delete_vhost", line.split()[1]],
                capture_output=True,
                timeout=60,
                check=False,
            )


def _result(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the scenario printed no RESULT:\n{stdout[-3000:]}"
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def _explain(result: dict[str, Any]) -> str:
    """What failed and where, for the assertion message."""
    return json.dumps(
        {
            "failed_steps": result.get("failed_steps"),
            "harness_errors": result.get("harness_errors"),
            "setup_error": result.get("setup_error"),
            "external": result.get("external", {}).get("error"),
        },
        indent=1,
    )[:6000]


@pytest.mark.timeout(570)
def test_nova_functional_scenario_passes_with_novas_own_scheduler(tmp_path: Path) -> None:
    command = [
        str(NOVA_PYTHON),
        str(SCENARIO),
        "--scheduler",
        "nova",
        "--workdir",
        str(tmp_path),
        "--log-file",
        str(tmp_path / "nova.log"),
    ]
    try:
        run = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=540,  # ~150 s on an idle 2-vCPU machine, 360 s at load average 6
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        _drop_vhosts(exc.stdout)
        raise
    result = _result(run.stdout)
    (tmp_path / "result.json").write_text(json.dumps(result, indent=1))
    assert result["ok"], _explain(result)
    assert run.returncode == 0
    steps = {s["step"]: s for s in result["steps"]}
    assert list(steps) == list(STEPS)
    boot = steps["boot"]["detail"]
    assert boot["servers"] == 50
    assert boot["reached_no_valid_host"]  # the cloud was filled
    assert boot["active"] + boot["no_valid_host"] == 50
    assert steps["delete"]["check"]["servers"] == 0
    assert result["environment"]["transport_url"].startswith("rabbit://")
    assert result["environment"]["placement_url"].startswith("http://127.0.0.1:")
    timing = result["timing"]
    assert timing["boots_per_second"] > 0
    assert 0 < timing["scheduler_share_of_boot"] < 1


# -- the external run -----------------------------------------------------------------


async def _read_until_ready(stream: asyncio.StreamReader, out: list[str]) -> dict[str, Any]:
    while line := (await asyncio.wait_for(stream.readline(), timeout=120)).decode():
        out.append(line)
        if line.startswith("READY "):
            ready: dict[str, Any] = json.loads(line[len("READY ") :])
            return ready
    raise AssertionError("the scenario exited before READY:\n" + "".join(out)[-3000:])


async def _drain(stream: asyncio.StreamReader | None, into: list[str], echo: bool = False) -> None:
    while stream is not None and (line := await stream.readline()):
        into.append(line.decode())
        if echo and line.startswith(b"STEP "):
            print(line.decode(), end="", flush=True)


@pytest.mark.timeout(280)
async def test_nova_functional_scenario_with_actorsched_as_novas_scheduler(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import code_under_test_env

    go = tmp_path / "go"
    scenario = await asyncio.create_subprocess_exec(
        str(NOVA_PYTHON),
        str(SCENARIO),
        "--scheduler",
        "external",
        "--workdir",
        str(tmp_path),
        "--go-file",
        str(go),
        "--wait-timeout",
        "60",
        "--step-timeout",
        "45",
        "--log-file",
        str(tmp_path / "nova.log"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 24,  # the RESULT line is one JSON document of ~100 KB
    )
    assert scenario.stdout is not None
    out: list[str] = []
    serve: asyncio.subprocess.Process | None = None
    serve_log: list[str] = []
    try:
        ready = await _read_until_ready(scenario.stdout, out)
        queue = f"actorsched-nf-{tmp_path.name[-12:]}"
        serve = await asyncio.create_subprocess_exec(
            str(ROOT / ".venv" / "bin" / "actorsched"),
            "serve",
            "--nova-config",
            ready["nova_conf"],
            "--amqp-url",
            ready["amqp_url"],
            "--queue",
            queue,
            "--placement-url",
            ready["placement_url"],
            "--no-journal",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={
                **code_under_test_env(),
                "ACTORSCHED_NOVA_CELL_UUID": ready["cell_uuid"],
                # the hypervisor facts Placement does not hold (supported_instances ...)
                "ACTORSCHED_NOVA_PLACEMENT_HOST_FACTS": ready["host_facts_json"],
            },
        )
        assert serve.stderr is not None
        while "ready" not in (
            line := (await asyncio.wait_for(serve.stderr.readline(), 30)).decode()
        ):
            assert line, "serve exited before it was ready:\n" + "".join(serve_log)
            serve_log.append(line)
        drain = asyncio.create_task(_drain(serve.stderr, serve_log))
        go.touch()
        await asyncio.wait_for(_drain(scenario.stdout, out, echo=True), timeout=EXTERNAL_WITHIN)
        await asyncio.wait_for(scenario.wait(), timeout=30)
        drain.cancel()
    finally:
        for process in (scenario, serve):
            if process is not None and process.returncode is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), 15)
                except TimeoutError:
                    process.kill()
                    await process.wait()
        if not any(line.startswith("RESULT ") for line in out):
            _drop_vhosts("".join(out))  # killed before its own clean-up
    (tmp_path / "serve.log").write_text("".join(serve_log))
    result = _result("".join(out))
    (tmp_path / "result.json").write_text(json.dumps(result, indent=1))
    assert result.get("external", {}).get("consumers"), _explain(result)
    # serve's own lines (not the client library's reconnects once the vhost is gone)
    said = [line for line in serve_log if line.split(" ")[2:3] and "aio" not in line[:60]]
    assert result["ok"], _explain(result) + "\nserve:\n" + "".join(said)[-3000:]
    assert scenario.returncode == 0
    steps = {s["step"]: s for s in result["steps"]}
    assert all(s["ok"] for s in steps.values()), _explain(result)
    assert list(steps) == list(STEPS)
    boot = steps["boot"]["detail"]
    assert boot["servers"] == 50
    assert boot["reached_no_valid_host"]  # the cloud was filled, through actorsched
    assert boot["active"] + boot["no_valid_host"] == 50
    assert steps["delete"]["check"]["servers"] == 0
    assert result["timing"]["select_destinations_calls"] >= 45
    assert result["timing"]["nova_scheduler_manager_seconds_total"] == 0  # not Nova's
