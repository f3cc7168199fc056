"""oslo.messaging's RPC wire, as Nova's scheduler client speaks it over RabbitMQ (no I/O).

Rules this module keeps:

* A request body is oslo's envelope ``{"oslo.version": "2.0", "oslo.message":
  "<JSON>"}``; the inner message carries ``method``, ``args``, ``version``,
  ``namespace``, the call's ``_msg_id``/``_reply_q`` (absent on a cast),
  ``_unique_id``, ``_timeout`` (the call-monitor timeout: the caller gives
  up when nothing comes back for that long) and the caller's request
  context as ``_context_<key>`` fields. Anything else is a
  :class:`BadEnvelope` naming what was wrong; it never raises anything else.
* A reply goes to the default exchange with the caller's ``_reply_q`` as
  routing key (oslo's ``direct_send``) and is one envelope of ``{"result",
  "failure", "ending", "_msg_id", "_unique_id"}``. ``ending: false`` with no
  result is a call-monitor heartbeat: the caller restarts its timer and
  waits on (oslo's ``ReplyWaiter``).
* A failure is oslo's ``serialize_remote_exception`` JSON: ``class``,
  ``module``, ``message``, ``tb``, ``args``, ``kwargs``. The caller rebuilds
  ``module.class(*args, **kwargs)`` when ``module`` is one of its
  ``allowed_remote_exmods`` (Nova's own ``nova.exception`` always is), so a
  ``NoValidHost`` with ``kwargs={"reason": ...}`` is raised in the caller as
  Nova's own ``nova.exception.NoValidHost``.
* Versions: the API's major must be 4 and its minor at most
  :data:`API_MINOR` (Nova 34's ``SchedulerManager`` target, 4.5); a higher
  one is oslo's ``UnsupportedVersion`` in the caller, as from Nova.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = [
    "API_MAJOR",
    "API_MINOR",
    "OSLO_VERSION",
    "BadEnvelope",
    "Call",
    "check_version",
    "decode",
    "encode_failure",
    "encode_heartbeat",
    "encode_reply",
    "failure_body",
]

OSLO_VERSION = "2.0"
API_MAJOR = 4
API_MINOR = 5  # nova.scheduler.manager.SchedulerManager.target (Nova 34)
# the longest method name and the deepest JSON this endpoint reads (Nova's are short, shallow)
_MAX_METHOD = 64
_MAX_DEPTH = 32


class BadEnvelope(ValueError):
    """A message that is not oslo's envelope of an RPC call or cast, and why.

    ``reply_q``/``msg_id`` are set when the message named where to answer,
    so the caller can still be told. ``reason`` is short and machine-readable.
    """

    def __init__(
        self, reason: str, message: str, *, reply_q: str | None = None, msg_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.reply_q = reply_q
        self.msg_id = msg_id


@dataclass(frozen=True, slots=True)
class Call:
    """One decoded RPC message: a call when ``msg_id`` and ``reply_q`` are set, else a cast."""

    method: str
    args: dict[str, Any]
    version: str
    namespace: str | None
    msg_id: str | None
    reply_q: str | None
    unique_id: str | None
    timeout: float | None
    call_monitor_timeout: float | None
    context: dict[str, Any]

    @property
    def is_call(self) -> bool:
        return self.msg_id is not None and self.reply_q is not None


def _depth(value: Any, level: int = 0) -> int:
    if level > _MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value > 0:
        return float(value)
    return None


def decode(body: bytes, *, max_body_bytes: int, body_size: int | None = None) -> Call:
    """The RPC message in ``body``; :class:`BadEnvelope` naming what is wrong.

    ``body_size`` is the size the delivery declared when ``body`` is only its head
    (the channel cut a body over ``max_body_bytes`` as it arrived).
    """
    size = len(body) if body_size is None else body_size
    if size > max_body_bytes:
        raise BadEnvelope(
            "too_large", f"message of {size:,} bytes is over max_body_bytes {max_body_bytes:,}"
        )
    try:
        outer = json.loads(body)
    except RecursionError:  # nested past the parser's stack before _depth can say so
        raise BadEnvelope("too_deep", f"body nests deeper than {_MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadEnvelope("not_json", f"body is not JSON: {exc}") from None
    if not isinstance(outer, dict) or "oslo.message" not in outer:
        raise BadEnvelope(
            "not_oslo",
            'body is not an oslo.messaging envelope: it needs "oslo.version" and "oslo.message"',
        )
    if outer.get("oslo.version") != OSLO_VERSION:
        raise BadEnvelope(
            "oslo_version",
            f"oslo.version {outer.get('oslo.version')!r} is not supported: only "
            f"{OSLO_VERSION!r} is",
        )
    inner_text = outer["oslo.message"]
    if not isinstance(inner_text, str):
        raise BadEnvelope("not_oslo", '"oslo.message" must be a JSON string')
    try:
        inner = json.loads(inner_text)
    except RecursionError:
        raise BadEnvelope("too_deep", f"message nests deeper than {_MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise BadEnvelope("not_json", f'"oslo.message" is not JSON: {exc}') from None
    if not isinstance(inner, dict):
        raise BadEnvelope("not_oslo", '"oslo.message" must be a JSON object')
    msg_id = inner.get("_msg_id")
    reply_q = inner.get("_reply_q")
    where = {
        "msg_id": msg_id if isinstance(msg_id, str) else None,
        "reply_q": reply_q if isinstance(reply_q, str) else None,
    }
    if _depth(inner) > _MAX_DEPTH:
        raise BadEnvelope("too_deep", f"message nests deeper than {_MAX_DEPTH} levels", **where)
    method = inner.get("method")
    if not isinstance(method, str) or not 0 < len(method) <= _MAX_METHOD:
        raise BadEnvelope("method", f"method must be a name of at most {_MAX_METHOD}", **where)
    args = inner.get("args", {})
    if not isinstance(args, dict):
        raise BadEnvelope("args", f"args of {method} must be an object", **where)
    version = inner.get("version", "1.0")
    if not isinstance(version, str):
        raise BadEnvelope("version", f"version of {method} must be a string", **where)
    namespace = inner.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise BadEnvelope("namespace", "namespace must be a string or null", **where)
    unique_id = inner.get("_unique_id")
    context = {
        key[len("_context_") :]: value
        for key, value in inner.items()
        if key.startswith("_context_")
    }
    return Call(
        method=method,
        args=args,
        version=version,
        namespace=namespace,
        msg_id=where["msg_id"],
        reply_q=where["reply_q"],
        unique_id=unique_id if isinstance(unique_id, str) else None,
        timeout=_number(inner.get("_timeout")),
        # oslo's rabbit driver sends the call-monitor timeout as _timeout
        # (the call's own timeout is the message's AMQP expiration)
        call_monitor_timeout=_number(inner.get("_call_monitor_timeout", inner.get("_timeout"))),
        context=context,
    )


def check_version(version: str, method: str) -> str | None:
    """None when this endpoint serves API ``version``; else why not (oslo's words)."""
    major, _, minor = version.partition(".")
    if (
        not (major.isdigit() and minor.isdigit())
        or int(major) != API_MAJOR
        or int(minor) > API_MINOR
    ):
        return (
            f"Endpoint does not support RPC version {version}. Attempted method: {method} "
            f"(actorsched serves the scheduler API {API_MAJOR}.0 to {API_MAJOR}.{API_MINOR})"
        )
    return None


def _envelope(message: dict[str, Any]) -> bytes:
    message["_unique_id"] = uuid.uuid4().hex
    return json.dumps({"oslo.version": OSLO_VERSION, "oslo.message": json.dumps(message)}).encode()


def encode_reply(msg_id: str, result: Any) -> bytes:
    """The one reply that ends a call with ``result`` (JSON-ready)."""
    return _envelope({"result": result, "failure": None, "ending": True, "_msg_id": msg_id})


def encode_heartbeat(msg_id: str) -> bytes:
    """A call-monitor heartbeat: the call is still being worked on."""
    return _envelope({"result": None, "failure": None, "ending": False, "_msg_id": msg_id})


def failure_body(
    cls: str,
    module: str,
    message: str,
    *,
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
) -> str:
    """oslo's serialized remote exception (the caller rebuilds ``module.cls``)."""
    return json.dumps(
        {
            "class": cls,
            "module": module,
            "message": message,
            "tb": [],
            "args": args if args is not None else [],
            "kwargs": kwargs if kwargs is not None else {},
        }
    )


def encode_failure(msg_id: str, failure: str) -> bytes:
    """The one reply that ends a call with ``failure`` (:func:`failure_body`)."""
    return _envelope({"result": None, "failure": failure, "ending": True, "_msg_id": msg_id})
