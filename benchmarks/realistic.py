"""A realistic placement workload as plain data, for actorsched and for real Nova alike.

The plain benchmark (:mod:`benchmarks.workload`) sends four flavors to a
partly used cluster with Nova's per-host limits raised out of the way. This
one fills an empty cluster to 90 % of its RAM the way a public cloud does:

* flavors from public VM-size catalogues, 1 to 16 vCPUs and 1.75 to 112 GB
  (Azure A/B/D/E/F/DS-v2 and AWS t3/m5/r5 general-purpose, compute- and
  memory-optimised sizes), weighted as the public Azure VM traces report
  (Cortez et al., "Resource Central", SOSP 2017, and the Azure Public
  Dataset: most VMs have 1 or 2 vCPUs and at most 8 GB; a thin tail is
  large and memory-optimised);
* six availability zones, about 30 % of requests naming one;
* about 20 % of requests requiring a trait the fleet has on a part of it;
* about 15 % in server groups: mostly hard anti-affinity, some affinity,
  soft anti-affinity and soft affinity;
* about 10 % multi-instance (2 to 5 instances, all or nothing);
* optionally, host aggregates with metadata (``hw:cpu_model``, ``ssd``) and
  flavors whose extra specs ask for them (AggregateInstanceExtraSpecsFilter);
* host reports arriving during placement, about one per five instances
  placed, each listing every instance its node runs: half from the periodic
  audit of every node in turn, half from the node of an instance placed a
  few placements earlier (its build just finished);
* Nova's default limits: 50 instances and 8 I/O operations per host.

It is a plain JSON-able dict (:func:`generate`): the hosts, the aggregates and
an ordered list of events (``request`` and ``report``). A report event does
not carry figures: it names a node (``host``), or says "the node of the
instance placed ``lag`` placements ago reports now", and each runner fills
in what that node runs from its own placements, as a real node would. So actorsched's runner
(:mod:`benchmarks.realistic_run`) and the real-Nova runner
(:mod:`benchmarks.nova_real`, in its own venv) consume the same events.

Every component has a toggle (:class:`Components`); everything is drawn from
one seeded generator, so a seed and toggles give the same events.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FILL",
    "FLAVORS",
    "ZONES",
    "Components",
    "Fleet",
    "RealFlavor",
    "generate",
    "load",
    "write",
]

FILL = 0.9  # the runners stop once this share of the cluster's usable RAM is claimed
ZONES = tuple(f"zone{i}" for i in range(1, 7))
MAX_INSTANCES_PER_HOST = 50  # Nova's defaults, ON here
MAX_IO_OPS_PER_HOST = 8


@dataclass(frozen=True, slots=True)
class RealFlavor:
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int
    weight: float


def _gb(gib: float) -> int:
    return round(gib * 1024)


# Public sizes (vCPUs, GiB of RAM) from the Azure and AWS catalogues; the root
# disk is what such images typically get. Weights: Resource Central's Azure
# trace puts roughly 3/4 of VMs at 1-2 vCPUs and ~90 % at <= 4 vCPUs, and
# memory-optimised sizes at about a tenth of VMs.
FLAVORS: tuple[RealFlavor, ...] = (
    RealFlavor("Standard_A1", 1, _gb(1.75), 30, 0.06),  # Azure A1
    RealFlavor("Standard_B1ms", 1, _gb(2), 30, 0.12),  # Azure B-series burstable
    RealFlavor("t3.small", 2, _gb(2), 30, 0.10),  # AWS burstable
    RealFlavor("Standard_B2s", 2, _gb(4), 30, 0.12),
    RealFlavor("Standard_F2s_v2", 2, _gb(4), 32, 0.06),  # compute-optimised
    RealFlavor("m5.large", 2, _gb(8), 40, 0.10),  # AWS general purpose
    RealFlavor("Standard_D2s_v3", 2, _gb(8), 50, 0.10),  # Azure general purpose
    RealFlavor("Standard_D4s_v3", 4, _gb(16), 64, 0.09),
    RealFlavor("Standard_F4s_v2", 4, _gb(8), 64, 0.03),
    RealFlavor("r5.large", 2, _gb(16), 50, 0.04),  # AWS memory-optimised
    RealFlavor("Standard_E4s_v3", 4, _gb(32), 64, 0.03),  # Azure memory-optimised
    RealFlavor("Standard_DS12_v2", 4, _gb(28), 56, 0.02),
    RealFlavor("Standard_D8s_v3", 8, _gb(32), 128, 0.05),
    RealFlavor("Standard_F8s_v2", 8, _gb(16), 128, 0.02),
    RealFlavor("Standard_E8s_v3", 8, _gb(64), 128, 0.02),
    RealFlavor("Standard_DS13_v2", 8, _gb(56), 112, 0.01),
    RealFlavor("Standard_D16s_v3", 16, _gb(64), 256, 0.015),
    RealFlavor("Standard_F16s_v2", 16, _gb(32), 256, 0.005),
    RealFlavor("Standard_DS14_v2", 16, _gb(112), 224, 0.01),
)

# Server models of a public-cloud fleet: (memory_mb, vcpus, local_gb, share).
_HOST_MODELS = (
    (_gb(256), 48, 1_900, 0.35),
    (_gb(384), 64, 3_800, 0.35),
    (_gb(512), 96, 3_800, 0.20),
    (_gb(768), 128, 7_600, 0.10),  # memory-optimised
)
# Required traits of a request, and the share of hosts that have each.
_TRAITS = (("HW_CPU_X86_AVX512F", 0.5), ("CUSTOM_SSD", 0.4), ("HW_CPU_X86_AMX", 0.15))
# Aggregates: (name, metadata, share of hosts), and the extra specs a flavor
# that wants one carries (AggregateInstanceExtraSpecsFilter reads both).
_AGGREGATES = (
    ("agg-icelake", {"hw:cpu_model": "icelake"}, 0.25),
    ("agg-sapphire", {"hw:cpu_model": "sapphirerapids"}, 0.10),
    ("agg-ssd", {"ssd": "true"}, 0.30),
)
_EXTRA_SPECS = (
    ({"aggregate_instance_extra_specs:hw:cpu_model": "icelake"}, 0.5),
    ({"aggregate_instance_extra_specs:hw:cpu_model": "sapphirerapids"}, 0.2),
    ({"aggregate_instance_extra_specs:ssd": "true"}, 0.3),
)
# Of the reports, the share from the periodic audit of every node (round robin);
# the rest come from the node of an instance placed a few placements earlier.
_PERIODIC_SHARE = 0.5
_GROUP_POLICIES = (
    ("anti-affinity", 0.70),
    ("affinity", 0.15),
    ("soft-anti-affinity", 0.10),
    ("soft-affinity", 0.05),
)


@dataclass(frozen=True, slots=True)
class Components:
    """What the realistic mix includes; each off gives the plain request of that part."""

    zones: bool = True  # ~30 % of requests name one of six zones
    traits: bool = True  # ~20 % require a trait
    groups: bool = True  # ~15 % in server groups
    multi: bool = True  # ~10 % ask for 2-5 instances
    # three aggregates over ~65 % of hosts, ~15 % of requests with matching extra
    # specs (AggregateInstanceExtraSpecsFilter on)
    aggregates: bool = True
    reports: bool = True  # ~1 report per 5 instances placed
    extra_specs_share: float = 0.15  # of requests, when aggregates is on

    @classmethod
    def parse(cls, text: str) -> Components:
        """``"zones,traits,-groups"``: names to turn on (or off, with ``-``); ``all``/``none``."""
        values = asdict(cls())
        for word in (w.strip() for w in text.split(",") if w.strip()):
            on = not word.startswith("-")
            name = word.lstrip("-+")
            if name in ("all", "none"):
                for key in values:
                    if key != "extra_specs_share":
                        values[key] = (name == "all") == on
                continue
            if name not in values or name == "extra_specs_share":
                raise ValueError(f"unknown component {name!r}; known: {sorted(values)[:-1]}")
            values[name] = on
        return cls(**values)


def _hosts(rng: random.Random, count: int, comps: Components) -> list[dict[str, Any]]:
    models = [m[:3] for m in _HOST_MODELS]
    shares = [m[3] for m in _HOST_MODELS]
    hosts = []
    for i in range(count):
        memory_mb, vcpus, local_gb = rng.choices(models, shares)[0]
        traits = ["HW_CPU_X86_AVX2"]
        traits += [t for t, p in _TRAITS if rng.random() < p]
        hosts.append(
            {
                "host": f"cn{i:06d}",
                "memory_mb": memory_mb,
                "memory_mb_reserved": 4_096,
                "vcpus": vcpus,
                "local_gb": local_gb,
                "availability_zone": ZONES[i % len(ZONES)] if comps.zones else None,
                "traits": traits if comps.traits else [],
                "enabled": rng.random() > 0.01,
                "num_io_ops": 0,
            }
        )
    return hosts


def _aggregates(rng: random.Random, hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for name, metadata, share in _AGGREGATES:
        members = [h["host"] for h in hosts if rng.random() < share]
        out.append({"name": name, "metadata": dict(metadata), "hosts": members})
    return out


def _uuid(seed: int, request: int, k: int) -> str:
    """A UUID-shaped instance id (Nova's objects want one), the same for the same seed."""
    return f"{seed % 16**8:08x}-0000-4000-8000-{request:010d}{k:02d}"


def _estimate_requests(hosts: list[dict[str, Any]], comps: Components) -> int:
    """Requests enough to pass the fill line with room for refusals (the runner stops there)."""
    usable = sum(h["memory_mb"] - h["memory_mb_reserved"] for h in hosts)
    mean_ram = sum(f.memory_mb * f.weight for f in FLAVORS) / sum(f.weight for f in FLAVORS)
    per_request = 1 + (0.1 * 2.5 if comps.multi else 0.0)
    return int(usable * FILL / mean_ram / per_request * 1.6) + 50


def generate(hosts: int, *, seed: int = 7, components: Components | None = None) -> dict[str, Any]:
    """The workload for ``hosts`` hosts: hosts, aggregates and the ordered event list."""
    comps = components or Components()
    rng = random.Random(f"realistic-{seed}")
    host_list = _hosts(rng, hosts, comps)
    aggregates = _aggregates(rng, host_list) if comps.aggregates else []
    weights = [f.weight for f in FLAVORS]
    events: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []  # open groups: id, policy, members left
    instances_since_report = 0.0
    periodic = rng.randrange(hosts) if hosts else 0
    for n in range(_estimate_requests(host_list, comps)):
        flavor = rng.choices(FLAVORS, weights)[0]
        count = rng.randint(2, 5) if comps.multi and rng.random() < 0.10 else 1
        zone = rng.choice(ZONES) if comps.zones and rng.random() < 0.30 else None
        traits = (
            [rng.choices([t for t, _ in _TRAITS], [0.5, 0.4, 0.1])[0]]
            if comps.traits and rng.random() < 0.20
            else []
        )
        extra_specs: dict[str, str] = {}
        if comps.aggregates and rng.random() < comps.extra_specs_share:
            extra_specs = dict(
                rng.choices([s for s, _ in _EXTRA_SPECS], [w for _, w in _EXTRA_SPECS])[0]
            )
        group = None
        if comps.groups and rng.random() < 0.15:
            if groups and rng.random() < 0.7:  # a later member of an open group
                g = rng.choice(groups)
            else:
                policy = rng.choices(
                    [p for p, _ in _GROUP_POLICIES], [w for _, w in _GROUP_POLICIES]
                )[0]
                g = {
                    "id": f"sg-{seed}-{len(events):07d}",
                    "policy": policy,
                    "left": rng.randint(2, 8),
                }
                groups.append(g)
            g["left"] -= 1
            if g["left"] <= 0:
                groups.remove(g)
            group = {"id": g["id"], "policy": g["policy"]}
            if g["policy"] == "affinity":
                zone = None  # one host: the members' zone is wherever the first landed
        events.append(
            {
                "kind": "request",
                "id": f"rq{n:07d}",
                "flavor": flavor.name,
                "memory_mb": flavor.memory_mb,
                "vcpus": flavor.vcpus,
                "disk_gb": flavor.disk_gb,
                "extra_specs": extra_specs,
                "instances": [_uuid(seed, n, k) for k in range(count)],
                "availability_zone": zone,
                "required_traits": traits,
                "group": group,
            }
        )
        if comps.reports:
            instances_since_report += count
            while instances_since_report >= 5:
                instances_since_report -= 5
                if rng.random() < _PERIODIC_SHARE:  # the periodic resource audit, round robin
                    events.append({"kind": "report", "host": host_list[periodic]["host"]})
                    periodic = (periodic + 1) % len(host_list)
                else:  # the node that just built an instance
                    events.append({"kind": "report", "lag": rng.randint(1, 40)})
    return {
        "seed": seed,
        "components": asdict(comps),
        "fill": FILL,
        "max_instances_per_host": MAX_INSTANCES_PER_HOST,
        "max_io_ops_per_host": MAX_IO_OPS_PER_HOST,
        "cpu_allocation_ratio": 4.0,
        "ram_allocation_ratio": 1.0,
        "disk_allocation_ratio": 1.0,
        "hosts": host_list,
        "aggregates": aggregates,
        "events": events,
    }


def write(workload: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(workload, separators=(",", ":")))
    return path


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


class Fleet:
    """What a runner placed where: the figures a compute node's report carries, and the fill.

    Plain Python (no actorsched, no Nova), so both runners keep the same books.
    """

    def __init__(self, workload: dict[str, Any]) -> None:
        self.hosts: dict[str, dict[str, Any]] = {h["host"]: h for h in workload["hosts"]}
        self.ram: dict[str, int] = dict.fromkeys(self.hosts, 0)
        self.vcpus: dict[str, int] = dict.fromkeys(self.hosts, 0)
        self.disk: dict[str, int] = dict.fromkeys(self.hosts, 0)
        self.instances: dict[str, list[str]] = {h: [] for h in self.hosts}
        self.generation: dict[str, int] = dict.fromkeys(self.hosts, 1)
        self.order: list[str] = []  # the host of each instance placed, in order
        self.usable_ram: int = sum(
            h["memory_mb"] - h["memory_mb_reserved"] for h in self.hosts.values()
        )
        self.claimed_ram = 0
        self.line: float = float(workload["fill"]) * self.usable_ram

    def place(self, event: dict[str, Any], hosts: list[str]) -> None:
        for uuid, host in zip(event["instances"], hosts, strict=True):
            self.ram[host] += event["memory_mb"]
            self.vcpus[host] += event["vcpus"]
            self.disk[host] += event["disk_gb"]
            self.instances[host].append(uuid)
            self.order.append(host)
        self.claimed_ram += event["memory_mb"] * len(hosts)

    def reporter(self, event: dict[str, Any]) -> str | None:
        """The node a report event names: its ``host``, or the node of the instance placed
        ``lag`` placements ago (None: not that many placed yet)."""
        if "host" in event:
            return str(event["host"])
        lag: int = event["lag"]
        return self.order[-lag] if lag <= len(self.order) else None

    def report(self, host: str) -> dict[str, Any]:
        """The node's next report: its figures, what it runs, and a new generation."""
        self.generation[host] += 1
        h = self.hosts[host]
        return {
            **h,
            "generation": self.generation[host],
            "memory_mb_used": self.ram[host],
            "vcpus_used": self.vcpus[host],
            "local_gb_used": self.disk[host],
            "instances": list(self.instances[host]),
        }

    @property
    def full(self) -> bool:
        return self.claimed_ram >= self.line

    @property
    def fill(self) -> float:
        return self.claimed_ram / self.usable_ram if self.usable_ram else 0.0


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.realistic --hosts 1000 --out workload.json``: write one."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.realistic", description=__doc__)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--components",
        default="",
        help='e.g. "none,zones,groups" or "-reports" (all but aggregates)',
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    workload = generate(args.hosts, seed=args.seed, components=Components.parse(args.components))
    write(workload, args.out)
    requests = sum(1 for e in workload["events"] if e["kind"] == "request")
    events = len(workload["events"])
    print(f"{args.out}: {args.hosts:,} hosts, {requests:,} requests, {events:,} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
