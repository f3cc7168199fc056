"""A PostgreSQL cluster and a RabbitMQ node of the test run's own, for the tests that fault them.

The machine's own PostgreSQL (127.0.0.1:5432) and RabbitMQ (127.0.0.1:5672) are
shared: a test may make queues, vhosts and shards of its own there and kill its
own connections, but never restart, stop or reconfigure them, nor cut anybody
else's connections. A test that restarts the database or closes every broker
connection does it to the private servers started here instead:

* :class:`PrivatePostgres`: ``initdb`` into a temporary directory (as the
  ``postgres`` OS user when we are root: initdb refuses root), listening on
  127.0.0.1 on a free port and on a Unix socket in that directory, ``trust``
  for the superuser ``postgres`` from there only, ``ssl = on`` with a
  certificate for 127.0.0.1 and localhost signed by a CA made here with
  ``openssl`` (:attr:`PrivatePostgres.ca_cert`; :attr:`~PrivatePostgres.wrong_ca_cert`
  is another CA, for the tests of a failing verification). Database ``test``.
  Started, restarted and stopped with ``pg_ctl -D <its directory>``.
* :class:`PrivateRabbit`: ``rabbitmq-server`` (the real script, not Debian's
  ``/usr/sbin`` wrapper, which ``su``s to the ``rabbitmq`` user and ``cd``s to
  /var/lib/rabbitmq: that user cannot write a root-owned temporary directory,
  so a node started that way dies at once with
  ``failed_to_create_feature_flags_file_directory``, silently with
  ``-detached``) with its node name, AMQP port, distribution port, data, logs,
  plugins file (none) and configuration in a temporary directory; its own
  ``HOME`` and so its own Erlang cookie (a ``rabbitmqctl`` that forgets ``-n``
  cannot even authenticate to the machine's node), and its own ``epmd`` on a
  free port (nothing is registered with the machine's). Waited for, faulted and
  stopped with ``rabbitmqctl -n <its node>``: :meth:`PrivateRabbit.ctl`;
  :meth:`PrivateRabbit.close_all_on_cue` closes every connection the moment it is
  cued (its rabbitmqctl, seconds to start, is started beforehand).

Each starts once per test session, on first use (the fixtures
``private_postgres`` and ``private_rabbitmq``), and stops at its end;
a watchdog process stops it and deletes its directory should the test process
die first. When one cannot start here, the tests that need it skip, saying why.

Not a conftest: a test module imports the fixture it needs (``from servers import
private_postgres_fixture  # noqa: F401``, then asks for ``private_postgres``).
Importing it into several modules makes one fixture per module, but all share
the one server of the session.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import psycopg
import pytest

__all__ = [
    "PrivatePostgres",
    "PrivateRabbit",
    "ServerUnavailable",
    "free_port",
    "private_postgres_fixture",
    "private_rabbitmq_fixture",
]

START_TIMEOUT = 120.0  # a loaded two-CPU machine boots RabbitMQ in 10-40 s


class ServerUnavailable(Exception):
    """A private server cannot be started here; the message says why."""


def free_port(avoid: tuple[int, ...] = ()) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (and not one of ``avoid``)."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port not in avoid:
            return port


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path})"


def _run(argv: list[str], *, what: str, timeout: float = 60.0, **kw: Any) -> str:
    """Run ``argv``; its stdout. Any failure is :class:`ServerUnavailable` naming ``what``."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, **kw
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerUnavailable(f"{what}: {exc}") from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-800:]
        raise ServerUnavailable(f"{what}: {argv[0]} exited {done.returncode}: {said}")
    return str(done.stdout)


# -- a watchdog: the server goes when the test process goes --------------------------------

_WATCHDOG = """
import json, os, shutil, signal, subprocess, sys, time
plan = json.loads(sys.argv[1])
if sys.stdin.read():  # the test process said it stopped the server itself
    sys.exit(0)
for argv in plan["commands"]:  # EOF without a word: the test process died
    try:
        subprocess.run(argv, env=plan["env"], timeout=30, capture_output=True, check=False)
    except Exception:
        pass
for pid in plan["groups"]:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
time.sleep(0.5)
shutil.rmtree(plan["remove"], ignore_errors=True)
"""


