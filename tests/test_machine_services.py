"""No test touches the machine's own PostgreSQL and RabbitMQ beyond what is its own.

The machine's servers (127.0.0.1:5432, 127.0.0.1:5672) are shared with other test
runs and whatever else uses them: a test may make queues, vhosts and shards of its
own and kill its own connections, but never restart, stop or reconfigure them nor
cut other clients off. Faults of a whole server go to the private ones of
tests/servers.py. This reads the source of the test tree (and of the benchmarks the
tests drive) and fails on any command that would disturb the machine's:

* ``pg_ctlcluster``, ``systemctl``, ``service …``, ``invoke-rc.d``, and ``pg_ctl``
  without ``-D`` (or with the machine's data directory);
* ``rabbitmqctl`` (or rabbitmq-diagnostics, -plugins, -queues, -upgrade, -streams)
  against the default node (no ``-n``), unless the command only reads
  (``list_queues``, ``status`` …) or acts on a vhost of the test's own
  (``add_vhost``/``delete_vhost`` of a vhost that is not ``/``,
  ``close_all_connections --vhost <own>``, ``set_permissions -p <own>`` …); a function
  that passes its arguments on to such a command is followed to its callers;
* SQL that reconfigures the server (``ALTER SYSTEM``, ``pg_reload_conf()``) or
  terminates or cancels backends that are not picked by ``application_name``;
* paths of the machine's configuration and data (/etc/postgresql, /etc/rabbitmq,
  /var/lib/postgresql, /var/lib/rabbitmq).

It is a reading of literals, not a proof: a command built from variables alone is
not seen. Its own self-test below shows what it catches.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = [ROOT / "tests", ROOT / "benchmarks"]
THIS = Path(__file__).resolve()

FORBIDDEN = {"pg_ctlcluster", "systemctl", "invoke-rc.d", "rc-service"}
SERVICE_VERBS = {"start", "stop", "restart", "reload", "force-reload", "try-restart"}
RABBIT_TOOLS = {
    "rabbitmqctl",
    "rabbitmq-diagnostics",
    "rabbitmq-plugins",
    "rabbitmq-queues",
    "rabbitmq-upgrade",
    "rabbitmq-streams",
}
# subcommands that only read: harmless on the machine's node
READ_ONLY = {
    "await_startup",
    "cluster_status",
    "environment",
    "help",
    "list_bindings",
    "list_channels",
    "list_connections",
    "list_consumers",
    "list_exchanges",
    "list_feature_flags",
    "list_global_parameters",
    "list_operator_policies",
    "list_parameters",
    "list_permissions",
    "list_policies",
    "list_queues",
    "list_topic_permissions",
    "list_user_permissions",
    "list_users",
    "list_vhost_limits",
    "list_vhosts",
    "ping",
    "report",
    "status",
    "version",
    "wait",
}
OWN_VHOST = {"add_vhost", "delete_vhost"}  # their argument: a vhost of the test's own
VHOST_SCOPED = {  # only with -p/--vhost <a vhost that is not />
    "clear_permissions",
    "clear_policy",
    "clear_topic_permissions",
    "close_all_connections",
    "delete_queue",
    "purge_queue",
    "set_permissions",
    "set_policy",
    "set_topic_permissions",
    "set_vhost_limits",
}
MACHINE_PATHS = ("/etc/postgresql", "/etc/rabbitmq", "/var/lib/postgresql", "/var/lib/rabbitmq")
SQL_RECONFIGURES = re.compile(r"\bALTER\s+SYSTEM\b|\bpg_reload_conf\s*\(", re.IGNORECASE)
SQL_KILLS = re.compile(r"\bpg_(terminate|cancel)_backend\s*\(", re.IGNORECASE)
SHELL_COMMAND = re.compile(
    r"(?:^|[;&|]\s*|\bsudo\s+)(pg_ctlcluster|systemctl|invoke-rc\.d|service\s+\S+\s+(?:"
    + "|".join(sorted(SERVICE_VERBS))
    + r"))\b"
)

Element = str | None  # a literal, or None for anything computed
# calls that name a program without running it: str(bindir / "pg_ctl"), shutil.which(...)
NOT_COMMANDS = {"str", "Path", "which", "fspath", "joinpath", "exists", "resolve"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def _element(node: ast.expr) -> Element:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _element(node.right)  # bindir / "pg_ctl": the program's name
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str":
        return _element(node.args[0]) if len(node.args) == 1 else None
    return None


def _flatten(nodes: list[ast.expr]) -> tuple[list[Element], list[ast.expr | None]]:
    """The literals of an argument list (``*("a", x)`` spread out), and each one's node."""
    elements: list[Element] = []
    origins: list[ast.expr | None] = []
    for node in nodes:
        if isinstance(node, ast.Starred) and isinstance(node.value, ast.List | ast.Tuple):
            more, their = _flatten(node.value.elts)
            elements += more
            origins += their
        else:
            elements.append(None if isinstance(node, ast.Starred) else _element(node))
            origins.append(node)
    return elements, origins


