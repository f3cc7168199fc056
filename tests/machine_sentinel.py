"""Proof that a test run leaves the machine's own broker and database as it found them.

At the start of the session one connection of its own is opened to the
machine's RabbitMQ (127.0.0.1:5672, vhost ``/``) and one to its PostgreSQL
(127.0.0.1:5432), and PostgreSQL's start time is read. At the end the same
two connections must still answer and the start time must be the same: a
restart of either server, ``rabbitmqctl close_all_connections`` on ``/``, or
``pg_terminate_backend`` of other sessions would have cut them. A server that
did not answer at the start is not checked (the tests that need it skip).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any

import aio_pika
import psycopg

_APPLICATION = "actorsched tests: machine sentinel"


@dataclass
class MachineSentinel:
    amqp_url: str
    pg_url: str
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _amqp: Any = None
    _pg: psycopg.Connection[Any] | None = None
    pg_started: Any = None
    absent: list[str] = field(default_factory=list)

    def open(self) -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        try:
            self._amqp = self._run(aio_pika.connect(self.amqp_url, timeout=5), 10)
        except Exception as exc:
            self.absent.append(f"RabbitMQ at {self.amqp_url} ({type(exc).__name__})")
        try:
            self._pg = psycopg.connect(
                self.pg_url, autocommit=True, connect_timeout=5, application_name=_APPLICATION
            )
            self.pg_started = self._pg.execute("SELECT pg_postmaster_start_time()").fetchone()
        except psycopg.Error as exc:
            self.absent.append(f"PostgreSQL at {self.pg_url} ({type(exc).__name__})")

    def _run(self, work: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    async def _amqp_answers(self) -> None:
        channel = await self._amqp.channel()
        queue = await channel.declare_queue("", exclusive=True, auto_delete=True)
        await queue.delete()
        await channel.close()

    def disturbed(self) -> list[str]:
        """What changed on the machine's servers since :meth:`open` (empty: nothing)."""
        found: list[str] = []
        if self._amqp is not None:
            try:
                if self._amqp.is_closed:
                    raise ConnectionError("closed")
                self._run(self._amqp_answers(), 10)
            except Exception as exc:
                found.append(
                    "the machine's RabbitMQ cut a connection that no test owns (restarted, "
                    f"or its connections closed): {type(exc).__name__} {exc}"
                )
        if self._pg is not None:
            try:
                now = self._pg.execute("SELECT pg_postmaster_start_time()").fetchone()
            except psycopg.Error as exc:
                found.append(
                    "the machine's PostgreSQL cut a session that no test owns (restarted, or "
                    f"its backend terminated): {type(exc).__name__}"
                )
            else:
                if now != self.pg_started:
                    found.append(
                        f"the machine's PostgreSQL restarted: started {self.pg_started}, now {now}"
                    )
        return found

    def close(self) -> None:
        if self._amqp is not None:
            with contextlib.suppress(Exception):
                self._run(self._amqp.close(), 10)
        if self._pg is not None:
            with contextlib.suppress(psycopg.Error):
                self._pg.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()
