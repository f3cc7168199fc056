"""The AMQP wire protocol: operations, message bodies, replies and their JSON Schema.

Rules this module keeps (no I/O here, so the same code serves the broker,
the client and the tests):

* The AMQP ``type`` property names the operation; the body is the JSON of
  that operation's request model. Anything else is a :class:`BadMessage`
  with a short machine-readable ``reason`` (used in the dead-letter header)
  and a message a person can act on.
* Bodies are checked in a fixed order: size first (before any parsing, so a
  huge body costs nothing), then the operation, content type, JSON (which
  must not repeat a key: ``{"a": 1, "a": 2}`` has no single meaning), schema.
* Every reply is ``{"ok": true, "result": ...}`` or
  ``{"ok": false, "error": {"type": ..., "message": ...}}``; the error
  type is the name of an :mod:`actorsched.errors` class.
* ``batch`` carries several operations in one message. Its envelope
  (``{"requests": [{"type": ..., "body": ...}, ...]}``) is checked like any
  body; each item's operation and body are checked on their own
  (:func:`decode_batch_item`), so one bad item gets its own error reply and
  the others still run. The reply's ``result`` is one reply object per item.
* ``docs/schema.json`` is generated from these models
  (``python -m actorsched.amqp --write-schema``); a test fails when
  the file and the models drift apart.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import models_json_schema

from ..answers import ClaimsPage, Location, Plan
from ..errors import NoValidHost, SchedulerError, error_from_wire
from ..models import (
    Aggregate,
    AggregateHostRequest,
    AggregateNameRequest,
    AggregatesRequest,
    CreateAggregateRequest,
    HostReport,
    HostState,
    Name,
    RequestSpec,
    Selection,
    UpdateAggregateRequest,
)

__all__ = [
    "BATCH",
    "CONTENT_TYPE",
    "DEFAULT_DELIVERY_LIMIT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_REPLY_BYTES",
    "DEFAULT_PAGE_HOSTS",
    "DEFAULT_PREFETCH",
    "DEFAULT_QUEUE",
    "DEFAULT_URL",
    "ERROR_HEADER",
    "MAX_BATCH_ITEMS",
    "MAX_PAGE_HOSTS",
    "OPERATIONS",
    "REASONS",
    "REASON_HEADER",
    "TRUNCATED_HEADER",
    "BadMessage",
    "BatchItem",
    "BatchRequest",
    "ClaimsRequest",
    "ConfirmMoveResult",
    "DeleteAggregateResult",
    "ErrorReply",
    "HostReportResult",
    "HostStatesPage",
    "HostStatesRequest",
    "MigrationRequest",
    "MoveRequest",
    "OkReply",
    "Operation",
    "ReleaseRequest",
    "ReleaseResult",
    "RemoveHostRequest",
    "RemoveHostResult",
    "RescheduleRequest",
    "RevertMoveResult",
    "WhereRequest",
    "WireError",
    "dead_letter_names",
    "decode_batch_item",
    "decode_batch_reply",
    "decode_reply",
    "decode_request",
    "encode_batch_ok",
    "encode_error",
    "encode_ok",
    "json_schema",
    "queue_arguments",
]

CONTENT_TYPE = "application/json"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024

# -- the queue topology and defaults both ends share ----------------------------
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
DEFAULT_QUEUE = "actorsched.requests"
DEFAULT_PREFETCH = 256
# RabbitMQ 3.10 quorum queues have no delivery limit by default: a message
# that crashes its consumer would then come back forever.
DEFAULT_DELIVERY_LIMIT = 5
# The largest reply the service builds: under RabbitMQ's message limit with room
# to spare, and a bound on what one request can make the service hold.
DEFAULT_MAX_REPLY_BYTES = 8 * 2**20
# headers of a dead letter: why it was refused, the error, a cut body's size
REASON_HEADER = "x-actorsched-reason"
ERROR_HEADER = "x-actorsched-error"
TRUNCATED_HEADER = "x-actorsched-truncated"


def dead_letter_names(queue: str) -> tuple[str, str]:
    """The dead-letter exchange and queue of ``queue``: ``<queue>.dlx``, ``<queue>.dead``."""
    return f"{queue}.dlx", f"{queue}.dead"


def queue_arguments(queue: str, delivery_limit: int = DEFAULT_DELIVERY_LIMIT) -> dict[str, Any]:
    """The arguments the request queue is declared with (a client must match them).

    ``x-single-active-consumer``: however many services consume the queue,
    the broker delivers to one of them at a time (the active owner).
    """
    return {
        "x-queue-type": "quorum",
        "x-dead-letter-exchange": dead_letter_names(queue)[0],
        "x-delivery-limit": delivery_limit,
        "x-single-active-consumer": True,
    }


BATCH = "batch"
# Items in one ``batch`` message at most (the body-size cap applies as well).
MAX_BATCH_ITEMS = 1_000
SCHEMA_PATH = Path(__file__).resolve().parent.parent.parent / "docs" / "schema.json"

# Values of the ``x-actorsched-reason`` header on a dead-lettered message.
REASONS = (
    "too-large",
    "unknown-type",
    "content-type",
    "not-utf8",
    "not-json",
    "duplicate-keys",
    "schema",
    "forbidden",  # the caller's roles do not allow it (actorsched.auth)
)

_R = TypeVar("_R")


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ReleaseRequest(_Body):
    """Body of ``release``: free the claim of one instance."""

    instance_uuid: Name


class MoveRequest(_Body):
    """Body of ``move``: claim a destination for an instance, holding its source
    under ``migration_uuid`` (``spec``: the new flavor of a resize; required for
    an instance only a host report lists)."""

    instance_uuid: Name
    migration_uuid: Name
    spec: RequestSpec | None = None
    allow_same_host: bool = False
    evacuate: bool = False


class MigrationRequest(_Body):
    """Body of ``confirm_move`` and ``revert_move``: the move's migration uuid."""

    migration_uuid: Name


