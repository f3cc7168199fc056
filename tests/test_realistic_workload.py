"""The realistic benchmark workload: plain data, deterministic, with the mix it promises.

No timing is asserted. The real-Nova runner is exercised only where Nova's
own venv exists (``make nova-venv``).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.realbench import DEFAULT_NOVA_PYTHON
from benchmarks.realistic import FLAVORS, ZONES, Components, Fleet, generate, load, write
from benchmarks.realistic_run import run_actorsched

_ROOT = Path(__file__).resolve().parent.parent


def _requests(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in workload["events"] if e["kind"] == "request"]


def test_the_same_seed_gives_the_same_events_and_another_seed_others(tmp_path: Path) -> None:
    one = generate(120, seed=3)
    assert one == generate(120, seed=3)
    assert one["events"] != generate(120, seed=4)["events"]
    assert load(write(one, tmp_path / "w.json")) == json.loads(json.dumps(one))


def test_the_mix_has_the_promised_shares() -> None:
    workload = generate(400, seed=1)
    requests = _requests(workload)
    n = len(requests)
    assert n > 5_000

    def share(pred: Callable[[dict[str, Any]], bool]) -> float:
        return sum(1 for r in requests if pred(r)) / n

    assert 0.25 < share(lambda r: r["availability_zone"] is not None) < 0.32
    assert 0.17 < share(lambda r: bool(r["required_traits"])) < 0.23
    assert 0.12 < share(lambda r: r["group"] is not None) < 0.18
    assert 0.08 < share(lambda r: len(r["instances"]) > 1) < 0.12
    assert max(len(r["instances"]) for r in requests) == 5
    policies = Counter(r["group"]["policy"] for r in requests if r["group"])
    assert policies.most_common(1)[0][0] == "anti-affinity"
    assert set(policies) == {"anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity"}
    assert {r["availability_zone"] for r in requests} - {None} == set(ZONES)
    assert len(ZONES) == 6
    assert min(f.vcpus for f in FLAVORS) == 1
    assert max(f.vcpus for f in FLAVORS) == 16
    assert min(f.memory_mb for f in FLAVORS) == 1_792  # 1.75 GB
    assert max(f.memory_mb for f in FLAVORS) == 112 * 1024
    instances = sum(len(r["instances"]) for r in requests)
    reports = sum(1 for e in workload["events"] if e["kind"] == "report")
    assert 0.19 < reports / instances <= 0.2  # one report per five instances
    assert workload["max_instances_per_host"] == 50
    assert workload["max_io_ops_per_host"] == 8
    assert len(workload["aggregates"]) == 3  # aggregates with extra specs are in the mix


def test_each_component_can_be_turned_off() -> None:
    bare = generate(60, seed=2, components=Components.parse("none"))
    requests = _requests(bare)
    assert all(e["kind"] == "request" for e in bare["events"])
    assert not any(r["availability_zone"] or r["required_traits"] or r["group"] for r in requests)
    assert all(len(r["instances"]) == 1 for r in requests)
    assert all(h["availability_zone"] is None and h["traits"] == [] for h in bare["hosts"])
    only_groups = Components.parse("none,groups")
    assert only_groups.groups
    assert not only_groups.zones
    assert not only_groups.reports
    assert not Components.parse("-zones").zones
    with pytest.raises(ValueError, match="unknown component"):
        Components.parse("zonez")


def test_aggregates_bring_metadata_and_matching_extra_specs() -> None:
    workload = generate(300, seed=5, components=Components(aggregates=True))
    assert {a["name"] for a in workload["aggregates"]} == {
        "agg-icelake",
        "agg-sapphire",
        "agg-ssd",
    }
    assert all(a["hosts"] for a in workload["aggregates"])
    keys = {
        (k.split(":", 1)[1], v) for r in _requests(workload) for k, v in r["extra_specs"].items()
    }
    metadata = {kv for a in workload["aggregates"] for kv in a["metadata"].items()}
    assert keys == metadata


async def test_the_aggregates_component_runs_on_actorscheds_side() -> None:
    workload = generate(30, seed=5, components=Components(aggregates=True))
    result = await run_actorsched(workload)
    assert result["reached_fill"]


def test_a_report_names_its_node_and_lists_what_it_runs() -> None:
    workload = generate(10, seed=1)
    fleet = Fleet(workload)
    request = _requests(workload)[0]
    assert fleet.reporter({"kind": "report", "lag": 1}) is None
    hosts = ["cn000003"] * len(request["instances"])
    fleet.place(request, hosts)
    assert fleet.reporter({"kind": "report", "lag": 1}) == "cn000003"
    assert fleet.reporter({"kind": "report", "host": "cn000007"}) == "cn000007"
    report = fleet.report("cn000003")
    assert report["generation"] == 2
    assert report["instances"] == request["instances"]
    assert report["memory_mb_used"] == request["memory_mb"] * len(hosts)
    assert 0 < fleet.fill < 1


async def test_actorsched_fills_a_small_cluster_to_the_line() -> None:
    result = await run_actorsched(generate(40, seed=9), concurrency=4)
    assert result["reached_fill"]
    assert result["placed"] > 0
    assert result["reports"] > 0
    assert result["requests"] == result["placed"] + result["no_valid_host"]
    limited = await run_actorsched(generate(40, seed=9), limit=25)
    assert limited["requests"] == 25


@pytest.mark.skipif(not DEFAULT_NOVA_PYTHON.exists(), reason="no Nova venv (make nova-venv)")
@pytest.mark.parametrize("aggregates", [False, True])
def test_real_nova_places_a_small_workload(tmp_path: Path, aggregates: bool) -> None:
    workload = generate(20, seed=9, components=Components(aggregates=aggregates))
    path = write(workload, tmp_path / "w.json")
    done = subprocess.run(
        [str(DEFAULT_NOVA_PYTHON), "-m", "benchmarks.nova_real", str(path), "--budget", "20"],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["scheduler"] == "nova"
    assert result["reached_fill"], result
    assert result["placed"] > 0
    assert result["reports"] > 0
    assert "NumInstancesFilter" in result["enabled_filters"]
    assert "RAMWeigher" in result["weighers"]
    assert ("AggregateInstanceExtraSpecsFilter" in result["enabled_filters"]) == aggregates
