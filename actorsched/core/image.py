"""The image the journal saves: a read-only copy of a SchedulerCore, taken in one owner step.

Rules this module keeps:

* Nothing here changes the core.
* :func:`capture` is the only function that reads the core, and it is cheap
  (column copies and shallow dict copies, no per-host objects), so the owner
  can call it between two batches without a noticeable pause.
* A :class:`CoreImage` holds no reference to anything the core mutates
  later, so building the semantic columns (:meth:`CoreImage.host_columns` ...) may
  happen on another thread while the owner goes on.
* The views are semantic, not internal: per host the report that would
  rebuild it, per claim what the ledger holds, per released instance the
  credit, per kept request its spec (serialized off the owner, by
  :meth:`CoreImage.request_section`: capture copies only the dict). Rows,
  zone ids, trait bits and facts ids are never exposed, so a snapshot
  survives any change of the table's layout. A host's facts (the report's
  ``FACT_FIELDS``, shared by most hosts) are written once per distinct value
  (:meth:`CoreImage.facts_section`), each host naming its own by position;
  so is a claim's image (:meth:`CoreImage.image_section`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..models import Aggregate, RequestSpec
from .engine import SchedulerCore
from .host_facts import HostFacts
from .inventory import NO_UNITS, UNIT_FIELDS
from .ledger import Claim, ImageProps, Migration
from .table import REPORT_COLUMNS, Inventory, RowUnits

__all__ = ["CLAIM_COLUMNS", "CREDIT_COLUMNS", "REQUEST_COLUMNS", "CoreImage", "capture"]

# raw table columns a host report sets: column -> HostReport field
_REPORTED = REPORT_COLUMNS  # (column, report field)
_RATIO_FIELDS = ("ram_allocation_ratio", "cpu_allocation_ratio", "disk_allocation_ratio")


# a live claim as a snapshot keeps it, column by column
CLAIM_COLUMNS = (
    "instance_uuid",
    "host",
    "memory_mb",
    "vcpus",
    "disk_gb",
    "group_id",
    "created_at",
    "confirmed",
    "alternates",
    "fingerprint",
    "priority",
    "preempted",
    "owner",
    "image",
)
# the requests kept for a reschedule or move, beside the list of distinct
# specs: each uuid one is kept for, in the order they were kept, and the index
# of its spec in that list
REQUEST_COLUMNS = ("instance_uuid", "spec")
# a released instance its host still lists, credited back until it does not
CREDIT_COLUMNS = ("host", "instance_uuid", "memory_mb", "vcpus", "disk_gb")


def _columns(names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """``rows`` (one tuple per entry, in the order of ``names``) as one list per name."""
    return {name: [row[i] for row in rows] for i, name in enumerate(names)}


@dataclass(frozen=True, slots=True)
class CoreImage:
    """Copies of the core's state at one instant; see :func:`capture`."""

    rows: list[int]
    names: list[str | None]
    columns: dict[str, NDArray[np.int64]]
    reported_at: NDArray[np.float64]
    enabled: NDArray[np.bool_]
    zone: NDArray[np.int32]  # the zone each report named (not the aggregates')
    zone_names: list[str]
    host_traits: list[tuple[str, ...]]
    nodes: dict[int, str]  # rows whose node is not named as their host
    listed: dict[int, frozenset[str]]
    claims: list[tuple[Claim, bool]]
    released: dict[int, dict[str, tuple[int, int, int]]]
    # the allocation ratios each host's report carried (rows with one only)
    reported_ratios: dict[int, tuple[float | None, float | None, float | None]]
    aggregates: list[Aggregate]
    migrations: tuple[Migration, ...] = ()  # open moves (their holds are claims)
    # the kept requests by uuid, oldest first (frozen specs: shared, not copied)
    requests: dict[str, RequestSpec] = dataclasses.field(default_factory=dict)
    # each row's facts id and the distinct facts by id (frozen: shared, not copied)
    facts_id: NDArray[np.int32] = dataclasses.field(
        default_factory=lambda: np.zeros(0, dtype=np.int32)
    )
    facts: list[HostFacts] = dataclasses.field(default_factory=list)
    # the Placement units of each host (rows with some only; frozen: shared), and
    # its inventory entry (rows with one only: its reserved vCPUs and disk)
    units: dict[int, RowUnits] = dataclasses.field(default_factory=dict)
    inventory: dict[int, Inventory] = dataclasses.field(default_factory=dict)

    def _facts_used(self) -> list[int]:
        """The facts ids the hosts have (0, none, left out), ascending."""
        if not len(self.facts_id):
            return []
        ids = self.facts_id[np.asarray(self.rows, dtype=np.intp)]
        return [int(i) for i in np.unique(ids) if i]

    def host_columns(self) -> dict[str, list[Any]]:
        """Every host as the report that rebuilds it, in columns named as
        ``HostReport``'s fields, plus ``reported_at``; in row order. Not the
        facts fields (``FACT_FIELDS``): ``host_facts`` names each host's
        entry of :meth:`facts_section` (None: it reports none)."""
        empty: frozenset[str] = frozenset()
        rows = self.rows
        index = np.asarray(rows, dtype=np.intp)
        columns: dict[str, list[Any]] = {
            field: self.columns[col][index].tolist() for col, field in _REPORTED
        }
        zone_names = [*self.zone_names, None]  # zone id -1: none
        columns["host"] = [self.names[row] or "" for row in rows]
        columns["availability_zone"] = [zone_names[z] for z in self.zone[index].tolist()]
        columns["enabled"] = self.enabled[index].tolist()
        columns["traits"] = [list(self.host_traits[row]) for row in rows]
        columns["instances"] = [sorted(self.listed.get(row, empty)) for row in rows]
        columns["node"] = [self.nodes.get(row) for row in rows]
        columns["reported_at"] = self.reported_at[index].tolist()
        none = (None, None, None)
        ratios = [self.reported_ratios.get(row, none) for row in rows]
        for i, field in enumerate(_RATIO_FIELDS):
            columns[field] = [r[i] for r in ratios]
        held = [self.inventory.get(row) for row in rows]
        columns["vcpus_reserved"] = [0 if e is None else e[3] for e in held]
        columns["local_gb_reserved"] = [0 if e is None else e[4] for e in held]
        units = [self.units.get(row, NO_UNITS) for row in rows]
        for i, field in enumerate(UNIT_FIELDS):
            columns[field] = [None if (u := each[i]) is None else u.model_dump() for each in units]
        position = {fid: at for at, fid in enumerate(self._facts_used())}
        ids = self.facts_id[index].tolist() if len(self.facts_id) else [0] * len(rows)
        columns["host_facts"] = [position.get(fid) for fid in ids]
        return columns

    def facts_section(self) -> list[dict[str, Any]]:
        """Each distinct set of facts some host has, once, as the report fields
        that give it (those of ``FACT_FIELDS`` not at their defaults); the
        ``host_facts`` column of :meth:`host_columns` indexes this list."""
        return [self.facts[fid].report_fields() for fid in self._facts_used()]

    def aggregate_list(self) -> list[dict[str, Any]]:
        """Every host aggregate as ``{"name", "hosts", "metadata"}``, by name."""
        return [aggregate.model_dump() for aggregate in self.aggregates]

    def migration_list(self) -> list[dict[str, Any]]:
        """Every open move: its uuids, request, evacuation flag, the group of the
        instance's source claim and the destination's selection."""
        return [
            {
                "migration_uuid": m.migration_uuid,
                "instance_uuid": m.instance_uuid,
                "request": m.request,
                "evacuate": m.evacuate,
                "group_id": m.group_id,
                "host": m.host,
                "alternates": list(m.alternates),
            }
            for m in self.migrations
        ]

    def _image_index(self) -> dict[ImageProps, int]:
        """Each distinct image some claim keeps, by first appearance: its position."""
        index: dict[ImageProps, int] = {}
        for c, _ in self.claims:
            if c.image and c.image not in index:
                index[c.image] = len(index)
        return index

    def image_section(self) -> list[dict[str, str]]:
        """Each distinct set of image properties some claim keeps, once, as an
        object of them; the ``image`` column of :meth:`claim_columns` indexes it."""
        return [dict(image) for image in self._image_index()]

    def claim_columns(self) -> dict[str, list[Any]]:
        """Every live claim, one list per name in :data:`CLAIM_COLUMNS` (``image``:
        the position of its image in :meth:`image_section`, None for none)."""
        names = self.names
        images = self._image_index()
        rows = [
            (
                c.instance_uuid,
                names[c.row] or "",
                c.memory_mb,
                c.vcpus,
                c.disk_gb,
                c.group_id,
                c.created_at,
                confirmed,
                c.alternates,
                c.fingerprint,
                c.priority,
                c.preempted,  # a tuple: json.dumps writes it as a list
                c.owner,
                images[c.image] if c.image else None,
            )
            for c, confirmed in self.claims
        ]
        return _columns(CLAIM_COLUMNS, rows)

    def request_section(self) -> dict[str, Any]:
        """The kept requests: ``specs``, each distinct one once as its JSON
        object (without its defaults), and one list per name in
        :data:`REQUEST_COLUMNS`: each uuid a request is kept for, in the order
        they were kept (the oldest first, as the bound drops them), and the
        index of its spec in ``specs``.

        A request kept for several uuids is one object the core shares between
        them, so it is told apart by identity and written once.
        """
        index: dict[int, int] = {}
        specs: list[dict[str, Any]] = []
        which: list[int] = []
        for spec in self.requests.values():
            at = index.get(id(spec))
            if at is None:
                at = index[id(spec)] = len(specs)
                specs.append(spec.model_dump(mode="json", exclude_defaults=True))
            which.append(at)
        return {"specs": specs, "instance_uuid": list(self.requests), "spec": which}

    def credit_columns(self) -> dict[str, list[Any]]:
        """Every release credit, one list per name in :data:`CREDIT_COLUMNS`."""
        rows = [
            (self.names[row] or "", uuid, mem, vcpus, disk)
            for row, by_uuid in self.released.items()
            for uuid, (mem, vcpus, disk) in by_uuid.items()
        ]
        return _columns(CREDIT_COLUMNS, rows)


