"""The deployment files: the systemd units, the compose file, the image, the wheel."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from actorsched import cli
from actorsched.settings import load

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


@pytest.mark.parametrize("unit", ["actorsched.service", "actorsched-report.service"])
def test_the_systemd_unit_verifies_and_restarts_on_failure(unit: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not on this machine")
    text = (DEPLOY / unit).read_text()
    assert "\nRestart=" in text
    assert "\nRestartPreventExitStatus=2\n" in text  # bad settings: a restart would not help
    program = shutil.which("actorsched") or str(Path(sys.executable).parent / "actorsched")
    local = tmp_path / unit
    local.write_text(text.replace("/opt/actorsched/bin/actorsched", program))
    done = subprocess.run(
        [analyze, "verify", str(local)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert unit not in done.stderr, done.stderr  # no warning about the unit itself


def test_the_compose_file_runs_a_pair_on_one_journal_and_an_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = (DEPLOY / "compose.yaml").read_text()
    # no default password, no trust: each secret is required from deploy/.env
    assert "guest" not in raw
    assert "trust" not in raw.replace("no trust authentication", "")
    variables = set(re.findall(r"\$\{(\w+):\?[^}]*\}", raw))
    assert variables == {"ACTORSCHED_BROKER_PASSWORD", "ACTORSCHED_DB_PASSWORD"}
    assert len(re.findall(r"\$\{", raw)) == len(re.findall(r"\$\{\w+:\?", raw))
    example = (DEPLOY / "env.example").read_text()
    assert {line.split("=")[0] for line in example.splitlines() if "=" in line} >= variables
    # as compose interpolates them
    text = re.sub(r"\$\{(\w+):\?[^}]*\}", lambda m: f"pw-{m.group(1).lower()}", raw)
    compose: dict[str, Any] = yaml.safe_load(text)
    services = compose["services"]
    for name in ("scheduler-a", "scheduler-b"):  # metrics published on loopback only
        assert all(str(port).startswith("127.0.0.1:") for port in services[name]["ports"])
    assert "ACTORSCHED_METRICS_HOST=0.0.0.0" not in (ROOT / "Dockerfile").read_text()
    assert {"rabbitmq", "postgres", "scheduler-a", "scheduler-b", "agent"} <= set(services)
    pair = [services["scheduler-a"], services["scheduler-b"]]
    assert [s["command"] for s in pair] == [["serve"], ["serve"]]
    journals = {s["environment"]["ACTORSCHED_JOURNAL"] for s in pair}
    assert len(journals) == 1
    assert next(iter(journals)).startswith("postgresql://")  # fail-over needs a shared journal
    assert services["agent"]["command"][0] == "report"
    for service in (*pair, services["agent"]):
        for key in list(os.environ):
            if key.startswith("ACTORSCHED_"):
                monkeypatch.delenv(key)
        for key, value in service["environment"].items():
            monkeypatch.setenv(key, str(value))
        settings = load()  # every value is valid for its setting ...
        known = {key.split(".", 1)[1] for key in settings.sources}
        given = {key.removeprefix("ACTORSCHED_").lower() for key in service["environment"]}
        assert given <= known, given - known  # ... and every variable names one


def test_the_example_settings_file_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("ACTORSCHED_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("ACTORSCHED_CONFIG", str(DEPLOY / "actorsched.toml"))
    settings = load()
    assert settings.service.metrics_port == 9100
    assert settings.agent.traits == ["CUSTOM_SSD"]
    assert settings.sources["scheduler.cpu_allocation_ratio"].startswith("file ")


def test_the_image_is_small_and_not_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users == ["actorsched"]
    assert 'ENTRYPOINT ["actorsched"]' in text
    assert "/healthz" in text
    docker = shutil.which("docker")
    running = docker is not None and (
        subprocess.run([docker, "info"], capture_output=True, check=False).returncode == 0
    )
    if not running:
        pytest.skip("no Docker daemon runs on this machine: the image is not built here")
    assert docker is not None
    tag = "actorsched-test:latest"
    subprocess.run([docker, "build", "-t", tag, str(ROOT)], check=True, timeout=900)
    out = subprocess.run(
        [docker, "run", "--rm", tag, "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("actorsched ")
    who = subprocess.run(
        [docker, "run", "--rm", "--entrypoint", "id", tag, "-u"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert who.stdout.strip() != "0"


@pytest.mark.slow
def test_the_built_wheel_offers_only_commands_that_work(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        timeout=600,
    )
    (wheel,) = wheels.glob("actorsched-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    # the license travels in the wheel, and the index learns what the project is
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert b"License-Expression: Apache-2.0" in metadata
    assert b"Classifier: Topic :: System :: Distributed Computing" in metadata
    assert "actorsched/__main__.py" in names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the wheel unpacked into the fresh venv; its dependencies read from this one's
    # site-packages (listed after the venv's own, and without this one's editable hook)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            purelib,
            str(wheel),
        ],
        check=True,
        timeout=600,
    )
    Path(purelib, "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run = [str(python), "-c", "import sys; from actorsched.cli import main; sys.exit(main())"]
    # the tests' own PYTHONPATH points at this tree: the wheel's venv must not see it
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    where = subprocess.run(
        [str(python), "-c", "import actorsched; print(actorsched.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=clean,
    )
    assert where.stdout.startswith(purelib), where.stdout
    module = subprocess.run(  # python -m actorsched is the same command line
        [str(python), "-m", "actorsched", "--version"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env=clean,
    )
    assert module.stdout.startswith("actorsched "), module
    top = subprocess.run(
        [*run, "--help"], capture_output=True, text=True, check=True, cwd=tmp_path, env=clean
    )
    # a long name has its help on the next line
    listed = [name for name in cli.commands() if re.search(rf"^    {name}( |$)", top.stdout, re.M)]
    assert "bench" not in top.stdout  # benchmarks/ is not in the wheel
    assert set(listed) == set(cli.commands()) - {"bench"}
    for name in listed:
        done = subprocess.run(
            [*run, name, "--help"],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
            env=clean,
        )
        assert done.returncode == 0, (name, done.stderr)
        assert done.stdout.startswith("usage: ")


@pytest.mark.parametrize("unit", ["actorsched.service", "actorsched-report.service"])
def test_the_systemd_unit_exposes_at_most_2_5(unit: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not on this machine")
    done = subprocess.run(
        [analyze, "security", "--offline=yes", "--threshold=25", str(DEPLOY / unit)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    # --threshold=25 (tenths): exit 0 only at 2.5 or under
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (line,) = [x for x in done.stdout.splitlines() if "Overall exposure level" in x]
    assert float(line.split(":")[1].split()[0]) <= 2.5, line
