"""actorsched's runner of the realistic workload (:mod:`benchmarks.realistic`).

It builds an embedded ``Scheduler`` with Nova's default per-host limits, feeds
it the empty hosts (and, when the aggregates API is there, the aggregates),
then consumes the events in order: a ``request`` is one
``select_destinations`` call, a ``report`` is the reporting node's
``update_host`` with every instance it runs. It stops once 90 % of the
cluster's usable RAM is claimed and counts requests answered per second
(placed or NoValidHost; the reports' time is inside the elapsed time).

Request specs are built before the clock starts (as the plain benchmark's
are); host reports are built inside it, as they arrive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

from actorsched import HostReport, NoValidHost, RequestSpec, Scheduler, SchedulerConfig, ServerGroup

from .realistic import Fleet

__all__ = ["build_spec", "build_specs", "realistic_config", "run_actorsched"]

_AGGREGATE_FILTER = "AggregateInstanceExtraSpecsFilter"


def realistic_config(
    workload: dict[str, Any], *, seed: int = 0, aggregates: bool = False
) -> SchedulerConfig:
    """Nova's defaults, its per-host limits ON (50 instances, 8 I/O operations); with
    ``aggregates``, AggregateInstanceExtraSpecsFilter enabled too (as Nova's runner has it)."""
    filters = list(SchedulerConfig().enabled_filters)
    if aggregates and _AGGREGATE_FILTER not in filters:
        filters.append(_AGGREGATE_FILTER)
    return SchedulerConfig(
        enabled_filters=filters,
        max_instances_per_host=workload["max_instances_per_host"],
        max_io_ops_per_host=workload["max_io_ops_per_host"],
        cpu_allocation_ratio=workload["cpu_allocation_ratio"],
        ram_allocation_ratio=workload["ram_allocation_ratio"],
        disk_allocation_ratio=workload["disk_allocation_ratio"],
        mailbox_size=2_048,
        seed=seed,
    )


def _host_report(figures: dict[str, Any]) -> HostReport:
    return HostReport(
        host=figures["host"],
        generation=figures.get("generation", 1),
        memory_mb=figures["memory_mb"],
        memory_mb_used=figures.get("memory_mb_used", 0),
        memory_mb_reserved=figures["memory_mb_reserved"],
        vcpus=figures["vcpus"],
        vcpus_used=figures.get("vcpus_used", 0),
        local_gb=figures["local_gb"],
        local_gb_used=figures.get("local_gb_used", 0),
        availability_zone=figures["availability_zone"],
        enabled=figures["enabled"],
        traits=figures["traits"],
        instances=figures.get("instances", []),
        num_io_ops=figures["num_io_ops"],
    )


def build_spec(event: dict[str, Any], *, aggregates: bool = True) -> RequestSpec:
    """The RequestSpec of one request event."""
    group = event["group"]
    extra: dict[str, Any] = {}
    if aggregates:
        extra = {"flavor_name": event["flavor"], "extra_specs": event["extra_specs"]}
    return RequestSpec(
        instance_uuids=event["instances"],
        memory_mb=event["memory_mb"],
        vcpus=event["vcpus"],
        disk_gb=event["disk_gb"],
        availability_zone=event["availability_zone"],
        required_traits=event["required_traits"],
        group=ServerGroup(id=group["id"], policy=group["policy"]) if group else None,
        **extra,
    )


def build_specs(workload: dict[str, Any], *, aggregates: bool = True) -> list[RequestSpec | None]:
    """One RequestSpec per request event (None for a report), in event order."""
    extra = aggregates and bool(workload["components"]["aggregates"])
    return [
        build_spec(e, aggregates=extra) if e["kind"] == "request" else None
        for e in workload["events"]
    ]


async def _create_aggregates(scheduler: Any, workload: dict[str, Any]) -> None:
    for agg in workload["aggregates"]:
        await scheduler.create_aggregate(agg["name"], metadata=agg["metadata"], hosts=agg["hosts"])


async def run_actorsched(
    workload: dict[str, Any],
    *,
    concurrency: int = 1,
    budget: float | None = None,
    limit: int | None = None,
    aggregates: bool = True,
    specs: list[RequestSpec | None] | None = None,
) -> dict[str, Any]:
    """Fill the cluster to the line (or ``limit`` requests, or ``budget`` seconds); the
    figures of the run (see the module doc). ``specs``: from :func:`build_specs`, to
    build them once for several rounds."""
    wants_aggregates = bool(workload["components"]["aggregates"]) and aggregates
    events = workload["events"]
    if specs is None:
        specs = build_specs(workload, aggregates=aggregates)
    fleet = Fleet(workload)
    refused: list[str] = []
    counts = {"requests": 0, "placed": 0, "instances": 0, "no_valid_host": 0, "reports": 0}
    config = realistic_config(
        workload, seed=workload["seed"], aggregates=aggregates and wants_aggregates
    )
    async with Scheduler(config) as scheduler:
        await scheduler.update_hosts([_host_report(h) for h in workload["hosts"]])
        if aggregates and wants_aggregates:
            await _create_aggregates(scheduler, workload)
        todo: Iterator[int] = iter(range(len(events)))
        started = time.perf_counter()
        deadline = started + budget if budget else float("inf")
        cap = -1 if limit is None else limit

        async def caller() -> None:
            for i in todo:
                if fleet.full or time.perf_counter() > deadline or counts["requests"] == cap:
                    return
                event = events[i]
                spec = specs[i]
                if spec is None:
                    host = fleet.reporter(event)
                    if host is not None:
                        await scheduler.update_host(_host_report(fleet.report(host)))
                        counts["reports"] += 1
                    continue
                counts["requests"] += 1
                try:
                    selections = await scheduler.select_destinations(spec)
                except NoValidHost:
                    counts["no_valid_host"] += 1
                    refused.append(event["id"])
                    continue
                fleet.place(event, [s.host for s in selections])
                counts["placed"] += 1
                counts["instances"] += len(selections)

        await asyncio.gather(*(caller() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "scheduler": "actorsched",
        "hosts": len(workload["hosts"]),
        "concurrency": concurrency,
        **counts,
        "elapsed_s": elapsed,
        "requests_per_s": counts["requests"] / elapsed if elapsed else 0.0,
        "fill": fleet.fill,
        "reached_fill": fleet.full,
        "events_left": sum(1 for _ in todo),
        "no_valid_host_ids": refused[:200],
    }
