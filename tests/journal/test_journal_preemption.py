"""Preemption survives a restart, SQLite and PostgreSQL: replaying the records of
placements that preempted gives the same claims, host figures, priorities and
answers (the victims hold no claim, a victim placed again keeps its new claim),
replaying them twice changes nothing, and no host is ever over-committed."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_spec, over_committed_hosts
from journal_backends import BACKENDS, Backend, make_backend

from actorsched import (
    HostReport,
    NoValidHost,
    RequestSpec,
    Scheduler,
    SchedulerConfig,
    Selection,
)
from actorsched.core import SchedulerCore
from actorsched.journal import Journal
from actorsched.journal.records import CLAIM, Record, apply

CONFIG = SchedulerConfig(
    seed=1,
    service_down_time=1e9,
    preemption=True,
    ram_allocation_ratio=1.0,
    max_io_ops_per_host=1000,
    max_instances_per_host=1000,
)
HOST_RAM = 8192


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    made.cleanup()


def _report(host: str, generation: int = 1, **fields: Any) -> HostReport:
    values: dict[str, Any] = {
        "host": host,
        "generation": generation,
        "memory_mb": HOST_RAM,
        "memory_mb_used": 0,
        "vcpus": 64,
        "vcpus_used": 0,
        "local_gb": 1000,
        "local_gb_used": 0,
        **fields,
    }
    return HostReport.model_validate(values)


def _spec(*uuids: str, memory_mb: int, priority: int = 0, **fields: Any) -> RequestSpec:
    return make_spec(*uuids, memory_mb=memory_mb, priority=priority, **fields)


def _kept(core: SchedulerCore) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Each claim's priority and victims: what the digest does not cover."""
    return {u: (c.priority, c.preempted) for u, c in core.ledger.claims.items()}


# the placements that preempt, as their callers would ask them again
HIGH = _spec("high", memory_mb=HOST_RAM, priority=5)
PAIR = _spec("p1", "p2", memory_mb=4096, priority=5)


async def _build(s: Scheduler) -> dict[str, list[Selection]]:
    """Full hosts of claims of several priorities, two placements that preempt
    (one of two instances), a confirmed victim, and a victim placed again."""
    for host in ("h0", "h1", "h2", "h3"):
        assert await s.update_host(_report(host))
    await s.select_destinations(_spec("low-a", memory_mb=4096, force_hosts=["h0"]))
    await s.select_destinations(_spec("low-b", memory_mb=4096, priority=1, force_hosts=["h0"]))
    # h0 reports low-b: a confirmed claim, whose release is a credit
    assert await s.update_host(_report("h0", 2, memory_mb_used=4096, instances=["low-b"]))
    await s.select_destinations(_spec("keep", memory_mb=HOST_RAM, priority=10, force_hosts=["h1"]))
    await s.select_destinations(_spec("mid", memory_mb=HOST_RAM, priority=3, force_hosts=["h2"]))
    await s.select_destinations(_spec("low-c", memory_mb=6144, force_hosts=["h3"]))
    assert over_committed_hosts(await s.host_states()) == 0

    answers = {"high": await s.select_destinations(HIGH)}
    # h3's victim has the lowest priority (0, against h0's 1 and h2's 3)
    assert [(x.host, x.preempted) for x in answers["high"]] == [("h3", ["low-c"])]
    answers["pair"] = await s.select_destinations(PAIR)
    # each instance frees half of h0: the less important claim first
    assert [(x.host, x.preempted) for x in answers["pair"]] == [
        ("h0", ["low-a"]),
        ("h0", ["low-b"]),
    ]
    assert s.core.ledger.claims["p2"].confirmed is False
    # low-c, evicted, is placed again once keep leaves h1
    assert await s.release("keep")
    [again] = await s.select_destinations(_spec("low-c", memory_mb=6144))
    assert again.host == "h1"
    assert over_committed_hosts(await s.host_states()) == 0
    return answers


def _no_closing_snapshot(journal: Journal) -> None:
    """Stop as kill -9 would: the records after the last snapshot are all there is."""
    journal.snapshot_every = 10**9
    journal._since_snapshot = 0


