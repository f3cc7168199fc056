"""Errors every layer raises, and the AMQP client re-raises by name.

A caller can catch :class:`SchedulerError` for all of them. Each carries a
message that says what was wrong, with the offending value, and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "Forbidden",
    "InvalidRequest",
    "MailboxFull",
    "MaxRetriesExceeded",
    "NoValidHost",
    "NotActive",
    "SchedulerError",
    "SchedulerStopped",
    "error_from_wire",
]


class SchedulerError(Exception):
    """Base class of every error actorsched raises on purpose."""


class NoValidHost(SchedulerError):
    """No host passed the filters for one instance of a request.

    ``filter_counts`` maps each filter's name to the number of hosts it
    removed (each host is charged to the first filter that rejected it), so
    the message reads like kube-scheduler's ``0/N nodes are available``.
    """

    def __init__(
        self,
        message: str,
        *,
        instance_uuid: str | None = None,
        total_hosts: int = 0,
        filter_counts: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.instance_uuid = instance_uuid
        self.total_hosts = total_hosts
        self.filter_counts: dict[str, int] = dict(filter_counts or {})


class MaxRetriesExceeded(NoValidHost):
    """A reschedule found none of the instance's alternates still fit (Nova's
    MaxRetriesExceeded): the instance holds no claim now."""


class InvalidRequest(SchedulerError):
    """The request cannot be handled as sent (bad field, bad mix of uuids...)."""


class SchedulerStopped(SchedulerError):
    """The scheduler is stopped, or stopped before it could answer this call."""


class MailboxFull(SchedulerError):
    """The owner's mailbox and the line waiting for room in it are both full.

    Raised by the calls that cannot wait (``Scheduler.submit``) instead of
    letting messages pile up; nothing of the refused call was sent. The
    message names both bounds and the setting to raise. Callers that await
    (the typed methods, ``submit_when_room``) wait for room instead.
    """


class Forbidden(SchedulerError):
    """The caller's roles do not allow this operation (or this priority); nothing changed.

    The message names the operation, the caller (the broker user that sent it,
    or ``anonymous``) and the role it lacks.
    """


class NotActive(SchedulerStopped):
    """This scheduler is a standby: it follows the journal and answers nothing yet."""


_BY_NAME: dict[str, type[SchedulerError]] = {
    cls.__name__: cls
    for cls in (
        SchedulerError,
        NoValidHost,
        MaxRetriesExceeded,
        InvalidRequest,
        MailboxFull,
        SchedulerStopped,
        NotActive,
        Forbidden,
    )
}


def error_from_wire(type_name: str, message: str) -> SchedulerError:
    """Rebuild an error sent as ``{"type": ..., "message": ...}``.

    Unknown type names become a plain :class:`SchedulerError` whose message
    keeps the original name, so nothing is silently re-labelled.
    """
    cls = _BY_NAME.get(type_name)
    if cls is None:
        return SchedulerError(f"{type_name}: {message}")
    return cls(message)
