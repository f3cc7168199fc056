"""Claim lifecycle, release, all-or-nothing, idempotency and remove_host."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import Destination, InvalidRequest, NoValidHost, RequestSpec, ServerGroup
from actorsched.core import SchedulerCore
from actorsched.core.ledger import fingerprint_differences, request_fingerprint

MB = 1024


def _one_host(**config: float) -> SchedulerCore:
    core = make_core(make_config(**config))
    core.update_host(make_report("h1", 1, memory_mb=4 * MB), now=0.0)
    return core


def _free(core: SchedulerCore, host: str = "h1") -> int:
    return core.host_states()[host].free_ram_mb


# -- assumed until listed ---------------------------------------------------------


def test_claim_is_assumed_until_a_report_lists_it() -> None:
    core = _one_host()
    [sel] = core.select_destinations(make_spec("vm1", memory_mb=MB), now=1.0)
    assert sel.host == "h1"
    assert core.claims() == {"vm1": ("h1", False)}
    assert _free(core) == 3 * MB
    assert core.host_states()["h1"].assumed_claims == 1


def test_fresher_report_not_listing_the_instance_keeps_the_claim() -> None:
    """The 2015 'off by one deduction': the node's figures predate the claim."""
    core = _one_host()
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=1.0)
    for generation in (2, 3, 4):
        assert core.update_host(make_report("h1", generation, memory_mb=4 * MB), now=2.0)
        assert core.claims() == {"vm1": ("h1", False)}
        assert _free(core) == 3 * MB


def test_once_listed_the_claim_is_counted_once() -> None:
    core = _one_host()
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=1.0)
    listed = make_report("h1", 2, memory_mb=4 * MB, memory_mb_used=MB, instances=["vm1"])
    assert core.update_host(listed, now=2.0)
    assert core.claims() == {"vm1": ("h1", True)}
    state = core.host_states()["h1"]
    assert state.free_ram_mb == 3 * MB  # the report's used figure, not 2 x 1 GB
    assert state.assumed_claims == 0
    assert state.num_instances == 1
    # and again on every later report listing it
    core.update_host(
        make_report("h1", 3, memory_mb=4 * MB, memory_mb_used=MB, instances=["vm1"]), now=3.0
    )
    assert _free(core) == 3 * MB
    # a confirmed claim still counts for capacity through the report: 3 GB left
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm2", memory_mb=3 * MB + 1), now=4.0)


def test_instance_listed_before_it_is_claimed_is_not_double_counted() -> None:
    core = _one_host()
    core.update_host(
        make_report("h1", 2, memory_mb=4 * MB, memory_mb_used=MB, instances=["vm1"]), now=1.0
    )
    [sel] = core.select_destinations(make_spec("vm1", memory_mb=MB), now=2.0)
    assert sel.host == "h1"
    assert core.claims() == {"vm1": ("h1", True)}
    assert _free(core) == 3 * MB


def test_confirmed_claim_dropped_when_a_report_stops_listing_it() -> None:
    core = _one_host()
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=1.0)
    core.update_host(
        make_report("h1", 2, memory_mb=4 * MB, memory_mb_used=MB, instances=["vm1"]), now=2.0
    )
    core.update_host(make_report("h1", 3, memory_mb=4 * MB), now=3.0)
    assert core.claims() == {}
    assert _free(core) == 4 * MB


# -- claim_timeout --------------------------------------------------------------------


def test_claim_timeout_drops_an_unreported_claim(caplog: pytest.LogCaptureFixture) -> None:
    core = _one_host(claim_timeout=100.0)
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=10.0)
    core.update_host(make_report("h1", 2, memory_mb=4 * MB), now=110.0)  # exactly 100 s
    assert core.claims() == {"vm1": ("h1", False)}
    assert _free(core) == 3 * MB

    with caplog.at_level(logging.WARNING, logger="actorsched"):
        core.update_host(make_report("h1", 3, memory_mb=4 * MB), now=110.5)
    assert core.claims() == {}
    assert _free(core) == 4 * MB
    assert core.host_states()["h1"].assumed_claims == 0
    assert any("vm1" in r.getMessage() for r in caplog.records), "the drop must be logged"


