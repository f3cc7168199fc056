"""Every vocabulary the state holds has a bound: hosts, live claims, trait names, zones."""

from __future__ import annotations

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import InvalidRequest
from actorsched.core.views import host_state


def test_a_host_past_max_hosts_is_refused_and_changes_nothing() -> None:
    core = make_core(make_config(max_hosts=3))
    for i in range(3):
        assert core.update_host(make_report(f"h{i}"), 1.0)
    digest = core.digest()
    with pytest.raises(InvalidRequest, match="max_hosts 3"):
        core.update_host(make_report("h3"), 2.0)
    assert core.update_host(make_report("h0", generation=2), 2.0)  # known hosts still report
    core.remove_host("h2", 3.0)
    assert core.update_host(make_report("h3"), 4.0)  # room again
    assert digest != core.digest()


def test_a_batch_that_would_pass_max_hosts_is_refused_whole() -> None:
    core = make_core(make_config(max_hosts=10))
    with pytest.raises(InvalidRequest, match="11 new hosts"):
        core.update_hosts([make_report(f"h{i}") for i in range(11)], 1.0)
    assert core.table.count == 0
    assert core.update_hosts([make_report(f"h{i}") for i in range(10)], 1.0) == [True] * 10


def test_live_claims_are_bounded_by_max_claims() -> None:
    core = make_core(make_config(max_claims=2, max_io_ops_per_host=100))
    core.update_host(make_report("h1", memory_mb=65536), 1.0)
    core.select_destinations(make_spec("vm1", "vm2"), 2.0)
    assert core.select_destinations(make_spec("vm1", "vm2"), 3.0)  # a redelivery is fine
    with pytest.raises(InvalidRequest, match="max_claims is 2"):
        core.select_destinations(make_spec("vm3"), 4.0)
    core.release("vm1", 5.0)
    assert core.select_destinations(make_spec("vm3"), 6.0)


def test_new_trait_names_past_max_traits_are_refused() -> None:
    core = make_core(make_config(max_traits=4))
    core.update_host(make_report("h1", traits=["A", "B", "C"]), 1.0)
    with pytest.raises(InvalidRequest, match=r"2 new trait names .* max_traits 4"):
        core.update_host(make_report("h2", traits=["A", "D", "E"]), 2.0)
    assert "h2" not in core.table.row_of, "refused before the host was added"
    assert core.update_host(make_report("h2", traits=["A", "D"]), 3.0)
    with pytest.raises(InvalidRequest, match="max_traits"):
        core.update_hosts([make_report(f"x{i}", traits=[f"T{i}"]) for i in range(8)], 4.0)
    assert core.table.count == 2


def test_new_zones_past_max_zones_are_refused() -> None:
    core = make_core(make_config(max_zones=2))
    core.update_host(make_report("h1", availability_zone="az1"), 1.0)
    core.update_host(make_report("h2", availability_zone="az2"), 1.0)
    with pytest.raises(InvalidRequest, match="max_zones 2"):
        core.update_host(make_report("h1", generation=2, availability_zone="az3"), 2.0)
    assert host_state(core.table, core.table.row_of["h1"]).availability_zone == "az1"


def test_trait_storage_grows_by_doubling() -> None:
    # one more 64-bit word per 64 new names would copy the whole bitset each time
    core = make_core(make_config(max_traits=10_000))
    widths = set()
    for i in range(40):
        core.update_host(make_report(f"h{i}", traits=[f"T{i}-{k}" for k in range(64)]), 1.0)
        widths.add(core.table.traits.shape[1])
    assert widths <= {1, 2, 4, 8, 16, 32, 64}
    assert core.table.traits.shape[1] >= 40
