"""Request dispatch: channels, id ownership, one cancel scope per admitted call, the fence, shutdown, output.

This module owns the mechanics every MCP method shares, whatever the method means:

- `Outgoing`, the one type of message on its way to a client, and `Outlet`, where the messages of one request go
  (its notifications, then its response); `StdioWriter` is the one serialized stdout sink of the stdio transport.
- `Channel`, the per-stream state (stdio, one modern HTTP request, or one legacy HTTP session): the protocol
  family, the legacy lifecycle and log level, the request ids in use and what runs under them.
- `Dispatcher`: classifies a message, owns its id from admission until the response is flushed (a second
  message reusing an active id is ignored), answers it (exceptions through `errors.to_wire`), runs admitted
  calls in their own cancel scope, keeps the stream-order fence of fencing calls, and drains everything at
  shutdown.

It must not know MCP methods or protocol families: `server` routes each request and decides what it means.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.abc

from . import _jsonrpc
from ._jsonrpc import Invalid, Message, Notification, Request, RequestId
from .errors import JsonRpcError, invalid_request, to_wire

if TYPE_CHECKING:
    from ._subscriptions import Send, Subscriber

log = logging.getLogger("beam_mcp")

Family = Literal["undecided", "legacy", "modern"]
Key = tuple[str, str | int]
Route = Callable[["Channel", Request, "Outlet"], Awaitable[dict[str, Any] | None]]
"""Answers one request: its result, or None when a call or a stream now owns the response."""


# ---- output -------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Outgoing:
    """One message on its way to a client.

    Attributes:
        data: The encoded JSON-RPC message (no newline).
        on_flushed: Called exactly once, when the message was written or dropped.
        live: Whether the message is still wanted when its turn comes (a message of an ended stream is skipped).
        final: The request's response: nothing follows it.
    """

    data: bytes
    on_flushed: Callable[[], None] | None = None
    live: Callable[[], bool] | None = None
    final: bool = False

    def flushed(self) -> None:
        """Run the flush callback (the message was written, skipped or dropped)."""
        if self.on_flushed is not None:
            self.on_flushed()

    def wanted(self) -> bool:
        """Whether the message should still be written."""
        return self.live is None or self.live()


class Outlet(Protocol):
    """Where the messages of one request go (its notifications, then its response).

    Every callback passed in is called exactly once, when the message was written or dropped. A message whose
    `live()` is false when its turn comes is skipped.
    """

    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        """A notification that belongs to the request (progress, logs, a listen stream's updates)."""
        ...

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        """The request's response: nothing follows it."""
        ...

    def abandon(self) -> None:
        """The request ended without a response (cancelled, or a listen stream ended): nothing follows."""
        ...


class StdioWriter:
    """The serialized sink of the stdio channel: every message of every request, in order, one writer task.

    It is also the stdio `Outlet`: a request's messages simply join the one queue. A response's callback (the
    release of its id) runs as the response goes out, before its write returns.
    """

    def __init__(self) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[Outgoing](math.inf)
        self._open = True

    def put(self, item: Outgoing) -> None:
        """Queue a message (after `close`, it is dropped and its callback runs at once)."""
        try:
            self._send.send_nowait(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            item.flushed()

    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        self.put(Outgoing(data, on_flushed, live))

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        self.put(Outgoing(data, on_flushed, final=True))

    def abandon(self) -> None:
        pass

    def notify(self, data: bytes, on_flushed: Callable[[], None], live: Callable[[], bool]) -> None:
        """A message that belongs to no request (a subscription's update)."""
        self.put(Outgoing(data, on_flushed, live))

    async def run(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        """Write queued messages until `close`; a client that closed our stdout is served quietly until EOF."""
        async with self._recv:
            async for item in self._recv:
                if item.final:
                    # A response frees its id as it goes out, not once `write` returns: the client may read it and
                    # reuse the id (modern) before this task resumes (a write from a worker thread reports back
                    # later), and its request must not find the id still owned (it would be ignored).
                    item.flushed()
                if self._open and item.wanted():
                    try:
                        await write(item.data + b"\n")
                    except OSError:
                        self._open = False
                if not item.final:
                    item.flushed()

    def close(self) -> None:
        """No more messages: the writer finishes what is queued, then returns."""
        self._send.close()


def _discard(data: bytes, on_flushed: Callable[[], None], live: Callable[[], bool]) -> None:
    on_flushed()


# ---- channels -----------------------------------------------------------------------------------------------------
class Channel:
    """The per-stream protocol state: stdio, one modern HTTP request, or one legacy HTTP session.

    Attributes:
        family: The selected protocol family.
        legacy_ready: Whether `notifications/initialized` arrived after a legacy `initialize`.
        log_level: The legacy minimum log level (`logging/setLevel`).
        closed: Whether the channel was ended (`McpServer.close_channel`).
        notify: Where messages that belong to no request go (a legacy session's `resources/updated`).
    """

    def __init__(self, notify: Send | None = None, family: Family = "undecided") -> None:
        """A channel with no requests yet (create them with `McpServer.channel`)."""
        self.family: Family = family
        self.legacy_ready = False
        self.log_level = "debug"
        self.closed = False
        self.notify: Send = notify or _discard
        self.owned: set[Key] = set()
        self.calls: dict[Key, InFlight] = {}
        self.listens: dict[Key, tuple[Subscriber, Outlet]] = {}
        self.session_subscriber: Subscriber | None = None

    def owns(self, rid: RequestId) -> bool:
        """Whether `rid` is in use on this channel (admitted and not yet answered or cancelled)."""
        return rid.key in self.owned

    def release(self, rid: RequestId) -> None:
        """Free an id (its response was flushed, or it ended without one)."""
        self.owned.discard(rid.key)


# ---- admitted calls -----------------------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class InFlight:
    """One admitted call: its cancel scopes, where its output goes, and the calls it waits behind.

    Attributes:
        scope: Cancelled by the client (`notifications/cancelled`) or at shutdown: the call ends without a response.
        interruption: Cancelled when the server interrupts the call (a fence gave up waiting for it): the call's
            body answers with an error saying why (`interrupted`).
        before: The calls this one waits for (`wait_turn`): every earlier call for a fence, the last fence
            otherwise.
        fence_grace: How long a fence waits for the calls before it, before interrupting them.
    """

    channel: Channel
    rid: RequestId
    outlet: Outlet
    cancellable: bool
    before: list[InFlight]
    fence_grace: float = math.inf
    scope: anyio.CancelScope = dataclasses.field(default_factory=anyio.CancelScope)
    interruption: anyio.CancelScope = dataclasses.field(default_factory=anyio.CancelScope)
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    cancelled: bool = False
    interrupted: str | None = None

    def interrupt(self, reason: str) -> None:
        """Stop the call's work; its body answers with an error naming `reason`."""
        if self.interrupted is None:
            self.interrupted = reason
            self.interruption.cancel()

    async def wait_turn(self) -> None:
        """Wait until every call this one is fenced behind has finished.

        A fence waits at most `fence_grace` seconds, then interrupts the calls still running (a hung Lean request
        must not block every later call forever) and waits for them to stop.
        """
        with anyio.move_on_after(self.fence_grace):
            for call in self.before:
                await call.done.wait()
        for call in self.before:
            if not call.done.is_set():
                call.interrupt(f"interrupted after {self.fence_grace:g} s so that a stream-order fence could run")
        for call in self.before:
            await call.done.wait()


Work = Callable[[InFlight], Awaitable[dict[str, Any]]]
"""The body of an admitted call: its final result (already in the request's envelope)."""


class Dispatcher:
    """Admission, answers and the lifetime of requests, for every channel of one server (see the module doc)."""

    def __init__(self, tg: anyio.abc.TaskGroup, *, fence_grace: float = math.inf) -> None:
        """Run admitted calls in `tg`; a fence interrupts the calls before it after `fence_grace` seconds."""
        self._tg = tg
        self._fence_grace = fence_grace
        self._inflight: dict[InFlight, None] = {}
        self._last_fence: InFlight | None = None
        self._idle = anyio.Event()
        self._idle.set()
        self.closing = False

    @property
    def busy(self) -> bool:
        """Whether any admitted call is still running."""
        return bool(self._inflight)

    # -- answering
    @staticmethod
    def respond(
        channel: Channel,
        outlet: Outlet,
        rid: RequestId | None,
        result: Any = None,
        error: JsonRpcError | None = None,
        *,
        owned: bool = True,
    ) -> None:
        """Send a response; an owned id is released once it is flushed."""
        line = _jsonrpc.error_response(rid, error) if error is not None else _jsonrpc.response(rid, result)
        release = functools.partial(channel.release, rid) if rid is not None and owned else None
        outlet.respond(line, release)

    async def handle(
        self,
        channel: Channel,
        message: Message,
        outlet: Outlet,
        *,
        route: Route,
        notification: Callable[[Channel, Notification], None],
    ) -> None:
        """Handle one client message (see `McpServer.handle`)."""
        rid = message.id if isinstance(message, Request | Invalid) else None
        if rid is not None and channel.owns(rid):
            # A second message reusing an active id is ignored, even if malformed: answering it would create
            # two indistinguishable terminal responses.
            return
        if isinstance(message, Invalid):
            self.respond(channel, outlet, message.id, error=message.error, owned=False)  # never admitted
            return
        if isinstance(message, Notification):
            notification(channel, message)
            return
        channel.owned.add(message.id.key)
        try:
            if self.closing:
                raise invalid_request("MCP server is shutting down")
            if channel.closed:
                raise invalid_request("this MCP session has ended")
            result = await route(channel, message, outlet)
        except anyio.get_cancelled_exc_class():
            # The transport gave up on the request before it was answered or admitted (an HTTP client
            # disconnected while it waited): the id is free again.
            if message.id.key not in channel.calls and message.id.key not in channel.listens:
                channel.release(message.id)
            raise
        except Exception as exc:
            self.respond(channel, outlet, message.id, error=to_wire(exc))
        else:
            if result is not None:
                self.respond(channel, outlet, message.id, result)

    # -- calls
    def admit(
        self, channel: Channel, rid: RequestId, outlet: Outlet, work: Work, *, cancellable: bool, fence: bool
    ) -> None:
        """Run `work` as an admitted call with its own cancel scope; it owns the request's response.

        A fencing call waits for every call admitted before it; a call admitted after a fence waits for the
        fence to finish (a full stream-order fence, in admission order, across every channel). The work decides
        when to wait (`InFlight.wait_turn`), so it can validate input and report preparation first.
        """
        before: list[InFlight] = []
        if fence:
            before = list(self._inflight)
        elif self._last_fence is not None and not self._last_fence.done.is_set():
            before = [self._last_fence]
        call = InFlight(channel, rid, outlet, cancellable, before, self._fence_grace if fence else math.inf)
        if fence:
            self._last_fence = call
        self._inflight[call] = None
        channel.calls[rid.key] = call
        if self._idle.is_set():
            self._idle = anyio.Event()
        self._tg.start_soon(self._run, call, work)

    async def _run(self, call: InFlight, work: Work) -> None:
        result: dict[str, Any] | None = None
        error: JsonRpcError | None = None
        try:
            with call.scope:
                try:
                    result = await work(call)
                except Exception as exc:
                    error = to_wire(exc)
        finally:
            del self._inflight[call]
            del call.channel.calls[call.rid.key]
            if call.cancelled or (result is None and error is None):
                call.channel.release(call.rid)
                call.outlet.abandon()
            else:
                self.respond(call.channel, call.outlet, call.rid, result, error)
            call.done.set()
            if not self._inflight:
                self._idle.set()

    def cancel(self, channel: Channel, rid: RequestId) -> None:
        """Cancel one call as `notifications/cancelled` does: it stops without a response.

        A call that is not cancellable (a fence), finished calls and unknown ids are left alone.
        """
        call = channel.calls.get(rid.key)
        if call is not None and call.cancellable:
            call.cancelled = True
            call.scope.cancel()

    async def drain(self, grace: float) -> None:
        """Shutdown: refuse new requests, cancel cooperative calls, give fences `grace` seconds, then stop all."""
        self.closing = True
        for call in list(self._inflight):
            if call.cancellable:
                call.cancelled = True
                call.scope.cancel()
        with anyio.move_on_after(grace):
            await self._idle.wait()
        # A fence stuck past the grace period (a hung Lean server) must not keep the process alive.
        for call in list(self._inflight):
            call.cancelled = True
            call.scope.cancel()
        await self._idle.wait()