def test_claim_timeout_needs_a_report() -> None:
    # without any fresher report nothing is dropped: time alone is not evidence
    core = _one_host(claim_timeout=100.0)
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=0.0)
    core.host_states(now=10_000.0)
    assert core.claims() == {"vm1": ("h1", False)}


def test_claim_timeout_spares_listed_claims() -> None:
    core = _one_host(claim_timeout=100.0)
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=0.0)
    core.update_host(
        make_report("h1", 2, memory_mb=4 * MB, memory_mb_used=MB, instances=["vm1"]), now=500.0
    )
    assert core.claims() == {"vm1": ("h1", True)}


def test_claim_timeout_only_touches_the_reporting_host() -> None:
    core = make_core(make_config(claim_timeout=100.0))
    core.update_host(make_report("h1", 1), now=0.0)
    core.update_host(make_report("h2", 1, memory_mb=1024), now=0.0)
    core.select_destinations(make_spec("vm1"), now=0.0)  # h1: more free RAM
    core.select_destinations(make_spec("vm2", ignore_hosts=["h1"]), now=0.0)
    core.update_host(make_report("h2", 2, memory_mb=1024), now=200.0)
    assert core.claims() == {"vm1": ("h1", False)}


# -- release --------------------------------------------------------------------------


def test_release_of_an_assumed_claim_frees_at_once() -> None:
    core = _one_host()
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=1.0)
    assert core.release("vm1", now=2.0) is True
    assert core.claims() == {}
    assert _free(core) == 4 * MB
    assert core.host_states()["h1"].assumed_claims == 0
    assert core.release("vm1", now=3.0) is False


def test_release_unknown_instance_is_false_and_changes_nothing() -> None:
    core = _one_host()
    core.select_destinations(make_spec("vm1"), now=1.0)
    before = core.digest()
    assert core.release("nope", now=2.0) is False
    assert core.digest() == before


def test_release_of_a_listed_instance_is_credited_until_a_report_drops_it() -> None:
    core = _one_host()
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=1.0)
    still = {"memory_mb": 4 * MB, "memory_mb_used": MB, "instances": ["vm1"]}
    core.update_host(make_report("h1", 2, **still), now=2.0)
    assert _free(core) == 3 * MB

    assert core.release("vm1", now=3.0)
    assert core.claims() == {}
    assert _free(core) == 4 * MB  # credited back at once
    assert core.host_states()["h1"].num_instances == 0

    core.update_host(make_report("h1", 3, **still), now=4.0)  # still running there
    assert _free(core) == 4 * MB
    assert core.host_states()["h1"].num_instances == 0

    core.update_host(make_report("h1", 4, memory_mb=4 * MB), now=5.0)  # gone
    assert _free(core) == 4 * MB  # not 5 GB: the credit ends with the listing
    assert core.host_states()["h1"].num_instances == 0

    # a later report listing an instance of that uuid again is just usage
    core.update_host(make_report("h1", 5, **still), now=6.0)
    assert _free(core) == 3 * MB


def test_reclaiming_a_released_but_still_listed_uuid_does_not_overcommit() -> None:
    core = make_core()
    core.update_host(make_report("h1", 1, memory_mb=2 * MB), now=0.0)
    core.select_destinations(make_spec("vm1", memory_mb=MB), now=1.0)
    core.update_host(
        make_report("h1", 2, memory_mb=2 * MB, memory_mb_used=MB, instances=["vm1"]), now=2.0
    )
    assert core.release("vm1", now=3.0)
    assert _free(core) == 2 * MB
    # the same uuid asks again (a rebuild, or a retried request) and lands on h1
    [sel] = core.select_destinations(make_spec("vm1", memory_mb=MB), now=4.0)
    assert sel.host == "h1"
    # vm1 is held again: 1 GB of the 2 GB host is spoken for
    assert _free(core) == MB
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("vm2", memory_mb=2 * MB), now=5.0)


