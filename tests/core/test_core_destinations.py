"""force_hosts, force_nodes and requested_destination, as Nova 18.0.0's host manager.

Each test names the case of ``nova/tests/unit/scheduler/test_host_manager.py``
(``HostManagerTestCase``) it mirrors. Nova's fixture is four hosts
``fake_host1..4`` on node ``fake-node`` and one host ``fake_multihost`` with
the nodes ``fake-node1..4``. A row of actorsched is one host with one node,
so the multi-node host is four rows whose host names differ only in case
(force_hosts and ignore_hosts match them all, as Nova matches every node of
the host).
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import make_config, make_report, make_spec
from pydantic import ValidationError

from actorsched import Destination, InvalidRequest, NoValidHost, RequestSpec, ServerGroup
from actorsched.core import SchedulerCore
from actorsched.core.filters import PlacementContext
from actorsched.core.ledger import (
    NON_RESOURCE_FIELDS,
    NOT_ASKED_FIELDS,
    asks_resources_only,
    request_fingerprint,
)

MULTIHOST = ("fake_multihost", "Fake_multihost", "FAKE_multihost", "fake_MULTIHOST")


def _nova_hosts(**fields: object) -> SchedulerCore:
    core = SchedulerCore(make_config(**fields))
    generation = 1
    for x in range(1, 5):
        core.update_host(make_report(f"fake_host{x}", generation, node="fake-node"), now=0.0)
    for x, host in enumerate(MULTIHOST, start=1):
        core.update_host(make_report(host, generation, node=f"fake-node{x}"), now=0.0)
    return core


def _passing(core: SchedulerCore, spec: RequestSpec) -> set[str]:
    """The hosts the ranking lets ``spec``'s first instance go to."""
    ctx = PlacementContext(spec, core.config, 1.0, core.ledger, core.locate)
    rows = core.ranker.top(ctx, 100, asks_resources_only(spec))
    return {str(core.table.name_of[row]) for row in rows}


def _fake(*indexes: int) -> set[str]:
    hosts = [*(f"fake_host{x}" for x in range(1, 5)), *MULTIHOST]
    return {hosts[i] for i in indexes}


def test_get_filtered_hosts_with_force_hosts_skips_the_filters() -> None:
    core = _nova_hosts()
    core.update_host(make_report("fake_host1", 2, node="fake-node", enabled=False), now=0.0)
    spec = make_spec(force_hosts=["fake_host1", "fake_host3", "fake_host5"])
    assert _passing(core, spec) == _fake(0, 2)  # fake_host1 too: ComputeFilter does not run
    [selection] = core.select_destinations(spec, now=1.0)
    assert selection.host in _fake(0, 2)
    assert set(selection.alternates) == _fake(0, 2) - {selection.host}


def test_get_filtered_hosts_with_force_case_insensitive() -> None:
    spec = make_spec(force_hosts=["FAKE_HOST1", "FaKe_HoSt3", "fake_host4", "faKe_host5"])
    assert _passing(_nova_hosts(), spec) == _fake(0, 2, 3)


def test_get_filtered_hosts_with_no_matching_force_hosts() -> None:
    core = _nova_hosts()
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(make_spec(force_hosts=["fake_host5", "fake_host6"]), now=1.0)
    message = str(caught.value)
    assert "0/8 hosts are available for instance vm1: ForceHosts removed 8" in message
    assert "force_hosts ['fake_host5', 'fake_host6'] name no known host" in message
    assert caught.value.filter_counts == {"ForceHosts": 8}
    assert core.claims() == {}


def test_get_filtered_hosts_with_ignore_and_force_hosts() -> None:
    spec = make_spec(ignore_hosts=["fake_host1"], force_hosts=["fake_host3", "fake_host1"])
    assert _passing(_nova_hosts(), spec) == _fake(2)


def test_get_filtered_hosts_with_force_host_and_many_nodes() -> None:
    assert _passing(_nova_hosts(), make_spec(force_hosts=["fake_multihost"])) == _fake(4, 5, 6, 7)


def test_get_filtered_hosts_with_force_nodes() -> None:
    spec = make_spec(force_nodes=["fake-node2", "fake-node4", "fake-node9"])
    assert _passing(_nova_hosts(), spec) == _fake(5, 7)


def test_force_nodes_match_node_names_exactly_as_nova() -> None:
    # Nova's _match_forced_nodes compares node names as given (no lower())
    core = _nova_hosts()
    with pytest.raises(NoValidHost, match=r"force_nodes \['FAKE-NODE2'\] name no known node"):
        core.select_destinations(make_spec(force_nodes=["FAKE-NODE2"]), now=1.0)


