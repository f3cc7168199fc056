"""ImagePropertiesWeigher: each expectation is Nova 34.0.0's own unit test's
(``nova/tests/unit/scheduler/weights/test_weights_image_props.py``), named in
each test's docstring. Nova's fake hosts become host reports and its fake
instances claims placed on them (forced hosts), with the images of Nova's
``_fake_image_meta_from_instance``; every other weigher is off, so that a weight
is the one weigher's, as in Nova's tests. Then what actorsched adds: which
claims count (the request's own earlier instances do not, a released one
stops counting, a move's hold counts on its source), the aggregate
multiplier, the snapshot and the journal's replay."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched.core import SchedulerCore, engine
from actorsched.core.image import capture
from actorsched.journal.snapshot import encode, restore

_ALONE: dict[str, Any] = {  # Nova's tests weigh with one weigher: the others off
    "ram_weight_multiplier": 0.0,
    "cpu_weight_multiplier": 0.0,
    "disk_weight_multiplier": 0.0,
    "io_ops_weight_multiplier": 0.0,
    "build_failure_weight_multiplier": 0.0,
    "nova_release": 34,
    "max_attempts": 10,
}

# Nova's images
PC = {"hw_machine_type": "pc"}
WIN_PC = {"os_distro": "windows", "hw_machine_type": "pc"}
LIN = {"os_distro": "linux"}
LIN_PC = {"os_distro": "linux", "hw_machine_type": "pc"}

# Nova's _get_all_hosts: host1 none; host2 inst1 (windows, pc); host3 inst2 (linux)
# and inst3 (linux, pc); host4 inst4 (linux)
_INSTANCES = {
    "host1": {},
    "host2": {"inst1": WIN_PC},
    "host3": {"inst2": LIN, "inst3": LIN_PC},
    "host4": {"inst4": LIN},
}


def _core(multiplier: float = 1.0, **config: Any) -> SchedulerCore:
    core: SchedulerCore = make_core(
        make_config(image_props_weight_multiplier=multiplier, **_ALONE, **config)
    )
    for host in _INSTANCES:
        core.update_host(make_report(host), now=0.0)
    for host, instances in _INSTANCES.items():
        for uuid, image in instances.items():
            spec = make_spec(uuid, force_hosts=[host], image_properties=image)
            core.select_destinations(spec, now=0.0)
    return core


def _weighed(core: SchedulerCore, image: dict[str, str]) -> dict[str, float]:
    """host -> weight of every passing host, as the plan ranks them."""
    plan = core.plan(make_spec("vm", image_properties=image), now=1.0)
    return {c.host: c.total for c in plan.instances[0].candidates}


def test_multiplier_default() -> None:
    """Nova's test_multiplier_default: the multiplier 0 weighs nothing, and builds no
    weigher (so no claim keeps an image)."""
    core = _core(0.0)
    assert set(_weighed(core, WIN_PC).values()) == {0.0}
    assert "ImagePropertiesWeigher" not in {w.name for w in core.weighers}
    assert all(not claim.image for claim in core.ledger.claims.values())
    assert not core.ledger.image_rows


def test_multiplier_windows_and_pc() -> None:
    """Nova's test_multiplier_windows_and_pc: host2 wins with weight 1.0 (it alone
    holds an instance of both os_distro=windows and hw_machine_type=pc)."""
    weighed = _weighed(_core(), WIN_PC)
    assert max(weighed, key=weighed.__getitem__) == "host2"
    assert weighed["host2"] == pytest.approx(1.0)
    # host3's inst3 shares hw_machine_type=pc: 1 of host2's 2
    assert weighed == pytest.approx({"host2": 1.0, "host3": 0.5, "host1": 0.0, "host4": 0.0})


def test_multiplier_pc() -> None:
    """Nova's test_multiplier_pc: host2 and host3 1.0, host1 and host4 0.0."""
    assert _weighed(_core(), PC) == pytest.approx(
        {"host2": 1.0, "host3": 1.0, "host1": 0.0, "host4": 0.0}
    )


