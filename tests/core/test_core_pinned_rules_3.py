"""Rules a seeded mutation sample (seed 2 of make mutate) found unpinned (issue 31)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import Destination, NoValidHost
from actorsched.core import GetHostStates
from actorsched.core.image import capture
from actorsched.core.json_filter import evaluate
from actorsched.core.views import HostStatesImage, ImageBuffers
from actorsched.models import BUILTIN_FILTERS, HOST_FACTS_FILTERS, Units

FILTERS = [*BUILTIN_FILTERS, *HOST_FACTS_FILTERS]

# -- the digest -------------------------------------------------------------------------


def test_the_digest_tells_host_aggregates_apart() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    bare = core.digest()
    core.create_aggregate("a1", {"ssd": "true"})
    with_aggregate = core.digest()
    assert with_aggregate != bare
    core.update_aggregate("a1", {"ssd": "false"})
    assert core.digest() not in (bare, with_aggregate)


# -- host attributes an extra spec reads ---------------------------------------------


def test_an_unscoped_extra_spec_checks_the_host_s_usable_disk() -> None:
    core = make_core(make_config(enabled_filters=FILTERS))
    core.update_host(make_report("h1", local_gb=100), 1.0)
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm1", extra_specs={"total_usable_disk_gb": "200"}), 2.0)
    placed = core.select_destinations(
        make_spec("vm2", extra_specs={"total_usable_disk_gb": "100"}), 2.0
    )
    assert placed[0].host == "h1"


def test_a_multi_create_reads_the_vcpus_used_before_the_request() -> None:
    # the filter runs once per request: the later instances see the host as it
    # stood before the first one's claim (its vCPUs given back)
    core = make_core(make_config(enabled_filters=FILTERS))
    core.update_host(make_report("h1", vcpus=8), 1.0)
    spec = make_spec("vm1", "vm2", "vm3", extra_specs={"vcpus_used": "<= 0"})
    assert [s.host for s in core.select_destinations(spec, 2.0)] == ["h1"] * 3
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm4", extra_specs={"vcpus_used": "<= 0"}), 2.0)


def test_a_snapshot_keeps_a_host_s_failed_builds() -> None:
    core = make_core()
    core.update_host(make_report("h1", failed_builds=3), 1.0)
    assert capture(core).facts_section() == [{"failed_builds": 3}]


# -- the image ----------------------------------------------------------------------


def test_a_core_image_has_no_instance_dict() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    image = capture(core)
    assert not hasattr(image, "__dict__")  # slots: one image per snapshot, held often


def test_an_image_copies_into_room_of_exactly_its_rows() -> None:
    core = make_core()
    for i in range(3):
        core.update_host(make_report(f"h{i}"), 1.0)
    room = ImageBuffers.for_rows(3)
    image = core.handle(GetHostStates(into=room), 2.0)
    assert isinstance(image, HostStatesImage)
    assert np.shares_memory(image.raw, room.raw)


# -- units -------------------------------------------------------------------------------


def test_a_refusal_shows_five_unit_bounds_then_an_ellipsis() -> None:
    core = make_core()
    for minimum in range(2, 9):
        core.update_host(
            make_report(f"h{minimum}", vcpus=8, vcpus_units=Units(min_unit=minimum)), 0.0
        )
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(make_spec("vm1", vcpus=1), 1.0)
    assert "VCPU min_unit 2, 3, 4, 5, 6 ... refuses 1 on 7 hosts" in str(caught.value)


# -- JsonFilter ------------------------------------------------------------------------


def test_an_empty_json_query_passes_as_nova_s() -> None:
    nothing: dict[str, object] = {}
    assert evaluate([], nothing.get) is True
    assert evaluate(["not", []], nothing.get) is False


# -- the ranking ----------------------------------------------------------------------


def test_shuffled_best_hosts_still_need_room() -> None:
    # RamFilter alone: the resource filters are not fused, its mask is the one
    # that refuses the small host
    config = make_config(enabled_filters=["RamFilter"], shuffle_best_same_weighed_hosts=True)
    core = make_core(config)
    core.update_host(make_report("small", memory_mb=1024), 1.0)
    core.update_host(make_report("big", memory_mb=8192), 1.0)
    for i in range(3):
        placed = core.select_destinations(make_spec(f"vm{i}", memory_mb=2048), 2.0)
        assert placed[0].host == "big"
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm9", memory_mb=4096), 2.0)


def test_a_refused_destination_on_a_known_node_names_nothing_unknown() -> None:
    core = make_core()
    core.update_host(make_report("h1", node="n1"), 1.0)
    for destination in (Destination(host="h1", node="n1"), Destination(host="h1")):
        spec = make_spec("vm1", memory_mb=8192, requested_destination=destination)
        with pytest.raises(NoValidHost) as caught:
            core.select_destinations(spec, 2.0)
        assert "is not known" not in str(caught.value)
    spec = make_spec("vm1", requested_destination=Destination(host="h1", node="n2"))
    with pytest.raises(NoValidHost, match="requested_destination node 'n2' is not known"):
        core.select_destinations(spec, 2.0)


# -- the table's growth ---------------------------------------------------------------


def test_the_table_grows_by_a_quarter_from_4096_rows() -> None:
    # doubling while small (64, 128 ... 4096), then by a quarter: the 4097th
    # host takes a table of 5120 rows, not 8192
    core = make_core()
    core.update_hosts([make_report(f"h{i}") for i in range(4096)], 1.0)
    assert core.table.raw.shape[0] == 4096
    core.update_host(make_report("h4096"), 1.0)
    assert core.table.raw.shape[0] == 5120
