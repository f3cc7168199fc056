"""Placement in step: host state followed from Placement, claims written to it first.

What the Nova endpoint does with ``[nova] placement_url`` (see
:mod:`.placement` for the REST client, the follower and the claim writer):

* **Host state.** While this process owns the state (a term), a poll every
  ``poll_interval`` seconds turns each compute node provider whose
  generation moved into a host report, applied through the owner like any
  report; a provider that is gone is removed. A provider's consumers are its
  listed instances and its usages its used figures, read in one call, so a
  claim is confirmed exactly when Placement holds its allocation. Hosts are
  keyed by the provider's name (Nova's node); the endpoint maps nodes to
  service hosts from Nova's instance casts.
* **Claims, as Nova's scheduler writes them** (``claim_resources``): the
  owner places, then each placed instance's allocation is ``PUT`` to
  Placement before the answer is sent. A refusal (the provider's capacity
  is gone, a concurrent writer, an inventory rule) frees that instance's
  claim, re-reads the provider, and places that instance again without the
  refused host, up to ``max_attempts`` tries; a request that still fails
  part-way removes every allocation it wrote and frees its claims, and is
  NoValidHost naming why. Nothing is answered that Placement refused.
* **Hypervisor facts.** Placement does not hold what a hypervisor runs
  (``supported_instances``, its type and version: Nova's scheduler reads them
  from its compute node records); ``host_facts`` (``[nova]
  placement_host_facts``, a JSON file by node) adds them to each followed
  host's report, for ImagePropertiesFilter and ComputeCapabilitiesFilter.
* **Authentication.** As Nova's own ``[placement]`` section says
  (:class:`~.conf.PlacementAuth`): ``auth_type = password`` (Keystone v3) gets
  a token from ``POST {auth_url}/v3/auth/tokens`` (:class:`KeystoneToken`),
  sends it as ``X-Auth-Token``, takes a new one before it expires and when
  Placement answers 401; otherwise ``[nova] placement_token`` is sent.
* **Moves.** Nova's conductor moves the instance's source allocation to the
  migration's uuid before it asks; the instance's old claim is freed here
  (the migration's allocation, which the follower lists on the source, holds
  the source's resources), and the destination is claimed as a new
  placement: a consumer that still holds allocations (an evacuation) is
  doubled up as Nova does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.host_facts import FACT_FIELDS
from ..errors import NoValidHost
from ..models import HostReport, RequestSpec, Selection
from ..scheduler import Scheduler
from .conf import NovaConfigError, PlacementAuth
from .placement import (
    AuthHook,
    ClaimRefused,
    PlacementClaims,
    PlacementClient,
    PlacementError,
    PlacementFollower,
    PlacementUnavailable,
    allocation_request,
    token_auth,
)

__all__ = [
    "KeystoneToken",
    "PlacedInstance",
    "PlacementLink",
    "load_host_facts",
    "placement_auth",
]

log = logging.getLogger("actorsched.nova.placement")

DEFAULT_POLL_INTERVAL = 1.0


HostFacts = Mapping[str, Mapping[str, Any]]


def _checked_facts(facts: HostFacts) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for node, given in facts.items():
        if not isinstance(given, Mapping) or not set(given) <= set(FACT_FIELDS):
            raise ValueError(
                f"host facts of {node!r} must be an object of some of {list(FACT_FIELDS)}"
            )
        # validated as a report would carry them
        empty = dict.fromkeys(
            ("generation", "memory_mb", "memory_mb_used", "vcpus", "vcpus_used", "local_gb"), 0
        )
        probe = HostReport.model_validate({"host": node, "local_gb_used": 0, **empty, **given})
        out[node] = {field: getattr(probe, field) for field in given}
    return out


def load_host_facts(path: Path) -> dict[str, dict[str, Any]]:
    """The hypervisor facts of followed hosts, by node, from a JSON file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: host facts must be a JSON object of nodes")
    return _checked_facts(data)


async def _no_headers() -> Mapping[str, str]:
    return {}


