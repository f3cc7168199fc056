"""Restart keeps what issue 14 added: forced and requested destinations, group rules and
hosts, host nodes, and the shuffle's seeded choices, from records and from snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from journal_workload import report

from actorsched import (
    Destination,
    InvalidRequest,
    RequestSpec,
    Scheduler,
    SchedulerConfig,
    ServerGroup,
)
from actorsched.journal import SqliteJournal

CONFIG = SchedulerConfig(
    claim_timeout=1e9,
    service_down_time=1e9,
    shuffle_best_same_weighed_hosts=True,
    seed=11,
    max_instances_per_host=1000,
    max_io_ops_per_host=1000,
)


def _specs() -> list[RequestSpec]:
    anti = ServerGroup(id="g", policy="anti-affinity", max_server_per_host=2, hosts=["h3"])
    return [
        RequestSpec(instance_uuids=["f1"], memory_mb=512, vcpus=1, disk_gb=1, force_hosts=["H2"]),
        RequestSpec(
            instance_uuids=["n1"], memory_mb=512, vcpus=1, disk_gb=1, force_nodes=["node-4"]
        ),
        RequestSpec(
            instance_uuids=["d1"],
            memory_mb=512,
            vcpus=1,
            disk_gb=1,
            requested_destination=Destination(host="h1", node="node-1"),
        ),
        RequestSpec(
            instance_uuids=["g1", "g2", "g3"], memory_mb=512, vcpus=1, disk_gb=1, group=anti
        ),
        RequestSpec(instance_uuids=["s1", "s2"], memory_mb=512, vcpus=1, disk_gb=1),
    ]


@pytest.mark.parametrize("snapshot_every", [1, 1_000_000])  # from a snapshot, from records
async def test_placements_and_their_requests_survive_a_restart(
    tmp_path: Path, snapshot_every: int
) -> None:
    path = tmp_path / "j.sqlite"
    journal = SqliteJournal(path, snapshot_every=snapshot_every)
    async with Scheduler(CONFIG, journal=journal) as s:
        for i in range(1, 5):
            await s.update_host(report(f"h{i}", 1, node=f"node-{i}"))
        placed = [await s.select_destinations(spec) for spec in _specs()]
        assert placed[0][0].host == "h2"
        assert placed[1][0].host == "h4"
        assert placed[2][0].host == "h1"
        group_hosts = [sel.host for sel in placed[3]]
        assert all(group_hosts.count(h) <= 2 for h in group_hosts)
        assert group_hosts.count("h3") <= 1  # h3 holds a member placed elsewhere
        digest = s.core.digest()
        states = await s.host_states()
    assert states["h3"].node == "node-3"
    async with Scheduler(CONFIG, journal=path) as again:
        assert again.core.digest() == digest
        assert await again.host_states() == states
        # each request asked again gets its placements back, unchanged
        for spec, selections in zip(_specs(), placed, strict=True):
            assert await again.select_destinations(spec) == selections
        # and another request for the same uuids is told what differs
        with pytest.raises(InvalidRequest, match="force_hosts"):
            await again.select_destinations(_specs()[0].model_copy(update={"force_hosts": []}))
        changed = _specs()[3].group
        assert changed is not None
        with pytest.raises(InvalidRequest, match="group_hosts"):
            await again.select_destinations(
                _specs()[3].model_copy(update={"group": changed.model_copy(update={"hosts": []})})
            )
        with pytest.raises(InvalidRequest, match="requested_destination"):
            await again.select_destinations(
                _specs()[2].model_copy(update={"requested_destination": None})
            )
