"""Nova's side of :mod:`benchmarks.nova_manager`, run in Nova's venv (nothing of actorsched).

``.venv-nova/bin/python -m benchmarks.nova_manager_side CONF WORKDIR HOSTS TOPIC`` makes a
Nova database in WORKDIR (SQLite: an API database with one cell mapping and HOSTS host
mappings, a cell database with HOSTS compute nodes and their nova-compute services,
the sizes of :func:`benchmarks.nova_caller.figures`), then runs Nova 34's own
``nova-scheduler`` (``nova.service.Service.create``, the threading backend
``nova/cmd/scheduler.py`` chooses, one worker) on TOPIC, prints ``READY`` and
serves until killed. Placement is CONF's ``[placement] endpoint_override``.
The callers are :mod:`benchmarks.nova_caller`'s.
"""

from __future__ import annotations

import datetime
import sys
import uuid
from pathlib import Path
from typing import Any

from .nova_caller import figures, host_name, node_uuid


def _database(workdir: Path, hosts: int, transport_url: str) -> None:
    import importlib

    sa = importlib.import_module("sqlalchemy")  # Nova's venv only
    from nova.db.api import models as api_models
    from nova.db.main import models as main_models
    from nova.objects import service as service_obj

    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    cell_url = f"sqlite:///{workdir / 'cell1.db'}"
    api = sa.create_engine(f"sqlite:///{workdir / 'api.db'}")
    cell = sa.create_engine(cell_url)
    api_models.BASE.metadata.create_all(api)
    main_models.BASE.metadata.create_all(cell)
    with api.begin() as db:
        db.execute(
            sa.insert(api_models.CellMapping),
            [
                {
                    "uuid": "5b0c9e04-4d7a-4c55-8d3c-0d6f1d0a7c11",
                    "name": "cell1",
                    "transport_url": transport_url,
                    "database_connection": cell_url,
                    "disabled": False,
                    "created_at": now,
                }
            ],
        )
        db.execute(
            sa.insert(api_models.HostMapping),
            [{"host": host_name(i), "cell_id": 1, "created_at": now} for i in range(hosts)],
        )
    with cell.begin() as db:
        db.execute(
            sa.insert(main_models.Service),
            [
                {
                    "id": i + 1,
                    "uuid": str(uuid.UUID(int=i + 1)),
                    "host": host_name(i),
                    "binary": "nova-compute",
                    "topic": "compute",
                    "report_count": 1,
                    "disabled": False,
                    "forced_down": False,
                    "version": service_obj.SERVICE_VERSION,
                    "last_seen_up": now,
                    "created_at": now,
                    "updated_at": now,
                    "deleted": 0,
                }
                for i in range(hosts)
            ],
        )
        rows = []
        for i in range(hosts):
            f = figures(i)
            rows.append(
                {
                    "id": i + 1,
                    "uuid": node_uuid(i),
                    "service_id": None,
                    "host": host_name(i),
                    "hypervisor_hostname": host_name(i),
                    "hypervisor_type": "QEMU",
                    "hypervisor_version": 8002000,
                    "cpu_info": "{}",
                    "host_ip": "192.0.2.1",
                    **f,
                    "free_ram_mb": f["memory_mb"] - f["memory_mb_used"],
                    "free_disk_gb": f["local_gb"] - f["local_gb_used"],
                    "current_workload": 0,
                    "running_vms": 0,
                    "disk_available_least": None,
                    "supported_instances": "[]",
                    "metrics": "[]",
                    "pci_stats": None,
                    "extra_resources": None,
                    "stats": "{}",
                    "numa_topology": None,
                    "cpu_allocation_ratio": 4.0,
                    "ram_allocation_ratio": 1.0,
                    "disk_allocation_ratio": 1.0,
                    "mapped": 1,
                    "created_at": now,
                    "updated_at": now,
                    "deleted": 0,
                }
            )
        db.execute(sa.insert(main_models.ComputeNode), rows)


def serve(conf: str, workdir: Path, hosts: int, topic: str) -> None:
    from nova import monkey_patch

    monkey_patch.patch(backend="threading")  # as nova/cmd/scheduler.py

    import nova.conf
    from nova import config, objects, service
    from nova.scheduler import host_manager

    config.parse_args(["nova-scheduler", "--config-file", conf])
    objects.register_all()
    _database(workdir, hosts, nova.conf.CONF.transport_url)
    names = [host_name(i) for i in range(hosts)]
    original = host_manager.HostManager._init_instance_info

    def synced(self: Any, computes_by_cell: Any = None) -> None:
        # Nova loads the instances in a thread, then each nova-compute's
        # sync_instance_info marks its host synced; these computes run none, so
        # every host is synced and empty (else Nova reads each host's instances
        # from the database per request)
        spawn = host_manager.thread_pool_factory.spawn
        host_manager.thread_pool_factory.spawn = lambda f, *a, **k: f(*a, **k)
        try:
            original(self, computes_by_cell)
        finally:
            host_manager.thread_pool_factory.spawn = spawn
        for name in names:
            self._instance_info.setdefault(name, {"instances": {}})["updated"] = True

    host_manager.HostManager._init_instance_info = synced
    server = service.Service.create(binary="nova-scheduler", topic=topic)
    service.serve(server, workers=1)
    print("READY", flush=True)
    service.wait()


def main() -> int:
    conf, workdir, hosts, topic = sys.argv[1:5]
    serve(conf, Path(workdir), int(hosts), topic)
    return 0


if __name__ == "__main__":
    sys.exit(main())
