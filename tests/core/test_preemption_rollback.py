"""A request that preempted for one instance and then failed for another gives the
victims back: the same claims, the same host figures (the core's digest), assumed
and confirmed victims alike, and the error says no host could be freed."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import NoValidHost
from actorsched.core import SchedulerCore

FULL = 4096  # a host's memory (make_report): one claim of it fills the host


def _core(**config: Any) -> SchedulerCore:
    """Hosts a and b of 4096 MB, every ratio 1.0, preemption on."""
    config.setdefault("ram_allocation_ratio", 1.0)
    config.setdefault("cpu_allocation_ratio", 1.0)
    config.setdefault("disk_allocation_ratio", 1.0)
    config.setdefault("preemption", True)
    return make_core(make_config(**config))


def _over_committed(core: SchedulerCore) -> list[str]:
    return [
        name
        for name, s in core.host_states().items()
        if s.free_ram_mb < 0 or s.free_disk_gb < 0 or s.vcpus_used > s.vcpus_total
    ]


@pytest.mark.parametrize("victim_confirmed", [False, True], ids=["assumed", "confirmed"])
def test_a_failed_request_gives_its_first_instances_victims_back(victim_confirmed: bool) -> None:
    core = _core()
    # a: one low-priority claim fills it (listed by a's report when confirmed)
    listed = ["low"] if victim_confirmed else []
    core.update_host(make_report("a", 1, instances=listed), 1.0)
    core.update_host(make_report("b", 1), 1.0)
    core.select_destinations(make_spec("low", memory_mb=FULL, force_hosts=["a"]), 2.0)
    if victim_confirmed:
        core.update_host(make_report("a", 2, memory_mb_used=FULL, instances=["low"]), 2.5)
    # b: a claim of a higher priority than the request's fills it
    core.select_destinations(make_spec("high", memory_mb=FULL, priority=10, force_hosts=["b"]), 3.0)
    assert core.ledger.claims["low"].confirmed is victim_confirmed
    before = core.digest()
    states = core.host_states()
    claims = core.claims()

    # alone, one instance of priority 5 would preempt "low" on a ...
    [alone] = core.plan(make_spec("x0", memory_mb=FULL, priority=5), 4.0).instances
    assert alone.host == "a"
    assert core.digest() == before  # a plan gives its victims back too
    # ... but the second instance finds no host and nothing it may preempt
    with pytest.raises(NoValidHost, match="no host could be freed by preempting") as raised:
        core.select_destinations(make_spec("x0", "x1", memory_mb=FULL, priority=5), 4.0)
    assert raised.value.instance_uuid == "x1"
    assert core.digest() == before
    assert core.host_states() == states
    assert core.claims() == claims
    assert core.ledger.claims["low"].confirmed is victim_confirmed
    assert core.ledger.claims["low"].priority == 0
    assert not {"x0", "x1"} & set(core.ledger.claims)
    assert _over_committed(core) == []

    # the victim was given back whole: the same request again preempts it the same way
    [placed] = core.select_destinations(make_spec("x0", memory_mb=FULL, priority=5), 5.0)
    assert (placed.host, placed.preempted) == ("a", ["low"])
    assert "low" not in core.ledger.claims
    assert _over_committed(core) == []


def test_a_failed_request_gives_back_the_victims_of_every_instance_it_placed() -> None:
    core = _core()
    for host in ("a", "b", "c"):
        core.update_host(make_report(host, 1), 1.0)
    # a and b: two low-priority claims each; c: one high-priority claim
    for host in ("a", "b"):
        for n in range(2):
            core.select_destinations(
                make_spec(f"low-{host}{n}", memory_mb=FULL // 2, force_hosts=[host]), 2.0
            )
    core.select_destinations(make_spec("high", memory_mb=FULL, priority=10, force_hosts=["c"]), 3.0)
    before = core.digest()
    claims = core.claims()
    # three instances of priority 5: the first two free a and b, the third finds nothing
    with pytest.raises(NoValidHost) as raised:
        core.select_destinations(make_spec("x0", "x1", "x2", memory_mb=FULL, priority=5), 4.0)
    assert raised.value.instance_uuid == "x2"
    assert core.digest() == before
    assert core.claims() == claims
    assert _over_committed(core) == []
    # two instances do fit, each by preempting both claims of one host
    placed = core.select_destinations(make_spec("x0", "x1", memory_mb=FULL, priority=5), 5.0)
    assert sorted((s.host, tuple(sorted(s.preempted))) for s in placed) == [
        ("a", ("low-a0", "low-a1")),
        ("b", ("low-b0", "low-b1")),
    ]
    assert set(core.ledger.claims) == {"high", "x0", "x1"}
    assert _over_committed(core) == []
