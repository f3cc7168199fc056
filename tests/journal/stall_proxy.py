"""A TCP proxy in front of PostgreSQL that can stall: sockets stay open, nothing moves.

What a stalled network path, a frozen middlebox or a hung server looks like
from the client: connected, writes accepted by the kernel, no answer ever.
The test's own proxy on a free port; the database behind it is untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
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
        self.connections = 0  # accepted in all
        self.open = 0  # open now (both directions still pumping)
        self.most_open = 0  # open at once, at most
        self.requests = 0  # HTTP/1.1 request lines sent through it (an HTTP server behind)
        self._requested = asyncio.Event()  # set at each request line
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

    async def until_requests(self, count: int, within: float) -> int:
        """Wait until ``count`` HTTP requests went through (at most ``within`` seconds);
        the count then."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while self.requests < count:
                    self._requested.clear()
                    await self._requested.wait()
        return self.requests

    def stall(self) -> None:
        """Stop forwarding in both directions; every socket stays open."""
        self._moving.clear()

    def resume(self) -> None:
        self._moving.set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers += [writer, up_writer]
        pumps = [
            asyncio.ensure_future(self._pump(source, sink, up))
            for source, sink, up in ((reader, up_writer, True), (up_reader, writer, False))
        ]
        for task in pumps:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        closed = asyncio.ensure_future(self._closed(pumps))
        self._tasks.add(closed)
        closed.add_done_callback(self._tasks.discard)

    async def _closed(self, pumps: Sequence[asyncio.Future[None]]) -> None:
        """Counts the connection closed once both its directions ended."""
        try:
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self.open -= 1

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, up: bool = False
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                await self._moving.wait()  # stalled: nothing is read, the buffers fill
                data = await source.read(65_536)
                if not data:
                    break
                if up and b" HTTP/1.1\r\n" in data:
                    self.requests += data.count(b" HTTP/1.1\r\n")
                    self._requested.set()
                await self._moving.wait()
                sink.write(data)
                await sink.drain()
        sink.close()