def _watchdog(
    commands: list[list[str]], env: dict[str, str], groups: list[int], remove: Path
) -> subprocess.Popen[str]:
    """A process that runs ``commands`` (in ``env``), kills process ``groups`` and deletes
    ``remove`` once our end of its stdin closes without a word (we died). :func:`_dismiss`
    sends the word."""
    plan = {"commands": commands, "env": env, "groups": groups, "remove": str(remove)}
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, json.dumps(plan)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # a ^C to the test's process group does not reach it
    )


def _dismiss(watchdog: subprocess.Popen[str] | None) -> None:
    if watchdog is None or watchdog.stdin is None:
        return
    with contextlib.suppress(OSError):
        watchdog.stdin.write("stopped\n")
        watchdog.stdin.close()
    try:
        watchdog.wait(10)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


# -- PostgreSQL -----------------------------------------------------------------------------


def postgres_bindir() -> Path:
    """Where initdb, pg_ctl and postgres are: $ACTORSCHED_TEST_PG_BINDIR, the PATH, or the
    newest /usr/lib/postgresql/<version>/bin (Debian keeps them off the PATH)."""
    if chosen := os.environ.get("ACTORSCHED_TEST_PG_BINDIR"):
        if not (Path(chosen) / "initdb").exists():
            raise ServerUnavailable(f"no initdb in ACTORSCHED_TEST_PG_BINDIR={chosen}")
        return Path(chosen)
    if found := shutil.which("initdb"):
        return Path(found).resolve().parent
    debian = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()]
    if not debian:
        raise ServerUnavailable(
            "no initdb: not on the PATH, none in /usr/lib/postgresql/*/bin, "
            "ACTORSCHED_TEST_PG_BINDIR not set"
        )
    return max(debian, key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()])