def _name(text: Element) -> str:
    return text.rsplit("/", 1)[-1] if text else ""


@dataclass
class Vector:
    """An argument list: of a call, or a list or tuple literal (a command line, maybe)."""

    line: int
    elements: list[Element]
    origins: list[ast.expr | None]
    function: str = ""  # the function it is in
    params: frozenset[str] = frozenset()  # that function's parameters
    called: str = ""  # for a call: the name called

    def tool(self) -> int | None:
        """Where a rabbitmqctl-like program is the command run (first, or after sudo)."""
        for i, element in enumerate(self.elements):
            if _name(element) in RABBIT_TOOLS and (i == 0 or self.elements[i - 1] in LAUNCHERS):
                return i
        return None

    def passes_through(self, at: int, offset: int) -> bool:
        """The element at ``at`` of the arguments after ``offset`` is one of the function's
        own parameters (``*args``, ``command``): the command is its caller's."""
        if offset + at >= len(self.origins):
            return False
        node = self.origins[offset + at]
        if isinstance(node, ast.Starred):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.params


LAUNCHERS = {"sudo", "doas", "--", "exec"}


def _after(vector: list[Element], flags: set[str]) -> list[Element]:
    """The values given to any of ``flags`` (``-p x``, ``--vhost=x``)."""
    values: list[Element] = []
    for i, item in enumerate(vector):
        if item in flags:
            values.append(vector[i + 1] if i + 1 < len(vector) else None)
        elif item and "=" in item and item.split("=", 1)[0] in flags:
            values.append(item.split("=", 1)[1])
    return values


def _subcommand(rest: list[Element]) -> tuple[Element, int]:
    """The first positional literal of a rabbitmqctl argument list (None: computed or
    absent) and where it is."""
    skip = False
    for i, item in enumerate(rest):
        if skip:
            skip = False
            continue
        if item is None:
            return None, i
        if item in ("-p", "--vhost", "-t", "--timeout", "-n", "--node"):
            skip = True
            continue
        if item.startswith("-"):
            continue
        return item, i
    return None, len(rest)


def _private(rest: list[Element]) -> bool:
    """``-n <node>`` given: a node of the test's own (tests/servers.py passes it)."""
    return "-n" in rest or "--node" in rest or any(e and e.startswith("--node=") for e in rest)


def _judge_rabbit(rest: list[Element]) -> str | None:
    """Why ``rabbitmqctl <rest>`` on the default node disturbs it (None: it does not)."""
    command, at = _subcommand(rest)
    assert command is not None
    if command in READ_ONLY:
        return None
    if command in OWN_VHOST:
        vhost = next(iter(rest[at + 1 :]), None)
        return f"{command} of the default vhost '/'" if vhost == "/" else None
    if command in VHOST_SCOPED:
        vhosts = _after(rest, {"-p", "--vhost"})
        if vhosts and all(v != "/" for v in vhosts):
            return None
        return f"{command} on the default vhost (give --vhost <one of the test's own>)"
    return f"{command} on the machine's node (use a private node: tests/servers.py)"


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


