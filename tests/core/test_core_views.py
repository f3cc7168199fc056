"""Host states copied in one owner step and built outside it, whole or a page at a time."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_core, make_report, make_spec

from actorsched.core import GetHostStates
from actorsched.core.views import HostStatesImage, capture_host_states, host_state


def test_the_image_builds_what_the_table_says() -> None:
    core = make_core()
    core.update_host(make_report("h1", traits=["SSD"], availability_zone="az1"), 1.0)
    core.update_host(make_report("h2", memory_mb_used=1024), 2.0)
    core.select_destinations(make_spec("vm-1", memory_mb=512, vcpus=2), 3.0)
    states = capture_host_states(core.table).states()
    assert states == {host: host_state(core.table, row) for host, row in core.table.row_of.items()}


def test_get_host_states_answers_an_image_not_objects() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    image = core.handle(GetHostStates(), 2.0)
    assert isinstance(image, HostStatesImage)
    assert image.next_row is None
    assert list(image.states()) == ["h1"]


@pytest.mark.parametrize("limit", [1, 3, 7, 100])
def test_pages_cover_every_host_once(limit: int) -> None:
    core = make_core()
    for i in range(10):
        core.update_host(make_report(f"h{i}"), 1.0)
    core.remove_host("h4", 2.0)  # a free row inside a page: skipped
    seen: list[str] = []
    start: int | None = 0
    pages = 0
    while start is not None:
        image = capture_host_states(core.table, start, limit)
        assert len(image.names) <= limit
        seen.extend(image.states())
        start = image.next_row
        pages += 1
    assert sorted(seen) == sorted(f"h{i}" for i in range(10) if i != 4)
    assert len(seen) == len(set(seen))
    assert pages == -(-10 // limit)


def test_an_image_does_not_follow_later_changes() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    image = capture_host_states(core.table)
    core.select_destinations(make_spec("vm-1", memory_mb=1024), 2.0)
    core.update_host(make_report("h1", generation=2, traits=["GPU"]), 3.0)
    [state] = image.states().values()
    assert state.generation == 1
    assert state.traits == []
    assert state.free_ram_mb == 4096


def test_a_page_past_the_end_is_empty_and_last() -> None:
    core = make_core()
    core.update_host(make_report("h1"), 1.0)
    image = capture_host_states(core.table, 50, 10)
    assert image.states() == {}
    assert image.next_row is None
    with pytest.raises(ValueError, match="page"):
        capture_host_states(core.table, -1, 10)


def test_host_names_and_traits_are_copied_on_write_not_shared_after_it() -> None:
    core = make_core()
    core.update_host(make_report("h1", traits=["SSD"]), 1.0)
    core.update_host(make_report("h2"), 1.0)
    image = capture_host_states(core.table)
    assert image.names_list is core.table.name_of  # handed out, not copied
    core.remove_host("h1", 2.0)  # frees row 0
    core.update_host(make_report("h3", traits=["GPU"]), 3.0)  # reuses it
    core.update_host(make_report("h2", generation=2, traits=["NVME"]), 3.0)
    assert image.names_list is not core.table.name_of  # the first write copied
    states = image.states()
    assert sorted(states) == ["h1", "h2"]
    assert states["h1"].traits == ["SSD"]
    assert states["h2"].traits == []
    assert host_state(core.table, core.table.row_of["h3"]).traits == ["GPU"]


def test_a_snapshot_image_keeps_the_names_of_its_moment() -> None:
    from actorsched.core.image import capture

    core = make_core()
    core.update_host(make_report("h1", traits=["SSD"]), 1.0)
    image = capture(core)
    core.remove_host("h1", 2.0)
    core.update_host(make_report("h9", traits=["GPU"]), 3.0)
    assert image.names[0] == "h1"
    assert image.host_traits[0] == ("SSD",)


def test_an_image_copies_into_room_given_beforehand_and_falls_back_when_it_is_short() -> None:
    from actorsched.core.views import ImageBuffers

    core = make_core()
    for i in range(5):
        core.update_host(make_report(f"h{i}", memory_mb_used=100 * i), 1.0)
    expected = capture_host_states(core.table).states()
    room = ImageBuffers.for_rows(8)
    image = core.handle(GetHostStates(into=room), 2.0)
    assert isinstance(image, HostStatesImage)
    assert np.shares_memory(image.raw, room.raw)  # copied into the room, no new arrays
    assert image.states() == expected
    short = ImageBuffers.for_rows(2)
    image = core.handle(GetHostStates(into=short), 2.0)
    assert isinstance(image, HostStatesImage)
    assert not np.shares_memory(image.raw, short.raw)
    assert image.states() == expected


def test_an_image_counts_its_hosts_not_its_free_rows() -> None:
    core = make_core()
    for i in range(5):
        core.update_host(make_report(f"h{i}"), 1.0)
    core.remove_host("h1", 2.0)  # a free row inside the table
    whole = capture_host_states(core.table)
    assert len(whole) == 4 == len(whole.states())
    page = capture_host_states(core.table, 0, 2)  # rows 0 and 1: h0 and the free row
    assert len(page) == 1
