"""The journal's own errors."""

from __future__ import annotations

from ..errors import SchedulerError

__all__ = [
    "JournalError",
    "JournalFenced",
    "JournalGap",
    "JournalLocked",
    "JournalMissing",
    "JournalUnavailable",
]


class JournalError(SchedulerError):
    """The journal cannot be opened, read or written.

    Raised for a file that is not an actorsched journal (another SQLite
    database, or not SQLite at all), a damaged one, one written by a newer
    schema, and for every call after a journal write failed. The message
    names the journal and says what to do; the scheduler never falls back
    to an empty state silently.
    """


class JournalLocked(JournalError):
    """Another process holds the journal: one writer at a time, never a split."""


class JournalFenced(JournalError):
    """Another owner took the shard over (a newer epoch): this one may not write.

    Every later write fails too. The process that gets it must stop
    answering at once; its state may hold changes the journal refused.
    """


class JournalUnavailable(JournalError):
    """The journal's database cannot be reached right now (a standby retries)."""


class JournalGap(JournalError):
    """A record this state needs is gone (a later snapshot dropped it): rebuild, or restart.

    A standby that fell more than a snapshot behind gets it; it then
    rebuilds its state from the snapshot (see ``Journal.reload``).
    """


class JournalMissing(JournalError):
    """The journal named does not exist, and making it was not asked for.

    ``serve`` makes a journal only with ``--create-journal`` (or its default
    state file on first use), so that a mistyped ``--journal`` or ``--shard``
    never starts an empty scheduler in place of the one that holds the claims.
    """
