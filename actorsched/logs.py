"""Log set-up of the commands: one line per record, as text or as JSON.

``--log-format json`` writes one JSON object per line (``ts``, ``level``,
``logger``, ``message``, and the record's ``extra`` fields such as a
decision's ``instance_uuid`` and ``host``) for log pipelines.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any

from yarl import URL

__all__ = ["JsonFormatter", "configure_logging", "redact"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# the attributes every LogRecord has; anything else was given as ``extra=``
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def redact(url: str) -> str:
    """``url`` with its password, if any, shown as ``***`` (for log lines and
    ``actorsched config``): the ``user:password@`` form and a ``password=``
    query parameter (libpq's) alike, for the broker's URL and the journal's.

    >>> redact("postgresql://app@db/test?password=s3cret")
    'postgresql://app@db/test?password=***'

    An oslo.messaging transport URL may name several brokers, each with its
    own password:

    >>> redact("rabbit://nova:s1@mq1:5672,nova:s2@mq2:5672/cell1")
    'rabbit://nova:***@mq1:5672,nova:***@mq2:5672/cell1'
    """
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if sep and "," in netloc:
        hosts = [redact(f"{scheme}://{host}").partition("://")[2] for host in netloc.split(",")]
        # the query's password= through the one-broker form
        query = redact(f"{scheme}://host{slash}{tail}").partition("://host")[2]
        return f"{scheme}://{','.join(hosts)}{query}"
    parsed = URL(url)
    if parsed.password:
        parsed = parsed.with_password("***")
    if "password" in parsed.query:
        parsed = parsed.update_query(password="***")
    return str(parsed) if parsed != URL(url) else url


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the record's ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            # RFC 3339 in UTC, to the microsecond, and the same instant as a number
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="microseconds"
            ),
            "ts": round(record.created, 6),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str, fmt: str = "text") -> None:
    """Send the root logger's records to stderr at ``level``, as ``text`` or ``json``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