class RescheduleRequest(_Body):
    """Body of ``reschedule``: the instance whose build failed, and where."""

    instance_uuid: Name
    failed_host: Name


class RemoveHostRequest(_Body):
    """Body of ``remove_host``: forget a host and its claims."""

    host: Name


# Hosts per host_states page: the reply to one stays about a megabyte.
DEFAULT_PAGE_HOSTS = 1_000
MAX_PAGE_HOSTS = 5_000


class HostStatesRequest(_Body):
    """Body of ``host_states``: one page of hosts, ``{}`` for the first; or one host.

    Pass the ``next_cursor`` of a reply as ``cursor`` for the next page; a
    reply whose ``next_cursor`` is null is the last one. With ``host`` the
    reply holds that host alone (no host when it is unknown) and only its
    figures are read, however many hosts there are.
    """

    limit: int = Field(
        DEFAULT_PAGE_HOSTS,
        ge=1,
        le=MAX_PAGE_HOSTS,
        description=f"hosts in this page at most (default {DEFAULT_PAGE_HOSTS}, "
        f"at most {MAX_PAGE_HOSTS})",
    )
    cursor: int = Field(
        0, ge=0, le=2**40, description="where the page starts: 0, or a reply's next_cursor"
    )
    host: Name | None = Field(
        None, description="only this host: the reply holds it alone, or no host when unknown"
    )

    @model_validator(mode="after")
    def _one_host_is_one_page(self) -> HostStatesRequest:
        if self.host is not None and self.cursor != 0:
            raise ValueError(
                f"cursor {self.cursor} with host: a cursor pages through every host, and "
                "one host is one page (leave cursor out)"
            )
        return self


