"""Server group rules (max_server_per_host, the hosts of members placed elsewhere) and
shuffle_best_same_weighed_hosts.

The group cases mirror ``nova/tests/unit/scheduler/filters/test_affinity_filters.py``
(the max_server_per_host rule as of Nova 20.0.0, API 2.64) and
``nova/tests/unit/scheduler/weights/test_weights_affinity.py``; the shuffle
cases mirror ``test_filter_scheduler.py``'s ``test_get_sorted_hosts_shuffle_top_equal``
(Nova 18.0.0).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from conftest import make_config, make_report, make_spec, ram_only_config
from pydantic import ValidationError

from actorsched import InvalidRequest, NoValidHost, SchedulerConfig, ServerGroup
from actorsched.core import SchedulerCore
from actorsched.core.ledger import request_fingerprint

ROOMY = {"max_instances_per_host": 1000, "max_io_ops_per_host": 1000}


def _core(*hosts: str, config: SchedulerConfig | None = None) -> SchedulerCore:
    core = SchedulerCore(config or make_config(**ROOMY))
    for host in hosts:
        core.update_host(make_report(host, 1, memory_mb=65536, vcpus=64), now=0.0)
    return core


def _group(policy: str, **fields: object) -> ServerGroup:
    return ServerGroup(id="g", policy=policy, **fields)  # type: ignore[arg-type]


def _host(core: SchedulerCore, uuid: str, group: ServerGroup, **fields: Any) -> str:
    return core.select_destinations(make_spec(uuid, group=group, **fields), now=1.0)[0].host


# -- max_server_per_host -------------------------------------------------------


def test_group_anti_affinity_filter_with_rules_fail() -> None:
    # two members on host1 already (one actorsched placed, one listed in hosts)
    core = _core("host1")
    anti = _group("anti-affinity", max_server_per_host=2, hosts=["host1"])
    assert _host(core, "m1", anti) == "host1"  # 1 member there: fewer than 2
    with pytest.raises(NoValidHost) as caught:
        _host(core, "m2", anti)
    assert caught.value.filter_counts == {"ServerGroupAntiAffinityFilter": 1}
    # the default rule is one member per host
    with pytest.raises(NoValidHost):
        _host(_core("host1"), "m1", _group("anti-affinity", hosts=["host1"]))


def test_group_anti_affinity_filter_with_rules_pass() -> None:
    core = _core("host1")
    assert _host(core, "m1", _group("anti-affinity", max_server_per_host=1)) == "host1"
    rule = _group("anti-affinity", max_server_per_host=2)
    core = _core("host1")
    assert [_host(core, u, rule) for u in ("m1", "m2")] == ["host1", "host1"]


def test_max_server_per_host_spreads_a_multi_instance_request() -> None:
    core = _core("a", "b", config=ram_only_config(**ROOMY))
    spec = make_spec("m1", "m2", "m3", "m4", group=_group("anti-affinity", max_server_per_host=2))
    hosts = [s.host for s in core.select_destinations(spec, now=1.0)]
    assert sorted(hosts) == ["a", "a", "b", "b"]
    with pytest.raises(NoValidHost):
        core.select_destinations(
            make_spec("m5", group=_group("anti-affinity", max_server_per_host=2)), now=1.0
        )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"policy": "affinity", "max_server_per_host": 2}, "max_server_per_host is a rule of"),
        ({"policy": "soft-anti-affinity", "max_server_per_host": 2}, "anti-affinity policy only"),
        ({"policy": "anti-affinity", "max_server_per_host": 0}, "max_server_per_host"),
        ({"policy": "anti-affinity", "max_server_per_host": "2"}, "max_server_per_host"),
        ({"policy": "anti-affinity", "hosts": [""]}, "hosts"),
    ],
)
def test_bad_group_rules_are_refused_naming_the_field(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ServerGroup(id="g", **fields)  # type: ignore[arg-type]


# -- the hosts of members actorsched did not place ------------------------------


def test_group_affinity_filter_fails_and_passes_with_group_hosts() -> None:
    # Nova's test_group_affinity_filter_passes/_fails: a host passes iff it is in hosts
    core = _core("host1", "host2")
    assert _host(core, "m1", _group("affinity", hosts=["host2"])) == "host2"
    with pytest.raises(NoValidHost) as caught:
        _host(core, "m2", ServerGroup(id="g2", policy="affinity", hosts=["gone"]))
    # its members run only on a host actorsched does not know
    assert caught.value.filter_counts == {"ServerGroupAffinityFilter": 2}
    # the claim actorsched holds for m1 counts beside the listed hosts
    assert _host(core, "m3", _group("affinity", hosts=["gone"])) == "host2"


def test_group_anti_affinity_filter_fails_with_group_hosts() -> None:
    core = _core("host1", "host2")
    assert _host(core, "m1", _group("anti-affinity", hosts=["host1"])) == "host2"
    # together with the member actorsched holds a claim for on host2
    with pytest.raises(NoValidHost):
        _host(core, "m2", _group("anti-affinity", hosts=["host1"]))


def test_group_hosts_are_matched_exactly() -> None:
    # Nova compares host_state.host in instance_group.hosts
    core = _core("host1", "host2")
    assert _host(core, "m1", _group("affinity", hosts=["HOST2", "host1"])) == "host1"


def test_soft_weighers_count_group_hosts_with_held_claims() -> None:
    # test_weights_affinity's _test_with_members_on_host: more members, more weight
    config = ram_only_config(**ROOMY)
    core = _core("a", "b", "c", config=config)
    soft = _group("soft-affinity", hosts=["c", "c", "b"])  # two members on c, one on b
    assert _host(core, "m1", soft) == "c"
    anti = ServerGroup(id="h", policy="soft-anti-affinity", hosts=["a", "b"])
    assert _host(core, "m2", anti) == "c"
    # a held claim and a listed host add up: b then holds 3 (two claims and one
    # listed), c 2 (listed); free RAM is all but equal, so members decide
    core = _core("a", "b", "c", config=config)
    for uuid in ("x", "y"):
        core.select_destinations(make_spec(uuid, group=soft, force_hosts=["b"]), now=1.0)
    assert _host(core, "m3", soft) == "b"


def test_a_group_whose_claims_are_all_released_is_forgotten() -> None:
    """The ledger's rows of a group shrink with each release and the group goes once
    no claim of it is left (a row at 0 is not kept, nor a group of no rows)."""
    core = _core("a", "b")
    group = _group("anti-affinity")
    hosts = {uuid: _host(core, uuid, group) for uuid in ("g1", "g2")}
    assert sorted(core.ledger.group_members("g").values()) == [1, 1]
    core.release("g1", now=2.0)
    assert dict(core.ledger.group_members("g")) == {core.table.row_of[hosts["g2"]]: 1}
    core.release("g2", now=2.0)
    assert "g" not in core.ledger.group_rows
    # two members on one host: a release takes one of them off
    together = _group("affinity")
    host = _host(core, "t1", together)
    assert _host(core, "t2", together) == host
    row = core.table.row_of[host]
    assert dict(core.ledger.group_members("g")) == {row: 2}
    core.release("t1", now=2.0)
    assert dict(core.ledger.group_members("g")) == {row: 1}


def test_a_groups_members_count_once_where_they_are_as_nova_counts_them() -> None:
    """Nova's ServerGroupAntiAffinityFilter counts the group's members among a
    host's instances. vm1, placed here on h1 (a claim of the group), and Nova's
    spec of the next boot naming it a member and h1 a group host: it counts once
    on h1 (not once as a claim and once as a host), so max_server_per_host 2
    still takes h1; two members h2 lists count two there."""
    core = _core("h1", "h2", config=make_config(**ROOMY, ram_weight_multiplier=-1.0))
    core.update_host(make_report("h2", 2, memory_mb=65536, vcpus=64, instances=["n1", "n2"]), 1.0)
    first = ServerGroup(id="g", policy="anti-affinity", max_server_per_host=2)
    assert _host(core, "vm1", first, force_hosts=["h1"]) == "h1"
    nova = ServerGroup(
        id="g",
        policy="anti-affinity",
        max_server_per_host=2,
        hosts=["h1", "h2"],  # Nova's instance_group.hosts: each host once
        members=["vm1", "vm2", "n1", "n2"],
    )
    # h2 holds two members already: only h1 passes (it holds one: vm1)
    assert _host(core, "vm2", nova) == "h1"
    # a third member would make h1 two too: neither passes
    third = nova.model_copy(update={"members": ["vm1", "vm2", "vm3", "n1", "n2"]})
    with pytest.raises(NoValidHost, match="ServerGroupAntiAffinityFilter removed 2"):
        _host(core, "vm3", third)


def test_a_groups_members_weigh_where_they_are_for_the_soft_weighers() -> None:
    # Nova's soft weighers: len(members among the host's instances); one member
    # each on a and b by claim, two on c by its report: soft affinity takes c,
    # though the RAM weigher alone would take a or b (c has less RAM)
    core = _core("a", "b", config=ram_only_config(**ROOMY))
    core.update_host(make_report("c", 2, memory_mb=49152, vcpus=64, instances=["m3", "m4"]), 1.0)
    for uuid, host in (("m1", "a"), ("m2", "b")):
        core.select_destinations(make_spec(uuid, force_hosts=[host]), now=1.0)
    soft = ServerGroup(id="s", policy="soft-affinity", members=["m1", "m2", "m3", "m4"])
    assert _host(core, "m5", soft) == "c"


def test_a_group_of_members_located_nowhere_leaves_affinity_open() -> None:
    # Nova's affinity filter: no group host yet, any host passes
    core = _core("a", "b")
    fresh = ServerGroup(id="f", policy="affinity", members=["new1", "new2"])
    assert _host(core, "new1", fresh) in {"a", "b"}
    # then the second instance goes where the first went
    placed = core.ledger.claims["new1"].host
    assert _host(core, "new2", fresh) == placed


def test_group_rules_and_hosts_are_in_the_fingerprint() -> None:
    base = make_spec(group=_group("anti-affinity"))
    ruled = make_spec(group=_group("anti-affinity", max_server_per_host=2))
    listed = make_spec(group=_group("anti-affinity", hosts=["h1", "h1"]))
    once = make_spec(group=_group("anti-affinity", hosts=["h1"]))
    prints = {request_fingerprint(s) for s in (base, ruled, listed, once)}
    assert len(prints) == 4  # a host listed twice holds two members
    assert '"group_max_server_per_host":2' in request_fingerprint(ruled)
    core = _core("h1", "h2")
    core.select_destinations(ruled, now=1.0)
    with pytest.raises(InvalidRequest, match="group_max_server_per_host 2 then, none now"):
        core.select_destinations(base, now=1.0)


# -- shuffle_best_same_weighed_hosts -------------------------------------------


def test_get_sorted_hosts_shuffle_top_equal() -> None:
    # equal best hosts e1..e4 are shuffled; the less free tail stays in order
    def core(seed: int | None, shuffle: bool = True) -> SchedulerCore:
        config = ram_only_config(seed=seed, shuffle_best_same_weighed_hosts=shuffle, **ROOMY)
        c = SchedulerCore(config)
        for host in ("e1", "e2", "e3", "e4"):
            c.update_host(make_report(host, 1, memory_mb=8192), now=0.0)
        c.update_host(make_report("t1", 1, memory_mb=8192, memory_mb_used=2048), now=0.0)
        c.update_host(make_report("t2", 1, memory_mb=8192, memory_mb_used=4096), now=0.0)
        return c

    def first(c: SchedulerCore, uuid: str) -> str:
        [selection] = c.select_destinations(make_spec(uuid, memory_mb=1), now=1.0)
        c.release(uuid, now=1.0)
        return selection.host

    picks = {first(c, f"vm{i}") for c in [core(seed=1)] for i in range(40)}
    assert picks == {"e1", "e2", "e3", "e4"}  # host_subset_size 1, and still spread
    plain = core(seed=1, shuffle=False)
    assert {first(plain, f"vm{i}") for i in range(10)} == {"e1"}  # off: the lowest row
    # the same seed, the same choices
    a, b = core(seed=7), core(seed=7)
    assert [first(a, f"vm{i}") for i in range(20)] == [first(b, f"vm{i}") for i in range(20)]
    # the alternates: the other best ones (shuffled), then the tail in order
    wide = SchedulerCore(
        ram_only_config(seed=3, shuffle_best_same_weighed_hosts=True, max_attempts=6, **ROOMY)
    )
    for host in ("e1", "e2", "e3", "e4"):
        wide.update_host(make_report(host, 1, memory_mb=8192), now=0.0)
    wide.update_host(make_report("t1", 1, memory_mb=8192, memory_mb_used=2048), now=0.0)
    wide.update_host(make_report("t2", 1, memory_mb=8192, memory_mb_used=4096), now=0.0)
    [s] = wide.select_destinations(make_spec("x", memory_mb=1), now=1.0)
    ranked = [s.host, *s.alternates]
    assert set(ranked[:4]) == {"e1", "e2", "e3", "e4"}
    assert ranked[4:] == ["t1", "t2"]


def test_shuffle_with_subset_and_filters_stays_within_the_passing_hosts() -> None:
    config = make_config(shuffle_best_same_weighed_hosts=True, host_subset_size=2, seed=5, **ROOMY)
    core = SchedulerCore(config)
    for i in range(6):
        core.update_host(make_report(f"h{i}", 1, availability_zone="az" if i % 2 else None), 0.0)
    hosts = set()
    for i in range(30):
        spec = make_spec(f"vm{i}", availability_zone="az")
        hosts.add(core.select_destinations(spec, now=1.0)[0].host)
        core.release(f"vm{i}", now=1.0)
    assert hosts <= {"h1", "h3", "h5"}
    assert len(hosts) > 1
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("big", memory_mb=10**6), now=1.0)
    forced = core.select_destinations(make_spec("f", force_hosts=["h0"]), now=1.0)
    assert forced[0].host == "h0"


def test_shuffle_without_ties_ranks_as_the_plain_path() -> None:
    # the shuffle path scores every passing host itself: with no tie at the top
    # it must give the plain ranking (the alternates too)

    rng = random.Random(4)
    plain = SchedulerCore(make_config(max_attempts=5, **ROOMY))
    shuffled = SchedulerCore(
        make_config(max_attempts=5, shuffle_best_same_weighed_hosts=True, **ROOMY)
    )
    for i in range(40):
        figures = {
            "memory_mb": 65536,
            "memory_mb_used": rng.randrange(0, 60000),
            "vcpus": 64,
            "vcpus_used": rng.randrange(0, 60),
            "availability_zone": "az" if i % 3 else None,
        }
        for core in (plain, shuffled):
            core.update_host(make_report(f"h{i}", 1, **figures), now=0.0)
    asked: list[dict[str, Any]] = [
        {},
        {"availability_zone": "az"},
        {"ignore_hosts": ["h1", "h2"]},
        {"memory_mb": 30000},
    ]
    for i, fields in enumerate(asked):
        spec = make_spec(f"vm{i}", **fields)
        assert shuffled.select_destinations(spec, now=1.0) == plain.select_destinations(
            spec, now=1.0
        )


def test_group_hosts_are_bounded_like_the_hint_lists() -> None:
    ServerGroup(id="g", policy="affinity", hosts=["h"] * 10_000)
    with pytest.raises(ValidationError, match=r"hosts\n.*at most 10000 items"):
        ServerGroup(id="g", policy="affinity", hosts=["h"] * 10_001)
