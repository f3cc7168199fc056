"""The embedded API of host aggregates: ``async with Scheduler() as s`` and its admin calls."""

from __future__ import annotations

import pytest
from conftest import make_report, make_spec

from actorsched import Aggregate, InvalidRequest, Scheduler, SchedulerConfig
from actorsched.core import AddHostToAggregate, CreateAggregate, GetAggregates
from actorsched.models import AGGREGATE_FILTERS, BUILTIN_FILTERS

CONFIG = SchedulerConfig(seed=1, enabled_filters=[*BUILTIN_FILTERS, *AGGREGATE_FILTERS])


async def test_the_admin_calls_and_a_placement_they_steer() -> None:
    async with Scheduler(CONFIG) as s:
        await s.update_host(make_report("h1"))
        await s.update_host(make_report("h2", memory_mb=65536))  # the best host by RAM
        made = await s.create_aggregate("az1", {"availability_zone": "az1"}, ["h1"])
        assert made == Aggregate(name="az1", hosts=["h1"], metadata={"availability_zone": "az1"})
        [selection] = await s.select_destinations(make_spec("vm1", availability_zone="az1"))
        assert selection.host == "h1"
        await s.update_aggregate("az1", {"ssd": "true"})
        await s.add_host_to_aggregate("az1", "h3")
        await s.remove_host_from_aggregate("az1", "h3")
        assert await s.aggregates() == [
            Aggregate(
                name="az1", hosts=["h1"], metadata={"availability_zone": "az1", "ssd": "true"}
            )
        ]
        states = await s.host_states()
        assert (states["h1"].availability_zone, states["h1"].aggregates) == ("az1", ["az1"])
        assert states["h2"].aggregates == []
        await s.create_aggregate("spare")
        assert await s.delete_aggregate("spare") is True
        # submit() takes the same commands, checked the same way
        assert isinstance(await s.submit(CreateAggregate("other", {"k": "v"})), Aggregate)
        assert [a.name for a in await s.submit(GetAggregates())] == ["az1", "other"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.create_aggregate("a", {"k": 1}), "metadata.k: Input should be a valid string"),
        (lambda s: s.create_aggregate("a", hosts="h1"), "hosts must be a list of host names"),
        (lambda s: s.create_aggregate("", {}), "name: String should have at least 1 character"),
        (lambda s: s.create_aggregate("a", {"k": "x" * 256}), "at most 255 characters"),
        (lambda s: s.update_aggregate("a", {"k\n": "v"}), "control or format characters"),
        (lambda s: s.add_host_to_aggregate("a", 7), "host: Input should be a valid string"),
        (lambda s: s.submit(AddHostToAggregate("a", "")), "at least 1 character"),
    ],
    ids=[
        "value-type",
        "hosts-string",
        "empty-name",
        "long-value",
        "control-key",
        "host-type",
        "submit",
    ],
)
async def test_bad_input_is_a_clear_invalid_request_and_changes_nothing(
    call: object, message: str
) -> None:
    async with Scheduler(CONFIG) as s:
        await s.create_aggregate("a", {"k": "v"}, ["h1"])
        before = s.core.digest()
        with pytest.raises(InvalidRequest, match=message):
            await call(s)  # type: ignore[operator]
        assert s.core.digest() == before
