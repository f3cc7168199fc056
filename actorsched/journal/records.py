"""Journal records: what one applied message changed, and how replay applies it again.

Rules this module keeps:

* Only a message that changed state is recorded: an applied host report
  (a stale one changed nothing), a placement, a release that freed a claim,
  a removed host. A failed message changed nothing (placements are all or
  nothing) and is not recorded.
* A placement is recorded with its spec, the selections it returned and
  its ``now``, and replayed with ``SchedulerCore.restore_claims``: the
  choice is never made again, since ``host_subset_size`` may pick at random.
  The claims' request fingerprint is not stored beside the spec: replay
  computes it from the spec, the request as it was sent, so a record of
  any age (older ones too) gives its claims the fingerprint they had.
* Everything else replays through the same core method with the same
  ``now``, so claim timeouts and release credits come out the same.
* A command this module does not know is an error, not a silent gap in
  the journal: a new state-changing command must be added here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from pydantic import BaseModel, ConfigDict, ValidationError

from ..actor import Envelope
from ..core import (
    COMMANDS,
    AddHostToAggregate,
    ConfirmMove,
    CreateAggregate,
    DeleteAggregate,
    Move,
    Release,
    RemoveHost,
    RemoveHostFromAggregate,
    Reschedule,
    RevertMove,
    SchedulerCore,
    SelectDestinations,
    UpdateAggregate,
    UpdateHost,
    UpdateHosts,
)
from ..core.host_facts import FACT_FIELDS, facts_key
from ..errors import InvalidRequest, MaxRetriesExceeded
from ..models import (
    AggregateHostRequest,
    AggregateNameRequest,
    CreateAggregateRequest,
    HostReport,
    RequestSpec,
    Selection,
    UpdateAggregateRequest,
)
from .errors import JournalError

log = logging.getLogger("actorsched.journal")

__all__ = ["CLAIM", "KINDS", "RELEASE", "REMOVE", "REPORT", "Record", "apply", "count_changes"]

REPORT = "report"
CLAIM = "claim"
RELEASE = "release"
REMOVE = "remove"
AGGREGATE_CREATE = "aggregate_create"
AGGREGATE_UPDATE = "aggregate_update"
AGGREGATE_DELETE = "aggregate_delete"
AGGREGATE_ADD_HOST = "aggregate_add_host"
AGGREGATE_REMOVE_HOST = "aggregate_remove_host"
MOVE = "move"
MOVE_CONFIRM = "move_confirm"
MOVE_REVERT = "move_revert"
RESCHEDULE = "reschedule"
KINDS = (
    REPORT,
    CLAIM,
    RELEASE,
    REMOVE,
    AGGREGATE_CREATE,
    AGGREGATE_UPDATE,
    AGGREGATE_DELETE,
    AGGREGATE_ADD_HOST,
    AGGREGATE_REMOVE_HOST,
    MOVE,
    MOVE_CONFIRM,
    MOVE_REVERT,
    RESCHEDULE,
)
_AGGREGATE_KINDS = frozenset(KINDS[4:9])
_FACT_FIELDS = set(FACT_FIELDS)


def _report_body(report: HostReport) -> str:
    """A report record's body: the report's JSON, its facts fields left out when
    it gives none (a record as before host facts; replay fills them in)."""
    if facts_key(report) is None:
        return report.model_dump_json(exclude=_FACT_FIELDS)
    return report.model_dump_json()


# which commands change state, and so make records, is core.COMMANDS' to say
_READ_ONLY = tuple(c.command for c in COMMANDS if c.record is None)
_WRITING = tuple(c.command for c in COMMANDS if c.record is not None)
assert {c.record for c in COMMANDS if c.record} == set(KINDS), (
    "core.COMMANDS names a record kind this module does not write or replay"
)


@dataclass(frozen=True, slots=True)
class Record:
    """One state change: its kind, the ``now`` it was applied at, and a JSON body."""

    kind: str
    now: float
    body: str


class _ClaimBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    spec: RequestSpec
    selections: list[Selection]


class _MoveBody(BaseModel):
    """A move as asked, and the destination it claimed (replay claims it again)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    instance_uuid: str
    migration_uuid: str
    spec: RequestSpec | None = None
    allow_same_host: bool = False
    evacuate: bool = False
    selection: Selection