def test_regression_reclaiming_a_credited_uuid_with_a_smaller_flavor_cannot_overcommit() -> None:
    """Claiming again a released uuid the host still lists took away its larger
    credit (60 GB) though the filters checked only the new 10 GB: free disk -10 of 100."""
    core = make_core()
    core.update_host(make_report("h1", 1, local_gb=100), now=0.0)
    core.select_destinations(make_spec("vm-a", disk_gb=60), now=1.0)
    core.update_host(make_report("h1", 2, local_gb=100, local_gb_used=60, instances=["vm-a"]), 2.0)
    assert core.release("vm-a", now=3.0)
    core.select_destinations(make_spec("vm-b", disk_gb=50), now=4.0)
    assert core.host_states()["h1"].free_disk_gb == 50
    [sel] = core.select_destinations(make_spec("vm-a", disk_gb=10), now=5.0)
    assert sel.host == "h1"
    # the new claim is assumed beside the old instance's credit: 100 - 60 + 60 - 50 - 10
    assert core.host_states()["h1"].free_disk_gb == 40
    assert core.claims() == {"vm-b": ("h1", False), "vm-a": ("h1", False)}
    # the host still lists the released vm-a: not the new claim's listing
    core.update_host(make_report("h1", 3, local_gb=100, local_gb_used=60, instances=["vm-a"]), 6.0)
    assert core.host_states()["h1"].free_disk_gb == 40
    assert core.claims()["vm-a"] == ("h1", False)
    # the old vm-a is gone (its credit ends), then the new one shows up with vm-b
    core.update_host(make_report("h1", 4, local_gb=100), now=7.0)
    assert core.host_states()["h1"].free_disk_gb == 40
    core.update_host(
        make_report("h1", 5, local_gb=100, local_gb_used=60, instances=["vm-a", "vm-b"]), 8.0
    )
    assert core.claims() == {"vm-b": ("h1", True), "vm-a": ("h1", True)}
    assert core.host_states()["h1"].free_disk_gb == 40


def test_regression_failed_request_with_a_credited_uuid_restores_the_credit() -> None:
    """A failed request for [vm-a, vm-b] (hard anti-affinity, one host) left free RAM at
    3,072 of 4,096 and num_instances at 1 with no claim held: the rollback of vm-a's
    claim did not give back the release credit that claim had taken."""
    core = _one_host()
    core.select_destinations(make_spec("vm-a", memory_mb=MB), now=1.0)
    core.update_host(
        make_report("h1", 2, memory_mb=4 * MB, memory_mb_used=MB, instances=["vm-a"]), now=2.0
    )
    assert core.release("vm-a", now=3.0)
    state = core.host_states()["h1"]
    assert (state.free_ram_mb, state.num_instances) == (4 * MB, 0)
    before = core.digest()
    spec = make_spec("vm-a", "vm-b", memory_mb=MB, group=("g", "anti-affinity"))
    with pytest.raises(NoValidHost, match="ServerGroupAntiAffinityFilter removed 1"):
        core.select_destinations(spec, now=4.0)
    state = core.host_states()["h1"]
    assert (state.free_ram_mb, state.num_instances, state.assumed_claims) == (4 * MB, 0, 0)
    assert core.claims() == {}
    assert core.digest() == before


# -- all or nothing -------------------------------------------------------------------


