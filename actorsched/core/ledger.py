"""The claim ledger: which instance holds which claim on which host row.

Rules this module keeps:

* A claim is keyed by instance uuid; there is at most one per uuid. That is
  what makes a redelivered request harmless.
* A claim is *assumed* until a host report lists its instance, then
  *confirmed*: from then on the report's used figures carry it and the
  ledger keeps it only for idempotency, server groups and release.
* The ledger records; the engine decides. Moving resources in the host
  table is the engine's job, so the two always change in one step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..models import Selection

__all__ = ["Claim", "ClaimLedger"]


@dataclass(slots=True)
class Claim:
    """One instance's claim on one host row.

    Only strings, numbers and a tuple of host names are kept, no pydantic
    model: a ledger of many thousand claims then costs the garbage collector
    one object per claim. :attr:`selection` is built when asked for.
    """

    instance_uuid: str
    row: int
    memory_mb: int
    vcpus: int
    disk_gb: int
    group_id: str | None
    created_at: float
    host: str
    alternates: tuple[str, ...]
    confirmed: bool = False

    @property
    def selection(self) -> Selection:
        """The answer this claim gave: host and alternates, as first chosen."""
        return Selection(
            instance_uuid=self.instance_uuid, host=self.host, alternates=list(self.alternates)
        )


@dataclass(slots=True)
class ClaimLedger:
    """Claims by uuid, with indexes by host row and by server group."""

    claims: dict[str, Claim] = field(default_factory=dict)
    by_row: dict[int, set[str]] = field(default_factory=dict)
    group_rows: dict[str, Counter[int]] = field(default_factory=dict)
    # released instances a report still lists: row -> uuid -> (mem, vcpus, disk)
    released: dict[int, dict[str, tuple[int, int, int]]] = field(default_factory=dict)

    def add(self, claim: Claim) -> None:
        self.claims[claim.instance_uuid] = claim
        on_row = self.by_row.get(claim.row)
        if on_row is None:
            self.by_row[claim.row] = on_row = set()
        on_row.add(claim.instance_uuid)
        if claim.group_id is not None:
            self.group_rows.setdefault(claim.group_id, Counter())[claim.row] += 1

    def drop(self, uuid: str) -> Claim:
        claim = self.claims.pop(uuid)
        on_row = self.by_row[claim.row]
        on_row.discard(uuid)
        if not on_row:
            del self.by_row[claim.row]
        if claim.group_id is not None:
            rows = self.group_rows[claim.group_id]
            rows[claim.row] -= 1
            if rows[claim.row] <= 0:
                del rows[claim.row]
            if not rows:
                del self.group_rows[claim.group_id]
        return claim

    def group_members(self, group_id: str) -> Counter[int]:
        """Rows holding members of ``group_id``, with how many each."""
        return self.group_rows.get(group_id, Counter())

    def __len__(self) -> int:
        return len(self.claims)
