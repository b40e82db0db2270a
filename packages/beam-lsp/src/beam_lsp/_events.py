"""The events a `LeanClient` publishes to its subscribers, and their fan-out.

Owns the event types (diagnostics published, file progress, server exit) and `Broadcast`, which offers each
event to every subscriber without ever blocking the reader: a subscriber that falls behind loses events (they are
counted), one that went away is forgotten. It must not decide what to publish (the client does).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .errors import ServerExited
from .lean import LeanDiagnostic, LeanFileProgressParams

__all__ = ["Broadcast", "DiagnosticsEvent", "LspEvent", "ProgressEvent", "ServerExitedEvent"]


@dataclasses.dataclass(frozen=True)
class DiagnosticsEvent:
    """Lean published diagnostics for a document version."""

    uri: str
    version: int | None
    diagnostics: tuple[LeanDiagnostic, ...]


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """A `$/lean/fileProgress` update."""

    params: LeanFileProgressParams


@dataclasses.dataclass(frozen=True)
class ServerExitedEvent:
    """The server process is gone; `error` says why (with the redacted stderr tail)."""

    error: ServerExited


LspEvent = DiagnosticsEvent | ProgressEvent | ServerExitedEvent


class Broadcast:
    """Fan-out of events to subscribers; a full subscriber loses the event (counted), a gone one is dropped."""

    def __init__(self) -> None:
        """Start with no subscribers."""
        self._subscribers: list[MemoryObjectSendStream[LspEvent]] = []
        self.dropped = 0

    def send(self, event: LspEvent) -> None:
        """Offer `event` to every subscriber without waiting."""
        for s in list(self._subscribers):
            try:
                s.send_nowait(event)
            except anyio.WouldBlock:
                self.dropped += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.remove(s)

    @contextlib.asynccontextmanager
    async def subscribe(self, buffer: int) -> AsyncIterator[MemoryObjectReceiveStream[LspEvent]]:
        """A receive stream of the events sent while the context is open, at most `buffer` unread."""
        send, receive = anyio.create_memory_object_stream[LspEvent](buffer)
        self._subscribers.append(send)
        try:
            async with receive:
                yield receive
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
            send.close()

    def close(self) -> None:
        """End every subscriber's stream (their `async for` loops finish)."""
        for s in self._subscribers:
            s.close()
