"""The image the journal saves: each column says what the core holds."""

from __future__ import annotations

from conftest import make_core, make_report, make_spec

from actorsched.core.image import capture


def test_host_columns_carry_each_hosts_report_zone_flags_and_time() -> None:
    core = make_core()
    core.update_host(make_report("h1", availability_zone="az1", traits=["SSD"]), 1.5)
    core.update_host(make_report("h2", enabled=False, instances=["vm-x"]), 2.5)
    columns = capture(core).host_columns()
    assert columns["host"] == ["h1", "h2"]
    assert columns["availability_zone"] == ["az1", None]
    assert columns["enabled"] == [True, False]
    assert columns["traits"] == [["SSD"], []]
    assert columns["instances"] == [[], ["vm-x"]]
    assert columns["reported_at"] == [1.5, 2.5]
    assert columns["memory_mb"] == [4096, 4096]


def test_credit_columns_list_each_released_instance_still_listed() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1", memory_mb=1000, vcpus=2, disk_gb=3), 1.0)
    core.update_host(make_report("h1", generation=2, memory_mb_used=1000, instances=["vm-1"]), 2.0)
    core.release("vm-1", 3.0)
    credits = capture(core).credit_columns()
    assert credits == {
        "host": ["h1"],
        "instance_uuid": ["vm-1"],
        "memory_mb": [1000],
        "vcpus": [2],
        "disk_gb": [3],
    }


def test_claim_columns_name_each_claims_host() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1", memory_mb=700), 1.0)
    claims = capture(core).claim_columns()
    assert claims["host"] == ["h1"]
    assert claims["instance_uuid"] == ["vm-1"]
    assert claims["memory_mb"] == [700]
    assert claims["confirmed"] == [False]


def test_claim_columns_carry_priority_and_the_request_section_each_kept_spec_once() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    core.select_destinations(make_spec("vm-1", "vm-2", priority=4), 1.0)
    image = capture(core)
    core.select_destinations(make_spec("vm-3"), 2.0)  # kept after the capture: not in it
    assert image.claim_columns()["priority"] == [4, 4]
    assert image.claim_columns()["preempted"] == [(), ()]
    section = image.request_section()
    assert section["instance_uuid"] == ["vm-1", "vm-2"]
    assert section["spec"] == [0, 0]
    assert section["specs"] == [
        make_spec("vm-1", "vm-2", priority=4).model_dump(mode="json", exclude_defaults=True)
    ]