async def test_preemptions_survive_a_restart_by_their_records(backend: Backend) -> None:
    journal = backend.journal(10**9)
    async with Scheduler(CONFIG, journal=journal) as s:
        answers = await _build(s)
        before = s.core.digest()
        states = await s.host_states()
        claims = s.core.claims()
        kept = _kept(s.core)
        _no_closing_snapshot(journal)
    assert set(claims) == {"high", "p1", "p2", "mid", "low-c"}
    assert kept["high"] == (5, ("low-c",))
    assert kept["mid"] == (3, ())

    async with Scheduler(CONFIG, journal=backend.journal(10**9)) as again:
        assert again.journal is not None
        assert again.journal.recovery is not None
        assert again.journal.recovery.snapshot_seq == 0  # from the records alone
        assert again.journal.recovery.replayed == len(backend.record_seqs()) > 0
        assert again.core.digest() == before
        assert await again.host_states() == states
        assert again.core.claims() == claims
        assert _kept(again.core) == kept
        assert over_committed_hosts(states) == 0
        # the victims hold no claim, but low-c its new one on h1
        for victim in ("low-a", "low-b"):
            assert (await again.where(victim)).claimed is False
        assert (await again.where("low-c")).host == "h1"
        # redelivered, each placement answers alike and releases nothing more
        recorded = len(backend.record_seqs())
        assert await again.select_destinations(HIGH) == answers["high"]
        assert await again.select_destinations(PAIR) == answers["pair"]
        assert again.core.digest() == before
        assert (await again.where("low-c")).host == "h1"
        _no_closing_snapshot(again.journal)
    assert len(backend.record_seqs()) == recorded + 2
    # the redeliveries were journaled too: replayed, they release nothing either
    async with Scheduler(CONFIG, journal=backend.journal(10**9)) as third:
        assert third.journal is not None
        assert third.journal.recovery is not None
        assert third.journal.recovery.snapshot_seq == 0
        assert third.core.digest() == before
        assert _kept(third.core) == kept
        assert (await third.where("low-c")).host == "h1"
        assert await third.select_destinations(HIGH) == answers["high"]
        assert third.core.digest() == before
        # the replayed claims kept their priorities: mid (3) is no victim of priority 3
        with pytest.raises(NoValidHost, match="no host could be freed"):
            await third.select_destinations(
                _spec("x", memory_mb=HOST_RAM, priority=3, force_hosts=["h2"])
            )
        assert third.core.digest() == before


def _recover(backend: Backend) -> tuple[SchedulerCore, list[Record]]:
    """A fresh core recovered from the journal's records, and those records."""
    core = SchedulerCore(CONFIG)
    journal = backend.journal(10**9)
    journal.open(core)
    try:
        rows = journal._load_records(0, 10_000)
    finally:
        journal.close_now()
    assert journal.recovery is not None
    assert journal.recovery.snapshot_seq == 0
    return core, [Record(kind, now, body) for _, kind, now, body, _ in rows]


async def test_replaying_the_records_twice_changes_nothing(backend: Backend) -> None:
    journal = backend.journal(10**9)
    async with Scheduler(CONFIG, journal=journal) as s:
        await _build(s)
        before = s.core.digest()
        kept = _kept(s.core)
        _no_closing_snapshot(journal)

    # two recoveries from the same records: the same state (replay writes nothing)
    first, records = _recover(backend)
    second, again = _recover(backend)
    assert again == records
    for core in (first, second):
        assert core.digest() == before
        assert _kept(core) == kept
    preempting = [r for r in records if r.kind == CLAIM and '"preempted"' in r.body]
    assert len(preempting) == 2  # high's and the pair's; no other record names victims

    # every record applied twice in a row, as a record replayed again after a
    # crash between its commit and the next: the state of applying each once
    core = SchedulerCore(CONFIG)
    for record in records:
        apply(core, record)
        digest, kept_now = core.digest(), _kept(core)
        apply(core, record)
        assert core.digest() == digest, record
        assert _kept(core) == kept_now, record
        assert over_committed_hosts(core.host_states()) == 0, record
    assert core.digest() == before
    assert _kept(core) == kept


