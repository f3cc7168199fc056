"""Snapshot format 9: each host's failed builds and metrics (facts, in host_facts)
survive encode/restore and rank the restored hosts as before; a format 8 snapshot
still restores (no failed builds, no metrics); a format 8 host_facts entry giving
them is refused by name; journal records leave them out when unset."""

from __future__ import annotations

import json
from typing import Any

import pytest
from journal_workload import report

from actorsched import RequestSpec, SchedulerConfig
from actorsched.core import SchedulerCore
from actorsched.core.image import capture
from actorsched.journal.records import _report_body
from actorsched.journal.snapshot import SNAPSHOT_FORMAT, encode, restore

CONFIG = SchedulerConfig(
    seed=1,
    service_down_time=1e9,
    build_failure_weight_multiplier=10.0,
    metrics_weight_setting=[("cpu.idle.time", 1.0)],
    enabled_filters=["ComputeFilter", "MetricsFilter"],
    max_attempts=5,
)


def _spec(uuid: str) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=64, vcpus=1, disk_gb=1)


def _core() -> SchedulerCore:
    core = SchedulerCore(CONFIG)
    core.update_host(report("idle", 1, metrics={"cpu.idle.time": 900.0}), 1.0)
    core.update_host(report("busy", 1, metrics={"cpu.idle.time": 100.0}), 1.0)
    core.update_host(report("failing", 1, metrics={"cpu.idle.time": 950.0}, failed_builds=2), 1.0)
    core.update_host(report("unmeasured", 1, hypervisor_version=5), 1.0)
    return core


def _ranked(core: SchedulerCore) -> list[str]:
    return [c.host for c in core.plan(_spec("vm"), now=2.0).instances[0].candidates]


def test_failed_builds_and_metrics_round_trip_and_rank_as_before() -> None:
    core = _core()
    data = json.loads(encode(capture(core)))
    assert data["format"] == SNAPSHOT_FORMAT >= 9
    facts = data["host_facts"]
    assert {"metrics": {"cpu.idle.time": 950.0}, "failed_builds": 2} in facts
    assert {"hypervisor_version": 5} in facts
    again = SchedulerCore(CONFIG)
    restore(again, json.dumps(data))
    assert again.digest() == core.digest()
    assert again.host_states() == core.host_states()
    # MetricsFilter keeps unmeasured out; failing's failed builds put it last
    assert _ranked(again) == _ranked(core) == ["idle", "busy", "failing"]


def _format_8(core: SchedulerCore) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(encode(capture(core)))
    for entry in data["host_facts"]:
        entry.pop("failed_builds", None)
        entry.pop("metrics", None)
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 8
    return data


def test_a_format_8_snapshot_restores_with_no_failed_builds_and_no_metrics() -> None:
    core = SchedulerCore(SchedulerConfig(seed=1, service_down_time=1e9))
    core.update_host(report("a", 1, hypervisor_version=7), 1.0)
    core.update_host(report("b", 1), 1.0)
    core.select_destinations(_spec("vm1"), 2.0)
    again = SchedulerCore(core.config)
    restore(again, json.dumps(_format_8(core)))
    assert again.digest() == core.digest()
    assert again.host_states() == core.host_states()
    facts = again.table.host_facts
    assert [f.failed_builds for f in facts.values] == [0, 0]
    assert [f.metrics for f in facts.values] == [(), ()]


def test_a_format_8_snapshot_whose_facts_give_failed_builds_is_refused() -> None:
    data = json.loads(encode(capture(_core())))
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 8
    with pytest.raises(ValueError, match="host_facts 0 must be an object of some of"):
        restore(SchedulerCore(CONFIG), json.dumps(data))


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({"failed_builds": -1}, "failed_builds"),
        ({"metrics": {"cpu.idle.time": "high"}}, "metrics.`cpu.idle.time`"),
        ({"metrics": {"cpu.idle.time": 1e16}}, "metrics.`cpu.idle.time`"),
    ],
)
def test_damaged_failed_builds_and_metrics_are_refused_by_name(
    facts: dict[str, Any], message: str
) -> None:
    data = json.loads(encode(capture(_core())))
    data["host_facts"][0] = facts
    with pytest.raises(ValueError, match=message):
        restore(SchedulerCore(CONFIG), json.dumps(data))


def test_report_records_leave_failed_builds_and_metrics_out_when_unset() -> None:
    plain = json.loads(_report_body(report("h0", 1, hypervisor_version=3)))
    assert "failed_builds" not in plain
    assert "metrics" not in plain
    given = json.loads(_report_body(report("h1", 1, failed_builds=1, metrics={"m": 2.5})))
    assert (given["failed_builds"], given["metrics"]) == (1, {"m": 2.5})