class _RescheduleBody(BaseModel):
    """A reschedule and the alternate it claimed (None: none was left)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    instance_uuid: str
    failed_host: str
    selection: Selection | None = None


def _spent(env: Envelope) -> bool:
    """A reschedule that found no alternate: an error that still freed a claim."""
    return isinstance(env.command, Reschedule) and isinstance(env.error, MaxRetriesExceeded)


def count_changes(batch: Iterable[Envelope]) -> int:
    """How many records ``batch`` makes (cheap: the owner calls it for every batch)."""
    count = 0
    for env in batch:
        command = env.command
        if env.error is not None and _spent(env):
            count += 1
            continue
        if command is None or env.error is not None or isinstance(command, _READ_ONLY):
            continue
        if not isinstance(command, _WRITING):
            raise JournalError(
                f"command {type(command).__name__} is not journaled: add it to "
                "actorsched/journal/records.py, or its changes would be lost on restart"
            )
        if isinstance(command, UpdateHosts):
            count += sum(1 for applied in _as_list(env.result) if applied is True)
        elif env.result is not False:
            count += 1
    return count


def records_of(batch: Iterable[Envelope]) -> list[Record]:
    """The records of every state change in ``batch``, in the order applied."""
    out: list[Record] = []
    for env in batch:
        command = env.command
        now = env.now
        if env.error is not None and _spent(env):
            assert isinstance(command, Reschedule)
            body = _RescheduleBody(
                instance_uuid=command.instance_uuid, failed_host=command.failed_host
            ).model_dump_json(exclude_defaults=True)
            out.append(Record(RESCHEDULE, now, body))
            continue
        if command is None or env.error is not None:
            continue
        if isinstance(command, SelectDestinations):
            selections = ",".join(
                cast(Selection, s).model_dump_json() for s in _as_list(env.result)
            )
            # fields left at their defaults are left out: a shorter record to
            # encode, store and parse, and replay fills them in again
            spec = command.spec.model_dump_json(exclude_defaults=True)
            body = f'{{"spec":{spec},"selections":[{selections}]}}'
            out.append(Record(CLAIM, now, body))
        elif isinstance(command, UpdateHost):
            if env.result is True:
                out.append(Record(REPORT, now, _report_body(command.report)))
        elif isinstance(command, UpdateHosts):
            for report, applied in zip(command.reports, _as_list(env.result), strict=True):
                if applied is True:
                    out.append(Record(REPORT, now, _report_body(report)))
        elif isinstance(command, Release):
            if env.result is True:
                out.append(Record(RELEASE, now, json.dumps(command.instance_uuid)))
        elif isinstance(command, RemoveHost) and env.result is True:
            out.append(Record(REMOVE, now, json.dumps(command.host)))
        elif isinstance(command, CreateAggregate):
            body = CreateAggregateRequest(
                name=command.name, metadata=dict(command.metadata), hosts=list(command.hosts)
            ).model_dump_json()
            out.append(Record(AGGREGATE_CREATE, now, body))
        elif isinstance(command, UpdateAggregate):
            body = UpdateAggregateRequest(
                name=command.name, metadata=dict(command.metadata)
            ).model_dump_json()
            out.append(Record(AGGREGATE_UPDATE, now, body))
        elif isinstance(command, DeleteAggregate) and env.result is True:
            body = AggregateNameRequest(name=command.name).model_dump_json()
            out.append(Record(AGGREGATE_DELETE, now, body))
        elif isinstance(command, Move):
            body = _MoveBody(
                instance_uuid=command.instance_uuid,
                migration_uuid=command.migration_uuid,
                spec=command.spec,
                allow_same_host=command.allow_same_host,
                evacuate=command.evacuate,
                selection=cast(Selection, env.result),
            ).model_dump_json(exclude_defaults=True)
            out.append(Record(MOVE, now, body))
        elif isinstance(command, Reschedule):
            body = _RescheduleBody(
                instance_uuid=command.instance_uuid,
                failed_host=command.failed_host,
                selection=cast(Selection, env.result),
            ).model_dump_json()
            out.append(Record(RESCHEDULE, now, body))
        elif isinstance(command, ConfirmMove | RevertMove) and env.result is True:
            kind = MOVE_CONFIRM if isinstance(command, ConfirmMove) else MOVE_REVERT
            out.append(Record(kind, now, json.dumps(command.migration_uuid)))
        elif isinstance(command, AddHostToAggregate | RemoveHostFromAggregate):
            kind = (
                AGGREGATE_ADD_HOST
                if isinstance(command, AddHostToAggregate)
                else (AGGREGATE_REMOVE_HOST)
            )
            body = AggregateHostRequest(name=command.name, host=command.host).model_dump_json()
            out.append(Record(kind, now, body))
    return out


def apply(core: SchedulerCore, record: Record) -> None:
    """Apply ``record`` to ``core`` again; raises ValueError for a body that does not parse."""
    kind, now, body = record.kind, record.now, record.body
    try:
        if kind == REPORT:
            core.update_host(HostReport.model_validate_json(body), now)
        elif kind == CLAIM:
            claim = _ClaimBody.model_validate_json(body)
            core.restore_claims(claim.spec, claim.selections, now)
        elif kind == RELEASE:
            core.release(_string(body), now)
        elif kind == REMOVE:
            core.remove_host(_string(body), now)
        elif kind in _AGGREGATE_KINDS:
            _apply_aggregate(core, kind, body)
        elif kind == MOVE:
            _apply_move(core, _MoveBody.model_validate_json(body), now)
        elif kind == MOVE_CONFIRM:
            core.confirm_move(_string(body), now)
        elif kind == MOVE_REVERT:
            core.revert_move(_string(body), now)
        elif kind == RESCHEDULE:
            _apply_reschedule(core, _RescheduleBody.model_validate_json(body), now)
        else:
            raise ValueError(f"unknown record kind {kind!r}; known kinds are {list(KINDS)}")
    except ValidationError as exc:
        raise ValueError(f"{kind} record does not parse: {exc}") from exc


def _apply_aggregate(core: SchedulerCore, kind: str, body: str) -> None:
    """Replay an aggregate change. A change the state already holds (the same
    record applied twice) is refused by the core and changes nothing: skipped."""
    try:
        if kind == AGGREGATE_CREATE:
            create = CreateAggregateRequest.model_validate_json(body)
            core.create_aggregate(create.name, create.metadata, create.hosts)
        elif kind == AGGREGATE_UPDATE:
            update = UpdateAggregateRequest.model_validate_json(body)
            core.update_aggregate(update.name, update.metadata)
        elif kind == AGGREGATE_DELETE:
            core.delete_aggregate(AggregateNameRequest.model_validate_json(body).name)
        else:
            member = AggregateHostRequest.model_validate_json(body)
            if kind == AGGREGATE_ADD_HOST:
                core.add_host_to_aggregate(member.name, member.host)
            else:
                core.remove_host_from_aggregate(member.name, member.host)
    except InvalidRequest as exc:
        log.debug("replayed %s record changed nothing: %s", kind, exc)


def _apply_move(core: SchedulerCore, move: _MoveBody, now: float) -> None:
    """Replay a move: claim the destination it claimed (choosing nothing). A move
    the state already holds (the same record applied twice) changes nothing."""
    try:
        core.move(
            move.instance_uuid,
            move.migration_uuid,
            move.spec,
            now,
            allow_same_host=move.allow_same_host,
            evacuate=move.evacuate,
            placed=move.selection,
        )
    except InvalidRequest as exc:
        log.debug("replayed move record changed nothing: %s", exc)


def _apply_reschedule(core: SchedulerCore, asked: _RescheduleBody, now: float) -> None:
    """Replay a reschedule: claim the alternate it claimed, or none. One the state
    already holds (the same record applied twice) changes nothing."""
    try:
        core.reschedule(
            asked.instance_uuid,
            asked.failed_host,
            now,
            placed=asked.selection,
            spent=asked.selection is None,
        )
    except MaxRetriesExceeded:
        pass  # as it was: the claim freed, none made
    except InvalidRequest as exc:
        log.debug("replayed reschedule record changed nothing: %s", exc)


def _string(body: str) -> str:
    value = json.loads(body)
    if not isinstance(value, str):
        raise ValueError(f"expected a JSON string, got {body[:80]!r}")
    return value


def _as_list(value: object) -> list[object]:
    if not isinstance(value, list):
        raise JournalError(f"expected a list result, got {type(value).__name__}")
    return value