def test_get_filtered_hosts_with_force_hosts_and_nodes() -> None:
    spec = make_spec(force_hosts=["fake-host1", "fake_multihost"], force_nodes=["fake-node2"])
    assert _passing(_nova_hosts(), spec) == _fake(5)


def test_get_filtered_hosts_with_force_hosts_and_wrong_nodes() -> None:
    core = _nova_hosts()
    spec = make_spec(force_hosts=["fake_multihost"], force_nodes=["fake-node"])
    assert _passing(core, spec) == set()
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(spec, now=1.0)
    # host and node must both match: the forced host's rows are on other nodes
    assert caught.value.filter_counts == {"ForceHosts": 4, "ForceNodes": 4}


def test_get_filtered_hosts_with_ignore_hosts_and_force_nodes() -> None:
    spec = make_spec(
        ignore_hosts=["fake_host1", "fake_host2"], force_nodes=["fake-node4", "fake-node2"]
    )
    assert _passing(_nova_hosts(), spec) == _fake(5, 7)


def test_get_filtered_hosts_with_ignore_hosts_and_force_same_nodes() -> None:
    core = _nova_hosts()
    spec = make_spec(ignore_hosts=["fake_multihost"], force_nodes=["fake-node4", "fake-node2"])
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(spec, now=1.0)
    assert caught.value.filter_counts == {"IgnoreHosts": 4, "ForceNodes": 4}


def test_a_forced_host_must_still_have_room() -> None:
    # Our decision (Nova's Placement claim refuses it too): forcing skips the
    # filters, never the room the resources need.
    core = _nova_hosts(enabled_filters=["ComputeFilter"])  # no RamFilter enabled
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(make_spec(force_hosts=["fake_host2"], memory_mb=8192), now=1.0)
    assert caught.value.filter_counts == {"ForceHosts": 7, "RamFilter": 1}
    assert "forced hosts skip the filters but must have room" in str(caught.value)
    # with room, every instance of a request may go to the one forced host
    picked = core.select_destinations(
        make_spec("a", "b", "c", force_hosts=["fake_host2"], memory_mb=1024), now=1.0
    )
    assert {s.host for s in picked} == {"fake_host2"}
    with pytest.raises(NoValidHost, match="RamFilter removed 1"):
        core.select_destinations(make_spec("d", force_hosts=["fake_host2"], memory_mb=2048), 1.0)


def test_forcing_ignores_group_filters_as_nova() -> None:
    core = _nova_hosts()
    group = ("g", "anti-affinity")
    core.select_destinations(make_spec("a", group=group, force_hosts=["fake_host1"]), now=1.0)
    [again] = core.select_destinations(
        make_spec("b", group=group, force_hosts=["fake_host1"]), now=1.0
    )
    assert again.host == "fake_host1"  # not forced, anti-affinity would refuse it
    assert "fake_host1" not in _passing(core, make_spec("c", group=group))


def test_get_filtered_hosts_with_requested_destination() -> None:
    core = _nova_hosts()
    spec = make_spec(requested_destination=Destination(host="fake_host1", node="fake-node"))
    assert _passing(core, spec) == _fake(0)
    [selection] = core.select_destinations(spec, now=1.0)
    assert selection.host == "fake_host1"
    assert selection.alternates == []


def test_get_filtered_hosts_with_wrong_requested_destination() -> None:
    core = _nova_hosts()
    spec = make_spec(requested_destination=Destination(host="dummy", node="fake-node"))
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(spec, now=1.0)
    assert caught.value.filter_counts == {"RequestedDestination": 8}
    assert "requested_destination host 'dummy' is not known" in str(caught.value)


def test_requested_destination_by_host_or_node_alone() -> None:
    core = _nova_hosts()
    assert _passing(core, make_spec(requested_destination=Destination(node="fake-node"))) == (
        _fake(0, 1, 2, 3)
    )
    by_host = make_spec(requested_destination=Destination(host="fake_multihost"))
    assert _passing(core, by_host) == _fake(4)  # exact: Nova compares host == host


def test_requested_destination_still_runs_the_filters() -> None:
    core = _nova_hosts()
    core.update_host(make_report("fake_host1", 2, node="fake-node", enabled=False), now=0.0)
    spec = make_spec(requested_destination=Destination(host="fake_host1"))
    with pytest.raises(NoValidHost) as caught:
        core.select_destinations(spec, now=1.0)
    assert caught.value.filter_counts == {"RequestedDestination": 7, "ComputeFilter": 1}