class KeystoneToken:
    """An :data:`~.placement.AuthHook` of a Keystone v3 password authentication, from
    nova.conf's ``[placement]`` (``auth_type = password``), as keystoneauth's
    password plugin authenticates Nova to Placement.

    ``POST {auth_url}/v3/auth/tokens`` with the user (``user_id``, or
    ``username`` in its domain), the password and the scope (``project_id``,
    or ``project_name`` in its domain, or ``system_scope``); the token is the
    answer's ``X-Subject-Token``, sent as ``X-Auth-Token`` until
    ``stale_seconds`` before its ``expires_at`` (keystoneauth's 30 s), then a
    new one is taken. One authentication at a time: calls that find no valid
    token wait for the one in flight. A 401 from Placement (a revoked token)
    makes the client call :meth:`invalidate` and ask again with a new token.
    Keystone unreachable is :class:`~.placement.PlacementUnavailable`; its
    refusal (bad credentials, an unknown project) a
    :class:`~.placement.PlacementError` naming the status and Keystone's
    message, never the password.
    """

    def __init__(
        self, auth: PlacementAuth, *, timeout: float = 10.0, stale_seconds: float = 30.0
    ) -> None:
        problem = auth.problem()
        if problem or not auth.keystone:
            raise NovaConfigError(
                problem or f"[placement] auth_type = {auth.auth_type}: no Keystone"
            )
        url = auth.options["auth_url"].rstrip("/")
        self.url = url if url.endswith("/v3") else f"{url}/v3"
        self._body = {"auth": {"identity": _identity(auth), **_scope(auth)}}
        self._keystone = PlacementClient(self.url, timeout=timeout, auth=_no_headers)
        self.stale_seconds = stale_seconds
        self._token: str | None = None
        self.good_until = 0.0  # monotonic
        self._lock = asyncio.Lock()
        self.issued = 0  # tokens taken (for tests and metrics)
        self.expires_at: datetime | None = None

    async def __call__(self) -> Mapping[str, str]:
        if self._token is None or time.monotonic() >= self.good_until:
            async with self._lock:
                if self._token is None or time.monotonic() >= self.good_until:
                    await self._issue()
        assert self._token is not None
        return {"X-Auth-Token": self._token}

    def invalidate(self, sent: Mapping[str, str]) -> None:
        """Placement refused the token in ``sent``: take a new one next time (unless
        another call already did)."""
        if sent.get("X-Auth-Token") == self._token:
            self._token = None

    async def aclose(self) -> None:
        await self._keystone.close()

    async def _issue(self) -> None:
        where = f"Keystone at {self.url}"
        try:
            response = await self._keystone.request("POST", "/auth/tokens", self._body)
        except PlacementUnavailable as exc:
            raise PlacementUnavailable(
                f"{where} (nova.conf [placement] auth_url) could not give a token: {exc}"
            ) from None
        token = response.headers.get("x-subject-token")
        if response.status != 201 or not token:
            detail = ""
            try:
                error = response.json().get("error", {})
                detail = f": {error.get('message') or error.get('title') or ''}"
            except (ValueError, AttributeError):
                pass
            raise PlacementError(
                f"{where} refused the credentials of nova.conf [placement] with "
                f"{response.status}{detail}",
                status=response.status,
            )
        expires = datetime.fromisoformat(response.json()["token"]["expires_at"])
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        left = (expires - datetime.now(UTC)).total_seconds()
        self._token = token
        self.expires_at = expires
        self.good_until = time.monotonic() + left - self.stale_seconds
        self.issued += 1
        log.info("Keystone token for Placement taken from %s, expires %s", self.url, expires)


def _identity(auth: PlacementAuth) -> dict[str, Any]:
    user: dict[str, Any] = {"password": auth.options["password"]}
    if auth.get("user_id"):
        user["id"] = auth.options["user_id"]
    else:
        user["name"] = auth.options["username"]
        kind, value = auth.domain("user") or ("id", "default")
        user["domain"] = {kind: value}
    return {"methods": ["password"], "password": {"user": user}}


def _scope(auth: PlacementAuth) -> dict[str, Any]:
    if auth.get("project_id"):
        return {"scope": {"project": {"id": auth.options["project_id"]}}}
    if auth.get("project_name"):
        kind, value = auth.domain("project") or ("id", "default")
        return {
            "scope": {"project": {"name": auth.options["project_name"], "domain": {kind: value}}}
        }
    if auth.get("system_scope"):
        return {"scope": {"system": {auth.options["system_scope"]: True}}}
    return {}  # unscoped, as the section asks


