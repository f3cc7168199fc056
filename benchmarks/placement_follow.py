"""What following Placement costs: one full read and one idle poll, at N providers.

For each size it starts a fresh real Placement (``tests/placement/placement_server.py``
under Nova's venv; SQLite, one request at a time), seeds N compute node
providers as Nova's computes do (provider, inventories, ~20 traits, an
aggregate per 100 providers) and two instances each (``POST /allocations``,
500 consumers a call), then times, with :class:`PlacementFollower`:

* the full read (the first poll: a listing and four calls per provider),
* an idle poll without a sweep (the listing only) and with the default sweep,
* a poll after one provider's inventory changed.

Each figure is wall time (mostly Placement's); ``*_client_cpu_s`` is this
process's CPU time for the same poll, the follower's own share.

Run it from the repository root (``make nova-venv`` first)::

    .venv/bin/python -m benchmarks.placement_follow --providers 1000 10000 --read-concurrency 1 8

It prints one JSON line per size and a table. Not a timed test: the figures
depend on the machine, and Placement's own cost is most of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from actorsched.nova.placement import (
    DEFAULT_READ_CONCURRENCY,
    DEFAULT_SWEEP_PER_POLL,
    PlacementClient,
    PlacementFollower,
)

_TESTS = Path(__file__).resolve().parents[1] / "tests" / "placement"
sys.path.insert(0, str(_TESTS))  # the server and its fixture live with the tests

from placement_fixture import PlacementServer, placement_missing  # noqa: E402

_CONSUMERS_PER_POST = 500
_SEED_CONNECTIONS = 8
_TRAITS = 20  # Nova's libvirt driver sets a few dozen COMPUTE_* capability traits


async def _expect(client: PlacementClient, status: int, method: str, path: str, body: Any,
                  version: str) -> Any:  # fmt: skip
    response = await client.request(method, path, body, version=version)
    if response.status != status:
        raise RuntimeError(f"{method} {path}: {response.status} {response.body[:300]!r}")
    return response.json()


async def seed(client: PlacementClient, providers: int, instances: int) -> list[str]:
    """N compute nodes as Nova's report client makes them, and their instances."""
    found = await client.read("/traits?name=startswith:COMPUTE_")
    assert found is not None
    traits = [*sorted(found["traits"])[:_TRAITS], "COMPUTE_NODE"]
    aggregates = [str(uuid.uuid4()) for _ in range(max(1, providers // 100))]
    uuids = [str(uuid.uuid4()) for _ in range(providers)]

    async def one(i: int) -> None:
        rp = uuids[i]
        await _expect(client, 200, "POST", "/resource_providers",
                      {"name": f"compute-{i:05d}", "uuid": rp}, "1.20")  # fmt: skip
        inventories = {
            "VCPU": {"total": 64, "max_unit": 64, "allocation_ratio": 4.0},
            "MEMORY_MB": {"total": 262_144, "reserved": 512, "max_unit": 262_144},
            "DISK_GB": {"total": 2_000, "max_unit": 2_000},
        }
        base = f"/resource_providers/{rp}"
        body: dict[str, Any] = {"resource_provider_generation": 0, "inventories": inventories}
        await _expect(client, 200, "PUT", f"{base}/inventories", body, "1.26")
        body = {"resource_provider_generation": 1, "traits": traits}
        await _expect(client, 200, "PUT", f"{base}/traits", body, "1.6")
        body = {"resource_provider_generation": 2, "aggregates": [aggregates[i % len(aggregates)]]}
        await _expect(client, 200, "PUT", f"{base}/aggregates", body, "1.19")

    todo = iter(range(providers))

    async def worker() -> None:
        for i in todo:
            await one(i)

    await asyncio.gather(*(worker() for _ in range(client.max_connections)))
    consumers = {
        str(uuid.uuid4()): {
            "allocations": {rp: {"resources": {"VCPU": 2, "MEMORY_MB": 4_096, "DISK_GB": 20}}},
            "project_id": "project",
            "user_id": "user",
            "consumer_generation": None,
        }
        for rp in uuids
        for _ in range(instances)
    }
    items = list(consumers.items())
    for at in range(0, len(items), _CONSUMERS_PER_POST):
        batch = dict(items[at : at + _CONSUMERS_PER_POST])
        await _expect(client, 204, "POST", "/allocations", batch, "1.28")
    return uuids


async def measure(url: str, providers: int, instances: int, connections: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "providers": providers,
        "instances": providers * instances,
        "read_concurrency": connections,
    }
    async with PlacementClient(url, max_connections=_SEED_CONNECTIONS, timeout=120) as seeder:
        started = time.perf_counter()
        uuids = await seed(seeder, providers, instances)
        out["seed_s"] = round(time.perf_counter() - started, 1)
    # the follower's calls in flight: the client's bound, as serve's
    # [nova] placement_read_concurrency sets it
    async with PlacementClient(url, max_connections=connections, timeout=120) as client:
        listing = await client.request("GET", "/resource_providers?required=COMPUTE_NODE")
        out["listing_bytes"] = len(listing.body)
        follower = PlacementFollower(client, sweep_per_poll=0, max_providers=providers)
        cpu = time.process_time()
        full = await follower.poll()
        # this process runs the follower only: its CPU is the follower's share
        out["full_read_client_cpu_s"] = round(time.process_time() - cpu, 2)
        assert len(full.changed) == providers, (len(full.changed), full.refused)
        out["full_read_s"] = round(full.seconds, 2)
        out["full_read_requests"] = full.requests
        cpu = time.process_time()
        idle = [await follower.poll() for _ in range(5)]
        out["idle_poll_client_cpu_s"] = round((time.process_time() - cpu) / 5, 3)
        assert all(not r.changed and not r.reread for r in idle)
        out["idle_poll_s"] = round(min(r.seconds for r in idle), 3)
        out["idle_poll_requests"] = idle[0].requests
        sweeping = PlacementFollower(client, max_providers=providers)
        await sweeping.poll()
        swept = [await sweeping.poll() for _ in range(3)]
        out["idle_poll_sweep_s"] = round(min(r.seconds for r in swept), 3)
        out["idle_poll_sweep_requests"] = swept[0].requests
        out["sweep_per_poll"] = DEFAULT_SWEEP_PER_POLL
        rp = uuids[len(uuids) // 2]
        generation = (await client.read(f"/resource_providers/{rp}"))["generation"]  # type: ignore[index]
        body = {
            "resource_provider_generation": generation,
            "inventories": {
                "VCPU": {"total": 128, "max_unit": 128, "allocation_ratio": 4.0},
                "MEMORY_MB": {"total": 262_144, "reserved": 512, "max_unit": 262_144},
                "DISK_GB": {"total": 2_000, "max_unit": 2_000},
            },
        }
        await _expect(client, 200, "PUT", f"/resource_providers/{rp}/inventories", body, "1.26")
        changed = await follower.poll()
        assert changed.reread == (rp,), changed.reread
        out["one_changed_poll_s"] = round(changed.seconds, 3)
        out["one_changed_poll_requests"] = changed.requests
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--instances", type=int, default=2, help="instances per provider")
    parser.add_argument(
        "--read-concurrency",
        type=int,
        nargs="+",
        default=[DEFAULT_READ_CONCURRENCY],
        help="the follower's calls in flight (its client's max_connections); each value "
        "is measured against a fresh Placement of each size",
    )
    args = parser.parse_args()
    reason = placement_missing()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    rows = []
    for n in args.providers:
        for bound in args.read_concurrency:
            with tempfile.TemporaryDirectory(prefix="placement-bench-") as state:
                server = PlacementServer(Path(state))
                server.start()
                try:
                    row = asyncio.run(measure(server.url, n, args.instances, bound))
                finally:
                    server.stop()
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(f"{'providers':>9} {'bound':>5} {'full read':>10} {'calls':>7} {'idle poll':>10} "
          f"{'calls':>5} {'+sweep':>8} {'calls':>5} {'1 changed':>10} {'listing':>10}")  # fmt: skip
    for r in rows:
        print(
            f"{r['providers']:>9,} {r['read_concurrency']:>5} "
            f"{r['full_read_s']:>9}s {r['full_read_requests']:>7,} "
            f"{r['idle_poll_s']:>9}s {r['idle_poll_requests']:>5} "
            f"{r['idle_poll_sweep_s']:>7}s {r['idle_poll_sweep_requests']:>5} "
            f"{r['one_changed_poll_s']:>9}s {r['listing_bytes'] / 1e6:>8.2f}MB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