class HostStatesPage(BaseModel):
    """Result of ``host_states``: a page of hosts, and where the next one starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hosts: dict[str, HostState]
    next_cursor: int | None = Field(
        description="cursor of the next page, null after the last; a host added or "
        "removed while paging may or may not be listed"
    )


class ClaimsRequest(_Body):
    """Body of ``claims``: one page of live claims, ``{}`` for the first."""

    host: Name | None = Field(None, description="only the claims on this host")
    limit: int = Field(
        DEFAULT_PAGE_HOSTS,
        ge=1,
        le=MAX_PAGE_HOSTS,
        description=f"claims in this page at most (default {DEFAULT_PAGE_HOSTS}, "
        f"at most {MAX_PAGE_HOSTS})",
    )
    cursor: int = Field(
        0, ge=0, le=2**40, description="where the page starts: 0, or a reply's next_cursor"
    )


class WhereRequest(_Body):
    """Body of ``where``: the instance to find."""

    instance_uuid: Name


class BatchItem(_Body):
    """One operation inside a ``batch``: its ``type`` and its body, as if sent on its own."""

    type: str = Field(
        min_length=1,
        max_length=64,
        description="an operation other than batch: select_destinations, host_report, "
        "release, remove_host, host_states, plan, claims, where, create_aggregate, "
        "update_aggregate, delete_aggregate, add_host_to_aggregate, "
        "remove_host_from_aggregate, aggregates, move, confirm_move, revert_move, reschedule",
    )
    body: Any = Field(description="the JSON body that operation takes on its own")


class BatchRequest(_Body):
    """Body of ``batch``: several operations in one message, answered in one reply.

    The items run concurrently, so the scheduler handles them in one go;
    each gets its own reply object, in order.
    """

    requests: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class HostReportResult(_Body):
    """Result of ``host_report``: False when the report was stale and ignored."""

    applied: bool


class ReleaseResult(_Body):
    """Result of ``release``: False when the instance held no claim."""

    released: bool


class RemoveHostResult(_Body):
    """Result of ``remove_host``: False when the host was unknown."""

    removed: bool


class ConfirmMoveResult(_Body):
    """Result of ``confirm_move``: False when no such move was open."""

    confirmed: bool


class RevertMoveResult(_Body):
    """Result of ``revert_move``: False when no such move was open."""

    reverted: bool


class DeleteAggregateResult(_Body):
    """Result of ``delete_aggregate``: False when there was no such aggregate."""

    deleted: bool


class WireError(BaseModel):
    """An error as it travels: the name of an ``actorsched.errors`` class and its message.

    ``NoValidHost`` also carries which instance failed and how many hosts
    each filter removed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    message: str
    instance_uuid: str | None = None
    total_hosts: int | None = None
    filter_counts: dict[str, int] | None = None


class OkReply(BaseModel, Generic[_R]):
    """A successful reply: ``{"ok": true, "result": ...}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ok: Literal[True]
    result: _R


class ErrorReply(BaseModel):
    """A failed reply: ``{"ok": false, "error": {"type": ..., "message": ...}}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ok: Literal[False]
    error: WireError


class SelectDestinationsReply(RootModel[OkReply[list[Selection]] | ErrorReply]):
    """Reply to ``select_destinations``: one Selection per instance uuid, in order."""


class HostReportReply(RootModel[OkReply[HostReportResult] | ErrorReply]):
    """Reply to ``host_report``."""


class ReleaseReply(RootModel[OkReply[ReleaseResult] | ErrorReply]):
    """Reply to ``release``."""


class RemoveHostReply(RootModel[OkReply[RemoveHostResult] | ErrorReply]):
    """Reply to ``remove_host``."""


class HostStatesReply(RootModel[OkReply[HostStatesPage] | ErrorReply]):
    """Reply to ``host_states``: a page of HostStates by host name, and the next cursor
    (or the one host asked for, and null)."""


class PlanReply(RootModel[OkReply[Plan] | ErrorReply]):
    """Reply to ``plan``: where each instance would go and why; nothing was claimed."""


class ClaimsReply(RootModel[OkReply[ClaimsPage] | ErrorReply]):
    """Reply to ``claims``: a page of live claims and the next cursor."""


class WhereReply(RootModel[OkReply[Location] | ErrorReply]):
    """Reply to ``where``: the host of the instance, or null."""


class AggregateReply(RootModel[OkReply[Aggregate] | ErrorReply]):
    """Reply to ``create_aggregate``, ``update_aggregate``, ``add_host_to_aggregate``
    and ``remove_host_from_aggregate``: the aggregate as it is now."""


class DeleteAggregateReply(RootModel[OkReply[DeleteAggregateResult] | ErrorReply]):
    """Reply to ``delete_aggregate``."""


