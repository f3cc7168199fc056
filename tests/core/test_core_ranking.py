"""Rules of the ranking (``actorsched.core.ranking``) no other test pinned: hosts
of equal figures tie exactly when the best are shuffled, and what a forced
request that found no room is told."""

from __future__ import annotations

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import NoValidHost

# Identical hosts whose weights a matrix product may round apart in the last
# bit (its vectorized part and its tail add in different ways), beside one
# smaller host that makes every weigher's span wide.
BIG = {
    "memory_mb": 73728,
    "memory_mb_used": 600,
    "vcpus": 64,
    "vcpus_used": 7,
    "local_gb": 700,
    "local_gb_used": 110,
}


def test_shuffled_best_hosts_draw_from_every_host_of_equal_figures() -> None:
    # shuffle_best_same_weighed_hosts (Nova's): the host is drawn at random
    # among all the hosts of the best weight; hosts of equal figures weigh
    # exactly the same, so each of the 16 is drawn, none is left out by a
    # rounding
    core = make_core(make_config(shuffle_best_same_weighed_hosts=True, host_subset_size=1))
    core.update_host(make_report("small"), 1.0)
    for i in range(16):
        core.update_host(make_report(f"big{i:02}", **BIG), 1.0)
    drawn: set[str] = set()
    for n in range(200):
        [selection] = core.select_destinations(make_spec(f"vm{n}"), 2.0)
        drawn.add(selection.host)
        assert core.release(f"vm{n}", 2.0)
    assert drawn == {f"big{i:02}" for i in range(16)}


def test_a_forced_request_without_room_is_told_that_forcing_skips_only_the_filters() -> None:
    core = make_core(make_config(enabled_filters=["ComputeFilter"]))  # no RamFilter on
    for host in ("h1", "h2"):
        core.update_host(make_report(host), 1.0)
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(make_spec("vm", force_hosts=["h1"], memory_mb=8192), 2.0)
    assert str(caught.value) == (
        "0/2 hosts are available for instance vm: ForceHosts removed 1, RamFilter removed 1; "
        "forced hosts skip the filters but must have room for the resources asked"
    )
