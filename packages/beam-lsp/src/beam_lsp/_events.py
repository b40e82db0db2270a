"""The events a `LeanClient` publishes to its subscribers, and their fan-out.

Owns the event types (diagnostics published, file progress, server exit), `EventStream` (one subscriber's queue)
and `Broadcast`, which offers each event to every subscriber without ever blocking the reader: a subscriber that
falls behind loses events (they are counted), one that went away is forgotten. A subscriber that asks for it
gets file progress coalesced: while a "still elaborating" progress event for a document is still unread, a newer
one for the same document and version replaces it in place (the count of updates it sees then follows how fast it
reads, not how often Lean reports). A final or fatal report, or one of another version, never replaces an unread
one and is never replaced: it is queued after it, so a reader still sees that a version was elaborating before
it finished, and in what order versions came. Nothing here decodes a progress report's ranges. It must not decide
what to publish (the client does).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import anyio

from ._progress import FileProgress
from .errors import ServerExited
from .lean import LeanDiagnostic, LeanFileProgressParams

__all__ = ["Broadcast", "DiagnosticsEvent", "EventStream", "LspEvent", "ProgressEvent", "ServerExitedEvent"]


@dataclasses.dataclass(frozen=True)
class DiagnosticsEvent:
    """Lean published diagnostics for a document version.

    Attributes:
        uri: The document (the URI spelling Lean published for).
        version: The version the diagnostics belong to.
        diagnostics: Every diagnostic stored for `uri` after this publish (redacted, bounded).
        added: The ones this publish added: the tail of `diagnostics` for an incremental publish, all of them
            for a full one.
    """

    uri: str
    version: int | None
    diagnostics: tuple[LeanDiagnostic, ...]
    added: tuple[LeanDiagnostic, ...] = ()


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """A `$/lean/fileProgress` update (`report`; its ranges are decoded when `params` is first read)."""

    report: FileProgress

    @property
    def params(self) -> LeanFileProgressParams:
        """The whole notification as a validated model (decodes the report's ranges on first use)."""
        return self.report.params


@dataclasses.dataclass(frozen=True)
class ServerExitedEvent:
    """The server process is gone; `error` says why (with the redacted stderr tail)."""

    error: ServerExited


LspEvent = DiagnosticsEvent | ProgressEvent | ServerExitedEvent


@dataclasses.dataclass
class _Latest:
    """A queue entry holding the newest unread "still elaborating" progress event of one document version."""

    event: ProgressEvent


class EventStream:
    """One subscriber's events, in order: `async for`, `receive()`, `receive_nowait()`, `aclose()`.

    Like an anyio memory object receive stream: `receive_nowait` raises `anyio.WouldBlock` when nothing is
    queued, `anyio.EndOfStream` once the publisher closed and everything was read, and `anyio.ClosedResourceError`
    after the subscriber closed it.
    """

    def __init__(self, buffer: int, *, coalesce_progress: bool = False) -> None:
        """Hold at most `buffer` unread events; with `coalesce_progress`, see the module docstring."""
        self._buffer = buffer
        self._coalesce = coalesce_progress
        self._queue: collections.deque[LspEvent | _Latest] = collections.deque()
        self._latest: dict[str, _Latest] = {}
        self._wakeup = anyio.Event()
        self._ended = False
        self._closed = False
        self.coalesced: int = 0
        """Progress events replaced by a newer one before they were read."""

    def offer(self, event: LspEvent) -> bool:
        """Queue `event` without waiting; False when the buffer is full (the event is lost).

        Raises:
            anyio.ClosedResourceError: The subscriber closed the stream.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        entry: LspEvent | _Latest = event
        if self._coalesce and isinstance(event, ProgressEvent):
            report = event.report
            latest = self._latest.get(report.uri)
            ongoing = not (report.done or report.fatal)
            if latest is not None and ongoing and latest.event.report.version == report.version:
                latest.event = event
                self.coalesced += 1
                return True
            if ongoing:
                entry = _Latest(event)
        if len(self._queue) >= self._buffer:
            return False
        if isinstance(event, ProgressEvent) and self._coalesce:
            if isinstance(entry, _Latest):
                self._latest[event.report.uri] = entry
            else:
                self._latest.pop(event.report.uri, None)  # later reports queue after this one
        self._queue.append(entry)
        self._wakeup.set()
        return True

    @property
    def pending(self) -> int:
        """Events queued and not read yet."""
        return len(self._queue)

    def end(self) -> None:
        """The publisher is done: the reader sees `EndOfStream` after the queued events."""
        self._ended = True
        self._wakeup.set()

    def receive_nowait(self) -> LspEvent:
        """The next event, without waiting."""
        if self._closed:
            raise anyio.ClosedResourceError
        if self._queue:
            entry = self._queue.popleft()
            if not isinstance(entry, _Latest):
                return entry
            uri = entry.event.report.uri
            if self._latest.get(uri) is entry:
                del self._latest[uri]
            return entry.event
        if self._ended:
            raise anyio.EndOfStream
        raise anyio.WouldBlock

    async def receive(self) -> LspEvent:
        """The next event, waiting for one."""
        while True:
            try:
                return self.receive_nowait()
            except anyio.WouldBlock:
                if self._wakeup.is_set():
                    self._wakeup = anyio.Event()
                await self._wakeup.wait()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> LspEvent:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop receiving: the queued events are dropped and the publisher forgets this subscriber."""
        self._closed = True
        self._queue.clear()
        self._latest.clear()
        self._wakeup.set()

    async def aclose(self) -> None:
        """Same as `close`."""
        self.close()


class Broadcast:
    """Fan-out of events to subscribers; a full subscriber loses the event (counted), a gone one is dropped."""

    def __init__(self) -> None:
        """Start with no subscribers."""
        self._subscribers: list[EventStream] = []
        self.dropped: int = 0
        self._closed = False
        self._final: LspEvent | None = None

    def send(self, event: LspEvent) -> None:
        """Offer `event` to every subscriber without waiting."""
        for s in list(self._subscribers):
            try:
                if not s.offer(event):
                    self.dropped += 1
            except anyio.ClosedResourceError:
                self._subscribers.remove(s)

    @contextlib.asynccontextmanager
    async def subscribe(self, buffer: int, *, coalesce_progress: bool = False) -> AsyncIterator[EventStream]:
        """A stream of the events sent while the context is open, at most `buffer` unread."""
        stream = EventStream(buffer, coalesce_progress=coalesce_progress)
        if self._closed:  # nothing more will come: the last word, then the end
            if self._final is not None:
                stream.offer(self._final)
            stream.end()
        else:
            self._subscribers.append(stream)
        try:
            yield stream
        finally:
            if stream in self._subscribers:
                self._subscribers.remove(stream)
            stream.close()

    def close(self, final: LspEvent | None = None) -> None:
        """Send `final` (when given), then end every subscriber's stream, and those subscribed later.

        Their `async for` loops finish; a later subscriber gets `final` alone. Closing again changes nothing.
        """
        if self._closed:
            return
        if final is not None:
            self.send(final)
        self._closed, self._final = True, final
        for s in self._subscribers:
            s.end()
