"""Real OpenStack Nova's scheduler code on the realistic workload, in Nova's own venv.

Run as ``.venv-nova/bin/python -m benchmarks.nova_real WORKLOAD.json [--budget S]``
from the repository root (``make nova-venv`` makes that venv with ``pip install
nova``; Nova's dependencies pin versions of their own, so it is kept apart
from ours). It prints one JSON object on stdout. Nothing here imports
actorsched: the workload is plain data (:mod:`benchmarks.realistic`).

What runs is Nova's own code, without a database or RPC:

* ``nova.scheduler.host_manager.HostState`` objects, refreshed per request
  from ``nova.objects.ComputeNode`` records through ``HostState.update``
  (compute node, service, aggregates, instances), as the host manager's
  ``_get_host_states`` does; kept between requests (Rocky's
  ``host_state_map``), so a claim consumed by ``consume_from_request`` stays
  until the node's next report, as in actorsched;
* ``SchedulerManager._get_sorted_hosts``: the host manager's
  ``get_filtered_hosts`` (``HostFilterHandler`` over the release's default
  ``enabled_filters`` plus NumInstancesFilter and IoOpsFilter, at Nova's
  default limits, and AggregateInstanceExtraSpecsFilter when the workload
  has aggregates), then ``get_weighed_hosts`` (``HostWeightHandler``, all of
  the release's weighers, Nova's default), then the host_subset_size pick;
* ``SchedulerManager._consume_selected_host`` after each claim (the HostState's
  ``consume_from_request`` and the group's hosts).

One difference is Nova's own, and shows in the counts: when a
multi-instance request fails part way, the instances already chosen stay
consumed on their HostStates until those nodes report again (Nova rolls
back Placement's allocations, not the HostStates), where actorsched's
all-or-nothing claim rolls them back; so Nova refuses a few more requests
(e.g. a later member of an affinity group whose host then looks full of
I/O operations).

RAM/CPU/disk, the zone and required traits are decided by Placement in
current Nova (RamFilter, CoreFilter, DiskFilter and AvailabilityZoneFilter
are gone). Placement is a service with a database; here a plain Python loop
over the hosts stands in for its allocation-candidates query and its claim,
with the same allocation ratios. That stand-in is far cheaper than the real
HTTP and SQL round trips, so these figures flatter Nova.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

from benchmarks.realistic import Fleet, load

_IDS_SHOWN = 200  # the first requests refused, to compare with actorsched's
DEFAULT_FILTERS_EXTRA = ["NumInstancesFilter", "IoOpsFilter"]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class NovaRunner:
    """The hosts, Nova's host manager and scheduler manager, and the Placement stand-in."""

    def __init__(self, workload: dict[str, Any]) -> None:
        import nova.conf
        from nova import objects

        objects.register_all()
        from nova.scheduler import filters, host_manager, manager, weights

        self.objects = objects
        conf = nova.conf.CONF
        conf([], project="nova", default_config_files=[])
        aggregates = bool(workload["components"]["aggregates"])
        enabled = list(conf.filter_scheduler.enabled_filters) + DEFAULT_FILTERS_EXTRA
        if aggregates:
            enabled.append("AggregateInstanceExtraSpecsFilter")
        conf.set_override("enabled_filters", enabled, "filter_scheduler")
        conf.set_override(
            "max_instances_per_host", workload["max_instances_per_host"], "filter_scheduler"
        )
        conf.set_override(
            "max_io_ops_per_host", workload["max_io_ops_per_host"], "filter_scheduler"
        )
        self.conf = conf
        self.enabled_filters = enabled
        self.version = _nova_version()

        hm = host_manager.HostManager.__new__(host_manager.HostManager)
        hm.filter_handler = filters.HostFilterHandler()
        classes = hm.filter_handler.get_matching_classes(conf.filter_scheduler.available_filters)
        hm.filter_cls_map = {cls.__name__: cls for cls in classes}
        hm.filter_obj_map = {}
        hm.enabled_filters = hm._choose_host_filters(hm._load_filters())
        hm.weight_handler = weights.HostWeightHandler()
        weigher_classes = hm.weight_handler.get_matching_classes(
            conf.filter_scheduler.weight_classes
        )
        hm.weighers = [cls() for cls in weigher_classes]
        hm.aggs_by_id = {}
        hm.host_aggregates_map = {h["host"]: set() for h in workload["hosts"]}
        hm.track_instance_changes = True
        hm._instance_info = {}
        self.weighers = [type(w).__name__ for w in hm.weighers]
        self.hm = hm
        self.sm = manager.SchedulerManager.__new__(manager.SchedulerManager)
        self.sm.host_manager = hm
        self.manager_cls = manager.SchedulerManager
        for i, agg in enumerate(workload["aggregates"]):
            obj = objects.Aggregate(
                id=i + 1, name=agg["name"], hosts=list(agg["hosts"]), metadata=dict(agg["metadata"])
            )
            hm.update_aggregates([obj])

        self.workload = workload
        self.fleet = Fleet(workload)
        self.ratios = (
            workload["ram_allocation_ratio"],
            workload["cpu_allocation_ratio"],
            workload["disk_allocation_ratio"],
        )
        self.host_names = [h["host"] for h in workload["hosts"]]
        self.figures = {h["host"]: h for h in workload["hosts"]}
        now = _utcnow()
        self.services = {
            h["host"]: {
                "id": i + 1,
                "host": h["host"],
                "binary": "nova-compute",
                "topic": "compute",
                "disabled": not h["enabled"],
                "disabled_reason": None if h["enabled"] else "bench",
                "forced_down": False,
                "created_at": now,
                "updated_at": now,
                "last_seen_up": now,
            }
            for i, h in enumerate(workload["hosts"])
        }
        self.index = {h["host"]: i for i, h in enumerate(workload["hosts"])}
        self.computes = {h["host"]: self._compute_node(h) for h in workload["hosts"]}
        self.states: dict[str, Any] = {}
        self.groups: dict[str, dict[str, list[str]]] = {}  # id -> members, hosts
        for name in self.host_names:
            hm._instance_info[name] = {"instances": {}, "updated": True}
        self.heartbeat = time.monotonic()
        self.placement_s = 0.0

    # -- compute nodes and their reports ------------------------------------

    def _compute_node(self, figures: dict[str, Any]) -> Any:
        objects = self.objects
        ram_used = figures.get("memory_mb_used", 0) + figures["memory_mb_reserved"]
        disk_used = figures.get("local_gb_used", 0)
        index = self.index[figures["host"]]
        node = objects.ComputeNode(
            id=index + 1,
            uuid=f"00000000-0000-4000-8000-{index:012d}",
            host=figures["host"],
            hypervisor_hostname=figures["host"],
            hypervisor_type="QEMU",
            hypervisor_version=8002000,
            cpu_info="{}",
            host_ip="192.0.2.1",
            memory_mb=figures["memory_mb"],
            memory_mb_used=ram_used,
            free_ram_mb=figures["memory_mb"] - ram_used,
            vcpus=figures["vcpus"],
            vcpus_used=figures.get("vcpus_used", 0),
            local_gb=figures["local_gb"],
            local_gb_used=disk_used,
            free_disk_gb=figures["local_gb"] - disk_used,
            disk_available_least=None,
            numa_topology=None,
            pci_device_pools=objects.PciDevicePoolList(objects=[]),
            supported_hv_specs=[],
            metrics="[]",
            stats={
                "num_instances": str(len(figures.get("instances", []))),
                "io_workload": str(figures["num_io_ops"]),
            },
            cpu_allocation_ratio=self.workload["cpu_allocation_ratio"],
            ram_allocation_ratio=self.workload["ram_allocation_ratio"],
            disk_allocation_ratio=self.workload["disk_allocation_ratio"],
            updated_at=_utcnow(),
        )
        return node

    def report(self, host: str) -> None:
        """The node's report: a new ComputeNode record and its instance list."""
        figures = self.fleet.report(host)
        self.computes[host] = self._compute_node(figures)
        self.hm._instance_info[host] = {
            "instances": {u: self.objects.Instance(uuid=u) for u in figures["instances"]},
            "updated": True,
        }

    # -- the Placement stand-in -------------------------------------------------

    def _fits(self, host: str, event: dict[str, Any], pending: dict[str, int]) -> bool:
        h = self.figures[host]
        extra = pending.get(host, 0)
        ram_ratio, cpu_ratio, disk_ratio = self.ratios
        return bool(
            self.fleet.ram[host] + (extra + 1) * event["memory_mb"]
            <= (h["memory_mb"] - h["memory_mb_reserved"]) * ram_ratio
            and self.fleet.vcpus[host] + (extra + 1) * event["vcpus"] <= h["vcpus"] * cpu_ratio
            and self.fleet.disk[host] + (extra + 1) * event["disk_gb"] <= h["local_gb"] * disk_ratio
        )

    def _candidates(self, event: dict[str, Any]) -> list[str]:
        zone = event["availability_zone"]
        traits = set(event["required_traits"])
        out = []
        for host in self.host_names:
            h = self.figures[host]
            if zone is not None and h["availability_zone"] != zone:
                continue
            if traits and not traits.issubset(h["traits"]):
                continue
            if self._fits(host, event, {}):
                out.append(host)
        return out

    # -- one request ------------------------------------------------------------

    def _spec(self, event: dict[str, Any]) -> Any:
        objects = self.objects
        flavor = objects.Flavor(
            name=event["flavor"],
            memory_mb=event["memory_mb"],
            vcpus=event["vcpus"],
            root_gb=event["disk_gb"],
            ephemeral_gb=0,
            swap=0,
            extra_specs=dict(event["extra_specs"]),
        )
        group = None
        if event["group"] is not None:
            books = self.groups.setdefault(event["group"]["id"], {"members": [], "hosts": []})
            group = objects.InstanceGroup(
                uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, event["group"]["id"])),
                policy=event["group"]["policy"],
                policies=[event["group"]["policy"]],
                rules={},
                members=books["members"] + list(event["instances"]),
                hosts=list(books["hosts"]),
            )
        return objects.RequestSpec(
            flavor=flavor,
            num_instances=len(event["instances"]),
            instance_uuid=event["instances"][0],
            image=objects.ImageMeta.from_dict({"properties": {}}),
            availability_zone=event["availability_zone"],
            instance_group=group,
            ignore_hosts=None,
            force_hosts=None,
            force_nodes=None,
            requested_destination=None,
            scheduler_hints={},
            project_id="bench",
            user_id="bench",
            pci_requests=objects.InstancePCIRequests(requests=[]),
            numa_topology=None,
            is_bfv=False,
            requested_resources=[],
        )

    def _host_states(self, names: list[str]) -> list[Any]:
        from nova.scheduler.host_manager import HostState

        hm = self.hm
        out = []
        for name in names:
            compute = self.computes[name]
            state = self.states.get(name)
            if state is None:
                state = self.states[name] = HostState(name, name, "cell1")
            state.update(
                compute,
                dict(self.services[name]),
                hm._get_aggregates_info(name),
                hm._get_instance_info(None, compute),
            )
            out.append(state)
        return out

    def beat(self) -> None:
        """The compute services' heartbeats (every 10 s, report_interval), so that none
        looks down to ComputeFilter when a run outlasts service_down_time (60 s)."""
        if time.monotonic() - self.heartbeat < 10:
            return
        self.heartbeat = time.monotonic()
        now = _utcnow()
        for service in self.services.values():
            service["last_seen_up"] = service["updated_at"] = now

    def select(self, event: dict[str, Any]) -> list[str] | None:
        """Nova's _schedule for one request: the hosts of its instances, or None (NoValidHost)."""
        self.beat()
        spec = self._spec(event)
        t0 = time.perf_counter()
        names = self._candidates(event)
        self.placement_s += time.perf_counter() - t0
        if not names:
            return None
        hosts = self._host_states(names)
        chosen: list[str] = []
        pending: dict[str, int] = {}
        for num, instance in enumerate(event["instances"]):
            spec.instance_uuid = instance
            spec.obj_reset_changes(["instance_uuid"])
            hosts = self.manager_cls._get_sorted_hosts(self.sm, spec, hosts, num)
            if not hosts:
                return None
            t0 = time.perf_counter()
            claimed = next((h for h in hosts if self._fits(h.host, event, pending)), None)
            self.placement_s += time.perf_counter() - t0
            if claimed is None:
                return None
            pending[claimed.host] = pending.get(claimed.host, 0) + 1
            chosen.append(claimed.host)
            self.manager_cls._consume_selected_host(claimed, spec, instance_uuid=instance)
        return chosen

    def placed(self, event: dict[str, Any], hosts: list[str]) -> None:
        """Books after a placement: Placement's allocations, the instances each node
        runs (the compute's instance info) and the group's members."""
        self.fleet.place(event, hosts)
        for instance, host in zip(event["instances"], hosts, strict=True):
            info = self.hm._instance_info[host]["instances"]
            info[instance] = self.objects.Instance(uuid=instance)
        if event["group"] is not None:
            books = self.groups[event["group"]["id"]]
            books["members"].extend(event["instances"])
            books["hosts"].extend(hosts)


