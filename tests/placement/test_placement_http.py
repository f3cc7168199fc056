"""The HTTP/1.1 client against a real Placement that answers chunked: the same
figures, kept-alive connections, every bound a clear error."""

from __future__ import annotations

import doctest
import uuid
from collections.abc import Iterator

import pytest
from placement_fixture import PlacementServer, placement_missing, running_placement
from placement_seed import Seeder

import actorsched.nova.placement as placement_module
from actorsched.nova.placement import (
    MICROVERSION,
    PlacementClient,
    PlacementError,
    PlacementFollower,
    token_auth,
)


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlacementServer]:
    reason = placement_missing()
    if reason is not None:
        pytest.skip(reason)
    with running_placement(tmp_path_factory.mktemp("placement"), chunked=True) as server:
        yield server


def test_the_module_examples_hold() -> None:
    assert doctest.testmod(placement_module).failed == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        PlacementClient("ftp://placement")
    with pytest.raises(ValueError, match="must be positive"):
        PlacementClient("http://placement", timeout=0)


async def test_chunked_answers_on_kept_alive_connections(chunked: PlacementServer) -> None:
    seed = Seeder(chunked.url)
    names = [f"chunk-{i}-{uuid.uuid4().hex[:6]}" for i in range(12)]
    # ~1 KB of traits each: the listing and the traits span many chunks
    traits = {f"CUSTOM_TRAIT_{n:03d}_{'X' * 40}" for n in range(20)}
    providers = [seed.compute_node(n, vcpus=8 + i, traits=traits) for i, n in enumerate(names)]
    seed.close()
    async with PlacementClient(chunked.url, max_connections=2) as client:
        follower = PlacementFollower(client)
        result = await follower.poll()
        assert client.requests == 1 + 4 * len(providers)
        assert client.connections_opened <= 2  # kept alive, two at once
    reports = {s.uuid: s.report for s in result.changed}
    for i, rp in enumerate(providers):
        assert reports[rp].vcpus == 8 + i
        assert set(reports[rp].traits) == traits | {"COMPUTE_NODE"}


async def test_an_answer_over_the_bound_is_an_error_naming_it(chunked: PlacementServer) -> None:
    async with PlacementClient(chunked.url, max_response_bytes=200, max_connections=1) as client:
        with pytest.raises(PlacementError, match=r"over 200 bytes \(max_response_bytes"):
            await client.read("/traits")  # os-traits' hundreds of names
        # the connection was dropped, not left half read: the next call is whole
        root = await client.read("/")
        assert root is not None
        assert root["versions"][0]["max_version"] == "1.39"
        assert client.connections_opened == 2


async def test_the_microversion_and_auth_are_sent(chunked: PlacementServer) -> None:
    async with PlacementClient(chunked.url) as client:
        response = await client.request("GET", "/resource_providers")
        assert response.status == 200
        assert response.headers["openstack-api-version"] == f"placement {MICROVERSION}"
    async with PlacementClient(chunked.url, auth=token_auth("someone:project")) as client:
        response = await client.request("GET", "/resource_providers")
        assert response.status == 403  # noauth2: no admin role
        with pytest.raises(PlacementError, match=r"403 \(check the auth token"):
            await client.read("/resource_providers")
