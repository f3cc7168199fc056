"""Placement's inventory rules, each pinned: reserved vCPUs and disk lower capacity
(under ratios), max_unit bounds one allocation whatever the capacity, min_unit and
step_size refuse an amount (the NoValidHost names the class and rule), a class
asked 0 of asks nothing; reports without the new fields place, and digest, as
before; the table's headroom and the filter chain are Placement's rule computed
directly, over seeded random hosts."""

from __future__ import annotations

import random
from typing import Any, Literal

import numpy as np
import pydantic
import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import HostReport, NoValidHost, RequestSpec
from actorsched.core import SchedulerCore
from actorsched.core.filters import PlacementContext
from actorsched.core.inventory import CLASSES, PlacementUnits, unit_rules
from actorsched.models import Units

# per class: (the report's total field, its reserved, its used, its units, the
# request's field, its ratio, the resource filter)
CLASS_FIELDS = {
    "MEMORY_MB": (
        "memory_mb",
        "memory_mb_reserved",
        "memory_mb_used",
        "memory_mb_units",
        "memory_mb",
        "ram_allocation_ratio",
        "RamFilter",
    ),
    "VCPU": (
        "vcpus",
        "vcpus_reserved",
        "vcpus_used",
        "vcpus_units",
        "vcpus",
        "cpu_allocation_ratio",
        "CoreFilter",
    ),
    "DISK_GB": (
        "local_gb",
        "local_gb_reserved",
        "local_gb_used",
        "local_gb_units",
        "disk_gb",
        "disk_allocation_ratio",
        "DiskFilter",
    ),
}
SMALL = {"memory_mb": 1, "vcpus": 1, "disk_gb": 1}


def _refused(core: SchedulerCore, spec: RequestSpec) -> NoValidHost:
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(spec, now=1.0)
    assert core.claims() == {}
    return info.value


# -- reserved --------------------------------------------------------------------------


@pytest.mark.parametrize("nova_release", [18, 34])
def test_reserved_vcpus_and_disk_lower_capacity_under_ratios(nova_release: Literal[18, 34]) -> None:
    # (8 - 2) x 4.0 - 20 = 4 vCPUs left (not 8 x 4.0 - 20 = 12);
    # (100 - 20) x 1.5 - 100 = 20 GB left (not 100 x 1.5 - 100 = 50)
    config = make_config(cpu_allocation_ratio=4.0, disk_allocation_ratio=1.5)
    config = config.model_copy(update={"nova_release": nova_release})
    report = make_report(
        "h1", vcpus=8, vcpus_reserved=2, vcpus_used=20, local_gb=100, local_gb_reserved=20,
        local_gb_used=100,
    )  # fmt: skip
    for resource, left, name in (("vcpus", 4, "CoreFilter"), ("disk_gb", 20, "DiskFilter")):
        core = make_core(config)
        core.update_host(report, now=0.0)
        over = _refused(core, make_spec("vm1", **{**SMALL, resource: left + 1}))
        assert over.filter_counts == {name: 1}
        [placed] = core.select_destinations(make_spec("vm1", **{**SMALL, resource: left}), 1.0)
        assert placed.host == "h1"


def test_the_cpu_weigher_counts_no_reserved_vcpus_and_host_state_shows_them() -> None:
    core = make_core(make_config(cpu_allocation_ratio=4.0))
    core.update_host(
        make_report(
            "h1", vcpus=8, vcpus_reserved=2, vcpus_used=20, local_gb=100, local_gb_reserved=20,
            local_gb_used=30,
        ),
        now=0.0,
    )  # fmt: skip
    table = core.table
    # Nova's CPUWeigher: vcpus_total x ratio - vcpus_used, reserved or not
    assert table.column("vcpu_headroom")[0] == 8 * 4.0 - 20
    assert table.column("cpu_headroom")[0] == (8 - 2) * 4.0 - 20
    # free disk (the DiskWeigher's, HostState's) is as free RAM: total - reserved - used
    assert table.column("free_disk")[0] == 100 - 20 - 30
    state = core.host_states()["h1"]
    assert (state.vcpus_reserved, state.local_gb_reserved) == (2, 20)
    assert state.free_disk_gb == 50
    assert state.vcpus_used == 20


