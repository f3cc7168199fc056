"""A real OpenStack Placement (openstack-placement 16.0.0, Nova 34's cycle) on 127.0.0.1.

Run it with the Python of Nova's venv (``make nova-venv`` installs Placement
there); actorsched never imports it::

    .venv-nova/bin/python tests/placement/placement_server.py [--port N]
        [--database URL | --state-dir DIR] [--chunked]

* ``--port N``: the port to listen on (0, the default: a free one). Give the
  port it had to start it again where clients already point.
* ``--state-dir DIR``: keep the database in ``DIR/placement.sqlite`` (created
  and migrated on the first start, reused on the next: killed and started
  again it has what it had). Without it, a fresh temporary directory.
* ``--database URL``: an SQLAlchemy URL instead, e.g.
  ``postgresql+psycopg2://postgres@127.0.0.1:5432/test`` (a driver must be in
  the venv).
* ``--chunked``: send every response body with ``Transfer-Encoding: chunked``
  instead of a ``Content-Length``.
* ``--keystone-url URL``: ``auth_strategy = keystone``, Keystone's auth_token
  middleware checking each token with the Keystone at ``URL``
  (``keystone_server.py``), as its ``admin`` (``KEYSTONE_ADMIN_PASSWORD``).

When it answers it prints one line to stdout, ``READY http://127.0.0.1:PORT``,
and then runs until it is killed (SIGTERM or SIGINT end it cleanly).

Authentication is ``[api] auth_strategy = noauth2``: send ``X-Auth-Token:
admin`` (Placement's noauth2 reads the token as ``user[:project]``; ``admin``
gets the admin role). The HTTP server is the standard library's, speaking
HTTP/1.1 with keep-alive, a thread per connection; requests reach the WSGI
app one at a time (SQLite has one writer), which is also what makes the
figures of a benchmark repeatable.
"""

from __future__ import annotations

import argparse
import importlib
import io
import logging
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

# Nova's venv only. Imported by name: for mypy, run from our venv over tests/,
# ``placement`` is this directory (a namespace package), not openstack-placement.
cfg: Any = importlib.import_module("oslo_config.cfg")
placement_conf: Any = importlib.import_module("placement.conf")
db_api: Any = importlib.import_module("placement.db_api")
deploy: Any = importlib.import_module("placement.deploy")

_CHUNK = 4096  # bytes per chunk with --chunked: a listing spans many
_MAX_BODY = 64 * 1024 * 1024  # the largest request body accepted

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def make_app(database_url: str, keystone: str | None = None) -> WSGIApp:
    """Placement's WSGI app on ``database_url``, its schema migrated (``db sync``);
    behind Keystone's auth_token middleware when ``keystone`` (an auth URL) is given."""
    config = cfg.ConfigOpts()
    placement_conf.register_opts(config)
    files = []
    if keystone:
        # [keystone_authtoken] as a deployment's placement.conf has it: every token is
        # checked with Keystone, as the admin of keystone_server.py's bootstrap
        conf = os.path.join(tempfile.mkdtemp(prefix="placement-conf-"), "placement.conf")
        with open(conf, "w", encoding="utf-8") as file:
            file.write(
                "[keystone_authtoken]\n"
                f"www_authenticate_uri = {keystone}\n"
                f"auth_url = {keystone}\n"
                "auth_type = password\n"
                "username = admin\n"
                f"password = {os.environ.get('KEYSTONE_ADMIN_PASSWORD', 's3cret')}\n"
                "user_domain_name = Default\n"
                "project_name = admin\n"
                "project_domain_name = Default\n"
                # no cache of checked tokens: a revoked one is refused at once
                "token_cache_time = -1\n"
            )
        files.append(conf)
    config.set_override("auth_strategy", "keystone" if keystone else "noauth2", group="api")
    config.set_override("connection", database_url, group="placement_database")
    # loadapp runs the migrations to head (placement-manage db sync) when set
    config.set_override("sync_on_startup", True, group="placement_database")
    if database_url.startswith("sqlite"):
        # a test database: no fsync per commit
        config.set_override("sqlite_synchronous", False, group="placement_database")
    config([], project="placement", default_config_files=files)
    db_api.configure(config)
    app: WSGIApp = deploy.loadapp(config)
    return app


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uwsgi or Apache serve Placement
    server_version = "placement-test"
    # headers and body go out in separate writes: without this, Nagle holds the
    # body back until the client's delayed ACK (40 ms a call)
    disable_nagle_algorithm = True
    app: WSGIApp
    lock: threading.Lock
    chunked: bool

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the test output

    def _wsgi(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self.send_error(413, f"request body over {_MAX_BODY} bytes")
            return
        body = self.rfile.read(length) if length else b""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, "latin-1"),
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length) if length else "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": str(getattr(self.server, "server_port", "")),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for key, value in self.headers.items():
            name = key.upper().replace("-", "_")
            if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                environ[f"HTTP_{name}"] = value
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
            answer["status"], answer["headers"] = status, headers
            return lambda data: None

        with self.lock:
            result = self.app(environ, start_response)
            try:
                payload = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        code, _, reason = answer["status"].partition(" ")
        self.send_response(int(code), reason)
        for key, value in answer["headers"]:
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        no_body = self.command == "HEAD" or int(code) in (204, 304)
        if no_body:
            self.end_headers()
        elif self.chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for at in range(0, len(payload), _CHUNK):
                piece = payload[at : at + _CHUNK]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = _wsgi


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir")
    parser.add_argument("--database")
    parser.add_argument("--chunked", action="store_true")
    parser.add_argument(
        "--keystone-url",
        help="check tokens with this Keystone (auth_strategy = keystone) instead of noauth2",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.database:
        url = args.database
    else:
        state = args.state_dir or tempfile.mkdtemp(prefix="placement-")
        os.makedirs(state, exist_ok=True)
        url = f"sqlite:///{os.path.join(state, 'placement.sqlite')}"
    handler = type(
        "Handler",
        (_Handler,),
        {
            "app": make_app(url, args.keystone_url),
            "lock": threading.Lock(),
            "chunked": args.chunked,
        },
    )
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    serve_until_signalled(server, f"http://127.0.0.1:{server.server_address[1]}")


def serve_until_signalled(server: Any, url: str) -> None:
    """Print ``READY url`` and serve until SIGTERM or SIGINT (``keystone_server.py`` too)."""

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"READY {url}", flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()


if __name__ == "__main__":
    main()
