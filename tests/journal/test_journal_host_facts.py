"""Host facts (hypervisor_type, hypervisor_version, supported_instances, cpu_info,
stats) survive a restart as the other report fields do: SQLite and PostgreSQL,
from a snapshot and from records; a report without facts is recorded as before
they existed, and a format 6 snapshot (no facts) still restores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_backends import BACKENDS, Backend, make_backend
from journal_workload import report

from actorsched import NoValidHost, RequestSpec, Scheduler, SchedulerConfig
from actorsched.actor import Envelope
from actorsched.core import Command, SchedulerCore, UpdateHost, UpdateHosts
from actorsched.core.host_facts import FACT_FIELDS
from actorsched.core.image import capture
from actorsched.journal.records import records_of
from actorsched.journal.snapshot import encode, restore
from actorsched.models import BUILTIN_FILTERS, HOST_FACTS_FILTERS

CONFIG = SchedulerConfig(
    seed=1, service_down_time=1e9, enabled_filters=[*BUILTIN_FILTERS, *HOST_FACTS_FILTERS]
)
KVM = ["x86_64", "kvm", "hvm"]
CPU_INFO = '{"vendor": "Intel", "maxphysaddr": {"mode": "emulate", "bits": 42}}'


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    made = make_backend(request.param, tmp_path)
    yield made
    made.cleanup()


def _spec(uuid: str, **fields: object) -> RequestSpec:
    return RequestSpec.model_validate(
        {"instance_uuids": [uuid], "memory_mb": 64, "vcpus": 1, "disk_gb": 1, **fields}
    )


async def _build(s: Scheduler) -> None:
    """Hosts with facts (some shared, one changed, one taken away) and placements
    that read them."""
    kvm: dict[str, Any] = {
        "supported_instances": [KVM],
        "hypervisor_type": "QEMU",
        "hypervisor_version": 6_000_000,
    }
    await s.update_host(report("h0", 1, **kvm))
    await s.update_host(report("h1", 1, **kvm, cpu_info=CPU_INFO, stats={"gpu": "a100"}))
    await s.update_hosts([report(f"b{i}", 1, **kvm) for i in range(9)])  # the batch path
    await s.update_host(report("h2", 1, supported_instances=[["aarch64", "kvm", "hvm"]]))
    await s.update_host(report("h2", 2, supported_instances=[["i686", "kvm", "hvm"]]))
    await s.update_host(report("h3", 1, stats={"gpu": "h100"}))
    await s.update_host(report("h3", 2))  # no facts any more
    await s.select_destinations(_spec("vm1", extra_specs={"capabilities:cpu_info:vendor": "Intel"}))
    await s.select_destinations(_spec("vm2", image_properties={"hw_architecture": "i686"}))


@pytest.mark.parametrize("snapshot_every", [1_000_000, 3], ids=["records", "snapshot"])
async def test_host_facts_survive_a_restart(backend: Backend, snapshot_every: int) -> None:
    async with Scheduler(CONFIG, journal=backend.journal(snapshot_every)) as s:
        await _build(s)
        before = s.core.digest()
        claims = s.core.claims()
    assert claims == {"vm1": ("h1", False), "vm2": ("h2", False)}
    async with Scheduler(CONFIG, journal=backend.journal(snapshot_every)) as again:
        assert again.journal is not None
        assert again.journal.recovery is not None
        if snapshot_every == 3:
            assert again.journal.recovery.snapshot_seq > 0
        assert again.core.digest() == before  # the digest covers each host's facts
        gpu = await again.select_destinations(
            _spec("vm3", extra_specs={"capabilities:gpu": "a100"})
        )
        assert gpu[0].host == "h1"
        with pytest.raises(NoValidHost, match="ComputeCapabilitiesFilter removed 13"):
            await again.select_destinations(_spec("vm5", extra_specs={"capabilities:gpu": "h100"}))
        with pytest.raises(NoValidHost, match="ImagePropertiesFilter removed"):
            await again.select_destinations(_spec("vm4", image_properties={"img_hv_type": "xen"}))


async def test_a_report_without_facts_is_recorded_as_before_facts() -> None:
    plain = report("h0", 1)
    with_facts = report("h1", 1, supported_instances=[KVM])

    def applied(command: Command[Any], result: object) -> Envelope:
        return Envelope(command, asyncio.get_running_loop().create_future(), 1.0, result)

    first, second = records_of(
        [applied(UpdateHost(plain), True), applied(UpdateHost(with_facts), True)]
    )
    assert json.loads(first.body) == plain.model_dump(exclude=set(FACT_FIELDS))
    assert json.loads(second.body)["supported_instances"] == [KVM]
    batch = records_of([applied(UpdateHosts((plain, with_facts)), [True, True])])
    assert [r.body for r in batch] == [first.body, second.body]


def test_a_format_6_snapshot_restores_with_no_host_facts() -> None:
    core = SchedulerCore(CONFIG)
    core.update_host(report("h0", 1), 1.0)
    core.select_destinations(_spec("vm1"), 2.0)
    data = json.loads(encode(capture(core)))
    assert data.pop("host_facts") == []
    assert data["hosts"].pop("host_facts") == [None]
    for column in ("vcpus_reserved", "local_gb_reserved"):  # format 8's
        assert set(data["hosts"].pop(column)) <= {0}
    for column in ("memory_mb_units", "vcpus_units", "local_gb_units"):
        assert set(data["hosts"].pop(column)) <= {None}
    data["claims"].pop("owner", None)  # format 10's
    data["claims"].pop("image", None)  # format 11's
    data.pop("images", None)
    data["format"] = 6
    again = SchedulerCore(CONFIG)
    restore(again, json.dumps(data))
    assert again.digest() == core.digest()
