"""Snapshot text: columns (format 6) round-trip; formats 1 to 5 still restore (1 and 2
with unknown request fingerprints; 1 to 3 with no aggregates, host ratios or nodes); bad
columns fail (format 6's own columns: test_snapshot_format6.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import make_report, make_spec

from actorsched import InvalidRequest
from actorsched.core import SchedulerCore
from actorsched.core.image import capture
from actorsched.journal.snapshot import SNAPSHOT_FORMAT, encode, restore


def _busy_core(node: str | None = None) -> SchedulerCore:
    """Hosts with zones, traits and listed instances; assumed, confirmed and released claims;
    ``node``: host c's node."""
    core = SchedulerCore()
    core.update_host(
        make_report("a", 1, availability_zone="az1", traits=["SSD", "GPU"], memory_mb=8192),
        now=1.0,
    )
    core.update_host(make_report("b", 1, enabled=False, num_io_ops=2), now=2.0)
    core.update_host(make_report("c", 1, memory_mb_reserved=512, node=node), now=3.0)
    core.select_destinations(make_spec("vm1", group=("g1", "anti-affinity")), now=4.0)
    core.select_destinations(make_spec("vm2", "vm3", memory_mb=1024), now=5.0)
    host = core.ledger.claims["vm2"].host
    again = make_report(host, 2, instances=["vm2", "old"], node=node if host == "c" else None)
    core.update_host(again, now=6.0)  # confirms vm2
    core.release("vm2", now=7.0)  # still listed: credited back until a report drops it
    core.remove_host("b", now=8.0)
    return core


def test_columns_round_trip_to_the_same_state() -> None:
    core = _busy_core(node="c-node")
    text = encode(capture(core))
    data = json.loads(text)
    assert data["format"] == SNAPSHOT_FORMAT == 11
    assert data["host_facts"] == []  # no host reports facts
    assert data["images"] == []  # no claim keeps an image (no ImagePropertiesWeigher)
    assert set(data["claims"]["image"]) == {None}
    assert set(data["hosts"]["host_facts"]) == {None}
    assert data["hosts"]["host"] == ["a", "c"]  # b was removed
    assert data["hosts"]["node"] == [None, "c-node"]  # None: named as its host
    assert sorted(data["claims"]["instance_uuid"]) == ["vm1", "vm3"]
    assert data["released"]["instance_uuid"] == ["vm2"]
    assert data["claims"]["fingerprint"][data["claims"]["instance_uuid"].index("vm3")] == (
        '{"disk_gb":1,"memory_mb":1024,"vcpus":1}'
    )
    again = SchedulerCore()
    restore(again, text)
    assert again.digest() == core.digest()  # the digest covers the fingerprints
    assert again.host_states() == core.host_states()
    # a repeat is still told from another request with those uuids
    with pytest.raises(InvalidRequest, match="memory_mb 1024 then, 2048 now"):
        again.select_destinations(make_spec("vm3", memory_mb=2048), now=9.0)


def format_5(core: SchedulerCore) -> dict[str, Any]:
    """The state of ``core`` as format 5 wrote it: no claim priority or preempted
    columns, no kept requests (``core`` must have neither a priority nor a preemption)."""
    data: dict[str, Any] = json.loads(encode(capture(core)))
    assert data.pop("host_facts") == []  # format 6 and before kept no host facts
    assert set(data["hosts"].pop("host_facts")) <= {None}
    for column in ("vcpus_reserved", "local_gb_reserved"):  # format 8's
        assert set(data["hosts"].pop(column)) <= {0}
    for column in ("memory_mb_units", "vcpus_units", "local_gb_units"):
        assert set(data["hosts"].pop(column)) <= {None}
    assert set(data["claims"].pop("priority")) <= {0}
    assert all(not p for p in data["claims"].pop("preempted"))
    del data["requests"]
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 5
    return data


def _format_3(core: SchedulerCore) -> str:
    """The same state as format 3 wrote it: no aggregates, no host ratio or node columns."""
    data = format_5(core)
    assert data.pop("moves") == []
    assert data["aggregates"] == []  # format 3 could not say more
    del data["aggregates"]
    for field in ("ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio"):
        assert set(data["hosts"].pop(field)) == {None}
    del data["hosts"]["node"]
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 3
    return json.dumps(data)