def test_reserved_up_to_the_total_is_allowed_and_takes_everything() -> None:
    core = make_core(make_config(nova_release=34))
    core.update_host(make_report("h1", vcpus=4, vcpus_reserved=4), now=0.0)
    assert _refused(core, make_spec("vm1")).filter_counts == {"CoreFilter": 1}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"vcpus": 4, "vcpus_reserved": 5}, "vcpus_reserved 5 is above vcpus 4"),
        ({"local_gb": 10, "local_gb_reserved": 11}, "local_gb_reserved 11 is above local_gb 10"),
        ({"vcpus_units": {"min_unit": 3, "max_unit": 2}}, r"vcpus_units\n.*min_unit 3 is above"),
        ({"local_gb_units": {"step_size": 0}}, r"local_gb_units.step_size\n"),
        ({"memory_mb_units": {"max_unit": 0}}, r"memory_mb_units.max_unit\n"),
        ({"memory_mb_units": {"min_unit": "2"}}, r"memory_mb_units.min_unit\n"),
    ],
)
def test_bad_reserved_or_units_are_refused_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        make_report("h1", **fields)


# -- max_unit ----------------------------------------------------------------------------


@pytest.mark.parametrize("nova_release", [18, 34])
@pytest.mark.parametrize("klass", CLASSES)
def test_max_unit_bounds_one_instance_even_when_capacity_is_larger(
    klass: str, nova_release: Literal[18, 34]
) -> None:
    total, _, _, units, asks, ratio, name = CLASS_FIELDS[klass]
    # 16 x 4.0 = 64 of capacity, but one allocation may ask 8 at most
    config = make_config(**{ratio: 4.0}).model_copy(update={"nova_release": nova_release})
    core = make_core(config)
    fields: dict[str, Any] = {total: 16, units: Units(max_unit=8)}
    core.update_host(make_report("h1", **fields), now=0.0)
    assert _refused(core, make_spec("vm1", **{**SMALL, asks: 9})).filter_counts == {name: 1}
    # several of 8 fit, each within max_unit
    placed = core.select_destinations(make_spec("a", "b", "c", **{**SMALL, asks: 8}), 1.0)
    assert {s.host for s in placed} == {"h1"}


def test_a_max_unit_above_the_total_lets_one_instance_overcommit() -> None:
    # Placement allows what max_unit allows: 4 vCPUs x 4.0 = 16, max_unit 12
    core = make_core(make_config(cpu_allocation_ratio=4.0))
    core.update_host(make_report("h1", vcpus=4, vcpus_units=Units(max_unit=12)), now=0.0)
    assert core.select_destinations(make_spec("vm1", vcpus=12), 1.0)[0].host == "h1"
    plain = make_core(make_config(cpu_allocation_ratio=4.0))
    plain.update_host(make_report("h1", vcpus=4), now=0.0)
    assert _refused(plain, make_spec("vm1", vcpus=5)).filter_counts == {"CoreFilter": 1}


def test_a_changed_units_set_refreshes_the_row() -> None:
    core = make_core()
    core.update_host(make_report("h1", 1, memory_mb_units=Units(max_unit=1024)), now=0.0)
    assert core.table.column("ram_headroom")[0] == 1024
    core.update_host(make_report("h1", 2, memory_mb_units=Units(max_unit=2048)), now=0.0)
    assert core.table.column("ram_headroom")[0] == 2048
    # a new total with the same units: max_unit None follows the total
    core.update_host(make_report("h1", 3, memory_mb=3000, vcpus_units=Units()), now=0.0)
    assert core.table.column("ram_headroom")[0] == 3000
    core.update_host(make_report("h1", 4), now=0.0)  # units gone: the total again
    assert core.table.column("ram_headroom")[0] == 4096
    assert core.table.units == {}
    assert core.table.inventory == {}
    assert core.table.unit_steps == {}


