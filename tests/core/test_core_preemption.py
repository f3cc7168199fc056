"""Priority and preemption (issue 16, part 4): every rule of core/preemption.py and
of the engine's use of it, one test each."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import NoValidHost
from actorsched.core import SchedulerCore
from actorsched.core.preemption import PRIORITY_OFFSET, candidates
from actorsched.models import Aggregate, Selection


def _core(hosts: dict[str, int], **config: Any) -> SchedulerCore:
    """A core with preemption on and one host per entry: name -> memory_mb."""
    config.setdefault("preemption", True)
    core = make_core(make_config(**config))
    for host, memory in hosts.items():
        assert core.update_host(make_report(host, memory_mb=memory), now=0.0)
    return core


def _put(
    core: SchedulerCore, uuid: str, memory: int, priority: int, now: float, **fields: Any
) -> Selection:
    spec = make_spec(uuid, memory_mb=memory, priority=priority, **fields)
    [selection] = core.select_destinations(spec, now=now)
    return selection


def _on(core: SchedulerCore, host: str, uuid: str, memory: int, priority: int, now: float) -> None:
    """Claim ``uuid`` on ``host`` (forced there)."""
    assert _put(core, uuid, memory, priority, now, force_hosts=[host]).host == host


def _free(core: SchedulerCore, host: str) -> int:
    return core.host_states(100.0)[host].free_ram_mb


def test_preemption_is_off_by_default_and_then_nothing_is_released() -> None:
    core = _core({"a": 2048}, preemption=False)
    _on(core, "a", "low", 2048, 0, 1.0)
    with pytest.raises(NoValidHost) as raised:
        _put(core, "high", 2048, 100, 2.0)
    assert "preempt" not in str(raised.value)
    assert set(core.claims()) == {"low"}


def test_a_request_that_fits_nowhere_releases_a_lower_priority_claim_and_names_it() -> None:
    core = _core({"a": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    selection = _put(core, "high", 2048, 5, 2.0)
    assert (selection.host, selection.preempted) == ("a", ["low"])
    assert set(core.claims()) == {"high"}
    assert _free(core, "a") == 0


def test_no_preemption_when_a_host_has_room() -> None:
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    selection = _put(core, "high", 2048, 5, 2.0)
    assert (selection.host, selection.preempted) == ("b", [])
    assert set(core.claims()) == {"low", "high"}


def test_a_victim_is_lower_by_at_least_the_delta() -> None:
    core = _core({"a": 2048}, preemption_min_priority_delta=3)
    _on(core, "a", "just-too-close", 2048, 8, 1.0)
    with pytest.raises(NoValidHost) as raised:
        _put(core, "high", 2048, 10, 2.0)  # 10 - 8 = 2 < 3
    assert "priority 7 or lower" in str(raised.value)
    core2 = _core({"a": 2048}, preemption_min_priority_delta=3)
    _on(core2, "a", "far-enough", 2048, 7, 1.0)
    assert _put(core2, "high", 2048, 10, 2.0).preempted == ["far-enough"]


def test_equal_priority_is_never_a_victim_with_the_default_delta() -> None:
    core = _core({"a": 2048})
    _on(core, "a", "peer", 2048, 5, 1.0)
    with pytest.raises(NoValidHost):
        _put(core, "high", 2048, 5, 2.0)
    assert set(core.claims()) == {"peer"}


def test_the_victims_on_a_host_are_as_few_and_unimportant_as_they_can_be() -> None:
    # 4096 MB: 1024 free; the request needs 3072. Releasing "mid" (2048) is
    # enough; "low" (1024) is given back even though its priority is lower.
    core = _core({"a": 4096})
    _on(core, "a", "mid", 2048, 5, 1.0)
    _on(core, "a", "low", 1024, 0, 2.0)
    selection = _put(core, "high", 3072, 10, 3.0)
    assert selection.preempted == ["mid"]
    assert set(core.claims()) == {"low", "high"}


def test_reprieve_goes_most_important_first() -> None:
    # two victims of which either frees enough: the more important one (higher
    # priority) is given back, the other released
    core = _core({"a": 4096})
    _on(core, "a", "p3", 2048, 3, 1.0)
    _on(core, "a", "p1", 2048, 1, 2.0)
    assert _put(core, "high", 2048, 10, 3.0).preempted == ["p1"]
    # same priority: the older one is the more important (kube: earlier start)
    core = _core({"a": 4096})
    _on(core, "a", "old", 2048, 1, 1.0)
    _on(core, "a", "new", 2048, 1, 2.0)
    assert _put(core, "high", 2048, 10, 3.0).preempted == ["new"]


def test_hosts_order_first_by_the_lowest_highest_victim_priority() -> None:
    # a: two victims of priority 0; b: one of priority 5. kube picks a.
    core = _core({"a": 4096, "b": 4096})
    _on(core, "a", "a0", 2048, 0, 1.0)
    _on(core, "a", "a1", 2048, 0, 2.0)
    _on(core, "b", "b-mid", 3072, 5, 3.0)
    _on(core, "b", "b-rest", 1024, 9, 4.0)
    selection = _put(core, "high", 4096, 10, 5.0)
    assert (selection.host, sorted(selection.preempted)) == ("a", ["a0", "a1"])


def test_then_by_the_lowest_sum_of_victim_priorities() -> None:
    # both hosts' highest victim is 3; a's set sums 3+3, b's 3+0: b
    core = _core({"a": 4096, "b": 4096})
    for host, priorities in (("a", (3, 3)), ("b", (3, 0))):
        for index, priority in enumerate(priorities):
            _on(core, host, f"{host}{index}", 2048, priority, 1.0 + index)
    selection = _put(core, "high", 4096, 10, 5.0)
    assert (selection.host, sorted(selection.preempted)) == ("b", ["b0", "b1"])


def test_the_sum_counts_each_victim_so_fewer_victims_win_a_tie_on_priorities() -> None:
    # a: one victim of priority 0; b: two of priority 0 (their raw sum is 0 too)
    core = _core({"a": 4096, "b": 4096})
    _on(core, "a", "a-big", 4096, 0, 1.0)
    _on(core, "b", "b0", 2048, 0, 1.0)
    _on(core, "b", "b1", 2048, 0, 1.0)
    selection = _put(core, "high", 4096, 10, 5.0)
    assert (selection.host, selection.preempted) == ("a", ["a-big"])


def test_then_by_the_latest_start_among_the_highest_priority_victims() -> None:
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "older", 2048, 0, 1.0)
    _on(core, "b", "newer", 2048, 0, 2.0)
    assert _put(core, "high", 2048, 10, 5.0).preempted == ["newer"]


def test_then_by_the_first_found_from_a_random_start() -> None:
    # exact ties (one request's instances share their start): not always the same host
    def chosen(seed: int) -> str:
        core = _core({"a": 2048, "b": 2048}, seed=seed)
        spec = make_spec("t1", "t2", memory_mb=2048)
        assert {s.host for s in core.select_destinations(spec, now=1.0)} == {"a", "b"}
        return _put(core, "high", 2048, 10, 5.0).host

    assert {chosen(seed) for seed in range(12)} == {"a", "b"}


def test_candidate_keys_spell_the_order() -> None:
    core = _core({"a": 4096})
    _on(core, "a", "v1", 2048, 2, 1.0)
    _on(core, "a", "v2", 2048, 4, 3.0)
    rules = [(0, 4096)]
    [found] = candidates(core.table, core.ledger, [0], rules, 9, 64)
    assert [v.instance_uuid for v in found.victims] == ["v2", "v1"]
    assert found.key == (4, 2 + 4 + 2 * PRIORITY_OFFSET, 2, -3.0, 0)


def test_a_host_that_fails_another_filter_is_never_freed() -> None:
    core = _core({"a": 2048})
    core.update_host(make_report("z", memory_mb=2048, availability_zone="other"), now=0.0)
    _on(core, "z", "low", 2048, 0, 1.0)
    _on(core, "a", "peer", 2048, 10, 1.0)
    with pytest.raises(NoValidHost):
        _put(core, "high", 2048, 10, 2.0, availability_zone="nova")
    assert set(core.claims()) == {"low", "peer"}


def test_a_host_that_would_not_fit_even_empty_of_victims_is_no_candidate() -> None:
    core = _core({"a": 4096})
    _on(core, "a", "low", 1024, 0, 1.0)
    _on(core, "a", "peer", 3072, 10, 1.0)
    with pytest.raises(NoValidHost):
        _put(core, "high", 2048, 10, 2.0)
    assert set(core.claims()) == {"low", "peer"}


def test_at_most_max_preemption_victims() -> None:
    core = _core({"a": 4096}, max_preemption_victims=3)
    for index in range(4):
        _on(core, "a", f"v{index}", 1024, 0, 1.0 + index)
    with pytest.raises(NoValidHost) as raised:
        _put(core, "high", 4096, 10, 9.0)
    assert "at most 3 of them" in str(raised.value)
    assert len(core.claims()) == 4
    core4 = _core({"a": 4096}, max_preemption_victims=4)
    for index in range(4):
        _on(core4, "a", f"v{index}", 1024, 0, 1.0 + index)
    assert len(_put(core4, "high", 4096, 10, 9.0).preempted) == 4


def test_a_moves_hold_and_a_moving_instance_are_never_victims() -> None:
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "mover", 2048, 0, 1.0)
    assert core.move("mover", "mig-1", None, now=2.0).host == "b"
    # a holds mig-1 (priority 0), b holds mover (priority 0, moving): neither goes
    with pytest.raises(NoValidHost):
        _put(core, "high", 2048, 10, 3.0)
    assert set(core.claims()) == {"mover", "mig-1"}


def test_a_move_never_preempts() -> None:
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "mover", 2048, 50, 1.0)
    _on(core, "b", "low", 2048, 0, 1.0)
    with pytest.raises(NoValidHost):
        core.move("mover", "mig-1", None, now=2.0)
    assert set(core.claims()) == {"mover", "low"}


def test_a_confirmed_victim_its_host_still_lists_is_credited_until_a_report_drops_it() -> None:
    core = _core({"a": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    listed = make_report("a", 2, memory_mb=2048, memory_mb_used=2048, instances=["low"])
    assert core.update_host(listed, now=1.5)
    assert core.claims()["low"] == ("a", True)  # confirmed: the report carries it
    assert _put(core, "high", 2048, 10, 2.0).preempted == ["low"]
    assert _free(core, "a") == 0  # the credit and the new claim
    gone = make_report("a", 3, memory_mb=2048, memory_mb_used=0)
    assert core.update_host(gone, now=3.0)
    assert _free(core, "a") == 0  # "high" assumed, "low" gone: still exactly full


def test_the_instance_count_limit_is_freed_too() -> None:
    # NumInstancesFilter: a host at max_instances_per_host passes once a victim goes
    core = _core({"a": 8192}, max_instances_per_host=2)
    _on(core, "a", "low", 512, 0, 1.0)
    _on(core, "a", "peer", 512, 10, 1.0)
    assert _put(core, "high", 512, 10, 2.0).preempted == ["low"]


def test_a_disabled_resource_filter_asks_no_room_of_its_resource() -> None:
    filters = ["ComputeFilter", "RamFilter", "DiskFilter"]  # no CoreFilter
    core = _core({"a": 2048}, enabled_filters=filters)
    _on(core, "a", "low", 2048, 0, 1.0)
    spec = make_spec("high", memory_mb=2048, vcpus=64, priority=10)  # more vCPUs than any host
    [selection] = core.select_destinations(spec, now=2.0)
    assert selection.preempted == ["low"]


def test_a_forced_host_is_freed_only_if_forced_and_checked_for_every_resource() -> None:
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "on-a", 2048, 0, 1.0)
    _on(core, "b", "on-b", 2048, 0, 2.0)
    selection = _put(core, "high", 2048, 10, 3.0, force_hosts=["a"])
    assert (selection.host, selection.preempted) == ("a", ["on-a"])


def test_the_freed_host_is_chosen_whatever_the_subset_size() -> None:
    core = _core({"a": 2048, "b": 1024}, host_subset_size=2)
    _on(core, "a", "low", 2048, 0, 1.0)
    _on(core, "b", "peer", 1024, 10, 1.0)
    for attempt in range(5):
        selection = _put(core, f"high{attempt}", 2048, 10, 2.0 + attempt)
        assert selection.host == "a"
        core.release(selection.instance_uuid, now=2.5 + attempt)
        _on(core, "a", f"low{attempt}", 2048, 0, 2.6 + attempt)


def test_a_repeat_answers_the_same_selection_and_releases_nothing_more() -> None:
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    _on(core, "b", "other-low", 2048, 0, 1.5)
    first = _put(core, "high", 2048, 10, 2.0)
    digest = core.digest()
    again = _put(core, "high", 2048, 10, 3.0)
    assert again == first
    assert again.preempted
    assert core.digest() == digest


def test_a_failed_request_gives_its_victims_back() -> None:
    # instance 1 preempts on a; instance 2 finds nothing (b's claim is too important)
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    _on(core, "b", "peer", 2048, 10, 1.0)
    listed = make_report("a", 2, memory_mb=2048, memory_mb_used=2048, instances=["low"])
    assert core.update_host(listed, now=1.5)  # confirmed: its release is a credit
    digest = core.digest()
    states = core.host_states(5.0)
    spec = make_spec("h1", "h2", memory_mb=2048, priority=10)
    with pytest.raises(NoValidHost):
        core.select_destinations(spec, now=2.0)
    assert core.digest() == digest
    assert core.host_states(5.0) == states
    assert core.claims()["low"] == ("a", True)


def test_plan_shows_the_preemption_and_changes_nothing() -> None:
    core = _core({"a": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    digest = core.digest()
    plan = core.plan(make_spec("high", memory_mb=2048, priority=10), now=2.0)
    assert plan.placed
    assert plan.instances[0].host == "a"
    assert plan.instances[0].preempted == ["low"]
    assert core.digest() == digest
    assert set(core.claims()) == {"low"}


def test_replaying_a_record_releases_its_victims_first() -> None:
    live = _core({"a": 2048})
    _on(live, "a", "low", 2048, 0, 1.0)
    spec = make_spec("high", memory_mb=2048, priority=10)
    selections = live.select_destinations(spec, now=2.0)
    replayed = _core({"a": 2048})
    _on(replayed, "a", "low", 2048, 0, 1.0)
    replayed.restore_claims(spec, selections, 2.0)
    assert replayed.digest() == live.digest()
    replayed.restore_claims(spec, selections, 2.0)  # twice: nothing more
    assert replayed.digest() == live.digest()
    assert replayed.ledger.claims["high"].selection.preempted == ["low"]


def test_claims_keep_their_priority_through_reschedule_and_move() -> None:
    core = _core({"a": 2048, "b": 2048, "c": 2048})
    _put(core, "vm", 1024, 7, 1.0)
    claim = core.ledger.claims["vm"]
    assert claim.priority == 7
    moved = core.reschedule("vm", claim.host, now=2.0)
    assert core.ledger.claims["vm"].priority == 7
    core.move("vm", "mig", None, now=3.0)
    assert core.ledger.claims["vm"].priority == 7
    assert core.ledger.claims["mig"].priority == 7
    assert core.revert_move("mig", now=4.0)
    assert core.ledger.claims["vm"].priority == 7
    assert core.ledger.claims["vm"].host == moved.host


def test_a_move_without_a_spec_keeps_the_original_request() -> None:
    core = _core({"a": 2048, "b": 2048})
    core.update_host(make_report("z", memory_mb=8192, availability_zone="other"), now=0.0)
    _put(core, "vm", 1024, 0, 1.0, availability_zone="nova")
    source = core.ledger.claims["vm"].host
    selection = core.move("vm", "mig", None, now=2.0)
    assert selection.host not in (source, "z")  # z has more room but is in another zone


def test_aggregate_zone_change_then_preempt() -> None:
    core = _core({"a": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    core.create_aggregate("agg", {"availability_zone": "z2"}, ["a"])
    assert core.aggregates.aggregates() == [
        Aggregate(name="agg", hosts=["a"], metadata={"availability_zone": "z2"})
    ]
    selection = _put(core, "high", 2048, 10, 2.0, availability_zone="z2")
    assert selection.preempted == ["low"]


def test_the_search_stops_at_preemption_candidates_from_a_random_host() -> None:
    # a's victim (priority 0) is the better one; weighing one candidate only,
    # the host found first from the random start is taken: sometimes b
    def chosen(seed: int, limit: int) -> str:
        core = _core({"a": 2048, "b": 2048}, seed=seed, preemption_candidates=limit)
        _on(core, "a", "on-a", 2048, 0, 1.0)
        _on(core, "b", "on-b", 2048, 5, 1.0)
        return _put(core, "high", 2048, 10, 2.0).host

    assert {chosen(seed, 100) for seed in range(12)} == {"a"}
    assert {chosen(seed, 1) for seed in range(12)} == {"a", "b"}


def test_candidates_stop_at_the_limit_in_the_order_given() -> None:
    core = _core({"a": 2048, "b": 2048, "c": 2048})
    for host in ("a", "b", "c"):
        _on(core, host, f"on-{host}", 2048, 0, 1.0)
    rules = [(0, 2048)]
    found = candidates(core.table, core.ledger, [2, 0, 1], rules, 9, 64, 2)
    assert sorted(c.row for c in found) == [0, 2]
    assert len(candidates(core.table, core.ledger, [2, 0, 1], rules, 9, 64)) == 3


def test_a_forced_request_frees_a_host_the_filters_would_refuse() -> None:
    # forced hosts skip every filter (ComputeFilter, IoOpsFilter too): only room counts
    for report in ({"enabled": False}, {"num_io_ops": 8}):
        core = _core({})
        core.update_host(make_report("a", memory_mb=2048, **report), now=0.0)
        _on(core, "a", "low", 2048, 0, 1.0)
        selection = _put(core, "high", 2048, 5, 2.0, force_hosts=["a"])
        assert (selection.host, selection.preempted) == ("a", ["low"])


def test_a_reverted_move_keeps_the_victims_its_placement_named() -> None:
    core = _core({"a": 2048, "b": 2048})
    _on(core, "a", "low", 2048, 0, 1.0)
    _on(core, "b", "other", 1024, 10, 1.0)  # as important: no victim
    first = _put(core, "high", 2048, 10, 2.0)
    assert first.preempted == ["low"]
    core.release("other", now=2.5)
    core.move("high", "mig", make_spec("high", memory_mb=1024, priority=10), now=3.0)
    assert core.revert_move("mig", now=4.0)
    assert _put(core, "high", 2048, 10, 5.0) == first  # the redelivery's answer is the same


def test_a_resize_keeps_the_instances_priority_unless_it_names_another() -> None:
    core = _core({"a": 4096, "b": 4096})
    _put(core, "vm", 1024, 9, 1.0)
    core.move("vm", "m1", make_spec("vm", memory_mb=2048), now=2.0)
    assert core.ledger.claims["vm"].priority == 9
    assert core.confirm_move("m1", now=3.0)
    core.move("vm", "m2", make_spec("vm", memory_mb=1024, priority=4), now=4.0)
    assert core.ledger.claims["vm"].priority == 4


def test_a_plan_keeps_no_request_and_drops_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("actorsched.core.engine._KEPT_REQUESTS", 2)  # the bound, reached
    core = _core({"a": 2048})
    _put(core, "vm1", 512, 0, 1.0)
    _put(core, "vm2", 512, 0, 1.0)
    kept = core.kept_requests()
    assert list(kept) == ["vm1", "vm2"]
    core.plan(make_spec("planned", memory_mb=512), now=2.0)
    assert core.kept_requests() == kept
