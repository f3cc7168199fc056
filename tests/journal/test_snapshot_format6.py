"""Snapshot format 6: each claim's priority and preempted claims, and the requests the
core keeps for a reschedule or move, survive encode/restore and a restart from a
snapshot (SQLite and PostgreSQL); a format 5 snapshot still restores (priority 0,
nothing preempted, no kept request); damaged new fields are refused by name."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from conftest import make_config, make_report, make_spec
from journal_backends import BACKENDS, Backend, make_backend

from actorsched import (
    Destination,
    MaxRetriesExceeded,
    NoValidHost,
    RequestSpec,
    Scheduler,
    ServerGroup,
)
from actorsched.core import SchedulerCore
from actorsched.core import engine as engine_module
from actorsched.core.image import capture
from actorsched.journal import snapshot
from actorsched.journal.snapshot import SNAPSHOT_FORMAT, encode, restore

CONFIG = make_config(seed=1, service_down_time=1e9, preemption=True)


def _restored(core: SchedulerCore, text: str | None = None) -> SchedulerCore:
    again = SchedulerCore(core.config)
    restore(again, encode(capture(core)) if text is None else text)
    return again


def _preempting_core() -> SchedulerCore:
    """Host a full of a low (older) and a high priority claim, then an urgent request
    that preempted the low one; host b with a request of two instances (zone, traits,
    project, flavor) kept for both."""
    core = SchedulerCore(CONFIG)
    core.update_host(make_report("a", 1, availability_zone="az1", traits=["SSD"]), now=1.0)
    core.select_destinations(make_spec("low", memory_mb=2048, priority=-5), now=2.0)
    core.select_destinations(make_spec("high", memory_mb=2048, priority=7), now=3.0)
    [urgent] = core.select_destinations(make_spec("urgent", memory_mb=2048, priority=10), 4.0)
    assert urgent.preempted == ["low"]  # the least important: high is spared
    core.update_host(make_report("b", 1, availability_zone="az1", traits=["SSD"]), now=5.0)
    spec = make_spec(
        "m1",
        "m2",
        availability_zone="az1",
        required_traits=["SSD"],
        project_id="p1",
        flavor_name="small",
        priority=3,
    )
    core.select_destinations(spec, now=6.0)
    return core


def test_priority_preempted_and_kept_requests_round_trip() -> None:
    core = _preempting_core()
    data = json.loads(encode(capture(core)))
    assert data["format"] == SNAPSHOT_FORMAT  # 8: format 6's fields, host facts, units
    claims = data["claims"]
    new = zip(claims["priority"], claims["preempted"], strict=True)
    by_uuid = dict(zip(claims["instance_uuid"], new, strict=True))
    assert by_uuid == {"high": (7, []), "urgent": (10, ["low"]), "m1": (3, []), "m2": (3, [])}
    requests = data["requests"]
    # in the order kept (low's is kept though it was preempted), m1 and m2 share one spec
    assert requests["instance_uuid"] == ["low", "high", "urgent", "m1", "m2"]
    assert requests["spec"] == [0, 1, 2, 3, 3]
    assert requests["specs"][3]["availability_zone"] == "az1"
    assert requests["specs"][3]["instance_uuids"] == ["m1", "m2"]

    again = _restored(core)
    assert again.digest() == core.digest()  # the digest covers priorities and preempted
    for uuid, claim in core.ledger.claims.items():
        restored = again.ledger.claims[uuid]
        assert (restored.priority, restored.preempted) == (claim.priority, claim.preempted)
        assert restored.selection == claim.selection
    kept = again.kept_requests()
    assert list(kept.items()) == list(core.kept_requests().items())
    assert kept["m1"] is kept["m2"]  # one spec again, as the core kept it
    # a redelivered preempting request answers as it did, and releases nothing
    [answer] = again.select_destinations(make_spec("urgent", memory_mb=2048, priority=10), 7.0)
    assert answer.preempted == ["low"]
    assert "high" in again.ledger.claims


def test_a_restored_claim_names_its_victims_but_does_not_release_them_again() -> None:
    core = _preempting_core()
    core.release("high", now=7.0)
    core.select_destinations(make_spec("low", memory_mb=2048, priority=-5), now=8.0)
    assert core.ledger.claims["low"].host == "a"  # back, where urgent preempted it
    again = _restored(core)
    assert again.ledger.claims["urgent"].preempted == ("low",)
    assert "low" in again.ledger.claims
    assert again.digest() == core.digest()
    assert again.host_states() == core.host_states()


def test_the_kept_order_survives_so_the_bound_drops_the_same_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine_module, "_KEPT_REQUESTS", 3)
    core = SchedulerCore(CONFIG)
    core.update_host(make_report("a", 1), now=1.0)
    for n in range(4):
        core.select_destinations(make_spec(f"vm{n}"), now=2.0 + n)
    core.select_destinations(make_spec("vm1"), now=9.0)  # a redelivery keeps nothing anew
    assert list(core.kept_requests()) == ["vm1", "vm2", "vm3"]
    again = _restored(core)
    assert list(again.kept_requests()) == ["vm1", "vm2", "vm3"]
    for placed in (core, again):
        placed.select_destinations(make_spec("vm9"), now=10.0)
    assert list(again.kept_requests()) == list(core.kept_requests()) == ["vm2", "vm3", "vm9"]


def test_restore_requests_keeps_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "_KEPT_REQUESTS", 2)
    core = SchedulerCore(CONFIG)
    core.restore_requests((f"vm{n}", make_spec(f"vm{n}")) for n in range(3))
    assert list(core.kept_requests()) == ["vm1", "vm2"]


def test_every_field_of_a_kept_request_round_trips() -> None:
    spec = RequestSpec(
        instance_uuids=["vm1", "vm2"],
        memory_mb=1,
        vcpus=1,
        disk_gb=1,
        group=ServerGroup(id="g", policy="anti-affinity", hosts=["x", "x"], max_server_per_host=2),
        requested_destination=Destination(host="h", node="n"),
        extra_specs={"k": "v"},
        forbidden_traits=["GPU"],
        ignore_hosts=["Y"],
        force_hosts=["H"],
        force_nodes=["N"],
        same_host=["vm0"],
        different_host=["vm9"],
        wait=5.0,
        priority=-3,
    )
    core = SchedulerCore(CONFIG)
    core.restore_requests([("vm2", spec), ("vm1", spec)])
    kept = _restored(core).kept_requests()
    assert list(kept.items()) == [("vm2", spec), ("vm1", spec)]
    assert kept["vm1"] is kept["vm2"]


def _format_5(core: SchedulerCore) -> str:
    """``core``'s snapshot as format 5 wrote it: no priority or preempted column, no
    kept requests."""
    data = json.loads(encode(capture(core)))
    del data["claims"]["priority"], data["claims"]["preempted"], data["requests"]
    del data["host_facts"], data["hosts"]["host_facts"]  # format 7's
    for column in ("vcpus_reserved", "local_gb_reserved"):  # format 8's
        assert set(data["hosts"].pop(column)) <= {0}
    for column in ("memory_mb_units", "vcpus_units", "local_gb_units"):
        assert set(data["hosts"].pop(column)) <= {None}
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 5
    return json.dumps(data)


def test_a_format_5_snapshot_restores_with_priority_0_and_nothing_kept() -> None:
    core = _preempting_core()
    again = _restored(core, _format_5(core))
    assert again.host_states() == core.host_states()
    assert again.claims() == core.claims()
    assert {(c.priority, c.preempted) for c in again.ledger.claims.values()} == {(0, ())}
    assert again.kept_requests() == {}
    # what format 5 held is all there: its claims and fingerprints
    for uuid, claim in core.ledger.claims.items():
        assert again.ledger.claims[uuid].fingerprint == claim.fingerprint
        assert again.ledger.claims[uuid].alternates == claim.alternates


def _rescheduling_core(rule: str) -> tuple[SchedulerCore, str, str]:
    """vm1 placed by a request asking zone az1 and trait SSD, with one alternate that
    has since lost ``rule`` (its zone or its trait); vm1's host and that alternate."""
    core = SchedulerCore(CONFIG)
    for host in ("a", "b"):
        core.update_host(make_report(host, 1, availability_zone="az1", traits=["SSD"]), now=1.0)
    spec = make_spec("vm1", availability_zone="az1", required_traits=["SSD"])
    [placed] = core.select_destinations(spec, now=2.0)
    [alternate] = placed.alternates
    changed: dict[str, Any] = {"availability_zone": "az2", "traits": ["SSD"]}
    if rule == "trait":
        changed = {"availability_zone": "az1"}
    core.update_host(make_report(alternate, 2, **changed), now=3.0)
    return core, placed.host, alternate