# -- min_unit and step_size ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("klass", "units", "refused", "fits", "rule"),
    [
        ("MEMORY_MB", Units(min_unit=1024), 512, 1024, "min_unit 1024"),
        ("MEMORY_MB", Units(step_size=256), 300, 768, "step_size 256"),
        ("VCPU", Units(min_unit=2), 1, 3, "min_unit 2"),
        ("VCPU", Units(step_size=2), 3, 2, "step_size 2"),
        ("DISK_GB", Units(min_unit=10), 5, 10, "min_unit 10"),
        ("DISK_GB", Units(step_size=10), 15, 20, "step_size 10"),
    ],
)
def test_min_unit_and_step_size_refuse_an_amount_and_say_which(
    klass: str, units: Units, refused: int, fits: int, rule: str
) -> None:
    _, _, _, field, asks, _, _ = CLASS_FIELDS[klass]
    core = make_core()
    given: dict[str, Any] = {field: units}
    core.update_host(make_report("h1", **given), now=0.0)
    core.update_host(make_report("h2", memory_mb=0, local_gb=0), now=0.0)  # too small
    error = _refused(core, make_spec("vm1", **{**SMALL, asks: refused}))
    assert error.filter_counts["PlacementUnits"] == 1
    assert f"{klass} {rule} refuses {refused} on 1 host" in str(error)
    assert core.select_destinations(make_spec("vm1", **{**SMALL, asks: fits}), 1.0)[0].host == "h1"


@pytest.mark.parametrize("nova_release", [18, 34])
def test_asking_0_of_a_class_skips_its_units(nova_release: Literal[18, 34]) -> None:
    core = make_core(make_config(nova_release=nova_release))
    core.update_host(
        make_report(
            "h1",
            memory_mb_units=Units(min_unit=1024),
            vcpus_units=Units(step_size=2),
            local_gb_units=Units(min_unit=10, step_size=10),
        ),
        now=0.0,
    )
    spec = make_spec("vm1", memory_mb=0, vcpus=0, disk_gb=0)
    assert core.select_destinations(spec, 1.0)[0].host == "h1"
    # a boot from volume (0 GB) with units that suit RAM and vCPUs
    spec = make_spec("vm2", memory_mb=1024, vcpus=2, disk_gb=0)
    assert core.select_destinations(spec, 1.0)[0].host == "h1"


def test_every_refusing_rule_is_named() -> None:
    core = make_core()
    core.update_host(make_report("h1", vcpus_units=Units(min_unit=2)), now=0.0)
    core.update_host(make_report("h2", vcpus_units=Units(min_unit=4)), now=0.0)
    core.update_host(make_report("h3", local_gb_units=Units(step_size=10)), now=0.0)
    error = _refused(core, make_spec("vm1", vcpus=1, disk_gb=5))
    assert error.filter_counts == {"PlacementUnits": 3}
    assert "VCPU min_unit 2, 4 refuses 1 on 2 hosts" in str(error)
    assert "DISK_GB step_size 10 refuses 5 on 1 host" in str(error)


def test_a_rule_only_removed_hosts_had_is_not_named() -> None:
    """The explanation counts the hosts a placement could have used: a removed
    host's min_unit refuses nothing worth naming."""
    core = make_core()
    core.update_host(make_report("h1", vcpus_units=Units(min_unit=2)), now=0.0)
    core.update_host(make_report("h2", local_gb_units=Units(step_size=10)), now=0.0)
    assert core.remove_host("h1", now=0.0)
    error = _refused(core, make_spec("vm1", vcpus=1, disk_gb=5))
    assert "DISK_GB step_size 10 refuses 5 on 1 host" in str(error)
    assert "min_unit" not in str(error)


def test_the_units_filter_is_in_the_chain_only_while_some_host_has_units() -> None:
    core = make_core()
    plain = core.filters
    core.update_host(make_report("h1"), now=0.0)
    core.update_host(make_report("h2", vcpus_units=Units(max_unit=2)), now=0.0)
    assert core.filters is plain  # a max_unit is the headroom's: no filter for it
    core.update_host(make_report("h3", vcpus_units=Units(step_size=2)), now=0.0)
    assert [f.name for f in core.filters].count("PlacementUnits") == 1
    assert core.ranker.filters == core.filters
    core.update_host(make_report("h3", 2), now=0.0)  # its units gone
    assert core.filters is plain
    core.update_host(make_report("h3", 3, vcpus_units=Units(step_size=2)), now=0.0)
    assert core.remove_host("h3", now=0.0)
    assert core.filters is plain


