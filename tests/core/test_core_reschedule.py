"""Reschedule in the core: the next alternate that still passes the filters of the
claim's own request, the alternates left, MaxRetriesExceeded when spent."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import InvalidRequest, MaxRetriesExceeded, NoValidHost
from actorsched.core import SchedulerCore


def _core(hosts: int = 4, **config: Any) -> SchedulerCore:
    config.setdefault("ram_allocation_ratio", 1.0)
    config.setdefault("max_attempts", 3)
    core = make_core(make_config(**config))
    for n in range(hosts):
        # h0 has the most free memory, then h1 ...: the ranking is h0, h1, h2, h3
        core.update_host(make_report(f"h{n}", memory_mb_used=100 * n), 1.0)
    return core


def _free(core: SchedulerCore) -> dict[str, int]:
    states = core.host_states()
    assert all(s.free_ram_mb >= 0 for s in states.values()), states
    return {h: s.free_ram_mb for h, s in states.items()}


def test_reschedule_claims_the_next_alternate() -> None:
    core = _core()
    [first] = core.select_destinations(make_spec("vm1", memory_mb=1000), 2.0)
    assert (first.host, first.alternates) == ("h0", ["h1", "h2"])
    again = core.reschedule("vm1", "h0", 3.0)
    assert (again.host, again.alternates) == ("h1", ["h2"])
    assert core.claims() == {"vm1": ("h1", False)}
    assert _free(core) == {"h0": 4096, "h1": 2996, "h2": 3896, "h3": 3796}
    last = core.reschedule("vm1", "h1", 4.0)
    assert (last.host, last.alternates) == ("h2", [])
    digest = core.digest()
    with pytest.raises(MaxRetriesExceeded, match="none of its 0 alternates") as raised:
        core.reschedule("vm1", "h2", 5.0)
    assert isinstance(raised.value, NoValidHost)
    assert core.claims() == {}  # spent: the instance holds no claim
    assert core.digest() != digest
    assert _free(core) == {"h0": 4096, "h1": 3996, "h2": 3896, "h3": 3796}


def test_an_alternate_that_no_longer_fits_is_skipped() -> None:
    core = _core()
    core.select_destinations(make_spec("vm1", memory_mb=3000), 2.0)  # h0; alternates h1, h2
    core.select_destinations(make_spec("big", memory_mb=3000, force_hosts=["h1"]), 2.0)
    again = core.reschedule("vm1", "h0", 3.0)
    assert (again.host, again.alternates) == ("h2", [])
    _free(core)


def test_the_claims_own_request_is_filtered_again() -> None:
    """An alternate that would pass the resources but not the request's group
    (anti-affinity with a member placed since) is skipped."""
    core = _core()
    spec = make_spec("vm1", memory_mb=500, group=("g1", "anti-affinity"))
    [first] = core.select_destinations(spec, 2.0)
    assert first.alternates == ["h1", "h2"]
    core.select_destinations(
        make_spec("vm2", memory_mb=500, group=("g1", "anti-affinity"), force_hosts=["h1"]), 2.0
    )
    again = core.reschedule("vm1", "h0", 3.0)
    assert again.host == "h2"
    assert core.ledger.claims["vm1"].group_id == "g1"
    assert core.ledger.claims["vm1"].fingerprint == core._fingerprint(spec, False)
    # the same uuid again with its request is still that request (a redelivery)
    assert core.select_destinations(spec, 4.0)[0].host == "h2"


def test_when_every_alternate_is_spent_the_claim_is_freed() -> None:
    core = _core()
    core.select_destinations(make_spec("vm1", memory_mb=3000), 2.0)
    for n, host in enumerate(("h1", "h2")):
        core.select_destinations(make_spec(f"x{n}", memory_mb=3000, force_hosts=[host]), 2.0)
    with pytest.raises(MaxRetriesExceeded, match="h1, h2"):
        core.reschedule("vm1", "h0", 3.0)
    assert "vm1" not in core.ledger.claims
    assert _free(core)["h0"] == 4096


def test_reschedule_on_another_host_is_invalid_and_changes_nothing() -> None:
    core = _core()
    core.select_destinations(make_spec("vm1"), 2.0)
    digest = core.digest()
    with pytest.raises(InvalidRequest, match="holds its claim on h0, not on h1"):
        core.reschedule("vm1", "h1", 3.0)
    with pytest.raises(InvalidRequest, match="holds no claim"):
        core.reschedule("ghost", "h0", 3.0)
    assert core.digest() == digest


def test_a_claim_with_no_kept_request_reschedules_by_its_resources() -> None:
    core = _core()
    core.select_destinations(make_spec("vm1", memory_mb=1000), 2.0)
    core._requests.clear()  # as after a restore from a snapshot
    again = core.reschedule("vm1", "h0", 3.0)
    assert again.host == "h1"
    assert core.ledger.claims["vm1"].memory_mb == 1000


def test_a_plan_keeps_no_request() -> None:
    core = _core()
    core.plan(make_spec("vm1"), 2.0)
    assert core._requests == {}
    core.select_destinations(make_spec("vm1"), 2.0)
    assert list(core._requests) == ["vm1"]


def test_the_kept_requests_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from actorsched.core import engine

    monkeypatch.setattr(engine, "_KEPT_REQUESTS", 3)
    core = _core()
    for n in range(5):
        core.select_destinations(make_spec(f"vm{n}", memory_mb=64), 2.0)
    assert list(core._requests) == ["vm2", "vm3", "vm4"]  # the latest
    # the oldest reschedule by their resources: still placed, still sized
    assert core.reschedule("vm0", core.ledger.claims["vm0"].host, 3.0).host != "h0"
    assert core.ledger.claims["vm0"].memory_mb == 64