class AggregatesReply(RootModel[OkReply[list[Aggregate]] | ErrorReply]):
    """Reply to ``aggregates``: every host aggregate, by name."""


class MoveReply(RootModel[OkReply[Selection] | ErrorReply]):
    """Reply to ``move``: the destination's Selection."""


class ConfirmMoveReply(RootModel[OkReply[ConfirmMoveResult] | ErrorReply]):
    """Reply to ``confirm_move``."""


class RevertMoveReply(RootModel[OkReply[RevertMoveResult] | ErrorReply]):
    """Reply to ``revert_move``."""


class RescheduleReply(RootModel[OkReply[Selection] | ErrorReply]):
    """Reply to ``reschedule``: the alternate claimed, with the alternates left."""


class BatchItemReply(RootModel[OkReply[Any] | ErrorReply]):
    """The reply to one item of a ``batch``: what that operation alone would reply."""


class BatchReply(RootModel[OkReply[list[BatchItemReply]] | ErrorReply]):
    """Reply to ``batch``: one reply object per item, in order.

    ``ok`` is false only when the message as a whole was refused (not JSON,
    not a batch envelope, too large); an item that fails has its own
    ``{"ok": false, ...}`` in the list while the others still run.
    """


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of the protocol: its ``type`` name and its message models."""

    name: str
    request: type[BaseModel]
    reply: type[RootModel[Any]]
    result: Any  # the type inside OkReply, for encoding

    def result_adapter(self) -> TypeAdapter[Any]:
        return _RESULT_ADAPTERS[self.name]


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation("select_destinations", RequestSpec, SelectDestinationsReply, list[Selection]),
        Operation("host_report", HostReport, HostReportReply, HostReportResult),
        Operation("release", ReleaseRequest, ReleaseReply, ReleaseResult),
        Operation("remove_host", RemoveHostRequest, RemoveHostReply, RemoveHostResult),
        Operation("host_states", HostStatesRequest, HostStatesReply, HostStatesPage),
        Operation("plan", RequestSpec, PlanReply, Plan),
        Operation("claims", ClaimsRequest, ClaimsReply, ClaimsPage),
        Operation("where", WhereRequest, WhereReply, Location),
        Operation("create_aggregate", CreateAggregateRequest, AggregateReply, Aggregate),
        Operation("update_aggregate", UpdateAggregateRequest, AggregateReply, Aggregate),
        Operation(
            "delete_aggregate", AggregateNameRequest, DeleteAggregateReply, DeleteAggregateResult
        ),
        Operation("add_host_to_aggregate", AggregateHostRequest, AggregateReply, Aggregate),
        Operation("remove_host_from_aggregate", AggregateHostRequest, AggregateReply, Aggregate),
        Operation("aggregates", AggregatesRequest, AggregatesReply, list[Aggregate]),
        Operation("move", MoveRequest, MoveReply, Selection),
        Operation("confirm_move", MigrationRequest, ConfirmMoveReply, ConfirmMoveResult),
        Operation("revert_move", MigrationRequest, RevertMoveReply, RevertMoveResult),
        Operation("reschedule", RescheduleRequest, RescheduleReply, Selection),
        Operation(BATCH, BatchRequest, BatchReply, list[BatchItemReply]),
    )
}
_RESULT_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    name: TypeAdapter(op.result) for name, op in OPERATIONS.items()
}


class BadMessage(SchedulerError):
    """A delivery that can never be handled: dead-letter it, do not retry it.

    ``reason`` is one of :data:`REASONS`.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    # json accepts NaN and Infinity, which are not JSON and no size can be
    raise ValueError(f"{name} is not valid JSON")


