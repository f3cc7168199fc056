"""The journal's own error."""

from __future__ import annotations

from ..errors import SchedulerError

__all__ = ["JournalError"]


class JournalError(SchedulerError):
    """The journal cannot be opened, read or written.

    Raised for a file that is not an actorsched journal (another SQLite
    database, or not SQLite at all), a damaged one, one written by a newer
    schema, and for every call after a journal write failed. The message
    names the file and says what to do; the scheduler never falls back to
    an empty state silently.
    """