def test_multi_instance_request_is_all_or_nothing() -> None:
    core = make_core()
    for host in ("h1", "h2"):
        core.update_host(make_report(host, 1, memory_mb=2 * MB), now=0.0)
    core.select_destinations(make_spec("other", memory_mb=MB), now=0.5)
    before_states = core.host_states()
    before_claims = core.claims()
    # three 1 GB instances, but only 3 GB are left in all and anti-affinity asks for 3 hosts
    spec = make_spec("a", "b", "c", memory_mb=MB, group=("g", "anti-affinity"))
    with pytest.raises(NoValidHost) as info:
        core.select_destinations(spec, now=1.0)
    assert info.value.instance_uuid == "c"
    assert "no claim of this request was kept" in str(info.value)
    assert core.claims() == before_claims
    assert core.host_states() == before_states
    # nothing of the failed request lingers: the same uuids can be placed later
    core.update_host(make_report("h3", 1, memory_mb=2 * MB), now=2.0)
    placed = core.select_destinations(spec, now=2.0)
    assert sorted(s.host for s in placed) == ["h1", "h2", "h3"]


def test_multi_instance_all_or_nothing_on_capacity() -> None:
    core = make_core()
    core.update_host(make_report("h1", 1, memory_mb=2 * MB), now=0.0)
    before = core.digest()
    with pytest.raises(NoValidHost):
        core.select_destinations(make_spec("a", "b", "c", memory_mb=MB), now=1.0)
    assert core.digest() == before
    assert core.claims() == {}


def test_selections_in_spec_order() -> None:
    core = make_core()
    for host in ("h1", "h2", "h3"):
        core.update_host(make_report(host, 1), now=0.0)
    uuids = ["z", "a", "m", "b"]
    selections = core.select_destinations(make_spec(*uuids), now=1.0)
    assert [s.instance_uuid for s in selections] == uuids


# -- idempotency ----------------------------------------------------------------------


def test_same_request_twice_gives_the_same_selections_and_claims_nothing_more() -> None:
    core = make_core(make_config(host_subset_size=3, seed=7))
    for i in range(5):
        core.update_host(make_report(f"h{i}", 1, memory_mb=(4 + i) * MB), now=0.0)
    spec = make_spec("a", "b", "c", memory_mb=MB)
    first = core.select_destinations(spec, now=1.0)
    digest = core.digest()
    claims = core.claims()
    states = core.host_states()
    for now in (2.0, 3.0):
        again = core.select_destinations(spec, now=now)
        assert again == first
        assert core.digest() == digest
        assert core.claims() == claims
        assert core.host_states() == states


def test_same_uuids_in_another_order_return_in_that_order() -> None:
    core = make_core()
    core.update_host(make_report("h1", 1), now=0.0)
    first = core.select_destinations(make_spec("a", "b"), now=1.0)
    again = core.select_destinations(make_spec("b", "a"), now=2.0)
    assert again == [first[1], first[0]]


def test_resend_after_confirmation_is_still_idempotent() -> None:
    core = _one_host()
    spec = make_spec("vm1", memory_mb=MB)
    first = core.select_destinations(spec, now=1.0)
    core.update_host(
        make_report("h1", 2, memory_mb=4 * MB, memory_mb_used=MB, instances=["vm1"]), now=2.0
    )
    before = core.digest()
    assert core.select_destinations(spec, now=3.0) == first
    assert core.digest() == before


def test_mixed_claimed_and_unclaimed_uuids_is_invalid() -> None:
    core = _one_host()
    core.select_destinations(make_spec("a"), now=1.0)
    before = core.digest()
    with pytest.raises(InvalidRequest) as info:
        core.select_destinations(make_spec("a", "b"), now=2.0)
    assert "'a'" in str(info.value)
    assert "'b'" in str(info.value)
    assert core.digest() == before
    assert "b" not in core.claims()


def test_released_uuid_can_be_placed_again() -> None:
    core = _one_host()
    core.select_destinations(make_spec("a"), now=1.0)
    core.release("a", now=2.0)
    assert core.select_destinations(make_spec("a"), now=3.0)[0].host == "h1"
    assert core.claims() == {"a": ("h1", False)}


