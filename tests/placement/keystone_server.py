"""A real OpenStack Keystone (keystone 30.0.0, Nova 34's cycle) on 127.0.0.1.

Run it with the Python of Nova's venv (``make nova-venv`` installs Keystone there
beside Nova and Placement); actorsched never imports it::

    .venv-nova/bin/python tests/placement/keystone_server.py --state-dir DIR
        [--port N] [--expiration SECONDS]

On the first start in ``DIR`` it writes ``keystone.conf`` (SQLite in ``DIR``,
Fernet tokens lasting ``--expiration`` seconds, keys in ``DIR``) and runs
``keystone-manage db_sync``, ``fernet_setup``, ``credential_setup`` and
``bootstrap``: the ``admin`` user (password from ``KEYSTONE_ADMIN_PASSWORD``,
``s3cret`` when unset) with the ``admin`` role on project ``admin`` of domain
``Default``, and this server as the identity endpoint (public, internal and
admin). Then it serves Keystone's own WSGI application (``keystone.server.wsgi``)
with the standard library's HTTP server, prints ``READY http://127.0.0.1:PORT/v3``
and runs until it is killed (SIGTERM or SIGINT end it cleanly).
"""

from __future__ import annotations

import argparse
import importlib
import os
import socket
import subprocess
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from placement_server import serve_until_signalled  # beside this file


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _setup(state: Path, port: int, expiration: int, password: str) -> Path:
    conf = state / "keystone.conf"
    conf.write_text(
        "[database]\n"
        f"connection = sqlite:///{state / 'keystone.sqlite'}\n"
        "[token]\n"
        "provider = fernet\n"
        f"expiration = {expiration}\n"
        "[fernet_tokens]\n"
        f"key_repository = {state / 'fernet-keys'}\n"
        "[credential]\n"
        f"key_repository = {state / 'credential-keys'}\n"
    )
    manage = str(Path(sys.executable).with_name("keystone-manage"))
    user = ["--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid())]
    for step in (
        ["db_sync"],
        ["fernet_setup", *user],
        ["credential_setup", *user],
        [
            "bootstrap",
            "--bootstrap-password",
            password,
            # one URL for each interface (keystonemiddleware asks for internal)
            "--bootstrap-public-url",
            f"http://127.0.0.1:{port}/v3",
            "--bootstrap-internal-url",
            f"http://127.0.0.1:{port}/v3",
            "--bootstrap-admin-url",
            f"http://127.0.0.1:{port}/v3",
        ],
    ):
        subprocess.run(
            [manage, "--config-file", str(conf), *step],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=sys.stderr,
        )
    (state / "port").write_text(str(port))
    return conf


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--expiration", type=int, default=3600, help="token lifetime, seconds")
    args = parser.parse_args(argv)
    state = Path(args.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    conf = state / "keystone.conf"
    if conf.exists():
        port = args.port or int((state / "port").read_text())
    else:
        port = args.port or _free_port()
        password = os.environ.get("KEYSTONE_ADMIN_PASSWORD", "s3cret")
        conf = _setup(state, port, args.expiration, password)
    os.environ["OS_KEYSTONE_CONFIG_FILES"] = str(conf)
    sys.argv[1:] = []  # Keystone's app parses the command line as its own options
    # Nova's venv only: imported by name (our mypy has no keystone), after the
    # variable, which it reads
    wsgi: Any = importlib.import_module("keystone.server.wsgi")
    app = wsgi.initialize_public_application()
    server = make_server("127.0.0.1", port, app, server_class=_Server, handler_class=_Quiet)
    serve_until_signalled(server, f"http://127.0.0.1:{port}/v3")


if __name__ == "__main__":
    main()
