"""The scheduling core: a synchronous state machine over the host table and claim ledger.

Rules this module keeps (everything that changes host state lives here):

* No I/O and no asyncio. Every public method runs to completion, so no
  other code can observe or change host state half way through a change:
  the 2015 race cannot be written here.
* Time is an argument (``now``, seconds on any monotonic clock), never read.
* Claims are keyed by instance uuid: asking twice for the same uuids with
  the same request (its fingerprint) returns the same selections and claims
  nothing more; the same uuids with another request are refused.
* A request is placed all or nothing: a failure rolls back every claim the
  request made before it raises, and the state is then exactly as before.
* A claim changes its host by exactly what the filters checked: its own
  resources while assumed, nothing once a report's figures carry it. A
  uuid claimed again while its host still lists it and credits it back
  (released, the old instance not gone yet) is an assumed claim beside the
  credit: that listing is the released instance, and the claim is
  confirmed only by a listing after the credit ended.
* A report is applied only when its generation is above the host's last.
* A claim keeps its request's ``owner`` (the broker user that placed it) through
  moves, holds and reschedules. A command restricted to a ``caller`` (a
  tenant on the bus) acts only on that caller's own claims
  (:meth:`SchedulerCore._check_own`, the one place that says so), and a repeat
  of a claimed uuid by another owner is Forbidden: nothing changes.
* Host aggregates change only through the admin commands, each checked
  whole before any change (a refused one changes nothing). A row's zone is
  its aggregates' ``availability_zone`` when they have one, else its
  report's; its allocation ratios are, per resource, its aggregates'
  smallest when that Aggregate*Filter is enabled, else the ratio its report
  carries, else the configured one (the CPU weigher's is always the host's
  own: the report's, else the configured one). Both are rewritten for
  exactly the hosts an aggregate change concerns, and for a host when it
  reports.
* What a report says of Placement's inventories beyond its figures (reserved
  vCPUs and disk, each class's ``Units``) is written with them, on either
  path (:meth:`SchedulerCore._set_inventory`): a ``max_unit`` bounds its
  class's headroom, a ``min_unit`` or ``step_size`` above 1 is
  :class:`~.inventory.PlacementUnits`' to apply. That filter is in the chain
  while some host has such units, and only then (a chain of built-in filters
  alone lets the ranking skip every filter for a request of resources only).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import logging
import operator
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, TypeVar, cast

import numpy as np

from ..answers import ClaimInfo, ClaimsPage, Location, Plan, PlanCandidate, PlannedInstance
from ..errors import Forbidden, InvalidRequest, MaxRetriesExceeded, NoValidHost
from ..models import (
    Aggregate,
    Destination,
    HostReport,
    HostState,
    RequestSpec,
    SchedulerConfig,
    Selection,
    ServerGroup,
)
from .aggregates import AZ_KEY, AggregateBook, AggregateChange
from .commands import (
    AddHostToAggregate,
    Command,
    ConfirmMove,
    CreateAggregate,
    DeleteAggregate,
    GetAggregates,
    GetClaims,
    GetHostStates,
    Locate,
    Move,
    NovaInstances,
    PlanPlacement,
    Release,
    RemoveHost,
    RemoveHostFromAggregate,
    Reschedule,
    RevertMove,
    SelectDestinations,
    UpdateAggregate,
    UpdateHost,
    UpdateHosts,
)
from .filters import BUILTIN_FILTER_CLASSES, HostFilter, PlacementContext, request_filters
from .host_facts import facts_key
from .inventory import UNIT_FIELDS, PlacementUnits
from .ledger import (
    Claim,
    ClaimLedger,
    ImageProps,
    Migration,
    asks_resources_only,
    fingerprint_differences,
    request_fingerprint,
)
from .preemption import candidates
from .ranking import COMPRESS_BELOW, Ranker, weigh_layout
from .table import HostTable, report_values, reported_figures
from .views import capture_host_states, host_state
from .weighers import HostWeigher, builtin_weighers, multiplier_key

# told each choice of select_destinations before its claim: (context, uuid, row, ranked rows)
Observer = Callable[[PlacementContext, str, int, list[int]], None]

__all__ = ["SchedulerCore"]

R = TypeVar("R")

log = logging.getLogger("actorsched.core")

_EMPTY: frozenset[str] = frozenset()
# what a placement that may not preempt releases (nothing: never appended to)
_NO_EVICTIONS: list[tuple[Claim, bool]] = []
# Distinct request fingerprints kept for sharing between claims before the
# pool starts over (it only saves memory: a fingerprint not in it is fine).
_FINGERPRINT_POOL = 4_096
# Requests kept for a reschedule, by instance uuid: the latest placements'
# (a build fails soon after its placement), which snapshots keep too; an older
# claim reschedules by its resources and group alone.
_KEPT_REQUESTS = 10_000
# distinct images whose property tuples the claims share (past it, a new tuple
# per image again: the cache is only a saving of memory)
_MAX_IMAGES = 4_096
# Candidate hosts a preemption frees and tries before it gives up: each try
# is a full ranking, and a candidate fails it only when a filter outside the
# room rules (a plug-in, a group its victims were in) refuses the host.
_PREEMPTION_TRIES = 8
# a report's own allocation ratios (ram, cpu, disk); all None in most reports
_REPORTED_RATIOS = operator.attrgetter(
    "ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio"
)
_NO_RATIOS = (None, None, None)
# A report names a ratio, reserved vCPUs or disk, or units only if one of these
# was given (pydantic's set of the fields a message was built with: a cheaper
# test than reading them)
_RAM, _CPU, _DISK = "ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio"
_RATIOS = frozenset((_RAM, _CPU, _DISK))
_INVENTORY = frozenset(("vcpus_reserved", "local_gb_reserved", *UNIT_FIELDS))
_SPECIAL = _RATIOS | _INVENTORY
# what a digest leaves out of each HostState's JSON (the reserved figures it adds
# apart, when some host has them, so a state without them digests as before)
_DIGEST_EXCLUDE = {"reported_at", "vcpus_reserved", "local_gb_reserved"}
# the filter whose aggregate ratio a row takes, per resource (ram, cpu, disk)
_AGGREGATE_RATIO_FILTERS = ("AggregateRamFilter", "AggregateCoreFilter", "AggregateDiskFilter")
# the filter of each resource that reads the host's own ratio
_OWN_RATIO_FILTERS = ("RamFilter", "CoreFilter", "DiskFilter")


def _move_request(spec: RequestSpec | None, allow_same_host: bool, evacuate: bool) -> str:
    """What a move asks, as canonical JSON (a redelivery's must be equal)."""
    parts = [f'"allow_same_host":{str(allow_same_host).lower()}']
    parts.append(f'"evacuate":{str(evacuate).lower()}')
    if spec is not None:
        parts.append('"spec":' + request_fingerprint(spec))
    return "{" + ",".join(parts) + "}"


class SchedulerCore:
    """All host state and every rule that changes it.

    >>> core = SchedulerCore()
    >>> core.update_host(HostReport(host="n1", generation=1, memory_mb=2048,
    ...     memory_mb_used=0, vcpus=2, vcpus_used=0, local_gb=20, local_gb_used=0), now=0.0)
    True
    >>> spec = RequestSpec(instance_uuids=["vm1"], memory_mb=512, vcpus=1, disk_gb=1)
    >>> core.select_destinations(spec, now=1.0)[0].host
    'n1'
    """

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        filters: Sequence[HostFilter] = (),
        weighers: Sequence[HostWeigher] = (),
        compress_below: float = COMPRESS_BELOW,
        shortcut: bool = True,
    ) -> None:
        self.config = config = config or SchedulerConfig()
        layout = weigh_layout(config, weighers)
        # what a plan explains: every weigher that may weigh (a multiplier of 0
        # may be an aggregate's multiplier_key's for some hosts)
        self.weighers: list[HostWeigher] = [
            w
            for w in [*builtin_weighers(config), *weighers]
            if w.multiplier != 0 or multiplier_key(w) is not None
        ]
        self.table = HostTable(
            config.ram_allocation_ratio,
            config.cpu_allocation_ratio,
            config.disk_allocation_ratio,
            layout.order,
            len(layout.multipliers),
            layout.floors,
            nova_release=config.nova_release,
        )
        self.ledger = ClaimLedger()
        builtin: list[HostFilter] = [
            *request_filters(config),
            *(BUILTIN_FILTER_CLASSES[name]() for name in config.enabled_filters),
        ]
        # the chain without and with Placement's units (_chain_units picks one)
        self._units_filter = PlacementUnits()
        self._plain_chain: list[HostFilter] = [*builtin, *filters]
        self._units_chain: list[HostFilter] = [*builtin, self._units_filter, *filters]
        self._layout = layout
        self.filters = self._plain_chain
        self.ranker = Ranker(
            self.table, self.filters, layout, compress_below=compress_below, shortcut=shortcut
        )
        # Filters answered per row by table.row_ok (kept current on every row
        # change) or by the one freshness compare below; the rest run per request.
        names = set(config.enabled_filters)
        self.table.check_enabled = "ComputeFilter" in names
        if "NumInstancesFilter" in names:
            self.table.max_instances = config.max_instances_per_host
        if "IoOpsFilter" in names:
            self.table.max_io_ops = config.max_io_ops_per_host
        # ComputeFilter's freshness half: rows whose last report is older than
        # service_down_time are marked stale (failing row_ok) by _sweep, which
        # looks at the whole column only when the oldest report may be too old.
        self._check_fresh = "ComputeFilter" in names
        # With a default architecture, ImagePropertiesFilter asks something of
        # every request: none may take the ranking's resources-only shortcut.
        self._shortcut_requests = not (
            "ImagePropertiesFilter" in names
            and config.image_properties_default_architecture is not None
        )
        # claims keep their image's properties only for ImagePropertiesWeigher
        self._keeps_images = config.image_props_weight_multiplier != 0
        self._images: dict[ImageProps, ImageProps] = {}  # see _image_of
        self._oldest = np.inf  # at most the oldest reported_at of a row not marked stale
        self._swept_below = -np.inf  # rows reported before this are marked stale
        self._rng = random.Random(config.seed)
        self._preemption = config.preemption  # read on every request
        # instances placed by preempting (a plan's too): the owner tells its
        # observer which placements preempted by this count's change
        self.preemptions = 0
        # read on every request (config is frozen)
        self._subset = config.host_subset_size
        self._alternates = config.max_attempts - 1
        self._want = self._subset + self._alternates  # rows ranked for a single instance
        self._fingerprints: dict[object, str] = {}  # see _fingerprint
        self._requests: dict[str, RequestSpec] = {}  # see _kept_request
        self.aggregates = AggregateBook(config)
        self.table.membership_names = self.aggregates.memberships
        # per resource: does an aggregate's ratio count (its Aggregate*Filter is on)
        self._aggregate_ratios = tuple(name in names for name in _AGGREGATE_RATIO_FILTERS)
        # per resource: is its plain filter on too (RamFilter beside AggregateRamFilter,
        # Nova 18): a host must pass both, so the smaller of the two ratios counts
        self._own_ratios_too = tuple(name in names for name in _OWN_RATIO_FILTERS)
        # rows whose last report carried an allocation ratio: row -> (ram, cpu, disk)
        self.reported_ratios: dict[int, tuple[float | None, float | None, float | None]] = {}
        # hosts in an aggregate with availability_zone metadata -> that zone's id
        self._zone_pins: dict[str, int] = {}
        # what a placement's filters see of the aggregates: None while there are none
        self._placing_aggregates: AggregateBook | None = None
        self._top: Callable[[PlacementContext, int, bool], list[int]] = self.ranker.top
        self._use_ranker(self.ranker)

    def _use_ranker(self, ranker: Ranker) -> None:
        # the ranking every placement asks: with shuffle_best_same_weighed_hosts
        # the hosts of equal best weight come in random order (the seeded RNG)
        self.ranker = ranker
        self._top = ranker.top
        if self.config.shuffle_best_same_weighed_hosts:
            self._top = functools.partial(ranker.top_shuffled, rng=self._rng)

    def _chain_units(self) -> None:
        """Put :class:`PlacementUnits` in the filter chain while some row has a
        min_unit or step_size above 1, and take it out when none has (a new
        Ranker over the same table, with the same knobs)."""
        chain = self._units_chain if self.table.unit_steps else self._plain_chain
        if chain is self.filters:
            return
        old = self.ranker
        self.filters = chain
        self._use_ranker(
            Ranker(
                self.table,
                chain,
                self._layout,
                compress_below=old.compress_below,
                shortcut=old.shortcut,
                shortcut_max_want=old.shortcut_max_want,
                shortcut_max_misfits=old.shortcut_max_misfits,
            )
        )

    # -- dispatch ---------------------------------------------------------

    def handle(self, command: Command[R], now: float) -> R:
        """Apply one command and return its result (or raise its error)."""
        result: object
        if isinstance(command, SelectDestinations):
            result = self.select_destinations(command.spec, now)
        elif isinstance(command, UpdateHost):
            result = self.update_host(command.report, now)
        elif isinstance(command, UpdateHosts):
            result = self.update_hosts(command.reports, now)
        elif isinstance(command, Release):
            self._check_own(command.caller, command.instance_uuid, "release", absent_ok=True)
            result = self.release(command.instance_uuid, now)
        elif isinstance(command, RemoveHost):
            result = self.remove_host(command.host, now)
        elif isinstance(command, GetHostStates):
            result = capture_host_states(self.table, command.start, command.limit, command.into)
        elif isinstance(command, PlanPlacement):
            result = self.plan(command.spec, now)
        elif isinstance(command, GetClaims):
            result = self.claims_page(command.host, command.start, command.limit, command.caller)
        elif isinstance(command, Locate):
            self._check_own(command.caller, command.instance_uuid, "where")
            result = self.where(command.instance_uuid)
        elif isinstance(command, CreateAggregate):
            result = self.create_aggregate(command.name, command.metadata, command.hosts)
        elif isinstance(command, UpdateAggregate):
            result = self.update_aggregate(command.name, command.metadata)
        elif isinstance(command, DeleteAggregate):
            result = self.delete_aggregate(command.name)
        elif isinstance(command, AddHostToAggregate):
            result = self.add_host_to_aggregate(command.name, command.host)
        elif isinstance(command, RemoveHostFromAggregate):
            result = self.remove_host_from_aggregate(command.name, command.host)
        elif isinstance(command, GetAggregates):
            result = self.aggregates.aggregates()
        elif isinstance(command, Move):
            self._check_own(command.caller, command.instance_uuid, "move")
            result = self.move(
                command.instance_uuid,
                command.migration_uuid,
                command.spec,
                now,
                allow_same_host=command.allow_same_host,
                evacuate=command.evacuate,
            )
        elif isinstance(command, ConfirmMove):
            self._check_own(command.caller, command.migration_uuid, "confirm_move", absent_ok=True)
            result = self.confirm_move(command.migration_uuid, now)
        elif isinstance(command, RevertMove):
            self._check_own(command.caller, command.migration_uuid, "revert_move", absent_ok=True)
            result = self.revert_move(command.migration_uuid, now)
        elif isinstance(command, Reschedule):
            self._check_own(command.caller, command.instance_uuid, "reschedule")
            result = self.reschedule(command.instance_uuid, command.failed_host, now)
        elif isinstance(command, NovaInstances):
            result = self.nova_instances(command.host, command.instances, command.mode)
        else:
            raise InvalidRequest(f"unknown command {type(command).__name__!r}")
        return cast(R, result)  # each branch answers its command's own type

    def _check_own(
        self, caller: str | None, uuid: str, operation: str, *, absent_ok: bool = False
    ) -> None:
        """The one ownership rule: a command restricted to ``caller`` (a tenant, on the
        bus) acts only on a claim its owner made, a move's hold (keyed by its migration
        uuid) included; else Forbidden, nothing changed. A uuid no claim holds is
        nobody's: ``absent_ok`` (a release, a confirm, a revert) lets the command answer
        that it did nothing; the others (a read, a move) are refused."""
        if caller is None:
            return
        claim = self.ledger.claims.get(uuid)
        if claim is None and absent_ok:
            return
        if claim is None or claim.owner != caller:
            raise Forbidden(
                f"forbidden: {operation} of {uuid}: {caller!r} may only {operation} claims it "
                "made (another's claim, or none, needs the role 'admin'"
                + ("" if operation != "where" else " or 'read'")
                + ")"
            )

    # -- host reports -----------------------------------------------------

    def update_host(self, report: HostReport, now: float) -> bool:
        """Apply a compute node's report; False (and no change) when it is stale."""
        table = self.table
        row = table.row_of.get(report.host)
        if row is not None and report.generation <= table.ints["generation"][row]:
            return False
        zone = report.availability_zone
        if (
            row is None
            or (zone is not None and zone not in table.zone_ids)
            or (report.traits and tuple(report.traits) not in table.trait_sets)
        ):
            self._check_room((report,))  # before any change: a refused report changes nothing
        if row is None:
            row = table.add_row(report.host)
            if self.aggregates.of_host:
                table.agg_set[row] = self.aggregates.membership_of(report.host)
                self._set_ratios(row, _NO_RATIOS)  # its aggregates' (the report's below)
        table.floats["reported_at"][row] = now
        if now < self._oldest:
            self._oldest = now
        table.stale[row] = False
        table.enabled[row] = report.enabled
        zid = table.zone_id(report.availability_zone, create=True)
        table.reported_zone[row] = zid
        table.zone[row] = self._zone_pins.get(report.host, zid) if self._zone_pins else zid
        ratios = _REPORTED_RATIOS(report)
        if ratios != _NO_RATIOS or row in self.reported_ratios or row in table.custom_ratios:
            self._set_ratios(row, ratios)  # the report's set_reported refreshes the row
        if tuple(report.traits) != table.host_traits[row]:
            table.set_traits(row, report.traits)
        if report.node is not None or table.node_of:
            table.set_node(row, report.node)
        facts = facts_key(report)
        if facts is not None or (table.host_facts.held and table.facts_id[row]):
            table.host_facts.assign(table, row, facts)
        if (
            not _INVENTORY.isdisjoint(report.__pydantic_fields_set__)
            or row in table.inventory
            or row in table.units
        ):
            self._set_inventory(row, report)  # set_reported refreshes the row
        table.set_reported(row, reported_figures(report))
        self._reconcile(row, frozenset(report.instances) if report.instances else _EMPTY, now)
        return True

    def _check_room(self, reports: Sequence[HostReport]) -> None:
        """Refuse ``reports`` (before any change) if they would pass a vocabulary bound.

        Set operations over the whole batch (a few C-level passes, no Python
        loop body per report), then exact counts for what is new alone.
        """
        table = self.table
        hosts: set[str] = set()
        if table.count + len(reports) > self.config.max_hosts:  # else they all fit anyway
            hosts = {r.host for r in reports}.difference(table.row_of)
        zones = {r.availability_zone for r in reports}.difference(table.zone_ids)
        traits = set().union(*[r.traits for r in reports]).difference(table.trait_bits)
        if hosts or traits or len(zones) > (None in zones):
            self._check_new(hosts, traits, {z for z in zones if z is not None})

    def _check_new(self, hosts: set[str], traits: set[str], zones: set[str]) -> None:
        table = self.table
        config = self.config
        if hosts and table.count + len(hosts) > config.max_hosts:
            raise InvalidRequest(
                f"{len(hosts):,} new hosts (first {min(hosts)!r}) would pass "
                f"max_hosts {config.max_hosts:,} ({table.count:,} known): remove hosts that "
                "are gone (remove_host), or raise max_hosts"
            )
        if traits and len(table.trait_names) + len(traits) > config.max_traits:
            raise InvalidRequest(
                f"{len(traits):,} new trait names (first {min(traits)!r}) would pass "
                f"max_traits {config.max_traits:,} ({len(table.trait_names):,} known): a "
                "trait is a capability name shared by many hosts, not a per-host value"
            )
        if zones and len(table.zone_names) + len(zones) > config.max_zones:
            raise InvalidRequest(
                f"{len(zones):,} new availability zones (first {min(zones)!r}) would "
                f"pass max_zones {config.max_zones:,}: report an existing zone, or raise "
                "max_zones"
            )

    def update_hosts(self, reports: Sequence[HostReport], now: float) -> list[bool]:
        """:meth:`update_host` for each report in order, the figures written in one go.

        A report of a host with claims, credits or listed instances (before
        or now) goes through :meth:`update_host`; so does every report of a
        batch that names a host twice. For the rest (most reports of a large
        fleet) the rows' figures are written and derived with a few NumPy
        calls over the whole batch: the same state, for about 2.5 times fewer
        instructions per report. A report's reserved vCPUs and disk and its
        units (rare) are written on this path too.
        """
        table = self.table
        self._check_room(reports)  # all or nothing: a refused batch changes nothing
        hosts = [report.host for report in reports]
        if len(reports) < 8 or len(set(hosts)) != len(hosts):
            return [self.update_host(report, now) for report in reports]
        row_of = table.row_of
        known = [row_of.get(host) for host in hosts]
        seen = [row for row in known if row is not None]
        generations = dict(zip(seen, table.raw[seen, 0].tolist(), strict=True))
        listed = self.ledger.listed
        claimed = self.ledger.by_row
        credited = self.ledger.released
        reported_ratios = self.reported_ratios
        held, units = table.inventory, table.units  # the table's own dicts
        zone_ids = table.zone_ids
        applied: list[bool] = []
        rows: list[int] = []
        figures: list[tuple[int, ...]] = []
        enabled: list[bool] = []
        zones: list[int] = []
        nodes = table.node_of  # the table's own dict: rows whose node is named otherwise
        for report, row in zip(reports, known, strict=True):
            # the report's fields from its __dict__: faster than pydantic's attributes
            fields = report.__dict__
            if row is not None:
                if fields["generation"] <= generations[row]:
                    applied.append(False)
                    continue
                if row in listed or row in claimed or row in credited:
                    applied.append(self.update_host(report, now))
                    continue
            given = report.__pydantic_fields_set__
            special = not _SPECIAL.isdisjoint(given)  # a ratio or inventory figures given
            # a ratio given: the one-report path
            if fields["instances"] or (special and not _RATIOS.isdisjoint(given)):
                applied.append(self.update_host(report, now))
                continue
            if row is None:
                row = table.add_row(fields["host"])
                if self.aggregates.of_host:
                    table.agg_set[row] = self.aggregates.membership_of(fields["host"])
                    self._set_ratios(row, _NO_RATIOS)
            elif reported_ratios and row in reported_ratios:
                applied.append(self.update_host(report, now))
                continue
            traits = fields["traits"]
            if tuple(traits) != table.host_traits[row]:
                table.set_traits(row, traits)
            node = fields["node"]
            if node is not None or nodes:
                table.set_node(row, node)
            facts = facts_key(report)
            if facts is not None or (table.host_facts.held and table.facts_id[row]):
                table.host_facts.assign(table, row, facts)
            if special or ((held or units) and (row in held or row in units)):
                self._set_inventory(row, report)  # set_reported_many refreshes the row
            rows.append(row)
            figures.append((*report_values(report), 0))  # reported_figures: it lists none
            enabled.append(fields["enabled"])
            zone = fields["availability_zone"]
            if zone is None:
                zones.append(-1)
            else:
                zid = zone_ids.get(zone)
                zones.append(table.zone_id(zone, create=True) if zid is None else zid)
            applied.append(True)
        if rows:
            table.set_reported_many(rows, figures, enabled, zones, now)
            pins = self._zone_pins
            if pins:
                names = table.name_of
                for row in rows:
                    pin = pins.get(names[row] or "")
                    if pin is not None:
                        table.zone[row] = pin
            if now < self._oldest:
                self._oldest = now
        return applied

    def _set_inventory(self, row: int, report: HostReport) -> None:
        """Write what ``report`` says of Placement's inventories: its reserved vCPUs
        and disk and its units (the caller refreshes the row)."""
        changed = self.table.set_inventory(
            row,
            (report.memory_mb_units, report.vcpus_units, report.local_gb_units),
            (report.memory_mb, report.vcpus, report.local_gb),
            report.vcpus_reserved,
            report.local_gb_reserved,
        )
        if changed:
            self._chain_units()

    # -- allocation ratios and host aggregates ------------------------------

    def _set_ratios(
        self, row: int, reported: tuple[float | None, float | None, float | None]
    ) -> bool:
        """Record the ratios ``row``'s report carries and write its effective ones
        (the caller refreshes the row); True when the effective ones changed.

        The host's own ratio of each resource is its report's, else the
        configured one; the resource filters take its aggregates' instead when
        that Aggregate*Filter is on (the smaller of the two when the plain
        filter is on as well: Nova 18 runs both, RamFilter with the host's own
        ratio and AggregateRamFilter with the aggregate's, and a headroom grows
        with its ratio), the CPU weigher never (as Nova's CPUWeigher)."""
        if reported == _NO_RATIOS:
            self.reported_ratios.pop(row, None)
        else:
            self.reported_ratios[row] = reported
        table = self.table
        own = [
            mine if mine is not None else default
            for mine, default in zip(reported, table.default_ratios[:3], strict=True)
        ]
        membership = int(table.agg_set[row])
        from_aggregates = (
            self.aggregates.ratios_of(membership)
            if membership and any(self._aggregate_ratios)
            else _NO_RATIOS
        )
        ram, cpu, disk = (
            mine if not use or aggregate is None else min(aggregate, mine) if both else aggregate
            for use, both, aggregate, mine in zip(
                self._aggregate_ratios, self._own_ratios_too, from_aggregates, own, strict=True
            )
        )
        return table.set_ratios(row, (ram, cpu, disk, own[1]))

    def create_aggregate(
        self,
        name: str,
        metadata: Mapping[str, str | None] | None = None,
        hosts: Sequence[str] = (),
    ) -> Aggregate:
        """Create host aggregate ``name``; the same one again is answered, not refused."""
        change = self.aggregates.plan_create(name, metadata or {}, hosts)
        if change is not None:
            self._change_aggregates(change)
        return self.aggregates.get(name)

    def update_aggregate(self, name: str, metadata: Mapping[str, str | None]) -> Aggregate:
        """Merge ``metadata`` into aggregate ``name``'s; a None value deletes that key."""
        self._change_aggregates(self.aggregates.plan_update(name, metadata))
        return self.aggregates.get(name)

    def delete_aggregate(self, name: str) -> bool:
        """Delete aggregate ``name`` (it must have no hosts); False when there is none."""
        change = self.aggregates.plan_delete(name)
        if change is None:
            return False
        self._change_aggregates(change)
        return True

    def add_host_to_aggregate(self, name: str, host: str) -> Aggregate:
        """Put ``host`` (reported or not) in aggregate ``name``."""
        self._change_aggregates(self.aggregates.plan_add_host(name, host))
        return self.aggregates.get(name)

    def remove_host_from_aggregate(self, name: str, host: str) -> Aggregate:
        """Take ``host`` out of aggregate ``name``."""
        self._change_aggregates(self.aggregates.plan_remove_host(name, host))
        return self.aggregates.get(name)

    def _change_aggregates(self, change: AggregateChange) -> None:
        """Make a checked change, then rewrite the zone, membership and ratios of
        every row it concerns."""
        table = self.table
        book = self.aggregates
        zone = None if change.delete else change.metadata.get(AZ_KEY)
        if zone is not None and zone not in table.zone_ids:
            self._check_new(set(), set(), {zone})  # before any change
        hosts: Iterable[str] = book.apply(change)
        self._placing_aggregates = book if book.by_name else None
        if book.compact_due:
            book.compact()
            table.membership_names = book.memberships
            hosts = set(table.row_of) | set(book.of_host) | set(self._zone_pins)
        pins = self._zone_pins
        for host in hosts:
            membership = book.membership_of(host)
            zone = book.zone_of(membership) if membership else None
            if zone is None:
                pins.pop(host, None)
            else:
                pins[host] = table.zone_id(zone, create=True)
            row = table.row_of.get(host)
            if row is None:
                continue
            table.agg_set[row] = membership
            table.zone[row] = pins.get(host, int(table.reported_zone[row]))
            if self._set_ratios(row, self.reported_ratios.get(row, _NO_RATIOS)):
                table.refresh(row)

    def _reconcile(self, row: int, listed: frozenset[str], now: float) -> None:
        """Settle claims and release credits on ``row`` against what its report lists."""
        table = self.table
        ledger = self.ledger
        ledger.set_listed(row, listed)
        credits = ledger.released.get(row)
        for uuid in list(ledger.by_row.get(row, ())):
            claim = ledger.claims[uuid]
            if ledger.migrations and self._settle_move(row, uuid, claim, listed):
                continue
            # a credited uuid that is listed is the released instance, not this claim's
            if uuid in listed and not (credits and uuid in credits):
                self._set_confirmed(claim, True)  # the report's used figures carry it now
            elif claim.confirmed:
                ledger.drop(uuid)
                log.info(
                    "instance %s no longer runs on %s: claim dropped", uuid, table.name_of[row]
                )
            elif now - claim.created_at > self.config.claim_timeout:
                ledger.drop(uuid)
                table.add_claimed(row, claim.memory_mb, claim.vcpus, claim.disk_gb, -1)
                log.warning(
                    "claim of instance %s on %s dropped: not reported after %.0fs (claim_timeout)",
                    uuid,
                    table.name_of[row],
                    now - claim.created_at,
                )
        if credits:
            for uuid, (mem, vcpus, disk) in list(credits.items()):
                if uuid not in listed:
                    del credits[uuid]
                    table.add_released(row, mem, vcpus, disk, -1)
            if not credits:
                del ledger.released[row]

    def nova_instances(
        self, host: str, instances: Sequence[str], mode: Literal["add", "remove", "sync"]
    ) -> bool:
        """What Nova's compute says ``host`` runs (its instance casts): ``instances``
        added, taken off, or all of it. Where an instance is, for the hints and a
        group's members, when no claim holds it and no report lists it; never in the
        host's figures (its reports or Placement carry those). False: unknown host."""
        row = self.table.row_of.get(host)
        if row is None:
            return False
        ledger = self.ledger
        now = ledger.nova_listed.get(row, frozenset())
        if mode == "sync":
            listed = frozenset(instances)
        elif mode == "add":
            listed = now | frozenset(instances)
        else:
            listed = now - frozenset(instances)
        ledger.set_nova_listed(row, listed)
        return True

    def remove_host(self, host: str, now: float) -> bool:
        """Forget ``host`` with its claims; False when it is unknown."""
        table = self.table
        row = table.row_of.get(host)
        if row is None:
            return False
        self.ledger.forget_row(row)
        self.reported_ratios.pop(row, None)
        table.remove_row(row)
        if self.filters is self._units_chain:
            self._chain_units()  # the last row with units may have gone
        return True

    # -- claims -----------------------------------------------------------

    def locate(self, instance_uuid: str) -> int | None:
        """Row of the host that holds or runs ``instance_uuid``, or None."""
        return self.ledger.locate(instance_uuid)

    def select_destinations(
        self,
        spec: RequestSpec,
        now: float,
        observe: Observer | None = None,
        *,
        preempt: bool = True,
        evicted: list[tuple[Claim, bool]] | None = None,
        keep: bool = True,
    ) -> list[Selection]:
        """Claim a host for every instance of ``spec``, or raise and claim nothing.

        Every uuid already claimed by this same request (equal
        :func:`~actorsched.core.ledger.request_fingerprint`): the same
        selections, nothing claimed. By another request: InvalidRequest
        naming what differs. ``observe(ctx, uuid, row, top)`` is told each
        choice before its claim (:meth:`plan` explains them).

        With ``SchedulerConfig.preemption`` on (and ``preempt``), an instance
        that fits nowhere may free one host by releasing lower-priority claims
        (:mod:`.preemption` chooses them); its selection's ``preempted`` names
        them. A failed request gives them back with the rest. ``evicted``,
        when given, is told each claim released and whether its release
        credited it (:meth:`plan` gives them back).
        """
        claims = self.ledger.claims
        resources_only = asks_resources_only(spec)
        fingerprint = self._fingerprint(spec, resources_only)
        resources_only = resources_only and self._shortcut_requests  # for the ranking
        held = [u for u in spec.instance_uuids if u in claims]
        if held:
            if len(held) == len(spec.instance_uuids):
                self._check_same_request(spec, fingerprint)
                return [claims[u].selection for u in spec.instance_uuids]
            fresh = [u for u in spec.instance_uuids if u not in claims]
            raise InvalidRequest(
                f"instance_uuids {held} already hold claims but {fresh} do not; "
                "resend the original request unchanged, or release the claimed ones first"
            )
        if len(claims) + len(spec.instance_uuids) > self.config.max_claims:
            raise InvalidRequest(
                f"the scheduler holds {len(claims):,} live claims and max_claims is "
                f"{self.config.max_claims:,}: release instances, or raise max_claims"
            )
        ctx = PlacementContext(
            spec, self.config, now, self.ledger, self.locate, [], self._placing_aggregates
        )
        placed: list[str] = []
        # One instance: its alternates are the next best hosts it was ranked
        # with. Several: as Nova's filter scheduler, the alternates are chosen
        # once every instance is claimed, from the hosts that pass then, and
        # never a host chosen for an instance of this request; so each
        # instance is ranked only for its random subset.
        several = len(spec.instance_uuids) > 1
        want = self._subset if several else self._want
        preempting = preempt and self._preemption
        # the claims a preemption released, given back if the request fails
        released: list[tuple[Claim, bool]] = (
            evicted if evicted is not None else [] if preempting else _NO_EVICTIONS
        )
        released_before = len(released)
        victims_placed = 0  # instances of this request placed by preempting
        try:
            if self._check_fresh:
                self._sweep(now)
            for index, uuid in enumerate(spec.instance_uuids):
                top = self._top(ctx, want, resources_only)
                victims: tuple[str, ...] = ()
                if not top and preempting:
                    top, victims = self._preempt(ctx, want, resources_only, now, released)
                if not top:
                    raise self._no_valid_host(ctx, uuid, index, preempting)
                row = top[0]
                if self._subset > 1 and not victims:
                    row = self._rng.choice(top[: self._subset])
                names = self.table.name_of
                alternates = [] if several else [str(names[r]) for r in top if r != row]
                host = names[row]
                assert host is not None
                if observe is not None:
                    observe(ctx, uuid, row, top)
                self._claim(spec, uuid, row, host, alternates[: self._alternates], now, fingerprint)
                if victims:
                    claims[uuid].preempted = victims
                    victims_placed += 1
                placed.append(uuid)
                ctx.chosen_rows.append(row)
            if several and self._alternates:
                chosen = set(ctx.chosen_rows)
                top = self._top(ctx, self._alternates + len(chosen), resources_only)
                names = self.table.name_of
                shared = tuple(str(names[r]) for r in top if r not in chosen)[: self._alternates]
                for uuid in placed:
                    claims[uuid].alternates = shared
        except BaseException:
            for uuid in placed:
                self._unclaim(uuid)
            while len(released) > released_before:
                self._unevict(*released.pop())
            raise
        if keep:
            self._keep_requests(spec)
        if victims_placed:
            self.preemptions += victims_placed
        return [claims[u].selection for u in spec.instance_uuids]

    # -- priority and preemption -------------------------------------------

    def _preempt(
        self,
        ctx: PlacementContext,
        want: int,
        resources_only: bool,
        now: float,
        released: list[tuple[Claim, bool]],
    ) -> tuple[list[int], tuple[str, ...]]:
        """Free one host for the instance ``ctx`` places by releasing claims of a
        lower priority (:mod:`.preemption` chooses); the ranked rows with the
        freed one first and the victims' uuids, or ``([], ())`` when no host
        can be freed. A candidate the full filters still refuse once freed
        (a plug-in filter, a group its victims were in) is given back and the
        next one tried, at most ``_PREEMPTION_TRIES``."""
        config = self.config
        below = ctx.spec.priority - config.preemption_min_priority_delta
        table = self.table
        rows = np.flatnonzero(self.ranker.passing_but_room(ctx)).tolist()
        if not rows:
            return [], ()
        start = self._rng.randrange(len(rows))  # kube: from a random host on
        rules = self.ranker.room_rules(ctx)
        found = candidates(
            table,
            self.ledger,
            rows[start:] + rows[:start],
            rules,
            below,
            config.max_preemption_victims,
            config.preemption_candidates,
            row_local=not (ctx.spec.force_hosts or ctx.spec.force_nodes),
        )
        for candidate in found[:_PREEMPTION_TRIES]:
            mark = len(released)
            for victim in candidate.victims:
                released.append((victim, self._evict(victim, now)))
            top = self._top(ctx, want, resources_only)
            if candidate.row in top:
                ranked = [candidate.row, *(r for r in top if r != candidate.row)]
                return ranked, tuple(v.instance_uuid for v in candidate.victims)
            while len(released) > mark:
                self._unevict(*released.pop())
        return [], ()

    def _evict(self, claim: Claim, now: float) -> bool:
        """Release ``claim`` for a preemption; True when its release credited it
        (its host still lists it), as :meth:`_unevict` needs to undo it."""
        credited = self.ledger.credited_on_release(claim)
        self.release(claim.instance_uuid, now)
        return credited

    def _unevict(self, claim: Claim, credited: bool) -> None:
        """Undo :meth:`_evict`: the same claim back, its credit (if any) gone."""
        ledger = self.ledger
        row = claim.row
        if credited:
            credits = ledger.released[row]
            del credits[claim.instance_uuid]
            if not credits:
                del ledger.released[row]
            self.table.add_released(row, claim.memory_mb, claim.vcpus, claim.disk_gb, -1)
        ledger.add(claim)
        if not claim.confirmed:
            self.table.add_claimed(row, claim.memory_mb, claim.vcpus, claim.disk_gb, +1)

    def _no_valid_host(
        self, ctx: PlacementContext, uuid: str, index: int, preempting: bool
    ) -> NoValidHost:
        exc = self.ranker.no_valid_host(ctx, uuid, index)
        if self._units_filter.name in exc.filter_counts:
            refused = self._units_filter.explain(self.table, ctx.spec)
            exc = NoValidHost(
                f"{exc} (Placement's allocation units: {refused})",
                instance_uuid=exc.instance_uuid,
                total_hosts=exc.total_hosts,
                filter_counts=exc.filter_counts,
            )
        if not preempting:
            return exc
        below = ctx.spec.priority - self.config.preemption_min_priority_delta
        return NoValidHost(
            f"{exc}; and no host could be freed by preempting claims of priority {below} "
            f"or lower (at most {self.config.max_preemption_victims} of them)",
            instance_uuid=exc.instance_uuid,
            total_hosts=exc.total_hosts,
            filter_counts=exc.filter_counts,
        )

    def plan(self, spec: RequestSpec, now: float) -> Plan:
        """What :meth:`select_destinations` would claim now, and why; it claims nothing.

        The request is placed as for real (each instance sees the claims of
        the ones before it), explained, then every claim is taken back and
        the random choice among the best hosts is rewound, in the same step:
        the state after is the state before. A NoValidHost is the plan's
        answer, not an error.
        """
        held = [u for u in spec.instance_uuids if u in self.ledger.claims]
        if held:
            raise InvalidRequest(
                f"instance_uuids {held} already hold claims; plan a request not placed yet "
                "(`where` shows where a placed instance is)"
            )
        names = self.table.name_of
        planned: list[tuple[str, int, list[PlanCandidate], int, int, dict[str, int]]] = []

        def observe(ctx: PlacementContext, uuid: str, row: int, top: list[int]) -> None:
            rows = [row, *(r for r in top if r != row)]
            passing, weights = self.ranker.explain(ctx, self.weighers, rows)
            total, counts = self.ranker.filter_counts(ctx)
            candidates = [
                PlanCandidate(host=str(names[r]), weights=w, total=sum(w.values()))
                for r, w in zip(rows, weights, strict=True)
            ]
            planned.append((uuid, row, candidates, total, passing, counts))

        rng = self._rng.getstate()
        evicted: list[tuple[Claim, bool]] = []  # claims a preemption released: given back
        try:
            selections = self.select_destinations(spec, now, observe, evicted=evicted, keep=False)
        except NoValidHost as exc:
            entries = [self._planned(p, []) for p in planned]
            entries.append(
                PlannedInstance(
                    instance_uuid=exc.instance_uuid or "",
                    host=None,
                    alternates=[],
                    candidates=[],
                    total_hosts=exc.total_hosts,
                    passing_hosts=0,
                    filter_counts=exc.filter_counts,
                )
            )
            return Plan(placed=False, message=str(exc), instances=entries)
        finally:
            self._rng.setstate(rng)
        try:
            chosen = {s.instance_uuid: s for s in selections}
            entries = [
                self._planned(p, chosen[p[0]].alternates, chosen[p[0]].preempted) for p in planned
            ]
        finally:
            for selection in selections:
                self._unclaim(selection.instance_uuid)
            while evicted:
                self._unevict(*evicted.pop())
        return Plan(placed=True, message=None, instances=entries)

    def _planned(
        self,
        entry: tuple[str, int, list[PlanCandidate], int, int, dict[str, int]],
        alternates: list[str],
        preempted: Sequence[str] = (),
    ) -> PlannedInstance:
        uuid, row, candidates, total, passing, counts = entry
        return PlannedInstance(
            instance_uuid=uuid,
            host=str(self.table.name_of[row]),
            alternates=alternates,
            candidates=candidates,
            total_hosts=total,
            passing_hosts=passing,
            filter_counts=counts,
            preempted=list(preempted),
        )

    def claims_page(
        self, host: str | None, start: int, limit: int, caller: str | None = None
    ) -> ClaimsPage:
        """Up to ``limit`` live claims from position ``start`` in the ledger's order
        (only those on ``host`` when given: an unknown host has none; only those
        ``caller`` made when given: a tenant's page; the cursor counts every claim)."""
        ledger = self.ledger
        if host is None:
            listed: Iterable[Claim] = itertools.islice(ledger.claims.values(), start, None)
        else:
            row = self.table.row_of.get(host)
            on_row = sorted(ledger.by_row.get(row, ())) if row is not None else []
            listed = (ledger.claims[u] for u in on_row[start:])
        chosen: Iterable[tuple[int, Claim]] = enumerate(listed, start)
        if caller is not None:
            chosen = ((at, c) for at, c in chosen if c.owner == caller)
        found = list(itertools.islice(chosen, limit + 1))
        more = len(found) > limit
        page = [c for _, c in found]
        claims = [
            ClaimInfo(
                instance_uuid=c.instance_uuid,
                host=c.host,
                memory_mb=c.memory_mb,
                vcpus=c.vcpus,
                disk_gb=c.disk_gb,
                group_id=c.group_id,
                created_at=c.created_at,
                confirmed=c.confirmed,
                alternates=list(c.alternates),
                owner=c.owner,
            )
            for c in page[:limit]
        ]
        return ClaimsPage(claims=claims, next_cursor=found[limit][0] if more else None)

    def where(self, instance_uuid: str) -> Location:
        """The host of ``instance_uuid``'s claim, or of the last report that lists it."""
        ledger = self.ledger
        claim = ledger.claims.get(instance_uuid)
        reported_row = ledger.reported_row.get(instance_uuid)
        row = claim.row if claim is not None else reported_row
        return Location(
            instance_uuid=instance_uuid,
            host=None if row is None else self.table.name_of[row],
            claimed=claim is not None,
            confirmed=claim is not None and claim.confirmed,
            reported=reported_row is not None,
        )

    def _fingerprint(self, spec: RequestSpec, resources_only: bool) -> str:
        """``request_fingerprint(spec)``, one string for equal requests (most are of
        a few flavors): a bounded pool keeps recent ones, by the resources of a
        request that asks for nothing else (cheaper than writing its text)."""
        pool = self._fingerprints
        if resources_only:
            key: object = (spec.disk_gb, spec.memory_mb, spec.vcpus)
            found = pool.get(key)
            if found is not None:
                return found
            fingerprint = request_fingerprint(spec, True)
        else:
            key = fingerprint = request_fingerprint(spec, False)
        if len(pool) >= _FINGERPRINT_POOL:
            pool.clear()
        return pool.setdefault(key, fingerprint)

    def _check_same_request(self, spec: RequestSpec, fingerprint: str) -> None:
        """Raise InvalidRequest if a uuid of ``spec`` is held by another request
        (Forbidden if by another owner's).

        A claim whose fingerprint is unknown (None: restored from an older
        snapshot) accepts any repeat, as before fingerprints were kept.
        """
        claims = self.ledger.claims
        owner = spec.owner
        if owner is not None:
            foreign = next((u for u in spec.instance_uuids if claims[u].owner != owner), None)
            if foreign is not None:  # its answer would tell where another's instance is
                raise Forbidden(
                    f"forbidden: select_destinations of {foreign}: that uuid holds a claim "
                    f"{owner!r} did not make; a caller repeats only its own requests"
                )
        other = [u for u in spec.instance_uuids if claims[u].fingerprint not in (None, fingerprint)]
        if not other:
            return
        first = claims[other[0]]
        assert first.fingerprint is not None
        differences = "; ".join(fingerprint_differences(first.fingerprint, fingerprint))
        more = f" (and {len(other) - 1} more of its uuids)" if len(other) > 1 else ""
        raise InvalidRequest(
            f"instance {other[0]} already holds a claim on {first.host} made by another "
            f"request{more}: {differences}; resend the original request unchanged, or "
            f"release {other[0]} first to ask for this one"
        )

    def restore_claims(
        self,
        spec: RequestSpec,
        selections: Sequence[Selection],
        now: float,
        *,
        fingerprint: str | None = None,
        from_spec: bool = True,
    ) -> None:
        """Re-apply claims decided earlier (journal replay); hosts must exist.

        Skips a selection whose uuid already holds a claim or whose host is
        gone, so replaying the same records twice changes nothing. Each
        claim's fingerprint is that of ``spec`` (the request as it was
        sent, as a journal record keeps it) unless ``from_spec`` is False:
        then ``fingerprint``, None when it is unknown (an older snapshot).
        """
        if from_spec:
            fingerprint = request_fingerprint(spec)
            self._keep_requests(spec)
        for selection in selections:
            row = self.table.row_of.get(selection.host)
            if row is None or selection.instance_uuid in self.ledger.claims:
                continue
            if from_spec:  # a journal record: its preemption's releases, in order
                for victim in selection.preempted:
                    self.release(victim, now)
            self._claim(
                spec,
                selection.instance_uuid,
                row,
                selection.host,
                selection.alternates,
                now,
                fingerprint,
            )
            if selection.preempted:
                self.ledger.claims[selection.instance_uuid].preempted = tuple(selection.preempted)

    def _claim(
        self,
        spec: RequestSpec,
        uuid: str,
        row: int,
        host: str,
        alternates: Sequence[str],
        now: float,
        fingerprint: str | None,
    ) -> None:
        group_id = spec.group.id if spec.group is not None else None
        claim = Claim(
            uuid,
            row,
            spec.memory_mb,
            spec.vcpus,
            spec.disk_gb,
            group_id,
            now,
            host,
            tuple(alternates),
            fingerprint,
            priority=spec.priority,
            owner=spec.owner,
            image=self._image_of(spec) if self._keeps_images else (),
        )
        self._add_claim(claim)

    def _image_of(self, spec: RequestSpec) -> ImageProps:
        """``spec``'s image properties as a claim keeps them: sorted pairs, one shared
        tuple per distinct image (so a million claims of a few images hold a few
        tuples; the cache is dropped past :data:`_MAX_IMAGES` distinct ones)."""
        props = spec.image_properties
        if not props:
            return ()
        image = tuple(sorted(props.items()))
        shared = self._images.get(image)
        if shared is None:
            if len(self._images) >= _MAX_IMAGES:
                self._images.clear()
            shared = self._images[image] = image
        return shared

    def _set_confirmed(self, claim: Claim, confirmed: bool) -> None:
        """A claim's one change between assumed (its host's claimed columns count it)
        and confirmed (its host's report carries it): the flag and the columns together."""
        if claim.confirmed is not confirmed:
            claim.confirmed = confirmed
            sign = -1 if confirmed else +1
            self.table.add_claimed(claim.row, claim.memory_mb, claim.vcpus, claim.disk_gb, sign)

    def _unclaim(self, uuid: str) -> Claim:
        claim = self.ledger.drop(uuid)
        if not claim.confirmed:
            self.table.add_claimed(claim.row, claim.memory_mb, claim.vcpus, claim.disk_gb, -1)
        return claim

    def release(self, instance_uuid: str, now: float) -> bool:
        """Free the claim of ``instance_uuid`` at once; False when it holds none."""
        if instance_uuid not in self.ledger.claims:
            return False
        if instance_uuid in self.ledger.migrations:
            return self.confirm_move(instance_uuid, now)  # a hold released: as confirmed
        credited = self.ledger.credited_on_release(self.ledger.claims[instance_uuid])
        claim = self._unclaim(instance_uuid)
        if credited:
            # the host still reports it: credit it back until a report drops it
            self.ledger.released.setdefault(claim.row, {})[instance_uuid] = (
                claim.memory_mb,
                claim.vcpus,
                claim.disk_gb,
            )
            self.table.add_released(claim.row, claim.memory_mb, claim.vcpus, claim.disk_gb, +1)
        return True

    # -- moves (resize, cold migration, evacuation) ------------------------

    def move(
        self,
        instance_uuid: str,
        migration_uuid: str,
        spec: RequestSpec | None,
        now: float,
        *,
        allow_same_host: bool = False,
        evacuate: bool = False,
        placed: Selection | None = None,
    ) -> Selection:
        """Claim a destination for a claimed or reported instance; the source stays
        held under ``migration_uuid`` until :meth:`confirm_move` or :meth:`revert_move`.

        As Nova (Queens on): the source's resources move to the migration
        uuid (a claim of that uuid on the source row, of the source claim's
        figures, or of ``spec``'s for an instance only a report lists), and
        the destination is claimed under the instance uuid with ``spec``'s
        flavor (a resize) or the claim's (a migration). The destination is
        never the source unless ``allow_same_host``. The same move asked
        again answers the same Selection and changes nothing; another one
        under the same migration uuid is InvalidRequest naming what differs.
        A refused move (InvalidRequest, NoValidHost) changes nothing.
        ``placed`` (journal replay) claims that destination, choosing nothing.
        """
        ledger = self.ledger
        request = _move_request(spec, allow_same_host, evacuate)
        existing = ledger.migrations.get(migration_uuid)
        if existing is not None:
            differences = fingerprint_differences(existing.request, request)
            if existing.instance_uuid != instance_uuid:
                differences.insert(
                    0, f"instance_uuid {existing.instance_uuid} then, {instance_uuid} now"
                )
            if differences:
                raise InvalidRequest(
                    f"migration {migration_uuid} is already open for another move: "
                    f"{'; '.join(differences)}; resend the original move unchanged, or "
                    "use a new migration uuid"
                )
            return existing.selection
        if migration_uuid == instance_uuid or migration_uuid in ledger.claims:
            raise InvalidRequest(
                f"migration uuid {migration_uuid} is already an instance's claim: a move "
                "needs a migration uuid of its own"
            )
        if migration_uuid in ledger.reported_row:
            raise InvalidRequest(
                f"migration uuid {migration_uuid} is an instance a host reports: a move "
                "needs a migration uuid of its own"
            )
        moving = ledger.moving.get(instance_uuid)
        if moving is not None:
            raise InvalidRequest(
                f"instance {instance_uuid} is already moving (migration {moving}): "
                "confirm or revert that move first"
            )
        if spec is not None and spec.instance_uuids != [instance_uuid]:
            raise InvalidRequest(
                f"a move's spec must list exactly the moving instance [{instance_uuid!r}], "
                f"got {spec.instance_uuids}"
            )
        claim = ledger.claims.get(instance_uuid)
        if claim is not None:
            row = claim.row
        else:
            reported = ledger.reported_row.get(instance_uuid)
            credits = ledger.released.get(reported) if reported is not None else None
            if reported is None or (credits and instance_uuid in credits):
                raise InvalidRequest(
                    f"instance {instance_uuid} holds no claim and no host reports it: "
                    "nothing to move"
                )
            if spec is None:
                raise InvalidRequest(
                    f"instance {instance_uuid} holds no claim (a host reports it): its "
                    "flavor is unknown, so a move of it needs a spec"
                )
            row = reported
        added = 1 if claim is not None else 2  # the hold, and the destination
        if len(ledger.claims) + added > self.config.max_claims:
            raise InvalidRequest(
                f"the scheduler holds {len(ledger.claims):,} live claims (migrations count) "
                f"and max_claims is {self.config.max_claims:,}: confirm moves, release "
                "instances, or raise max_claims"
            )
        source = self.table.name_of[row]
        assert source is not None
        asked = spec
        if asked is None:
            assert claim is not None
            # the request it was placed by (its zone, traits, group ...), as Nova
            # moves with the instance's RequestSpec, its forced hosts and
            # requested destination reset (reset_forced_destinations), and its
            # ignore_hosts replaced by the instance's host (none when it may stay
            # there), as Nova's compute API and conductor set them for a move
            asked = self._kept_request(claim).model_copy(
                update={
                    "force_hosts": [],
                    "force_nodes": [],
                    "requested_destination": None,
                    "ignore_hosts": [] if allow_same_host else [source],
                }
            )
        elif claim is not None and asked.priority == 0 and claim.priority != 0:
            # a resize keeps the instance's priority unless its spec names another
            # (0, the default, is "not named": a journal record leaves defaults out)
            asked = asked.model_copy(update={"priority": claim.priority})
        if not allow_same_host and source.lower() not in {h.lower() for h in asked.ignore_hosts}:
            asked = asked.model_copy(update={"ignore_hosts": [*asked.ignore_hosts, source]})
        # the source's resources pass to the hold: the same row, the same
        # figures, the same confirmed state, so the table does not change
        if claim is not None:
            ledger.drop(instance_uuid)
            # a hold is no server group member: the group's is the instance's
            hold = dataclasses.replace(
                claim, instance_uuid=migration_uuid, row=row, group_id=None, host=source
            )
        else:
            # an instance its host reports: the report's figures carry it
            hold = Claim(
                migration_uuid,
                row,
                asked.memory_mb,
                asked.vcpus,
                asked.disk_gb,
                None,
                now,
                source,
                (),
                None,
                True,
                asked.priority,
                owner=asked.owner,
                image=self._image_of(asked) if self._keeps_images else (),
            )
        ledger.add(hold)
        try:
            if placed is None:
                [selection] = self.select_destinations(asked, now, preempt=False)
            else:
                self.restore_claims(asked, [placed], now)
                if instance_uuid not in ledger.claims:
                    raise InvalidRequest(f"move of {instance_uuid}: host {placed.host} is gone")
                selection = ledger.claims[instance_uuid].selection
        except BaseException:
            ledger.drop(migration_uuid)
            if claim is not None:
                ledger.add(claim)
            raise
        destination = ledger.claims[instance_uuid]
        if destination.row == row:
            # the source lists the instance: that is its old flavor, not this claim
            self._set_confirmed(destination, False)
        ledger.migrations[migration_uuid] = Migration(
            migration_uuid,
            instance_uuid,
            request,
            evacuate,
            claim.group_id if claim is not None else None,
            selection.host,
            tuple(selection.alternates),
        )
        ledger.moving[instance_uuid] = migration_uuid
        return selection

    def confirm_move(self, migration_uuid: str, now: float) -> bool:
        """Free a move's source hold (the move is done); False when none is open."""
        if migration_uuid not in self.ledger.migrations:
            return False
        self._unclaim(migration_uuid)
        return True

    def revert_move(self, migration_uuid: str, now: float) -> bool:
        """Free a move's destination claim and give the source back to the instance
        (its claim is the hold's again: same host, figures and selection); False
        when no such move is open."""
        ledger = self.ledger
        migration = ledger.migrations.get(migration_uuid)
        if migration is None:
            return False
        instance_uuid = migration.instance_uuid
        if instance_uuid in ledger.claims:
            self.release(instance_uuid, now)  # credited while its host still lists it
        hold = ledger.drop(migration_uuid)
        claim = dataclasses.replace(hold, instance_uuid=instance_uuid, group_id=migration.group_id)
        ledger.add(claim)  # the same row, figures and state as the hold: no table change
        return True

    def restore_migration(self, migration: Migration) -> None:
        """Re-open a move a snapshot kept (its hold and destination are restored claims)."""
        ledger = self.ledger
        hold = ledger.claims.get(migration.migration_uuid)
        if hold is None or migration.migration_uuid in ledger.migrations:
            return
        ledger.migrations[migration.migration_uuid] = migration
        ledger.moving[migration.instance_uuid] = migration.migration_uuid
        # as _settle_move leaves them: the hold carried while the source lists the
        # instance; a destination claim on the source row assumed
        self._set_confirmed(hold, migration.instance_uuid in ledger.listed_on(hold.row))
        destination = ledger.claims.get(migration.instance_uuid)
        if destination is not None and destination.row == hold.row:
            self._set_confirmed(destination, False)

    def _settle_move(self, row: int, uuid: str, claim: Claim, listed: frozenset[str]) -> bool:
        """Settle a claim of an open move against ``row``'s report; False when
        ``uuid``'s claim is none of a move's, and the usual rules apply.

        A hold is carried by the report while it lists the instance, assumed
        (the table holds it) while it does not: Nova keeps the migration's
        allocation until the move is confirmed or reverted. An evacuation's
        hold is dropped by the first report of the source that does not list
        the instance (the host is back, the instance gone from it). A
        destination claim on the source row (a same-host move) stays assumed
        while the move is open: what the source lists is the old flavor.
        """
        ledger = self.ledger
        migration = ledger.migrations.get(uuid)
        if migration is None:
            moving = ledger.moving.get(uuid)
            return moving is not None and ledger.claims[moving].row == row
        if migration.instance_uuid in listed:
            self._set_confirmed(claim, True)
        elif migration.evacuate:
            self._unclaim(uuid)
            log.info(
                "evacuated instance %s no longer on %s: migration %s hold dropped",
                migration.instance_uuid,
                self.table.name_of[row],
                uuid,
            )
        else:
            self._set_confirmed(claim, False)
        return True

    # -- reschedule (a build failed on the chosen host) ----------------------

    def reschedule(
        self,
        instance_uuid: str,
        failed_host: str,
        now: float,
        *,
        placed: Selection | None = None,
        spent: bool = False,
    ) -> Selection:
        """Free ``instance_uuid``'s claim on ``failed_host`` and claim the first of
        its alternates that still passes every filter for the request it came
        from; the answer's alternates are the ones left after it.

        Raises MaxRetriesExceeded (the claim freed: the instance holds none)
        when no alternate passes, InvalidRequest (nothing changed) when its
        claim is not on ``failed_host``. The request is the one kept for the
        claim (see :meth:`_kept_request`). ``placed`` / ``spent`` (journal
        replay) claim that alternate, or none, choosing nothing.
        """
        ledger = self.ledger
        claim = ledger.claims.get(instance_uuid)
        if claim is None or claim.host != failed_host:
            where = "holds no claim" if claim is None else f"holds its claim on {claim.host}"
            raise InvalidRequest(
                f"instance {instance_uuid} {where}, not on {failed_host}: a reschedule "
                "frees the claim on the host that failed"
            )
        if instance_uuid in ledger.migrations or instance_uuid in ledger.moving:
            raise InvalidRequest(
                f"{instance_uuid} is in an open move: confirm or revert it instead"
            )
        spec = self._kept_request(claim)
        self.release(instance_uuid, now)
        alternates = [h for h in claim.alternates if h != failed_host]
        row_of = self.table.row_of
        if self._check_fresh:
            self._sweep(now)
        for index, host in enumerate(alternates):
            row = row_of.get(host)
            if row is None or spent:
                continue
            if placed is not None:
                if host != placed.host:
                    continue
            elif not self._passes(spec, row, host, now):
                continue
            left = tuple(alternates[index + 1 :])
            # the same request's claim, assumed on the alternate
            moved = dataclasses.replace(
                claim, row=row, created_at=now, host=host, alternates=left, confirmed=False
            )
            self._add_claim(moved)
            self._requests[instance_uuid] = spec
            return moved.selection
        self._requests.pop(instance_uuid, None)
        raise MaxRetriesExceeded(
            f"instance {instance_uuid} failed on {failed_host} and none of its "
            f"{len(alternates)} alternates ({', '.join(alternates) or 'none'}) still fits: "
            "it holds no claim now; place it again with select_destinations",
            instance_uuid=instance_uuid,
            total_hosts=len(alternates),
        )

    def _passes(self, spec: RequestSpec, row: int, host: str, now: float) -> bool:
        """Does ``host`` pass every filter for ``spec`` now (its request asked
        with ``requested_destination`` that host: the filters still run)?"""
        destination = spec.requested_destination
        if destination is not None and destination.host not in (None, host):
            return False
        node = None if destination is None else destination.node
        asked = spec.model_copy(update={"requested_destination": Destination(host=host, node=node)})
        ctx = PlacementContext(
            asked, self.config, now, self.ledger, self.locate, [], self._placing_aggregates
        )
        return self._top(ctx, 1, False) == [row]

    def _kept_request(self, claim: Claim) -> RequestSpec:
        """The request ``claim`` was made by, for its one instance: the one kept
        with it (the last ``_KEPT_REQUESTS`` placements, every one the journal
        replays, and those a snapshot kept, :meth:`restore_requests`), else its
        resources and group alone (a claim restored from a snapshot older than
        format 6, or an old one)."""
        uuid = claim.instance_uuid
        kept = self._requests.get(uuid)
        if kept is not None and request_fingerprint(kept) == claim.fingerprint:
            if kept.instance_uuids == [uuid]:
                return kept
            return kept.model_copy(update={"instance_uuids": [uuid]})
        group = None
        if claim.group_id is not None and claim.fingerprint is not None:
            policy = json.loads(claim.fingerprint).get("group", [None, None])[1]
            if isinstance(policy, str):
                group = ServerGroup.model_validate({"id": claim.group_id, "policy": policy})
        return RequestSpec(
            instance_uuids=[uuid],
            memory_mb=claim.memory_mb,
            vcpus=claim.vcpus,
            disk_gb=claim.disk_gb,
            group=group,
            priority=claim.priority,
        )

    def kept_requests(self) -> dict[str, RequestSpec]:
        """The requests kept for a reschedule or move (see :meth:`_kept_request`),
        by instance uuid, the oldest kept first (the order the bound drops
        them in): a copy of the dict; the specs are frozen, so shared."""
        return dict(self._requests)

    def restore_requests(self, kept: Iterable[tuple[str, RequestSpec]]) -> None:
        """Keep each ``(uuid, spec)`` of ``kept`` (oldest first) as a placement of
        ``spec`` keeps it, within the same bound (a snapshot's kept requests)."""
        requests = self._requests
        for uuid, spec in kept:
            requests.pop(uuid, None)
            requests[uuid] = spec
        while len(requests) > _KEPT_REQUESTS:
            del requests[next(iter(requests))]

    def _keep_requests(self, spec: RequestSpec) -> None:
        """Keep ``spec`` for a reschedule of each of its instances (bounded)."""
        kept = self._requests
        for uuid in spec.instance_uuids:
            kept.pop(uuid, None)
            kept[uuid] = spec
        while len(kept) > _KEPT_REQUESTS:
            del kept[next(iter(kept))]

    def _add_claim(self, claim: Claim) -> None:
        """Add ``claim``: confirmed if its host lists it already, else assumed."""
        self.ledger.add(claim)
        credits = self.ledger.released.get(claim.row)
        uuid = claim.instance_uuid
        if uuid in self.ledger.listed_on(claim.row) and not (credits and uuid in credits):
            claim.confirmed = True  # the host already reports it: its figures carry it
        else:
            # Assumed, even when the host lists a released instance of that uuid:
            # its credit stays until a report drops it (taking the credit
            # instead would change the host by the old size, not the one the
            # filters checked, and a rollback could not give it back).
            self.table.add_claimed(claim.row, claim.memory_mb, claim.vcpus, claim.disk_gb, +1)

    # -- filtering and weighing -------------------------------------------

    def _sweep(self, now: float) -> None:
        """Mark stale exactly the hosts whose last report is older than service_down_time."""
        threshold = now - self.config.service_down_time
        if self._swept_below <= threshold <= self._oldest:
            self._swept_below = threshold
            return  # the common case: no row goes stale, none comes back
        table = self.table
        n = table.n
        at = table.floats["reported_at"][:n]
        if threshold < self._swept_below:  # an earlier clock: some stale rows are fresh again
            for row in np.flatnonzero(table.stale[:n] & (at >= threshold)).tolist():
                table.stale[row] = False
                table.refresh(row)
                self._oldest = min(self._oldest, float(at[row]))
        self._swept_below = threshold
        if self._oldest >= threshold:
            return
        live = table.active[:n] & ~table.stale[:n]
        silent = np.flatnonzero(live & (at < threshold)).tolist()
        if silent:
            names = ", ".join(str(table.name_of[row]) for row in silent[:10])
            log.warning(
                "%d host(s) have not reported for over %ss: %s%s; no placements there "
                "until they report again",
                len(silent),
                self.config.service_down_time,
                names,
                f" and {len(silent) - 10} more" if len(silent) > 10 else "",
            )
        for row in silent:
            table.stale[row] = True
            table.refresh(row)
        live &= at >= threshold
        self._oldest = float(at[live].min()) if live.any() else np.inf

    # -- snapshots --------------------------------------------------------

    def host_states(self, now: float | None = None) -> dict[str, HostState]:
        """A snapshot of every host, built in this one synchronous step."""
        return capture_host_states(self.table).states()

    def claims(self) -> dict[str, tuple[str, bool]]:
        """instance uuid -> (host, confirmed) for every live claim."""
        names = self.table.name_of
        return {u: (names[c.row] or "", c.confirmed) for u, c in self.ledger.claims.items()}

    def digest(self) -> str:
        """A hash of hosts, generations, figures and claims (their priorities,
        preempted claims and images too): equal states, equal digests."""
        h = hashlib.sha256()
        for host in sorted(self.table.row_of):
            row = self.table.row_of[host]
            state = host_state(self.table, row)
            h.update(state.model_dump_json(exclude=_DIGEST_EXCLUDE).encode())
            h.update(repr(sorted(self.ledger.listed_on(row))).encode())
            facts = self.table.facts_id[row]
            if facts:  # none: the digest of before host facts
                h.update(repr(self.table.host_facts.values[facts]).encode())
            # what the inventories do (bounds other than the totals, reserved vCPUs
            # or disk, a min_unit or step_size above 1), not how a report spelled
            # them; none: the digest of before
            held = self.table.inventory.get(row)
            steps = self.table.unit_steps.get(row)
            if held or steps:
                h.update(repr((held, steps)).encode())
        for aggregate in self.aggregates.aggregates():
            h.update(aggregate.model_dump_json().encode())
        for uuid in sorted(self.ledger.claims):
            c = self.ledger.claims[uuid]
            h.update(
                repr(
                    (
                        uuid,
                        self.table.name_of[c.row],
                        c.memory_mb,
                        c.vcpus,
                        c.disk_gb,
                        c.group_id,
                        c.confirmed,
                        list(c.alternates),
                        c.fingerprint,
                    )
                ).encode()
            )
            if c.priority or c.preempted:  # none: the digest of before priorities
                h.update(repr((c.priority, list(c.preempted))).encode())
            if c.image:  # none: the digest of before images
                h.update(repr(c.image).encode())
        for uuid in sorted(self.ledger.migrations):  # none: the digest of before moves
            h.update(repr(self.ledger.migrations[uuid]).encode())
        return h.hexdigest()