def capture(core: SchedulerCore) -> CoreImage:
    """Copy what a snapshot needs, in one synchronous step of the owner.

    Claims are shared, not copied: every field but ``confirmed`` is fixed at
    creation, and ``confirmed`` is copied beside each claim.
    """
    table = core.table
    n = table.n
    names, host_traits = table.shared_lists()  # copy-on-write: never written after this
    return CoreImage(
        rows=sorted(table.row_of.values()),
        names=names,  # indexed by rows below n only
        columns={col: table.ints[col][:n].copy() for col, _ in _REPORTED},
        reported_at=table.floats["reported_at"][:n].copy(),
        enabled=table.enabled[:n].copy(),
        zone=table.reported_zone[:n].copy(),
        zone_names=list(table.zone_names),
        host_traits=host_traits,
        nodes=dict(table.node_of),
        listed=dict(core.ledger.listed),
        claims=[(c, c.confirmed) for c in core.ledger.claims.values()],
        released={row: dict(credits) for row, credits in core.ledger.released.items()},
        reported_ratios=dict(core.reported_ratios),
        aggregates=core.aggregates.aggregates(),
        migrations=tuple(core.ledger.migrations.values()),  # frozen: shared, not copied
        requests=core.kept_requests(),  # one dict copy (at most _KEPT_REQUESTS entries)
        facts_id=table.facts_id[:n].copy(),
        facts=list(table.host_facts.values),
        units=dict(table.units),
        inventory=dict(table.inventory),
    )