class _Reader(ast.NodeVisitor):
    """The argument lists and the string literals (not docstrings) of one module."""

    def __init__(self) -> None:
        self.vectors: list[Vector] = []
        self.strings: list[tuple[int, str]] = []
        self._functions: list[tuple[str, frozenset[str]]] = [("", frozenset())]
        self._docstrings: set[int] = set()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._note_docstring(node.body)
        a = node.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        self._functions.append((node.name, frozenset(params)))
        self.generic_visit(node)
        self._functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._note_docstring(node.body)
        self.generic_visit(node)

    def visit_Module(self, node: ast.Module) -> None:
        self._note_docstring(node.body)
        self.generic_visit(node)

    def _note_docstring(self, body: list[ast.stmt]) -> None:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            self._docstrings.add(id(body[0].value))

    def _vector(self, line: int, nodes: list[ast.expr], called: str = "") -> None:
        elements, origins = _flatten(nodes)
        function, params = self._functions[-1]
        self.vectors.append(Vector(line, elements, origins, function, params, called))

    def visit_Call(self, node: ast.Call) -> None:
        called = _called(node.func)
        if called not in NOT_COMMANDS:
            self._vector(node.lineno, node.args, called)
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        self._vector(node.lineno, node.elts)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._vector(node.lineno, node.elts)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self._docstrings:
            self.strings.append((node.lineno, node.value))

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        text = "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
            for v in node.values
        )
        self.strings.append((node.lineno, text))


# a file without any of these has nothing to judge (read whole only the others: it is quick)
SUSPECT = re.compile(
    r"rabbitmq|pg_ctl|systemctl|invoke-rc|rc-service|[\"' ]service[\"' ]|alter\s+system"
    r"|pg_reload_conf|_backend\s*\(|/etc/|/var/lib/",
    re.IGNORECASE,
)


def _read(path: str, text: str) -> _Reader:
    reader = _Reader()
    if path.endswith(".py"):
        reader.visit(ast.parse(text, path))
    else:  # shell: each line a command
        for number, line in enumerate(text.splitlines(), 1):
            try:
                words: list[Element] = list(shlex.split(line, comments=True))
            except ValueError:
                words = list(line.split())
            reader.vectors.append(Vector(number, words, [None] * len(words)))
            reader.strings.append((number, line.split("#", 1)[0]))
    return reader


def _rabbit_rest(vector: Vector, wrappers: set[str]) -> tuple[list[Element], int] | None:
    """The arguments given to rabbitmqctl on the default node by ``vector`` and where they
    start in it (None: it runs no rabbitmqctl, or runs it with ``-n``)."""
    tool = vector.tool()
    if tool is not None:
        offset = tool + 1
    elif vector.called in wrappers:
        offset = 0
    else:
        return None
    rest = vector.elements[offset:]
    return None if _private(rest) else (rest, offset)


def _wrappers(readers: dict[str, _Reader]) -> set[str]:
    """Functions that hand their own arguments on as the command of rabbitmqctl on the
    default node, and those that hand theirs on to those (to a fixpoint)."""
    wrappers: set[str] = set()
    while True:
        before = len(wrappers)
        for reader in readers.values():
            for vector in reader.vectors:
                if not vector.function or vector.function in wrappers:
                    continue
                found = _rabbit_rest(vector, wrappers)
                if found is None:
                    continue
                rest, offset = found
                command, at = _subcommand(rest)
                if command is None and vector.passes_through(at, offset):
                    wrappers.add(vector.function)
        if len(wrappers) == before:
            return wrappers


