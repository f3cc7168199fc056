"""A real Placement server for a test module: start it, kill it, start it again.

Each test module of ``tests/placement`` defines its own module-scoped fixture
with :func:`running_placement` (not a ``conftest.py``: a second module named
``conftest`` would shadow ``tests/conftest.py``, see there). The server is
``placement_server.py`` under Nova's venv (``make nova-venv`` installs
openstack-placement beside Nova); without that venv, or without Placement in
it, :func:`placement_missing` says why and the tests skip. A server that is
there but does not start fails the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOVA_PYTHON = Path(os.environ.get("ACTORSCHED_NOVA_PYTHON", ROOT / ".venv-nova" / "bin" / "python"))
SERVER = Path(__file__).with_name("placement_server.py")
_START_TIMEOUT = 120.0  # seconds for the first start (migrations on a fresh database)
_STOP_TIMEOUT = 10.0


@cache
def placement_missing() -> str | None:
    """Why Placement cannot run here (None: it can)."""
    if not NOVA_PYTHON.exists():
        return (
            f"Nova 34's venv is missing ({NOVA_PYTHON}): `make nova-venv` makes it "
            "(nova and openstack-placement); it could not be made here"
        )
    failed = import_error(NOVA_PYTHON, ("placement.deploy",))
    if failed:
        return (
            f"openstack-placement is not in Nova's venv ({NOVA_PYTHON}): `make nova-venv` "
            f"installs it ({failed})"
        )
    return None


def import_error(python: Path, modules: tuple[str, ...]) -> str | None:
    """The last line of what ``python -c "import <modules>"`` says when it fails, or None."""
    probe = subprocess.run(
        [str(python), "-c", f"import {', '.join(modules)}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["import failed"])[-1]


class PlacementServer:
    """One ``placement_server.py`` process on 127.0.0.1, its database in ``state_dir``."""

    def __init__(
        self, state_dir: Path, *, chunked: bool = False, keystone_url: str | None = None
    ) -> None:
        self.state_dir = state_dir
        self.chunked = chunked
        self.keystone_url = keystone_url
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (on the port it had, after the first start) and wait for READY."""
        self._starts += 1
        out = self.state_dir / f"stdout-{self._starts}.log"
        err = self.state_dir / f"stderr-{self._starts}.log"
        args = [str(NOVA_PYTHON), str(SERVER), "--state-dir", str(self.state_dir)]
        args += ["--port", str(self.port)] + (["--chunked"] if self.chunked else [])
        args += ["--keystone-url", self.keystone_url] if self.keystone_url else []
        with out.open("wb") as stdout, err.open("wb") as stderr:
            self.process = subprocess.Popen(args, stdout=stdout, stderr=stderr)
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            text = out.read_text()
            if text.startswith("READY "):
                self.port = int(text.split()[1].rpartition(":")[2])
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"Placement did not start ({' '.join(args)}); its stderr ends:\n"
            + "\n".join(err.read_text().splitlines()[-20:])
        )

    def kill(self) -> None:
        """``kill -9`` it and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(_STOP_TIMEOUT)

    def pause(self) -> None:
        """SIGSTOP: it still accepts connections (the kernel does) but answers nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()


@contextmanager
def running_placement(
    state_dir: Path, *, chunked: bool = False, keystone_url: str | None = None
) -> Iterator[PlacementServer]:
    """A started :class:`PlacementServer` (behind ``keystone_url``'s Keystone when
    given), stopped (or killed) afterwards."""
    server = PlacementServer(state_dir, chunked=chunked, keystone_url=keystone_url)
    server.start()
    try:
        yield server
    finally:
        server.stop()
