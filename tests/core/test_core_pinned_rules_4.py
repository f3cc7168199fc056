"""Rules a seeded mutation sample (seed 3 of make mutate) found unpinned (issue 31):
the aggregate add_host_to_aggregate answers, a hard affinity group's ``hosts``,
isolated aggregates with no aggregate, an exact hypervisor version, JsonFilter's
``$host`` of a host with a node name, a resize's source left out, the log of an
owner task that died, and the ties of the gathered ranking."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec, ram_only_config

from actorsched import SchedulerStopped, ServerGroup
from actorsched.actor import Owner
from actorsched.core import SelectDestinations

TIMEOUT = 10.0

# -- aggregates ---------------------------------------------------------------------


def test_adding_a_host_to_an_aggregate_answers_the_aggregate_with_it() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.create_aggregate("agg", {"k": "v"}, [])
    aggregate = core.add_host_to_aggregate("agg", "h1")
    assert aggregate is not None
    assert aggregate.name == "agg"
    assert list(aggregate.hosts) == ["h1"]


def test_isolated_aggregate_filtering_with_no_aggregate_passes_every_host() -> None:
    core = make_core(make_config(enable_isolated_aggregate_filtering=True))
    core.update_host(make_report("h1"), 1.0)
    assert core.select_destinations(make_spec("vm-1"), 2.0)[0].host == "h1"


# -- server groups ------------------------------------------------------------------


def test_hard_affinity_follows_the_hosts_the_group_names() -> None:
    # no member placed here, but the group names h1 (a member placed elsewhere):
    # the request goes there, though h2 has the most free RAM
    core = make_core(ram_only_config())
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=8192), 1.0)
    group = ServerGroup(id="g", policy="affinity", hosts=["h1", "gone"])
    spec = make_spec("vm-1").model_copy(update={"group": group})
    assert core.select_destinations(spec, 2.0)[0].host == "h1"


@pytest.mark.parametrize("hosts", [["h1"], ["h1", "gone"]], ids=["reported", "and-gone"])
def test_hard_affinity_by_members_follows_the_hosts_the_group_names(hosts: list[str]) -> None:
    # the group names members (none placed by this scheduler, none on a report)
    # and h1 among its hosts: the request goes there, though h2 has the most
    # free RAM; a named host no report lists counts nowhere
    core = make_core(ram_only_config())
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=8192), 1.0)
    group = ServerGroup(id="g", policy="affinity", hosts=hosts, members=["vm-0", "vm-1"])
    spec = make_spec("vm-1").model_copy(update={"group": group})
    assert core.select_destinations(spec, 2.0)[0].host == "h1"


# -- host facts ---------------------------------------------------------------------


def test_an_image_asking_an_exact_hypervisor_version_passes_that_version() -> None:
    core = make_core(make_config(enabled_filters=["ImagePropertiesFilter"]))
    core.update_host(
        make_report(
            "h1", hypervisor_version=6_000_000, supported_instances=[["x86_64", "kvm", "hvm"]]
        ),
        1.0,
    )
    core.update_host(
        make_report(
            "h2", hypervisor_version=6_001_000, supported_instances=[["x86_64", "kvm", "hvm"]]
        ),
        1.0,
    )
    spec = make_spec(
        "vm-1",
        image_properties={"hw_architecture": "x86_64", "img_hv_requested_version": "==6.0"},
    )
    assert core.select_destinations(spec, 2.0)[0].host == "h1"


def test_json_filter_host_is_the_host_name_not_its_node_name() -> None:
    core = make_core(make_config(enabled_filters=["JsonFilter"]))
    core.update_host(make_report("host1"), 1.0)
    core.update_host(make_report("host2", node="node-2"), 1.0)

    def passing(query: Any) -> set[str]:
        plan = core.plan(make_spec("p", query=json.dumps(query)), 2.0)
        return {c.host for c in plan.instances[0].candidates} if plan.placed else set()

    assert passing(["=", "$host", "host2"]) == {"host2"}
    assert passing(["=", "$host", "node-2"]) == set()
    assert passing(["=", "$nodename", "node-2"]) == {"host2"}


# -- moves --------------------------------------------------------------------------


def test_a_resize_with_a_spec_never_lands_on_its_source() -> None:
    # the spec names no ignore_hosts: the move adds the source, so the resize
    # goes to h2 though h1 keeps the most free RAM
    core = make_core(ram_only_config())
    core.update_host(make_report("h1", memory_mb=8192), 1.0)
    core.update_host(make_report("h2"), 1.0)
    assert core.select_destinations(make_spec("vm1"), 2.0)[0].host == "h1"
    assert core.move("vm1", "mig1", make_spec("vm1", memory_mb=1024), 3.0).host == "h2"


# -- the owner ----------------------------------------------------------------------


class _Crash(BaseException):
    """Not an Exception: nothing in the owner catches it."""


class _CrashingFilter:
    name = "Crashing"

    def filter_all(self, table: Any, ctx: Any) -> None:
        raise _Crash("a plug-in gone wrong")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


async def test_an_owner_task_that_died_logs_an_error_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = make_core(filters=[_CrashingFilter()])
    core.update_host(make_report("h1"), 0.0)
    owner = Owner(core, mailbox_size=4, max_batch=1, clock=_Clock())
    caplog.set_level(logging.ERROR, logger="actorsched")
    owner.start()
    dying = owner.ask(SelectDestinations(make_spec("vm")))
    try:
        with pytest.raises(SchedulerStopped, match="owner task died"):
            await asyncio.wait_for(dying, TIMEOUT)
        await asyncio.sleep(0)
    finally:
        with contextlib.suppress(BaseException):
            await owner.stop()
    died = [r for r in caplog.records if r.getMessage() == "scheduler owner task died"]
    assert len(died) == 1
    assert died[0].levelno == logging.ERROR
    assert died[0].exc_info is not None
    assert isinstance(died[0].exc_info[1], _Crash)


# -- ranking --------------------------------------------------------------------------


@pytest.mark.parametrize("compress_below", [0.0, 2.0], ids=["full", "gathered"])
def test_hosts_whose_weights_tie_rank_lowest_row_first(compress_below: float) -> None:
    # h1 and h2 have free RAM, vCPUs and disk of 0.1, 0.2, 0.7 and 0.2, 0.7, 0.1
    # of h0's: their weights tie (1.0 each), so h1, the lower row, ranks first,
    # the gathered ranking as the full table's (its weights summed as exactly)
    core = make_core(
        make_config(
            cpu_allocation_ratio=1.0,
            ram_allocation_ratio=1.0,
            disk_allocation_ratio=1.0,
            io_ops_weight_multiplier=0.0,
        )
    )
    core.ranker.shortcut = False
    core.ranker.compress_below = compress_below
    full = {"memory_mb": 1000, "vcpus": 10, "local_gb": 10}
    core.update_host(make_report("h0", **full), 1.0)
    core.update_host(
        make_report("h1", **full, memory_mb_used=900, vcpus_used=8, local_gb_used=3), 1.0
    )
    core.update_host(
        make_report("h2", **full, memory_mb_used=800, vcpus_used=3, local_gb_used=9), 1.0
    )
    plan = core.plan(make_spec("p", memory_mb=0, vcpus=0, disk_gb=0), 2.0)
    assert [c.host for c in plan.instances[0].candidates] == ["h0", "h1", "h2"]
