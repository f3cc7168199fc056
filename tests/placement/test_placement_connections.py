"""``[nova] placement_max_connections`` bounds the Placement calls ``serve`` has in
flight: counted from outside, by a TCP proxy between ``serve`` and a real
openstack-placement that tracks how many connections are open at once."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import start_serve
from placement_fixture import PlacementServer, placement_missing, running_placement
from placement_seed import Seeder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nova_rpc"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "journal"))
from stall_proxy import StallProxy
from test_nova_rpc import AMQP_URL, nova_conf

pytestmark = [pytest.mark.amqp, pytest.mark.timeout(180)]

PROVIDERS = 12  # four reads each at the first poll: far more than the bound at once


@pytest.fixture(scope="module")
def placement(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    reason = placement_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_placement(tmp_path_factory.mktemp("placement-connections")) as server:
        seed = Seeder(server.url)
        for i in range(PROVIDERS):
            seed.compute_node(f"pc-{i}-{uuid.uuid4().hex[:6]}")
        seed.close()
        yield server


@pytest.mark.parametrize("bound", [1, 3])
async def test_serve_has_at_most_the_configured_placement_calls_in_flight(
    placement: PlacementServer, tmp_path: Path, bound: int
) -> None:
    tag = uuid.uuid4().hex[:10]
    conf = nova_conf(tmp_path / "nova.conf", f"nova-{tag}", f"sched-{tag}")
    env = {
        "ACTORSCHED_NOVA_TOPIC": f"scheduler-{tag}",
        "ACTORSCHED_NOVA_PLACEMENT_MAX_CONNECTIONS": str(bound),
    }
    async with StallProxy(placement.url) as proxy:
        args = ("--nova-config", str(conf), "--placement-url", proxy.url)
        serve = await start_serve(AMQP_URL, f"as-{tag}", tmp_path / "j.sqlite", *args, env=env)
        try:
            # the first poll: the listing, then four reads per provider
            read = await proxy.until_requests(1 + 4 * PROVIDERS, within=60)
            assert read >= 1 + 4 * PROVIDERS, read
            # the reads were many, and as many were in flight as allowed, never more
            assert proxy.most_open == bound, (proxy.most_open, proxy.connections)
        finally:
            serve.kill()
            await serve.wait()
