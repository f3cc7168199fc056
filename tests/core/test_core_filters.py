"""Every built-in filter with Nova's semantics, and the NoValidHost explanation."""

from __future__ import annotations

import re

import pytest
from conftest import make_config, make_core, make_report, make_spec, ram_only_config

from actorsched import NoValidHost, RequestSpec
from actorsched.core import SchedulerCore


def _hosts(core: SchedulerCore, *names: str, now: float = 0.0, **fields: object) -> None:
    for name in names:
        core.update_host(make_report(name, 1, **fields), now=now)


def _placed(core: SchedulerCore, spec: RequestSpec, now: float = 1.0) -> list[str]:
    return [s.host for s in core.select_destinations(spec, now=now)]


def _refused(core: SchedulerCore, spec: RequestSpec, now: float = 1.0) -> dict[str, int]:
    before = core.claims()
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(spec, now=now)
    assert core.claims() == before
    return info.value.filter_counts


# -- ComputeFilter ------------------------------------------------------------------


def test_compute_filter_disabled_host() -> None:
    core = make_core()
    core.update_host(make_report("off", 1, memory_mb=8192, enabled=False), now=0.0)
    core.update_host(make_report("on", 1, memory_mb=1024), now=0.0)
    assert _placed(core, make_spec("vm1")) == ["on"]
    assert _refused(core, make_spec("vm2", ignore_hosts=["on"])) == {
        "IgnoreHosts": 1,
        "ComputeFilter": 1,
    }


def test_compute_filter_service_down_time_boundary() -> None:
    core = make_core(make_config(service_down_time=60.0))
    core.update_host(make_report("h1", 1), now=100.0)
    assert _placed(core, make_spec("a"), now=160.0) == ["h1"]  # exactly 60 s: up
    assert _refused(core, make_spec("b"), now=160.5) == {"ComputeFilter": 1}
    core.update_host(make_report("h1", 2), now=161.0)  # a fresh report brings it back
    assert _placed(core, make_spec("b"), now=200.0) == ["h1"]


def test_compute_filter_uses_each_hosts_own_report_time() -> None:
    core = make_core(make_config(service_down_time=30.0))
    core.update_host(make_report("old", 1, memory_mb=8192), now=0.0)
    core.update_host(make_report("new", 1, memory_mb=1024), now=50.0)
    assert _placed(core, make_spec("vm1"), now=60.0) == ["new"]


# -- AvailabilityZoneFilter ----------------------------------------------------------


def test_availability_zone_filter() -> None:
    core = make_core()
    core.update_host(make_report("a1", 1, availability_zone="az1", memory_mb=1024), now=0.0)
    core.update_host(make_report("a2", 1, availability_zone="az2", memory_mb=8192), now=0.0)
    core.update_host(make_report("none", 1, memory_mb=16384), now=0.0)
    assert _placed(core, make_spec("x", availability_zone="az1")) == ["a1"]
    assert _placed(core, make_spec("y", availability_zone="az2")) == ["a2"]
    assert _placed(core, make_spec("z")) == ["none"]  # no zone asked: any host
    assert _refused(core, make_spec("w", availability_zone="az9")) == {"AvailabilityZoneFilter": 3}


def test_availability_zone_follows_the_latest_report() -> None:
    core = make_core()
    core.update_host(make_report("h1", 1, availability_zone="az1"), now=0.0)
    core.update_host(make_report("h1", 2, availability_zone="az2"), now=0.0)
    assert _refused(core, make_spec("x", availability_zone="az1")) == {"AvailabilityZoneFilter": 1}
    assert _placed(core, make_spec("y", availability_zone="az2")) == ["h1"]


# -- traits -----------------------------------------------------------------------


def test_required_traits() -> None:
    core = make_core()
    core.update_host(make_report("avx", 1, traits=["AVX", "SSD"], memory_mb=2048), now=0.0)
    core.update_host(make_report("plain", 1, traits=["SSD"], memory_mb=8192), now=0.0)
    assert _placed(core, make_spec("a", required_traits=["AVX"])) == ["avx"]
    assert _placed(core, make_spec("b", required_traits=["AVX", "SSD"])) == ["avx"]
    assert _placed(core, make_spec("c", required_traits=["SSD"])) == ["plain"]
    assert _refused(core, make_spec("d", required_traits=["AVX", "GPU"])) == {
        "RequiredTraitsFilter": 2
    }


