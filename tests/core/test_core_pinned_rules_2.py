"""More rules of the core a mutation sample found no test pinning (issue 31,
``make mutate --seed 20261202``): the tenant request filter with no aggregate,
the bound and order of the requests kept for a reschedule, a move's reset of
the requested destination, the batch path of update_hosts (instances, units,
its fast path), the credit book, a snapshot of an empty core, and the commands'
slots."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec, ram_only_config

from actorsched import (
    Destination,
    HostReport,
    InvalidRequest,
    NoValidHost,
    RequestSpec,
    Selection,
    ServerGroup,
)
from actorsched.core import COMMANDS, Locate, Migration, Release, Reschedule, SchedulerCore
from actorsched.core.image import capture
from actorsched.core.ledger import request_fingerprint
from actorsched.core.ranking import _span
from actorsched.errors import Forbidden
from actorsched.journal.snapshot import encode, restore
from actorsched.models import AGGREGATE_FILTERS, BUILTIN_FILTERS, Units
from actorsched.nova.conf import weight_setting

# -- the tenant request filter ------------------------------------------------------


def test_a_tenant_limited_scheduler_without_aggregates_places_a_plain_request() -> None:
    # limit_tenants_to_placement_aggregate with no aggregate at all: no tenant
    # has aggregates, so every host passes (and a request of resources only may
    # take the ranking's shortcut); placement_aggregate_required_for_tenants
    # fails the same request.
    core = make_core(ram_only_config(limit_tenants_to_placement_aggregate=True))
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=8192), 1.0)  # the most free RAM
    assert core.select_destinations(make_spec("vm-1"), 2.0)[0].host == "h2"
    assert core.select_destinations(make_spec("vm-2", project_id="p1"), 2.0)[0].host == "h2"
    required = make_core(
        make_config(
            limit_tenants_to_placement_aggregate=True,
            placement_aggregate_required_for_tenants=True,
        )
    )
    required.update_host(make_report("h1"), 1.0)
    with pytest.raises(NoValidHost, match="require_tenant_aggregate"):
        required.select_destinations(make_spec("vm-1"), 2.0)


# -- the requests kept for a reschedule ----------------------------------------------


def test_the_kept_requests_are_bounded_at_ten_thousand_dropping_the_oldest() -> None:
    # A core keeps the last 10,000 placements' requests (a snapshot's too):
    # one more drops the oldest, and only it.
    core = make_core()
    spec = make_spec("x")
    core.restore_requests((f"vm-{i}", spec) for i in range(10_001))
    kept = list(core.kept_requests())
    assert len(kept) == 10_000
    assert kept[0] == "vm-1"
    assert kept[-1] == "vm-10000"


def test_a_request_kept_again_becomes_the_newest() -> None:
    # kept_requests is oldest first, the order the bound drops them in: an
    # instance placed again is kept as the newest, not at its old place.
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1"), 1.0)
    core.select_destinations(make_spec("vm-2"), 2.0)
    assert list(core.kept_requests()) == ["vm-1", "vm-2"]
    assert core.release("vm-1", 3.0)
    core.select_destinations(make_spec("vm-1", memory_mb=1024), 4.0)
    assert list(core.kept_requests()) == ["vm-2", "vm-1"]
    assert core.kept_requests()["vm-1"].memory_mb == 1024


def test_a_move_without_a_spec_drops_the_requested_destination() -> None:
    # As Nova's reset_forced_destinations: an instance placed with a requested
    # destination moves by its kept request without it (else it could go only
    # to the host it leaves).
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    spec = make_spec("vm-a", requested_destination=Destination(host="h1"))
    assert core.select_destinations(spec, 1.0)[0].host == "h1"
    assert core.move("vm-a", "mig-1", None, 2.0).host == "h2"


def test_the_fingerprint_of_a_request_counts_its_groups_hosts_in_canonical_json() -> None:
    # The fingerprint is json.dumps' text (sorted keys, no spaces): a journal
    # keeps it and a reschedule reads its group back from it. A group's hosts
    # count as a multiset (each entry a member): their order does not matter,
    # a host listed twice does.
    def group(*hosts: str) -> ServerGroup:
        return ServerGroup(id="g1", policy="anti-affinity", hosts=list(hosts))

    text = request_fingerprint(make_spec("vm-1", group=group("h2", "h1", "h2")))
    assert json.loads(text)["group_hosts"] == ["h1", "h2", "h2"]
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    assert text == request_fingerprint(make_spec("vm-1", group=group("h2", "h2", "h1")))
    assert text != request_fingerprint(make_spec("vm-1", group=group("h1", "h2")))


def test_a_long_list_of_group_hosts_counts_by_a_digest_in_valid_json() -> None:
    # Past 128 characters a group's hosts count by a digest of their sorted
    # list (its JSON text's SHA-256, 32 hex digits: journals keep fingerprints,
    # so the text must not change): the fingerprint stays JSON, and two long
    # lists that differ in one member differ.
    many = [f"compute-{i:03d}" for i in range(40)]

    def fingerprint(hosts: list[str]) -> Any:
        group = ServerGroup(id="g1", policy="anti-affinity", hosts=hosts)
        return json.loads(request_fingerprint(make_spec("vm-1", group=group)))

    digest = fingerprint(many)["group_hosts"]
    listed = json.dumps(sorted(many), separators=(",", ":"))
    assert digest == "sha256:" + hashlib.sha256(listed.encode()).hexdigest()[:32]
    assert fingerprint(list(reversed(many)))["group_hosts"] == digest
    assert fingerprint([*many[:-1], "compute-999"])["group_hosts"] != digest


def test_a_replayed_move_places_on_its_recorded_host_or_is_refused_when_it_is_gone() -> None:
    # A move given the selection it made (journal replay, placed=): the
    # instance is claimed on that host; a host no longer known refuses the move
    # with InvalidRequest and leaves the instance's claim as it was.
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    core.select_destinations(make_spec("vm-a"), 1.0)
    core.select_destinations(make_spec("vm-b"), 1.0)
    before = core.digest()
    gone = Selection(instance_uuid="vm-b", host="h9")
    with pytest.raises(InvalidRequest, match="is gone"):
        core.move("vm-b", "mig-0", None, 2.0, placed=gone)
    assert core.digest() == before
    target = "h2" if core.claims()["vm-a"][0] == "h1" else "h1"
    placed = Selection(instance_uuid="vm-a", host=target)
    assert core.move("vm-a", "mig-1", None, 2.0, placed=placed).host == target
    assert core.claims()["vm-a"] == (target, False)


# -- update_hosts: the batch path -------------------------------------------------------

_HOSTS = [f"h{i}" for i in range(8)]  # a batch of 8 or more distinct hosts: the batch path


def _state(core: SchedulerCore) -> tuple[Any, ...]:
    table = core.table
    return (
        core.digest(),
        {h: sorted(core.ledger.listed_on(r)) for h, r in table.row_of.items()},
        {table.name_of[r]: u for r, u in table.units.items()},
        {table.name_of[r]: e for r, e in table.inventory.items()},
        {table.name_of[r]: s for r, s in table.unit_steps.items()},
        core.claims(),
    )


def _apply_both(batches: list[list[HostReport]]) -> tuple[SchedulerCore, SchedulerCore]:
    """Two cores fed ``batches``: one a report at a time, one a batch at a time."""
    one, many = make_core(), make_core()
    for now, batch in enumerate(batches, start=1):
        for report in batch:
            one.update_host(report, float(now))
        many.update_hosts(batch, float(now))
    return one, many


def test_a_batch_of_reports_records_the_instances_they_list_as_one_report_does() -> None:
    # A host with no claims that lists instances (strangers, or instances
    # placed elsewhere): the batch records what it lists, and an instance
    # then placed there is confirmed at once, as after update_host.
    lists = [make_report(h, instances=[f"vm-{h}"] if h == "h3" else []) for h in _HOSTS]
    one, many = _apply_both([lists])
    assert _state(one) == _state(many)
    assert sorted(many.ledger.listed_on(many.table.row_of["h3"])) == ["vm-h3"]
    spec = make_spec("vm-h3", force_hosts=["h3"])
    for core in (one, many):
        assert core.select_destinations(spec, 5.0)[0].host == "h3"
    assert many.claims()["vm-h3"] == ("h3", True)
    assert _state(one) == _state(many)


def test_a_batch_without_units_drops_the_units_an_earlier_report_gave() -> None:
    # Units (min_unit, step_size) and reserved figures are the last report's:
    # a report of the batch path that gives none drops those of the one before,
    # for a host that had units only as for one that had reserved figures.
    steps = Units(min_unit=2, step_size=2)
    first = [
        make_report("h0", memory_mb_units=steps),
        make_report("h1", vcpus_reserved=1),
        *(make_report(h) for h in _HOSTS[2:]),
    ]
    again = [make_report(h, 2) for h in _HOSTS]
    one, many = _apply_both([first, again])
    assert _state(one) == _state(many)
    assert many.table.units == {}
    assert many.table.inventory == {}
    assert many.table.unit_steps == {}


def test_a_batch_giving_reserved_figures_but_no_ratio_keeps_the_batch_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # White-box (a cost rule; update_hosts' docstring): reserved vCPUs and disk
    # and units are written on the batch path; only a ratio (or instances)
    # sends a report of a host with no claims through update_host.
    core = make_core()
    one_by_one: list[str] = []
    update_host = core.update_host

    def spy(report: HostReport, now: float) -> bool:
        one_by_one.append(report.host)
        return update_host(report, now)

    monkeypatch.setattr(core, "update_host", spy)
    reserved = [make_report(h, vcpus_reserved=1, local_gb_reserved=2) for h in _HOSTS]
    assert core.update_hosts(reserved, 1.0) == [True] * 8
    assert one_by_one == []
    assert core.host_states()["h0"].vcpus_reserved == 1
    ratio = [
        make_report(h, 2, **({"ram_allocation_ratio": 1.0} if h == "h5" else {})) for h in _HOSTS
    ]
    assert core.update_hosts(ratio, 2.0) == [True] * 8
    assert one_by_one == ["h5"]


# -- the credit book ----------------------------------------------------------------


def test_a_host_whose_last_credit_ends_leaves_no_entry_in_the_credit_book() -> None:
    # A released instance its host still lists is credited back until a report
    # no longer lists it; the last credit gone, the host has no entry left
    # (an empty one would send every later report of it down update_host's path).
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1"), 1.0)
    core.update_host(make_report("h1", 2, instances=["vm-1"], memory_mb_used=512), 2.0)
    assert core.release("vm-1", 3.0)
    row = core.table.row_of["h1"]
    assert set(core.ledger.released[row]) == {"vm-1"}
    core.update_host(make_report("h1", 3), 4.0)
    assert core.ledger.released == {}
    assert core.host_states()["h1"].free_ram_mb == 4096


# -- snapshots ------------------------------------------------------------------------


def test_a_snapshot_of_a_core_with_no_hosts_restores_an_empty_core() -> None:
    empty = make_core()
    text = encode(capture(empty))
    again = make_core()
    restore(again, text)
    assert again.host_states() == {}
    assert again.digest() == empty.digest()


# -- commands -----------------------------------------------------------------------


def test_every_command_is_a_frozen_slotted_message() -> None:
    # A command is sent once and shared (journal, reply, retries): frozen, and
    # slotted, so no attribute can be added to it on the way (nor a dict per
    # message kept).
    for entry in COMMANDS:
        command = entry.command
        assert "__slots__" in vars(command), command.__name__
        assert command.__dataclass_params__.frozen, command.__name__  # type: ignore[attr-defined]
        assert "__dict__" not in dir(command), command.__name__
        # the table's CommandInfo entries too: shared by every layer, never changed
        assert "__dict__" not in dir(type(entry))
        with pytest.raises(AttributeError):
            entry.method = "changed"  # type: ignore[misc]


# -- the ranking ------------------------------------------------------------------------


def test_a_weigher_normalizes_over_the_passing_hosts_when_its_lowest_host_fails() -> None:
    # Nova normalizes each weigher over the hosts that passed the filters. h-x,
    # over-committed (-3 vCPUs free), fails the request: the CPU weigher's low
    # end is its floor 0 (Nova 18: min(0, lowest passing)), not h-x's -3. RAM
    # (0..4000): a 1, b 0.5, c 0.95; CPU (0..9): a 0.67, b 1, c 0.44: a, b, c.
    # From -3 the CPU weights would be a 0.75, b 1, c 0.58: a, c, b.
    config = make_config(cpu_allocation_ratio=1.0, disk_weight_multiplier=0.0)
    core = make_core(config)
    for host, ram, used_vcpus in (("h-a", 4000, 3), ("h-b", 2000, 0), ("h-c", 3800, 5)):
        core.update_host(make_report(host, memory_mb=ram, vcpus=9, vcpus_used=used_vcpus), 1.0)
    core.update_host(make_report("h-x", memory_mb=3000, vcpus=9, vcpus_used=12), 1.0)
    [chosen] = core.select_destinations(make_spec("vm-1"), 2.0)
    assert [chosen.host, *chosen.alternates] == ["h-a", "h-b", "h-c"]


# -- the table's inventories ----------------------------------------------------------


def test_setting_an_inventory_says_whether_a_min_unit_or_step_size_changed() -> None:
    # HostTable.set_inventory answers True only when the steps changed (its
    # caller then rebuilds the units chain); new reserved figures or a new
    # max_unit with the same steps answer False.
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    table, row = core.table, core.table.row_of["h1"]
    totals = (4096, 4, 100)
    two = (Units(min_unit=2, step_size=2), None, None)
    assert table.set_inventory(row, two, totals, 0, 0) is True
    assert table.set_inventory(row, two, totals, 0, 0) is False
    assert table.set_inventory(row, two, totals, 1, 5) is False
    capped = (Units(min_unit=2, max_unit=8, step_size=2), None, None)
    assert table.set_inventory(row, capped, totals, 1, 5) is False
    assert table.set_inventory(row, (None, None, None), totals, 0, 0) is True
    assert table.set_inventory(row, (None, None, None), totals, 0, 0) is False


def test_the_metrics_weigher_with_every_host_gone_fails_the_request_with_no_valid_host() -> None:
    # MetricsWeigher over a table whose only host was removed (no live row):
    # it weighs nothing, and the request fails as any other does with no host.
    setting, _ = weight_setting(["cpu.idle.time=1"], "[metrics] weight_setting")
    core = make_core(make_config(metrics_weight_setting=setting, metrics_required=False))
    core.update_host(make_report("h1", metrics={"cpu.idle.time": 5.0}), 1.0)
    assert core.remove_host("h1", 2.0)
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm-1", ignore_hosts=["h9"]), 3.0)


def test_a_span_without_a_floor_is_the_lowest_and_highest_value() -> None:
    # ranking._span, Nova 34's normalize bounds (its docstring): without a
    # minval they are the values' own; with one, the floor and the highest.
    assert _span(2.0, 6.0, float("inf")) == (2.0, 6.0)
    assert _span(-2048.0, 2048.0, 0.0) == (0.0, 2048.0)
    assert _span(-5.0, -1.0, 0.0) == (0.0, 0.0)


# -- reschedules --------------------------------------------------------------------


def test_an_instance_in_an_open_move_is_not_rescheduled() -> None:
    # A build failure of a moving instance is the move's: confirm or revert
    # it; a reschedule refuses with InvalidRequest and changes nothing.
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    core.select_destinations(make_spec("vm-a"), 1.0)
    destination = core.move("vm-a", "mig-1", None, 2.0).host
    before = core.digest()
    with pytest.raises(InvalidRequest, match="open move"):
        core.reschedule("vm-a", destination, 3.0)
    assert core.digest() == before


def test_a_replayed_reschedule_claims_the_alternate_it_recorded() -> None:
    # reschedule(placed=) (journal replay) claims the recorded alternate, not
    # the first one that passes now.
    core = make_core(ram_only_config())
    for host, ram in (("h1", 8192), ("h2", 6144), ("h3", 4096)):
        core.update_host(make_report(host, memory_mb=ram), 1.0)
    [first] = core.select_destinations(make_spec("vm-a"), 1.0)
    assert [first.host, *first.alternates] == ["h1", "h2", "h3"]
    replayed = Selection(instance_uuid="vm-a", host="h3")
    moved = core.reschedule("vm-a", "h1", 2.0, placed=replayed)
    assert moved.host == "h3"
    assert core.claims()["vm-a"] == ("h3", False)


# -- an aggregate's weigher multiplier --------------------------------------------------


def test_an_aggregate_ram_multiplier_weighs_its_hosts_ram_beside_the_plain_cpu_weigher() -> None:
    # ram_weight_multiplier 2 on h1's aggregate (Nova's per-aggregate value):
    # RAM (0..4000) h1 0.5 x 2, h2 1; CPU (0..4) h1 1, h2 0.75: h1 2.0 > h2
    # 1.75. Without the aggregate, h2 (1.75 > 1.5).
    config = make_config(disk_weight_multiplier=0.0, io_ops_weight_multiplier=0.0)

    def best(aggregate: bool) -> str:
        core = make_core(config)
        core.update_host(make_report("h1", memory_mb=2000), 1.0)
        core.update_host(make_report("h2", memory_mb=4000, vcpus_used=1), 1.0)
        if aggregate:
            core.create_aggregate("heavy", {"ram_weight_multiplier": "2"}, ["h1"])
        return core.select_destinations(make_spec("vm-1", memory_mb=1), 2.0)[0].host

    assert best(aggregate=False) == "h2"
    assert best(aggregate=True) == "h1"


# -- aggregates -------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["=", "==", "!=", ">=", "<="])
def test_each_numeric_extra_spec_operator_refuses_an_operand_that_is_not_a_number(op: str) -> None:
    # Nova 34's extra_specs_ops compares these five as numbers (float() of
    # both sides): an operand that is not one raises there, and actorsched
    # refuses the request with InvalidRequest, nothing placed.
    config = make_config(enabled_filters=[*BUILTIN_FILTERS, *AGGREGATE_FILTERS], nova_release=34)
    core = make_core(config)
    core.update_host(make_report("h1"), 1.0)
    core.create_aggregate("a1", {"tier": "3"}, ["h1"])
    spec = make_spec("vm-1", extra_specs={"aggregate_instance_extra_specs:tier": f"{op} x"})
    with pytest.raises(InvalidRequest, match="which is not a number"):
        core.select_destinations(spec, 2.0)
    assert core.claims() == {}


def test_the_tenant_filter_sees_a_tenant_aggregate_made_after_a_placement() -> None:
    # Whether some aggregate names a tenant is kept between requests: an
    # aggregate created (or changed) later must count, for the shortcut's
    # guard too.
    core = make_core(ram_only_config(limit_tenants_to_placement_aggregate=True))
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2", memory_mb=8192), 1.0)
    core.create_aggregate("plain", {"tier": "gold"}, ["h2"])
    assert core.select_destinations(make_spec("vm-1", project_id="p1"), 2.0)[0].host == "h2"
    core.update_aggregate("plain", {"filter_tenant_id": "p9"})
    core.create_aggregate("mine", {"filter_tenant_id": "p1"}, ["h1"])
    assert core.select_destinations(make_spec("vm-2", project_id="p1"), 3.0)[0].host == "h1"


# -- tenants' own claims --------------------------------------------------------------


def test_a_refusal_names_the_operation_another_tenant_tried() -> None:
    # Forbidden says which operation of which uuid was refused, for each
    # scoped command (an operator reading the log, a tenant its error).
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.update_host(make_report("h2"), 1.0)
    spec = RequestSpec(instance_uuids=["a1"], memory_mb=512, vcpus=1, disk_gb=1, owner="t-a")
    host = core.select_destinations(spec, 1.0)[0].host
    for command, operation in (
        (Reschedule("a1", host, caller="t-b"), "reschedule"),
        (Release("a1", caller="t-b"), "release"),
        (Locate("a1", caller="t-b"), "where"),
    ):
        with pytest.raises(Forbidden, match=rf"^forbidden: {operation} of a1: 't-b' may only "):
            core.handle(command, 2.0)
    assert core.claims() == {"a1": (host, False)}


def test_a_reschedule_skips_an_alternate_that_went_silent() -> None:
    # ComputeFilter's freshness holds for a reschedule too: an alternate whose
    # last report is older than service_down_time is not claimed; the next
    # one that still reports is.
    core = make_core(ram_only_config(service_down_time=60))
    for host, ram in (("h1", 8192), ("h2", 6144), ("h3", 4096)):
        core.update_host(make_report(host, memory_mb=ram), 0.0)
    [first] = core.select_destinations(make_spec("vm-a"), 1.0)
    assert [first.host, *first.alternates] == ["h1", "h2", "h3"]
    core.update_host(make_report("h3", 2, memory_mb=4096), 100.0)  # h2 silent since 0
    moved = core.reschedule("vm-a", "h1", 100.0)
    assert moved.host == "h3"


def test_a_confirmed_claim_its_host_stops_listing_is_dropped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A claim its host listed (confirmed) then no longer lists: the instance
    # is gone from there; the claim is dropped, and the log says so.
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1"), 1.0)
    core.update_host(make_report("h1", 2, instances=["vm-1"], memory_mb_used=512), 2.0)
    assert core.claims() == {"vm-1": ("h1", True)}
    with caplog.at_level(logging.INFO, logger="actorsched.core"):
        core.update_host(make_report("h1", 3), 3.0)
    assert core.claims() == {}
    dropped = [r for r in caplog.records if r.name == "actorsched.core"]
    assert [r.getMessage() for r in dropped] == [
        "instance vm-1 no longer runs on h1: claim dropped"
    ]


# -- ComputeCapabilitiesFilter ------------------------------------------------------------


def test_capabilities_compare_each_host_state_attribute_and_skip_unknown_keys() -> None:
    # An unscoped extra spec that names a HostState attribute is compared (a
    # ratio actorsched holds; update and consume_from_request, methods of
    # Nova's HostState it does not hold, read unset and match nothing); a key
    # that is neither an attribute nor a stat of the host is not for it.
    filters = [*BUILTIN_FILTERS, "ComputeCapabilitiesFilter"]
    core = make_core(make_config(enabled_filters=filters))
    core.update_host(make_report("h1"), 1.0)
    for key, value in (
        ("cpu_allocation_ratio", "99.0"),
        ("update", "yes"),
        ("consume_from_request", "yes"),
    ):
        with pytest.raises(NoValidHost, match="ComputeCapabilitiesFilter"):
            core.select_destinations(make_spec("vm-1", extra_specs={key: value}), 2.0)
    assert core.select_destinations(make_spec("vm-2", extra_specs={"no_such_key": "yes"}), 2.0)


def test_a_long_extra_spec_map_counts_by_a_digest_in_valid_json() -> None:
    # Past 128 characters a map (extra_specs, image_properties) counts by the
    # SHA-256 of its sorted JSON text, 32 hex digits (journals keep it).
    specs = {f"key{i:02d}": f"value{i:02d}" for i in range(12)}
    text = request_fingerprint(make_spec("vm-1", extra_specs=specs))
    digest = json.loads(text)["extra_specs"]
    listed = json.dumps(specs, sort_keys=True, separators=(",", ":"))
    assert digest == "sha256:" + hashlib.sha256(listed.encode()).hexdigest()[:32]


def test_capabilities_read_each_allocation_ratio_as_its_own() -> None:
    # HostState's ram_, cpu_ and disk_allocation_ratio are three figures: a
    # capability asking one is compared with that one, not another's.
    filters = [*BUILTIN_FILTERS, "ComputeCapabilitiesFilter"]
    config = make_config(
        enabled_filters=filters,
        ram_allocation_ratio=1.5,
        cpu_allocation_ratio=3.0,
        disk_allocation_ratio=2.5,
    )
    core = make_core(config)
    core.update_host(make_report("h1"), 1.0)
    ratios = {"ram": 1.5, "cpu": 3.0, "disk": 2.5}
    for name, value in ratios.items():
        for other in ratios.values():
            spec = make_spec("vm-1", extra_specs={f"{name}_allocation_ratio": f"== {other}"})
            if other == value:
                assert core.select_destinations(spec, 2.0)[0].host == "h1"
                assert core.release("vm-1", 2.0)
            else:
                with pytest.raises(NoValidHost, match="ComputeCapabilitiesFilter"):
                    core.select_destinations(spec, 2.0)


def test_an_open_move_is_a_frozen_slotted_record() -> None:
    # A snapshot shares the core's Migration records instead of copying them
    # (image.capture): they must not change once made.
    migration = Migration("mig-1", "vm-a", "{}", False, None, "h1", ())
    with pytest.raises(AttributeError):
        migration.host = "h2"  # type: ignore[misc]
    assert "__dict__" not in dir(Migration)


def test_a_removed_host_leaves_no_inventory_behind() -> None:
    # Removing a host forgets its reserved figures and units: none is left on
    # its row, so no later host there inherits them.
    core = make_core()
    core.update_host(make_report("h1", vcpus_reserved=1, local_gb_reserved=5), 1.0)
    assert core.remove_host("h1", 2.0)
    assert core.table.inventory == {}
    assert core.table.units == {}
