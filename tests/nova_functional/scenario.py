# mypy: ignore-errors
# ruff: noqa: E402
# (runs in Nova's venv, .venv-nova, whose libraries our mypy does not have)
"""Nova 34's own functional environment, end to end, with Nova's scheduler or an external one.

Run in Nova's venv, never imported by actorsched's tests::

    .venv-nova/bin/python tests/nova_functional/scenario.py --scheduler nova
    .venv-nova/bin/python tests/nova_functional/scenario.py --scheduler external --workdir DIR

It builds the environment of ``nova.tests.functional`` (Nova's API through
``OSAPIFixture``, its conductor, fake-driver computes of mixed sizes, Nova's
own ``GlanceFixture``, ``NeutronFixture``, ``CinderFixture``, the databases in
SQLite) as one ``nova.test.TestCase`` run by ``unittest`` in this process, with
two changes (``tests/nova_functional/NOTES.md`` says why and where in Nova):

* the bus is the real RabbitMQ: ``nova.tests.fixtures.RPCFixture`` (which
  forces ``fake:/``) is replaced by one that opens ``rabbit://`` on a vhost
  made for this run (and deleted after it) with a control exchange of its own;
* Placement is reachable over real HTTP: the in-process Placement app of
  ``PlacementFixture`` is served on a socket of 127.0.0.1 (or, with
  ``--placement-url``, an external Placement server is used).

With ``--scheduler nova`` Nova's scheduler service is started; with
``--scheduler external`` it is not, and the harness writes the nova.conf an
external scheduler needs, prints ``READY {...}`` and waits until something
consumes the ``scheduler`` queue (and, with ``--go-file``, until that file
exists). Then: boot servers concurrently until NoValidHost, make room, resize
with confirm, cold migrate with confirm and with revert, evacuate a host that
is forced down, delete everything; after each step it checks servers, Placement
usages and capacity, and the server groups. It prints one JSON document (last
line of stdout, prefixed ``RESULT ``) and exits 0 when every check passed, 1
when one failed, 2 when the environment could not be built.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import subprocess
import sys
import time
import traceback
import uuid as uuidlib
from typing import Any

# oslotest's base reads these at setUp: no capture of stdout, no test timeout
for _name in ("OS_STDOUT_CAPTURE", "OS_STDERR_CAPTURE", "OS_LOG_CAPTURE", "OS_TEST_TIMEOUT"):
    os.environ.pop(_name, None)


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scheduler", choices=("nova", "external"), default="nova")
    p.add_argument("--computes", type=int, default=20)
    p.add_argument("--servers", type=int, default=50, help="servers booted at once")
    p.add_argument(
        "--transport",
        choices=("rabbit", "fake"),
        default="rabbit",
        help="rabbit: the real broker on a vhost of this run; fake: oslo's in-process bus",
    )
    p.add_argument("--rabbit", default="guest:guest@127.0.0.1:5672", help="user:pass@host:port")
    p.add_argument("--vhost", default=None, help="use this existing vhost (default: make one)")
    p.add_argument("--control-exchange", default=None)
    p.add_argument("--placement-url", default=None, help="an external Placement (noauth2)")
    p.add_argument("--workdir", default=None, help="where nova.conf and hosts.json go")
    p.add_argument("--go-file", default=None, help="external: also wait for this file")
    p.add_argument("--wait-timeout", type=float, default=120.0)
    p.add_argument("--step-timeout", type=float, default=90.0)
    p.add_argument("--log-file", default=None, help="Nova's log of the run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--full-teardown", action="store_true", help="run every fixture cleanup")
    return p.parse_args(argv)


ARGS = _args()
TAG = uuidlib.uuid4().hex[:8]
WORKDIR = ARGS.workdir or f"/tmp/nova-functional-{TAG}"
os.makedirs(WORKDIR, exist_ok=True)
VHOST = ARGS.vhost or f"actorsched-nf-{TAG}"
EXCHANGE = ARGS.control_exchange or f"nova-nf-{TAG}"
MADE_VHOST = False


def _rabbitmqctl(*args: str) -> subprocess.CompletedProcess[str]:
    # the machine's node answers only root's and the rabbitmq user's rabbitmqctl (Debian's
    # wrapper refuses anyone else): through sudo, never prompting, when we are neither
    argv = ["rabbitmqctl", *args]
    if os.geteuid() != 0:
        argv = ["sudo", "-n", "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def _make_vhost() -> None:
    global MADE_VHOST
    user = ARGS.rabbit.split("@")[0].split(":")[0]
    made = _rabbitmqctl("add_vhost", VHOST)
    if made.returncode != 0:
        said = (made.stderr or made.stdout).strip()[-500:]
        needs = " (making a vhost needs root: run as root or with sudo without a password)"
        raise RuntimeError(
            f"rabbitmqctl add_vhost {VHOST}: {said}" + (needs if os.geteuid() != 0 else "")
        )
    MADE_VHOST = True
    print(f"VHOST {VHOST}", flush=True)  # so a caller that must kill us can delete it
    perm = _rabbitmqctl("set_permissions", "-p", VHOST, user, ".*", ".*", ".*")
    if perm.returncode != 0:
        raise RuntimeError(f"rabbitmqctl set_permissions: {perm.stderr.strip()[-500:]}")


def _drop_vhost() -> None:
    global MADE_VHOST
    if MADE_VHOST:
        MADE_VHOST = False
        _rabbitmqctl("delete_vhost", VHOST)


if ARGS.transport == "rabbit" and ARGS.vhost is None:
    try:
        _make_vhost()
    except Exception as exc:  # reported in the JSON document, never a traceback alone
        print("RESULT " + json.dumps({"ok": False, "setup_error": str(exc)}), flush=True)
        sys.exit(2)

TRANSPORT_URL = f"rabbit://{ARGS.rabbit}/{VHOST}" if ARGS.transport == "rabbit" else "fake:/"

# -- Nova (the import monkey-patches with eventlet, as Nova's functional tests do:
# nova/tests/functional/__init__.py:16), so it comes first; E402 is off for the file
# isort: off
import nova.tests.functional

# isort: on
import fixtures
import nova.conf
import oslo_messaging as messaging
from nova import context as nova_context
from nova import objects, rpc, test
from nova import utils as nova_utils
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import fixtures as func_fixtures
from nova.tests.functional import integrated_helpers
from nova.virt import fake as fake_virt
from oslo_messaging import conffixture as messaging_conffixture

CONF = nova.conf.CONF


# -- the bus ----------------------------------------------------------------
class BrokerRPCFixture(nova_fixtures.RPCFixture):
    """nova/tests/fixtures/nova.py RPCFixture, with the real transport of this run.

    Nova's fixture sets ``transport_url = 'fake:/'`` and makes every
    ``rpc.create_transport(url)`` (cells' ``fake://nowhere/`` too) one fake bus;
    this one makes them one transport of ``TRANSPORT_URL``.
    """

    def _fake_create_transport(self, url: Any) -> Any:
        if None not in self._buses:
            self._buses[None] = messaging.get_rpc_transport(
                CONF, url=TRANSPORT_URL, allowed_remote_exmods=rpc.get_allowed_exmods()
            )
        return self._buses[None]

    def setUp(self) -> None:
        fixtures.Fixture.setUp(self)
        self.addCleanup(rpc.cleanup)
        rpc.add_extra_exmods(*self.exmods)
        self.addCleanup(rpc.clear_extra_exmods)
        self.messaging_conf = messaging_conffixture.ConfFixture(CONF)
        self.messaging_conf.transport_url = TRANSPORT_URL
        self.useFixture(self.messaging_conf)
        CONF.set_override("control_exchange", EXCHANGE)
        self.addCleanup(CONF.clear_override, "control_exchange")
        self.useFixture(
            fixtures.MonkeyPatch("nova.rpc.create_transport", self._fake_create_transport)
        )
        rpc.init(CONF)


# CellDatabases (nova/tests/fixtures/nova.py) wraps rpc.get_server/get_client with
# CheatingSerializer, which puts the cell's db_connection and mq_connection objects
# themselves in the RPC context: fine on the fake bus (same process, nothing
# serialized), "Cannot convert <_TransactionContextManager> to primitive" on a real
# one. On the broker they travel as keys of this process's table instead (an external
# scheduler sees two extra context strings and ignores them).
_IN_PROCESS: dict[str, Any] = {}


def _serialize_context(self: Any, context: Any) -> Any:
    values = rpc.RequestContextSerializer.serialize_context(self, context)
    for name in ("db_connection", "mq_connection"):
        obj = getattr(context, name, None)
        key = None
        if obj is not None:
            key = f"in-process:{name}:{id(obj)}"
            _IN_PROCESS[key] = obj
        values[name] = key
    return values


def _deserialize_context(self: Any, values: Any) -> Any:
    keys = {name: values.pop(name, None) for name in ("db_connection", "mq_connection")}
    ctxt = rpc.RequestContextSerializer.deserialize_context(self, values)
    for name, key in keys.items():
        setattr(ctxt, name, _IN_PROCESS.get(key) if isinstance(key, str) else None)
    return ctxt


# SQLAlchemy 2.1 deprecates orm.noload(), which Nova 34's db API still uses
# (nova/db/main/api.py _build_instance_get); WarningsFixture makes every
# SADeprecationWarning an error (nova/tests/fixtures/nova.py WarningsFixture), so
# each instance read would fail. Nova's own CI pins SQLAlchemy 2.0.
_RealWarningsFixture = nova_fixtures.WarningsFixture


class _WarningsFixture(_RealWarningsFixture):  # type: ignore[misc,valid-type]
    def setUp(self) -> None:
        super().setUp()
        import warnings

        from sqlalchemy import exc as sqla_exc

        warnings.filterwarnings(
            "ignore",
            message=r"The noload\(\) option is deprecated",
            category=sqla_exc.SADeprecationWarning,
        )


nova_fixtures.WarningsFixture = _WarningsFixture


# CellDatabases (nova/tests/fixtures/nova.py _wrap_target_cell) emulates cells in one
# process by switching one global "current cell database" under a reader/writer lock:
# it sets the cell under the write lock, lets it go, takes the read lock and checks the
# cell is still its own. Between the two another thread's switch (a writer waiting;
# the lock serves writers first) can change it back, and after three such lost races
# it gives up without yielding: target_cell raises "generator didn't yield". With
# Nova's own scheduler, 14 NoValidHost answers arrive within seconds while the API
# scatters GET /servers/detail over cell0 and cell1, and the conductor's
# _bury_in_cell0 (nova/conductor/manager.py) lost that race: its servers were never
# written to cell0 and stayed BUILD/scheduling (3 of the affinity group once, 1 plain
# server another time). A real deployment has one database per cell and no such
# switch. Here the writer takes the read lock before it lets the write lock go (the
# lock allows its writer to read), so the cell it set is the cell it reads: no race,
# no retry, otherwise the fixture's steps unchanged.
def _target_cell_without_race(self: Any, context: Any, cell_mapping: Any) -> Any:
    if cell_mapping:
        desired = self._ctxt_mgrs[cell_mapping.database_connection]
    else:
        desired = self._default_ctxt_mgr
    lock = self._cell_lock
    with lock.read_lock():
        if self._last_ctxt_mgr == desired:
            with self._real_target_cell(context, cell_mapping) as c:
                yield c
                return
    lock.acquire_write_lock()
    try:
        self._last_ctxt_mgr = desired
        lock.acquire_read_lock()  # the writer may; no other writer can come between
    finally:
        lock.release_write_lock()
    raised = None
    try:
        with self._real_target_cell(context, cell_mapping) as ccontext:
            yield ccontext
    except Exception as exc:  # raised after the state is restored, as the fixture does
        raised = exc
    finally:
        lock.release_read_lock()
    with lock.write_lock():
        self._last_ctxt_mgr = self._default_ctxt_mgr
    if raised:
        raise raised


_CellDatabases = sys.modules["nova.tests.fixtures.nova"].CellDatabases
_CellDatabases._wrap_target_cell = contextlib.contextmanager(_target_cell_without_race)

if ARGS.transport == "rabbit":
    _nova_fixtures_module = sys.modules["nova.tests.fixtures.nova"]

    _nova_fixtures_module.CheatingSerializer.serialize_context = _serialize_context
    _nova_fixtures_module.CheatingSerializer.deserialize_context = _deserialize_context
    # nova/test.py TestCase.setUp builds nova_fixtures.RPCFixture('nova.test') by name
    nova_fixtures.RPCFixture = BrokerRPCFixture
else:
    _NovaRPCFixture = nova_fixtures.RPCFixture

    class _FakeBusFixture(_NovaRPCFixture):  # type: ignore[misc,valid-type]
        def setUp(self) -> None:
            super().setUp()
            CONF.set_override("control_exchange", EXCHANGE)
            self.addCleanup(CONF.clear_override, "control_exchange")

    nova_fixtures.RPCFixture = _FakeBusFixture


# -- Placement over real HTTP ---------------------------------------------------
class HTTPPlacementFixture(func_fixtures.PlacementFixture):
    """Nova's PlacementFixture (which points SchedulerReportClient at ``self.endpoint``)
    without wsgi-intercept: the same Placement app served on a real socket, or an
    external Placement at ``url``."""

    def __init__(self, url: str | None = None) -> None:
        super().__init__(db=url is None, use_intercept=False)
        self.external_url = url

    def setUp(self) -> None:
        super().setUp()
        if self.external_url:
            self.endpoint = self.external_url.rstrip("/")
            return
        from placement import deploy

        app = deploy.loadapp(self.conf_fixture.conf)
        self.endpoint = _serve_wsgi(self, app)


def _serve_wsgi(fixture: fixtures.Fixture, app: Any) -> str:
    if not nova_utils.concurrency_mode_threading():
        import eventlet
        import eventlet.wsgi

        sock = eventlet.listen(("127.0.0.1", 0))
        port = sock.getsockname()[1]

        class _Quiet:
            def write(self, *_: Any) -> None:
                pass

        server = eventlet.spawn(
            eventlet.wsgi.server, sock, app, log=_Quiet(), log_output=False, max_size=200
        )

        def _stop() -> None:
            server.kill()
            sock.close()

        fixture.addCleanup(_stop)
    else:
        import socketserver
        import threading
        from wsgiref import simple_server

        class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
            daemon_threads = True

        class _Handler(simple_server.WSGIRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

        httpd = simple_server.make_server(
            "127.0.0.1", 0, app, server_class=_Server, handler_class=_Handler
        )
        port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        fixture.addCleanup(httpd.shutdown)
    return f"http://127.0.0.1:{port}"


# -- computes of mixed sizes -------------------------------------------------------
# (name, vcpus, memory_mb, local_gb): nova/virt/fake.py FakeDriver reads these class
# attributes for its inventory (update_provider_tree) and get_available_resource
SIZES = (("S", 2, 4096, 40), ("M", 4, 8192, 80), ("L", 8, 16384, 160))
for _size, _vcpus, _mem, _disk in SIZES:
    setattr(
        fake_virt,
        f"Scenario{_size}Driver",
        type(
            f"Scenario{_size}Driver",
            (fake_virt.FakeDriver,),
            {"vcpus": _vcpus, "memory_mb": _mem, "local_gb": _disk},
        ),
    )

# (name, vcpus, ram, disk) of the flavors booted (no ephemeral, no swap)
FLAVORS = (("f.small", 1, 2048, 10), ("f.medium", 2, 4096, 20), ("f.large", 2, 6144, 40))
RESIZE_FLAVOR = ("f.resized", 2, 3072, 30)

RESULTS: dict[str, Any] = {}


def _host_size(i: int, n: int) -> str:
    # 40 % small, 40 % medium, 20 % large
    if i < n * 2 // 5:
        return "S"
    if i < n * 4 // 5:
        return "M"
    return "L"


def _api_paste() -> str:
    configured = CONF.wsgi.api_paste_config
    if os.path.exists(configured):
        return configured
    return os.path.join(sys.prefix, "etc", "nova", "api-paste.ini")


def _fault_is_no_valid_host(server: dict[str, Any]) -> bool:
    fault = server.get("fault") or {}
    return "No valid host" in (fault.get("message") or "") or "NoValidHost" in str(fault)


class Scenario(test.TestCase, integrated_helpers.PlacementInstanceHelperMixin):
    """One run of the scenario; ``test_scenario`` fills RESULTS and never asserts."""

    REQUIRES_LOCKING = True
    STUB_RPC = True  # our BrokerRPCFixture stands in for Nova's (see above)
    NUMBER_OF_CELLS = 1
    microversion = "latest"

    # -- environment --------------------------------------------------------------
    def setUp(self) -> None:
        started = time.monotonic()
        super().setUp()
        # nova.test's StandardLogging sets the root logger to DEBUG and adds a
        # NullHandler that formats every debug message (to check that Nova's own
        # debug lines format), then drops it; what is kept is INFO and up. That
        # formatting (oslo.messaging per message, lockutils per lock, keystoneauth
        # per Placement call) is CPU the one eventlet thread's services want, and
        # this scenario tests scheduling, not Nova's log lines: the root at INFO.
        logging.getLogger().setLevel(logging.INFO)
        if ARGS.log_file:
            self.addCleanup(self._dump_log)
        # 50 servers of one project: no quota (defaults: 10 instances, 20 cores)
        for quota in ("instances", "cores", "ram", "server_group_members", "server_groups"):
            self.flags(**{quota: -1}, group="quota")
        # ConfFixture sets [api] response_validation = error; Nova 34's own response
        # schema refuses some of its GET /servers/detail answers at microversion 2.104
        # while servers build ("Invalid input for field/attribute N"); validating
        # costs the one eventlet thread CPU too: off
        self.flags(response_validation="ignore", group="api")
        self.useFixture(nova_fixtures.RealPolicyFixture())
        self.neutron = self.useFixture(nova_fixtures.NeutronFixture(self))
        self.glance = self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.placement_fixture = self.useFixture(HTTPPlacementFixture(ARGS.placement_url))
        self.placement = self.placement_fixture.api
        self.useFixture(nova_fixtures.AllServicesCurrent())
        self.notifier = self.useFixture(nova_fixtures.NotificationFixture(self))
        # the wheel installs etc/nova/api-paste.ini under the venv's prefix, not
        # beside the package where nova/conf/paths.py state_path expects it
        self.flags(api_paste_config=_api_paste(), group="wsgi")
        self.api_fixture = self.useFixture(nova_fixtures.OSAPIFixture(api_version="v2.1"))
        self.admin_api = self.api_fixture.admin_api
        self.admin_api.microversion = self.microversion
        self.api = self.admin_api
        self._time_scheduler_calls()
        self.conductor = self.start_service("conductor")
        self.scheduler_service = None
        if ARGS.scheduler == "nova":
            self.scheduler_service = self.start_service("scheduler")
        self.hosts: dict[str, dict[str, Any]] = {}
        for i in range(ARGS.computes):
            size = _host_size(i, ARGS.computes)
            host = f"cmp{i + 1:02d}-{size}"
            self.flags(compute_driver=f"fake.Scenario{size}Driver")
            self._start_compute(host)
            spec = next(s for s in SIZES if s[0] == size)
            self.hosts[host] = {
                "size": size,
                "vcpus": spec[1],
                "memory_mb": spec[2],
                "local_gb": spec[3],
            }
        self.flavors = {}
        for name, vcpus, ram, disk in (*FLAVORS, RESIZE_FLAVOR):
            self.flavors[name] = self._create_flavor(
                name=name, memory_mb=ram, vcpu=vcpus, disk=disk, ephemeral=0
            )
        self.image = self.glance.auto_disk_config_enabled_image["id"]
        RESULTS["environment"] = {
            "transport_url": TRANSPORT_URL,
            "vhost": VHOST if ARGS.transport == "rabbit" else None,
            "control_exchange": EXCHANGE,
            "placement_url": self.placement_fixture.endpoint,
            "placement": "external" if ARGS.placement_url else "in-process app on a real socket",
            "concurrency": "threading" if nova_utils.concurrency_mode_threading() else "eventlet",
            "scheduler": ARGS.scheduler,
            "computes": {h: v["size"] for h, v in self.hosts.items()},
            "setup_seconds": round(time.monotonic() - started, 2),
        }

    def _dump_log(self) -> None:
        with open(ARGS.log_file, "w", encoding="utf-8") as f:
            f.write(self.stdlog.logger.output)

    def _time_scheduler_calls(self) -> None:
        """Time each select_destinations the conductor makes (the caller's side:
        nova/scheduler/client/query.py SchedulerQueryClient.select_destinations),
        and, with Nova's scheduler, the manager's own time (nova/scheduler/manager.py)."""
        from nova.scheduler import manager as sched_manager
        from nova.scheduler.client import query

        self.sched_calls: list[dict[str, Any]] = []
        self.sched_server_calls: list[float] = []
        real_query = query.SchedulerQueryClient.select_destinations
        calls = self.sched_calls

        def timed_query(
            client: Any, context: Any, spec_obj: Any, instance_uuids: Any, *a: Any, **k: Any
        ) -> Any:
            t0 = time.monotonic()
            outcome = "ok"
            try:
                return real_query(client, context, spec_obj, instance_uuids, *a, **k)
            except Exception as exc:
                outcome = type(exc).__name__
                raise
            finally:
                calls.append(
                    {
                        "uuids": list(instance_uuids or []),
                        "start": t0,
                        "seconds": time.monotonic() - t0,
                        "outcome": outcome,
                    }
                )

        self.useFixture(
            fixtures.MonkeyPatch(
                "nova.scheduler.client.query.SchedulerQueryClient.select_destinations", timed_query
            )
        )
        from nova.compute import manager as compute_manager

        self.built_at: dict[str, float] = {}
        built_at = self.built_at
        real_build = compute_manager.ComputeManager._build_and_run_instance

        def timed_build(mgr: Any, context: Any, instance: Any, *a: Any, **k: Any) -> Any:
            result = real_build(mgr, context, instance, *a, **k)
            built_at[instance.uuid] = time.monotonic()  # ACTIVE is saved by now
            return result

        self.useFixture(
            fixtures.MonkeyPatch(
                "nova.compute.manager.ComputeManager._build_and_run_instance", timed_build
            )
        )
        # when the conductor wrote a server that found no host to cell0 (ERROR)
        from nova.conductor import manager as conductor_manager

        self.buried_at: dict[str, float] = {}
        buried_at = self.buried_at
        real_bury = conductor_manager.ComputeTaskManager._bury_in_cell0

        def timed_bury(mgr: Any, context: Any, request_spec: Any, exc: Any, *a: Any, **k: Any):
            result = real_bury(mgr, context, request_spec, exc, *a, **k)
            given = dict(zip(("build_requests", "instances"), a, strict=False)) | k
            now = time.monotonic()
            for build_request in given.get("build_requests") or []:
                buried_at[build_request.instance_uuid] = now
            for instance in given.get("instances") or []:
                buried_at[instance.uuid] = now
            return result

        self.useFixture(
            fixtures.MonkeyPatch(
                "nova.conductor.manager.ComputeTaskManager._bury_in_cell0", timed_bury
            )
        )
        real_manager = sched_manager.SchedulerManager.select_destinations
        server_calls = self.sched_server_calls

        def timed_manager(mgr: Any, *a: Any, **k: Any) -> Any:
            t0 = time.monotonic()
            try:
                return real_manager(mgr, *a, **k)
            finally:
                server_calls.append(time.monotonic() - t0)

        self.useFixture(
            fixtures.MonkeyPatch(
                "nova.scheduler.manager.SchedulerManager.select_destinations", timed_manager
            )
        )

    # -- what the external scheduler needs -----------------------------------------
    def _write_nova_conf(self) -> str:
        fs = CONF.filter_scheduler
        lines = [
            "# written by tests/nova_functional/scenario.py: what this run's Nova uses",
            "[DEFAULT]",
            f"transport_url = {TRANSPORT_URL}",
            f"control_exchange = {EXCHANGE}",
            f"host = external-scheduler-{TAG}",
            f"rpc_response_timeout = {CONF.rpc_response_timeout}",
            f"long_rpc_timeout = {CONF.long_rpc_timeout}",
            f"reserved_host_memory_mb = {CONF.reserved_host_memory_mb}",
            f"reserved_host_disk_mb = {CONF.reserved_host_disk_mb}",
            f"reserved_host_cpus = {CONF.reserved_host_cpus}",
            f"initial_cpu_allocation_ratio = {CONF.initial_cpu_allocation_ratio}",
            f"initial_ram_allocation_ratio = {CONF.initial_ram_allocation_ratio}",
            f"initial_disk_allocation_ratio = {CONF.initial_disk_allocation_ratio}",
            "[filter_scheduler]",
            f"enabled_filters = {','.join(fs.enabled_filters)}",
            f"weight_classes = {','.join(fs.weight_classes)}",
        ]
        for name in (
            "ram_weight_multiplier",
            "cpu_weight_multiplier",
            "disk_weight_multiplier",
            "io_ops_weight_multiplier",
            "num_instances_weight_multiplier",
            "soft_affinity_weight_multiplier",
            "soft_anti_affinity_weight_multiplier",
            "build_failure_weight_multiplier",
            "cross_cell_move_weight_multiplier",
            "hypervisor_version_weight_multiplier",
            "host_subset_size",
            "shuffle_best_same_weighed_hosts",
            "max_instances_per_host",
            "max_io_ops_per_host",
        ):
            value = getattr(fs, name)
            lines.append(f"{name} = {str(value).lower() if isinstance(value, bool) else value}")
        lines += [
            "[scheduler]",
            f"max_attempts = {CONF.scheduler.max_attempts}",
            "[placement]",
            "# Placement of this run; noauth2: send the header x-auth-token: admin",
            f"endpoint_override = {self.placement_fixture.endpoint}",
            "auth_type = none",
            "",
        ]
        path = os.path.join(WORKDIR, "nova.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        queue = f"actorsched-nf-{TAG}"
        rabbit = ARGS.rabbit
        toml = os.path.join(WORKDIR, "actorsched.toml")
        with open(toml, "w", encoding="utf-8") as f:
            f.write(
                "# actorsched serve --config this-file  (written by scenario.py)\n"
                "[service]\n"
                f'amqp_url = "amqp://{rabbit}/{VHOST}"\n'
                f'queue = "{queue}"\n'
                "[nova]\n"
                f'config = "{path}"\n'
                f'cell_uuid = "{self.cell_mappings["cell1"].uuid}"\n'
                "# host state from this run's Placement, claims written to it (noauth2)\n"
                f'placement_url = "{self.placement_fixture.endpoint}"\n'
                "# what Placement cannot say: each node's hypervisor facts\n"
                f'placement_host_facts = "{os.path.join(WORKDIR, "host_facts.json")}"\n'
            )
        return path

    def _hosts_view(self) -> list[dict[str, Any]]:
        """Each compute as Nova and Placement see it now (for an external scheduler
        that cannot read them itself yet): written to WORKDIR/hosts.json."""
        services = {s["host"]: s for s in self.admin_api.get_services(binary="nova-compute")}
        servers = self._servers()
        # the resource tracker's compute node records: what nova-scheduler's HostState
        # reads (nova/scheduler/host_manager.py update_from_compute_node), and the one
        # usage that counts a server without Placement allocations
        ctxt = nova_context.get_admin_context()
        with nova_context.target_cell(ctxt, self.cell_mappings["cell1"]) as cctxt:
            nodes = {n.host: n for n in objects.ComputeNodeList.get_all(cctxt)}
        out = []
        for host in self.hosts:
            rp = self._provider(host)
            inv = self._get_provider_inventory(rp)
            use = self._get_provider_usages(rp)
            svc = services.get(host, {})
            base = self.computes[host].manager.driver.host_status_base
            node = nodes.get(host)
            out.append(
                {
                    "host": host,
                    "compute_node": None
                    if node is None
                    else {
                        "uuid": node.uuid,
                        "memory_mb": node.memory_mb,
                        "memory_mb_used": node.memory_mb_used,  # with reserved_host_memory_mb
                        "vcpus": node.vcpus,
                        "vcpus_used": node.vcpus_used,
                        "local_gb": node.local_gb,
                        "local_gb_used": node.local_gb_used,
                        "running_vms": node.running_vms,
                    },
                    "node": host,  # the fake driver's nodename (nova/virt/fake.py init_host)
                    "hypervisor_type": base["hypervisor_type"],
                    "hypervisor_version": base["hypervisor_version"],
                    "supported_instances": [list(t) for t in base["supported_instances"]],
                    "provider_uuid": rp,
                    "up": svc.get("state") == "up" and not svc.get("forced_down"),
                    "enabled": svc.get("status") == "enabled",
                    "inventory": inv,
                    "usages": use,
                    "instances": sorted(
                        s["id"] for s in servers if s.get("OS-EXT-SRV-ATTR:host") == host
                    ),
                }
            )
        return out

    def _publish_hosts(self) -> None:
        path = os.path.join(WORKDIR, "hosts.json")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"at": time.time(), "hosts": self._hosts_view()}, f)
        os.replace(tmp, path)

    def _write_host_facts(self) -> str:
        """Each node's hypervisor facts (what Nova's scheduler reads from the compute
        node records and Placement does not hold), for actorsched's
        ``[nova] placement_host_facts``."""
        facts = {}
        for host in self.hosts:
            base = self.computes[host].manager.driver.host_status_base
            facts[host] = {  # the fake driver's nodename is the host
                "hypervisor_type": base["hypervisor_type"],
                "hypervisor_version": base["hypervisor_version"],
                "supported_instances": [list(t) for t in base["supported_instances"]],
            }
        path = os.path.join(WORKDIR, "host_facts.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(facts, f, indent=1)
        return path

    def _wait_for_external(self) -> bool:
        conf = self._write_nova_conf()
        facts = self._write_host_facts()
        self._publish_hosts()
        ready = {
            "nova_conf": conf,
            "actorsched_toml": os.path.join(WORKDIR, "actorsched.toml"),
            "hosts_json": os.path.join(WORKDIR, "hosts.json"),
            "host_facts_json": facts,
            "transport_url": TRANSPORT_URL,
            "amqp_url": f"amqp://{ARGS.rabbit}/{VHOST}",
            "control_exchange": EXCHANGE,
            "topic": "scheduler",
            "placement_url": self.placement_fixture.endpoint,
            "cell_uuid": self.cell_mappings["cell1"].uuid,
            "go_file": ARGS.go_file,
            "command": f"actorsched serve --config {os.path.join(WORKDIR, 'actorsched.toml')}",
        }
        print("READY " + json.dumps(ready), flush=True)
        deadline = time.monotonic() + ARGS.wait_timeout
        consumers = 0
        while time.monotonic() < deadline:
            consumers = self._scheduler_consumers()
            if consumers and (not ARGS.go_file or os.path.exists(ARGS.go_file)):
                RESULTS["external"] = {"consumers": consumers, **ready}
                return True
            time.sleep(0.5)
        RESULTS["external"] = {
            "consumers": consumers,
            "error": f"nothing consumed queue 'scheduler' on vhost {VHOST} "
            f"(or {ARGS.go_file} was not made) within {ARGS.wait_timeout} s",
            **ready,
        }
        return False

    def _scheduler_consumers(self) -> int:
        if ARGS.transport != "rabbit":
            return 0
        import kombu

        try:
            with kombu.Connection(f"amqp://{ARGS.rabbit}/{VHOST}", connect_timeout=5) as conn:
                _, _, consumers = conn.default_channel.queue_declare(
                    queue="scheduler", passive=True
                )
                return int(consumers)
        except Exception:
            return 0

    # -- reading Nova and Placement --------------------------------------------------
    def _servers(self) -> list[dict[str, Any]]:
        return self.admin_api.get_servers(search_opts={"all_tenants": 1})

    def _provider(self, host: str) -> str:
        cached = self.hosts[host].get("rp")
        if not cached:
            cached = self.hosts[host]["rp"] = self._get_provider_uuid_by_name(host)
        return cached

    def _wait_servers(
        self, ids: list[str], done: Any, timeout: float, every: float = 1.0, idle: float = 5.0
    ) -> dict[str, dict[str, Any]]:
        """Poll until ``done(server)`` for every id; returns the last view, and records
        when each one first was done (monotonic).

        A GET /servers/detail of 50 servers costs the process's one eventlet thread
        ~0.3 s of CPU that the services want (13 s of wall time on a loaded
        machine): it is asked every ``every`` seconds only while this process's
        own hooks say every server was built or buried in cell0, and every
        ``idle`` seconds otherwise (a server can settle by another path, a
        reschedule that ran out of hosts)."""
        deadline = time.monotonic() + timeout
        self.first_done: dict[str, float] = {}
        last: dict[str, dict[str, Any]] = {}
        asked = 0.0
        while True:
            now = time.monotonic()
            landed = all(sid in self.built_at or sid in self.buried_at for sid in ids)
            if now - asked >= (every if landed else idle) or now > deadline:
                asked = now
                last = {s["id"]: s for s in self._servers() if s["id"] in ids}
                now = time.monotonic()
                for sid, s in last.items():
                    if sid not in self.first_done and done(s):
                        self.first_done[sid] = now
                if all(sid in self.first_done for sid in ids) or now > deadline:
                    return last
            time.sleep(0.2)

    @staticmethod
    def _settled(s: dict[str, Any]) -> bool:
        return s["status"] in ("ACTIVE", "ERROR") and not s.get("OS-EXT-STS:task_state")

    # -- checks -------------------------------------------------------------------
    def _check(self, step: str) -> dict[str, Any]:
        """Every invariant, recorded (never raised): a list of failures per check."""
        servers = self._servers()
        fails: dict[str, list[str]] = {
            "servers_settled": [],
            "usage_matches_flavors": [],
            "allocations_match_flavors": [],
            "within_capacity": [],
            "servers_within_capacity": [],
            "anti_affinity": [],
            "affinity": [],
        }
        expected: dict[str, dict[str, int]] = {h: {} for h in self.hosts}
        by_id = {s["id"]: s for s in servers}
        active = 0
        for s in servers:
            host = s.get("OS-EXT-SRV-ATTR:host")
            if (
                s["status"] == "ACTIVE"
                and host in self.hosts
                and not s.get("OS-EXT-STS:task_state")
            ):
                active += 1
                f = s["flavor"]
                want = {
                    "VCPU": f["vcpus"],
                    "MEMORY_MB": f["ram"],
                    "DISK_GB": f["disk"] + f["ephemeral"],
                }
                for rc, amount in want.items():
                    expected[host][rc] = expected[host].get(rc, 0) + amount
                allocs = self.placement.get(f"/allocations/{s['id']}", version="1.28").body.get(
                    "allocations", {}
                )
                rp = self._provider(host)
                got = {rp_uuid: a["resources"] for rp_uuid, a in allocs.items()}
                if got != {rp: want}:
                    fails["allocations_match_flavors"].append(
                        f"server {s['name']} ({s['id']}) on {host} ({rp}): Placement has "
                        f"{json.dumps(got, sort_keys=True)}, flavor {s['flavor']['original_name']} "
                        f"wants {json.dumps(want, sort_keys=True)} on {rp}"
                    )
            elif s["status"] == "ERROR" and _fault_is_no_valid_host(s):
                if host in self.hosts:  # a move that failed: it stays where it was
                    f = s["flavor"]
                    for rc, amount in (
                        ("VCPU", f["vcpus"]),
                        ("MEMORY_MB", f["ram"]),
                        ("DISK_GB", f["disk"] + f["ephemeral"]),
                    ):
                        expected[host][rc] = expected[host].get(rc, 0) + amount
                continue
            else:
                fault = (s.get("fault") or {}).get("message")
                fails["servers_settled"].append(
                    f"server {s['name']} ({s['id']}): status {s['status']}, task "
                    f"{s.get('OS-EXT-STS:task_state')}, host {host}, fault {fault!r}"
                )
        for host in self.hosts:
            rp = self._provider(host)
            usages = {rc: v for rc, v in self._get_provider_usages(rp).items() if v}
            want = {rc: v for rc, v in expected[host].items() if v}
            if usages != want:
                fails["usage_matches_flavors"].append(
                    f"{host} ({rp}): Placement usages {json.dumps(usages, sort_keys=True)}, "
                    f"flavors of its servers {json.dumps(want, sort_keys=True)}"
                )
            inv = self._get_provider_inventory(rp)
            # the servers on the host must fit it too, whatever Placement recorded
            for rc, used in want.items():
                i = inv.get(rc)
                cap = (i["total"] - i["reserved"]) * i["allocation_ratio"] if i else 0
                if used > cap:
                    fails["servers_within_capacity"].append(
                        f"{host}: its servers' {rc} {used} > capacity {cap:g}"
                    )
            for rc, used in usages.items():
                i = inv.get(rc)
                if i is None:
                    fails["within_capacity"].append(f"{host}: usage of {rc} with no inventory")
                    continue
                cap = (i["total"] - i["reserved"]) * i["allocation_ratio"]
                if used > cap:
                    fails["within_capacity"].append(f"{host}: {rc} used {used} > capacity {cap:g}")
        for group in self.groups.values():
            members = [
                by_id[m]
                for m in self.admin_api.get_server_group(group["id"])["members"]
                if m in by_id and by_id[m]["status"] == "ACTIVE"
            ]
            hosts = [m.get("OS-EXT-SRV-ATTR:host") for m in members]
            if group["policy"] == "anti-affinity" and len(set(hosts)) != len(hosts):
                fails["anti_affinity"].append(f"group {group['name']}: hosts {sorted(hosts)}")
            if group["policy"] == "affinity" and len(set(hosts)) > 1:
                fails["affinity"].append(f"group {group['name']}: hosts {sorted(hosts)}")
        counts = {
            "servers": len(servers),
            "active": active,
            "error_no_valid_host": sum(
                1 for s in servers if s["status"] == "ERROR" and _fault_is_no_valid_host(s)
            ),
        }
        ok = not any(fails.values())
        record = {"ok": ok, **counts, "failures": {k: v for k, v in fails.items() if v}}
        if ARGS.scheduler == "external":
            self._publish_hosts()
        return record

    def _step(self, name: str, action: Any) -> None:
        t0 = time.monotonic()
        record: dict[str, Any] = {}
        try:
            record["detail"] = action()
        except Exception as exc:
            record["error"] = f"{type(exc).__name__}: {exc}"[:600]
            record["traceback"] = traceback.format_exc()[-3000:]
        record["seconds"] = round(time.monotonic() - t0, 2)
        try:
            record["check"] = self._check(name)
        except Exception as exc:
            record["check"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600]}
        record["ok"] = "error" not in record and record["check"]["ok"]
        RESULTS["steps"].append({"step": name, **record})
        brief = {
            "step": name,
            "ok": record["ok"],
            "seconds": record["seconds"],
            "error": record.get("error", "")[:300],
            "failed_checks": sorted(record["check"].get("failures") or {}),
        }
        print("STEP " + json.dumps(brief), flush=True)

    # -- the scenario -------------------------------------------------------------
    def test_scenario(self) -> None:
        RESULTS["steps"] = []
        if ARGS.scheduler == "external" and not self._wait_for_external():
            return
        self._step("boot", self._boot)
        self._step("make_room", self._make_room)
        self._step("resize_confirm", self._resize_confirm)
        self._step("migrate_confirm", lambda: self._migrate(confirm=True))
        self._step("migrate_revert", lambda: self._migrate(confirm=False))
        self._step("evacuate", self._evacuate)
        self._step("delete", self._delete_all)
        RESULTS["scenario_done_at"] = time.monotonic()
        if not ARGS.full_teardown:
            # Stopping each service waits ~5 s for its oslo.messaging listener on
            # the broker (2 min for 22 services): the broker's side goes with the
            # vhost, the databases are in memory; so exit now
            RESULTS.pop("scenario_done_at")
            RESULTS["teardown"] = "skipped (os._exit after the report; --full-teardown runs it)"
            if ARGS.log_file:
                self._dump_log()
            _drop_vhost()
            code = _report([])
            sys.stdout.flush()
            os._exit(code)

    def _post(self, body: dict[str, Any], hints: dict[str, Any] | None = None) -> Any:
        req = {"server": body}
        if hints:
            req["os:scheduler_hints"] = hints
        return self.admin_api.post_server(req)

    def _body(self, name: str, flavor: str, count: int = 1) -> dict[str, Any]:
        body = {
            "name": name,
            "imageRef": self.image,
            "flavorRef": self.flavors[flavor],
            "networks": "none",
        }
        if count > 1:
            body["min_count"] = body["max_count"] = count
        return body

    def _boot(self) -> dict[str, Any]:
        from concurrent.futures import ThreadPoolExecutor

        self.groups = {}
        for name, policy in (("anti", "anti-affinity"), ("aff", "affinity")):
            g = self.admin_api.post_server_groups({"name": name, "policy": policy})
            self.groups[g["id"]] = {"id": g["id"], "name": name, "policy": policy}
        anti, aff = list(self.groups)
        n = ARGS.servers
        n_anti, n_aff = min(4, n), min(3, max(0, n - 4))
        requests: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
            (self._body("anti", "f.small", n_anti), {"group": anti}),
        ]
        if n_aff:
            requests.append((self._body("aff", "f.small", n_aff), {"group": aff}))
        names = [f for f, *_ in FLAVORS]
        for i in range(n - n_anti - n_aff):
            flavor = names[(i * 7 + ARGS.seed) % len(names)]
            requests.append((self._body(f"vm{i:02d}-{flavor[2:]}", flavor), None))
        posted_at: dict[str, float] = {}
        first_call = len(self.sched_calls)

        def post(item: tuple[dict[str, Any], dict[str, Any] | None]) -> tuple[float, Any]:
            t = time.monotonic()
            return t, self._post(*item)

        t0 = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(post, requests))
        posted = time.monotonic()
        multi = sum(1 for body, _ in requests if body.get("min_count", 1) > 1)
        # every server of the run (a multi-create's members are named "<name>-<n>")
        request_at = {body["name"]: t for (body, _), (t, _) in zip(requests, answers, strict=True)}
        for s in self._servers():
            base = s["name"].rsplit("-", 1)[0] if s["name"] not in request_at else s["name"]
            posted_at[s["id"]] = request_at.get(base, request_at.get(s["name"], t0))
        ids = list(posted_at)
        # 50 boots through Nova's own scheduler take 90-150 s here (all of Nova in
        # one eventlet thread, more on a loaded machine): the boot gets more time
        last = self._wait_servers(ids, self._settled, 3 * ARGS.step_timeout)
        active = [sid for sid, s in last.items() if s["status"] == "ACTIVE"]
        nvh = [
            sid for sid, s in last.items() if s["status"] == "ERROR" and _fault_is_no_valid_host(s)
        ]
        # ACTIVE: when the compute's _build_and_run_instance returned; NoValidHost: when
        # the conductor wrote it to cell0; else first seen settled
        done_at = {
            sid: self.built_at.get(sid, self.buried_at.get(sid, self.first_done.get(sid)))
            for sid in ids
        }
        done_at = {sid: t for sid, t in done_at.items() if t is not None}
        wall = max(done_at.values(), default=time.monotonic()) - t0
        boot_secs = {sid: done_at[sid] - posted_at[sid] for sid in done_at}
        calls = self.sched_calls[first_call:]
        per_uuid: dict[str, float] = {}
        for c in calls:
            for u in c["uuids"]:
                per_uuid[u] = per_uuid.get(u, 0.0) + c["seconds"]
        shares = [per_uuid[u] / boot_secs[u] for u in active if u in per_uuid and boot_secs.get(u)]
        sched_active = sum(per_uuid.get(u, 0.0) for u in active)
        boot_active = sum(boot_secs.get(u, 0.0) for u in active)
        secs = sorted(c["seconds"] for c in calls)
        timing = {
            "posted_seconds": round(posted - t0, 3),
            "wall_seconds": round(wall, 3),
            "boots_per_second": round(len(active) / wall, 3) if wall > 0 else None,
            "settled_per_second": round(len(self.first_done) / wall, 3) if wall > 0 else None,
            "boot_seconds_mean": round(boot_active / len(active), 3) if active else None,
            "boot_seconds_max": round(
                max((boot_secs[u] for u in active if u in boot_secs), default=0), 3
            ),
            "select_destinations_calls": len(calls),
            "select_destinations_outcomes": {
                o: sum(1 for c in calls if c["outcome"] == o) for o in {c["outcome"] for c in calls}
            },
            "select_destinations_seconds_p50": round(secs[len(secs) // 2], 4) if secs else None,
            "select_destinations_seconds_max": round(secs[-1], 4) if secs else None,
            "scheduler_share_of_boot": round(sched_active / boot_active, 4)
            if boot_active
            else None,
            "scheduler_share_of_boot_mean": round(sum(shares) / len(shares), 4) if shares else None,
            "nova_scheduler_manager_seconds_total": round(sum(self.sched_server_calls), 4),
            "note": "boot = its POST to the end of the compute's _build_and_run_instance "
            "(ACTIVE saved); scheduler = the conductor's select_destinations call for that "
            "server (the whole call for a multi-create's members); wall = first POST to "
            "the last server built; every service, the API and Placement share one "
            "eventlet thread of this process",
        }
        RESULTS["timing"] = timing
        self.boot_ids = ids
        return {
            "requests": len(requests),
            "multi_create_requests": multi,
            "servers": len(ids),
            "active": len(active),
            "no_valid_host": len(nvh),
            "not_settled": [sid for sid in ids if sid not in self.first_done],
            "reached_no_valid_host": bool(nvh),
        }

    def _make_room(self) -> dict[str, Any]:
        """Delete the NoValidHost servers and every second plain server, keeping the groups."""
        members = set()
        for g in self.groups:
            members.update(self.admin_api.get_server_group(g)["members"])
        servers = self._servers()
        doomed = [s for s in servers if s["status"] == "ERROR"]
        plain = sorted(
            (s for s in servers if s["status"] == "ACTIVE" and s["id"] not in members),
            key=lambda s: s["name"],
        )
        doomed += plain[::2]
        for s in doomed:
            self.admin_api.delete_server(s["id"])
        self._wait_gone([s["id"] for s in doomed])
        return {"deleted": len(doomed)}

    def _wait_gone(self, ids: list[str]) -> None:
        deadline = time.monotonic() + ARGS.step_timeout
        left = set(ids)
        while left and time.monotonic() < deadline:
            # GET /servers (no detail): a deleted server is no longer listed
            listed = self.admin_api.get_servers(detail=False, search_opts={"all_tenants": 1})
            left &= {s["id"] for s in listed}
            if left:
                time.sleep(1.0)
        if left:
            raise AssertionError(f"{len(left)} servers not deleted within {ARGS.step_timeout} s")

    def _plain_active(self) -> list[dict[str, Any]]:
        members = set()
        for g in self.groups:
            members.update(self.admin_api.get_server_group(g)["members"])
        return sorted(
            (s for s in self._servers() if s["status"] == "ACTIVE" and s["id"] not in members),
            key=lambda s: s["name"],
        )

    def _wait_status(self, sid: str, status: str, action: str | None = None) -> dict[str, Any]:
        """Poll the server until ``status``; with ``action`` (a move just asked), fail
        as soon as that action's instance-action events say Error (Nova puts a server
        whose move found no host back to ACTIVE, with no fault)."""
        deadline = time.monotonic() + ARGS.step_timeout
        for turn in itertools.count():
            s = self.admin_api.get_server(sid)
            if s["status"] == status and not s.get("OS-EXT-STS:task_state"):
                return s
            # the actions (two more calls) every fifth poll, and at the deadline
            late = time.monotonic() > deadline
            failed = (
                self._failed_action(sid, action) if action and (turn % 5 == 4 or late) else None
            )
            if failed or s["status"] == "ERROR" or late:
                fault = (s.get("fault") or {}).get("message")
                raise AssertionError(
                    f"server {s['name']} is {s['status']} (task {s.get('OS-EXT-STS:task_state')}), "
                    f"not {status}; fault {fault!r}" + (f"; {failed}" if failed else "")
                )
            time.sleep(0.3)

    def _failed_action(self, sid: str, action: str) -> str | None:
        actions = self.admin_api.api_get(f"/servers/{sid}/os-instance-actions").body[
            "instanceActions"
        ]
        mine = [a for a in actions if a["action"] == action]
        if not mine:
            return None
        latest = max(mine, key=lambda a: a["start_time"])
        events = (
            self.admin_api.api_get(f"/servers/{sid}/os-instance-actions/{latest['request_id']}")
            .body["instanceAction"]
            .get("events", [])
        )
        bad = [e for e in events if e.get("result") == "Error"]
        if not bad:
            return None
        return "; ".join(
            f"instance action {action} event {e['event']}: Error"
            + (f" ({e['details']})" if e.get("details") else "")
            for e in bad
        )

    def _wait_migration(self, sid: str, statuses: tuple[str, ...]) -> dict[str, Any]:
        deadline = time.monotonic() + ARGS.step_timeout
        while True:
            migs = [m for m in self.admin_api.get_migrations() if m["instance_uuid"] == sid]
            migs.sort(key=lambda m: m["id"])
            if migs and migs[-1]["status"] in statuses:
                return migs[-1]
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"migration of {sid}: {migs[-1]['status'] if migs else 'none'}, not {statuses}"
                )
            time.sleep(0.5)

    def _resize_confirm(self) -> dict[str, Any]:
        s = self._plain_active()[0]
        before = s["OS-EXT-SRV-ATTR:host"]
        self.admin_api.post_server_action(
            s["id"], {"resize": {"flavorRef": self.flavors[RESIZE_FLAVOR[0]]}}
        )
        s2 = self._wait_status(s["id"], "VERIFY_RESIZE", action="resize")
        self.admin_api.post_server_action(s["id"], {"confirmResize": None})
        self._wait_migration(s["id"], ("confirmed",))
        s3 = self._wait_status(s["id"], "ACTIVE")
        return {
            "server": s["name"],
            "from": before,
            "to": s2["OS-EXT-SRV-ATTR:host"],
            "flavor": s3["flavor"]["original_name"],
        }

    def _migrate(self, confirm: bool) -> dict[str, Any]:
        s = self._plain_active()[1 if confirm else 2]
        before = s["OS-EXT-SRV-ATTR:host"]
        self.admin_api.post_server_action(s["id"], {"migrate": None})
        s2 = self._wait_status(s["id"], "VERIFY_RESIZE", action="migrate")
        if confirm:
            self.admin_api.post_server_action(s["id"], {"confirmResize": None})
            self._wait_migration(s["id"], ("confirmed",))
        else:
            self.admin_api.post_server_action(s["id"], {"revertResize": None})
            self._wait_migration(s["id"], ("reverted",))
        s3 = self._wait_status(s["id"], "ACTIVE")
        # revert: the source's finish_revert_resize frees the destination's
        # allocations after the migration says reverted; wait for the host too
        deadline = time.monotonic() + 10
        while s3["OS-EXT-SRV-ATTR:host"] != (s2["OS-EXT-SRV-ATTR:host"] if confirm else before):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
            s3 = self.admin_api.get_server(s["id"])
        time.sleep(0.5)
        return {
            "server": s["name"],
            "from": before,
            "to": s2["OS-EXT-SRV-ATTR:host"],
            "now": s3["OS-EXT-SRV-ATTR:host"],
        }

    def _evacuate(self) -> dict[str, Any]:
        servers = [s for s in self._servers() if s["status"] == "ACTIVE"]
        members_of: dict[str, str] = {}
        for g in self.groups.values():
            for m in self.admin_api.get_server_group(g["id"])["members"]:
                members_of[m] = g["policy"]
        # the host with the most servers, none of them an affinity member (whose
        # group pins it to its host: an evacuation of one member must fail)
        pinned = {
            s["OS-EXT-SRV-ATTR:host"] for s in servers if members_of.get(s["id"]) == "affinity"
        }
        count: dict[str, int] = {}
        for s in servers:
            h = s["OS-EXT-SRV-ATTR:host"]
            if h not in pinned:
                count[h] = count.get(h, 0) + 1
        if not count:
            raise AssertionError(
                "no host to evacuate: every ACTIVE server's host holds an affinity group "
                f"({sorted(pinned)})"
            )
        host = max(sorted(count), key=lambda h: count[h])
        victims = [s for s in servers if s["OS-EXT-SRV-ATTR:host"] == host]
        compute = self.computes[host]
        compute.stop()
        svc = self.admin_api.get_services(binary="nova-compute", host=host)[0]
        self.admin_api.put_service_force_down(svc["id"], True)
        if ARGS.scheduler == "external":
            self._publish_hosts()
        moved = {}
        for s in victims:
            self.admin_api.post_server_action(s["id"], {"evacuate": {}})
        errors = []
        for s in victims:
            try:
                self._wait_migration(s["id"], ("done", "error", "failed"))
                # API >= 2.95: an evacuated server is stopped on its new host
                s2 = self._wait_status(s["id"], "SHUTOFF")
                self.admin_api.post_server_action(s["id"], {"os-start": None})
                s2 = self._wait_status(s["id"], "ACTIVE")
                moved[s["name"]] = s2["OS-EXT-SRV-ATTR:host"]
            except AssertionError as exc:
                errors.append(str(exc))
        # the source comes back: its compute deletes the evacuated guests and their
        # source allocations (nova/compute/manager.py _destroy_evacuated_instances)
        self.computes[host] = self.restart_compute_service(compute, keep_hypervisor_state=True)
        self.admin_api.put_service_force_down(svc["id"], False)
        time.sleep(0.5)
        if errors:
            raise AssertionError("; ".join(errors))
        return {"host": host, "servers": len(victims), "to": moved}

    def _delete_all(self) -> dict[str, Any]:
        servers = self._servers()
        for s in servers:
            self.admin_api.delete_server(s["id"])
        self._wait_gone([s["id"] for s in servers])
        return {"deleted": len(servers)}


STARTED = time.monotonic()


def _report(problems: list[dict[str, str]]) -> int:
    """Print the one JSON document; the exit code."""
    if problems:
        RESULTS["harness_errors"] = problems
    steps = RESULTS.get("steps", [])
    RESULTS["checks_passed"] = bool(steps) and all(s["ok"] for s in steps)
    RESULTS["failed_steps"] = [
        {
            "step": s["step"],
            "error": s.get("error"),
            "failures": s.get("check", {}).get("failures") or s.get("check", {}).get("error"),
        }
        for s in steps
        if not s["ok"]
    ]
    RESULTS["seconds"] = round(time.monotonic() - STARTED, 2)
    RESULTS["ok"] = RESULTS["checks_passed"] and "harness_errors" not in RESULTS
    print("RESULT " + json.dumps(RESULTS, default=str), flush=True)
    if "environment" not in RESULTS:
        return 2
    return 0 if RESULTS["ok"] else 1


def main() -> int:
    import unittest

    result = unittest.TestResult()
    case = Scenario("test_scenario")
    try:
        case.run(result)
    finally:
        _drop_vhost()
    done = RESULTS.pop("scenario_done_at", None)
    if done:
        RESULTS["teardown_seconds"] = round(time.monotonic() - done, 2)
    return _report(
        [{"where": w, "error": tb[-4000:]} for w, tb in (*result.errors, *result.failures)]
    )


if __name__ == "__main__":
    sys.exit(main())
