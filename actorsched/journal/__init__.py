"""Durable claims: an SQLite journal the owner writes with group commit.

>>> from actorsched import Scheduler
>>> scheduler = Scheduler(journal="claims.sqlite")   # recovers on start

See :class:`SqliteJournal` for what survives and how.
"""

from .errors import JournalError
from .sqlite import JournalStats, Recovery, SqliteJournal

__all__ = ["JournalError", "JournalStats", "Recovery", "SqliteJournal"]
