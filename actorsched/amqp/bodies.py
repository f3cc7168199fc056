"""Bodies over the cap are never held whole: what ``serve`` keeps of bodies is bounded.

Rules this module keeps:

* A delivery's content header states its body size before any of the body
  arrives. A body within ``max_body_bytes`` is read as the AMQP library
  reads it. A body over it is read frame by frame (a frame is at most the
  connection's ``frame_max``, 128 KiB by default) and only its first
  ``keep`` bytes are kept: the rest is dropped as it arrives. So what the
  service holds of bodies in flight is at most ``prefetch × max_body_bytes``
  plus ``prefetch × keep``, whatever the broker's own ``max_message_size``.
* The library's frame queue is bounded (10 frames), so a slow consumer
  pushes back on the socket instead of buffering a flood.
* A cut body is marked on the channel (:meth:`BodyCappedChannel.cut_size`,
  by delivery tag), never by a header, so a publisher cannot forge the mark.

This reaches one private method of the underlying aiormq channel
(``_read_content``), on the channels this class opens only. When an aiormq
release lacks it, :meth:`BodyCappedChannel._on_open` fails at start with a
line saying so, rather than silently holding bodies whole.
"""

from __future__ import annotations

from typing import Any

import aio_pika
from aiormq.abc import DeliveredMessage
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

__all__ = ["BodyCappedChannel", "BodyCappedConnection"]


class BodyCappedChannel(aio_pika.RobustChannel):
    """A robust channel that keeps only the head of a body over ``max_body_bytes``.

    Set :attr:`max_body_bytes` and :attr:`keep` before the channel opens;
    they hold for every reopen after a reconnect too.
    """

    max_body_bytes: int = 1 << 20
    keep: int = 4_096

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cut: dict[int, int] = {}  # delivery tag -> declared body size

    def cut_size(self, delivery_tag: int | None) -> int | None:
        """The declared size of the delivery's body if it was cut, else None (forgets it)."""
        if delivery_tag is None:
            return None
        return self._cut.pop(delivery_tag, None)

    async def _on_open(self) -> None:
        underlay = await self.get_underlay_channel()
        read_whole = getattr(underlay, "_read_content", None)
        get_frame = getattr(underlay, "_get_frame", None)
        if read_whole is None or get_frame is None:
            raise RuntimeError(
                "this aiormq release has no Channel._read_content/_get_frame: the body cap "
                "cannot be enforced; install the aiormq version pyproject.toml allows"
            )
        self._cut.clear()  # tags start again on a new channel
        limit, keep, cut = self.max_body_bytes, self.keep, self._cut

        async def read_content(frame: Any, header: ContentHeader) -> DeliveredMessage:
            size = header.body_size or 0
            if size <= limit:
                result: DeliveredMessage = await read_whole(frame, header)
                return result
            head = bytearray()
            got = 0
            while got < size:
                content = await get_frame()
                if not isinstance(content, ContentBody):
                    raise ValueError(f"unexpected frame {content!r} inside a message body")
                value = content.value
                got += len(value)
                if len(head) < keep:
                    head += value[: keep - len(head)]
            tag = getattr(frame, "delivery_tag", None)
            if tag is not None:
                cut[tag] = size
            body = bytes(head)
            return DeliveredMessage(delivery=frame, header=header, body=body, channel=underlay)

        underlay._read_content = read_content  # type: ignore[attr-defined]  # this channel only
        await super()._on_open()


class BodyCappedConnection(aio_pika.RobustConnection):
    """A robust connection whose channels are :class:`BodyCappedChannel`."""

    CHANNEL_CLASS = BodyCappedChannel