def test_multiplier_linux() -> None:
    """Nova's test_multiplier_linux: host3 (two linux instances) 1.0, host4 0.5."""
    assert _weighed(_core(), LIN) == pytest.approx(
        {"host3": 1.0, "host4": 0.5, "host1": 0.0, "host2": 0.0}
    )


def test_multiplier_per_property() -> None:
    """Nova's test_multiplier_per_property: linux and pc weigh host3 1.0, host2 and
    host4 1/3; with the setting os_distro=1, hw_machine_type=0, host3 1.0 and host4
    0.5 (a property of ratio 0 counts nothing)."""
    assert _weighed(_core(), LIN_PC) == pytest.approx(
        {"host3": 1.0, "host2": 1 / 3, "host4": 1 / 3, "host1": 0.0}
    )
    setting = [("os_distro", 1.0), ("hw_machine_type", 0.0)]
    assert _weighed(_core(image_props_weight_setting=setting), LIN_PC) == pytest.approx(
        {"host3": 1.0, "host4": 0.5, "host1": 0.0, "host2": 0.0}
    )


def test_a_property_the_setting_does_not_name_weighs_nothing() -> None:
    """Nova's ``self.setting.get(prop, 0.0)``: with a setting, an unnamed property
    is 0; a name given twice takes its last ratio (Nova's dict of the pairs)."""
    setting = [("hw_machine_type", 5.0), ("hw_machine_type", 2.0)]
    core = _core(image_props_weight_setting=setting)
    assert _weighed(core, LIN) == {"host1": 0.0, "host2": 0.0, "host3": 0.0, "host4": 0.0}
    assert _weighed(core, PC) == pytest.approx(
        {"host2": 1.0, "host3": 1.0, "host1": 0.0, "host4": 0.0}
    )


def test_a_negative_multiplier_spreads() -> None:
    """A negative multiplier prefers the hosts without those images (Nova's docs)."""
    weighed = _weighed(_core(-1.0), LIN)
    assert weighed == pytest.approx({"host3": -1.0, "host4": -0.5, "host1": 0.0, "host2": 0.0})


def test_the_aggregate_multiplier_overrides_the_configured_one() -> None:
    """``get_weight_multiplier``: a host's aggregate image_props_weight_multiplier
    replaces the configured value for that host."""
    core = _core()
    core.create_aggregate("pack", {"image_props_weight_multiplier": "3.0"}, ["host4"])
    assert _weighed(core, LIN) == pytest.approx(
        {"host3": 1.0, "host4": 1.5, "host1": 0.0, "host2": 0.0}
    )


def test_a_request_without_an_image_weighs_nothing() -> None:
    """Nova's ``request_spec.image`` None: no property asked, every weight 0."""
    assert set(_weighed(_core(), {}).values()) == {0.0}


def test_the_requests_own_instances_do_not_count() -> None:
    """Nova's multi-create consumes each chosen host but never adds the instance to
    its HostState's instances: the request's earlier instances do not weigh. With
    -1.0 (spread), three linux instances all go to host1, the first of the hosts
    without one as the weigher saw them before the request (the resource weighers
    are off); counting the request's own would send the second to host2."""
    core = _core(-1.0)
    selections = core.select_destinations(make_spec("a", "b", "c", image_properties=LIN), now=1.0)
    assert [s.host for s in selections] == ["host1", "host1", "host1"]
    # once placed, they count: host1 (row 0) holds three linux instances now
    assert core.ledger.image_rows[("os_distro", "linux")] == {0: 3, 2: 2, 3: 1}


def test_a_released_instance_stops_counting() -> None:
    core = _core()
    core.release("inst4", now=1.0)
    assert _weighed(core, LIN) == pytest.approx(
        {"host3": 1.0, "host1": 0.0, "host2": 0.0, "host4": 0.0}
    )


