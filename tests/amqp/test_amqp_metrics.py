"""The Prometheus endpoint of the service, scraped over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from amqp_support import Stack, host_report, running_stack

from actorsched import NoValidHost, RequestSpec, Scheduler, SchedulerError
from actorsched.amqp import MetricsServer, ServiceMetrics

pytestmark = pytest.mark.amqp


async def _scrape(port: int, path: str = "/metrics") -> tuple[str, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        await writer.drain()
        response = (await reader.read()).decode()
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = response.partition("\r\n\r\n")
    return head.splitlines()[0], body


async def _settled(stack: Stack, operations: int) -> None:
    """Wait (up to 10 s) until ``operations`` are acked and counted, none in flight."""
    service = stack.service
    for _ in range(1_000):
        if service.operations >= operations and service.in_flight == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(
        f"{service.operations} operations acked (want {operations}), "
        f"{service.in_flight} deliveries in flight"
    )


async def test_metrics_count_requests_by_op_and_outcome_and_show_scheduler_gauges() -> None:
    async with running_stack() as stack:
        endpoint = MetricsServer(stack.service.metrics, host="127.0.0.1", port=0)
        await endpoint.start()
        try:
            await stack.client.update_host(host_report("h1", memory_mb=2048))
            await stack.client.select_destinations(
                RequestSpec(instance_uuids=["vm-1"], memory_mb=1024, vcpus=1, disk_gb=1)
            )
            with pytest.raises(NoValidHost):
                await stack.client.select_destinations(
                    RequestSpec(instance_uuids=["vm-2"], memory_mb=4096, vcpus=1, disk_gb=1)
                )
            await _settled(stack, operations=3)  # the last ack follows its reply
            status, text = await _scrape(endpoint.port)
            missing, _ = await _scrape(endpoint.port, "/elsewhere")
        finally:
            await endpoint.close()
    assert status == "HTTP/1.1 200 OK"
    assert missing == "HTTP/1.1 404 Not Found"
    lines = set(text.splitlines())
    assert 'actorsched_requests_total{op="host_report",outcome="ok"} 1.0' in lines
    assert 'actorsched_requests_total{op="select_destinations",outcome="ok"} 1.0' in lines
    assert (
        'actorsched_requests_total{op="select_destinations",outcome="no_valid_host"} 1.0' in lines
    )
    assert 'actorsched_request_duration_seconds_count{op="select_destinations"} 2.0' in lines
    assert "actorsched_hosts 1.0" in lines
    assert "actorsched_claims 1.0" in lines
    assert "actorsched_mailbox_depth 0.0" in lines


async def test_readyz_says_503_as_a_standby_and_200_once_active() -> None:
    scheduler = Scheduler()
    await scheduler.follow()  # a standby (no journal: it follows nothing)
    endpoint = MetricsServer(ServiceMetrics(scheduler), host="127.0.0.1", port=0)
    await endpoint.start()
    try:
        assert await _scrape(endpoint.port, "/readyz") == (
            "HTTP/1.1 503 Service Unavailable",
            "standby\n",
        )
        assert await _scrape(endpoint.port, "/healthz") == ("HTTP/1.1 200 OK", "ok\n")
        _, metrics = await _scrape(endpoint.port)
        assert "actorsched_active 0.0" in metrics
        await scheduler.activate()
        assert await _scrape(endpoint.port, "/readyz") == ("HTTP/1.1 200 OK", "active\n")
        _, metrics = await _scrape(endpoint.port)
        assert "actorsched_active 1.0" in metrics
    finally:
        await endpoint.close()
        await scheduler.stop()


async def test_readyz_says_failed_once_the_journal_failed(tmp_path: Path) -> None:
    scheduler = Scheduler(journal=tmp_path / "j.sqlite")
    await scheduler.start()
    endpoint = MetricsServer(ServiceMetrics(scheduler), host="127.0.0.1", port=0)
    await endpoint.start()
    try:
        assert await _scrape(endpoint.port, "/readyz") == ("HTTP/1.1 200 OK", "active\n")
        journal = scheduler.journal
        assert journal is not None

        def broken(rows: object) -> None:
            raise OSError("disk full")

        journal._write_records = broken  # type: ignore[method-assign]
        with pytest.raises(SchedulerError, match="disk full"):
            await scheduler.update_host(host_report("h1"))
        assert await _scrape(endpoint.port, "/readyz") == (
            "HTTP/1.1 503 Service Unavailable",
            "failed\n",
        )
    finally:
        await endpoint.close()
        await scheduler.stop()


@pytest.mark.timeout(60)
async def test_readyz_says_broker_disconnected_once_the_connection_is_gone() -> None:
    async with running_stack() as stack:
        service = stack.service
        endpoint = MetricsServer(
            service.metrics, host="127.0.0.1", port=0, connected=lambda: service.connected
        )
        await endpoint.start()
        try:
            await stack.client.update_host(host_report("h1"))  # the first delivery: active
            assert await _scrape(endpoint.port, "/readyz") == ("HTTP/1.1 200 OK", "active\n")
            await service.stop()  # the service's connection to the broker is closed
            assert not service.connected
            assert await _scrape(endpoint.port, "/readyz") == (
                "HTTP/1.1 503 Service Unavailable",
                "broker_disconnected\n",
            )
            assert await _scrape(endpoint.port, "/healthz") == ("HTTP/1.1 200 OK", "ok\n")
        finally:
            await endpoint.close()


async def test_healthz_says_503_when_the_active_owner_task_has_ended() -> None:
    scheduler = Scheduler()
    await scheduler.start()
    endpoint = MetricsServer(ServiceMetrics(scheduler), host="127.0.0.1", port=0)
    await endpoint.start()
    try:
        assert await _scrape(endpoint.port, "/healthz") == ("HTTP/1.1 200 OK", "ok\n")
        owner = scheduler._owner
        assert owner is not None
        assert owner._task is not None
        owner._task.cancel()  # the owner dies under an active scheduler
        with contextlib.suppress(asyncio.CancelledError):
            await owner._task
        assert await _scrape(endpoint.port, "/healthz") == (
            "HTTP/1.1 503 Service Unavailable",
            "owner_stopped\n",
        )
    finally:
        await endpoint.close()
        await scheduler.stop()