def test_a_rebuilt_ranking_keeps_its_knobs() -> None:
    core = make_core()
    core.ranker.shortcut = False
    core.ranker.compress_below = 0.0
    core.update_host(make_report("h1", vcpus_units=Units(step_size=2)), now=0.0)
    assert (core.ranker.shortcut, core.ranker.compress_below) == (False, 0.0)


def test_unit_rules() -> None:
    assert unit_rules(3, 2, 2) == (False, True)
    assert unit_rules(1, 2, 1) == (True, False)
    assert unit_rules(4, 2, 2) == (False, False)
    below, off = unit_rules(6, np.array([1, 8]), np.array([4, 3]))
    assert below.tolist() == [False, True]
    assert off.tolist() == [True, False]


def test_placement_units_has_no_say_while_no_host_has_units() -> None:
    core = make_core()
    core.update_host(make_report("h1", vcpus_units=Units(max_unit=3)), now=0.0)
    ctx = PlacementContext(make_spec("vm1"), core.config, 0.0, core.ledger, core.locate)
    assert PlacementUnits().filter_all(core.table, ctx) is None
    core.update_host(make_report("h2", vcpus_units=Units(step_size=2)), now=0.0)
    assert PlacementUnits().filter_all(core.table, ctx) is not None  # h2 refuses 1 vCPU
    asked_two = PlacementContext(
        make_spec("vm1", vcpus=2), core.config, 0.0, core.ledger, core.locate
    )
    assert PlacementUnits().filter_all(core.table, asked_two) is None  # none refuses 2


# -- reports without the new fields behave as before --------------------------------------------


def _random_reports(seed: int, count: int, defaults: bool) -> list[HostReport]:
    """A varied fleet; with ``defaults``, each report names every new field at its default."""
    rng = random.Random(seed)
    reports = []
    for i in range(count):
        memory_mb = rng.choice([0, 2048, 8192, 65536])
        vcpus = rng.choice([0, 4, 16, 64])
        local_gb = rng.choice([0, 20, 500])
        explicit: dict[str, Any] = {}
        if defaults:  # as Nova's computes write them to Placement: max_unit the total
            explicit = {
                "vcpus_reserved": 0,
                "local_gb_reserved": 0,
                "memory_mb_units": Units(),
                "vcpus_units": Units(max_unit=vcpus) if vcpus else Units(),
                "local_gb_units": Units(min_unit=1, max_unit=None, step_size=1),
            }
        ratios: dict[str, Any] = {}
        if rng.random() < 0.3:
            ratios["cpu_allocation_ratio"] = rng.choice([1.0, 2.0, 16.0])
        reports.append(
            make_report(
                f"h{i:04d}",
                memory_mb=memory_mb,
                memory_mb_used=rng.randrange(0, memory_mb + 1000),
                memory_mb_reserved=rng.choice([0, 512]),
                vcpus=vcpus,
                vcpus_used=rng.randrange(0, 2 * vcpus + 1),
                local_gb=local_gb,
                local_gb_used=rng.randrange(0, local_gb + 5),
                num_io_ops=rng.randrange(3),
                **ratios,
                **explicit,
            )
        )
    return reports


@pytest.mark.parametrize("nova_release", [18, 34])
def test_explicit_defaults_place_and_digest_as_reports_without_them(
    nova_release: Literal[18, 34],
) -> None:
    results = []
    for defaults in (False, True):
        core = make_core(make_config(seed=4, nova_release=nova_release))
        reports = _random_reports(5, 200, defaults)
        core.update_hosts(reports[:120], 1.0)  # the batch path
        for report in reports[120:]:
            core.update_host(report, 1.0)  # the one-report path
        rng = random.Random(6)
        placed: list[object] = []
        for j in range(300):
            spec = make_spec(
                f"vm{j}",
                memory_mb=rng.choice([0, 512, 2048, 4096]),
                vcpus=rng.choice([0, 1, 2, 8]),
                disk_gb=rng.choice([0, 1, 10, 100]),
            )
            try:
                placed.append([s.host for s in core.select_destinations(spec, 2.0)])
            except NoValidHost as exc:
                placed.append(str(exc))
        # defaults are nothing to keep: the table stays as without them
        assert (core.table.units, core.table.inventory, core.table.unit_steps) == ({}, {}, {})
        results.append((placed, core.digest(), core.table.derived[:, : core.table.n].tolist()))
    assert results[0] == results[1]