def test_a_moves_hold_counts_on_its_source_and_a_revert_keeps_the_image() -> None:
    """The instance stays on its source until the move is confirmed: its hold there
    keeps its image; the destination's claim carries it too; a revert gives the
    claim back with its image."""
    core = _core()
    core.move("inst4", "mig4", now=1.0, spec=make_spec("inst4", image_properties=LIN))
    hold = core.ledger.claims["mig4"]
    moved = core.ledger.claims["inst4"]
    assert hold.image == moved.image == (("os_distro", "linux"),)
    core.revert_move("mig4", now=2.0)
    assert core.ledger.claims["inst4"].image == (("os_distro", "linux"),)
    assert "mig4" not in core.ledger.claims
    assert _weighed(core, LIN) == pytest.approx(
        {"host3": 1.0, "host4": 0.5, "host1": 0.0, "host2": 0.0}
    )


def test_releasing_every_instance_of_an_image_forgets_its_properties() -> None:
    """The ledger's count of a property shrinks with each release and goes once no
    claim holds it (a host row at 0 is not kept, nor a property no row holds)."""
    core = _core()
    assert core.ledger.image_rows[("os_distro", "linux")] == {2: 2, 3: 1}
    core.release("inst2", now=1.0)
    assert core.ledger.image_rows[("os_distro", "linux")] == {2: 1, 3: 1}
    core.release("inst4", now=1.0)
    assert core.ledger.image_rows[("os_distro", "linux")] == {2: 1}
    for instance in ("inst1", "inst3"):
        core.release(instance, now=1.0)
    assert core.ledger.image_rows == {}


def test_claims_share_one_tuple_per_image() -> None:
    core = _core()
    assert core.ledger.claims["inst2"].image is core.ledger.claims["inst4"].image


def test_the_shared_images_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``_MAX_IMAGES`` distinct images the shared tuples are dropped and made
    again: the claims keep their images, the cache never holds more."""
    monkeypatch.setattr(engine, "_MAX_IMAGES", 2)
    core = _core()  # three distinct images: the cache was emptied once
    assert len(core._images) <= 2
    assert core.ledger.claims["inst3"].image == tuple(sorted(LIN_PC.items()))
    core.select_destinations(make_spec("inst5", image_properties=PC), now=1.0)
    assert len(core._images) <= 2
    assert core.ledger.claims["inst5"].image == (("hw_machine_type", "pc"),)


def test_the_images_survive_a_snapshot() -> None:
    """Format 11: each distinct image once; every claim names its own."""
    core = _core()
    data = json.loads(encode(capture(core)))
    assert sorted(map(json.dumps, data["images"])) == sorted(
        map(json.dumps, [dict(sorted(i.items())) for i in (WIN_PC, LIN, LIN_PC)])
    )
    again = make_core(core.config)
    restore(again, json.dumps(data))
    assert again.digest() == core.digest()  # the digest covers the images
    assert again.ledger.image_rows == core.ledger.image_rows
    assert _weighed(again, LIN_PC) == pytest.approx(_weighed(core, LIN_PC))


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: d["claims"]["image"].__setitem__(0, 7), "names image 7"),
        (lambda d: d["claims"]["image"].__setitem__(0, "0"), "names image '0'"),
        (lambda d: d.__setitem__("images", {}), "images must be a list"),
        (lambda d: d["images"].__setitem__(0, {"os_distro": 1}), "images 0 must be an object"),
    ],
)
def test_a_damaged_image_section_is_refused(change: Any, error: str) -> None:
    data = json.loads(encode(capture(_core())))
    data["claims"]["image"][0] = 0  # (whichever claim comes first names an image)
    change(data)
    with pytest.raises(ValueError, match=error):
        restore(make_core(make_config(image_props_weight_multiplier=1.0)), json.dumps(data))
