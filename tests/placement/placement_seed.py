"""Seed a Placement as Nova 34's computes do, through its REST API (the standard
library's ``http.client``, so the follower and claims are not checked with
their own HTTP code).

The calls and microversions are those of ``nova/scheduler/client/report.py``:
a compute node provider is created with ``POST /resource_providers`` (1.20),
its inventories set with ``PUT .../inventories`` (1.26), its traits with
``PUT /traits/CUSTOM_*`` then ``PUT .../traits`` (1.6), its aggregates with
``PUT .../aggregates`` (1.19), and the scheduler's claims are ``PUT
/allocations/{consumer}`` (1.36, its allocation_request_version). Many
consumers at once go in one ``POST /allocations`` (1.28).
"""

from __future__ import annotations

import http.client
import json
import uuid as uuidlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

Resources = Mapping[str, int]
# Nova's [DEFAULT] initial_*_allocation_ratio and reserved_host_memory_mb
NOVA_CPU_RATIO = 4.0
NOVA_RAM_RATIO = 1.0
NOVA_DISK_RATIO = 1.0
NOVA_RESERVED_MB = 512


class SeedError(AssertionError):
    pass


class Seeder:
    """A blocking Placement client on one kept-alive connection, token ``admin``."""

    def __init__(self, url: str, token: str = "admin") -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None
        self._host, self._port = parts.hostname, parts.port or 80
        self._token = token
        self._connection: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def call(
        self, method: str, path: str, body: Any = None, version: str = "1.36"
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {
            "X-Auth-Token": self._token,
            "OpenStack-API-Version": f"placement {version}",
            "Accept": "application/json",
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            if self._connection is None:
                self._connection = http.client.HTTPConnection(self._host, self._port, timeout=60)
            try:
                self._connection.request(method, path, body=data, headers=headers)
                response = self._connection.getresponse()
                raw = response.read()
            except (http.client.RemoteDisconnected, ConnectionError, BrokenPipeError):
                self.close()
                if attempt:
                    raise
                continue
            return response.status, json.loads(raw) if raw else None
        raise AssertionError("unreachable")

    def expect(
        self, status: int, method: str, path: str, body: Any = None, version: str = "1.36"
    ) -> Any:
        got, answer = self.call(method, path, body, version)
        if got != status:
            raise SeedError(f"{method} {path} answered {got}, not {status}: {answer}")
        return answer

    # -- providers, as Nova's compute report client makes them ---------------------------

    def generation(self, provider: str) -> int:
        answer = self.expect(200, "GET", f"/resource_providers/{provider}")
        return int(answer["generation"])

    def provider(self, name: str, uuid: str | None = None, parent: str | None = None) -> str:
        body: dict[str, Any] = {"name": name, "uuid": uuid or str(uuidlib.uuid4())}
        if parent is not None:
            body["parent_provider_uuid"] = parent
        return str(self.expect(200, "POST", "/resource_providers", body, "1.20")["uuid"])

    def inventories(self, provider: str, inventories: Mapping[str, Mapping[str, Any]]) -> None:
        body = {
            "resource_provider_generation": self.generation(provider),
            "inventories": {rc: dict(inv) for rc, inv in inventories.items()},
        }
        self.expect(200, "PUT", f"/resource_providers/{provider}/inventories", body, "1.26")

    def traits(self, provider: str, traits: Iterable[str]) -> None:
        names = sorted(traits)
        for name in names:
            if name.startswith("CUSTOM_"):
                status, answer = self.call("PUT", f"/traits/{name}", None, "1.6")
                if status not in (201, 204):
                    raise SeedError(f"PUT /traits/{name} answered {status}: {answer}")
        body = {"resource_provider_generation": self.generation(provider), "traits": names}
        self.expect(200, "PUT", f"/resource_providers/{provider}/traits", body, "1.6")

    def aggregates(self, provider: str, aggregates: Iterable[str]) -> None:
        body = {
            "resource_provider_generation": self.generation(provider),
            "aggregates": sorted(aggregates),
        }
        self.expect(200, "PUT", f"/resource_providers/{provider}/aggregates", body, "1.19")

    def compute_node(
        self,
        name: str,
        *,
        uuid: str | None = None,
        vcpus: int = 16,
        memory_mb: int = 32_768,
        disk_gb: int = 1_000,
        reserved_vcpus: int = 0,
        reserved_mb: int = NOVA_RESERVED_MB,
        reserved_gb: int = 0,
        cpu_ratio: float = NOVA_CPU_RATIO,
        ram_ratio: float = NOVA_RAM_RATIO,
        disk_ratio: float = NOVA_DISK_RATIO,
        extra: Mapping[str, Mapping[str, Any]] | None = None,
        traits: Iterable[str] = (),
        aggregates: Iterable[str] = (),
    ) -> str:
        """A compute node provider as Nova's libvirt driver reports one: VCPU,
        MEMORY_MB and DISK_GB with max_unit = total, the COMPUTE_NODE trait."""
        provider = self.provider(name, uuid)
        inventories: dict[str, Mapping[str, Any]] = {
            "VCPU": _inventory(vcpus, reserved_vcpus, cpu_ratio),
            "MEMORY_MB": _inventory(memory_mb, reserved_mb, ram_ratio),
            "DISK_GB": _inventory(disk_gb, reserved_gb, disk_ratio),
        }
        inventories.update(extra or {})
        self.inventories(provider, inventories)
        self.traits(provider, {"COMPUTE_NODE", *traits})
        aggregates = list(aggregates)
        if aggregates:
            self.aggregates(provider, aggregates)
        return provider

    def delete_provider(self, provider: str) -> None:
        self.expect(204, "DELETE", f"/resource_providers/{provider}")

    # -- allocations ------------------------------------------------------------------------

    def consumer(self, consumer: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.expect(200, "GET", f"/allocations/{consumer}")
        return answer

    def allocate(
        self,
        consumer: str,
        allocations: Mapping[str, Resources],
        project: str = "project",
        user: str = "user",
    ) -> None:
        """``PUT /allocations/{consumer}`` at the consumer's generation (None when new)."""
        body = {
            "allocations": {rp: {"resources": dict(r)} for rp, r in allocations.items()},
            "project_id": project,
            "user_id": user,
            "consumer_generation": self.consumer(consumer).get("consumer_generation"),
        }
        self.expect(204, "PUT", f"/allocations/{consumer}", body)

    def allocate_many(
        self,
        consumers: Mapping[str, Mapping[str, Resources]],
        project: str = "project",
        user: str = "user",
    ) -> None:
        """New consumers' allocations in one ``POST /allocations``."""
        body = {
            consumer: {
                "allocations": {rp: {"resources": dict(r)} for rp, r in allocations.items()},
                "project_id": project,
                "user_id": user,
                "consumer_generation": None,
            }
            for consumer, allocations in consumers.items()
        }
        self.expect(204, "POST", "/allocations", body, "1.28")

    def delete_allocations(self, consumer: str) -> None:
        """``DELETE /allocations/{consumer}`` (Nova's forced delete)."""
        self.expect(204, "DELETE", f"/allocations/{consumer}")

    def usages(self, provider: str) -> dict[str, int]:
        answer = self.expect(200, "GET", f"/resource_providers/{provider}/usages")
        return {rc: int(n) for rc, n in answer["usages"].items() if n}


def _inventory(total: int, reserved: int, ratio: float) -> dict[str, Any]:
    return {
        "total": total,
        "reserved": reserved,
        "min_unit": 1,
        "max_unit": total,
        "step_size": 1,
        "allocation_ratio": ratio,
    }