def test_required_unknown_trait_matches_no_host() -> None:
    core = make_core()
    _hosts(core, "h1", "h2", traits=["SSD"])
    counts = _refused(core, make_spec("a", required_traits=["NEVER_REPORTED"]))
    assert counts == {"RequiredTraitsFilter": 2}


def test_forbidden_traits() -> None:
    core = make_core()
    core.update_host(make_report("gpu", 1, traits=["GPU"], memory_mb=8192), now=0.0)
    core.update_host(make_report("cpu", 1, traits=["SSD"], memory_mb=1024), now=0.0)
    assert _placed(core, make_spec("a", forbidden_traits=["GPU"])) == ["cpu"]
    assert _refused(core, make_spec("b", forbidden_traits=["GPU", "SSD"])) == {
        "ForbiddenTraitsFilter": 2
    }


def test_forbidden_unknown_trait_forbids_nothing() -> None:
    core = make_core()
    _hosts(core, "h1", traits=["SSD"])
    assert _placed(core, make_spec("a", forbidden_traits=["NEVER_REPORTED"])) == ["h1"]


@pytest.mark.parametrize("known", [3, 70, 130])  # one, two and three 64-bit words per host
def test_traits_past_64_bits(known: int) -> None:
    core = make_core(ram_only_config())  # most free RAM wins: none, then odd, then all
    names = [f"T{i:03d}" for i in range(known)]
    core.update_host(make_report("all", 1, traits=names, memory_mb=2048), now=0.0)
    core.update_host(make_report("odd", 1, traits=names[1::2], memory_mb=4096), now=0.0)
    core.update_host(make_report("none", 1, memory_mb=8192), now=0.0)
    last = names[-1]  # in the highest word; "odd" has it when its index is odd
    assert _placed(core, make_spec("a", required_traits=[last])) == (
        ["odd"] if (known - 1) % 2 else ["all"]
    )
    assert _placed(core, make_spec("b", required_traits=[names[0], last])) == ["all"]
    assert _placed(core, make_spec("c", forbidden_traits=[names[1]])) == ["none"]
    assert _placed(core, make_spec("d", forbidden_traits=[last, names[2]])) == ["none"]
    assert _refused(core, make_spec("e", required_traits=names, forbidden_traits=[last])) == {
        "RequiredTraitsFilter": 2,
        "ForbiddenTraitsFilter": 1,
    }


def test_traits_follow_the_latest_report() -> None:
    core = make_core()
    core.update_host(make_report("h1", 1, traits=["GPU"]), now=0.0)
    core.update_host(make_report("h1", 2, traits=[]), now=0.0)
    assert _refused(core, make_spec("a", required_traits=["GPU"])) == {"RequiredTraitsFilter": 1}
    assert _placed(core, make_spec("b", forbidden_traits=["GPU"])) == ["h1"]


def test_many_traits_beyond_one_word() -> None:
    core = make_core()
    many = [f"T{i}" for i in range(150)]
    core.update_host(make_report("all", 1, traits=many, memory_mb=1024), now=0.0)
    core.update_host(make_report("few", 1, traits=many[:70], memory_mb=8192), now=0.0)
    assert _placed(core, make_spec("a", required_traits=["T149", "T3"])) == ["all"]
    assert _placed(core, make_spec("b", forbidden_traits=["T140"])) == ["few"]


# -- SameHost / DifferentHost --------------------------------------------------------


def _three_hosts() -> SchedulerCore:
    core = make_core()
    for i, mem in enumerate((4096, 8192, 2048)):
        core.update_host(make_report(f"h{i}", 1, memory_mb=mem), now=0.0)
    return core


def test_same_host_hint_follows_a_claim() -> None:
    core = _three_hosts()
    assert _placed(core, make_spec("vm1", ignore_hosts=["h1"])) == ["h0"]
    assert _placed(core, make_spec("vm2", same_host=["vm1"])) == ["h0"]


def test_same_host_hint_follows_a_reported_instance() -> None:
    core = _three_hosts()
    core.update_host(make_report("h2", 2, memory_mb=2048, instances=["legacy"]), now=0.0)
    assert _placed(core, make_spec("vm1", same_host=["legacy"])) == ["h2"]