def test_a_destination_must_name_a_host_or_a_node() -> None:
    with pytest.raises(ValidationError, match="requested_destination names neither"):
        make_spec(requested_destination={})


@pytest.mark.parametrize(
    ("field", "value"),
    [("force_hosts", ["ok", ""]), ("force_nodes", ["a\nb"]), ("force_hosts", "h1")],
)
def test_bad_forced_names_are_refused_naming_the_field(field: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=field):
        make_spec(**{field: value})


def test_node_defaults_to_the_host_and_is_shown_in_host_state() -> None:
    core = SchedulerCore()
    core.update_host(make_report("h1", 1), now=0.0)
    core.update_host(make_report("h2", 1, node="h2.example"), now=0.0)
    states = core.host_states()
    assert (states["h1"].node, states["h2"].node) == ("h1", "h2.example")
    core.update_host(make_report("h2", 2), now=0.0)  # a report without one: the host's name
    assert core.host_states()["h2"].node == "h2"
    assert core.table.rows_of_node("h2.example") == []
    core.update_host(make_report("h1", 2, node="n"), now=0.0)
    core.remove_host("h1", now=0.0)
    assert core.table.node_of == {}


@pytest.mark.parametrize(
    "fields",
    [
        {"force_hosts": ["fake_host1"]},
        {"force_nodes": ["fake-node"]},
        {"requested_destination": Destination(host="fake_host1")},
    ],
)
def test_each_new_field_is_in_the_fingerprint(fields: dict[str, Any]) -> None:
    spec = make_spec(**fields)
    assert not asks_resources_only(spec)
    assert request_fingerprint(spec) != request_fingerprint(make_spec())
    core = _nova_hosts()
    core.select_destinations(spec, now=1.0)
    assert core.select_destinations(spec, now=2.0)  # the same request: the same answer
    with pytest.raises(InvalidRequest, match="made by another request"):
        core.select_destinations(make_spec(), now=2.0)


def test_forced_hosts_fingerprint_ignores_case_and_order() -> None:
    a = make_spec(force_hosts=["B", "a"], force_nodes=["n2", "n1"])
    b = make_spec(force_hosts=["a", "b"], force_nodes=["n1", "n2"])
    assert request_fingerprint(a) == request_fingerprint(b)
    assert request_fingerprint(make_spec(force_nodes=["N1"])) != request_fingerprint(
        make_spec(force_nodes=["n1"])
    )
    c = make_spec(requested_destination=Destination(host="h", node="n"))
    assert '"requested_destination":{"host":"h","node":"n"}' in request_fingerprint(c)


@pytest.mark.parametrize("field", ["force_hosts", "force_nodes"])
def test_forced_lists_are_bounded_like_ignore_hosts(field: str) -> None:
    fits: dict[str, Any] = {field: [f"h{i}" for i in range(10_000)]}
    make_spec(**fits)
    too_many: dict[str, Any] = {field: [*fits[field], "one-more"]}
    with pytest.raises(ValidationError, match=rf"{field}\n.*at most 10000 items"):
        make_spec(**too_many)


def test_every_request_field_but_the_resources_leaves_the_resources_only_path() -> None:
    # a new RequestSpec field must be listed (or this test says which one is not),
    # or a request using it would take the shortcut that ignores it
    resources = {"instance_uuids", "memory_mb", "vcpus", "disk_gb"}
    assert set(NON_RESOURCE_FIELDS) == set(RequestSpec.model_fields) - resources - set(
        NOT_ASKED_FIELDS
    )
    how: list[dict[str, Any]] = [{"priority": 5}, {"wait": 1.0}, {"owner": "tenant-a"}]  # not what
    for fields in how:
        assert asks_resources_only(make_spec(**fields)), fields
        assert request_fingerprint(make_spec(**fields)) == request_fingerprint(make_spec())
    asked: dict[str, Any] = {
        "availability_zone": "az",
        "group": ServerGroup(id="g", policy="affinity"),
        "requested_destination": Destination(node="n"),
        "flavor_name": "m1.small",
        "project_id": "p1",
        "extra_specs": {"ssd": "true"},
        "image_properties": {"hw_architecture": "x86_64"},
        "image_id": "image-1",
        "query": '[">=", "$free_ram_mb", 1024]',
    }
    for field in NON_RESOURCE_FIELDS:
        spec = make_spec(**{field: asked.get(field, ["x"])})
        assert not asks_resources_only(spec), field
    assert asks_resources_only(make_spec(availability_zone=None, required_traits=[]))