@pytest.mark.parametrize("rule", ["zone", "trait"])
def test_a_reschedule_after_a_restore_asks_the_original_request(rule: str) -> None:
    core, host, alternate = _rescheduling_core(rule)
    again = _restored(core)
    # the alternate passes for the claim's resources alone, not for its request
    with pytest.raises(MaxRetriesExceeded, match=f"alternates \\({alternate}\\)"):
        again.reschedule("vm1", host, now=4.0)
    assert "vm1" not in again.ledger.claims
    with pytest.raises(MaxRetriesExceeded):
        core.reschedule("vm1", host, now=4.0)  # as the scheduler that never restarted


def test_a_move_after_a_restore_asks_the_original_request() -> None:
    core = SchedulerCore(CONFIG)
    core.update_host(make_report("a", 1, traits=["SSD"]), now=1.0)
    core.update_host(make_report("b", 1), now=1.0)  # room, but no SSD
    core.select_destinations(make_spec("vm1", required_traits=["SSD"]), now=2.0)
    again = _restored(core)
    with pytest.raises(NoValidHost):
        again.move("vm1", "mig1", None, 3.0)
    assert again.ledger.claims["vm1"].host == "a"


def test_a_preemption_after_a_restore_spares_a_high_priority_claim() -> None:
    core = SchedulerCore(CONFIG)
    core.update_host(make_report("a", 1), now=1.0)
    core.select_destinations(make_spec("low", memory_mb=2048, priority=0), now=2.0)
    core.select_destinations(make_spec("high", memory_mb=2048, priority=100), now=3.0)
    again = _restored(core)
    # low is older: with equal priorities it would be spared and high preempted
    [placed] = again.select_destinations(make_spec("new", memory_mb=2048, priority=50), 4.0)
    assert placed.preempted == ["low"]
    assert again.ledger.claims["high"].host == "a"
    # and a claim no request may outrank by enough is not preempted at all
    with pytest.raises(NoValidHost, match="preempting claims of priority 49"):
        again.select_destinations(make_spec("more", memory_mb=2048, priority=50), 5.0)