def test_a_default_report_is_written_as_before() -> None:
    report = make_report("h1")
    assert report.model_dump_json() == (
        '{"host":"h1","generation":1,"memory_mb":4096,"memory_mb_used":0,'
        '"memory_mb_reserved":0,"vcpus":4,"vcpus_used":0,"local_gb":100,"local_gb_used":0,'
        '"availability_zone":null,"enabled":true,"traits":[],"instances":[],"num_io_ops":0,'
        '"ram_allocation_ratio":null,"cpu_allocation_ratio":null,"disk_allocation_ratio":null,'
        '"node":null,"hypervisor_type":null,"hypervisor_version":null,'
        '"supported_instances":[],"cpu_info":null,"stats":{}}'
    )
    given = make_report("h1", vcpus_reserved=1, local_gb_units=Units(step_size=5))
    again = HostReport.model_validate_json(given.model_dump_json())
    assert again == given


def test_a_digest_covers_reserved_figures_and_units() -> None:
    digests = set()
    for fields in (
        {},
        {"vcpus_reserved": 1},
        {"local_gb_reserved": 1},
        {"vcpus_units": Units(max_unit=2)},
        {"vcpus_units": Units(step_size=2)},
        {"vcpus_units": Units(min_unit=2)},
    ):
        core = make_core()
        core.update_host(make_report("h1", **fields), now=0.0)
        digests.add(core.digest())
    assert len(digests) == 6


# -- the batch path and the one-report path agree ---------------------------------------------


def _unusual_reports(seed: int, count: int, generation: int = 1) -> list[HostReport]:
    rng = random.Random(seed)
    reports = []
    for report in _random_reports(seed, count, defaults=False):
        fields: dict[str, Any] = {"generation": generation}
        if rng.random() < 0.4:
            fields["vcpus_reserved"] = rng.randrange(report.vcpus + 1)
            fields["local_gb_reserved"] = rng.randrange(report.local_gb + 1)
        for name in ("memory_mb_units", "vcpus_units", "local_gb_units"):
            if rng.random() < 0.2:
                fields[name] = Units(
                    min_unit=rng.choice([1, 1, 2]),
                    max_unit=rng.choice([None, 2, 8, 100, 10_000]),
                    step_size=rng.choice([1, 1, 2]),
                )
        try:
            reports.append(HostReport(**{**report.model_dump(), **fields}))
        except pydantic.ValidationError:
            reports.append(report.model_copy(update={"generation": generation}))
    return reports


def test_update_hosts_matches_update_host_with_units_and_reserved() -> None:
    one, many = make_core(make_config(seed=2)), make_core(make_config(seed=2))
    for generation in (1, 2, 3):
        reports = _unusual_reports(generation, 150, generation)
        for report in reports:
            one.update_host(report, 1.0)
        many.update_hosts(reports, 1.0)
        assert many.digest() == one.digest()
        n = one.table.n
        assert one.table.derived[:, :n].tolist() == many.table.derived[:, :n].tolist()


def test_a_row_derived_in_a_batch_is_the_row_derived_alone() -> None:
    # the scalar and array twins of _derive, with inventory entries on some rows
    core = make_core(make_config(seed=3))
    for report in _unusual_reports(7, 200):
        core.update_host(report, 1.0)
    table = core.table
    assert table.inventory  # some rows reserve or are bound by a max_unit
    n = table.n
    alone = table.derived[:, :n].copy()
    table.refresh_many(np.arange(n, dtype=np.intp))
    assert table.derived[:, :n].tolist() == alone.tolist()


