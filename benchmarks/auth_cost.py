"""What the authorization check costs a placement on the bus (issue 24).

Per ``select_destinations`` message, ``serve`` checks the caller's role and
priority cap (``Authorizer.check``), scopes a command on claims
(``Authorizer.scope``) and stamps the spec's ``owner`` from the message's
``user_id`` (a copy of the spec). This times exactly that work, in this process,
against the same loop without it (building the command alone), over the same
specs, pair by pair; the figure is the difference per message. ``make bench``
sets it beside the same run's AMQP placement rate: the share of a placement's
time it takes.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, cast

from actorsched import RequestSpec
from actorsched.amqp.service import _owned_by
from actorsched.auth import Authorizer
from actorsched.core import SelectDestinations

__all__ = ["auth_cost"]


def _specs(count: int) -> list[RequestSpec]:
    return [
        RequestSpec(instance_uuids=[f"auth-{i}"], memory_mb=512, vcpus=1, disk_gb=1)
        for i in range(count)
    ]


def auth_cost(calls: int = 20_000, rounds: int = 7) -> dict[str, Any]:
    """Microseconds per message the check adds (median of ``rounds`` pairs)."""
    users = ("nova-api", "tenant-2")  # each round stamps the other owner: never a no-op
    auth = Authorizer({user: ["place"] for user in users}, {"place": 10})
    specs = _specs(calls)
    plain: list[float] = []
    checked: list[float] = []
    for round_ in range(rounds):
        user = users[round_ % 2]
        started = time.perf_counter()
        for spec in specs:
            SelectDestinations(spec)
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        for spec in specs:
            if auth.check("select_destinations", user, spec) is not None:
                raise AssertionError("the bench's callers may place")
            auth.scope("select_destinations", user)
            SelectDestinations(cast(RequestSpec, _owned_by(spec, user)))
        checked.append(time.perf_counter() - started)
    added = [(c - p) / calls * 1e6 for c, p in zip(checked, plain, strict=True)]
    return {
        "calls": calls,
        "rounds": rounds,
        "added_us_per_message": statistics.median(added),
        "plain_us_per_message": statistics.median(plain) / calls * 1e6,
        "checked_us_per_message": statistics.median(checked) / calls * 1e6,
    }


def share_of_a_placement(cost: dict[str, Any], placements_per_s: float | None) -> float | None:
    """The check's added time as a share of one AMQP placement of the same run."""
    if not placements_per_s:
        return None
    return float(cost["added_us_per_message"]) * 1e-6 * placements_per_s
