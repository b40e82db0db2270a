"""Outlets of the HTTP transport: where `McpServer` puts the messages of one request or of one session.

This module owns the queue between the server and an HTTP response (`Reply`: a request's notifications, then its
response; or a legacy session's mailbox that its GET stream drains) and the outlet of a notification, which
discards (`Discard`). Every `on_flushed` callback runs exactly once, written or dropped. It must not know HTTP.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import anyio


@dataclasses.dataclass(frozen=True)
class Item:
    """One queued message: its bytes, its flush callback, whether it is still wanted, and whether it is last."""

    data: bytes
    on_flushed: Callable[[], None] | None
    live: Callable[[], bool] | None
    final: bool

    def flushed(self) -> None:
        """Report the message written (or dropped) to whoever queued it."""
        if self.on_flushed is not None:
            self.on_flushed()

    @property
    def wanted(self) -> bool:
        """Whether the message is still to be written (a stale update is skipped)."""
        return self.live is None or self.live()


class Reply:
    """An `Outlet` whose messages an HTTP response drains.

    Unbounded, like the stdio writer's queue: the server bounds what it queues (one update per subscribed URI
    in flight, throttled progress).
    """

    def __init__(self) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[Item](math.inf)

    # -- Outlet
    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        """Queue a notification that belongs to the request."""
        self._put(Item(data, on_flushed, live, final=False))

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        """Queue the response; nothing follows it."""
        self._put(Item(data, on_flushed, None, final=True))
        self.abandon()

    def abandon(self) -> None:
        """Nothing more will be queued."""
        self._send.close()

    # -- the response's side
    def _put(self, item: Item) -> None:
        try:
            self._send.send_nowait(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            item.flushed()

    async def next(self, timeout: float) -> Item | None:
        """The next message; None after `timeout` seconds of silence.

        Raises:
            anyio.EndOfStream: Nothing more will come.
        """
        with anyio.move_on_after(timeout):
            try:
                return await self._recv.receive()
            except anyio.ClosedResourceError:  # closed by `close` while waiting
                raise anyio.EndOfStream from None
        return None

    def take(self) -> Item | None:
        """The next message if one is queued."""
        try:
            return self._recv.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return None

    def close(self) -> None:
        """Nobody will read on: drop what is queued (running its callbacks), and whatever comes later."""
        self.abandon()
        while (item := self.take()) is not None:
            item.flushed()
        self._recv.close()


class Discard:
    """The outlet of a notification: nothing is ever sent for one."""

    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        """Drop a notification."""
        if on_flushed is not None:
            on_flushed()

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        """Drop a response."""
        if on_flushed is not None:
            on_flushed()

    def abandon(self) -> None:
        """Nothing to release."""
