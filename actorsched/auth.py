"""Who may do what on the bus: each operation's role, and each broker user's roles.

Rules this module keeps:

* Every operation of the native protocol has one role (:data:`OPERATION_ROLES`,
  checked against :data:`~actorsched.amqp.protocol.OPERATIONS` by a test):
  ``report`` sends host reports; ``place`` places, moves, releases and plans;
  ``read`` reads host states, claims, locations and aggregates; ``admin``
  changes aggregates and removes hosts, and may do everything else.
* The caller is the AMQP ``user_id`` property, which RabbitMQ checks against
  the user of the connection that published it (a publisher cannot forge
  it); a message without one is :data:`ANONYMOUS`.
* A request's priority above the highest ``max_priority`` of the caller's
  roles is refused too (``admin`` has no cap).
* A tenant's claims are its own. Every claim keeps its owner (the broker
  user that placed it). The operations on claims (:data:`OWN_CLAIMS`) are
  scoped to the caller's own claims (:meth:`Authorizer.scope`) unless it
  has the role that lifts the scope: ``admin`` for a release or a move,
  ``read`` (or ``admin``) for a read; ``place`` may read its own claims
  (``claims``, ``where``) without ``read``. The core applies the scope
  (``SchedulerCore._check_own``): another's claim is Forbidden, nothing changed.
* Secure by default: :meth:`Authorizer.own` gives the service's own broker
  user every role and every other caller, ``anonymous`` included, none.
* A refusal is a :class:`~actorsched.errors.Forbidden` naming the operation,
  the caller and the role it lacks; the adapter answers it and changes
  nothing. It is logged once per caller and operation (at most
  :data:`MAX_LOGGED` pairs, then counted only).
* The embedded API is not checked: the process is the boundary.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel

from .errors import Forbidden
from .models import RequestSpec

__all__ = [
    "ANONYMOUS",
    "MAX_LOGGED",
    "OPERATION_ROLES",
    "OWN_CLAIMS",
    "ROLES",
    "Authorizer",
    "Role",
]

log = logging.getLogger("actorsched.auth")

Role = Literal["report", "place", "read", "admin"]
ROLES: tuple[Role, ...] = ("report", "place", "read", "admin")
ANONYMOUS = "anonymous"
# (caller, operation) pairs whose first refusal is logged; past it, refusals are counted
MAX_LOGGED = 1_000
# the cap of a role that names none (admin: none at all)
DEFAULT_MAX_PRIORITY = 0

OPERATION_ROLES: Mapping[str, Role] = {
    "host_report": "report",
    "select_destinations": "place",
    "release": "place",
    "move": "place",
    "confirm_move": "place",
    "revert_move": "place",
    "reschedule": "place",
    "plan": "place",
    "host_states": "read",
    "claims": "read",
    "where": "read",
    "aggregates": "read",
    "create_aggregate": "admin",
    "update_aggregate": "admin",
    "delete_aggregate": "admin",
    "add_host_to_aggregate": "admin",
    "remove_host_from_aggregate": "admin",
    "remove_host": "admin",
}
# the operations on claims, scoped to the caller's own unless it has this role
OWN_CLAIMS: Mapping[str, Role] = {
    "release": "admin",
    "move": "admin",
    "confirm_move": "admin",
    "revert_move": "admin",
    "reschedule": "admin",
    "claims": "read",
    "where": "read",
}


def _priority(request: BaseModel) -> int:
    if isinstance(request, RequestSpec):
        return request.priority
    spec = getattr(request, "spec", None)
    return spec.priority if isinstance(spec, RequestSpec) else 0


def _allows(roles: frozenset[Role], operation: str) -> bool:
    """Whether ``roles`` allow ``operation`` (its priority aside): ``admin``, its own
    role, or ``place`` for an operation on claims (scoped to the caller's own)."""
    return (
        "admin" in roles
        or OPERATION_ROLES[operation] in roles
        or (operation in OWN_CLAIMS and "place" in roles)
    )


class Authorizer:
    """Each broker user's roles; :meth:`check` says whether one may do an operation.

    >>> auth = Authorizer({"nova": ["place", "read"]})
    >>> auth.roles("nova") == frozenset({"place", "read"})
    True
    >>> auth.roles(None)
    frozenset()
    """

    def __init__(
        self,
        users: Mapping[str, Iterable[Role]],
        max_priority: Mapping[Role, int] | None = None,
    ) -> None:
        self.users = {user: frozenset(roles) for user, roles in users.items()}
        self.max_priority = dict(max_priority or {})
        self.denied = 0  # refusals so far
        self._logged: set[tuple[str, str]] = set()
        # (caller, operation) -> whether its roles allow it, for the callers the table
        # names (bounded by it): a check is then one lookup and the priority's cap
        self._allowed = {
            (user, operation): _allows(roles, operation)
            for user, roles in self.users.items()
            for operation in OPERATION_ROLES
        }

    @classmethod
    def own(cls, user: str) -> Authorizer:
        """The default: ``user`` (the service's own broker user) may do everything."""
        return cls({user: ROLES})

    def roles(self, user: str | None) -> frozenset[Role]:
        """The roles of ``user`` (None: ``anonymous``)."""
        return self.users.get(user if user else ANONYMOUS, frozenset())

    def check(self, operation: str, user: str | None, request: BaseModel) -> Forbidden | None:
        """None when ``user`` may do ``operation`` with ``request``; else the refusal."""
        caller = user if user else ANONYMOUS
        roles = self.roles(caller)
        if "admin" in roles:
            return None
        if self._allowed.get((caller, operation)) and _priority(request) <= 0:
            return None  # the common case: allowed, and no priority to cap
        if not _allows(roles, operation):
            need = OPERATION_ROLES[operation]
            return self._deny(
                operation,
                caller,
                f"{operation} needs the role {need!r}; {caller!r} has "
                f"{sorted(roles) if roles else 'none'} (the [auth] table gives roles)",
            )
        priority = _priority(request)
        if priority > 0:
            cap = max(self.max_priority.get(role, DEFAULT_MAX_PRIORITY) for role in roles)
            if priority > cap:
                return self._deny(
                    operation,
                    caller,
                    f"{operation} at priority {priority} is above {caller!r}'s cap {cap} "
                    "(max_priority of its roles in [auth]; admin has none)",
                )
        return None

    def scope(self, operation: str, user: str | None) -> str | None:
        """The caller whose own claims ``operation`` is limited to; None: every claim
        (an operation not on claims, or a caller with the role that lifts the scope)."""
        lift = OWN_CLAIMS.get(operation)
        if lift is None:
            return None
        caller = user if user else ANONYMOUS
        roles = self.roles(caller)
        return None if "admin" in roles or lift in roles else caller

    def _deny(self, operation: str, caller: str, why: str) -> Forbidden:
        self.note(operation, caller, why)
        return Forbidden(f"forbidden: {why}")

    def note(self, operation: str, caller: str, why: str) -> None:
        """Count a refusal (here, or the core's of another's claim) and log its first
        per caller and operation."""
        self.denied += 1
        key = (caller, operation)
        if key not in self._logged and len(self._logged) < MAX_LOGGED:
            self._logged.add(key)
            log.warning("forbidden: %s (logged once per caller and operation)", why)