def test_same_host_hint_with_any_of_several() -> None:
    core = _three_hosts()
    _placed(core, make_spec("a", ignore_hosts=["h1"]))  # h0
    _placed(core, make_spec("b", ignore_hosts=["h0", "h1"]))  # h2
    assert _placed(core, make_spec("c", same_host=["a", "b"])) == ["h0"]  # the freer of the two


def test_same_host_hint_with_unknown_instances_passes_no_host() -> None:
    core = _three_hosts()
    assert _refused(core, make_spec("vm1", same_host=["ghost"])) == {"SameHostFilter": 3}


def test_different_host_hint() -> None:
    core = _three_hosts()
    assert _placed(core, make_spec("vm1")) == ["h1"]
    assert _placed(core, make_spec("vm2", different_host=["vm1"])) == ["h0"]
    assert _placed(core, make_spec("vm3", different_host=["vm1", "vm2"])) == ["h2"]
    assert _refused(core, make_spec("vm4", different_host=["vm1", "vm2", "vm3"])) == {
        "DifferentHostFilter": 3
    }
    assert _placed(core, make_spec("vm5", different_host=["ghost"])) == ["h1"]


def test_different_host_hint_follows_a_reported_instance() -> None:
    core = _three_hosts()
    core.update_host(make_report("h1", 2, memory_mb=8192, instances=["legacy"]), now=0.0)
    assert _placed(core, make_spec("vm1", different_host=["legacy"])) == ["h0"]


# -- server groups (hard) -----------------------------------------------------------


def test_affinity_across_earlier_claims() -> None:
    core = _three_hosts()
    assert _placed(core, make_spec("a", group=("g", "affinity"), ignore_hosts=["h1"])) == ["h0"]
    # h1 is freer, but the group lives on h0
    assert _placed(core, make_spec("b", group=("g", "affinity"))) == ["h0"]
    # another group is free to go elsewhere
    assert _placed(core, make_spec("c", group=("other", "affinity"))) == ["h1"]


def test_affinity_inside_one_request() -> None:
    core = _three_hosts()
    hosts = _placed(core, make_spec("a", "b", "c", group=("g", "affinity")))
    assert len(set(hosts)) == 1


def test_affinity_fails_when_the_group_host_is_full() -> None:
    core = _three_hosts()
    _placed(
        core, make_spec("a", memory_mb=2048, group=("g", "affinity"), ignore_hosts=["h0", "h1"])
    )
    counts = _refused(core, make_spec("b", memory_mb=512, group=("g", "affinity")))
    assert counts == {"RamFilter": 1, "ServerGroupAffinityFilter": 2}


def test_affinity_forgets_released_members() -> None:
    core = _three_hosts()
    _placed(core, make_spec("a", group=("g", "affinity"), ignore_hosts=["h1"]))
    core.release("a", now=2.0)
    assert _placed(core, make_spec("b", group=("g", "affinity")), now=3.0) == ["h1"]


def test_anti_affinity_across_earlier_claims_and_inside_one_request() -> None:
    core = _three_hosts()
    assert _placed(core, make_spec("a", group=("g", "anti-affinity"))) == ["h1"]
    hosts = _placed(core, make_spec("b", "c", group=("g", "anti-affinity")))
    assert sorted(hosts) == ["h0", "h2"]
    assert _refused(core, make_spec("d", group=("g", "anti-affinity"))) == {
        "ServerGroupAntiAffinityFilter": 3
    }
    # a released member frees its host for the group
    core.release("b", now=2.0)
    assert _placed(core, make_spec("d", group=("g", "anti-affinity")), now=3.0) == [
        next(h for h, u in zip(hosts, ("b", "c"), strict=True) if u == "b")
    ]


def test_anti_affinity_in_one_request_larger_than_the_cluster() -> None:
    core = _three_hosts()
    counts = _refused(core, make_spec("a", "b", "c", "d", group=("g", "anti-affinity")))
    assert counts == {"ServerGroupAntiAffinityFilter": 3}
    assert core.claims() == {}


def test_soft_policies_do_not_filter() -> None:
    core = make_core()
    _hosts(core, "h1")
    assert _placed(core, make_spec("a", "b", group=("g", "soft-anti-affinity"))) == ["h1", "h1"]