def _nova_version() -> str:
    try:
        from importlib.metadata import version

        return version("nova")
    except Exception:
        return "unknown"


def run(workload: dict[str, Any], budget: float) -> dict[str, Any]:
    """Consume the events until the fill line, the end or ``budget`` seconds; the figures."""
    runner = NovaRunner(workload)
    counts = {"requests": 0, "placed": 0, "instances": 0, "no_valid_host": 0, "reports": 0}
    started = time.perf_counter()
    deadline = started + budget
    stopped = "events"
    refused: list[str] = []
    for event in workload["events"]:
        if runner.fleet.full:
            stopped = "fill"
            break
        if time.perf_counter() > deadline:
            stopped = "budget"
            break
        if event["kind"] == "report":
            host = runner.fleet.reporter(event)
            if host is not None:
                runner.report(host)
                counts["reports"] += 1
            continue
        counts["requests"] += 1
        hosts = runner.select(event)
        if hosts is None:
            counts["no_valid_host"] += 1
            refused.append(event["id"])
            continue
        runner.placed(event, hosts)
        counts["placed"] += 1
        counts["instances"] += len(hosts)
    elapsed = time.perf_counter() - started
    return {
        "scheduler": "nova",
        "nova_version": runner.version,
        "hosts": len(workload["hosts"]),
        "concurrency": 1,
        **counts,
        "elapsed_s": elapsed,
        "requests_per_s": counts["requests"] / elapsed if elapsed else 0.0,
        "placement_stand_in_s": runner.placement_s,
        "fill": runner.fleet.fill,
        "reached_fill": runner.fleet.full,
        "stopped_by": stopped,
        "no_valid_host_ids": refused[:_IDS_SHOWN],
        "budget_s": budget,
        "enabled_filters": runner.enabled_filters,
        "weighers": runner.weighers,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.nova_real", description=__doc__)
    parser.add_argument("workload", type=Path, help="a JSON file from benchmarks.realistic.write")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds at most (60)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # Nova logs each disabled host at WARNING
    warnings.simplefilter("ignore")  # oslo's deprecation warnings, once per value
    result = run(load(args.workload), args.budget)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
