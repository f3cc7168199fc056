"""Rules of the engine (``actorsched.core.engine.SchedulerCore``) no other test
pinned: the count of placements that preempted, the words of an ownership
refusal, and what the digest of the state covers."""

from __future__ import annotations

import pytest
from conftest import make_config, make_core, make_report, make_spec

from actorsched.core import (
    Command,
    ConfirmMove,
    Locate,
    Move,
    Release,
    Reschedule,
    RevertMove,
    SchedulerCore,
)
from actorsched.errors import Forbidden


def test_the_preemption_count_starts_at_zero_and_counts_each_instance_placed_by_preempting() -> (
    None
):
    # the owner tells its observer which placements preempted by this count's
    # change; a placement that found room leaves it as it was
    core = make_core(make_config(preemption=True))
    assert core.preemptions == 0
    core.update_host(make_report("h1", memory_mb=2048), 1.0)
    core.update_host(make_report("h2", memory_mb=2048), 1.0)
    core.select_destinations(make_spec("low-1", memory_mb=2048), 2.0)
    core.select_destinations(make_spec("low-2", memory_mb=2048), 2.0)
    assert core.preemptions == 0
    placed = core.select_destinations(make_spec("high", memory_mb=2048, priority=5), 3.0)
    assert [len(s.preempted) for s in placed] == [1]
    assert core.preemptions == 1
    both = make_spec("top-1", "top-2", memory_mb=2048, priority=10)
    assert [len(s.preempted) for s in core.select_destinations(both, 4.0)] == [1, 1]
    assert core.preemptions == 3


def _move_held(core: SchedulerCore) -> None:
    """A claim of tenant-a's (vm-a) with an open move of it (m-a)."""
    for host in ("h1", "h2"):
        core.update_host(make_report(host), 1.0)
    core.select_destinations(make_spec("vm-a", owner="tenant-a"), 2.0)
    core.handle(Move("vm-a", "m-a", caller="tenant-a"), 2.0)


@pytest.mark.parametrize(
    ("command", "operation", "uuid"),
    [
        (Release("vm-a", caller="tenant-b"), "release", "vm-a"),
        (Locate("vm-a", caller="tenant-b"), "where", "vm-a"),
        (Move("vm-a", "m-b", caller="tenant-b"), "move", "vm-a"),
        (ConfirmMove("m-a", caller="tenant-b"), "confirm_move", "m-a"),
        (RevertMove("m-a", caller="tenant-b"), "revert_move", "m-a"),
        (Reschedule("vm-a", "h1", caller="tenant-b"), "reschedule", "vm-a"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Command) else None,
)
def test_an_ownership_refusal_names_the_operation_and_the_uuid_refused(
    command: Command[object], operation: str, uuid: str
) -> None:
    # the caller reads what it may not do by the operation's name, the one the
    # role rules and the bus use
    core = make_core()
    _move_held(core)
    with pytest.raises(Forbidden) as refused:
        core.handle(command, 3.0)
    assert str(refused.value).startswith(
        f"forbidden: {operation} of {uuid}: 'tenant-b' may only {operation} claims it made "
    )


def test_the_digest_tells_apart_hosts_that_differ_only_in_the_instances_they_list() -> None:
    # what a host's last report lists is state: it decides whether a claim of
    # one of those instances is confirmed at once, and whether a release
    # credits it back; so two cores that differ only there must not look the same
    other, listing = make_core(), make_core()
    other.update_host(make_report("h1", instances=["vm-2"]), 1.0)
    listing.update_host(make_report("h1", instances=["vm-1"]), 1.0)
    assert other.host_states() == listing.host_states()  # one instance each
    assert other.digest() != listing.digest()
    again = make_core()
    again.update_host(make_report("h1", instances=["vm-1"]), 1.0)
    assert again.digest() == listing.digest()
