"""A TCP proxy in front of PostgreSQL that can stall: sockets stay open, nothing moves.

What a stalled network path, a frozen middlebox or a hung server looks like
from the client: connected, writes accepted by the kernel, no answer ever.
The test's own proxy on a free port; the database behind it is untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit


class StallProxy:
    """``async with StallProxy(url) as proxy``: ``proxy.url`` reaches ``url`` through it."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._parts = parts
        self._moving = asyncio.Event()
        self._moving.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self.connections = 0
        self.url = ""

    async def __aenter__(self) -> StallProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        user = f"{self._parts.username}@" if self._parts.username else ""
        self.url = urlunsplit(self._parts._replace(netloc=f"{user}127.0.0.1:{port}"))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def stall(self) -> None:
        """Stop forwarding in both directions; every socket stays open."""
        self._moving.clear()

    def resume(self) -> None:
        self._moving.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers += [writer, up_writer]
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.ensure_future(self._pump(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                await self._moving.wait()  # stalled: nothing is read, the buffers fill
                data = await source.read(65_536)
                if not data:
                    break
                await self._moving.wait()
                sink.write(data)
                await sink.drain()
        sink.close()
