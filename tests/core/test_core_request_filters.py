"""Nova 34's request filters ``require_tenant_aggregate`` and ``isolate_aggregates``.

Expectations from Nova 34.0.0's ``nova/scheduler/request_filter.py`` and the
database queries it makes (``nova/objects/aggregate.py``:
``get_by_metadata(value=project_id)`` matches a metadata value whole;
``get_non_matching_by_metadata_keys`` returns the aggregates with a
``trait:*`` key of value ``required`` that the request does not ask), as
Nova's unit tests (``test_request_filter.py``) drive them: on, off, a tenant
with and without aggregates, ``placement_aggregate_required_for_tenants``,
an aggregate's traits asked in full, in part and not at all.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_config, make_report, make_spec

from actorsched import NoValidHost, Scheduler

HOSTS = ("h1", "h2", "h3", "h4", "h5")


async def _passing(config: dict[str, Any], aggregates: dict[str, Any], **spec: Any) -> set[str]:
    """The hosts that pass, over five equal hosts and ``aggregates`` (name ->
    (hosts, metadata)); each host has the traits the tests ask."""
    traits = ["CUSTOM_WINDOWS", "CUSTOM_XYZ", "HW_GPU_API_DXVA", "HW_NIC_DCB_ETS"]
    async with Scheduler(make_config(max_attempts=10, **config)) as s:
        await s.update_hosts([make_report(h, traits=traits) for h in HOSTS])
        for name, (hosts, metadata) in aggregates.items():
            await s.create_aggregate(name, metadata, hosts)
        plan = await s.plan(make_spec("vm1", **spec))
        if not plan.placed:
            raise NoValidHost(plan.message or "")
        return {c.host for c in plan.instances[0].candidates}


TENANT = {
    "mine": (["h1"], {"filter_tenant_id": "p1"}),
    "mine-too": (["h2"], {"filter_tenant_id2": "p1"}),  # any filter_tenant_id* key
    "listed": (["h3"], {"filter_tenant_id": "p1,p2"}),  # a list is not the value
    "theirs": (["h4"], {"filter_tenant_id": "p2"}),
}


async def test_a_tenant_with_aggregates_gets_only_their_hosts() -> None:
    on = {"limit_tenants_to_placement_aggregate": True}
    assert await _passing(on, TENANT, project_id="p1") == {"h1", "h2"}
    assert await _passing(on, TENANT, project_id="p2") == {"h4"}


async def test_a_tenant_without_aggregates_gets_every_host_unless_one_is_required() -> None:
    on = {"limit_tenants_to_placement_aggregate": True}
    assert await _passing(on, TENANT, project_id="p9") == set(HOSTS)
    assert await _passing(on, TENANT) == set(HOSTS)  # no project names no aggregate
    required = {**on, "placement_aggregate_required_for_tenants": True}
    with pytest.raises(NoValidHost, match="require_tenant_aggregate"):
        await _passing(required, TENANT, project_id="p9")
    assert await _passing(required, TENANT, project_id="p1") == {"h1", "h2"}


async def test_the_tenant_request_filter_is_off_by_default() -> None:
    assert await _passing({}, TENANT, project_id="p1") == set(HOSTS)
    # required alone does nothing either: Nova returns before it reads it
    off = {"placement_aggregate_required_for_tenants": True}
    assert await _passing(off, TENANT, project_id="p9") == set(HOSTS)


ISOLATING = {
    "windows": (["h1"], {"trait:CUSTOM_WINDOWS": "required"}),
    "windows-xyz": (["h2"], {"trait:CUSTOM_WINDOWS": "required", "trait:CUSTOM_XYZ": "required"}),
    "gpu": (["h3"], {"trait:HW_GPU_API_DXVA": "required", "trait:HW_NIC_DCB_ETS": "required"}),
    "not-required": (["h4"], {"trait:CUSTOM_XYZ": "forbidden"}),  # only "required" isolates
}


async def test_an_aggregate_takes_only_requests_that_require_all_its_traits() -> None:
    on = {"enable_isolated_aggregate_filtering": True}
    # nothing required: every isolating aggregate's hosts are out
    assert await _passing(on, ISOLATING) == {"h4", "h5"}
    # all of gpu's traits: gpu's host passes, the Windows ones do not
    gpu = ["HW_GPU_API_DXVA", "HW_NIC_DCB_ETS"]
    assert await _passing(on, ISOLATING, required_traits=gpu) == {"h3", "h4", "h5"}
    # part of an aggregate's traits is not enough
    assert await _passing(on, ISOLATING, required_traits=["HW_GPU_API_DXVA"]) == {"h4", "h5"}
    windows = ["CUSTOM_WINDOWS"]
    assert await _passing(on, ISOLATING, required_traits=windows) == {"h1", "h4", "h5"}
    both = ["CUSTOM_WINDOWS", "CUSTOM_XYZ"]
    assert await _passing(on, ISOLATING, required_traits=both) == {"h1", "h2", "h4", "h5"}


async def test_isolation_is_off_by_default() -> None:
    assert await _passing({}, ISOLATING) == set(HOSTS)


async def test_the_aggregates_a_request_filter_picked_are_picked_again_after_a_change() -> None:
    # a project's aggregates and an isolating aggregate are kept between requests
    # (AggregateBook.named); every aggregate change must drop them
    config = make_config(
        max_attempts=10,
        limit_tenants_to_placement_aggregate=True,
        enable_isolated_aggregate_filtering=True,
    )
    async with Scheduler(config) as s:
        await s.update_hosts([make_report(h) for h in HOSTS])
        await s.create_aggregate("other", {"filter_tenant_id": "p2"}, ["h5"])

        async def passing(**spec: Any) -> set[str]:
            plan = await s.plan(make_spec("vm1", **spec))
            return {c.host for c in plan.instances[0].candidates}

        assert await passing(project_id="p1") == set(HOSTS)  # p1 has none yet
        await s.create_aggregate("mine", {"filter_tenant_id": "p1"}, ["h1", "h2"])
        assert await passing(project_id="p1") == {"h1", "h2"}
        await s.update_aggregate("mine", {"filter_tenant_id": "p3"})
        assert await passing(project_id="p1") == set(HOSTS)
        assert await passing(project_id="p3") == {"h1", "h2"}
        assert await passing() == set(HOSTS)
        await s.create_aggregate("gpu", {"trait:CUSTOM_GPU": "required"}, ["h3"])
        assert await passing() == set(HOSTS) - {"h3"}
        await s.update_aggregate("gpu", {"trait:CUSTOM_GPU": None})
        assert await passing() == set(HOSTS)


@pytest.mark.parametrize(
    ("filters", "nova_release", "passing"),
    [
        (["ImagePropertiesFilter"], 34, {"h2", "h3", "h4", "h5"}),
        (["ComputeFilter", "ImagePropertiesFilter"], 34, {"h2", "h3", "h4", "h5"}),
        # Nova 18 has no compute_status_filter: only ComputeFilter removed them
        (["RamFilter"], 18, set(HOSTS)),
    ],
)
async def test_a_disabled_compute_takes_nothing_whatever_the_filters(
    filters: list[str], nova_release: int, passing: set[str]
) -> None:
    """Nova 34's compute_status_filter (test_request_filter.py test_compute_status_filter:
    it always forbids COMPUTE_STATUS_DISABLED): h1's disabled service takes nothing,
    ComputeFilter on or not."""
    config = make_config(max_attempts=10, enabled_filters=filters, nova_release=nova_release)
    async with Scheduler(config) as s:
        await s.update_hosts([make_report(h, enabled=h != "h1") for h in HOSTS])
        plan = await s.plan(make_spec("vm1"))
        assert {c.host for c in plan.instances[0].candidates} == passing
        if "ComputeFilter" not in filters and nova_release == 34:
            await s.update_hosts([make_report(h, 2, enabled=False) for h in HOSTS])
            with pytest.raises(NoValidHost, match="compute_status_filter removed 5"):
                await s.select_destinations(make_spec("vm2"))


@pytest.mark.parametrize("nova_release", [18, 34])
async def test_a_forced_host_still_passes_placements_zone_traits_and_enabled_checks(
    nova_release: int,
) -> None:
    """force_hosts skips Nova's filters, not Placement's allocation candidates
    (Nova 34): a forced host outside the zone's aggregates, without a required
    trait, or whose compute is disabled takes nothing there. Nova 18 had no such
    query: the forced host is taken."""
    config = make_config(max_attempts=10, nova_release=nova_release)
    async with Scheduler(config) as s:
        await s.update_hosts(
            [
                make_report("h1", traits=["CUSTOM_SSD"]),
                make_report("h2"),
                make_report("off", enabled=False),
            ]
        )
        await s.create_aggregate("zoned", {"availability_zone": "az1"}, ["h1"])
        cases = {
            "zone": make_spec("z", force_hosts=["h2"], availability_zone="az1"),
            "trait": make_spec("t", force_hosts=["h2"], required_traits=["CUSTOM_SSD"]),
            "forbidden": make_spec("f", force_hosts=["h1"], forbidden_traits=["CUSTOM_SSD"]),
            "disabled": make_spec("d", force_hosts=["off"]),
        }
        for name, spec in cases.items():
            if nova_release == 34:
                with pytest.raises(NoValidHost, match="Placement's zone, traits and enabled"):
                    await s.select_destinations(spec)
            else:
                (placed,) = await s.select_destinations(spec)
                assert placed.host == spec.force_hosts[0], name
        # what Placement allows, a forced host takes
        (placed,) = await s.select_destinations(
            make_spec("ok", force_hosts=["h1"], availability_zone="az1")
        )
        assert placed.host == "h1"