def _server_user() -> str | None:
    """The OS user the private cluster runs as: ``postgres`` when we are root (initdb
    refuses root; we run it with ``runuser``), else ourselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServerUnavailable(
            "running as root and there is no 'postgres' OS user to run initdb as"
        ) from None
    if shutil.which("runuser") is None:
        raise ServerUnavailable("running as root and there is no runuser to run initdb as postgres")
    return "postgres"


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def make_certificates(where: Path) -> tuple[Path, Path, Path, Path]:
    """A CA, a server certificate it signed for 127.0.0.1 and localhost, its key, and
    another CA that signed nothing: (ca.crt, server.crt, server.key, wrong-ca.crt)."""
    if shutil.which("openssl") is None:
        raise ServerUnavailable("no openssl to make the server's certificate")
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca_ext = ["-addext", "basicConstraints=critical,CA:TRUE"]
    ca_ext += ["-addext", "keyUsage=critical,keyCertSign,cRLSign"]
    for name, subject in (("ca", "actorsched test CA"), ("wrong-ca", "actorsched other CA")):
        _run(
            [
                *("openssl", "req", "-x509", *curve),
                *("-keyout", f"{name}.key", "-out", f"{name}.crt"),
                *("-days", "7", "-subj", f"/CN={subject}", *ca_ext),
            ],
            what=f"openssl: the {name} certificate",
            cwd=where,
        )
    (where / "server.ext").write_text(
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
        "basicConstraints = CA:FALSE\n"
        "keyUsage = critical, digitalSignature, keyEncipherment\n"
        "extendedKeyUsage = serverAuth\n"
    )
    _run(
        [
            *("openssl", "req", "-new", *curve),
            *("-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"),
        ],
        what="openssl: the server's key",
        cwd=where,
    )
    _run(
        [
            *("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key"),
            *("-set_serial", "1", "-days", "7", "-extfile", "server.ext", "-out", "server.crt"),
        ],
        what="openssl: the server's certificate",
        cwd=where,
    )
    for secret in ("ca.key", "wrong-ca.key", "server.csr"):
        (where / secret).unlink()
    return where / "ca.crt", where / "server.crt", where / "server.key", where / "wrong-ca.crt"


@dataclass
class PrivatePostgres:
    """A PostgreSQL cluster of this test run's own; :meth:`start` makes one."""

    root: Path  # data/, its log, its Unix socket, its certificates
    bindir: Path
    port: int
    user: str | None  # the OS user it runs as (None: ourselves)
    ca_cert: Path | None = None  # signed the server's certificate (None: no TLS here)
    wrong_ca_cert: Path | None = None  # signed nothing the server has
    no_tls: str = ""  # why there is no TLS, when there is none
    started_in: float = 0.0  # seconds from nothing to accepting connections
    watchdog: subprocess.Popen[str] | None = field(default=None, repr=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgresql.log"

    @property
    def url(self) -> str:
        """Database ``test`` as ``postgres`` over TCP, sslmode left to libpq (``prefer``:
        TLS, since the server has it; ``?sslmode=disable`` for none)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/test"

    def tls_url(self, sslmode: str = "verify-full", rootcert: Path | None = None) -> str:
        """:attr:`url` with ``sslmode`` and ``sslrootcert`` (the private CA by default)."""
        cert = rootcert or self.ca_cert
        assert cert is not None, self.no_tls
        return f"{self.url}?sslmode={sslmode}&sslrootcert={quote(str(cert))}"

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement on database ``test`` (autocommit); its rows, if any."""
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []

    def _argv(self, *argv: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else list(argv)

    def _pg_ctl(self, *args: str, timeout: float = 60.0) -> str:
        # -l: the postmaster writes to its log, never to our pipe (we would wait on it)
        pg_ctl = str(self.bindir / "pg_ctl")
        try:
            return _run(
                self._argv(pg_ctl, "-D", str(self.data), "-l", str(self.log), *args),
                what=f"pg_ctl {args[-1]}",
                timeout=timeout,
                env={**os.environ, "LC_ALL": "C"},
            )
        except ServerUnavailable as exc:
            raise ServerUnavailable(f"{exc}\n{self.log}:\n{_tail(self.log, 10)}") from None

    def is_up(self) -> bool:
        try:
            with psycopg.connect(self.url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def restart(self) -> float:
        """``pg_ctl restart -m fast``: every session is cut, as by a server restart; the
        seconds it took (down and back up, accepting connections)."""
        began = time.monotonic()
        self._pg_ctl("-m", "fast", "-w", "-t", "60", "restart")
        return time.monotonic() - began

    async def restart_async(self) -> float:
        return await asyncio.to_thread(self.restart)

    def ensure_up(self) -> None:
        """Started again if a test left it down."""
        if not self.is_up():
            self._pg_ctl("-w", "-t", "60", "start")

    def stop(self) -> None:
        """Stop it (fast, then immediate) and delete its directory."""
        if not self.data.exists():
            return
        try:
            self._pg_ctl("-m", "fast", "-w", "-t", "30", "stop")
        except ServerUnavailable:
            with contextlib.suppress(ServerUnavailable):
                self._pg_ctl("-m", "immediate", "-w", "-t", "30", "stop")
        _dismiss(self.watchdog)
        shutil.rmtree(self.root, ignore_errors=True)

    @classmethod
    def start(cls) -> PrivatePostgres:
        """initdb, certificates, configuration, pg_ctl start, CREATE DATABASE test."""
        began = time.monotonic()
        bindir = postgres_bindir()
        user = _server_user()
        root = Path(tempfile.mkdtemp(prefix="actorsched-pg-"))
        _chown(root, user)
        server = cls(root, bindir, free_port(), user)
        try:
            server._make(began)
        except BaseException:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)
            raise
        return server

    def _make(self, began: float) -> None:
        root, data = self.root, self.data
        _run(
            self._argv(
                *(str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"),
                *("-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"),
            ),
            what="initdb",
            timeout=120,
            env={**os.environ, "LC_ALL": "C"},
        )
        # trust: the superuser, from this host only (TCP on 127.0.0.1, the socket in root/,
        # which only its owner can enter); nothing else may connect
        (data / "pg_hba.conf").write_text(
            "local all postgres trust\nhost all postgres 127.0.0.1/32 trust\n"
        )
        settings = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{root}'",
            "fsync = off",  # only an OS crash would need it; restarts are clean
            "shared_buffers = 32MB",
            "max_connections = 100",
        ]
        try:
            ca, cert, key, wrong = make_certificates(root)
        except ServerUnavailable as exc:
            self.no_tls = str(exc)
        else:
            for path in (ca, cert, key, wrong):
                _chown(path, self.user)
            key.chmod(0o600)
            settings += ["ssl = on", f"ssl_cert_file = '{cert}'", f"ssl_key_file = '{key}'"]
            self.ca_cert, self.wrong_ca_cert = ca, wrong
        with (data / "postgresql.conf").open("a") as conf:
            conf.write("\n# actorsched tests: a private cluster\n" + "\n".join(settings) + "\n")
        self._pg_ctl("-w", "-t", "60", "start")
        pg_ctl = str(self.bindir / "pg_ctl")
        self.watchdog = _watchdog(
            [self._argv(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop")],
            {**os.environ, "LC_ALL": "C"},
            [],
            root,
        )
        admin = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute("CREATE DATABASE test")
        self.started_in = time.monotonic() - began


# -- RabbitMQ -------------------------------------------------------------------------------


def rabbitmq_scripts() -> Path:
    """The directory of the real rabbitmq-server and rabbitmqctl scripts.

    Debian's /usr/sbin/rabbitmq-server is ``rabbitmq-script-wrapper``, which runs the
    real script in /usr/lib/rabbitmq/bin as the ``rabbitmq`` user from
    /var/lib/rabbitmq (with that user's Erlang cookie): we run the real one ourselves.
    """
    if chosen := os.environ.get("ACTORSCHED_TEST_RABBITMQ_SCRIPTS"):
        missing = [n for n in ("rabbitmq-server", "rabbitmqctl") if not (Path(chosen) / n).exists()]
        if missing:
            raise ServerUnavailable(f"no {' nor '.join(missing)} in {chosen}")
        return Path(chosen)
    found = shutil.which("rabbitmq-server", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if found is None:
        raise ServerUnavailable("no rabbitmq-server on the PATH nor in /usr/sbin")
    real = Path(found).resolve()
    scripts = real.parent
    if not (scripts / "rabbitmqctl").exists():
        raise ServerUnavailable(f"no rabbitmqctl beside {real}")
    if real.name != "rabbitmq-server" and not (scripts / "rabbitmq-server").exists():
        raise ServerUnavailable(f"{found} is a wrapper and no real rabbitmq-server beside it")
    return scripts


def _erlang_string(text: object) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Cue:
    """The cue of :meth:`PrivateRabbit.close_all_on_cue`."""

    process: asyncio.subprocess.Process
    file: Path
    nodename: str

    async def __call__(self) -> int:
        self.file.touch()
        out = (await asyncio.wait_for(self.process.communicate(), 60))[0].decode(errors="replace")
        assert self.process.returncode == 0, f"rabbitmqctl -n {self.nodename} eval: {out[-800:]}"
        return int(out.strip().splitlines()[-1])


@dataclass
class PrivateRabbit:
    """A RabbitMQ node of this test run's own; :meth:`start` makes one."""

    root: Path
    scripts: Path
    nodename: str
    port: int  # AMQP
    dist_port: int  # Erlang distribution (rabbitmqctl talks to the node there)
    epmd_port: int  # its own epmd
    server: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    epmd: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    watchdog: subprocess.Popen[str] | None = field(default=None, repr=False)
    started_in: float = 0.0

    @property
    def url(self) -> str:
        """guest/guest on the default vhost (guest may log in from 127.0.0.1)."""
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    @property
    def log(self) -> Path:
        return self.root / "log" / f"{self.nodename}.log"

    @property
    def env(self) -> dict[str, str]:
        """The environment of the node and of every rabbitmqctl against it: nothing of the
        machine's (/etc/rabbitmq, /var/lib/rabbitmq, its cookie, its epmd) applies."""
        root = self.root
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        return {
            **inherited,
            "HOME": str(root / "home"),  # its own .erlang.cookie
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "RABBITMQ_NODENAME": self.nodename,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(root / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(root / "plugins-expand"),
            "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(root / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(root / "rabbitmq-env.conf"),
            "RABBITMQ_PID_FILE": str(root / "rabbitmq.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_CRASH_DUMP": str(root / "erl_crash.dump"),
        }

    def ctl_argv(self, *args: str) -> list[str]:
        """``rabbitmqctl -n <this node> -q <args>``: never the machine's node."""
        return [str(self.scripts / "rabbitmqctl"), "-n", self.nodename, "-q", *args]

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``rabbitmqctl -n <this node> <args>``; its output (AssertionError if it fails)."""
        done = subprocess.run(
            self.ctl_argv(*args),
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (
            f"rabbitmqctl -n {self.nodename} {' '.join(args)} exited {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-800:]}"
        )
        return done.stdout

    async def actl(self, *args: str, timeout: float = 60.0) -> str:  # noqa: ASYNC109
        """:meth:`ctl` without blocking the event loop (the serves under test go on)."""
        return await asyncio.to_thread(self.ctl, *args, timeout=timeout)

    @contextlib.asynccontextmanager
    async def close_all_on_cue(self, reason: str = "test") -> AsyncIterator[Cue]:
        """A close of every connection to this node that acts the moment it is cued.

        ``rabbitmqctl close_all_connections`` boots an Erlang VM first: 2 s on an idle
        machine, 5-8 s on a loaded one, so a fault meant for the middle of a load lands
        after it. Here that rabbitmqctl (``rabbitmqctl -n <this node> eval``) is started
        beforehand and waits on the node for the cue (a file), then closes every
        connection with ``reason`` as the broker's close_all_connections does
        (``rabbit_networking:close_connection/2`` of each of
        ``rabbit_networking:connections/0``). ``await cue()`` gives the cue and returns
        once the connections were told to close (how many)."""
        armed, cue_file = self.root / "close.armed", self.root / "close.cue"
        for stale in (armed, cue_file):
            stale.unlink(missing_ok=True)
        expression = (
            f"ok = file:write_file({_erlang_string(armed)}, <<>>),"
            f" Wait = fun W() -> case filelib:is_regular({_erlang_string(cue_file)}) of"
            " true -> ok; false -> timer:sleep(2), W() end end,"
            " Wait(),"
            " Pids = rabbit_networking:connections(),"
            f" [rabbit_networking:close_connection(P, {_erlang_string(reason)}) || P <- Pids],"
            " length(Pids)."
        )
        process = await asyncio.create_subprocess_exec(
            *self.ctl_argv("eval", expression),
            env=self.env,
            cwd=self.root,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        cue = Cue(process, cue_file, self.nodename)
        try:
            deadline = time.monotonic() + 60
            while not armed.exists():
                if process.returncode is not None or time.monotonic() > deadline:
                    out = (await process.communicate())[0].decode(errors="replace")
                    raise AssertionError(f"rabbitmqctl eval never armed the close: {out[-800:]}")
                await asyncio.sleep(0.01)
            yield cue
        finally:
            if process.returncode is None:
                cue_file.touch()  # never cued: let it run (and close) rather than leave it
                await asyncio.wait_for(process.communicate(), 60)

    def stop(self) -> None:
        """``rabbitmqctl stop`` (SIGTERM, then SIGKILL, to its process group if that fails),
        its epmd, its directory."""
        if self.server is not None and self.server.poll() is None:
            try:
                self.ctl("stop", timeout=60)
                self.server.wait(30)
            except (AssertionError, subprocess.TimeoutExpired):
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(OSError):
                        os.killpg(self.server.pid, sig)  # its own session: pgid = its pid
                    try:
                        self.server.wait(20)
                        break
                    except subprocess.TimeoutExpired:
                        continue
        if self.epmd is not None and self.epmd.poll() is None:
            self.epmd.terminate()
            try:
                self.epmd.wait(10)
            except subprocess.TimeoutExpired:
                self.epmd.kill()
                self.epmd.wait()
        _dismiss(self.watchdog)
        shutil.rmtree(self.root, ignore_errors=True)

    @classmethod
    def start(cls) -> PrivateRabbit:
        began = time.monotonic()
        scripts = rabbitmq_scripts()
        epmd = shutil.which("epmd")
        if epmd is None:
            raise ServerUnavailable("no epmd on the PATH (Erlang's port mapper)")
        root = Path(tempfile.mkdtemp(prefix="actorsched-rabbit-"))
        port = free_port()
        dist = free_port((port,))
        node = cls(
            root,
            scripts,
            f"actorsched-test-{secrets.token_hex(4)}@localhost",
            port,
            dist,
            free_port((port, dist)),
        )
        try:
            node._boot(epmd, began)
        except OSError as exc:
            node.stop()
            raise ServerUnavailable(f"rabbitmq-server: {exc}") from exc
        except BaseException:
            node.stop()
            raise
        return node

    def _boot(self, epmd: str, began: float) -> None:
        root = self.root
        for sub in ("home", "mnesia", "log"):
            (root / sub).mkdir(mode=0o700)
        cookie = root / "home" / ".erlang.cookie"
        cookie.write_text("".join(secrets.choice(string.ascii_uppercase) for _ in range(32)))
        cookie.chmod(0o400)
        (root / "enabled_plugins").write_text("[].\n")
        (root / "rabbitmq-env.conf").write_text("")  # not /etc/rabbitmq/rabbitmq-env.conf
        (root / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\nlog.console = false\nlog.file.level = info\n"
        )
        env = self.env
        self.epmd = subprocess.Popen(
            [epmd, "-port", str(self.epmd_port), "-address", "127.0.0.1"],
            env=env,
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        with (root / "server.out").open("wb") as out:
            self.server = subprocess.Popen(
                [str(self.scripts / "rabbitmq-server")],
                env=env,
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its shell, beam and children: one group to signal
            )
        self.watchdog = _watchdog(
            [self.ctl_argv("stop")], env, [self.server.pid, self.epmd.pid], root
        )
        # the pid file appears once the node boots; wait then waits for the broker in it
        waiter = subprocess.Popen(
            self.ctl_argv("wait", str(root / "rabbitmq.pid"), "--timeout", str(int(START_TIMEOUT))),
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT + 10
        while waiter.poll() is None:
            if self.server.poll() is not None or time.monotonic() > deadline:
                waiter.kill()
                waiter.communicate()
                why = (
                    f"exited {self.server.returncode}"
                    if self.server.returncode is not None
                    else f"not up within {START_TIMEOUT:.0f}s"
                )
                raise ServerUnavailable(
                    f"rabbitmq-server ({self.nodename}) {why}:\n{_tail(root / 'server.out')}"
                )
            time.sleep(0.2)
        said = waiter.communicate()[0].decode(errors="replace")
        if waiter.returncode != 0:
            raise ServerUnavailable(
                f"rabbitmqctl wait for {self.nodename} exited {waiter.returncode}: "
                f"{said.strip()[-500:]}\n{_tail(root / 'server.out')}"
            )
        self.started_in = time.monotonic() - began


# -- one of each per session ----------------------------------------------------------------

_Server = TypeVar("_Server", PrivatePostgres, PrivateRabbit)
_SESSION: dict[str, PrivatePostgres | PrivateRabbit | ServerUnavailable] = {}


def _stop(kind: str) -> None:
    server = _SESSION.pop(kind, None)
    if server is not None and not isinstance(server, ServerUnavailable):
        server.stop()


def _stop_all() -> None:
    for kind in list(_SESSION):
        _stop(kind)


atexit.register(_stop_all)  # a session that ends without its fixtures' teardown


def _session_server(kind: str, start: Callable[[], _Server]) -> _Server:
    """The session's one server of ``kind`` (started on first use); skips the test, saying
    why, when it could not be started (and does not try again)."""
    if kind not in _SESSION:
        try:
            _SESSION[kind] = start()
        except ServerUnavailable as exc:
            _SESSION[kind] = exc
    got = _SESSION[kind]
    if isinstance(got, ServerUnavailable):
        pytest.skip(f"no private {kind} here: {got}")
    assert not isinstance(got, ServerUnavailable)
    return got  # type: ignore[return-value]


@pytest.fixture(scope="session", name="private_postgres")
def private_postgres_fixture() -> Iterator[PrivatePostgres]:
    """The session's private PostgreSQL cluster (ssl on; see :class:`PrivatePostgres`)."""
    server = _session_server("PostgreSQL", PrivatePostgres.start)
    yield server
    _stop("PostgreSQL")


@pytest.fixture(scope="session", name="private_rabbitmq")
def private_rabbitmq_fixture() -> Iterator[PrivateRabbit]:
    """The session's private RabbitMQ node (see :class:`PrivateRabbit`)."""
    server = _session_server("RabbitMQ", PrivateRabbit.start)
    yield server
    _stop("RabbitMQ")
