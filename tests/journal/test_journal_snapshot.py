"""Snapshot text: columns (format 2) round-trip; format 1 files still restore; bad columns fail."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import make_report, make_spec

from actorsched.core import SchedulerCore
from actorsched.core.snapshot import capture
from actorsched.journal.snapshot import SNAPSHOT_FORMAT, encode, restore


def _busy_core() -> SchedulerCore:
    """Hosts with zones, traits and listed instances; assumed, confirmed and released claims."""
    core = SchedulerCore()
    core.update_host(
        make_report("a", 1, availability_zone="az1", traits=["SSD", "GPU"], memory_mb=8192),
        now=1.0,
    )
    core.update_host(make_report("b", 1, enabled=False, num_io_ops=2), now=2.0)
    core.update_host(make_report("c", 1, memory_mb_reserved=512), now=3.0)
    core.select_destinations(make_spec("vm1", group=("g1", "anti-affinity")), now=4.0)
    core.select_destinations(make_spec("vm2", "vm3", memory_mb=1024), now=5.0)
    host = core.ledger.claims["vm2"].host
    core.update_host(make_report(host, 2, instances=["vm2", "old"]), now=6.0)  # confirms vm2
    core.release("vm2", now=7.0)  # still listed: credited back until a report drops it
    core.remove_host("b", now=8.0)
    return core


def test_columns_round_trip_to_the_same_state() -> None:
    core = _busy_core()
    text = encode(capture(core))
    data = json.loads(text)
    assert data["format"] == SNAPSHOT_FORMAT == 2
    assert data["hosts"]["host"] == ["a", "c"]  # b was removed
    assert sorted(data["claims"]["instance_uuid"]) == ["vm1", "vm3"]
    assert data["released"]["instance_uuid"] == ["vm2"]
    again = SchedulerCore()
    restore(again, text)
    assert again.digest() == core.digest()
    assert again.host_states() == core.host_states()


def _format_1(core: SchedulerCore) -> str:
    """The same state as the first snapshot format wrote it: one object per entry."""
    data = json.loads(encode(capture(core)))

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
    assert again.digest() == core.digest()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d["hosts"]["generation"].pop(), "columns must be lists of one length"),
        (lambda d: d["claims"].pop("vcpus"), "snapshot claims must have exactly the columns"),
        (lambda d: d["released"].update(extra=[]), "snapshot released must have exactly"),
        (lambda d: d.update(hosts=[1, 2]), "snapshot hosts must have exactly the columns"),
        (lambda d: d.update(format=3), "unknown snapshot format"),
    ],
)
def test_damaged_columns_are_refused_by_name(damage: Any, message: str) -> None:
    data = json.loads(encode(capture(_busy_core())))
    damage(data)
    with pytest.raises(ValueError, match=message):
        restore(SchedulerCore(), json.dumps(data))