def test_regression_a_repeat_with_another_flavor_is_invalid_not_accepted() -> None:
    """The same uuid asked again with a 1 PiB flavor was "accepted" on its old host."""
    core = _one_host()
    [first] = core.select_destinations(make_spec("vm1", memory_mb=512), now=1.0)
    before = core.digest()
    with pytest.raises(InvalidRequest) as info:
        core.select_destinations(make_spec("vm1", memory_mb=2**30), now=2.0)  # 1 PiB
    message = str(info.value)
    assert "instance vm1 already holds a claim on h1 made by another request" in message
    assert "memory_mb 512 then, 1073741824 now" in message
    assert "release vm1 first" in message
    assert core.digest() == before
    assert core.select_destinations(make_spec("vm1", memory_mb=512), now=3.0) == [first]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"vcpus": 2}, "vcpus 1 then, 2 now"),
        ({"disk_gb": 5}, "disk_gb 1 then, 5 now"),
        ({"availability_zone": "az1"}, 'availability_zone none then, "az1" now'),
        ({"required_traits": ["SSD"]}, 'required_traits none then, ["SSD"] now'),
        ({"forbidden_traits": ["GPU"]}, 'forbidden_traits none then, ["GPU"] now'),
        ({"group": ("g", "anti-affinity")}, 'group none then, ["g", "anti-affinity"] now'),
        ({"same_host": ["other"]}, 'same_host none then, ["other"] now'),
        ({"different_host": ["other"]}, 'different_host none then, ["other"] now'),
        ({"ignore_hosts": ["h9"]}, 'ignore_hosts none then, ["h9"] now'),
    ],
)
def test_every_field_of_the_fingerprint_tells_another_request(
    change: dict[str, object], named: str
) -> None:
    core = make_core()
    core.update_host(make_report("h1", availability_zone="az1", traits=["SSD"]), now=0.0)
    core.select_destinations(make_spec("vm1", "vm2"), now=1.0)
    with pytest.raises(InvalidRequest, match=r"\(and 1 more of its uuids\)") as info:
        core.select_destinations(make_spec("vm1", "vm2", **change), now=2.0)  # type: ignore[arg-type]
    assert named in str(info.value)


def test_a_repeat_is_the_same_request_whatever_the_order_and_case_of_its_lists() -> None:
    core = make_core()
    core.update_host(make_report("h1", traits=["SSD", "AVX"]), now=0.0)
    core.update_host(make_report("h2"), now=0.0)
    first = core.select_destinations(
        make_spec("a", "b", required_traits=["SSD", "AVX"], ignore_hosts=["H2"]), now=1.0
    )
    again = make_spec("b", "a", required_traits=["AVX", "SSD", "AVX"], ignore_hosts=["h2"])
    assert core.select_destinations(again, now=2.0) == [first[1], first[0]]
    # a subset of the request's uuids is the same request too
    assert core.select_destinations(
        make_spec("a", required_traits=["SSD", "AVX"], ignore_hosts=["h2"]), now=3.0
    ) == [first[0]]


