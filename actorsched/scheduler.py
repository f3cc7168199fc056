"""The facade people embed: ``async with Scheduler() as s``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from .actor import BatchSink, Owner
from .answers import ClaimsPage, Location, Plan
from .core import (
    COMMANDS,
    AddHostToAggregate,
    Command,
    ConfirmMove,
    CreateAggregate,
    DeleteAggregate,
    GetAggregates,
    GetClaims,
    GetHostStates,
    HostFilter,
    HostWeigher,
    Locate,
    Move,
    NovaInstances,
    PlanPlacement,
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
from .core.views import ImageBuffers
from .errors import InvalidRequest, NotActive, SchedulerError, SchedulerStopped
from .metrics import SchedulerMetrics
from .models import (
    Aggregate,
    AggregateHostRequest,
    AggregateNameRequest,
    CreateAggregateRequest,
    HostReport,
    HostState,
    RequestSpec,
    SchedulerConfig,
    Selection,
    UpdateAggregateRequest,
)

if TYPE_CHECKING:
    from .journal import Journal

__all__ = ["Role", "Scheduler"]

log = logging.getLogger("actorsched.scheduler")

Role = Literal["stopped", "standby", "active"]

# Up to this many rows, host_states() builds its objects in the caller's task
# (a few milliseconds); beyond, in a worker thread.
_STATES_INLINE = 5_000

# How often a standby reads the journal for what the active wrote: the most
# a takeover has to catch up is what the active wrote in this time.
DEFAULT_FOLLOW_INTERVAL = 0.05

_T = TypeVar("_T")
R = TypeVar("R")


def _expect(value: object, kind: type[_T], what: str) -> _T:
    if not isinstance(value, kind):
        raise InvalidRequest(
            f"{what} expects a {kind.__name__}, got {type(value).__name__}: "
            f"build one with {kind.__name__}.model_validate(...)"
        )
    return value


# the payload of each command with one, and the type it must have
_PAYLOADS: dict[type, tuple[str, type]] = {
    UpdateHost: ("report", HostReport),
    SelectDestinations: ("spec", RequestSpec),
    Release: ("instance_uuid", str),
    RemoveHost: ("host", str),
    PlanPlacement: ("spec", RequestSpec),
    Locate: ("instance_uuid", str),
    ConfirmMove: ("migration_uuid", str),
    RevertMove: ("migration_uuid", str),
    Reschedule: ("instance_uuid", str),
}


def _check_move(command: Move) -> None:
    _expect(command.instance_uuid, str, "Move")
    _expect(command.migration_uuid, str, "Move")
    if command.spec is not None:
        _expect(command.spec, RequestSpec, "Move")
    if not (isinstance(command.allow_same_host, bool) and isinstance(command.evacuate, bool)):
        raise InvalidRequest("Move: allow_same_host and evacuate must be booleans")


_M = TypeVar("_M", bound=BaseModel)


def _validated(model: type[_M], what: str, **fields: object) -> _M:
    """``model`` of ``fields``, or InvalidRequest naming what is wrong."""
    for name in ("hosts",):
        if isinstance(fields.get(name), str):
            raise InvalidRequest(f"{what}: {name} must be a list of host names, not one string")
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InvalidRequest(f"{what}: {problems}; nothing was changed") from None


def _as_dict(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else value


def _check_aggregate_command(command: object) -> None:
    """The fields of an aggregate command, checked as its request model checks them."""
    if isinstance(command, CreateAggregate):
        _validated(
            CreateAggregateRequest,
            "CreateAggregate",
            name=command.name,
            metadata=_as_dict(command.metadata),
            hosts=list(command.hosts),
        )
    elif isinstance(command, UpdateAggregate):
        _validated(
            UpdateAggregateRequest,
            "UpdateAggregate",
            name=command.name,
            metadata=_as_dict(command.metadata),
        )
    elif isinstance(command, DeleteAggregate):
        _validated(AggregateNameRequest, "DeleteAggregate", name=command.name)
    elif isinstance(command, AddHostToAggregate | RemoveHostFromAggregate):
        _validated(
            AggregateHostRequest, type(command).__name__, name=command.name, host=command.host
        )


_AGGREGATE_COMMANDS = (
    CreateAggregate,
    UpdateAggregate,
    DeleteAggregate,
    AddHostToAggregate,
    RemoveHostFromAggregate,
    GetAggregates,
)


def _check_command(command: object) -> None:
    kind = type(command)
    if isinstance(command, _AGGREGATE_COMMANDS):
        _check_aggregate_command(command)
    elif isinstance(command, UpdateHosts):
        for report in command.reports:
            _expect(report, HostReport, "UpdateHosts")
    elif isinstance(command, Move):
        _check_move(command)
    elif kind in _PAYLOADS:
        field, payload = _PAYLOADS[kind]
        _expect(getattr(command, field), payload, kind.__name__)
    elif not isinstance(command, GetHostStates | GetClaims | GetAggregates):
        known = ", ".join(entry.command.__name__ for entry in COMMANDS)
        raise InvalidRequest(f"submit expects a command ({known}), got {kind.__name__}")


class Scheduler:
    """A placement scheduler whose host state one owner task holds.

    Every call is a message to that owner, so concurrent callers can never
    see or make a half-applied change, and no locks are needed.

    >>> import asyncio
    >>> async def main() -> str:
    ...     async with Scheduler() as s:
    ...         await s.update_host(HostReport(host="node1", generation=1, memory_mb=8192,
    ...             memory_mb_used=0, vcpus=8, vcpus_used=0, local_gb=100, local_gb_used=0))
    ...         [sel] = await s.select_destinations(
    ...             RequestSpec(instance_uuids=["vm-1"], memory_mb=1024, vcpus=1, disk_gb=10))
    ...         return sel.host
    >>> asyncio.run(main())
    'node1'
    """

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        filters: Sequence[HostFilter] = (),
        weighers: Sequence[HostWeigher] = (),
        clock: Callable[[], float] = time.time,
        sink: BatchSink | None = None,
        journal: str | os.PathLike[str] | Journal | None = None,
        follow_interval: float = DEFAULT_FOLLOW_INTERVAL,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        if sink is not None and journal is not None:
            raise InvalidRequest("pass sink= or journal=, not both: the journal is the sink")
        self.config = config or SchedulerConfig()
        self._plugins = (tuple(filters), tuple(weighers))
        self._core = SchedulerCore(self.config, filters=filters, weighers=weighers)
        self._clock = clock
        self._sink = sink
        if follow_interval <= 0:
            raise InvalidRequest(f"follow_interval must be positive, got {follow_interval}")
        self._journal_arg = journal
        self._journal: Journal | None = None
        self._owner: Owner | None = None
        self._follow_interval = follow_interval
        self._follower: asyncio.Task[None] | None = None
        self._follow_stop = asyncio.Event()
        self._follow_error: BaseException | None = None
        self._starting = False
        self._stopped = False
        self._role: Role = "stopped"
        # decision log lines and metrics (actorsched.metrics), when asked for
        self.metrics: SchedulerMetrics | None = None
        if metrics is not None:
            self.attach_metrics(metrics)

    # -- lifecycle ----------------------------------------------------------

    async def start(self) -> None:
        """Start as the active owner (``async with`` does this for you).

        With ``journal=``, first open the journal and rebuild the state from
        it (raising ``JournalError`` for a foreign, damaged or locked one),
        take it over (PostgreSQL: bump the shard's epoch, fencing any
        earlier owner), apply what it holds, then run the owner with the
        journal as its sink.
        """
        if self._role == "active" or self._starting:
            return
        if self._role == "standby":
            await self.activate()
            return
        await self._guard_start(self._begin_active)

    async def follow(self) -> None:
        """Start as a standby: recover from the journal and keep following it.

        Calls fail with :class:`NotActive` until :meth:`activate`. Every
        ``follow_interval`` seconds the standby applies what the active
        wrote, so a takeover is a fence and a short tail, not a recovery.
        """
        if self._role != "stopped" or self._starting:
            raise SchedulerError(f"follow() starts a stopped Scheduler; this one is {self._role}")
        await self._guard_start(self._begin_standby)

    async def _guard_start(self, begin: Callable[[], Awaitable[None]]) -> None:
        if self._stopped:
            raise SchedulerStopped("this Scheduler was stopped; make a new one")
        self._starting = True
        try:
            await begin()
        finally:
            self._starting = False

    async def _begin_active(self) -> None:
        await self._begin_standby(follow=False)
        await self.activate()

    async def _begin_standby(self, *, follow: bool = True) -> None:
        if self._journal_arg is not None:
            self._journal = await self._open_journal(self._journal_arg)
        self._role = "standby"
        if follow and self._journal is not None:
            self._start_following()

    async def _open_journal(self, where: str | os.PathLike[str] | Journal) -> Journal:
        from .journal import Journal, open_journal  # an adapter: imported only when asked for

        journal = where if isinstance(where, Journal) else open_journal(where)
        # recovery runs before the owner exists, so nothing else touches the core
        await asyncio.to_thread(journal.open, self._core)
        try:
            journal.start()
        except BaseException:
            journal.close_now()
            raise
        return journal

    async def _follow(self) -> None:
        from .journal import JournalGap, JournalUnavailable

        journal = self._journal
        assert journal is not None
        warned = False
        stop = self._follow_stop
        while not stop.is_set():
            try:
                try:
                    await asyncio.to_thread(journal.catch_up, self._core)
                except JournalGap as gap:
                    await self._rebuild(gap)
                warned = False
            except JournalUnavailable as exc:
                if not warned:  # the database is away: keep trying, say so once
                    log.warning("standby cannot read the journal (%s); retrying", exc)
                    warned = True
            except SchedulerError as exc:
                self._follow_error = exc  # this state can no longer catch up
                log.error("standby stopped following the journal: %s", exc)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._follow_interval)

    async def _rebuild(self, gap: BaseException) -> None:
        """Start the state over from the journal's snapshot (no owner runs: a standby)."""
        from .journal import JournalGap

        journal = self._journal
        assert journal is not None
        log.warning("standby rebuilds its state from the journal's snapshot: %s", gap)
        for attempt in range(3):  # a newer snapshot may drop records between two reads
            core = SchedulerCore(self.config, filters=self._plugins[0], weighers=self._plugins[1])
            try:
                await asyncio.to_thread(journal.reload, core)
            except JournalGap:
                if attempt == 2:
                    raise
                continue
            self._core = core
            return

    def _start_following(self) -> None:
        self._follow_stop.clear()
        self._follower = asyncio.create_task(self._follow(), name="actorsched-follower")

    async def _stop_following(self) -> None:
        # never cancel it: a catch_up in its worker thread would go on applying
        # records to the core while the caller goes ahead; let it finish instead
        follower = self._follower
        if follower is not None:
            self._follow_stop.set()
            try:
                await asyncio.shield(follower)
            finally:
                if follower.done():
                    self._follower = None

    async def activate(self) -> int:
        """Take over as the active owner; returns the journal's epoch for this term.

        Fences any earlier owner (PostgreSQL bumps the shard's epoch), applies
        what the journal holds beyond this state, then starts answering. For
        a scheduler with an SQLite journal or none, the epoch is 1.
        """
        if self._role == "active":
            raise SchedulerError("this scheduler is already active")
        if self._role != "standby":
            raise SchedulerError("activate() a standby: call follow() first")
        # shielded: a takeover cut off half way (the epoch bumped, the tail not
        # applied, threads still running on the core) would be worse than one
        # that finishes after its caller gave up waiting
        return await asyncio.shield(asyncio.ensure_future(self._activate()))

    async def _activate(self) -> int:
        await self._stop_following()
        if self._follow_error is not None:
            raise self._follow_error
        epoch = 1
        journal = self._journal
        if journal is not None:
            from .journal import JournalGap

            epoch = await asyncio.to_thread(journal.acquire)
            try:
                await asyncio.to_thread(journal.catch_up, self._core)
            except JournalGap as gap:  # nobody writes after acquire: one rebuild settles it
                await self._rebuild(gap)
        self._owner = Owner(
            self._core,
            mailbox_size=self.config.mailbox_size,
            max_waiting=self.config.max_waiting,
            max_waiting_requests=self.config.max_waiting_requests,
            max_batch=self.config.max_batch,
            clock=self._clock,
            sink=journal if journal is not None else self._sink,
            observer=self.metrics.observe_batch if self.metrics is not None else None,
        )
        self._owner.start()
        self._role = "active"
        return epoch

    async def step_down(self) -> None:
        """Stop answering and go back to following the journal (a standby again).

        Everything sent so far is answered first (and made durable). Raises
        the journal's error when it failed: this state then holds changes the
        journal refused, and the process must start over from the journal.
        """
        if self._role != "active":
            return
        owner, self._owner = self._owner, None
        self._role = "standby"
        if owner is not None:
            await owner.stop()
        journal = self._journal
        if journal is not None:
            # nothing of this term (a snapshot) may be written once it follows again
            await journal.quiesce()
            if journal.failed is not None:
                raise journal.failed
            self._start_following()

    async def stop(self) -> None:
        """Answer every call sent so far; later and still-queued calls get SchedulerStopped.

        With a journal, wait until everything answered is durable, then close it.
        """
        self._stopped = True
        self._role = "stopped"
        await self._stop_following()
        if self._owner is not None:
            await self._owner.stop()
        if self._journal is not None:
            await self._journal.close()

    async def __aenter__(self) -> Scheduler:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def submit(self, command: Command[R]) -> asyncio.Future[R]:
        """Send one core command; the future this returns gives its result or error.

        The typed methods below are the API. This is the path of a caller
        that sends many commands at once: a plain call, with no coroutine or
        task per command, and the command is sent by the time it returns
        (into the mailbox, or in line for room in it), whether or not the
        future is awaited. Because it cannot wait, it raises
        :class:`MailboxFull` (and sends nothing) when the mailbox is full and
        ``config.max_waiting`` messages already wait in line for room; await
        :meth:`submit_when_room` to wait for a place instead. Raises
        InvalidRequest for what is not a command with payloads of the right
        types, and SchedulerStopped when the scheduler is not running.

        >>> from actorsched import MailboxFull
        >>> async def many(s: Scheduler, commands: list[Command]) -> list[object]:
        ...     futures = []
        ...     for command in commands:
        ...         try:
        ...             futures.append(s.submit(command))
        ...         except MailboxFull:  # the line is full: wait for a place
        ...             futures.append(await s.submit_when_room(command))
        ...     return await asyncio.gather(*futures)
        """
        _check_command(command)
        return self._ask(command, False)

    async def submit_when_room(self, command: Command[R]) -> asyncio.Future[R]:
        """Send one core command once it has a place, waiting for one; return its future.

        :meth:`submit` for a caller that can wait: past ``max_waiting`` it
        waits (unsent, first come first served) instead of raising
        MailboxFull. Feeding commands one after the other through it holds
        at most one of them waiting at a time. A caller cancelled while it
        waits sends nothing (once it has its place, the command is sent, as
        any call whose caller gives up). Raises as :meth:`submit` otherwise,
        and SchedulerStopped when the scheduler stops before it got a place.
        """
        _check_command(command)
        return await self._running_owner().send(command)

    def _ask(self, command: Command[R], wait: bool = True) -> asyncio.Future[R]:
        owner = self._owner
        if owner is None or self._stopped or self._role == "standby":
            owner = self._running_owner()  # raises the error that says which
        return owner.ask(command, wait)

    def attach_metrics(self, metrics: SchedulerMetrics) -> None:
        """Observe decisions and journal commits into ``metrics`` from now on (the
        owner tells it each answered batch); ``Scheduler(metrics=...)`` does this."""
        if self.metrics is not None:
            raise SchedulerError("this scheduler has its metrics already")
        metrics.bind(self)
        self.metrics = metrics
        if self._owner is not None:  # already running: the owner reports to it from now on
            self._owner.observer = metrics.observe_batch

    def _running_owner(self) -> Owner:
        if self._role == "standby":
            raise NotActive(
                "this scheduler is a standby: it follows the journal and answers once "
                "activate() made it the owner"
            )
        if self._owner is None or self._stopped:
            raise SchedulerStopped(
                "the scheduler is not running: use `async with Scheduler() as s` or await start()"
            )
        return self._owner

    # -- the API --------------------------------------------------------------

    async def update_host(self, report: HostReport) -> bool:
        """Apply a host report; False, and nothing changed, when it is stale."""
        _expect(report, HostReport, "update_host")
        return await self._ask(UpdateHost(report))

    async def update_hosts(self, reports: Sequence[HostReport]) -> list[bool]:
        """Apply many reports as one message (one owner step); one bool each, as update_host.

        Cheaper per report than separate calls when a batch arrives together.
        """
        for report in reports:
            _expect(report, HostReport, "update_hosts")
        return await self._ask(UpdateHosts(tuple(reports)))

    async def select_destinations(
        self, spec: RequestSpec, *, wait: float | None = None
    ) -> list[Selection]:
        """Claim a host per instance uuid, in the spec's order; raises NoValidHost.

        With ``wait`` (seconds, at most 3,600; or ``spec.wait``), a request
        that fits nowhere waits in the owner and is placed as soon as a
        release, a removal or a report makes room for it (higher
        ``spec.priority`` first, then in arrival order); NoValidHost after
        ``wait`` seconds, or at once when ``max_waiting_requests`` wait already.
        """
        _expect(spec, RequestSpec, "select_destinations")
        if wait is not None:
            spec = RequestSpec.model_validate({**spec.__dict__, "wait": wait})
        return await self._ask(SelectDestinations(spec))

    async def release(self, instance_uuid: str) -> bool:
        """Free that instance's claim at once; False when it holds none."""
        _expect(instance_uuid, str, "release")
        return await self._ask(Release(instance_uuid))

    async def move(
        self,
        instance_uuid: str,
        migration_uuid: str,
        spec: RequestSpec | None = None,
        *,
        allow_same_host: bool = False,
        evacuate: bool = False,
    ) -> Selection:
        """Claim a destination for a claimed or reported instance (a resize with
        ``spec``'s flavor, else a migration with its claim's), holding the source's
        resources under ``migration_uuid`` until :meth:`confirm_move` or
        :meth:`revert_move` (an evacuation's until its host reports it gone).

        Never the current host unless ``allow_same_host``. The same move again
        answers the same Selection; another one under that migration uuid, an
        unknown instance, or a reported-only instance without ``spec`` is
        InvalidRequest; no host fits is NoValidHost. A refused move changes nothing.
        """
        command = Move(instance_uuid, migration_uuid, spec, allow_same_host, evacuate)
        _check_move(command)
        return await self._ask(command)

    async def confirm_move(self, migration_uuid: str) -> bool:
        """Free a move's source hold; False when no such move is open."""
        _expect(migration_uuid, str, "confirm_move")
        return await self._ask(ConfirmMove(migration_uuid))

    async def revert_move(self, migration_uuid: str) -> bool:
        """Free a move's destination claim and give the instance its source claim back;
        False when no such move is open."""
        _expect(migration_uuid, str, "revert_move")
        return await self._ask(RevertMove(migration_uuid))

    async def reschedule(self, instance_uuid: str, failed_host: str) -> Selection:
        """The build on ``failed_host`` failed: free that claim and claim the first of
        the instance's alternates that still passes every filter for its request;
        the answer's alternates are those left. Raises MaxRetriesExceeded (a
        NoValidHost; the instance then holds no claim) when none does,
        InvalidRequest (nothing changed) when its claim is not on ``failed_host``."""
        _expect(instance_uuid, str, "reschedule")
        _expect(failed_host, str, "reschedule")
        return await self._ask(Reschedule(instance_uuid, failed_host))

    async def remove_host(self, host: str) -> bool:
        """Forget a host and its claims; False when unknown."""
        _expect(host, str, "remove_host")
        return await self._ask(RemoveHost(host))

    async def plan(self, spec: RequestSpec) -> Plan:
        """A dry run of :meth:`select_destinations`: where each instance would go now,
        each candidate's weight per weigher and the total, and how many hosts each
        filter removed. It claims nothing; no valid host is an answer, not an error."""
        _expect(spec, RequestSpec, "plan")
        return await self._ask(PlanPlacement(spec))

    async def claims(
        self, host: str | None = None, *, cursor: int = 0, limit: int = 1_000
    ) -> ClaimsPage:
        """A page of live claims (on ``host`` only, when given), from ``cursor``."""
        if host is not None:
            _expect(host, str, "claims")
        if not (isinstance(cursor, int) and cursor >= 0 and isinstance(limit, int) and limit > 0):
            raise InvalidRequest(f"claims needs cursor >= 0 and limit > 0, got {cursor}, {limit}")
        return await self._ask(GetClaims(host, cursor, limit))

    async def nova_instances(
        self, host: str, instances: Sequence[str], mode: Literal["add", "remove", "sync"]
    ) -> bool:
        """What Nova's compute says ``host`` runs (the Nova endpoint's instance casts):
        ``instances`` added, taken off, or all of it (``sync``). It says where an
        instance is for the hints and a group's members when no claim holds it and
        no report lists it, never a host's figures; not journaled (the computes sync
        it again). False when ``host`` is unknown."""
        _expect(host, str, "nova_instances")
        if mode not in ("add", "remove", "sync"):
            raise InvalidRequest(f"nova_instances: mode {mode!r} is not add, remove or sync")
        return await self._ask(NovaInstances(host, tuple(instances), mode))

    async def where(self, instance_uuid: str) -> Location:
        """Where ``instance_uuid`` is: its claim's host, or the host that reports it."""
        _expect(instance_uuid, str, "where")
        return await self._ask(Locate(instance_uuid))

    async def host_states(self) -> dict[str, HostState]:
        """A consistent snapshot of every host, taken in one step of the owner.

        The owner only copies the host columns (at 1,000,000 hosts a few tens
        of milliseconds), into room allocated here beforehand so that it pays
        no page faults; the HostState objects are built outside it, in a
        worker thread for a large table, so placements go on meanwhile.
        """
        into = None
        rows = self._core.table.n  # a size hint read off the owner: the owner checks it
        if rows > _STATES_INLINE:
            into = await asyncio.to_thread(ImageBuffers.for_rows, rows + rows // 64 + 1024)
        image = await self._ask(GetHostStates(into=into))
        if len(image.names) <= _STATES_INLINE:
            return image.states()
        return await asyncio.to_thread(image.states)

    def host_row(self, host: str) -> int | None:
        """The row of the host table that holds ``host`` now (None: no such host).

        Read off the owner, as a hint for a read of that one row
        (``GetHostStates(row, 1)``) that checks whose row it copied: a row stays
        its host's until the host is removed.
        """
        return self._core.table.row_of.get(host)

    # -- host aggregates (admin) ------------------------------------------------

    async def create_aggregate(
        self,
        name: str,
        metadata: Mapping[str, str | None] | None = None,
        hosts: Sequence[str] = (),
    ) -> Aggregate:
        """Create host aggregate ``name`` with ``metadata`` and ``hosts`` (reported or not).

        Asking again for the same aggregate answers it and changes nothing
        (a redelivered request); a name already taken otherwise is
        InvalidRequest, as are the bounds ``max_aggregates``,
        ``max_aggregate_hosts`` and ``max_aggregate_metadata``.

        >>> async def zone(s: Scheduler) -> str | None:
        ...     await s.create_aggregate("rack1", {"availability_zone": "az1"}, ["n1"])
        ...     return (await s.host_states())["n1"].availability_zone
        """
        request = _validated(
            CreateAggregateRequest,
            "create_aggregate",
            name=name,
            metadata=_as_dict(metadata or {}),
            hosts=hosts if isinstance(hosts, str) else list(hosts),
        )
        return await self._ask(
            CreateAggregate(request.name, request.metadata, tuple(request.hosts))
        )

    async def update_aggregate(self, name: str, metadata: Mapping[str, str | None]) -> Aggregate:
        """Merge ``metadata`` into the aggregate's (a None value deletes that key)."""
        request = _validated(
            UpdateAggregateRequest, "update_aggregate", name=name, metadata=_as_dict(metadata)
        )
        return await self._ask(UpdateAggregate(request.name, request.metadata))

    async def delete_aggregate(self, name: str) -> bool:
        """Delete an aggregate that has no hosts; False when there is none."""
        request = _validated(AggregateNameRequest, "delete_aggregate", name=name)
        return await self._ask(DeleteAggregate(request.name))

    async def add_host_to_aggregate(self, name: str, host: str) -> Aggregate:
        """Put ``host`` in aggregate ``name``; InvalidRequest when it is already there."""
        request = _validated(AggregateHostRequest, "add_host_to_aggregate", name=name, host=host)
        return await self._ask(AddHostToAggregate(request.name, request.host))

    async def remove_host_from_aggregate(self, name: str, host: str) -> Aggregate:
        """Take ``host`` out of aggregate ``name``; InvalidRequest when it is not there."""
        request = _validated(
            AggregateHostRequest, "remove_host_from_aggregate", name=name, host=host
        )
        return await self._ask(RemoveHostFromAggregate(request.name, request.host))

    async def aggregates(self) -> list[Aggregate]:
        """Every host aggregate, by name."""
        return await self._ask(GetAggregates())

    # -- introspection (cheap, read from the owner's side) --------------------

    @property
    def mailbox_depth(self) -> int:
        """Messages waiting in the owner's mailbox (at most ``mailbox_size``)."""
        return self._owner.mailbox_depth if self._owner is not None else 0

    @property
    def waiting_for_room(self) -> int:
        """Messages sent while the mailbox was full, waiting in line for room.

        At most ``config.max_waiting`` (one more while the stop message waits).
        """
        return self._owner.waiting_for_room if self._owner is not None else 0

    @property
    def pending_requests(self) -> int:
        """Placements waiting for room (``wait``), at most ``config.max_waiting_requests``."""
        return self._owner.pending_requests if self._owner is not None else 0

    @property
    def blocked_senders(self) -> int:
        """Awaiting callers past ``max_waiting``, waiting unsent for a place in the line."""
        return self._owner.blocked_senders if self._owner is not None else 0

    @property
    def host_count(self) -> int:
        return self._core.table.count

    @property
    def claim_count(self) -> int:
        return len(self._core.ledger)

    @property
    def owner_alive(self) -> bool:
        """False only on an active scheduler whose owner task has ended."""
        return self._role != "active" or (self._owner is not None and self._owner.running)

    @property
    def health(self) -> str:
        """``ok``; ``owner_stopped`` (active, its owner task ended); ``follow_stopped``
        (a standby whose journal follower failed: it can no longer take over)."""
        if not self.owner_alive:
            return "owner_stopped"
        if self._role == "standby" and self._follow_error is not None:
            return "follow_stopped"
        return "ok"

    @property
    def silent_host_count(self) -> int:
        """Hosts whose last report is older than ``service_down_time`` now."""
        table = self._core.table
        n = table.n
        silent = table.floats["reported_at"][:n] < self._clock() - self.config.service_down_time
        return int(np.count_nonzero(silent & table.active[:n]))

    @property
    def role(self) -> Role:
        """``active`` (answering), ``standby`` (following the journal) or ``stopped``."""
        return self._role

    @property
    def journal(self) -> Journal | None:
        """The open journal (its ``stats`` and ``recovery``), or None when in memory."""
        return self._journal

    @property
    def core(self) -> SchedulerCore:
        """The core, for tests and the journal; never change it from outside the owner."""
        return self._core
