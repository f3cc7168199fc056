"""What the inspection operations answer: claims, where an instance is, a plan.

Frozen pydantic models like those of :mod:`actorsched.models`, carried by
the embedded API and, as JSON, by the AMQP replies.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ClaimInfo", "ClaimsPage", "Location", "Plan", "PlanCandidate", "PlannedInstance"]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClaimInfo(_Answer):
    """One live claim: where, how much, since when, and whether a report confirmed it."""

    instance_uuid: str
    host: str
    memory_mb: int
    vcpus: int
    disk_gb: int
    group_id: str | None
    created_at: float
    confirmed: bool  # a host report lists the instance: its figures now carry it
    alternates: list[str]
    owner: str | None = None  # who placed it (the broker user); None: an embedded caller


class ClaimsPage(_Answer):
    """Claims in the ledger's order from a cursor; ``next_cursor`` None on the last page.

    Each page is one consistent cut of the ledger; pages taken at different
    times may miss or repeat a claim that came or went in between.
    """

    claims: list[ClaimInfo]
    next_cursor: int | None


class Location(_Answer):
    """Where an instance is: the host of its claim, or of the last report listing it."""

    instance_uuid: str
    host: str | None  # None: the scheduler knows no such instance
    claimed: bool  # it holds a live claim
    confirmed: bool  # ... that a host report confirmed
    reported: bool  # a host's last report lists it


class PlanCandidate(_Answer):
    """A host a plan ranked: each weigher's weight (normalized, times its multiplier)."""

    host: str
    weights: dict[str, float]
    total: float


class PlannedInstance(_Answer):
    """Where one instance of a planned request would go, and why.

    ``candidates`` are the chosen host first, then the others ranked with
    it (its alternates, for a single instance). ``filter_counts``: how many
    of the ``total_hosts`` each filter removed; ``passing_hosts`` passed all.
    """

    instance_uuid: str
    host: str | None  # None: no host passes (the plan's message says why)
    alternates: list[str]
    candidates: list[PlanCandidate]
    total_hosts: int
    passing_hosts: int
    filter_counts: dict[str, int]
    # the claims it would preempt for room (SchedulerConfig.preemption)
    preempted: list[str] = Field(default_factory=list)


class Plan(_Answer):
    """A dry run of ``select_destinations``: what it would claim now. It claimed nothing.

    ``placed`` False means one instance found no host: ``message`` is the
    NoValidHost it would raise, and ``instances`` ends with that instance.
    """

    placed: bool
    message: str | None
    instances: list[PlannedInstance]