def _reference_fingerprint(spec: RequestSpec) -> str:
    """request_fingerprint written plainly with json.dumps (no long lists here)."""
    fields: dict[str, object] = {
        "memory_mb": spec.memory_mb,
        "vcpus": spec.vcpus,
        "disk_gb": spec.disk_gb,
    }
    if spec.availability_zone is not None:
        fields["availability_zone"] = spec.availability_zone
    if spec.group is not None:
        fields["group"] = [spec.group.id, spec.group.policy]
    lists = {
        "required_traits": spec.required_traits,
        "forbidden_traits": spec.forbidden_traits,
        "same_host": spec.same_host,
        "different_host": spec.different_host,
        "ignore_hosts": [h.lower() for h in spec.ignore_hosts],
    }
    fields.update({name: sorted(set(v)) for name, v in lists.items() if v})
    if spec.force_hosts:
        fields["force_hosts"] = sorted({h.lower() for h in spec.force_hosts})
    if spec.force_nodes:
        fields["force_nodes"] = sorted(set(spec.force_nodes))
    if spec.group is not None and spec.group.hosts:
        fields["group_hosts"] = sorted(spec.group.hosts)  # a multiset: each member
    if spec.group is not None and spec.group.max_server_per_host is not None:
        fields["group_max_server_per_host"] = spec.group.max_server_per_host
    if spec.group is not None and spec.group.members:
        fields["group_members"] = sorted(set(spec.group.members))  # a set
    for name in ("flavor_name", "project_id", "image_id", "query"):
        if getattr(spec, name) is not None:
            fields[name] = getattr(spec, name)
    for name in ("extra_specs", "image_properties"):
        if getattr(spec, name):
            fields[name] = dict(getattr(spec, name))
    destination = spec.requested_destination
    if destination is not None:
        fields["requested_destination"] = {
            key: value
            for key, value in (("host", destination.host), ("node", destination.node))
            if value is not None
        }
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"availability_zone": 'az "1" \\ ü'},
        {"group": ("g\u00e9", "soft-affinity"), "required_traits": ["B", "A", "B"]},
        {
            "forbidden_traits": ["X"],
            "same_host": ["s2", "s1"],
            "different_host": ["d"],
            "ignore_hosts": ["Node-1", "node-1"],
            "availability_zone": "nova",
            "group": ("g", "anti-affinity"),
            "required_traits": ["R"],
        },
        # every other field a fingerprint holds (a journal keeps the text: it may
        # not change between releases, or a redelivery after an upgrade is refused)
        {
            "flavor_name": "m1.small",
            "project_id": "p1",
            "image_id": "img-1",
            "query": '[">=", "$free_ram_mb", 1024]',
            "extra_specs": {"b": "2", "a": "1"},
            "image_properties": {"os_distro": "linux", "hw_cpu_cores": "2"},
            "force_hosts": ["H1", "h1", "h2"],
            "force_nodes": ["n2", "n1"],
        },
        {
            "group": ServerGroup(
                id="g",
                policy="anti-affinity",
                hosts=["b", "a", "b"],
                max_server_per_host=2,
                members=["m2", "m1", "m2"],
            ),
            "requested_destination": Destination(host="h1", node="n1"),
        },
        {"requested_destination": Destination(host="h1")},
    ],
)
def test_a_fingerprint_is_the_canonical_json_of_the_request(fields: dict[str, object]) -> None:
    spec = make_spec("vm1", memory_mb=2048, vcpus=2, disk_gb=20, **fields)
    assert request_fingerprint(spec) == _reference_fingerprint(spec)


def test_a_fingerprint_is_short_and_canonical() -> None:
    plain = make_spec("vm1", memory_mb=2048, vcpus=2, disk_gb=20)
    assert request_fingerprint(plain) == '{"disk_gb":20,"memory_mb":2048,"vcpus":2}'
    many = [f"instance-{i:05d}" for i in range(10_000)]
    long_hint = request_fingerprint(make_spec("vm1", different_host=many))
    assert len(long_hint) < 200
    assert long_hint == request_fingerprint(make_spec("vm1", different_host=many[::-1]))
    assert long_hint != request_fingerprint(make_spec("vm1", different_host=many[1:]))
    assert fingerprint_differences(
        long_hint, request_fingerprint(make_spec("vm1", different_host=many[1:]))
    ) == ["different_host a long list then, a long list now"]


def test_claims_of_equal_requests_share_one_fingerprint_string() -> None:
    core = make_core()
    core.update_host(make_report("h1", memory_mb=64 * MB), now=0.0)
    core.select_destinations(make_spec("a"), now=1.0)
    core.select_destinations(make_spec("b"), now=1.0)
    assert core.ledger.claims["a"].fingerprint is core.ledger.claims["b"].fingerprint
    core.select_destinations(make_spec("c", required_traits=[]), now=1.0)
    assert core.ledger.claims["c"].fingerprint is core.ledger.claims["a"].fingerprint
    core.select_destinations(make_spec("d", ignore_hosts=["x"]), now=1.0)
    core.select_destinations(make_spec("e", ignore_hosts=["X"]), now=1.0)
    assert core.ledger.claims["d"].fingerprint is core.ledger.claims["e"].fingerprint
    assert core.ledger.claims["d"].fingerprint != core.ledger.claims["a"].fingerprint