# -- a restart from a snapshot, on both backends --------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    made.cleanup()


def _from_the_snapshot(s: Scheduler) -> None:
    """``s`` rebuilt its state from the snapshot alone (no record replayed)."""
    assert s.journal is not None
    assert s.journal.recovery is not None
    assert s.journal.recovery.snapshot_seq > 0
    assert s.journal.recovery.replayed == 0


async def test_priorities_survive_a_restart_from_a_snapshot(backend: Backend) -> None:
    async with Scheduler(CONFIG, journal=backend.journal(10**6)) as s:
        await s.update_host(make_report("a", 1))
        await s.select_destinations(make_spec("low", memory_mb=2048, priority=0))
        await s.select_destinations(make_spec("high", memory_mb=2048, priority=100))
        [full] = await s.select_destinations(make_spec("vip", memory_mb=2048, priority=200))
        assert full.preempted == ["low"]
        before = s.core.digest()
    async with Scheduler(CONFIG, journal=backend.journal(10**6)) as again:
        _from_the_snapshot(again)
        assert again.core.digest() == before
        # the redelivery answers as before
        redelivered = await again.select_destinations(
            make_spec("vip", memory_mb=2048, priority=200)
        )
        assert redelivered == [full]
        # high (100) is not preempted by a request of 50
        with pytest.raises(NoValidHost):
            await again.select_destinations(make_spec("new", memory_mb=2048, priority=50))
        assert (await again.where("high")).host == "a"


async def test_a_reschedule_after_a_restart_from_a_snapshot_asks_the_original_request(
    backend: Backend,
) -> None:
    async with Scheduler(CONFIG, journal=backend.journal(10**6)) as s:
        for host in ("a", "b"):
            await s.update_host(make_report(host, 1, traits=["SSD"]))
        [placed] = await s.select_destinations(make_spec("vm1", required_traits=["SSD"]))
        [alternate] = placed.alternates
        await s.update_host(make_report(alternate, 2))  # no SSD any more
    async with Scheduler(CONFIG, journal=backend.journal(10**6)) as again:
        _from_the_snapshot(again)
        with pytest.raises(MaxRetriesExceeded):
            await again.reschedule("vm1", placed.host)