# -- NumInstances / IoOps ---------------------------------------------------------


def test_num_instances_filter_counts_reported_and_assumed() -> None:
    core = make_core(make_config(max_instances_per_host=3))
    core.update_host(make_report("h1", 1, instances=["x", "y"]), now=0.0)
    assert _placed(core, make_spec("a")) == ["h1"]  # 2 < 3
    assert _refused(core, make_spec("b")) == {"NumInstancesFilter": 1}  # 3 is not < 3
    core.release("a", now=2.0)
    assert _placed(core, make_spec("b"), now=3.0) == ["h1"]


def test_num_instances_filter_on_report_alone() -> None:
    core = make_core(make_config(max_instances_per_host=2))
    core.update_host(make_report("h1", 1, instances=["x", "y"]), now=0.0)
    assert _refused(core, make_spec("a")) == {"NumInstancesFilter": 1}


def test_io_ops_filter() -> None:
    core = make_core()  # max_io_ops_per_host = 8
    core.update_host(make_report("busy", 1, num_io_ops=8, memory_mb=8192), now=0.0)
    core.update_host(make_report("idle", 1, num_io_ops=7, memory_mb=1024), now=0.0)
    assert _placed(core, make_spec("a")) == ["idle"]
    # the new instance is building: it counts as an I/O op, so idle is now at 8 too
    assert core.host_states()["idle"].num_io_ops == 8
    assert _refused(core, make_spec("b")) == {"IoOpsFilter": 2}


# -- ignore_hosts -------------------------------------------------------------------


def test_ignore_hosts() -> None:
    core = _three_hosts()
    assert _placed(core, make_spec("a", ignore_hosts=["h1", "unknown"])) == ["h0"]
    assert _refused(core, make_spec("b", ignore_hosts=["h0", "h1", "h2"])) == {"IgnoreHosts": 3}


# -- enabled_filters -------------------------------------------------------------


def test_only_enabled_filters_apply() -> None:
    core = make_core(make_config(enabled_filters=["RamFilter"]))
    core.update_host(make_report("off", 1, enabled=False, availability_zone="az1"), now=0.0)
    assert _placed(core, make_spec("a", availability_zone="az2"), now=1000.0) == ["off"]
    assert _refused(core, make_spec("b", memory_mb=5000)) == {"RamFilter": 1}


# -- NoValidHost explanation ----------------------------------------------------------


def test_no_valid_host_says_which_filter_removed_how_many() -> None:
    core = make_core()
    core.update_host(make_report("down", 1, enabled=False, availability_zone="az1"), now=0.0)
    core.update_host(make_report("elsewhere", 1, availability_zone="az2"), now=0.0)
    core.update_host(make_report("small1", 1, availability_zone="az1", memory_mb=256), now=0.0)
    core.update_host(make_report("small2", 1, availability_zone="az1", memory_mb=300), now=0.0)
    core.update_host(
        make_report("nocpu", 1, availability_zone="az1", vcpus=1, vcpus_used=4), now=0.0
    )
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(make_spec("vm1", availability_zone="az1"), now=1.0)
    err = info.value
    # each host is charged to the first filter (in enabled order) that rejected it
    assert err.filter_counts == {
        "ComputeFilter": 1,
        "AvailabilityZoneFilter": 1,
        "RamFilter": 2,
        "CoreFilter": 1,
    }
    assert err.total_hosts == 5
    assert err.instance_uuid == "vm1"
    message = str(err)
    assert "0/5" in message
    assert "vm1" in message
    for name, count in err.filter_counts.items():
        assert re.search(rf"{name}\D*{count}\b", message), (name, message)
    assert "DiskFilter" not in message


def test_no_valid_host_with_no_hosts() -> None:
    core = make_core()
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(make_spec("vm1"), now=0.0)
    assert "0/0" in str(info.value)
    assert info.value.total_hosts == 0
    assert info.value.filter_counts == {}


def test_no_valid_host_counts_only_live_hosts() -> None:
    core = make_core()
    _hosts(core, "h1", "h2", "h3", memory_mb=256)
    core.remove_host("h2", now=0.5)
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(make_spec("vm1"), now=1.0)
    assert info.value.total_hosts == 2
    assert "0/2" in str(info.value)
    assert info.value.filter_counts == {"RamFilter": 2}