# -- remove_host ----------------------------------------------------------------------


def test_remove_host_forgets_it_and_its_claims() -> None:
    core = make_core()
    core.update_host(make_report("h1", 7), now=0.0)
    core.update_host(make_report("h2", 1, memory_mb=1024), now=0.0)
    core.select_destinations(make_spec("vm1"), now=1.0)
    assert core.claims() == {"vm1": ("h1", False)}

    assert core.remove_host("h1", now=2.0) is True
    assert set(core.host_states()) == {"h2"}
    assert core.claims() == {}
    assert core.remove_host("h1", now=2.0) is False
    assert core.remove_host("never", now=2.0) is False

    # the uuid is free to be placed again, never on the removed host
    assert core.select_destinations(make_spec("vm1"), now=3.0)[0].host == "h2"
    # a removed host comes back with any generation, with clean figures
    assert core.update_host(make_report("h1", 1, memory_mb_used=100), now=4.0)
    state = core.host_states()["h1"]
    assert (state.generation, state.free_ram_mb, state.assumed_claims) == (1, 3996, 0)


def test_remove_host_keeps_other_hosts_intact() -> None:
    core = make_core()
    for i in range(4):
        core.update_host(make_report(f"h{i}", 1, memory_mb=(i + 1) * MB), now=0.0)
    for i in range(4):
        core.select_destinations(
            make_spec(f"vm{i}", memory_mb=256, ignore_hosts=[f"h{j}" for j in range(4) if j != i]),
            now=1.0,
        )
    states = core.host_states()
    core.remove_host("h1", now=2.0)
    core.update_host(make_report("h9", 1), now=3.0)  # may reuse the freed row
    after = core.host_states()
    for host in ("h0", "h2", "h3"):
        assert after[host] == states[host]
    assert after["h9"].assumed_claims == 0
    assert after["h9"].free_ram_mb == 4096
    assert core.claims() == {"vm0": ("h0", False), "vm2": ("h2", False), "vm3": ("h3", False)}


def test_what_nova_says_a_host_runs_locates_instances_after_claims_and_reports() -> None:
    """NovaInstances (the Nova endpoint's instance casts): add, remove and sync change
    where an instance is when no claim holds it and no report lists it; never a
    host's figures; forgotten with the host."""
    core = make_core()
    core.update_host(make_report("h1", instances=["listed"]), now=0.0)
    core.update_host(make_report("h2"), now=0.0)
    core.select_destinations(make_spec("claimed", force_hosts=["h1"]), now=1.0)
    before = core.host_states()
    assert core.nova_instances("h2", ["claimed", "listed", "cast"], "add")
    assert core.locate("claimed") == core.table.row_of["h1"]  # its claim first
    assert core.locate("listed") == core.table.row_of["h1"]  # then its report
    assert core.locate("cast") == core.table.row_of["h2"]  # then Nova's word
    assert core.host_states()["h2"].free_ram_mb == before["h2"].free_ram_mb
    assert core.nova_instances("h2", ["cast"], "remove")
    assert core.locate("cast") is None
    assert core.nova_instances("h2", ["a", "b"], "sync")
    assert core.nova_instances("h2", ["b", "c"], "sync")  # a sync is the whole list
    assert [core.locate(u) for u in ("a", "b", "c")] == [None, *[core.table.row_of["h2"]] * 2]
    assert not core.nova_instances("nowhere", ["x"], "add")
    assert core.remove_host("h2", now=2.0)
    assert core.locate("b") is None
    assert core.ledger.nova_row == {}
    assert core.ledger.nova_listed == {}
