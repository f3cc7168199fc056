"""The benchmark's cluster and requests: the same hosts and flavors for every scheduler.

Hosts come in a few sizes (as a real fleet has a few server models), sit in
three availability zones, carry a handful of traits and start partly used.
Requests are a few Nova-like flavors; a fifth of them ask for a zone and a
tenth require a trait, so those filters do real work. Everything is drawn
from a seeded generator, so two runs see the same cluster.

Capacity is sized so most requests are placed: :func:`capacity_requests`
says how many requests of the average flavor fit in half of a cluster's free
capacity, and the runner never sends more than that to one scheduler.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from actorsched import HostReport, RequestSpec, SchedulerConfig

__all__ = [
    "FLAVORS",
    "ZONES",
    "Flavor",
    "bare_report",
    "bench_config",
    "capacity_requests",
    "make_reports",
    "make_specs",
    "next_generation",
]

ZONES = ("az1", "az2", "az3")
TRAITS = ("HW_CPU_X86_AVX2", "HW_CPU_X86_AVX512F", "CUSTOM_SSD", "CUSTOM_GPU")

# (memory_mb, vcpus, local_gb, share of the fleet)
_HOST_MODELS = (
    (131_072, 32, 1_000, 0.35),
    (262_144, 48, 2_000, 0.35),
    (524_288, 64, 4_000, 0.25),
    (1_048_576, 128, 8_000, 0.05),
)


@dataclass(frozen=True, slots=True)
class Flavor:
    name: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    weight: float


FLAVORS = (
    Flavor("m1.small", 2_048, 1, 20, 0.40),
    Flavor("m1.medium", 4_096, 2, 40, 0.30),
    Flavor("m1.large", 8_192, 4, 80, 0.20),
    Flavor("m1.xlarge", 16_384, 8, 160, 0.10),
)


def bench_config(*, seed: int = 0) -> SchedulerConfig:
    """Nova's defaults, with the per-host instance and I/O limits raised.

    With the defaults (50 instances, 8 I/O operations per host) a host whose
    claims no report has listed yet is full after 8 claims, so on small
    clusters the count of requests, not the scheduler, would decide the
    result. Both filters still run on every request; they just never bind.
    """
    return SchedulerConfig(
        max_io_ops_per_host=1_000_000,
        max_instances_per_host=1_000_000,
        mailbox_size=2_048,
        seed=seed,
    )


def make_reports(count: int, *, seed: int = 1, generation: int = 1) -> list[HostReport]:
    """``count`` validated host reports of a varied fleet (``node00001`` ...)."""
    rng = random.Random(seed)
    models = [m[:3] for m in _HOST_MODELS]
    weights = [m[3] for m in _HOST_MODELS]
    reports = []
    for i in range(count):
        memory_mb, vcpus, local_gb = rng.choices(models, weights)[0]
        used = rng.uniform(0.0, 0.3)
        traits = [t for t, p in zip(TRAITS, (0.9, 0.4, 0.5, 0.05), strict=True) if rng.random() < p]
        reports.append(
            HostReport(
                host=f"node{i:06d}",
                generation=generation,
                memory_mb=memory_mb,
                memory_mb_used=int(memory_mb * used),
                memory_mb_reserved=512,
                vcpus=vcpus,
                vcpus_used=int(vcpus * used),
                local_gb=local_gb,
                local_gb_used=int(local_gb * used),
                availability_zone=ZONES[i % len(ZONES)],
                enabled=rng.random() > 0.01,
                traits=traits,
                num_io_ops=rng.randint(0, 3),
            )
        )
    return reports


def next_generation(reports: list[HostReport]) -> list[HostReport]:
    """The same hosts reporting again, one generation later (built without re-validation)."""
    return [r.model_copy(update={"generation": r.generation + 1}) for r in reports]


def make_specs(count: int, *, seed: int = 2, prefix: str = "vm") -> list[RequestSpec]:
    """``count`` single-instance requests of the benchmark's flavors."""
    rng = random.Random(seed)
    weights = [f.weight for f in FLAVORS]
    specs = []
    for i in range(count):
        flavor = rng.choices(FLAVORS, weights)[0]
        roll = rng.random()
        specs.append(
            RequestSpec(
                instance_uuids=[f"{prefix}-{seed}-{i:07d}"],
                memory_mb=flavor.memory_mb,
                vcpus=flavor.vcpus,
                disk_gb=flavor.disk_gb,
                availability_zone=ZONES[i % len(ZONES)] if roll < 0.2 else None,
                required_traits=["CUSTOM_SSD"] if 0.2 <= roll < 0.3 else [],
            )
        )
    return specs


def capacity_requests(hosts: int) -> int:
    """Requests of the average flavor that fit in half the free capacity of ``hosts`` hosts.

    Disk binds first: the average host has about 2,080 GB free and the
    average flavor asks for 52 GB, so roughly 40 fit; half of that is 20.
    """
    return max(50, hosts * 20)


def bare_report(host: str, **figures: Any) -> HostReport:
    """A HostReport built without validation (for a million of them): ``figures`` over
    an empty 1 GiB, 1 vCPU, 10 GB host in no zone."""
    fields: dict[str, Any] = {
        "host": host,
        "generation": 1,
        "memory_mb": 1024,
        "memory_mb_used": 0,
        "memory_mb_reserved": 0,
        "vcpus": 1,
        "vcpus_used": 0,
        "local_gb": 10,
        "local_gb_used": 0,
        "availability_zone": None,
        "traits": [],
        "instances": [],
    }
    fields.update(figures)
    return HostReport.model_construct(**fields)
