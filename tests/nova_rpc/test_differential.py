"""actorsched's core against Nova 34's own filters and weighers, on seeded random clusters.

Each case (``nova_differential.generate``: hosts of random sizes, usage,
hypervisor versions, failed builds and metrics, aggregates with zones and
metadata, server groups with members on hosts, traits, a flavor with extra
specs, an image's id and properties, a query hint, one request, one of a few
configurations, two of them with Nova's opt-in filters:
AggregateNumInstancesFilter, AggregateIoOpsFilter, IsolatedHostsFilter,
AggregateImagePropertiesIsolation, JsonFilter; three with MetricsWeigher's
[metrics] options, one with MetricsFilter; two with ImagePropertiesWeigher,
whose hosts' instances carry images; BuildFailureWeigher at its
default 1000000 or another multiplier in each) is answered twice:

* by Nova 34 in its own venv: one subprocess answers every case
  (``nova_differential.py``, JSON in, JSON out) with Nova's HostState,
  HostFilterHandler and HostWeightHandler, and a Python stand-in for
  Placement's part;
* by actorsched's core here: a :class:`SchedulerCore` configured from the
  same nova.conf through ``actorsched.nova.conf.read`` (``host_subset_size``
  1, no shuffling; ``nova_release`` 34: Nova 34's rules where they differ
  from Nova 18's, actorsched's default), whose ``plan`` dry run ranks every passing host
  (``max_attempts`` past the host count), then once more with the
  configured ``max_attempts`` (the chosen host and its alternates, found by
  the ranking's fast paths).

actorsched knows an instance's image from its claim: in the image
configurations each host first reports empty and takes its listed instances
with images by forced claims, then reports them (``_claim_images``); Nova
reads them from its cell database (each instance's system_metadata).

They must agree: the same hosts pass, weighed in the same order (hosts whose
Nova weights are equal, to rounding, form a tie group compared as a set:
Nova's order among exact ties is arbitrary) and with the same weights; for
a request of several instances, the same host for each instance. A mismatch
prints its seed and the whole case.

No known difference remains (``nova_differential.KNOWN_TAGS`` is empty;
a difference found later gets a tag there, which the generator's flags
steer cases into, and a minimal case here). The former known differences
(``nova_differential.FORMER``) are in the asserted cases, each with its
minimal case asserted here too (:data:`AGREED`).

A request whose weighed hosts include one without a metric that [metrics]
required asks for fails in both: Nova's MetricsWeigher raises
ComputeHostMetricNotFound, actorsched refuses it with InvalidRequest naming
MetricsWeigher.

One answer is not Nova's by design: a numeric extra-spec operator against
an aggregate value that is not a number. Nova's filter raises ValueError
when it gets to that value; actorsched refuses the request with
InvalidRequest whenever such a value is on a reported host
(``nova_differential.refuses``). So where actorsched refuses, Nova raised
or placed; where Nova raised, actorsched refused; elsewhere they agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from actorsched import HostReport, InvalidRequest, RequestSpec, SchedulerConfig, ServerGroup
from actorsched.answers import Plan
from actorsched.core import SchedulerCore
from actorsched.nova.conf import read

# plain Python here: its Nova half imports nova only when it runs in Nova's venv
sys.path.insert(0, str(Path(__file__).parent))
import nova_differential as nd

ROOT = Path(__file__).resolve().parents[2]
NOVA_PYTHON = Path(os.environ.get("ACTORSCHED_NOVA_PYTHON", ROOT / ".venv-nova" / "bin" / "python"))
# `make nova-venv` writes this once Nova is installed (a venv left half-made has none)
NOVA_READY = NOVA_PYTHON.parent.parent / ".installed"
HARNESS = Path(__file__).with_name("nova_differential.py")

pytestmark = pytest.mark.skipif(
    not NOVA_READY.exists(),
    reason=f"Nova 34's venv is not installed ({NOVA_READY} is missing): `make nova-venv`",
)

ASSERTED = 1_400  # seeded cases that hit no known difference: all asserted
# Nova weights this close are a tie: a weight is a sum of a few normalized terms
# of order 1; equal figures give bit-equal weights, others may differ by an ulp
TIE = 1e-9
WEIGHT = 1e-6  # actorsched's weight of a host may differ from Nova's by rounding only
MAX_ATTEMPTS = 3  # [scheduler] max_attempts: Nova's default, which no configuration sets


# -- the minimal case of each former known difference ---------------------------


def _host(name: str, **fields: Any) -> dict[str, Any]:
    host: dict[str, Any] = {
        "host": name,
        "memory_mb": 8192,
        "memory_mb_reserved": 0,
        "memory_mb_used": 0,
        "vcpus": 8,
        "vcpus_used": 0,
        "local_gb": 200,
        "local_gb_used": 0,
        "ratios": {"ram": 1.0, "cpu": 1.0, "disk": 1.0},
        "traits": [],
        "enabled": True,
        "num_io_ops": 0,
        "instances": [],
    }
    host.update(fields)
    return host


def _aggregate(name: str, hosts: list[str], **metadata: str) -> dict[str, Any]:
    return {"name": name, "hosts": hosts, "metadata": metadata}


def _case(
    name: str,
    config: str,
    hosts: list[dict[str, Any]],
    aggregates: Sequence[dict[str, Any]] = (),
    **request: Any,
) -> dict[str, Any]:
    asked: dict[str, Any] = {
        "instances": ["00000000-0000-4000-8000-000000000001"],
        "flavor": "m1.small",
        "vcpus": 1,
        "memory_mb": 2048,
        "disk_gb": 20,
        "extra_specs": {},
        "project_id": "p1",
        "availability_zone": None,
        "required_traits": [],
        "forbidden_traits": [],
        "group": None,
        "same_host": [],
        "different_host": [],
        "ignore_hosts": [],
        "bare": False,
    }
    asked.update(request)
    return {
        "seed": "minimal",
        "hits": [name],
        "config": config,
        "hosts": hosts,
        "aggregates": list(aggregates),
        "request": asked,
    }


_OVER = {"ram": 1.5, "cpu": 1.0, "disk": 1.0}  # RAM over-committed 1.5 times

# name -> the smallest case that showed a former known difference (its name in
# nova_differential.FORMER is the case's "hits"), asserted now; each comment says
# what Nova 34 does, and actorsched too
AGREED: dict[str, dict[str, Any]] = {
    # free RAM -2048, 0 and 2048 MB: Nova clamps -2048 to the RAMWeigher's minval 0,
    # so h0 and h1 tie on RAM and h0's 12 vCPUs put it before h1 (2.0 > 1.67)
    # (actorsched normalized RAM from -2048 before: h0 0, h1 0.5, h1 first)
    "negative_free": _case(
        "negative_free",
        "default",
        [
            _host("h0", memory_mb_used=10240, vcpus=12, ratios=_OVER),
            _host("h1", memory_mb_used=8192, ratios=_OVER),
            _host("h2", memory_mb_used=6144, ratios=_OVER),
        ],
    ),
    # no aggregate is in zone 'nova': Nova places on h0 (zone az1) or h1 (no zone)
    "default_zone": _case(
        "default_zone",
        "default",
        [_host("h0"), _host("h1")],
        [_aggregate("agg0", ["h0"], availability_zone="az1")],
        availability_zone="nova",
    ),
    # an aggregate is in zone 'nova': Nova places on its h0 only, not on h2 (no zone)
    "default_zone_of_an_aggregate": _case(
        "default_zone",
        "default",
        [_host("h0"), _host("h1"), _host("h2")],
        [
            _aggregate("agg0", ["h0"], availability_zone="nova"),
            _aggregate("agg1", ["h1"], availability_zone="az1"),
        ],
        availability_zone="nova",
    ),
    # filter_tenant_id2=p2 keeps project p1 off h0 in Nova
    "tenant_key_prefix": _case(
        "tenant_key_prefix",
        "aggregates",
        [_host("h0"), _host("h1")],
        [_aggregate("agg0", ["h0"], filter_tenant_id2="p2")],
    ),
    # h0's disk is used past its size (its ratio lowered): a request of no disk
    # (boot from volume) does not ask Placement for DISK_GB, so h0 passes in Nova
    "zero_disk_full_host": _case(
        "zero_disk_full_host",
        "ram_only",
        [_host("h0", local_gb_used=210), _host("h1")],
        flavor="boot.small",
        vcpus=2,
        disk_gb=0,
    ),
    # h0 has no VCPU inventory in Placement: no request with vCPUs fits it
    "zero_vcpu_host": _case("zero_vcpu_host", "default", [_host("h0", vcpus=0), _host("h1")]),
    # tier=fast with '>= 2': float('fast') raises out of Nova's filter (the request
    # fails); actorsched refuses it with InvalidRequest
    "extra_spec_not_a_number": _case(
        "extra_spec_not_a_number",
        "aggregates",
        [_host("h0"), _host("h1")],
        [_aggregate("agg0", ["h0"], tier="fast"), _aggregate("agg1", ["h1"], tier="3")],
        extra_specs={"aggregate_instance_extra_specs:tier": ">= 2"},
    ),
    # ram_weight_multiplier=-1.0 on h0's aggregate: Nova weighs h0's free RAM (the
    # most) negatively there, so h1 comes first
    "aggregate_weight_multiplier": _case(
        "aggregate_weight_multiplier",
        "default",
        [_host("h0"), _host("h1", memory_mb_used=2048)],
        [_aggregate("agg0", ["h0"], ram_weight_multiplier="-1.0")],
    ),
    # cpu_allocation_ratio=0 (and a RAM one) on an aggregate: Nova 34 has no
    # Aggregate*Filter and its CPUWeigher reads the compute node's ratio, so both
    # hosts pass and weigh by their own ratios
    "aggregate_allocation_ratio": _case(
        "aggregate_allocation_ratio",
        "default",
        [_host("h0", vcpus_used=4), _host("h1", ratios={"ram": 1.0, "cpu": 4.0, "disk": 1.0})],
        [_aggregate("agg0", ["h0", "h1"], cpu_allocation_ratio="0", ram_allocation_ratio="0.5")],
    ),
    # two instances of 4096 MB: the first takes h0 (32 vCPUs), which is then full;
    # for the second Nova weighs h0 too, its 31 free vCPUs and its one I/O operation
    # set the CPU and I/O weighers' range, and h1 (more RAM) wins over h2 (more
    # vCPUs); over the hosts that fit (h1, h2) alone h2 would come first
    # (actorsched weighed those before, and took h2)
    "several_instances_weigh_full_hosts": _case(
        "several_instances_weigh_full_hosts",
        "default",
        [
            _host("h0", memory_mb_used=4096, vcpus=32),
            _host("h1", memory_mb_used=2048),
            _host("h2", memory_mb_used=4096, vcpus=16),
        ],
        instances=[
            "00000000-0000-4000-8000-000000000001",
            "00000000-0000-4000-8000-000000000002",
        ],
        flavor="m1.medium",
        memory_mb=4096,
    ),
}


# -- Nova's answers, once per test run ----------------------------------------------


def all_cases() -> dict[str, list[dict[str, Any]]]:
    """Every case, by kind: ``asserted`` and ``agreed``."""
    cases = {"asserted": [nd.generate(seed) for seed in range(ASSERTED)]}
    cases["agreed"] = [{**case, "seed": f"agreed:{name}"} for name, case in AGREED.items()]
    return cases


Runs = dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """(case, Nova's answer) of every case, by kind: one run of Nova's venv for all."""
    cases = all_cases()
    flat = [case for kind in cases.values() for case in kind]
    path = tmp_path_factory.mktemp("differential") / "cases.json"
    path.write_text(json.dumps(flat))
    started = time.perf_counter()
    done = subprocess.run(
        [str(NOVA_PYTHON), str(HARNESS), str(path)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    print(f"Nova 34 answered {len(flat)} cases in {time.perf_counter() - started:.1f} s")
    assert len(answers) == len(flat)
    out: Runs = {}
    index = 0
    for kind, listed in cases.items():
        out[kind] = list(zip(listed, answers[index : index + len(listed)], strict=True))
        index += len(listed)
    return out


# -- actorsched's answers -------------------------------------------------------------

_CONFIGS: dict[str, SchedulerConfig] = {}


def scheduler_config(config: str, tmp: Path) -> SchedulerConfig:
    """The SchedulerConfig actorsched reads from the configuration's nova.conf."""
    found = _CONFIGS.get(config)
    if found is None:
        path = tmp / f"{config}.conf"
        path.write_text(nd.nova_conf_text(config))
        values = {name: value for name, (value, _) in read(str(path)).scheduler.items()}
        found = _CONFIGS[config] = SchedulerConfig(**values, seed=0)
    assert found.host_subset_size == 1
    assert not found.shuffle_best_same_weighed_hosts
    assert found.max_attempts == MAX_ATTEMPTS
    assert found.nova_release == 34  # a nova.conf is Nova 34's: its rules
    return found


def _report(h: Mapping[str, Any], generation: int = 1) -> HostReport:
    ratios = h["ratios"]
    return HostReport(
        host=h["host"],
        generation=generation,
        memory_mb=h["memory_mb"],
        memory_mb_used=h["memory_mb_used"],
        memory_mb_reserved=h["memory_mb_reserved"],
        vcpus=h["vcpus"],
        vcpus_used=h["vcpus_used"],
        local_gb=h["local_gb"],
        local_gb_used=h["local_gb_used"],
        enabled=h["enabled"],
        traits=list(h["traits"]),
        instances=list(h["instances"]),
        num_io_ops=h["num_io_ops"],
        ram_allocation_ratio=ratios["ram"],
        cpu_allocation_ratio=ratios["cpu"],
        disk_allocation_ratio=ratios["disk"],
        # what Nova's compute node says of its hypervisor in the harness
        hypervisor_type="QEMU",
        hypervisor_version=h.get("hypervisor_version", 8002000),
        failed_builds=h.get("failed_builds", 0),
        metrics={name: float(value) for name, value in h.get("metrics", {}).items()},
    )


def _spec(request: Mapping[str, Any]) -> RequestSpec:
    g = request["group"]
    group = None
    if g is not None:
        # each member actorsched did not place: its host, once per member
        group = ServerGroup(
            id=g["id"],
            policy=g["policy"],
            max_server_per_host=g["max_server_per_host"],
            hosts=list(g["members"].values()),
        )
    bare = request["bare"]  # no flavor name and project: a request of resources only
    return RequestSpec(
        instance_uuids=list(request["instances"]),
        memory_mb=request["memory_mb"],
        vcpus=request["vcpus"],
        disk_gb=request["disk_gb"],
        availability_zone=request["availability_zone"],
        required_traits=list(request["required_traits"]),
        forbidden_traits=list(request["forbidden_traits"]),
        group=group,
        same_host=list(request["same_host"]),
        different_host=list(request["different_host"]),
        ignore_hosts=list(request["ignore_hosts"]),
        flavor_name=None if bare else request["flavor"],
        extra_specs=dict(request["extra_specs"]),
        project_id=None if bare else request["project_id"],
        image_id=request.get("image_id"),
        image_properties=dict(request.get("image_properties") or {}),
        query=None if request.get("query") is None else json.dumps(request["query"]),
    )


def _claim_images(core: SchedulerCore, case: Mapping[str, Any]) -> None:
    """The listed instances that have an image (the image configurations), placed
    by actorsched on their hosts first: actorsched knows an instance's image from
    its claim (Nova from its cell database). Each host reports empty, takes its
    instances by a forced claim of its image, then reports them (in ``ours``)."""
    images = [
        (h["host"], instance, image)
        for h in case["hosts"]
        for instance, image in h.get("instance_images", {}).items()
    ]
    if not images:
        return
    for h in case["hosts"]:
        empty = {**h, "memory_mb_used": 0, "vcpus_used": 0, "local_gb_used": 0}
        core.update_host(_report({**empty, "enabled": True, "instances": []}), now=0.0)
    for host, instance, image in images:
        spec = RequestSpec(
            instance_uuids=[instance],
            memory_mb=1,
            vcpus=0,
            disk_gb=0,
            force_hosts=[host],
            image_properties=image,
        )
        placed = core.select_destinations(spec, now=0.0)
        assert [p.host for p in placed] == [host], (instance, host, placed)


def ours(case: Mapping[str, Any], tmp: Path) -> tuple[Plan, Plan]:
    """actorsched's plans of the case: every passing host ranked, then the configured
    ``max_attempts``. Half the cases create the aggregates before the hosts report."""
    config = scheduler_config(case["config"], tmp)
    aggregates_first = sum(map(ord, str(case["seed"]))) % 2 == 0
    plans = []
    for attempts in (len(case["hosts"]) + 1, config.max_attempts):
        core = SchedulerCore(config.model_copy(update={"max_attempts": attempts}))
        _claim_images(core, case)
        reports = [_report(h, generation=2) for h in case["hosts"]]
        if not aggregates_first:
            for report in reports:
                core.update_host(report, now=0.0)
        for a in case["aggregates"]:
            core.create_aggregate(a["name"], a["metadata"], a["hosts"])
        if aggregates_first:
            for report in reports:
                core.update_host(report, now=0.0)
        plans.append(core.plan(_spec(case["request"]), now=1.0))
    return plans[0], plans[1]


# -- the comparison ---------------------------------------------------------------------


def tie_groups(weighed: Sequence[Sequence[Any]]) -> list[set[str]]:
    """Nova's weighed hosts (best first) as groups of equal weight, to rounding."""
    groups: list[set[str]] = []
    last: float | None = None
    for host, weight in weighed:
        if last is not None and abs(weight - last) <= TIE * (1 + abs(weight)):
            groups[-1].add(host)
        else:
            groups.append({host})
        last = weight
    return groups


def _in_order(hosts: Sequence[str], weighed: Sequence[Sequence[Any]]) -> str | None:
    """None when ``hosts`` is Nova's weighed order, or a prefix of it, up to ties."""
    known = {h for h, _ in weighed}
    unknown = [h for h in hosts if h not in known]
    if unknown:
        return f"{unknown} are not among Nova's weighed hosts"
    rest = list(hosts)
    for group in tie_groups(weighed):
        if not rest:
            return None
        taken, rest = set(rest[: len(group)]), rest[len(group) :]
        if taken != group and not (not rest and taken < group):
            return f"Nova's tie group {sorted(group)} is {sorted(taken)} in actorsched's order"
    return None


def compare(case: Mapping[str, Any], nova: Mapping[str, Any], full: Plan, short: Plan) -> list[str]:
    """What differs between Nova's answer and actorsched's two plans (nothing: they
    agree)."""
    if nova["error"] is not None:
        return [f"Nova raised {nova['error']}"]
    if len(case["request"]["instances"]) > 1:
        return _compare_several(nova, full, short)
    problems: list[str] = []
    weighed = nova["instances"][0]["weighed"]
    passing = {h for h, _ in weighed}
    planned = full.instances[0]
    ranked = [c.host for c in planned.candidates]
    if set(ranked) != passing:
        problems.append(
            f"passing hosts differ: only Nova passes {sorted(passing - set(ranked))}, "
            f"only actorsched {sorted(set(ranked) - passing)}"
        )
        return problems
    why = _in_order(ranked, weighed)
    if why is not None:
        problems.append(f"weighed order differs: {why}")
    if len(weighed) > 1:  # one host: Nova weighs nothing (its weight stays 0)
        nova_weight = dict(map(tuple, weighed))
        off = {
            c.host: (nova_weight[c.host], c.total)
            for c in planned.candidates
            if abs(nova_weight[c.host] - c.total) > WEIGHT
        }
        if off:
            problems.append(f"weights differ (Nova's, actorsched's): {off}")
    first = short.instances[0]
    chosen = [] if first.host is None else [first.host, *first.alternates]
    if len(chosen) != min(len(passing), MAX_ATTEMPTS):
        problems.append(f"the max_attempts plan gives {chosen}, of {len(passing)} passing")
    why = _in_order(chosen, weighed)
    if why is not None:
        problems.append(f"the max_attempts plan {chosen}: {why}")
    return problems


def _compare_several(nova: Mapping[str, Any], full: Plan, short: Plan) -> list[str]:
    """Several instances: the host of each, while Nova and actorsched placed the
    earlier ones alike (another host of a tie, and the rest need not agree)."""
    for k, answer in enumerate(nova["instances"]):
        hosts = [p.instances[k].host if k < len(p.instances) else None for p in (full, short)]
        if hosts[0] != hosts[1]:
            return [f"instance {k}: actorsched's two plans chose {hosts}"]
        host = hosts[0]
        chosen = answer["chosen"]  # the first host in Nova's order that Placement takes
        if chosen is None or host is None:
            if chosen != host:
                return [f"instance {k}: Nova takes {chosen}, actorsched {host}"]
            return []  # both: NoValidHost at this instance
        # Nova weighs hosts that no longer fit too, and takes the best that does: the
        # hosts that fit and weigh as much as that one are a tie
        weight = dict(map(tuple, answer["weighed"]))
        top = weight[chosen]
        best = {h for h in answer["fits"] if abs(weight[h] - top) <= TIE * (1 + abs(top))}
        if host not in best:
            return [
                f"instance {k}: actorsched takes {host}, Nova's best that fit are "
                f"{sorted(best)} (Nova's order {answer['weighed']}, of which fit "
                f"{answer['fits']})"
            ]
        if host != chosen:
            return []  # another host of a tie: the rest need not agree
    every = len(nova["instances"]) == len(full.instances)
    if every and all(a["chosen"] for a in nova["instances"]) and not full.placed:
        return [f"Nova placed every instance, actorsched did not: {full.message}"]
    return []


def explain(
    case: Mapping[str, Any], nova: Mapping[str, Any], full: Plan, problems: Sequence[str]
) -> str:
    ranked = [[(c.host, round(c.total, 9)) for c in p.candidates] for p in full.instances]
    return (
        f"seed {case['seed']!r} (generated with hits {case['hits']}), configuration "
        f"{case['config']!r}, known differences it hits {nd.tags(case)}:\n  "
        + "\n  ".join(problems)
        + f"\nNova 34: {json.dumps(nova['instances'])} (error {nova['error']})"
        + f"\nactorsched: {ranked} ({full.message})"
        + f"\nthe case: {json.dumps(case)}"
    )


def refused(case: Mapping[str, Any], nova: Mapping[str, Any], error: InvalidRequest) -> list[str]:
    """What is wrong with actorsched's refusal of ``case`` (nothing: it is the rule
    of ``nova_differential.refuses``, and Nova raised ValueError or placed; or a
    required metric is missing on a weighed host, and Nova raised for it too)."""
    if "MetricsWeigher" in str(error):
        if nova["error"] is not None and nova["error"].startswith("ComputeHostMetricNotFound"):
            return []
        return [f"actorsched refused ({error}); Nova raised {nova['error']}"]
    why = nd.refuses(case)
    if why is None:
        return [f"actorsched refused the request, which the rule does not: {error}"]
    if nova["error"] is not None and not nova["error"].startswith("ValueError"):
        return [f"actorsched refused ({why}): {error}; Nova raised {nova['error']}"]
    return []


def check(case: Mapping[str, Any], nova: Mapping[str, Any], tmp: Path) -> str:
    """ "" when they agree, else the explanation of the mismatch."""
    try:
        full, short = ours(case, tmp)
    except InvalidRequest as error:
        problems = refused(case, nova, error)
        if not problems:
            return ""
        return (
            f"seed {case['seed']!r}, configuration {case['config']!r}:\n  "
            + "\n  ".join(problems)
            + f"\nthe case: {json.dumps(case)}"
        )
    problems = compare(case, nova, full, short)
    why = nd.refuses(case)
    if why is not None:
        problems.insert(0, f"the request should be refused ({why}), actorsched placed it")
    return explain(case, nova, full, problems) if problems else ""


# -- the tests ----------------------------------------------------------------------------


def test_the_seeded_cases_cover_what_they_are_for(runs: Runs) -> None:
    pairs = runs["asserted"]
    assert len(pairs) >= 1_000
    hitting = [case["seed"] for case, _ in pairs if nd.tags(case)]
    assert not hitting, f"asserted cases hit a known difference: seeds {hitting[:10]}"
    configs = Counter(case["config"] for case, _ in pairs)
    assert set(configs) == set(nd.CONFIGS), configs
    assert min(configs.values()) >= 100, configs
    seen: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    for case, nova in pairs:
        request = case["request"]
        weighed = nova["instances"][0]["weighed"] if nova["instances"] else []
        seen["no host passes"] += not weighed
        seen["several hosts weighed"] += len(weighed) > 1
        seen["a tie of several hosts"] += any(len(g) > 1 for g in tie_groups(weighed))
        seen["several instances"] += len(request["instances"]) > 1
        seen["a server group"] += request["group"] is not None
        seen["a zone"] += request["availability_zone"] is not None
        seen["extra specs"] += bool(request["extra_specs"])
        seen["traits"] += bool(request["required_traits"] or request["forbidden_traits"])
        seen["aggregates"] += bool(case["aggregates"])
        seen["resources only"] += request["bare"]
        seen["a query"] += request.get("query") is not None
        seen["an isolated image"] += request.get("image_id") == nd.ISOLATED_IMAGE
        seen["image properties"] += bool(request.get("image_properties"))
        seen["Nova's filters removed a host"] += len(weighed) < len(nova["placement"])
        failing = {h["host"] for h in case["hosts"] if h["failed_builds"]}
        seen["a host with failed builds weighed"] += bool(failing & {h for h, _ in weighed})
        metrics = nd.CONFIGS[case["config"]].get("metrics")
        seen["metrics weighed"] += bool(metrics) and len(weighed) > 1
        listed_images = {
            (key, value)
            for h in case["hosts"]
            for image in h.get("instance_images", {}).values()
            for key, value in image.items()
        }
        asked = set((request.get("image_properties") or {}).items())
        seen["images weighed"] += len(weighed) > 1 and bool(asked & listed_images)
        error = nova["error"] or ""
        seen["a required metric missing (both fail)"] += error.startswith("ComputeHost")
        for former in nd.features(case):
            seen[f"former: {former}"] += 1
        if nd.refuses(case) is not None:  # (what Nova did there, for the record)
            refusals[f"refused, and Nova {'raised' if nova['error'] else 'placed'}"] += 1
    print(dict(seen), dict(refusals))
    assert {f"former: {name}" for name in nd.FORMER} <= set(seen), seen
    assert min(seen.values()) >= 30, seen


def test_actorsched_filters_and_weighs_as_nova_34_does(runs: Runs, tmp_path: Path) -> None:
    started = time.perf_counter()
    found: list[str] = []
    for case, nova in runs["asserted"]:
        mismatch = check(case, nova, tmp_path)
        if mismatch:
            found.append(mismatch)
    elapsed = time.perf_counter() - started
    print(f"actorsched answered {len(runs['asserted'])} cases in {elapsed:.1f} s")
    assert not found, (
        f"{len(found)} of {len(runs['asserted'])} cases differ; the first:\n{found[0]}"
    )


@pytest.mark.parametrize("name", list(AGREED))
def test_a_former_difference(name: str, runs: Runs, tmp_path: Path) -> None:
    """The minimal case of a former known difference: actorsched agrees with Nova 34."""
    case, nova = next(pair for pair in runs["agreed"] if pair[0]["seed"] == f"agreed:{name}")
    assert nd.tags(case) == [], nd.tags(case)
    assert case["hits"][0] in nd.features(case), nd.features(case)
    mismatch = check(case, nova, tmp_path)
    assert not mismatch, mismatch
