"""A tenant's claims are its own (issue 24): each claim keeps its request's owner,
and a command scoped to a caller acts only on that caller's claims.

The scope is applied in the core, in one step with the change (no check-then-act
gap between the service and the owner): another's claim is Forbidden and
nothing changes.
"""

from __future__ import annotations

import pytest

from actorsched import HostReport, RequestSpec, SchedulerConfig
from actorsched.core import (
    ConfirmMove,
    GetClaims,
    Locate,
    Move,
    Release,
    Reschedule,
    RevertMove,
    SchedulerCore,
    SelectDestinations,
)
from actorsched.errors import Forbidden

NOW = 1.0


def _core() -> SchedulerCore:
    core = SchedulerCore(SchedulerConfig(seed=1))
    for i in range(4):
        core.update_host(
            HostReport(
                host=f"h{i}",
                memory_mb=8192,
                memory_mb_used=0,
                vcpus=8,
                vcpus_used=0,
                local_gb=100,
                local_gb_used=0,
                generation=1,
            ),
            NOW,
        )
    return core


def _spec(uuid: str, owner: str | None) -> RequestSpec:
    return RequestSpec(instance_uuids=[uuid], memory_mb=512, vcpus=1, disk_gb=1, owner=owner)


def _placed(core: SchedulerCore, uuid: str, owner: str | None) -> str:
    (selection,) = core.handle(SelectDestinations(_spec(uuid, owner)), NOW)
    return selection.host


def test_a_claim_keeps_its_owner_through_a_move_a_revert_and_a_reschedule() -> None:
    core = _core()
    _placed(core, "a1", "tenant-a")
    assert core.ledger.claims["a1"].owner == "tenant-a"
    core.handle(Move("a1", "m1", caller="tenant-a"), NOW)
    assert core.ledger.claims["m1"].owner == "tenant-a", "the source hold"
    assert core.ledger.claims["a1"].owner == "tenant-a", "the destination"
    assert core.handle(RevertMove("m1", caller="tenant-a"), NOW)
    assert core.ledger.claims["a1"].owner == "tenant-a", "given back on revert"
    failed = core.ledger.claims["a1"].host
    core.handle(Reschedule("a1", failed, caller="tenant-a"), NOW)
    assert core.ledger.claims["a1"].owner == "tenant-a"
    assert core.ledger.claims["a1"].host != failed


@pytest.mark.parametrize(
    "command",
    [
        Release("a1", caller="tenant-b"),
        Locate("a1", caller="tenant-b"),
        Move("a1", "m9", caller="tenant-b"),
        Reschedule("a1", "h0", caller="tenant-b"),
    ],
    ids=lambda c: type(c).__name__,
)
def test_another_tenants_claim_is_forbidden_and_nothing_changes(command: object) -> None:
    core = _core()
    host = _placed(core, "a1", "tenant-a")
    before = core.claims()
    with pytest.raises(Forbidden, match=r"'tenant-b' may only .* claims it made"):
        core.handle(command, NOW)  # type: ignore[arg-type]
    assert core.claims() == before
    assert core.ledger.claims["a1"].host == host
    assert "m9" not in core.ledger.migrations


def test_the_refusal_names_the_role_that_would_allow_it() -> None:
    """Another's claim needs 'admin'; a where (a read) needs 'admin' or 'read'."""
    core = _core()
    _placed(core, "a1", "tenant-a")
    with pytest.raises(Forbidden) as refused:
        core.handle(Release("a1", caller="tenant-b"), NOW)
    assert str(refused.value).endswith("needs the role 'admin')")
    with pytest.raises(Forbidden) as refused:
        core.handle(Locate("a1", caller="tenant-b"), NOW)
    assert str(refused.value).endswith("needs the role 'admin' or 'read')")


def test_a_move_of_another_tenants_instance_cannot_be_confirmed_or_reverted_by_it() -> None:
    core = _core()
    _placed(core, "a1", "tenant-a")
    core.handle(Move("a1", "m1"), NOW)
    for command in (ConfirmMove("m1", caller="tenant-b"), RevertMove("m1", caller="tenant-b")):
        with pytest.raises(Forbidden, match="m1"):
            core.handle(command, NOW)
    assert "m1" in core.ledger.migrations
    # nothing to do on a uuid no claim holds: answered as for anyone, revealing nothing
    assert core.handle(ConfirmMove("m-none", caller="tenant-b"), NOW) is False
    assert core.handle(Release("none", caller="tenant-b"), NOW) is False


def test_an_unscoped_command_acts_on_any_claim_and_a_scoped_one_on_its_own() -> None:
    core = _core()
    _placed(core, "a1", "tenant-a")
    _placed(core, "e1", None)  # an embedded caller's claim: nobody's on the bus
    with pytest.raises(Forbidden):
        core.handle(Release("e1", caller="tenant-a"), NOW)
    assert core.handle(Release("a1", caller="tenant-a"), NOW) is True
    assert core.handle(Release("e1"), NOW) is True  # admin, or the embedded API


def test_a_repeat_of_a_claimed_uuid_by_another_owner_is_forbidden() -> None:
    core = _core()
    _placed(core, "a1", "tenant-a")
    assert _placed(core, "a1", "tenant-a") == core.ledger.claims["a1"].host  # its own repeat
    with pytest.raises(Forbidden, match=r"of a1: .* 'tenant-b' did not make"):
        core.handle(SelectDestinations(_spec("a1", "tenant-b")), NOW)
    assert core.ledger.claims["a1"].owner == "tenant-a"


def test_a_tenants_claims_page_lists_only_its_own_and_pages_through_them() -> None:
    core = _core()
    for i in range(7):
        _placed(core, f"a{i}", "tenant-a")
        _placed(core, f"b{i}", "tenant-b")
    seen: list[str] = []
    cursor: int | None = 0
    pages = 0
    while cursor is not None:
        page = core.handle(GetClaims(start=cursor, limit=3, caller="tenant-b"), NOW)
        assert len(page.claims) <= 3
        seen += [c.instance_uuid for c in page.claims]
        assert {c.owner for c in page.claims} <= {"tenant-b"}
        cursor = page.next_cursor
        pages += 1
    assert seen == [f"b{i}" for i in range(7)]
    assert pages == 3
    everyone = core.handle(GetClaims(limit=100), NOW)
    assert len(everyone.claims) == 14
    on_host = core.handle(GetClaims(host="h0", limit=100, caller="tenant-a"), NOW)
    assert {c.owner for c in on_host.claims} <= {"tenant-a"}
