"""OpenStack Placement for actorsched: follow its compute node providers as host
reports, and write claims to it as Nova 34's scheduler does (no ``nova`` import).

Rules this module keeps:

* One microversion, :data:`MICROVERSION` (1.36), on every call: the one Nova
  34's scheduler asks allocation candidates with and claims with
  (``SAME_SUBTREE_VERSION`` in ``nova/scheduler/client/report.py``), and so
  the ``allocation_request_version`` its Selections carry, which Nova's
  conductor claims an alternate with. It has all this module reads and
  writes: ``required`` on ``GET /resource_providers`` (1.18), aggregates with
  a generation (1.19), consumer generations (1.28), ``mappings`` (1.34). At
  1.38 ``consumer_type`` would become required in every allocation write,
  which Nova's scheduler does not send.
* A provider's generation moves with its inventories, traits, aggregates and
  with every allocation written *to* it, but not when allocations leave it:
  ``DELETE /allocations/{consumer}`` (Nova's ``force=True`` deletes, the
  scheduler's clean-up) and a ``PUT`` that moves a consumer elsewhere leave
  the old provider's generation where it was. So the follower re-reads in
  full the providers whose generation moved, and reads the allocations
  (one call, which also returns the generation) of the providers a release
  named and of ``sweep_per_poll`` more each poll, round robin: an outside
  release is seen within ``ceil(providers / sweep_per_poll)`` polls.
* A re-read is four calls (inventories, allocations, traits, aggregates);
  each answer carries the generation, and they are used only when all four
  carry the same one (else read again, ``reread_attempts`` times, then the
  provider is left for the next poll). A poll is applied whole or not at
  all: a failed call fails the poll and leaves the follower as it was.
* What a :class:`~actorsched.models.HostReport` cannot say is never dropped:
  each provider's :class:`InventoryRules` lists every inventory as Placement
  keeps it and names each rule the report leaves out (:data:`UNEXPRESSED`).
* A claim is Nova's ``claim_resources``: read the consumer, double up a
  consumer that holds allocations already (Nova's evacuate), ``PUT`` with
  the consumer generation; a provider-generation race is retried as Nova's
  ``@retries`` does (four tries, a random pause up to 2 s times the try),
  a consumer-generation conflict is not (Nova's ``AllocationUpdateFailed``).
  A refusal is returned as a :class:`ClaimRefused` naming the provider.
* Every call is bounded: a timeout per call (connect, send, answer), an
  answer size, a number of connections, a number of providers followed.
  Placement down is :class:`PlacementUnavailable`, within the timeout.

>>> async def follow(url: str) -> None:  # doctest: +SKIP
...     async with PlacementClient(url) as client:
...         follower = PlacementFollower(client)
...         for state in (await follower.poll()).changed:
...             print(state.report.host, state.report.vcpus, state.rules.unexpressed)
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import ssl
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from pydantic import ValidationError

from ..errors import SchedulerError
from ..models import HostReport, RequestSpec, Units

__all__ = [
    "ALLOCATION_REQUEST_VERSION",
    "DEFAULT_READ_CONCURRENCY",
    "MICROVERSION",
    "UNEXPRESSED",
    "AuthHook",
    "ClaimRefused",
    "Claimed",
    "FollowResult",
    "Inventory",
    "InventoryRules",
    "Moved",
    "PlacementClaims",
    "PlacementClient",
    "PlacementError",
    "PlacementFollower",
    "PlacementUnavailable",
    "ProviderState",
    "RemovedProvider",
    "Response",
    "allocation_request",
    "token_auth",
]

MICROVERSION = "1.36"
# what a Selection's allocation_request_version says (Nova's conductor claims with it)
ALLOCATION_REQUEST_VERSION = MICROVERSION
# the classes a HostReport carries, and its fields for each
_VCPU, _MEMORY, _DISK = "VCPU", "MEMORY_MB", "DISK_GB"
# the rules of Placement a HostReport cannot express, per class (see InventoryRules):
# none of the three classes it carries (their total, reserved, allocation ratio,
# min_unit, max_unit and step_size all travel in it); any other class is unexpressed
UNEXPRESSED: Mapping[str, tuple[str, ...]] = {_VCPU: (), _MEMORY: (), _DISK: ()}
# Nova's compute marks its node providers with this trait (resource_tracker.py);
# a provider with COMPUTE_STATUS_DISABLED is a disabled compute service
COMPUTE_NODE_TRAIT = "COMPUTE_NODE"
DISABLED_TRAIT = "COMPUTE_STATUS_DISABLED"

DEFAULT_TIMEOUT = 10.0  # seconds per call: connect, send and the whole answer
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # a listing of 10,000 providers is ~8 MB
# calls in flight at once to Placement, and so the follower's reads of providers:
# serve's [nova] placement_read_concurrency (Placement's own workers set what helps)
DEFAULT_READ_CONCURRENCY = 8
DEFAULT_MAX_CONNECTIONS = DEFAULT_READ_CONCURRENCY
DEFAULT_MAX_PROVIDERS = 20_000
DEFAULT_SWEEP_PER_POLL = 50
DEFAULT_REREAD_ATTEMPTS = 3
_MAX_HEAD = 64 * 1024  # bytes of a status line and headers (and of one chunk-size line)
_MAX_TRAILERS = 64  # trailer lines after a chunked body
_NOVA_ATTEMPTS = 4  # nova.scheduler.client.report.retries: range(0, 4)
_NOVA_BACKOFF = 2.0  # ... sleeping random.uniform(0, retry * 2) before each
_DETAIL_CHARS = 1_000  # of an error's detail kept in a message
_PROVIDER_IN_DETAIL = re.compile(r"resource provider '([0-9a-fA-F-]{32,36})'")
_CLASS_IN_DETAIL = re.compile(r"(?:allocation for|Inventory for) '([A-Z0-9_]+)'")
_CONSUMER_CONFLICT = "consumer generation conflict"  # Nova matches Placement's text too


class PlacementError(SchedulerError):
    """Placement answered, but not as asked: the status, Placement's error code and detail."""

    def __init__(self, message: str, *, status: int = 0, code: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail


class PlacementUnavailable(PlacementError):
    """Placement could not be reached, or did not answer within the timeout."""


# -- HTTP/1.1 on asyncio streams ---------------------------------------------------

AuthHook = Callable[[], Awaitable[Mapping[str, str]]]
ResponseHook = Callable[[str, str, int], Awaitable[None]]


def token_auth(token: str = "admin") -> AuthHook:
    """Send ``X-Auth-Token: token`` on every call.

    With Placement's ``[api] auth_strategy = noauth2`` the token is
    ``user[:project]`` and the user ``admin`` has the admin role; a Keystone
    token (``[placement]`` auth of nova.conf) is a hook of this shape too.

    >>> import asyncio
    >>> asyncio.run(token_auth("admin")())
    {'X-Auth-Token': 'admin'}
    """
    headers = {"X-Auth-Token": token}

    async def hook() -> Mapping[str, str]:
        return headers

    return hook


@dataclass(frozen=True, slots=True)
class Response:
    """One answer: its status, headers (names lower-case) and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None

    def error(self) -> tuple[str, str]:
        """Placement's error code and detail (``{"errors": [{"code", "detail"}]}``)."""
        try:
            first = self.json()["errors"][0]
            code, detail = str(first.get("code", "")), str(first.get("detail", ""))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return "", self.body[:_DETAIL_CHARS].decode("utf-8", "replace")
        # webob puts "There was a conflict when ...\n\n " before what went wrong
        return code, detail.rpartition("\n\n")[2].strip()[:_DETAIL_CHARS]


class _BadHttp(Exception):
    """The peer does not speak HTTP/1.1 as expected."""


class _TooLarge(Exception):
    pass


@dataclass(slots=True, eq=False)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        # abort, not close: nothing is left to flush and wait_closed() could wait
        self.writer.transport.abort()


class PlacementClient:
    """Placement's REST API over HTTP/1.1 (keep-alive, Content-Length or chunked
    answers, JSON), every call at :data:`MICROVERSION` and bounded.

    ``timeout`` bounds one call from asking for a connection to the last byte
    of its answer; ``max_response_bytes`` one answer's body; at most
    ``max_connections`` calls are in flight (the rest wait, inside their
    timeout). ``auth`` gives the headers that authenticate a call (default:
    noauth2's ``admin``); ``on_response`` is awaited after each answer with
    the method, path and status (metrics, tests).

    >>> async def usages(url: str, provider: str) -> Any:  # doctest: +SKIP
    ...     async with PlacementClient(url, timeout=5) as client:
    ...         return await client.read(f"/resource_providers/{provider}/usages")
    """

    def __init__(
        self,
        url: str,
        *,
        microversion: str = MICROVERSION,
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        auth: AuthHook | None = None,
        ssl_context: ssl.SSLContext | None = None,
        on_response: ResponseHook | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"Placement url {url!r} must be http:// or https://host[:port][/path]")
        if timeout <= 0 or max_response_bytes < 1 or max_connections < 1:
            raise ValueError(
                f"timeout ({timeout}), max_response_bytes ({max_response_bytes}) and "
                f"max_connections ({max_connections}) must be positive"
            )
        self.url = url.rstrip("/")
        self.microversion = microversion
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.max_connections = max_connections
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc.rpartition("@")[2]
        self._ssl = (
            (ssl_context or ssl.create_default_context()) if parts.scheme == "https" else None
        )
        self._auth = auth or token_auth()
        self._on_response = on_response
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self.requests = 0  # calls answered
        self.connections_opened = 0

    async def __aenter__(self) -> PlacementClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the idle connections (calls in flight close theirs when done), and the
        auth hook's own when it has an ``aclose`` (a Keystone client)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
        aclose = getattr(self._auth, "aclose", None)
        if aclose is not None:
            await aclose()

    async def request(
        self, method: str, path: str, body: Any = None, *, version: str | None = None
    ) -> Response:
        """One call; ``body`` (when not None) is sent as JSON.

        Raises :class:`PlacementUnavailable` when Placement cannot be reached or
        does not answer within ``timeout``, :class:`PlacementError` when its
        answer is over ``max_response_bytes``; any status is returned. A 401
        (the token expired or was revoked) is asked once more when the auth
        hook has an ``invalidate(sent_headers)`` (a Keystone token: a new one).
        """
        sent: dict[str, str] = {}
        response = await self._request(method, path, body, version, sent)
        invalidate = getattr(self._auth, "invalidate", None)
        if response.status == 401 and invalidate is not None:
            invalidate(sent)
            response = await self._request(method, path, body, version, {})
        self.requests += 1
        if self._on_response is not None:
            await self._on_response(method, path, response.status)
        return response

    async def _request(
        self, method: str, path: str, body: Any, version: str | None, sent: dict[str, str]
    ) -> Response:
        data = b"" if body is None else json.dumps(body).encode()
        where = f"{method} {self.url}{path}"
        try:
            async with asyncio.timeout(self.timeout):
                sent.update(await self._auth())
                headers = {
                    "Host": self._host_header,
                    "Accept": "application/json",
                    "OpenStack-API-Version": f"placement {version or self.microversion}",
                    "User-Agent": "actorsched",
                    **sent,
                }
                if body is not None or method in ("PUT", "POST", "PATCH"):
                    headers["Content-Type"] = "application/json"
                    headers["Content-Length"] = str(len(data))
                head = f"{method} {self._prefix}{path} HTTP/1.1\r\n" + "".join(
                    f"{k}: {v}\r\n" for k, v in headers.items()
                )
                message = head.encode("latin-1") + b"\r\n" + data
                async with self._slots:
                    response = await self._exchange(method, message)
        except TimeoutError:
            raise PlacementUnavailable(
                f"Placement did not answer {where} within {self.timeout:g} s (the client's "
                "timeout): is it up and reachable?"
            ) from None
        except _TooLarge:
            raise PlacementError(
                f"Placement's answer to {where} is over {self.max_response_bytes:,} bytes "
                "(max_response_bytes): raise it, or follow fewer providers"
            ) from None
        except (OSError, asyncio.IncompleteReadError, _BadHttp) as exc:
            raise PlacementUnavailable(
                f"Placement could not be reached for {where}: {exc or type(exc).__name__}"
            ) from exc
        return response

    async def _connect(self) -> _Connection:
        reader, writer = await asyncio.open_connection(
            self._host, self._port, ssl=self._ssl, limit=_MAX_HEAD
        )
        self.connections_opened += 1
        return _Connection(reader, writer)

    async def _exchange(self, method: str, message: bytes) -> Response:
        while True:
            connection = self._idle.pop() if self._idle else None
            reused = connection is not None
            if connection is None or connection.reader.at_eof():
                if connection is not None:
                    connection.close()
                connection, reused = await self._connect(), False
            try:
                try:
                    connection.writer.write(message)
                    await connection.writer.drain()
                    head = await connection.reader.readuntil(b"\r\n\r\n")
                except asyncio.LimitOverrunError:
                    raise _BadHttp(f"status line and headers over {_MAX_HEAD} bytes") from None
                except (asyncio.IncompleteReadError, ConnectionError) as exc:
                    if reused and not getattr(exc, "partial", b""):
                        # a kept-alive connection the server closed meanwhile: nothing
                        # of an answer came, so the call goes again on a fresh one
                        connection.close()
                        continue
                    raise
                response, keep = await self._read_answer(connection.reader, method, head)
            except BaseException:
                connection.close()
                raise
            if keep:
                self._idle.append(connection)
            else:
                connection.close()
            return response

    async def _read_answer(
        self, reader: asyncio.StreamReader, method: str, head: bytes
    ) -> tuple[Response, bool]:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest.partition(" ")[0]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise _BadHttp(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
        status = int(code)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep:
                    raise _BadHttp(f"bad header line {line[:100]!r}")
                headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        keep = (version == "HTTP/1.1" and "close" not in connection) or "keep-alive" in connection
        limit = self.max_response_bytes
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = await self._read_chunked(reader, limit)
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isdigit():
                raise _BadHttp(f"bad Content-Length {length[:40]!r}")
            if int(length) > limit:
                raise _TooLarge
            body = await reader.readexactly(int(length))
        else:  # the body ends with the connection
            keep = False
            parts: list[bytes] = []
            size = 0
            while chunk := await reader.read(65536):
                size += len(chunk)
                if size > limit:
                    raise _TooLarge
                parts.append(chunk)
            body = b"".join(parts)
        return Response(status, headers, body), keep

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                chunk = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadHttp(f"bad chunk size line {line[:40]!r}") from None
            if chunk == 0:
                break
            size += chunk
            if size > limit:
                raise _TooLarge
            parts.append(await reader.readexactly(chunk))
            if await reader.readexactly(2) != b"\r\n":
                raise _BadHttp("a chunk does not end with CRLF")
        for _ in range(_MAX_TRAILERS):
            if await reader.readuntil(b"\r\n") == b"\r\n":
                return b"".join(parts)
        raise _BadHttp(f"over {_MAX_TRAILERS} trailer lines")

    async def read(self, path: str) -> Any | None:
        """``GET path``: its JSON, or None when Placement answers 404."""
        response = await self.request("GET", path)
        if response.status == 404:
            return None
        if response.status != 200:
            raise _unexpected(response, f"GET {path}")
        return response.json()


def _unexpected(response: Response, what: str) -> PlacementError:
    code, detail = response.error()
    hint = " (check the auth token and its role)" if response.status in (401, 403) else ""
    return PlacementError(
        f"Placement answered {what} with {response.status}{hint}: {code or 'no code'}: {detail}",
        status=response.status,
        code=code,
        detail=detail,
    )


# -- the follower: compute node providers as host reports ----------------------------


@dataclass(frozen=True, slots=True)
class Inventory:
    """One resource class of a provider, as Placement keeps it.

    >>> Inventory(total=16, reserved=2, allocation_ratio=4.0).capacity
    56
    """

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = 2_147_483_647
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> int:
        """What Placement lets allocations add up to: (total - reserved) x ratio."""
        return int((self.total - self.reserved) * self.allocation_ratio)


@dataclass(frozen=True, slots=True)
class InventoryRules:
    """Everything Placement enforces on a provider's allocations, next to its report.

    ``inventories``: every resource class it has (VCPU, MEMORY_MB and DISK_GB,
    which the report carries with every rule of theirs, and any other);
    ``unexpressed``: what the report leaves out, as ``"PCPU inventory"``
    (empty: the report says all Placement would check). A class left out is
    one the scheduler never asks for, so Placement's rules and the report's
    are the same for every claim made from a Nova request.
    """

    inventories: Mapping[str, Inventory]
    unexpressed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ProviderState:
    """One compute node provider as last read: its host report and what it cannot say."""

    uuid: str
    name: str
    generation: int  # Placement's resource provider generation
    report: HostReport
    rules: InventoryRules
    aggregates: frozenset[str]  # Placement aggregate uuids (Nova's host aggregate uuids)
    consumers: Mapping[str, Mapping[str, int]]  # consumer uuid -> class -> amount


@dataclass(frozen=True, slots=True)
class RemovedProvider:
    """A report to withdraw: the provider is gone, refused, or is reported by another name."""

    uuid: str
    host: str


@dataclass(frozen=True, slots=True)
class FollowResult:
    """What one poll (or one host mapping) changed, and what it cost.

    ``reread``: providers read in full (their generation moved, or new);
    ``swept``: providers whose allocations only were read (a sweep, a
    release); ``refused``: providers whose report would be invalid, with why
    (they are not reported until their generation moves); ``unsettled``:
    providers that kept changing while read (tried again next poll).
    """

    changed: tuple[ProviderState, ...] = ()
    removed: tuple[RemovedProvider, ...] = ()
    reread: tuple[str, ...] = ()
    swept: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    unsettled: tuple[str, ...] = ()
    requests: int = 0
    seconds: float = 0.0

    @property
    def reports(self) -> tuple[HostReport, ...]:
        """The host reports to apply, one per changed provider."""
        return tuple(state.report for state in self.changed)


@dataclass(slots=True)
class _Known:
    """A provider as read: Placement's figures, before any host name is put on them."""

    uuid: str
    name: str
    generation: int
    inventories: dict[str, Inventory]
    consumers: dict[str, dict[str, int]]
    traits: frozenset[str]
    aggregates: frozenset[str]
    report_error: str | None = None


@dataclass(slots=True)
class _Read:
    """A poll's reads before they are applied."""

    full: dict[str, _Known | None] = field(default_factory=dict)  # None: gone (404)
    consumers: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    unsettled: list[str] = field(default_factory=list)
    requests: int = 0


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlacementError(f"Placement's {where} is not an integer: {value!r}")
    return value


def _inventories(data: Any, where: str) -> dict[str, Inventory]:
    if not isinstance(data, dict):
        raise PlacementError(f"Placement's {where} is not an object")
    out: dict[str, Inventory] = {}
    for name, inv in data.items():
        at = f"{where}[{name}]"
        ratio = inv.get("allocation_ratio", 1.0) if isinstance(inv, dict) else None
        if not isinstance(ratio, int | float) or isinstance(ratio, bool):
            raise PlacementError(f"Placement's {at} has no numeric allocation_ratio")
        out[str(name)] = Inventory(
            total=_int(inv.get("total"), f"{at}.total"),
            reserved=_int(inv.get("reserved", 0), f"{at}.reserved"),
            min_unit=_int(inv.get("min_unit", 1), f"{at}.min_unit"),
            max_unit=_int(inv.get("max_unit", 2_147_483_647), f"{at}.max_unit"),
            step_size=_int(inv.get("step_size", 1), f"{at}.step_size"),
            allocation_ratio=float(ratio),
        )
    return out


def _consumers(data: Any, where: str) -> dict[str, dict[str, int]]:
    if not isinstance(data, dict):
        raise PlacementError(f"Placement's {where} is not an object")
    out: dict[str, dict[str, int]] = {}
    for consumer, alloc in data.items():
        resources = alloc.get("resources") if isinstance(alloc, dict) else None
        if not isinstance(resources, dict):
            raise PlacementError(f"Placement's {where}[{consumer}] has no resources")
        out[str(consumer)] = {
            str(rc): _int(n, f"{where}[{consumer}].{rc}") for rc, n in resources.items()
        }
    return out


def _names(data: Any, key: str, where: str) -> frozenset[str]:
    values = data.get(key) if isinstance(data, dict) else None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise PlacementError(f"Placement's {where} has no list of {key}")
    return frozenset(values)


def _generation(data: Any, where: str) -> int:
    if not isinstance(data, dict):
        raise PlacementError(f"Placement's {where} is not an object")
    return _int(data.get("resource_provider_generation"), f"{where} generation")


def _units(inv: Inventory | None) -> Units | None:
    """A class's allocation rules as a report carries them (None: Placement's
    defaults, a ``max_unit`` at or above the total meaning no bound but it)."""
    if inv is None:
        return None
    max_unit = None if inv.max_unit >= inv.total else inv.max_unit
    if inv.min_unit == 1 and inv.step_size == 1 and max_unit is None:
        return None
    return Units(min_unit=inv.min_unit, max_unit=max_unit, step_size=inv.step_size)


def _rules(inventories: Mapping[str, Inventory]) -> InventoryRules:
    unexpressed: list[str] = []
    defaults = Inventory(total=0)
    for rc, inv in sorted(inventories.items()):
        if rc not in UNEXPRESSED:
            unexpressed.append(f"{rc} inventory")
            continue
        for rule in UNEXPRESSED[rc]:
            value = getattr(inv, rule)
            # the report's own rule: a request is at most the host's total
            default = inv.total if rule == "max_unit" else getattr(defaults, rule)
            if value != default:
                unexpressed.append(f"{rc} {rule}={value}")
    return InventoryRules(inventories=dict(inventories), unexpressed=tuple(unexpressed))


class PlacementFollower:
    """Follows Placement's compute node providers (``COMPUTE_NODE`` trait) and turns
    each into a :class:`~actorsched.models.HostReport`.

    Each :meth:`poll` lists the providers (one call), re-reads those whose
    generation moved (four calls each), reads the allocations of those
    :meth:`mark_stale` named and of ``sweep_per_poll`` more (one call each),
    and answers what changed. A report's ``host`` is the provider's name
    (Nova's node name, also its ``node``) until :meth:`learn_host` maps the
    provider to its compute service's host. A report's ``generation`` is the
    follower's own, microseconds of the wall clock at least and always above
    the last, so reports of a restarted follower are still newer.

    Bounds: ``max_providers`` listed (more is a :class:`PlacementError`
    naming it), ``concurrency`` calls at once, ``reread_attempts`` reads of
    a provider that moves while read.

    >>> async def run(client: PlacementClient) -> None:  # doctest: +SKIP
    ...     follower = PlacementFollower(client, sweep_per_poll=50)
    ...     result = await follower.poll()
    ...     print([r.host for r in result.reports], result.requests)
    """

    def __init__(
        self,
        client: PlacementClient,
        *,
        max_providers: int = DEFAULT_MAX_PROVIDERS,
        sweep_per_poll: int = DEFAULT_SWEEP_PER_POLL,
        reread_attempts: int = DEFAULT_REREAD_ATTEMPTS,
        concurrency: int | None = None,
        compute_trait: str | None = COMPUTE_NODE_TRAIT,
    ) -> None:
        if max_providers < 1 or sweep_per_poll < 0 or reread_attempts < 1:
            raise ValueError(
                f"max_providers ({max_providers}) and reread_attempts ({reread_attempts}) "
                f"must be at least 1, sweep_per_poll ({sweep_per_poll}) at least 0"
            )
        self.client = client
        self.max_providers = max_providers
        self.sweep_per_poll = sweep_per_poll
        self.reread_attempts = reread_attempts
        self.concurrency = concurrency or client.max_connections
        self._listing = "/resource_providers" + (
            f"?required={quote(compute_trait)}" if compute_trait else ""
        )
        self._known: dict[str, _Known] = {}
        self._by_consumer: dict[str, set[str]] = {}  # consumer -> providers it holds
        self._learned: dict[str, str] = {}  # provider -> service host (Nova's casts)
        self._emitted: dict[str, str] = {}  # provider -> the host its last report named
        self._hosts: dict[str, str] = {}  # reported host -> provider
        self._stale: set[str] = set()
        self._sweep: deque[str] = deque()
        self._generation = 0
        self._polling = asyncio.Lock()  # one poll at a time; a second waits its turn

    # -- what is known ----------------------------------------------------------------

    def state(self, provider: str) -> ProviderState | None:
        """The provider's state as last read, under the host it is reported as."""
        known = self._known.get(provider)
        host = self._emitted.get(provider)
        if known is None or host is None:
            return None
        return self._state(known, self._report(known, host, self._generation))

    def provider_of_host(self, host: str) -> str | None:
        """The provider reported as ``host`` (a claim's allocation request names it)."""
        return self._hosts.get(host)

    def providers_of(self, consumer: str) -> frozenset[str]:
        """The followed providers ``consumer`` holds allocations on, as last read."""
        return frozenset(self._by_consumer.get(consumer, ()))

    def aggregates(self) -> dict[str, frozenset[str]]:
        """Each followed provider's Placement aggregates (uuids)."""
        return {uuid: known.aggregates for uuid, known in self._known.items()}

    def mark_stale(self, providers: Iterable[str]) -> None:
        """Read these providers' allocations at the next poll (a release, a refusal)."""
        self._stale.update(p for p in providers if p in self._known)

    # -- polling ------------------------------------------------------------------------

    async def poll(self) -> FollowResult:
        """List the providers, read what moved, answer what changed (see the class)."""
        async with self._polling:
            return await self._poll()

    async def _poll(self) -> FollowResult:
        started = time.perf_counter()
        listing = await self.client.read(self._listing)
        rows = listing.get("resource_providers") if isinstance(listing, dict) else None
        if not isinstance(rows, list):
            raise PlacementError(f"Placement's {self._listing} has no resource_providers list")
        if len(rows) > self.max_providers:
            raise PlacementError(
                f"Placement lists {len(rows):,} compute node providers, over this follower's "
                f"max_providers {self.max_providers:,}: raise it (memory and a poll's cost "
                "grow with it)"
            )
        listed: dict[str, int] = {}
        names: dict[str, str] = {}
        for row in rows:
            uuid = row.get("uuid") if isinstance(row, dict) else None
            if not isinstance(uuid, str):
                raise PlacementError(f"Placement's {self._listing} lists a provider with no uuid")
            listed[uuid] = _int(row.get("generation"), f"provider {uuid} generation")
            names[uuid] = str(row.get("name"))
        full = [
            u
            for u, gen in listed.items()
            if u not in self._known or self._known[u].generation != gen
        ]
        read = _Read(requests=1)
        # allocations only: what a release named, then the sweep's share, round robin
        marked = {u for u in self._stale if u in listed}
        cheap = sorted(marked.difference(full))
        cheap += self._sweep_share(listed, set(full) | set(cheap))
        escalate = await self._run(cheap, lambda u: self._read_allocations(u, read))
        await self._run(full + escalate, lambda u: self._read_full(u, names[u], read))
        result = self._apply(listed, read, reread=full + escalate, swept=cheap)
        self._stale -= marked  # a mark made while this poll ran stays for the next
        return FollowResult(
            changed=result.changed,
            removed=result.removed,
            reread=result.reread,
            swept=result.swept,
            refused=result.refused,
            unsettled=tuple(read.unsettled),
            requests=read.requests,
            seconds=time.perf_counter() - started,
        )

    def _sweep_share(self, listed: Mapping[str, int], taken: set[str]) -> list[str]:
        share: list[str] = []
        for _ in range(len(self._sweep)):
            if len(share) >= self.sweep_per_poll:
                break
            uuid = self._sweep.popleft()
            if uuid not in self._known:
                continue  # gone: leaves the rotation
            self._sweep.append(uuid)
            if uuid in listed and uuid not in taken:
                share.append(uuid)
        return share

    async def _run(
        self, uuids: Sequence[str], reader: Callable[[str], Awaitable[bool]]
    ) -> list[str]:
        """Run ``reader`` on each uuid, ``concurrency`` at a time; stop at the first
        failure and raise it. Answers the uuids whose reader returned True."""
        todo = iter(uuids)
        flagged: list[str] = []
        failed: list[BaseException] = []

        async def worker() -> None:
            for uuid in todo:
                if failed:
                    return
                try:
                    if await reader(uuid):
                        flagged.append(uuid)
                except Exception as exc:
                    failed.append(exc)
                    return

        await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(uuids)))))
        if failed:
            raise failed[0]
        return flagged

    async def _get(self, path: str, read: _Read) -> Any | None:
        read.requests += 1
        return await self.client.read(path)

    async def _read_allocations(self, uuid: str, read: _Read) -> bool:
        """Read one provider's allocations; True when its generation moved (read it all)."""
        path = f"/resource_providers/{uuid}/allocations"
        data = await self._get(path, read)
        if data is None:
            read.full[uuid] = None
            return False
        if _generation(data, path) != self._known[uuid].generation:
            return True
        read.consumers[uuid] = _consumers(data.get("allocations"), path)
        return False

    async def _read_full(self, uuid: str, name: str, read: _Read) -> bool:
        base = f"/resource_providers/{uuid}"
        paths = [
            f"{base}/{what}" for what in ("inventories", "allocations", "traits", "aggregates")
        ]
        for _ in range(self.reread_attempts):
            got = await asyncio.gather(*(self._get(p, read) for p in paths), return_exceptions=True)
            for answer in got:
                if isinstance(answer, BaseException):
                    raise answer
            answers: list[Any] = list(got)
            if any(a is None for a in answers):
                read.full[uuid] = None  # deleted since it was listed
                return False
            generations = {_generation(a, p) for a, p in zip(answers, paths, strict=True)}
            if len(generations) == 1:
                inv, allocs, traits, aggs = answers
                read.full[uuid] = _Known(
                    uuid=uuid,
                    name=name,
                    generation=generations.pop(),
                    inventories=_inventories(inv.get("inventories"), paths[0]),
                    consumers=_consumers(allocs.get("allocations"), paths[1]),
                    traits=_names(traits, "traits", paths[2]),
                    aggregates=_names(aggs, "aggregates", paths[3]),
                )
                return False
        read.unsettled.append(uuid)
        return False

    # -- applying a poll ----------------------------------------------------------------

    def _apply(
        self, listed: Mapping[str, int], read: _Read, *, reread: list[str], swept: list[str]
    ) -> FollowResult:
        touched: set[str] = set()
        gone = [u for u in self._known if u not in listed]
        gone += [u for u, known in read.full.items() if known is None and u in self._known]
        for uuid in gone:
            self._forget(uuid)
        for uuid, fresh in read.full.items():
            if fresh is not None:
                self._remember(fresh)
                touched.add(uuid)
        for uuid, consumers in read.consumers.items():
            known = self._known.get(uuid)
            if known is not None and consumers != known.consumers:
                self._index(uuid, known.consumers, consumers)
                known.consumers = consumers
                touched.add(uuid)
        for uuid in touched:
            self._validate(self._known[uuid])
        changed, removed, refused = self._emit(touched, gone)
        return FollowResult(
            changed=changed,
            removed=removed,
            reread=tuple(reread),
            swept=tuple(swept),
            refused=refused,
        )

    def _remember(self, fresh: _Known) -> None:
        old = self._known.get(fresh.uuid)
        if old is None:
            self._sweep.append(fresh.uuid)
        self._index(fresh.uuid, old.consumers if old else {}, fresh.consumers)
        self._known[fresh.uuid] = fresh

    def _forget(self, uuid: str) -> None:
        known = self._known.pop(uuid, None)
        if known is not None:
            self._index(uuid, known.consumers, {})
        self._learned.pop(uuid, None)
        self._stale.discard(uuid)

    def _index(self, uuid: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        for consumer in old.keys() - new.keys():
            holders = self._by_consumer.get(consumer)
            if holders is not None:
                holders.discard(uuid)
                if not holders:
                    del self._by_consumer[consumer]
        for consumer in new.keys() - old.keys():
            self._by_consumer.setdefault(consumer, set()).add(uuid)

    def _validate(self, known: _Known) -> None:
        try:
            self._report(known, known.name, 0)
            known.report_error = None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            known.report_error = f"its host report's {where}: {first['msg']}"

    def _host_names(self) -> dict[str, str]:
        """The host each provider is reported as: its learned service host when
        that host is no other provider's (learned or by name), else its own name."""
        learned = Counter(self._learned.values())
        names = {k.name for k in self._known.values()}
        out: dict[str, str] = {}
        for uuid, known in self._known.items():
            host = self._learned.get(uuid, known.name)
            mine = learned[host] == 1 and (host == known.name or host not in names)
            out[uuid] = host if mine else known.name
        return out

    def _emit(
        self, touched: Collection[str], gone: Iterable[str]
    ) -> tuple[tuple[ProviderState, ...], tuple[RemovedProvider, ...], tuple[tuple[str, str], ...]]:
        removed: list[RemovedProvider] = []
        for uuid in gone:
            host = self._emitted.pop(uuid, None)
            if host is not None:
                removed.append(RemovedProvider(uuid, host))
        names = self._host_names()
        renamed = {u for u, host in names.items() if self._emitted.get(u, host) != host}
        changed: list[ProviderState] = []
        refused: list[tuple[str, str]] = []
        for uuid in sorted(set(touched) | renamed):
            known = self._known[uuid]
            before = self._emitted.get(uuid)
            if known.report_error is not None:
                refused.append((uuid, known.report_error))
                if before is not None:
                    removed.append(RemovedProvider(uuid, before))
                    del self._emitted[uuid]
                continue
            if before is not None and before != names[uuid]:
                removed.append(RemovedProvider(uuid, before))
            self._emitted[uuid] = names[uuid]
            report = self._report(known, names[uuid], self._next_generation())
            changed.append(self._state(known, report))
        self._hosts = {host: uuid for uuid, host in self._emitted.items()}
        return tuple(changed), tuple(removed), tuple(refused)

    def _next_generation(self) -> int:
        self._generation = max(self._generation + 1, time.time_ns() // 1_000)
        return self._generation

    @staticmethod
    def _report(known: _Known, host: str, generation: int) -> HostReport:
        inv = known.inventories
        used: Counter[str] = Counter()
        for resources in known.consumers.values():
            used.update(resources)
        vcpu, memory, disk = inv.get(_VCPU), inv.get(_MEMORY), inv.get(_DISK)
        return HostReport(
            host=host,
            node=known.name,
            generation=generation,
            memory_mb=memory.total if memory else 0,
            memory_mb_reserved=memory.reserved if memory else 0,
            memory_mb_used=used[_MEMORY],
            memory_mb_units=_units(memory),
            vcpus=vcpu.total if vcpu else 0,
            vcpus_reserved=vcpu.reserved if vcpu else 0,
            vcpus_used=used[_VCPU],
            vcpus_units=_units(vcpu),
            local_gb=disk.total if disk else 0,
            local_gb_reserved=disk.reserved if disk else 0,
            local_gb_used=used[_DISK],
            local_gb_units=_units(disk),
            ram_allocation_ratio=memory.allocation_ratio if memory else None,
            cpu_allocation_ratio=vcpu.allocation_ratio if vcpu else None,
            disk_allocation_ratio=disk.allocation_ratio if disk else None,
            enabled=DISABLED_TRAIT not in known.traits,
            traits=sorted(known.traits),
            instances=sorted(known.consumers),
        )

    @staticmethod
    def _state(known: _Known, report: HostReport) -> ProviderState:
        return ProviderState(
            uuid=known.uuid,
            name=known.name,
            generation=known.generation,
            report=report,
            rules=_rules(known.inventories),
            aggregates=known.aggregates,
            consumers={c: dict(r) for c, r in known.consumers.items()},
        )

    # -- the service host, from Nova's instance casts --------------------------------------

    def learn_host(self, host: str, instance_uuids: Iterable[str]) -> FollowResult:
        """Map to ``host`` (a compute service, as Nova's ``update_instance_info`` /
        ``sync_instance_info`` casts name it) each provider that holds one of
        ``instance_uuids`` and no other followed provider does; answers the
        reports that are now named otherwise (no call to Placement).

        A host that more than one provider maps to (Ironic's, one per node) or
        that another provider is named as keeps its providers under their
        own names, as a host of many nodes reports each as a host.
        """
        if not host or len(host) > 255 or not host.isprintable():
            raise ValueError(f"service host {host!r} must be 1-255 printable characters")
        for instance in instance_uuids:
            holders = self._by_consumer.get(instance, set())
            if len(holders) == 1:
                self._learned[next(iter(holders))] = host
        changed, removed, refused = self._emit((), ())
        return FollowResult(changed=changed, removed=removed, refused=refused)


# -- claims: writing allocations as Nova's scheduler does --------------------------------

RefusalReason = Literal[
    "capacity",
    "constraints",
    "no_inventory",
    "unknown_provider",
    "concurrent_update",
    "consumer_generation",
]


@dataclass(frozen=True, slots=True)
class Claimed:
    """The consumer holds the allocation in Placement now.

    ``providers``: every provider it holds resources on; ``doubled``: it also
    keeps allocations it held before on providers outside the request (Nova's
    doubled-up evacuation claim), to be removed when the move is done.
    """

    consumer: str
    providers: tuple[str, ...]
    doubled: bool = False


@dataclass(frozen=True, slots=True)
class Moved:
    """``source``'s allocations are ``target``'s now (``already``: they were before)."""

    source: str
    target: str
    providers: tuple[str, ...]
    already: bool = False


@dataclass(frozen=True, slots=True)
class ClaimRefused:
    """Placement refused a claim or a move; nothing was written.

    ``provider`` is the one Placement named (or the request's only one):
    refresh it and try the next host. ``reason``: ``capacity`` (it does not
    fit), ``constraints`` (min_unit, max_unit or step_size), ``no_inventory``
    (no inventory of a class asked), ``unknown_provider``,
    ``concurrent_update`` (providers kept changing through Nova's four tries)
    or ``consumer_generation`` (another writer changed this consumer: Nova's
    ``AllocationUpdateFailed``, not retried).
    """

    consumer: str
    reason: RefusalReason
    provider: str | None
    providers: tuple[str, ...]
    detail: str
    resource_class: str | None = None

    @property
    def message(self) -> str:
        on = f" on provider {self.provider}" if self.provider else ""
        return f"Placement refused consumer {self.consumer}{on} ({self.reason}): {self.detail}"


class _Retry(Exception):
    """A provider-generation race: Nova's ``Retry``."""

    def __init__(self, refusal: ClaimRefused) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def allocation_request(spec: RequestSpec, provider: str) -> dict[str, Any]:
    """The allocation request of one instance of ``spec`` on ``provider``, in the
    shape of Placement's allocation candidates (a Selection's ``allocation_request``
    is its JSON, at :data:`ALLOCATION_REQUEST_VERSION`); classes of 0 are left
    out as Nova's ``strip_zeros`` does.

    >>> spec = RequestSpec(instance_uuids=["i"], memory_mb=512, vcpus=1, disk_gb=0)
    >>> allocation_request(spec, "rp")
    {'allocations': {'rp': {'resources': {'VCPU': 1, 'MEMORY_MB': 512}}}, 'mappings': {'': ['rp']}}
    """
    asked = {_VCPU: spec.vcpus, _MEMORY: spec.memory_mb, _DISK: spec.disk_gb}
    resources = {rc: amount for rc, amount in asked.items() if amount}
    if not resources:
        raise ValueError(
            "the request asks for no VCPU, MEMORY_MB or DISK_GB: there is nothing to "
            "allocate (an empty allocation would delete the consumer's)"
        )
    # "" is the unnumbered request group (Placement 1.34 mappings)
    return {"allocations": {provider: {"resources": resources}}, "mappings": {"": [provider]}}


def _requested(allocation_request: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    allocations = allocation_request.get("allocations")
    if not isinstance(allocations, dict) or not allocations:
        raise ValueError(
            "an allocation request needs allocations {provider: {resources: {...}}}; an "
            "empty one would delete the consumer's allocations"
        )
    out: dict[str, dict[str, int]] = {}
    for provider, alloc in allocations.items():
        resources = alloc.get("resources") if isinstance(alloc, dict) else None
        if not isinstance(resources, dict) or not resources:
            raise ValueError(f"the allocation on provider {provider} has no resources")
        for rc, amount in resources.items():
            if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
                raise ValueError(f"{rc} on provider {provider} must be a positive int: {amount!r}")
        out[str(provider)] = dict(resources)
    return out


class PlacementClaims:
    """Writes claims to Placement as Nova 34's scheduler and conductor do.

    ``follower`` (optional) is told which providers a release or a refusal
    touched, so its next poll reads them. ``attempts`` and ``retry_backoff``
    are Nova's ``@retries`` (four tries, ``uniform(0, try x 2 s)`` before each).

    >>> async def place(claims: PlacementClaims, spec: RequestSpec, rp: str) -> None:
    ...     request = allocation_request(spec, rp)
    ...     outcome = await claims.claim("uuid-1", request, "project", "user")
    ...     if isinstance(outcome, ClaimRefused):
    ...         print(outcome.message)  # refresh outcome.provider, try the next host
    """

    def __init__(
        self,
        client: PlacementClient,
        *,
        follower: PlacementFollower | None = None,
        attempts: int = _NOVA_ATTEMPTS,
        retry_backoff: float = _NOVA_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        if attempts < 1 or retry_backoff < 0:
            raise ValueError(f"attempts ({attempts}) >= 1 and retry_backoff ({retry_backoff}) >= 0")
        self.client = client
        self.follower = follower
        self.attempts = attempts
        self.retry_backoff = retry_backoff
        self._rng = rng or random.Random()

    async def _retrying(
        self, once: Callable[[], Awaitable[Claimed | Moved | ClaimRefused]]
    ) -> Claimed | Moved | ClaimRefused:
        refusal: ClaimRefused | None = None
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self._rng.uniform(0, attempt * self.retry_backoff))
            try:
                return await once()
            except _Retry as retry:
                refusal = retry.refusal
        assert refusal is not None
        return refusal

    async def _consumer(self, consumer: str) -> dict[str, Any]:
        path = f"/allocations/{consumer}"
        response = await self.client.request("GET", path)
        data = response.json() if response.status == 200 else None
        if not isinstance(data, dict) or not isinstance(data.get("allocations"), dict):
            raise _unexpected(response, f"GET {path}")
        return data

    def _refusal(
        self, response: Response, consumer: str, providers: Sequence[str]
    ) -> ClaimRefused | None:
        """What a 409 or 400 answer to an allocation write means; None if neither."""
        code, detail = response.error()
        named = _PROVIDER_IN_DETAIL.search(detail)
        rc = _CLASS_IN_DETAIL.search(detail)
        provider = named.group(1) if named else (providers[0] if len(providers) == 1 else None)
        reason: RefusalReason
        if response.status == 409 and code == "placement.concurrent_update":
            if _CONSUMER_CONFLICT in detail:
                reason, provider = "consumer_generation", None
            else:
                reason = "concurrent_update"
        elif response.status == 409 and "exceed the capacity" in detail:
            reason = "capacity"
        elif response.status == 409 and "violate inventory constraints" in detail:
            reason = "constraints"
        elif response.status in (400, 409) and (
            "Inventory for" in detail or "Unable to allocate inventory for consumer" in detail
        ):
            reason = "no_inventory"
        elif response.status == 400 and "that does not exist" in detail:
            reason = "unknown_provider"
        else:
            return None
        refusal = ClaimRefused(
            consumer=consumer,
            reason=reason,
            provider=provider,
            providers=tuple(providers),
            detail=detail,
            resource_class=rc.group(1) if rc else None,
        )
        if self.follower is not None:
            self.follower.mark_stale(providers)
        return refusal

    async def claim(
        self,
        instance_uuid: str,
        allocation_request: Mapping[str, Any],
        project_id: str,
        user_id: str,
        consumer_generation: int | None = None,
    ) -> Claimed | ClaimRefused:
        """Claim ``allocation_request`` for ``instance_uuid`` (Nova's ``claim_resources``).

        ``consumer_generation``: None for a new consumer (as Nova's scheduler
        always claims). A consumer that holds allocations already keeps them
        and gets the new providers' too (Nova's doubled-up move claim), at the
        generation just read unless the request carries its own
        ``consumer_generation`` (Nova's forced evacuation). The same claim
        again is answered as the first one (nothing new to add).
        """
        requested = _requested(allocation_request)

        async def once() -> Claimed | ClaimRefused:
            current = await self._consumer(instance_uuid)
            held = _consumers(current["allocations"], f"consumer {instance_uuid}")
            payload: dict[str, Any] = {
                k: v for k, v in allocation_request.items() if k != "consumer_generation"
            }
            generation = consumer_generation
            if held:
                generation = allocation_request.get(
                    "consumer_generation", current.get("consumer_generation")
                )
                merged = {rp: {"resources": r} for rp, r in held.items()}
                merged.update(
                    {rp: {"resources": r} for rp, r in requested.items() if rp not in held}
                )
                payload = {"allocations": merged}
            payload.update(project_id=project_id, user_id=user_id, consumer_generation=generation)
            providers = tuple(payload["allocations"])
            path = f"/allocations/{instance_uuid}"
            response = await self.client.request("PUT", path, payload)
            if response.status == 204:
                return Claimed(instance_uuid, providers, doubled=bool(held.keys() - requested))
            refusal = self._refusal(response, instance_uuid, tuple(requested))
            if refusal is None:
                raise _unexpected(response, f"PUT {path}")
            if refusal.reason == "concurrent_update":
                raise _Retry(refusal)
            return refusal

        outcome = await self._retrying(once)
        assert not isinstance(outcome, Moved)
        return outcome

    async def release(self, instance_uuid: str) -> bool:
        """Delete the consumer's allocations (``DELETE /allocations/{consumer}``, as
        Nova's scheduler cleans up); False when it had none."""
        held = self.follower.providers_of(instance_uuid) if self.follower else frozenset()
        path = f"/allocations/{instance_uuid}"
        response = await self.client.request("DELETE", path)
        if response.status == 404:
            return False
        if response.status != 204:
            raise _unexpected(response, f"DELETE {path}")
        if self.follower is not None:
            # a DELETE does not move the providers' generations: read them next poll
            self.follower.mark_stale(held)
        return True

    async def move(self, source_consumer: str, target_consumer: str) -> Moved | ClaimRefused:
        """Move every allocation of ``source_consumer`` to ``target_consumer`` in one
        ``POST /allocations`` (Nova's ``move_allocations``: a migration's source
        allocations go to its migration uuid, or back). When the target holds
        allocations and the source none, they were moved already."""

        async def once() -> Moved | ClaimRefused:
            source = await self._consumer(source_consumer)
            target = await self._consumer(target_consumer)
            held = _consumers(source["allocations"], f"consumer {source_consumer}")
            if target["allocations"] and not held:
                return Moved(source_consumer, target_consumer, tuple(target["allocations"]), True)
            if not held:
                return Moved(source_consumer, target_consumer, ())
            body = {
                source_consumer: {
                    "allocations": {},
                    "project_id": source.get("project_id"),
                    "user_id": source.get("user_id"),
                    "consumer_generation": source.get("consumer_generation"),
                },
                target_consumer: {
                    "allocations": {rp: {"resources": r} for rp, r in held.items()},
                    "project_id": source.get("project_id"),
                    "user_id": source.get("user_id"),
                    "consumer_generation": target.get("consumer_generation"),
                },
            }
            response = await self.client.request("POST", "/allocations", body)
            if response.status == 204:
                return Moved(source_consumer, target_consumer, tuple(held))
            refusal = self._refusal(response, source_consumer, tuple(held))
            if refusal is None:
                raise _unexpected(response, "POST /allocations")
            if refusal.reason == "concurrent_update":
                raise _Retry(refusal)
            return refusal

        outcome = await self._retrying(once)
        assert not isinstance(outcome, Claimed)
        return outcome

    async def remove_provider_tree(self, consumer: str, root_provider: str) -> bool:
        """Drop the consumer's allocations on ``root_provider``'s tree, keeping the
        rest (Nova's ``remove_provider_tree_from_instance_allocation``, after a
        doubled-up move). False when the consumer holds nothing or the write fails."""
        current = await self._consumer(consumer)
        held = _consumers(current["allocations"], f"consumer {consumer}")
        if not held:
            return False
        tree = await self.client.read(f"/resource_providers?in_tree={quote(root_provider)}")
        rows = tree.get("resource_providers", []) if isinstance(tree, dict) else []
        in_tree = {row.get("uuid") for row in rows if isinstance(row, dict)}
        kept = {rp: {"resources": r} for rp, r in held.items() if rp not in in_tree}
        if len(kept) == len(held):
            return True
        payload = {
            "allocations": kept,
            "project_id": current.get("project_id"),
            "user_id": current.get("user_id"),
            "consumer_generation": current.get("consumer_generation"),
        }
        response = await self.client.request("PUT", f"/allocations/{consumer}", payload)
        if response.status == 204 and self.follower is not None:
            self.follower.mark_stale(held.keys() - kept.keys())
        return response.status == 204
