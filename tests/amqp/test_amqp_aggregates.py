"""Host aggregates over AMQP (the real broker): every admin operation, its errors, and a
placement that the aggregate filters steer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from amqp_support import Stack, host_report, running_stack

from actorsched import Aggregate, InvalidRequest, NoValidHost, RequestSpec, SchedulerConfig
from actorsched.amqp.protocol import BadMessage, decode_request
from actorsched.models import AGGREGATE_FILTERS, BUILTIN_FILTERS

pytestmark = pytest.mark.amqp

CONFIG = SchedulerConfig(
    seed=1,
    max_io_ops_per_host=1000,
    enabled_filters=[*BUILTIN_FILTERS, *AGGREGATE_FILTERS],
    max_aggregates=3,
)


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    async with running_stack(config=CONFIG) as running:
        yield running


def spec(uuid: str, **fields: object) -> RequestSpec:
    return RequestSpec.model_validate(
        {"instance_uuids": [uuid], "memory_mb": 512, "vcpus": 1, "disk_gb": 1, **fields}
    )


async def test_every_aggregate_operation_through_scheduler_client(stack: Stack) -> None:
    client = stack.client
    for host in ("h1", "h2"):
        await client.update_host(host_report(host))
    made = await client.create_aggregate("ssd", {"ssd": "true"}, ["h1", "not-yet"])
    assert made == Aggregate(name="ssd", hosts=["h1", "not-yet"], metadata={"ssd": "true"})
    assert await client.create_aggregate("ssd", {"ssd": "true"}, ["h1", "not-yet"]) == made
    updated = await client.update_aggregate("ssd", {"availability_zone": "az1", "ssd": None})
    assert updated.metadata == {"availability_zone": "az1"}
    assert (await client.add_host_to_aggregate("ssd", "h2")).hosts == ["h1", "not-yet", "h2"]
    assert (await client.remove_host_from_aggregate("ssd", "not-yet")).hosts == ["h1", "h2"]
    assert [a.name for a in await client.aggregates()] == ["ssd"]
    states = await client.host_states()
    assert states["h1"].availability_zone == "az1"
    assert states["h1"].aggregates == ["ssd"]
    await client.create_aggregate("empty")
    assert await client.delete_aggregate("empty") is True
    assert await client.delete_aggregate("empty") is False  # a redelivered delete
    assert await stack.scheduler.aggregates() == await client.aggregates()


async def test_aggregate_errors_come_back_as_invalid_request(stack: Stack) -> None:
    client = stack.client
    await client.create_aggregate("a", {}, ["h1"])
    with pytest.raises(InvalidRequest, match="already exists with other hosts or metadata"):
        await client.create_aggregate("a", {"k": "v"})
    with pytest.raises(InvalidRequest, match="no host aggregate named 'b'"):
        await client.update_aggregate("b", {"k": "v"})
    with pytest.raises(InvalidRequest, match="already in host aggregate 'a'"):
        await client.add_host_to_aggregate("a", "h1")
    with pytest.raises(InvalidRequest, match="still has 1 host"):
        await client.delete_aggregate("a")
    await client.create_aggregate("b")
    await client.create_aggregate("c")
    with pytest.raises(InvalidRequest, match="max_aggregates 3"):
        await client.create_aggregate("d")
    assert [a.name for a in await client.aggregates()] == ["a", "b", "c"]


async def test_placements_over_amqp_follow_the_aggregate_filters(stack: Stack) -> None:
    client = stack.client
    for host in ("h1", "h2", "h3"):
        await client.update_host(host_report(host))
    await client.create_aggregate("tenant", {"filter_tenant_id": "p1"}, ["h1"])
    await client.create_aggregate("gpu", {"gpu": "2", "instance_type": "g1"}, ["h2"])
    [one] = await client.select_destinations(
        spec("vm1", project_id="p1", flavor_name="g1", extra_specs={"gpu": ">= 1"})
    )
    assert one.host == "h2"
    with pytest.raises(NoValidHost, match="AggregateMultiTenancyIsolation removed 1"):
        await client.select_destinations(
            spec("vm2", flavor_name="m1", ignore_hosts=["h3"], project_id="p2")
        )
    [plain] = await client.select_destinations(spec("vm3", flavor_name="m1"))
    assert plain.host == "h3"  # h1 takes only p1, h2 only flavor g1


def test_bad_aggregate_bodies_are_refused_by_the_schema() -> None:
    with pytest.raises(BadMessage, match=r"metadata\.k: Input should be a valid string"):
        decode_request("create_aggregate", json.dumps({"name": "a", "metadata": {"k": 1}}).encode())
    with pytest.raises(BadMessage, match="host: Field required"):
        decode_request("add_host_to_aggregate", b'{"name": "a"}')
    with pytest.raises(BadMessage, match="Extra inputs are not permitted"):
        decode_request("aggregates", b'{"all": true}')


def test_serve_enables_the_aggregate_filters_by_flag() -> None:
    import argparse

    from actorsched import serve
    from actorsched.settings import SettingsError, load

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args(
        ["--no-journal", "--enabled-filters", "ComputeFilter, AggregateRamFilter,RamFilter"]
    )
    chosen = load(args)
    scheduler = serve._build_scheduler(chosen.scheduler, chosen.service)
    assert scheduler.config.enabled_filters == ["ComputeFilter", "AggregateRamFilter", "RamFilter"]
    default = load(parser.parse_args(["--no-journal"]))
    assert default.scheduler.enabled_filters == list(BUILTIN_FILTERS)
    with pytest.raises(SettingsError, match=r"unknown filter\(s\) \['NoSuchFilter'\]"):
        load(parser.parse_args(["--enabled-filters", "NoSuchFilter"]))