def placement_auth(auth: PlacementAuth, token: str, *, timeout: float = 10.0) -> AuthHook:
    """How to authenticate to Placement: Keystone when nova.conf's ``[placement]`` says
    ``auth_type = password``, else ``token`` as ``X-Auth-Token`` (noauth2's
    ``admin`` by default); :class:`~.conf.NovaConfigError` when the section asks
    for what actorsched does not build, or lacks an option."""
    problem = auth.problem()
    if problem:
        raise NovaConfigError(problem)
    if auth.keystone:
        return KeystoneToken(auth, timeout=timeout)
    return token_auth(token)


@dataclass(frozen=True, slots=True)
class PlacedInstance:
    """One placed instance: its selection, and the allocation request claimed for it
    (JSON), with one for each alternate (not claimed: the conductor claims one on a
    reschedule)."""

    selection: Selection
    allocation: str
    alternates: dict[str, str]


class PlacementLink:
    """Host state from Placement and claims written to it, for one owner."""

    def __init__(
        self,
        scheduler: Scheduler,
        client: PlacementClient,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        max_attempts: int = 3,
        host_facts: HostFacts | None = None,
    ) -> None:
        if not poll_interval > 0 or max_attempts < 1:
            raise ValueError(
                f"poll_interval ({poll_interval}) must be above 0, max_attempts "
                f"({max_attempts}) at least 1"
            )
        self.scheduler = scheduler
        self.client = client
        self.follower = PlacementFollower(client)
        self.claims = PlacementClaims(client, follower=self.follower)
        self.poll_interval = poll_interval
        self.max_attempts = max_attempts
        self.host_facts = _checked_facts(host_facts or {})
        # host -> the last report applied, and when (monotonic): sent again when quiet
        self._applied: dict[str, HostReport] = {}
        self._sent: dict[str, float] = {}
        self._generation = 0
        self.polls = 0
        self.refusals = 0
        self._down = False  # Placement unreachable since the last poll that worked
        self._first = asyncio.Event()  # a poll went through (hosts known)

    # -- following ------------------------------------------------------------

    async def poll(self) -> None:
        """One poll of Placement, its changes applied through the owner; a followed host
        that did not change is reported again every third of ``service_down_time``
        (Placement answering for it is its liveness here, so a quiet host stays up)."""
        result = await self.follower.poll()
        for removed in result.removed:
            self._applied.pop(removed.host, None)
            self._sent.pop(removed.host, None)
            await self.scheduler.remove_host(removed.host)
        now = time.monotonic()
        due = now - self.scheduler.config.service_down_time / 3
        fresh = {r.host: r for r in result.reports} if result.changed else {}
        again = [r for h, r in self._applied.items() if h not in fresh and self._sent[h] <= due]
        if fresh or again:
            reports = [self._stamped(r) for r in (*fresh.values(), *again)]
            await self.scheduler.update_hosts(reports)
            for report in reports:
                self._applied[report.host] = report
                self._sent[report.host] = now
        for provider, why in result.refused:
            log.warning("Placement provider %s is not followed: %s", provider, why)
        self.polls += 1
        self._first.set()

    def _stamped(self, report: HostReport) -> HostReport:
        """``report`` with its node's hypervisor facts (Placement has none) and a
        generation above every one this link applied (a report sent again is newer)."""
        self._generation = max(self._generation + 1, report.generation, time.time_ns() // 1_000)
        facts = self.host_facts.get(report.node or report.host, {})
        return report.model_copy(update={**facts, "generation": self._generation})

    async def run(self) -> None:
        """Poll every ``poll_interval`` seconds until cancelled (a term's task)."""
        while True:
            try:
                await self.poll()
                if self._down:
                    log.info("Placement at %s answers again", self.client.url)
                    self._down = False
            except PlacementError as exc:
                if not self._down:  # one line per outage, not one per poll
                    log.error("cannot follow Placement at %s: %s", self.client.url, exc)
                    self._down = True
            await asyncio.sleep(self.poll_interval)

    async def ready(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Wait until a poll went through (at most ``timeout`` seconds)."""
        try:
            await asyncio.wait_for(self._first.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- placing ----------------------------------------------------------------

    async def place(self, spec: RequestSpec, project_id: str, user_id: str) -> list[PlacedInstance]:
        """Place ``spec``'s instances and claim each in Placement before answering."""
        held: dict[str, dict[str, object]] = {}
        for instance in spec.instance_uuids:
            held[instance] = await self._held(instance)
            host = (await self.scheduler.where(instance)).host
            if host is None:
                continue
            provider = self.follower.provider_of_host(host)
            if provider in held[instance] and host not in spec.ignore_hosts:
                # the same call again (a redelivery after a crash, a retry): its claim
                # and its allocation stand, and it is answered alike
                continue
            # a move: the conductor moved the source allocation to the migration
            # (an evacuation keeps it, and the claim below doubles it up as Nova
            # does); the old claim here would count the source twice
            await self.scheduler.release(instance)
        first = await self.scheduler.select_destinations(spec)
        placed: list[PlacedInstance] = []
        try:
            for selection in first:
                placed.append(
                    await self._claim(
                        spec, selection, project_id, user_id, held[selection.instance_uuid]
                    )
                )
        except BaseException:
            await self._undo(placed, [s.instance_uuid for s in first[len(placed) :]])
            raise
        return placed

    async def _held(self, instance: str) -> dict[str, object]:
        """The allocations Placement holds for consumer ``instance``, by provider."""
        found = await self.client.read(f"/allocations/{instance}")
        allocations = found.get("allocations") if isinstance(found, dict) else None
        return dict(allocations) if isinstance(allocations, dict) else {}

    async def _claim(
        self,
        spec: RequestSpec,
        selection: Selection,
        project_id: str,
        user_id: str,
        held: dict[str, object],
    ) -> PlacedInstance:
        instance = selection.instance_uuid
        one = spec.model_copy(update={"instance_uuids": [instance]})
        refused: list[str] = []
        why = ""
        for attempt in range(self.max_attempts):
            provider = self.follower.provider_of_host(selection.host)
            if provider is None:
                outcome: object = None
                why = f"host {selection.host} is not a Placement resource provider"
            else:
                request = allocation_request(one, provider)
                mine = held.get(provider)
                if (
                    isinstance(mine, dict)
                    and mine.get("resources") == request["allocations"][provider]["resources"]
                ):
                    # claimed by an earlier delivery of this call: never twice
                    return PlacedInstance(
                        selection, json.dumps(request), self._alternates(one, selection.alternates)
                    )
                outcome = await self.claims.claim(instance, request, project_id, user_id)
                if not isinstance(outcome, ClaimRefused):
                    return PlacedInstance(
                        selection,
                        json.dumps(request),
                        self._alternates(one, selection.alternates),
                    )
                why = f"Placement refused {selection.host}: {outcome.reason} ({outcome.detail})"
                self.refusals += 1
            log.info("placement of %s, try %d: %s", instance, attempt + 1, why)
            refused.append(selection.host)
            await self.scheduler.release(instance)
            try:
                await self.poll()  # the refused provider is re-read (mark_stale)
            except PlacementError as exc:
                raise NoValidHost(f"{why}; and Placement cannot be read: {exc}") from None
            if attempt + 1 == self.max_attempts:
                break
            again = one.model_copy(update={"ignore_hosts": [*one.ignore_hosts, *refused]})
            try:
                [selection] = await self.scheduler.select_destinations(again)
            except NoValidHost as exc:
                raise NoValidHost(f"{why}; then {exc}") from None
        raise NoValidHost(f"{self.max_attempts} tries, the last: {why}")

    def _alternates(self, one: RequestSpec, hosts: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for host in hosts:
            provider = self.follower.provider_of_host(host)
            if provider is not None:
                out[host] = json.dumps(allocation_request(one, provider))
        return out

    async def _undo(self, placed: list[PlacedInstance], unclaimed: list[str]) -> None:
        """A request that failed part-way: its allocations removed, its claims freed."""
        for instance in unclaimed:
            await self.scheduler.release(instance)
        for item in placed:
            instance = item.selection.instance_uuid
            try:
                await self.claims.release(instance)
            except PlacementError as exc:
                log.error(
                    "could not remove the allocation of %s after a failed request: %s",
                    instance,
                    exc,
                )
            await self.scheduler.release(instance)

    async def release(self, instance: str) -> None:
        """Nova deleted the instance: its allocation is Nova's to remove; the claim goes."""
        await self.scheduler.release(instance)