def test_a_format_3_snapshot_still_restores_with_its_fingerprints() -> None:
    core = _busy_core()
    again = SchedulerCore()
    restore(again, _format_3(core))
    assert again.digest() == core.digest()


def test_a_format_3_snapshot_restores_with_nodes_named_as_their_hosts() -> None:
    core = SchedulerCore()
    core.update_host(make_report("a", 1), now=1.0)
    core.select_destinations(make_spec("vm1"), now=2.0)
    again = SchedulerCore()
    restore(again, _format_3(core))
    assert again.digest() == core.digest()
    assert again.host_states()["a"].node == "a"


def _format_2(core: SchedulerCore) -> str:
    """The same state as format 2 wrote it: the claims have no fingerprint column."""
    data = json.loads(_format_3(core))
    del data["claims"]["fingerprint"]
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 2
    return json.dumps(data)


def _same_but_fingerprints(a: SchedulerCore, b: SchedulerCore) -> None:
    assert a.host_states() == b.host_states()
    assert a.claims() == b.claims()
    for uuid, claim in a.ledger.claims.items():
        assert claim.selection == b.ledger.claims[uuid].selection
    assert {c.fingerprint for c in b.ledger.claims.values()} == {None}


def test_a_format_2_snapshot_restores_with_unknown_fingerprints() -> None:
    core = _busy_core()
    again = SchedulerCore()
    restore(again, _format_2(core))
    _same_but_fingerprints(core, again)
    # unknown: any repeat of a held uuid is accepted, as format 2's writer did
    held = again.select_destinations(make_spec("vm3", memory_mb=2048), now=9.0)
    assert held == [core.ledger.claims["vm3"].selection]


def _format_1(core: SchedulerCore) -> str:
    """The same state as the first snapshot format wrote it: one object per entry."""
    data = json.loads(_format_2(core))

    def rows(columns: dict[str, list[Any]]) -> list[dict[str, Any]]:
        return [
            dict(zip(columns, values, strict=True))
            for values in zip(*columns.values(), strict=True)
        ]

    hosts = []
    for row in rows(data["hosts"]):
        reported_at = row.pop("reported_at")
        hosts.append({"report": row, "reported_at": reported_at})
    claims = []
    for row in rows(data["claims"]):
        alternates = row.pop("alternates")
        row["selection"] = {
            "instance_uuid": row["instance_uuid"],
            "host": row["host"],
            "alternates": alternates,
        }
        claims.append(row)
    return json.dumps(
        {"format": 1, "hosts": hosts, "claims": claims, "released": rows(data["released"])}
    )


def test_a_format_1_snapshot_still_restores() -> None:
    core = _busy_core()
    again = SchedulerCore()
    restore(again, _format_1(core))
    _same_but_fingerprints(core, again)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d["hosts"]["generation"].pop(), "columns must be lists of one length"),
        (lambda d: d["claims"].pop("vcpus"), "snapshot claims must have exactly the columns"),
        (lambda d: d["released"].update(extra=[]), "snapshot released must have exactly"),
        (lambda d: d.update(hosts=[1, 2]), "snapshot hosts must have exactly the columns"),
        (lambda d: d.update(format=SNAPSHOT_FORMAT + 1), "unknown snapshot format"),
        (lambda d: d["hosts"].pop("node"), "snapshot hosts must have exactly the columns"),
        (lambda d: d["hosts"].pop("host_facts"), "snapshot hosts must have exactly the columns"),
        (lambda d: d.update(host_facts={}), "snapshot host_facts must be a list"),
        (lambda d: d["hosts"]["host_facts"].__setitem__(0, 3), "names host_facts 3, not an"),
        (lambda d: d["claims"].pop("fingerprint"), "snapshot claims must have exactly"),
    ],
)
def test_damaged_columns_are_refused_by_name(damage: Any, message: str) -> None:
    data = json.loads(encode(capture(_busy_core())))
    damage(data)
    with pytest.raises(ValueError, match=message):
        restore(SchedulerCore(), json.dumps(data))