# -- Placement's rule, computed directly ---------------------------------------------------------


def _placement_allows(report: HostReport, ratios: dict[str, float], spec: RequestSpec) -> bool:
    """Placement's rule for each class asked more than 0, from the report alone."""
    for (
        total_field,
        reserved_field,
        used_field,
        units_field,
        asks,
        ratio,
        _,
    ) in CLASS_FIELDS.values():
        amount: int = getattr(spec, asks)
        if amount == 0:
            continue
        units: Units = getattr(report, units_field) or Units()
        total: int = getattr(report, total_field)
        reserved: int = getattr(report, reserved_field)
        used: int = getattr(report, used_field)
        max_unit = total if units.max_unit is None else units.max_unit
        if not units.min_unit <= amount <= max_unit or amount % units.step_size:
            return False
        if used + amount > (total - reserved) * ratios[ratio]:
            return False
    return True


def _placement_headroom(report: HostReport, ratios: dict[str, float]) -> list[float]:
    """The most one allocation of each class may ask (Placement: never below 0)."""
    room = []
    for total_field, reserved_field, used_field, units_field, _, ratio, _ in CLASS_FIELDS.values():
        units: Units = getattr(report, units_field) or Units()
        total: int = getattr(report, total_field)
        left = (total - getattr(report, reserved_field)) * ratios[ratio] - getattr(
            report, used_field
        )
        bound = total if units.max_unit is None else units.max_unit
        room.append(max(min(bound, left), 0.0))
    return room


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_headroom_and_filters_are_placements_rule_on_random_hosts(seed: int) -> None:
    rng = random.Random(seed)
    ratios = {
        "ram_allocation_ratio": 1.5,
        "cpu_allocation_ratio": 4.0,
        "disk_allocation_ratio": 1.0,
    }
    core = make_core(make_config(nova_release=34, **ratios))
    reports: list[HostReport] = []
    for i in range(300):
        totals = {"memory_mb": rng.choice([0, 1024, 4096]), "vcpus": rng.choice([0, 2, 8]),
                  "local_gb": rng.choice([0, 10, 100])}  # fmt: skip
        fields: dict[str, Any] = {}
        for total_field, reserved_field, used_field, units_field, *_ in CLASS_FIELDS.values():
            total = totals[total_field]
            fields[reserved_field] = rng.choice([0, 0, rng.randrange(total + 1)])
            fields[used_field] = rng.randrange(2 * total + 2)
            if rng.random() < 0.5:
                low = rng.choice([1, 1, 2, 3])
                fields[units_field] = Units(
                    min_unit=low,
                    max_unit=rng.choice([None, low, low + rng.randrange(2 * total + 2)]),
                    step_size=rng.choice([1, 1, 2, 4]),
                )
        reports.append(make_report(f"h{i:03d}", **totals, **fields))
    core.update_hosts(reports[:150], 0.0)
    for report in reports[150:]:
        core.update_host(report, 0.0)
    table = core.table
    rows = [table.row_of[r.host] for r in reports]
    expected = [_placement_headroom(r, ratios) for r in reports]
    assert table.headroom[:, rows].T.tolist() == expected  # the same operations: exact
    for _ in range(200):
        spec = make_spec(
            "vm1",
            memory_mb=rng.choice([0, 1, 256, 512, 1024, 3000]),
            vcpus=rng.choice([0, 1, 2, 3, 4, 8]),
            disk_gb=rng.choice([0, 1, 5, 10, 40]),
        )
        ctx = PlacementContext(spec, core.config, 0.0, core.ledger, core.locate)
        passing = table.row_ok[: table.n].copy()
        for f in core.filters:
            mask = f.filter_all(table, ctx)
            if mask is not None:
                passing &= mask
        got = [bool(passing[row]) for row in rows]
        assert got == [_placement_allows(r, ratios, spec) for r in reports], spec
        # and a placement picks one of those hosts, or none when none allows it
        plan = core.plan(spec, 0.0)
        assert plan.placed == any(got)
        if plan.placed:
            allowed = {r.host for r, ok in zip(reports, got, strict=True) if ok}
            assert plan.instances[0].host in allowed
