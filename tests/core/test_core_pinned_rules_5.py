"""Rules a seeded mutation sample (seed 1 of make mutate) found unpinned (issue 31):
a claim takes no attribute it does not declare, a table forgets the capitalized
names of the hosts it removed, a NoValidHost names only the parts of a requested
destination that are unknown, and a weigher's check of the weighed hosts holds on
the gathered ranking too."""

from __future__ import annotations

import re

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched import Destination, InvalidRequest, NoValidHost
from actorsched.nova.conf import weight_setting


def test_a_claim_takes_no_attribute_it_does_not_declare() -> None:
    # slotted, as every claim of a million is: no per-claim dict
    core = make_core()
    core.update_host(make_report("h1"), now=0.0)
    core.select_destinations(make_spec("vm"), now=1.0)
    claim = core.ledger.claims["vm"]
    with pytest.raises(AttributeError):
        claim.note = "x"  # type: ignore[attr-defined]


def test_removed_hosts_leave_no_capitalized_name_behind() -> None:
    # hosts named in capitals come and go (a churning fleet): the table keeps the
    # case-folded index of those it holds, not of every name it ever held
    core = make_core()
    for i in range(50):
        core.update_host(make_report(f"Node-{i}"), now=0.0)
        assert core.remove_host(f"Node-{i}", now=0.0)
    assert core.table._capitalized == {}
    core.update_host(make_report("Node-7"), now=0.0)
    placed = core.select_destinations(make_spec("vm", force_hosts=["node-7"]), now=1.0)
    assert placed[0].host == "Node-7"


def test_a_no_valid_host_names_only_the_unknown_parts_of_a_requested_destination() -> None:
    core = make_core()
    core.update_host(make_report("h1", memory_mb=1024), now=0.0)
    spec = make_spec("vm", requested_destination=Destination(host="gone"))
    with pytest.raises(NoValidHost) as refused:
        core.select_destinations(spec, now=1.0)
    assert "requested_destination host 'gone' is not known" in str(refused.value)
    assert "requested_destination node" not in str(refused.value)
    known = make_spec("vm", requested_destination=Destination(host="h1", node="h1"))
    with pytest.raises(NoValidHost) as refused:
        core.select_destinations(known.model_copy(update={"memory_mb": 4096}), now=1.0)
    assert "is not known" not in str(refused.value)


def test_a_required_metric_missing_fails_the_request_on_the_gathered_ranking_too() -> None:
    # Nova's MetricsWeigher raises for a weighed host without a required metric,
    # whichever way actorsched ranks the hosts that pass (here: a gathered copy)
    setting, _ = weight_setting(["cpu.idle.time=1", "cpu.user.time=2"], "[metrics] weight_setting")
    config = make_config(metrics_weight_setting=setting, nova_release=34)
    core = make_core(config)
    core.update_host(make_report("a", metrics={"cpu.idle.time": 5.0}), now=0.0)
    core.update_host(
        make_report("b", metrics={"cpu.idle.time": 9.0, "cpu.user.time": 1.0}), now=0.0
    )
    for i in range(6):  # hosts the zone leaves out, so few pass: the gathered path
        core.update_host(make_report(f"z{i}", availability_zone="far"), now=0.0)
    core.ranker.shortcut = False
    core.ranker.compress_below = 2.0
    with pytest.raises(InvalidRequest, match=re.escape("'cpu.user.time'")):
        core.select_destinations(make_spec("vm", availability_zone="nova"), now=1.0)


def test_a_compacted_facts_book_answers_each_host_by_its_own_facts() -> None:
    # the book of distinct host facts drops those no host reports any more and
    # numbers the rest again; a filter's kept answers go with that numbering, so
    # an x86_64 image still finds the x86_64 host, not the answer of facts gone
    from actorsched.models import BUILTIN_FILTERS, HOST_FACTS_FILTERS

    core = make_core(make_config(enabled_filters=[*BUILTIN_FILTERS, *HOST_FACTS_FILTERS]))
    arm = [["armv7l", "qemu", "hvm"]]

    def churn(first: int, count: int) -> None:
        for i in range(first, first + count):  # a host whose facts change each report
            report = make_report("c", i + 1, supported_instances=arm, hypervisor_version=i + 1)
            core.update_host(report, now=0.0)

    churn(0, 30)
    core.update_host(make_report("x86", supported_instances=[["x86_64", "kvm", "hvm"]]), 0.0)
    core.update_host(make_report("arm", supported_instances=arm), now=0.0)
    image = {"hw_architecture": "x86_64"}
    assert core.plan(make_spec("vm", image_properties=image), now=1.0).instances[0].host == "x86"
    churn(30, 40)  # past the book's bound: compacted, the x86 host's facts renumbered
    assert len(core.table.host_facts.values) < 30
    placed = core.select_destinations(make_spec("vm", image_properties=image), now=1.0)
    assert placed[0].host == "x86"
