"""The parts preemption is built of, each against the rule it must agree with:
``HostTable.room_after`` and ``preemption.freeing`` against real releases,
``Ranker.passing_but_room`` and ``room_rules`` against the filters, the
candidate scan's skips, and the engine's give-back when a freed host is
still refused."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import NoValidHost
from actorsched.core import SchedulerCore
from actorsched.core.filters import PlacementContext
from actorsched.core.preemption import candidates, freeing
from actorsched.core.table import HostTable


def _core(**config: Any) -> SchedulerCore:
    config.setdefault("preemption", True)
    return make_core(make_config(**config))


def _ctx(core: SchedulerCore, **fields: Any) -> PlacementContext:
    spec = make_spec("asking", **fields)
    return PlacementContext(spec, core.config, 50.0, core.ledger, core.locate, [], None)


# -- room_after and freeing: what a release would do, without doing it -------


def _state(table: HostTable, row: int) -> tuple[list[float], bool]:
    return [float(v) for v in table.headroom[:, row]], bool(table.row_ok[row])


@pytest.mark.parametrize("seed", range(40))
def test_room_after_and_freeing_agree_with_the_releases_they_stand_for(seed: int) -> None:
    rng = random.Random(seed)
    core = _core(
        max_io_ops_per_host=rng.randint(1, 6),
        max_instances_per_host=rng.randint(2, 9),
        cpu_allocation_ratio=rng.choice([1.0, 4.0]),
        service_down_time=30.0,
    )
    report: dict[str, Any] = {
        "memory_mb": 8192,
        "vcpus": 8,
        "local_gb": 100,
        "num_io_ops": rng.randint(0, 2),
    }
    if rng.random() < 0.5:  # a ratio of the host's own (a custom ratio row)
        report["disk_allocation_ratio"] = 2.0
        report["cpu_allocation_ratio"] = 2.0
    core.update_host(make_report("h", **report), now=0.0)
    uuids = [f"c{i}" for i in range(rng.randint(1, 5))]
    for uuid in uuids:
        spec = make_spec(
            uuid,
            memory_mb=rng.randint(1, 1024),
            vcpus=rng.randint(1, 2),
            disk_gb=rng.randint(1, 10),
            force_hosts=["h"],
        )
        core.select_destinations(spec, now=1.0)
    listed = [u for u in uuids if rng.random() < 0.5]
    if listed or rng.random() < 0.5:
        used = sum(core.ledger.claims[u].memory_mb for u in listed)
        again = make_report("h", 2, **{**report, "memory_mb_used": used}, instances=listed)
        core.update_host(again, now=2.0)
    if rng.random() < 0.3:  # a claim again of a released, still listed instance
        victim = listed[0] if listed else None
        if victim is not None:
            core.release(victim, now=3.0)
            core.select_destinations(make_spec(victim, memory_mb=64, force_hosts=["h"]), 3.0)
    if rng.random() < 0.3:  # a stale row: its report is older than service_down_time
        core.select_destinations(make_spec("sweeper", memory_mb=1, force_hosts=["h"]), 40.0)
        core.release("sweeper", now=40.0)
    table = core.table
    row = table.row_of["h"]
    claims = [core.ledger.claims[u] for u in uuids if u in core.ledger.claims]
    chosen = [c for c in claims if rng.random() < 0.6]
    predicted = table.room_after(row, [freeing(c, core.ledger) for c in chosen])
    credited_before = set(core.ledger.released.get(row, {}))
    for claim in chosen:
        core.release(claim.instance_uuid, now=41.0)
        credited = claim.instance_uuid in core.ledger.released.get(row, {}) and (
            claim.instance_uuid not in credited_before
        )
        assert freeing(claim, core.ledger)[3] == credited
    headroom, ok = _state(table, row)
    assert [float(v) for v in predicted[0]] == headroom
    assert predicted[1] == ok


def test_room_after_changes_nothing() -> None:
    core = _core()
    core.update_host(make_report("h"), now=0.0)
    core.select_destinations(make_spec("c", memory_mb=1024, force_hosts=["h"]), 1.0)
    before = core.table.raw.copy(), core.table.derived.copy()
    core.table.room_after(0, [freeing(core.ledger.claims["c"], core.ledger)])
    assert np.array_equal(core.table.raw, before[0])
    assert np.array_equal(core.table.derived, before[1])


def test_an_assumed_victim_frees_its_io_op_and_a_credited_one_does_not() -> None:
    # IoOpsFilter counts a host's reported I/O plus its assumed claims
    core = _core(max_io_ops_per_host=2)
    core.update_host(make_report("a", memory_mb=2048), now=0.0)
    for uuid in ("low1", "low2"):
        core.select_destinations(make_spec(uuid, memory_mb=1024, force_hosts=["a"]), 1.0)
    [selection] = core.select_destinations(make_spec("high", memory_mb=1024, priority=5), 2.0)
    assert len(selection.preempted) == 1  # one assumed claim gone: 1 I/O op, room for one
    busy = _core(max_io_ops_per_host=2)
    busy.update_host(make_report("a", memory_mb=2048), now=0.0)
    busy.select_destinations(make_spec("x", memory_mb=2048), 1.0)
    busy.update_host(  # confirmed: the report has it, and 2 I/O ops of its own
        make_report("a", 2, memory_mb=2048, memory_mb_used=2048, num_io_ops=2, instances=["x"]),
        now=1.5,
    )
    assert busy.claims()["x"] == ("a", True)
    with pytest.raises(NoValidHost):  # releasing it credits room but no I/O op
        busy.select_destinations(make_spec("high", memory_mb=1024, priority=5), 2.0)


# -- passing_but_room and room_rules --------------------------------------------


def test_passing_but_room_is_every_filter_but_room() -> None:
    core = _core(max_instances_per_host=1)
    core.update_host(make_report("full", memory_mb=512), now=0.0)
    core.update_host(make_report("other-zone", availability_zone="z9"), now=0.0)
    core.update_host(make_report("off", enabled=False), now=0.0)
    core.update_host(make_report("counted"), now=0.0)
    core.select_destinations(make_spec("one", memory_mb=512, force_hosts=["full"]), 1.0)
    core.select_destinations(make_spec("two", memory_mb=1, force_hosts=["counted"]), 1.0)
    mask = core.ranker.passing_but_room(_ctx(core, memory_mb=4096, availability_zone="nova"))
    # full (no room) and counted (at max instances) pass: room decides them
    assert mask.tolist() == [True, False, False, True]
    everywhere = core.ranker.passing_but_room(_ctx(core, memory_mb=4096))
    assert everywhere.tolist() == [True, True, False, True]


def test_passing_but_room_leaves_out_a_removed_or_stale_host() -> None:
    core = _core(service_down_time=10.0)
    core.update_host(make_report("old"), now=0.0)
    core.update_host(make_report("gone"), now=15.0)
    core.update_host(make_report("fresh"), now=15.0)
    core.remove_host("gone", now=16.0)
    core.select_destinations(make_spec("sweep", memory_mb=1), now=16.0)  # marks "old" stale
    assert core.ranker.passing_but_room(_ctx(core)).tolist() == [False, False, True]


def test_a_forced_request_is_judged_by_its_names_not_the_filters() -> None:
    core = _core()
    core.update_host(make_report("a"), now=0.0)
    core.update_host(make_report("z", availability_zone="z9"), now=0.0)
    for forced in ({"force_hosts": ["z"]}, {"force_nodes": ["z"]}):
        ctx = _ctx(core, availability_zone="nova", **forced)
        assert core.ranker.passing_but_room(ctx).tolist() == [False, True]


def test_room_rules_are_the_enabled_resource_filters_or_all_for_a_forced_host() -> None:
    core = _core(enabled_filters=["RamFilter", "DiskFilter"])
    core.update_host(make_report("a"), now=0.0)
    asked = {"memory_mb": 100, "vcpus": 3, "disk_gb": 7}
    assert core.ranker.room_rules(_ctx(core, **asked)) == [(0, 100), (2, 7)]
    for forced in ({"force_hosts": ["a"]}, {"force_nodes": ["a"]}):
        rules = core.ranker.room_rules(_ctx(core, **asked, **forced))
        assert rules == [(0, 100), (1, 3), (2, 7)]


# -- the candidate scan ---------------------------------------------------------


def test_the_scan_skips_each_host_it_cannot_use_and_goes_on() -> None:
    core = _core(max_io_ops_per_host=1)
    hosts = ["empty", "important", "too-small", "io-bound", "many", "good"]
    for host in hosts:
        core.update_host(make_report(host, memory_mb=2048), now=0.0)
    put = core.select_destinations
    put(make_spec("peer", memory_mb=2048, priority=9, force_hosts=["important"]), 1.0)
    put(make_spec("small", memory_mb=512, force_hosts=["too-small"]), 1.0)
    put(make_spec("peer2", memory_mb=1536, priority=9, force_hosts=["too-small"]), 1.0)
    for index in range(4):
        put(make_spec(f"m{index}", memory_mb=512, force_hosts=["many"]), 1.0)
    put(make_spec("good-low", memory_mb=2048, force_hosts=["good"]), 1.0)
    # io-bound: its report says 1 I/O op already, so no release can clear it
    core.update_host(make_report("io-bound", 2, memory_mb=2048, num_io_ops=1), now=1.5)
    put(make_spec("io-low", memory_mb=2048, force_hosts=["io-bound"]), 1.0)
    rows = [core.table.row_of[h] for h in hosts]
    found = candidates(core.table, core.ledger, rows, [(0, 2048)], below=5, max_victims=3)
    assert [core.table.name_of[c.row] for c in found] == ["good"]


def test_a_freed_host_the_full_filters_refuse_is_given_back_and_the_next_tried() -> None:
    class BusyHostsOnly:
        """A plug-in filter: hosts running at least two instances (so emptying one fails it)."""

        name = "BusyHostsOnly"

        def filter_all(self, table: HostTable, ctx: PlacementContext) -> Any:
            return table.column("num_instances") >= 2

    core = make_core(make_config(preemption=True), filters=[BusyHostsOnly()])
    core.update_host(make_report("a", memory_mb=2048), now=0.0)
    core.update_host(make_report("b", memory_mb=3072), now=0.0)
    put = core.select_destinations
    # a: two priority-0 claims, both must go (then a runs nothing: refused);
    # b: three claims, one of priority 1 goes. a's key is better: tried first.
    put(make_spec("a1", memory_mb=1024, force_hosts=["a"]), 1.0)
    put(make_spec("a2", memory_mb=1024, force_hosts=["a"]), 1.0)
    put(make_spec("b1", memory_mb=2048, priority=1, force_hosts=["b"]), 1.0)
    put(make_spec("b2", memory_mb=512, priority=9, force_hosts=["b"]), 1.0)
    put(make_spec("b3", memory_mb=512, priority=9, force_hosts=["b"]), 1.0)
    # a also credits a released instance it still lists: giving a's victims back
    # must keep that credit
    listed = make_report("a", 2, memory_mb=2048, memory_mb_used=2048, instances=["a1", "a2"])
    assert core.update_host(listed, now=1.5)
    assert core.release("a2", now=1.6)  # credited back while a lists it
    put(make_spec("a2", memory_mb=1024, force_hosts=["a"]), 1.7)  # claimed again beside it
    a_state = core.host_states(2.0)["a"]
    credits = dict(core.ledger.released[core.table.row_of["a"]])
    [selection] = put(make_spec("high", memory_mb=2048, priority=5), 2.0)
    assert (selection.host, selection.preempted) == ("b", ["b1"])
    assert core.host_states(2.0)["a"] == a_state
    assert core.ledger.released[core.table.row_of["a"]] == credits
    assert {"a1", "a2"} <= set(core.claims())


def test_a_preemption_that_empties_a_group_gives_its_other_hosts_as_alternates() -> None:
    # "member" is the only member of an affinity group, on full host a; b has room
    # but fails the affinity filter until the member is gone
    core = _core()
    core.update_host(make_report("a", memory_mb=2048), now=0.0)
    core.update_host(make_report("b", memory_mb=1024), now=0.0)
    group = ("g", "affinity")
    core.select_destinations(make_spec("member", memory_mb=2048, group=group), 1.0)
    spec = make_spec("new", memory_mb=1024, priority=5, group=group)
    [selection] = core.select_destinations(spec, now=2.0)
    assert (selection.host, selection.preempted, selection.alternates) == ("a", ["member"], ["b"])


def test_passing_but_room_leaves_out_a_removed_host_without_compute_filter_too() -> None:
    core = _core(enabled_filters=["RamFilter", "CoreFilter", "DiskFilter"])
    core.update_host(make_report("gone"), now=0.0)
    core.update_host(make_report("here"), now=0.0)
    core.remove_host("gone", now=1.0)
    assert core.ranker.passing_but_room(_ctx(core)).tolist() == [False, True]