def check_sources(sources: dict[str, str]) -> list[Finding]:
    """Every disturbing command in ``sources`` (a path -> Python or shell text)."""
    findings: set[Finding] = set()
    readers = {path: _read(path, text) for path, text in sources.items() if SUSPECT.search(text)}
    while True:  # a file calling a wrapper by name is read too, whatever else it holds
        wrappers = _wrappers(readers)
        more = {
            path: _read(path, text)
            for path, text in sources.items()
            if path not in readers and any(re.search(rf"\b{w}\b", text) for w in wrappers)
        }
        if not more:
            break
        readers.update(more)

    def note(path: str, line: int, what: str) -> None:
        findings.add(Finding(path, line, what))

    for path, reader in readers.items():
        for vector in reader.vectors:
            line, elements = vector.line, vector.elements
            names = [_name(e) for e in elements]
            for i, name in enumerate(names):
                first = i == 0 or elements[i - 1] in LAUNCHERS
                if name in FORBIDDEN:
                    note(path, line, f"{name}: never on the machine's services")
                verb = names[i + 2] if i + 2 < len(names) else ""
                if name == "service" and first and verb in SERVICE_VERBS:
                    note(path, line, f"service {names[i + 1]} {names[i + 2]}")
                if name == "pg_ctl" and first:
                    data = _after(elements[i + 1 :], {"-D", "--pgdata"})
                    if not data:
                        note(path, line, "pg_ctl without -D <a private data directory>")
                    elif any(d and d.startswith(MACHINE_PATHS) for d in data):
                        note(path, line, f"pg_ctl on the machine's cluster {data}")
            found = _rabbit_rest(vector, wrappers)
            if found is None or _subcommand(found[0])[0] is None:
                continue  # no rabbitmqctl, a private node, or a wrapper (judged at its calls)
            if why := _judge_rabbit(found[0]):
                note(path, line, f"rabbitmqctl {why}")
        for line, text in reader.strings:
            if match := SHELL_COMMAND.search(text):
                note(path, line, f"shell command {match.group(1)!r}")
            if SQL_RECONFIGURES.search(text):
                note(path, line, "SQL that reconfigures the server")
            if SQL_KILLS.search(text) and "application_name" not in text:
                note(path, line, "backends killed that are not picked by application_name")
            if any(machine in text for machine in MACHINE_PATHS):
                note(path, line, f"a path of the machine's servers: {text[:80]!r}")
    return sorted(findings, key=lambda f: (f.path, f.line, f.what))


def _tree() -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted(top.rglob("*")):
            hidden = any(part.startswith(".") for part in path.relative_to(ROOT).parts)
            if path.suffix in (".py", ".sh") and path.resolve() != THIS and not hidden:
                yield path


def test_no_test_disturbs_the_machines_postgresql_or_rabbitmq() -> None:
    sources = {str(p.relative_to(ROOT)): p.read_text(errors="replace") for p in _tree()}
    assert "tests/ha/ha_support.py" in sources, "the guard reads the test tree"
    findings = check_sources(sources)
    assert not findings, "tests that would disturb the machine's services:\n" + "\n".join(
        map(str, findings)
    )


def test_the_private_nodes_rabbitmqctl_names_its_node() -> None:
    from servers import PrivateRabbit

    node = PrivateRabbit(Path("/nonexistent"), Path("/x"), "n@localhost", 1, 2, 3)
    argv = node.ctl_argv("close_all_connections", "test")
    assert argv[1:3] == ["-n", "n@localhost"], argv


# -- the guard's own test: what it catches, what it lets through ----------------------------

CAUGHT = {
    "restart": """
async def restart_postgres():
    await run_command("pg_ctlcluster", "--skip-systemctl-redirect", "15", "main", "restart")
""",
    "systemctl": 'subprocess.run(["systemctl", "restart", "rabbitmq-server"])',
    "service": 'subprocess.run(["sudo", "service", "postgresql", "reload"])',
    "shell": 'subprocess.run("rabbitmqctl stop_app && systemctl restart x", shell=True)',
    "close all on /": 'await run_command("rabbitmqctl", "close_all_connections", "test")',
    "close one": 'await run_command("rabbitmqctl", "close_connection", pid, "test")',
    "wrapper": """
async def _ctl(*args):
    return await run("rabbitmqctl", "-q", *args)
async def _quiet(*args):
    return await _ctl(*args)
async def test():
    await _quiet("stop_app")
""",
    "default vhost": '_ctl_file = ["rabbitmqctl", "delete_vhost", "/"]',
    "pg_ctl": 'subprocess.run(["pg_ctl", "restart", "-m", "fast"])',
    "pg_ctl machine": 'run(["pg_ctl", "-D", "/var/lib/postgresql/15/main", "stop"])',
    "alter system": 'pg_execute("ALTER SYSTEM SET max_connections = 5")',
    "kill all": 'pg_execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity")',
    "hba": 'Path("/etc/postgresql/15/main/pg_hba.conf").write_text("host all all 0/0 trust")',
}