# -- damaged fields ---------------------------------------------------------------------


def _claim(data: dict[str, Any], uuid: str, column: str, value: Any) -> None:
    data["claims"][column][data["claims"]["instance_uuid"].index(uuid)] = value


def _requests(data: dict[str, Any]) -> dict[str, Any]:
    section: dict[str, Any] = data["requests"]
    return section


Damage = Callable[[dict[str, Any]], object]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: _claim(d, "high", "priority", "7"), "claim 'high' has priority '7': not a"),
        (lambda d: _claim(d, "high", "priority", True), "claim 'high' has priority True"),
        (lambda d: _claim(d, "high", "priority", 7.0), "claim 'high' has priority 7.0"),
        (lambda d: _claim(d, "high", "priority", 1_000_001), "from -1,000,000 to 1,000,000"),
        (lambda d: _claim(d, "urgent", "preempted", "low"), "'urgent' has preempted low: not"),
        (lambda d: _claim(d, "urgent", "preempted", [1]), "list of instance uuids"),
        (lambda d: d["claims"].pop("priority"), "snapshot claims must have exactly the columns"),
        (lambda d: d["claims"]["preempted"].pop(), "columns must be lists of one length"),
        (lambda d: d.pop("requests"), "snapshot requests must have exactly specs and"),
        (lambda d: _requests(d).pop("spec"), "snapshot requests must have exactly specs and"),
        (lambda d: _requests(d).update(specs={}), "snapshot requests' specs must be a list"),
        (lambda d: _requests(d)["spec"].pop(), "columns must be lists of one length"),
        (lambda d: _requests(d)["spec"].__setitem__(0, 9), "'low' is kept with spec 9, not an"),
        (lambda d: _requests(d)["spec"].__setitem__(0, True), "'low' is kept with spec True"),
        (lambda d: _requests(d)["spec"].__setitem__(0, 1), "'low' is kept with spec 1, whose"),
        (lambda d: _requests(d)["specs"].append({}), "spec 4 does not parse"),
        (
            lambda d: _requests(d)["specs"].append(_requests(d)["specs"][0]),
            "snapshot request spec 4 is kept for no instance",
        ),
        (lambda d: _requests(d)["instance_uuid"].__setitem__(0, 5), "instance_uuid 5 is not"),
        (lambda d: _requests(d)["instance_uuid"].__setitem__(4, "m1"), "'m1' is kept twice"),
        (
            lambda d: _requests(d)["specs"][2].update(memory_mb="2048"),
            "snapshot request spec 2 does not parse",
        ),
        (lambda d: d.update(format=SNAPSHOT_FORMAT + 1), "unknown snapshot format"),
    ],
)
def test_damaged_new_fields_are_refused_by_name(damage: Damage, message: str) -> None:
    data = json.loads(encode(capture(_preempting_core())))
    damage(data)
    with pytest.raises(ValueError, match=message):
        restore(SchedulerCore(CONFIG), json.dumps(data))


def test_a_format_5_snapshot_with_format_6_columns_is_refused() -> None:
    data = json.loads(encode(capture(_preempting_core())))
    del data["host_facts"], data["hosts"]["host_facts"]  # format 7's
    for column in ("vcpus_reserved", "local_gb_reserved"):  # format 8's
        assert set(data["hosts"].pop(column)) <= {0}
    for column in ("memory_mb_units", "vcpus_units", "local_gb_units"):
        assert set(data["hosts"].pop(column)) <= {None}
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 5
    with pytest.raises(ValueError, match="snapshot claims must have exactly the columns"):
        restore(SchedulerCore(CONFIG), json.dumps(data))


def test_the_priority_bounds_are_request_specs() -> None:
    low, high = snapshot._PRIORITIES
    for priority in (low, high):
        assert make_spec(priority=priority).priority == priority
    for priority in (low - 1, high + 1):
        with pytest.raises(pydantic.ValidationError):
            make_spec(priority=priority)
