"""Durable claims: a journal the owner writes with group commit, in SQLite or PostgreSQL.

>>> from actorsched import Scheduler
>>> scheduler = Scheduler(journal="claims.sqlite")   # recovers on start
>>> pair = Scheduler(journal=open_journal("postgresql://postgres@db/sched", shard="cell1"))

A path is SQLite (one process); a ``postgresql://`` URL is PostgreSQL (an
active/standby pair, fenced). See :class:`Journal` for the rules both keep.
"""

from __future__ import annotations

import os

from .base import (
    DEFAULT_COMMIT_TIMEOUT,
    DEFAULT_OWNER_CHECK_INTERVAL,
    Journal,
    JournalStats,
    Recovery,
)
from .errors import (
    JournalError,
    JournalFenced,
    JournalGap,
    JournalLocked,
    JournalMissing,
    JournalUnavailable,
)
from .postgres import DEFAULT_SHARD, PostgresJournal, is_postgres_url
from .sqlite import SqliteJournal

__all__ = [
    "DEFAULT_COMMIT_TIMEOUT",
    "DEFAULT_OWNER_CHECK_INTERVAL",
    "DEFAULT_SHARD",
    "Journal",
    "JournalError",
    "JournalFenced",
    "JournalGap",
    "JournalLocked",
    "JournalMissing",
    "JournalStats",
    "JournalUnavailable",
    "PostgresJournal",
    "Recovery",
    "SqliteJournal",
    "open_journal",
]


def open_journal(
    where: str | os.PathLike[str],
    *,
    shard: str = DEFAULT_SHARD,
    snapshot_every: int = 20_000,
    commit_timeout: float = DEFAULT_COMMIT_TIMEOUT,
    create: bool = True,
    owner_check_interval: float = DEFAULT_OWNER_CHECK_INTERVAL,
) -> Journal:
    """The journal ``where`` names: a ``postgresql://`` URL, or else the path of an SQLite file.

    ``shard`` names the state within a shared PostgreSQL database; an SQLite
    file holds one shard, so any other name there is refused. With ``create``
    False a journal that does not exist (no such file; no such shard in the
    database) raises :class:`JournalMissing` when opened, instead of being made.
    """
    if is_postgres_url(where):
        assert isinstance(where, str)
        return PostgresJournal(
            where,
            shard=shard,
            snapshot_every=snapshot_every,
            commit_timeout=commit_timeout,
            create=create,
            owner_check_interval=owner_check_interval,
        )
    if shard != DEFAULT_SHARD:
        raise ValueError(
            f"shard {shard!r} needs a postgresql:// journal; an SQLite journal holds one shard"
        )
    return SqliteJournal(
        where, snapshot_every=snapshot_every, commit_timeout=commit_timeout, create=create
    )