def _validation_summary(exc: ValidationError, limit: int = 5) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def decode_request(
    op_name: str | None,
    body: bytes,
    *,
    content_type: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_size: int | None = None,
) -> tuple[Operation, BaseModel]:
    """Check one delivery and return its operation and request model.

    Raises :class:`BadMessage` with the reason when the delivery can never
    be handled. ``body_size`` is the size the delivery declared, when
    ``body`` holds only its head (the service never reads an oversized body
    whole).

    >>> op, req = decode_request("release", b'{"instance_uuid": "vm-1"}')
    >>> op.name, req
    ('release', ReleaseRequest(instance_uuid='vm-1'))
    >>> decode_request("release", b'{"instance_uuid": "a", "instance_uuid": "b"}')
    Traceback (most recent call last):
    ...
    actorsched.amqp.protocol.BadMessage: body repeats the JSON key 'instance_uuid'; ...
    """
    size = len(body) if body_size is None else body_size
    if size > max_body_bytes:
        raise BadMessage(
            "too-large",
            f"body is {size} bytes, over the limit of {max_body_bytes}; "
            "send smaller messages or raise the service's --max-body-bytes",
        )
    op = OPERATIONS.get(op_name or "")
    if op is None:
        raise BadMessage(
            "unknown-type",
            f"unknown message type {op_name!r}; set the AMQP 'type' property to one of "
            f"{sorted(OPERATIONS)}",
        )
    if content_type and content_type.split(";")[0].strip().lower() != CONTENT_TYPE:
        raise BadMessage(
            "content-type",
            f"content_type {content_type!r} is not supported; send {CONTENT_TYPE!r} bodies",
        )
    try:
        # json.loads would take UTF-16 and UTF-32 bytes too; the protocol is UTF-8
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadMessage(
            "not-utf8", f"body is not UTF-8 ({exc.reason} at byte {exc.start}); send UTF-8 JSON"
        ) from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants)
    except _DuplicateKey as exc:
        raise BadMessage(
            "duplicate-keys",
            f"body repeats the JSON key {exc.args[0]!r}; send each key once",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise BadMessage("not-json", f"body is not JSON ({exc}); send UTF-8 JSON") from None
    return op, _validate_body(op, data)


def _validate_body(op: Operation, data: Any) -> BaseModel:
    try:
        return op.request.model_validate(data)
    except ValidationError as exc:
        raise BadMessage(
            "schema",
            f"{op.name} body does not match {op.request.__name__}: {_validation_summary(exc)}; "
            "see docs/schema.json",
        ) from None


def encode_ok(op: Operation, result: Any) -> bytes:
    """The JSON of ``{"ok": true, "result": result}`` for ``op``."""
    return b'{"ok":true,"result":' + op.result_adapter().dump_json(result) + b"}"


def encode_error(exc: BaseException) -> bytes:
    """The JSON of ``{"ok": false, "error": ...}`` for ``exc``."""
    type_name = type(exc).__name__ if isinstance(exc, SchedulerError) else "SchedulerError"
    if isinstance(exc, BadMessage):
        type_name = "InvalidRequest"  # a client needs no new class for what it sent wrong
    extra: dict[str, Any] = {}
    if isinstance(exc, NoValidHost):
        extra = {
            "instance_uuid": exc.instance_uuid,
            "total_hosts": exc.total_hosts,
            "filter_counts": exc.filter_counts,
        }
    error = WireError(type=type_name, message=str(exc), **extra)
    return ErrorReply(ok=False, error=error).model_dump_json(exclude_none=True).encode()


def decode_reply(op: Operation, body: bytes) -> Any:
    """The result of a reply to ``op``, or raise the error it carries.

    The error is the same class the embedded :class:`~actorsched.Scheduler`
    raises (``NoValidHost`` stays ``NoValidHost``).
    """
    try:
        reply = op.reply.model_validate_json(body).root
    except ValidationError as exc:
        raise _malformed(op.name, exc) from None
    return _result_or_raise(reply)


def decode_batch_item(item: BatchItem) -> tuple[Operation, BaseModel]:
    """Check one item of a ``batch`` as if it came alone; :class:`BadMessage` if it cannot run.

    >>> op, req = decode_batch_item(BatchItem(type="release", body={"instance_uuid": "vm-1"}))
    >>> op.name, req
    ('release', ReleaseRequest(instance_uuid='vm-1'))
    """
    op = OPERATIONS.get(item.type)
    if op is None or op.name == BATCH:
        raise BadMessage(
            "unknown-type",
            f"unknown operation {item.type!r} in a batch item; use one of "
            f"{sorted(name for name in OPERATIONS if name != BATCH)} (batches do not nest)",
        )
    return op, _validate_body(op, item.body)


def encode_batch_ok(items: Sequence[bytes]) -> bytes:
    """The JSON of a ``batch`` reply from its items' replies (each from encode_ok/encode_error)."""
    return b'{"ok":true,"result":[' + b",".join(items) + b"]}"


def decode_batch_reply(ops: Sequence[Operation], body: bytes) -> list[Any]:
    """Split the reply to a ``batch`` of ``ops``: per item, its result or its error.

    Each entry is what :func:`decode_reply` would return for that item, or
    the exception it would raise (not raised here: each belongs to one
    caller). A reply refused as a whole (``ok`` false) gives every item
    its own copy of that error.
    """
    try:
        reply = BatchReply.model_validate_json(body).root
    except ValidationError as exc:
        return [_malformed(BATCH, exc) for _ in ops]
    if isinstance(reply, ErrorReply):
        return [_error_from_reply(reply.error) for _ in ops]
    if len(reply.result) != len(ops):
        return [
            SchedulerError(
                f"malformed reply to {BATCH}: {len(reply.result)} replies for {len(ops)} "
                "requests; is the service speaking this protocol version?"
            )
            for _ in ops
        ]
    out: list[Any] = []
    for op, item in zip(ops, reply.result, strict=True):
        one = item.root
        if isinstance(one, ErrorReply):
            out.append(_error_from_reply(one.error))
            continue
        try:
            out.append(op.result_adapter().validate_python(one.result))
        except ValidationError as exc:
            out.append(_malformed(op.name, exc))
    return out


def _malformed(op_name: str, exc: ValidationError) -> SchedulerError:
    return SchedulerError(
        f"malformed reply to {op_name}: {_validation_summary(exc)}; "
        "is the service speaking this protocol version?"
    )


def _error_from_reply(err: WireError) -> SchedulerError:
    raised = error_from_wire(err.type, err.message)
    if isinstance(raised, NoValidHost):
        raised.instance_uuid = err.instance_uuid
        raised.total_hosts = err.total_hosts or 0
        raised.filter_counts = dict(err.filter_counts or {})
    return raised


def _result_or_raise(reply: Any) -> Any:
    if isinstance(reply, ErrorReply):
        raise _error_from_reply(reply.error)
    return reply.result


def json_schema() -> dict[str, Any]:
    """The JSON Schema document of every message, generated from the models."""
    models: list[type[BaseModel]] = []
    for op in OPERATIONS.values():
        models.extend((op.request, op.reply))
    refs, top = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/$defs/{model}"
    )
    operations = {
        name: {
            "request": refs[(op.request, "validation")],
            "reply": refs[(op.reply, "validation")],
        }
        for name, op in OPERATIONS.items()
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "actorsched AMQP protocol",
        "description": (
            "Publish to the default exchange with routing key = the queue name; the AMQP "
            "'type' property names the operation, the body is its request. Replies go to "
            "reply_to with the same correlation_id. Generated by "
            "`python -m actorsched.amqp --write-schema`; do not edit."
        ),
        "operations": operations,
        "$defs": top.get("$defs", {}),
    }


def render_schema() -> str:
    """The text of ``docs/schema.json``."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the schema, or write it: to ``docs/schema.json`` in a source tree,
    or to the PATH given (an installed package has no docs/ beside it)."""
    in_source = (SCHEMA_PATH.parent.parent / "pyproject.toml").is_file()
    parser = argparse.ArgumentParser(
        prog="python -m actorsched.amqp",
        description="print or write the JSON Schema of the AMQP protocol",
    )
    parser.add_argument(
        "--write-schema",
        nargs="?",
        const=str(SCHEMA_PATH) if in_source else "",
        metavar="PATH",
        help="write the schema to PATH instead of printing it (default in a source tree: "
        "docs/schema.json; an installed package needs PATH)",
    )
    args = parser.parse_args(argv)
    text = render_schema()
    if args.write_schema == "":
        parser.error("--write-schema needs a PATH outside a source tree (or print it: no flag)")
    if args.write_schema:
        Path(args.write_schema).write_text(text, encoding="utf-8")
        print(f"wrote {args.write_schema}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