def test_a_preempting_record_replayed_twice_releases_its_victims_once() -> None:
    core = SchedulerCore(CONFIG)
    core.update_host(_report("a"), 1.0)
    core.select_destinations(_spec("low", memory_mb=HOST_RAM, force_hosts=["a"]), 2.0)
    body = json.dumps(
        {
            "spec": json.loads(_spec("high", memory_mb=HOST_RAM, priority=5).model_dump_json()),
            "selections": [
                {"instance_uuid": "high", "host": "a", "alternates": [], "preempted": ["low"]}
            ],
        }
    )
    apply(core, Record(CLAIM, 3.0, body))
    assert core.claims() == {"high": ("a", False)}
    assert core.ledger.claims["high"].preempted == ("low",)
    digest = core.digest()
    apply(core, Record(CLAIM, 3.0, body))
    assert core.digest() == digest
    assert core.claims() == {"high": ("a", False)}
    assert core.host_states()["a"].free_ram_mb == 0
    assert core.host_states()["a"].assumed_claims == 1


def _holds(s: Scheduler, spec: RequestSpec) -> bool:
    return all(u in s.core.ledger.claims for u in spec.instance_uuids)


async def test_a_random_load_with_preemptions_survives_a_restart(backend: Backend) -> None:
    """Placements of priorities 0 to 9 (some preempting, some of two instances),
    releases, reports confirming claims and redeliveries; restarted by the records,
    the same state, and 0 over-committed hosts before and after."""
    rng = random.Random(4)
    journal = backend.journal(10**9)
    async with Scheduler(CONFIG, journal=journal) as s:
        for i in range(6):
            assert await s.update_host(_report(f"h{i}"))
        asked: list[RequestSpec] = []
        answers: dict[str, list[Selection]] = {}
        preempted = 0
        for n in range(150):
            roll = rng.random()
            if roll < 0.15 and s.core.ledger.claims:
                await s.release(rng.choice(sorted(s.core.ledger.claims)))
            elif roll < 0.25 and (held := [a for a in asked if _holds(s, a)]):
                spec = rng.choice(held)  # redelivered: the same answer, victims and all
                assert await s.select_destinations(spec) == answers[spec.instance_uuids[0]]
            elif roll < 0.3:  # a host reports its claims: they are confirmed
                host = f"h{rng.randrange(6)}"
                on = sorted(u for u, (h, _) in s.core.claims().items() if h == host)
                used = sum(s.core.ledger.claims[u].memory_mb for u in on)
                state = (await s.host_states())[host]
                assert await s.update_host(
                    _report(host, state.generation + 1, memory_mb_used=used, instances=on)
                )
            else:
                uuids = [f"vm-{n}"] if rng.random() < 0.8 else [f"vm-{n}a", f"vm-{n}b"]
                spec = _spec(
                    *uuids,
                    memory_mb=rng.choice((1024, 2048, 4096)),
                    priority=rng.randrange(10),
                )
                try:
                    selections = await s.select_destinations(spec)
                except NoValidHost:
                    continue
                asked.append(spec)
                answers[uuids[0]] = selections
                preempted += sum(len(x.preempted) for x in selections)
            assert over_committed_hosts(await s.host_states()) == 0
        assert preempted > 10, "the load should preempt"
        assert any(c.confirmed for c in s.core.ledger.claims.values())
        before = s.core.digest()
        states = await s.host_states()
        kept = _kept(s.core)
        _no_closing_snapshot(journal)

    async with Scheduler(CONFIG, journal=backend.journal(10**9)) as again:
        assert again.journal is not None
        assert again.journal.recovery is not None
        assert again.journal.recovery.snapshot_seq == 0
        assert again.core.digest() == before
        assert _kept(again.core) == kept
        after = await again.host_states()
        assert after == states
        over_committed = over_committed_hosts(after)
        assert over_committed == 0


async def test_preemptions_survive_a_restart_from_a_snapshot(backend: Backend) -> None:
    async with Scheduler(CONFIG, journal=backend.journal(10**9)) as s:
        answers = await _build(s)
        before = s.core.digest()
        kept = _kept(s.core)
    # a clean stop writes a closing snapshot: the restart restores it
    async with Scheduler(CONFIG, journal=backend.journal(10**9)) as again:
        assert again.journal is not None
        assert again.journal.recovery is not None
        assert again.journal.recovery.snapshot_seq > 0
        assert again.journal.recovery.replayed == 0
        assert again.core.digest() == before
        # mid (priority 3) is still no victim of a request of priority 3
        with pytest.raises(NoValidHost, match="no host could be freed"):
            await again.select_destinations(
                _spec("x", memory_mb=HOST_RAM, priority=3, force_hosts=["h2"])
            )
        assert (await again.where("mid")).host == "h2"
        assert await again.select_destinations(HIGH) == answers["high"]
        assert _kept(again.core) == kept
