"""Preemption: which host, and which lower-priority claims on it, to free for a request.

Rules this module keeps (it chooses; :mod:`.engine` releases and claims):

* A victim is a claim whose priority is lower than the request's by at
  least ``preemption_min_priority_delta``; a move's hold or a moving
  instance's claim never is (a move is settled by its confirm or revert).
* A host is a candidate when it passes every filter but the ones room
  decides (``Ranker.passing_but_room``) and would have room for the request
  with all its victims released (``HostTable.room_after``: the table's own
  headroom and row-local rules, never a copy of them).
* On each candidate the victims are as few and as unimportant as they can
  be, as kube-scheduler's ``SelectVictimsOnNode``: start with every victim
  released, then give each back, most important first (higher priority,
  then older), whenever the request still fits without releasing it.
* Among candidates, kube-scheduler's ``pickOneNodeForPreemption`` order:
  the lowest highest victim priority, then the lowest sum of victim
  priorities (each offset to be positive, so one more victim always adds),
  then the fewest victims, then the latest start among the highest-priority
  victims (the least work lost), then the first found (the search starts at
  a random host, so exact ties do not always fall on the same one). A candidate that needs
  more than ``max_preemption_victims`` is left out.
* As kube-scheduler, the search looks at the passing hosts from a random
  one on (the same hosts are not always the ones preempted) and stops once
  it has found ``preemption_candidates`` candidates (100, kube's
  minCandidateNodesAbsolute): the best of those, not of every host. Kube
  also takes 10 % of the hosts when that is more, and weighs them in 16
  goroutines; here the owner weighs them alone, so the bound is a fixed
  number (a candidate costs some 50 us: 10 % of 10,000 hosts would hold
  the owner 50 ms per preemption).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .ledger import Claim, ClaimLedger
from .table import HostTable

__all__ = ["PRIORITY_OFFSET", "Candidate", "candidates", "freeing"]

# added to each victim's priority in the sum (kube adds MaxInt32 + 1): every
# term is then positive, since RequestSpec.priority is at least -1,000,000
PRIORITY_OFFSET = 1_000_001


RoomRules = Sequence[tuple[int, int]]  # (headroom row, amount asked), Ranker.room_rules


@dataclass(frozen=True, slots=True)
class Candidate:
    """One host a preemption could free, and the claims it would release there."""

    row: int
    victims: tuple[Claim, ...]  # most important first
    key: tuple[int, int, int, float, int]  # the order above: the lowest is chosen


def freeing(claim: Claim, ledger: ClaimLedger) -> tuple[int, int, int, bool]:
    """What releasing ``claim`` gives its row, as ``HostTable.room_after`` takes it:
    a confirmed claim its host still lists is credited back, an assumed one
    leaves the claimed figures."""
    return (claim.memory_mb, claim.vcpus, claim.disk_gb, ledger.credited_on_release(claim))


def _fits(
    table: HostTable,
    row: int,
    freed: Sequence[tuple[int, int, int, bool]],
    rules: RoomRules,
    row_local: bool,
) -> bool:
    headroom, ok = table.room_after(row, freed)
    return (ok or not row_local) and all(headroom[index] >= asked for index, asked in rules)


def candidates(
    table: HostTable,
    ledger: ClaimLedger,
    rows: Iterable[int],
    rules: RoomRules,
    below: int,
    max_victims: int,
    limit: int | None = None,
    *,
    row_local: bool = True,
) -> list[Candidate]:
    """The hosts among ``rows`` (in that order) that releasing claims of priority
    ``below`` or lower would make room on, with their victims, best first (the
    module's order, exact ties to the one found first); the search stops once
    ``limit`` are found (None: all). ``row_local`` False (a forced request,
    which skips every filter) asks only for room, not the row-local filters."""
    claims = ledger.claims
    held = ledger.migrations
    moving = ledger.moving
    headroom = table.headroom
    found: list[Candidate] = []
    for position, row in enumerate(rows):
        on_row = ledger.by_row.get(row)
        if not on_row:
            continue
        eligible = [
            c
            for uuid in on_row
            if (c := claims[uuid]).priority <= below and uuid not in held and uuid not in moving
        ]
        if not eligible:
            continue
        # a cheap bound first: releasing a claim raises a headroom by at most its size
        freed_most = (
            sum(c.memory_mb for c in eligible),
            sum(c.vcpus for c in eligible),
            sum(c.disk_gb for c in eligible),
        )
        if any(headroom[index, row] + freed_most[index] < asked for index, asked in rules):
            continue
        # most important first: higher priority, then older, then by uuid (a fixed order)
        eligible.sort(key=lambda c: (-c.priority, c.created_at, c.instance_uuid))
        effects = {c.instance_uuid: freeing(c, ledger) for c in eligible}
        victims = list(eligible)
        if not _fits(table, row, [effects[c.instance_uuid] for c in victims], rules, row_local):
            continue
        for claim in eligible:  # reprieve each that the request can do without
            spared = [v for v in victims if v is not claim]
            if _fits(table, row, [effects[v.instance_uuid] for v in spared], rules, row_local):
                victims = spared
        if len(victims) > max_victims:
            continue
        top = victims[0].priority
        earliest_top = min(v.created_at for v in victims if v.priority == top)
        key = (
            top,
            sum(v.priority + PRIORITY_OFFSET for v in victims),
            len(victims),
            -earliest_top,
            position,
        )
        found.append(Candidate(row, tuple(victims), key))
        if limit is not None and len(found) >= limit:
            break
    found.sort(key=lambda c: c.key)
    return found