LET_THROUGH = {
    "private node": 'subprocess.run([ctl, "-n", node, "close_all_connections", "x"])',
    "read only": 'subprocess.run(["rabbitmqctl", "-q", "list_queues", "name"])',
    "own vhost": """
async def _rabbitmqctl(*args):
    return await run("rabbitmqctl", "-q", *args)
async def fixture():
    await _rabbitmqctl("add_vhost", vhost)
    await _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    await _rabbitmqctl("close_all_connections", "--vhost", vhost, "--limit", "100", "x")
    await _rabbitmqctl("delete_vhost", vhost)
""",
    "own backends": 'pg_execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity'
    ' WHERE application_name = %s", (name,))',
    "private pg_ctl": 'run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "restart"])',
    "a docstring": 'def f():\n    """Not ``pg_ctlcluster … restart``: see /etc/postgresql."""',
    "a word": 'status = {"service": "nova-scheduler", "state": "restart"}',
    "no wrapper": """
async def status():
    return await run("rabbitmqctl", "-q", "status")
async def start(name):
    return await status()
async def test():
    await start("stop_app")
""",
}


@pytest.mark.parametrize("name", sorted(CAUGHT))
def test_the_guard_catches(name: str) -> None:
    assert check_sources({f"{name}.py": CAUGHT[name]}), CAUGHT[name]


def test_the_guard_follows_a_wrapper_to_another_file() -> None:
    helper = 'async def ctl(*args):\n    return await run("rabbitmqctl", *args)\n'
    caller = 'from helper import ctl\n\nasync def test():\n    await ctl("stop_app")\n'
    [found] = check_sources({"helper.py": helper, "test_x.py": caller})
    assert (found.path, found.line) == ("test_x.py", 4), found


def test_the_guard_catches_shell_scripts() -> None:
    assert check_sources({"x.sh": "sudo systemctl restart postgresql\n"})
    assert check_sources({"x.sh": "rabbitmqctl stop_app  # for a test\n"})
    assert not check_sources({"x.sh": "rabbitmqctl -n private@localhost stop\n"})


@pytest.mark.parametrize("name", sorted(LET_THROUGH))
def test_the_guard_lets_through(name: str) -> None:
    assert check_sources({f"{name}.py": LET_THROUGH[name]}) == [], LET_THROUGH[name]


def test_the_run_sentinel_notices_a_cut_session_and_a_closed_connection() -> None:
    """The session fixture's check (conftest ``machine_services_untouched``) can fail:
    a terminated PostgreSQL session of its own and a closed broker connection are
    both reported."""
    import os

    import psycopg
    from machine_sentinel import _APPLICATION, MachineSentinel

    sentinel = MachineSentinel(
        os.environ.get("ACTORSCHED_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
        os.environ.get("ACTORSCHED_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    sentinel.open()
    try:
        if sentinel.absent:
            pytest.skip(f"not running: {sentinel.absent}")
        assert sentinel.disturbed() == []
        with psycopg.connect(sentinel.pg_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (_APPLICATION + " (self-test)",),
            )
        assert sentinel.disturbed() == [], "another application name: untouched"
        assert sentinel._pg is not None
        with psycopg.connect(sentinel.pg_url, autocommit=True) as conn:
            pid = sentinel._pg.info.backend_pid
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        sentinel._run(sentinel._amqp.close(), 10)
        found = sentinel.disturbed()
        assert len(found) == 2, found
        assert "PostgreSQL cut a session" in found[1]
        assert "RabbitMQ cut a connection" in found[0]
    finally:
        sentinel.close()
