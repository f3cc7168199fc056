"""Embedded metrics and decision log lines (actorsched.metrics), and the JSON log format."""

from __future__ import annotations

import datetime
import json
import logging
import re
from pathlib import Path

import pytest
from conftest import make_report, make_spec
from prometheus_client import CollectorRegistry

from actorsched import NoValidHost, Scheduler, SchedulerConfig
from actorsched.amqp.metrics import ServiceMetrics
from actorsched.logs import JsonFormatter
from actorsched.metrics import SchedulerMetrics, label
from actorsched.version import __version__

OPERATING = Path(__file__).resolve().parent.parent / "docs" / "operating.md"


def _value(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_label_values_are_lower_snake_case() -> None:
    assert label("NoValidHost") == "no_valid_host"
    assert label("InvalidRequest") == "invalid_request"
    assert label("MailboxFull") == "mailbox_full"
    assert label("ok") == "ok"


async def test_each_placement_is_timed_and_logged_with_its_host_and_alternates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = SchedulerMetrics()
    async with Scheduler(SchedulerConfig(seed=0), metrics=metrics) as s:
        await s.update_host(make_report("h1"))
        await s.update_host(make_report("h2", memory_mb=2048))
        with caplog.at_level(logging.INFO, logger="actorsched.decisions"):
            (selection,) = await s.select_destinations(make_spec("vm-1", memory_mb=1024))
    count = "actorsched_scheduling_attempt_duration_seconds_count"
    assert _value(metrics, count, result="scheduled") == 1
    assert _value(metrics, count, result="unschedulable") == 0
    (record,) = [r for r in caplog.records if r.name == "actorsched.decisions"]
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith(f"placed instance vm-1 on {selection.host} (alternates ")
    assert "request of 1 instance(s), 1024 MB, 1 vCPU, 1 GB" in record.getMessage()
    assert record.__dict__["host"] == selection.host
    assert record.__dict__["alternates"] == selection.alternates
    assert record.__dict__["took_ms"] >= 0


async def test_a_no_valid_host_is_one_line_with_its_filter_counts_and_counts_rejections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = SchedulerMetrics()
    async with Scheduler(SchedulerConfig(seed=0), metrics=metrics) as s:
        await s.update_host(make_report("h1", memory_mb=1024))
        await s.update_host(make_report("h2", availability_zone="az2"))
        with (
            caplog.at_level(logging.INFO, logger="actorsched.decisions"),
            pytest.raises(NoValidHost),
        ):
            await s.select_destinations(make_spec("vm-1", memory_mb=8192, availability_zone="az2"))
    (record,) = [r for r in caplog.records if r.name == "actorsched.decisions"]
    assert record.getMessage().startswith(
        "no valid host for instance vm-1: 0/2 hosts are available for instance vm-1: "
    )
    assert record.__dict__["filter_counts"] == {"AvailabilityZoneFilter": 1, "RamFilter": 1}
    count = "actorsched_scheduling_attempt_duration_seconds_count"
    assert _value(metrics, count, result="unschedulable") == 1
    rejected = "actorsched_filter_rejections_total"
    assert _value(metrics, rejected, filter="RamFilter") == 1
    assert _value(metrics, rejected, filter="AvailabilityZoneFilter") == 1


async def test_journal_commits_are_timed_and_sized(tmp_path: Path) -> None:
    metrics = SchedulerMetrics()
    async with Scheduler(journal=tmp_path / "j.sqlite", metrics=metrics) as s:
        await s.update_host(make_report("h1"))
        await s.select_destinations(make_spec("vm-1"))
    commits = _value(metrics, "actorsched_journal_commit_duration_seconds_count")
    assert commits >= 2  # each awaited call was its own batch
    assert _value(metrics, "actorsched_journal_batch_commands_sum") >= 2
    assert _value(metrics, "actorsched_journal_commit_duration_seconds_sum") > 0


async def test_a_batch_of_reads_alone_is_no_journal_commit(tmp_path: Path) -> None:
    metrics = SchedulerMetrics()
    async with Scheduler(journal=tmp_path / "j.sqlite", metrics=metrics) as s:
        await s.update_host(make_report("h1"))
        before = _value(metrics, "actorsched_journal_commit_duration_seconds_count")
        for _ in range(5):
            await s.host_states()
            await s.where("vm-x")
            await s.plan(make_spec("vm-1"))
        after = _value(metrics, "actorsched_journal_commit_duration_seconds_count")
    assert before >= 1
    assert after == before


async def test_metrics_attached_to_a_running_scheduler_see_its_next_placements() -> None:
    async with Scheduler(SchedulerConfig(seed=0)) as s:
        await s.update_host(make_report("h1"))
        metrics = SchedulerMetrics(process=False)
        s.attach_metrics(metrics)
        await s.select_destinations(make_spec("vm-1"))
    count = "actorsched_scheduling_attempt_duration_seconds_count"
    assert _value(metrics, count, result="scheduled") == 1


async def test_silent_hosts_and_the_owner_gauges() -> None:
    now = [1000.0]
    metrics = SchedulerMetrics()
    config = SchedulerConfig(service_down_time=60.0)
    async with Scheduler(config, clock=lambda: now[0], metrics=metrics) as s:
        await s.update_host(make_report("early"))
        now[0] += 30
        await s.update_host(make_report("late"))
        now[0] += 31  # "early" is 61 s old, "late" 31 s
        assert _value(metrics, "actorsched_hosts_silent") == 1
        assert _value(metrics, "actorsched_hosts") == 2
        assert _value(metrics, "actorsched_active") == 1
    assert _value(metrics, "actorsched_build_info", version=__version__, python=_python()) == 1
    assert _value(metrics, "process_cpu_seconds_total") > 0


def _python() -> str:
    import platform

    return platform.python_version()


def test_one_metrics_object_serves_one_scheduler() -> None:
    metrics = SchedulerMetrics()
    Scheduler(metrics=metrics)
    with pytest.raises(ValueError, match="bound to a scheduler already"):
        Scheduler(metrics=metrics)


def test_the_service_metrics_share_the_schedulers_registry() -> None:
    scheduler = Scheduler()
    service = ServiceMetrics(scheduler)
    assert scheduler.metrics is not None
    assert service.registry is scheduler.metrics.registry
    with pytest.raises(ValueError, match="another registry"):
        ServiceMetrics(Scheduler(metrics=SchedulerMetrics()), CollectorRegistry())


def test_the_json_log_format_carries_a_decisions_fields() -> None:
    record = logging.LogRecord(
        "actorsched.decisions", logging.INFO, "", 0, "placed %s", ("x",), None
    )
    record.host = "h1"
    record.alternates = ["h2"]
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "placed x"
    assert line["logger"] == "actorsched.decisions"
    assert line["level"] == "INFO"
    assert line["host"] == "h1"
    assert line["alternates"] == ["h2"]
    # RFC 3339, UTC, the same instant as ts
    when = datetime.datetime.fromisoformat(line["time"])
    assert when.utcoffset() == datetime.timedelta(0)
    assert line["time"].endswith("+00:00")
    assert abs(when.timestamp() - line["ts"]) < 1e-5


def test_the_operating_page_lists_every_metric_serve_exposes() -> None:
    scheduler = Scheduler()
    ServiceMetrics(scheduler)
    assert scheduler.metrics is not None
    exposed = {
        metric.name
        for metric in scheduler.metrics.registry.collect()
        if metric.name.startswith("actorsched_")
    }
    text = OPERATING.read_text()
    section = text[text.index("### Metrics") :]
    section = section[: section.index("\n### ", 1)]  # to the next section
    listed = set(re.findall(r"`(actorsched_[a-z_]+)", section))
    listed = {name.removesuffix("_total") for name in listed}
    assert exposed == listed
