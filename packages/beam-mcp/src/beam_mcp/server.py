"""The MCP coordinator: protocol families, request admission, tool dispatch, cancellation and ordering.

`McpServer` consumes client messages and produces output messages. A transport hands it each message with
the `Channel` it arrived on and the `Outlet` its answer goes to: stdio has one channel and one outlet (the
serialized stdout writer, `receive`); Streamable HTTP has a channel per modern request or legacy session and
an outlet per HTTP response (`handle`). The server owns the protocol-family state machine of each channel
(undecided -> legacy or modern), request-id ownership (admission until terminal flush), the per-call cancel
scopes, the `lean_drop_workspace` fence (process-wide, in admission order), the broker's lifetime (opened in
the background at start, so `tools/list` does not pay for the import of the Lean stack when the client is
still handshaking), who may subscribe to diagnostics resources and how long a `subscriptions/listen` stream
lives, and shutdown. It must not contain Lean semantics (tool calls go to the broker,
`beam_broker.Broker.call`, or to beam-feedback; resources to `_resources`) nor know HTTP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import logging
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import anyio
import anyio.abc

from . import _jsonrpc, _resources
from .__about__ import __version__
from ._jsonrpc import Invalid, Notification, Request, RequestId
from ._notify import CallNotifier, Kinds
from ._protocol import (
    INSTRUCTIONS,
    LEGACY_VERSION,
    MISSING_MODERN_META,
    MODERN_VERSION,
    PUBLIC_CACHE_TTL_MS,
    RESOURCE_LIST_TTL_MS,
    RESOURCE_READ_TTL_MS,
    SERVER_NAME,
    SUPPORTED_MODERN_VERSIONS,
    ModernContext,
    capabilities,
    check_closed,
    check_level,
    decode_modern,
    has_modern_meta,
    modern_envelope,
    server_info,
)
from ._resources import MAX_LISTENS, MAX_SUBSCRIPTIONS, UPDATE_INTERVAL, Subscriber, UpdateHub
from ._tools import BEAM_FEEDBACK_REPORT, BEAM_STATS, BEAM_VERSION, DROP_WORKSPACE, Tool, ToolSet, local_tools
from .errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RUNTIME_SETUP_PREFIX,
    JsonRpcError,
    invalid_params,
    invalid_request,
    method_not_found,
)

if TYPE_CHECKING:
    from beam_broker import CallContext, OperationSpec

log = logging.getLogger("beam_mcp")

STATUS_DELAY_ENV: Final = "LEAN_BEAM_MCP_TEST_STATUS_DELAY_MS"
"""Overrides the 2 s `beam.status` delay (milliseconds; for tests)."""
DEFAULT_STATUS_DELAY: Final = 2.0
RUNTIME_SETUP_CODE: Final = "runtimeSetup"
SHUTDOWN_GRACE: Final = 30.0
"""Seconds EOF waits for admitted drops before cancelling them too."""

Family = Literal["undecided", "legacy", "modern"]
_Line = tuple[bytes, Callable[[], None] | None, Callable[[], bool] | None]
"""A queued output message: data, called once written (or dropped), and whether it is still to be written."""
_Key = tuple[str, str | int]


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


class _WriterOutlet:
    """The stdio outlet: every request's messages go to the one serialized writer, in order."""

    def __init__(self, enqueue: Callable[[bytes, Callable[[], None] | None, Callable[[], bool] | None], None]):
        self._enqueue = enqueue

    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        self._enqueue(data, on_flushed, live)

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        self._enqueue(data, on_flushed, None)

    def abandon(self) -> None:
        pass


def _dropped(data: bytes, on_flushed: Callable[[], None], live: Callable[[], bool]) -> None:
    on_flushed()


class Channel:
    """The per-stream protocol state: stdio, one modern HTTP request, or one legacy HTTP session.

    It holds what the protocol scopes to a stream: the selected family, the legacy lifecycle and log level, the
    request ids in use, the calls and listen streams by id (for cancellation), and the legacy subscriptions.
    Create one with `McpServer.channel`.

    Attributes:
        family: The selected protocol family.
        legacy_ready: Whether `notifications/initialized` arrived after a legacy `initialize`.
        log_level: The legacy minimum log level (`logging/setLevel`).
        closed: Whether `McpServer.close_channel` ended it.
    """

    def __init__(self, notify: _resources.Send, family: Family = "undecided") -> None:
        """Internal: use `McpServer.channel`."""
        self.family: Family = family
        self.legacy_ready = False
        self.log_level = "debug"
        self.closed = False
        self.notify = notify
        self.owned: set[_Key] = set()
        self.calls: dict[_Key, _Call] = {}
        self.listens: dict[_Key, tuple[Subscriber, Outlet]] = {}
        self.session_subscriber: Subscriber | None = None

    def owns(self, rid: RequestId) -> bool:
        """Whether `rid` is in use on this channel (admitted and not yet answered or cancelled)."""
        return rid.key in self.owned


class BrokerLike(Protocol):
    """What the server needs from `beam_broker.Broker` (tests substitute a fake)."""

    def operations(self) -> tuple[OperationSpec, ...]:
        """The implemented operations, in public tool order."""
        ...

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext | None = None) -> dict[str, Any]:
        """Run one operation and return its JSON result."""
        ...

    def stats(self) -> dict[str, Any]:
        """`beam_stats` data."""
        ...

    @property
    def active(self) -> bool:
        """Whether any workspace runtime exists."""
        ...

    async def runtime_snapshot(self, root: str) -> dict[str, Any] | None:
        """Stats and open files of a cached workspace, or None."""
        ...

    def open_documents(self) -> list[str]:
        """Canonical paths of the open source documents of every cached workspace, sorted."""
        ...

    def diagnostics(self, path: str) -> dict[str, Any]:
        """What the cache knows about one file's diagnostics (never triggers analysis)."""
        ...

    def add_diagnostics_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(canonical_path)` on every cache change; returns a function that removes it."""
        ...


BrokerFactory = Callable[[], contextlib.AbstractAsyncContextManager[BrokerLike]]


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Settings of one MCP server.

    Attributes:
        lean_cmd: Lean server command for every workspace (`--lean-cmd`); None: the broker's default.
        env: Environment for Lean processes; None: this process's.
        status_delay: Seconds before a slow call without a progress token emits its `beam.status` notice
            (None: 2 s, or `LEAN_BEAM_MCP_TEST_STATUS_DELAY_MS`).
        server_binary: Reported by `beam_version`.
        broker_factory: Opens the broker (tests pass a fake); None: `beam_broker.Broker.open`.
        shutdown_grace: Seconds EOF waits for admitted drops before cancelling them too.
        update_interval: Seconds between two `resources/updated` of one file for one subscriber while Lean is
            still elaborating it (updates on completion, failure or other changes are not delayed).
    """

    lean_cmd: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    status_delay: float | None = None
    server_binary: str | None = None
    broker_factory: BrokerFactory | None = None
    shutdown_grace: float = SHUTDOWN_GRACE
    update_interval: float = UPDATE_INTERVAL

    def delay(self) -> float:
        """The effective `beam.status` delay in seconds."""
        if self.status_delay is not None:
            return self.status_delay
        raw = os.environ.get(STATUS_DELAY_ENV)
        if raw and raw.isdigit():
            return int(raw) / 1000
        return DEFAULT_STATUS_DELAY


def _default_factory(config: ServerConfig) -> BrokerFactory:
    def factory() -> contextlib.AbstractAsyncContextManager[BrokerLike]:
        from beam_broker import Broker, BrokerConfig

        return Broker.open(BrokerConfig(lean_cmd=config.lean_cmd, env=config.env))

    return factory


def tool_result(structured: Any, *, is_error: bool = False) -> dict[str, Any]:
    """A `CallToolResult`: `structuredContent` plus the same JSON in `content[0].text`."""
    if not isinstance(structured, dict):
        structured = {"result": structured}
    return {
        "content": [{"type": "text", "text": _jsonrpc.dumps(structured)}],
        "structuredContent": structured,
        "isError": is_error,
    }


def tool_error(code: str, message: str, data: Any = None) -> dict[str, Any]:
    """A tool error result `{code, message, data?}` with `isError: true`."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return tool_result(error, is_error=True)


@dataclasses.dataclass(eq=False)
class _Call:
    """One admitted `tools/call`."""

    rid: RequestId
    tool: Tool
    arguments: dict[str, Any]
    token: Any
    modern: ModernContext | None
    scope: anyio.CancelScope
    waits: list[anyio.Event]
    channel: Channel
    outlet: Outlet
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    cancelled: bool = False


class McpServer:
    """The MCP server of one process: the broker, tools, calls and subscriptions of every channel (use `open`)."""

    def __init__(self, config: ServerConfig, write: Callable[[bytes], Awaitable[None]] | None, tg: anyio.abc.TaskGroup):
        """Internal: use `McpServer.open`."""
        self.config = config
        self._tg = tg
        self._factory = config.broker_factory or _default_factory(config)
        self._out_send, self._out_recv = anyio.create_memory_object_stream[_Line](math.inf)
        self._output_open = True
        # the stdio channel (when there is a writer)
        self._stdio = Channel(self._enqueue) if write is not None else None
        self._stdio_outlet = _WriterOutlet(self._enqueue)
        # requests, across channels (the drop fence and shutdown are process-wide)
        self._calls: dict[_Call, None] = {}
        self._last_drop: anyio.Event | None = None
        self._closing = False
        self._idle = anyio.Event()
        self._idle.set()
        # broker
        self._broker: BrokerLike | None = None
        self._broker_error: BaseException | None = None
        self._broker_ready = anyio.Event()
        self._registry_ready = anyio.Event()
        self._broker_stop = anyio.Event()
        self._broker_stopped = anyio.Event()
        self._tools: ToolSet | None = None
        # resources
        self._hub = UpdateHub(self._diagnostics, config.update_interval)
        self._listens: dict[Subscriber, tuple[Channel, _Key, Outlet]] = {}

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, config: ServerConfig, write: Callable[[bytes], Awaitable[None]] | None = None
    ) -> AsyncIterator[McpServer]:
        """Start the writer (with `write`) and the broker; leaving the block is EOF.

        At EOF in-flight calls are cancelled and drained, drops complete, Lean shuts down, output is flushed.

        Args:
            config: Server settings.
            write: Writes one encoded message line (newline included) and flushes it: the stdio channel that
                `receive` serves. None for a transport that only uses `channel` and `handle` (HTTP).
        """
        async with anyio.create_task_group() as tg:
            server = cls(config, write, tg)
            if write is not None:
                tg.start_soon(server._writer, write)
            else:
                server._out_recv.close()  # no stdio channel: nothing is ever queued for a writer
            tg.start_soon(server._host_broker)
            tg.start_soon(server._hub.run)
            try:
                yield server
            finally:
                with anyio.CancelScope(shield=True):
                    await server.shutdown()

    # ---- channels -----------------------------------------------------------------------------------
    def channel(self, *, notify: _resources.Send | None = None, family: Family = "undecided") -> Channel:
        """A new channel for a transport that carries more than one stream (HTTP).

        Args:
            notify: Where messages that belong to no request go (a legacy session's `resources/updated`); None
                drops them.
            family: The family the transport already selected (a modern HTTP request is modern from the start).
        """
        return Channel(notify or _dropped, family)

    def cancel(self, channel: Channel, rid: RequestId) -> None:
        """Cancel one request of `channel` as `notifications/cancelled` does.

        A cooperative call stops without a response; a listen stream ends without a result and frees its id. A
        drop (not cancellable), finished requests and unknown ids are left alone.
        """
        call = channel.calls.get(rid.key)
        if call is not None and call.tool.cancellable:
            call.cancelled = True
            call.scope.cancel()
        listen = channel.listens.pop(rid.key, None)
        if listen is not None:
            subscriber, outlet = listen
            # The client ended its stream: nothing more is sent for it (not even a result), and the id is free.
            self._hub.close(subscriber)
            self._listens.pop(subscriber, None)
            channel.owned.discard(rid.key)
            outlet.abandon()

    def close_channel(self, channel: Channel) -> None:
        """End a channel (an expired or deleted HTTP session): cancel its requests, end its subscriptions.

        An admitted drop still completes. Idempotent.
        """
        channel.closed = True
        for call in list(channel.calls.values()):
            self.cancel(channel, call.rid)
        for subscriber, _ in list(channel.listens.values()):
            assert subscriber.subscription_id is not None
            self.cancel(channel, subscriber.subscription_id)
        if channel.session_subscriber is not None:
            self._hub.close(channel.session_subscriber)
            channel.session_subscriber = None

    # ---- output -------------------------------------------------------------------------------------
    def _enqueue(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        """Queue one message for the writer; it is skipped if `live()` is false when its turn comes."""
        try:
            self._out_send.send_nowait((data, on_flushed, live))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if on_flushed is not None:
                on_flushed()

    async def _writer(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        async with self._out_recv:
            async for data, on_flushed, live in self._out_recv:
                if self._output_open and (live is None or live()):
                    try:
                        await write(data + b"\n")
                    except OSError:
                        # The client closed our stdout: keep serving quietly until EOF on stdin.
                        self._output_open = False
                if on_flushed is not None:
                    on_flushed()

    def _respond(
        self,
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
        release = functools.partial(channel.owned.discard, rid.key) if rid is not None and owned else None
        outlet.respond(line, release)

    # ---- broker -------------------------------------------------------------------------------------
    async def _host_broker(self) -> None:
        try:
            if self.config.broker_factory is None:
                # Imports take a moment, so they run off the event loop (discovery and initialize are answered
                # meanwhile), in two steps: the light registry first, which is all tools/list needs, then the
                # Lean client stack behind the runtime. tools/list waits for the first step rather than
                # importing beam_broker itself: a package must never be initialized by two threads at once.
                await anyio.to_thread.run_sync(importlib.import_module, "beam_broker.operations")
                self._registry_ready.set()
                await anyio.to_thread.run_sync(importlib.import_module, "beam_broker.runtime")
            async with self._factory() as broker:
                self._broker = broker
                self._broker_ready.set()
                remove = broker.add_diagnostics_listener(self._hub.changed)
                try:
                    self._hub.recheck()  # for subscriptions recorded while the broker was loading
                    await self._broker_stop.wait()
                finally:
                    remove()
        except Exception as exc:
            log.exception("could not open the Beam broker")
            self._broker_error = exc
        finally:
            self._broker = None
            self._registry_ready.set()
            self._broker_ready.set()
            self._broker_stopped.set()

    async def broker(self) -> BrokerLike:
        """The broker, once open.

        Raises:
            JsonRpcError: `-32603` when it could not be opened.
        """
        await self._broker_ready.wait()
        if self._broker is None:
            raise JsonRpcError(INTERNAL_ERROR, f"the Beam broker is unavailable: {self._broker_error!r}")
        return self._broker

    async def tools(self) -> ToolSet:
        """The tool set (built once, from the broker's implemented operations)."""
        if self._tools is None:
            if self.config.broker_factory is None:
                # The registry is light (no Lean stack): tools/list need not wait for the broker to load.
                await self._registry_ready.wait()
                from beam_broker.operations import implemented

                operations = implemented()
            else:
                operations = (await self.broker()).operations()
            if self._tools is None:
                self._tools = ToolSet.build(operations)
        return self._tools

    def _resource_broker(self) -> BrokerLike | None:
        """The broker for a resource request, None while it is still loading (no workspace can exist yet).

        Resource requests never wait for the broker and never start Lean.

        Raises:
            JsonRpcError: `-32603` when it could not be opened.
        """
        if not self._broker_ready.is_set():
            return None
        if self._broker is None:
            raise JsonRpcError(INTERNAL_ERROR, f"the Beam broker is unavailable: {self._broker_error!r}")
        return self._broker

    def _diagnostics(self, path: str) -> dict[str, Any]:
        broker = self._broker
        return broker.diagnostics(path) if broker is not None else _resources.untracked(path)

    # ---- input --------------------------------------------------------------------------------------
    def _stdio_channel(self) -> Channel:
        if self._stdio is None:
            raise RuntimeError("this McpServer was opened without a writer: use channel() and handle()")
        return self._stdio

    async def receive(self, line: bytes) -> None:
        """Handle one stdio input line (the reader calls this for every line, in order)."""
        line = _jsonrpc.strip_line(line)
        await self.handle(self._stdio_channel(), _jsonrpc.parse_line(line), self._stdio_outlet)

    def receive_oversized(self) -> None:
        """A stdio line over the transport's size limit was discarded."""
        error = JsonRpcError(PARSE_ERROR, "parse error: message too large")
        self._respond(self._stdio_channel(), self._stdio_outlet, None, error=error, owned=False)

    async def handle(self, channel: Channel, message: _jsonrpc.Message, outlet: Outlet) -> None:
        """Handle one client message that arrived on `channel`; its answer (if any) goes to `outlet`.

        Returns once the message is answered or, for a tool call or a listen stream, admitted: the rest of its
        output follows on `outlet`, which always ends with `respond` or `abandon`. A message whose id is in use
        on the channel is ignored (nothing is sent to `outlet`); transports that cannot leave a request
        unanswered check `Channel.owns` first. Notifications send nothing.
        """
        rid = message.id if isinstance(message, Request | Invalid) else None
        if rid is not None and rid.key in channel.owned:
            # A second message reusing an active id is ignored, even if malformed: answering it would create
            # two indistinguishable terminal responses.
            return
        if isinstance(message, Invalid):
            # Never admitted, so its id is not ours to release.
            self._respond(channel, outlet, message.id, error=message.error, owned=False)
        elif isinstance(message, Notification):
            self._notification(channel, message)
        else:
            channel.owned.add(message.id.key)
            try:
                if self._closing:
                    raise invalid_request("MCP server is shutting down")
                result = await self._request(channel, message, outlet)
            except JsonRpcError as exc:
                self._respond(channel, outlet, message.id, error=exc)
            except anyio.get_cancelled_exc_class():
                # The transport gave up on the request before it was answered or admitted (an HTTP client
                # disconnected while it waited for the broker): the id is free again.
                if message.id.key not in channel.calls and message.id.key not in channel.listens:
                    channel.owned.discard(message.id.key)
                raise
            except Exception as exc:
                log.exception("internal error handling %s", message.method)
                error = JsonRpcError(INTERNAL_ERROR, f"internal error: {exc}")
                self._respond(channel, outlet, message.id, error=error)
            else:
                if result is not None:
                    self._respond(channel, outlet, message.id, result)

    def _notification(self, channel: Channel, note: Notification) -> None:
        if note.method == "notifications/initialized":
            params = note.params if note.has_params else {}
            if isinstance(params, dict) and set(params) <= {"_meta"} and channel.family == "legacy":
                channel.legacy_ready = True
        elif note.method == "notifications/cancelled":
            params = note.params
            if not isinstance(params, dict) or not set(params) <= {"requestId", "reason", "_meta"}:
                return
            rid = _jsonrpc.decode_id(params.get("requestId"))
            if rid is not None:
                self.cancel(channel, rid)
        # Other notifications are ignored.

    # ---- requests -----------------------------------------------------------------------------------
    @staticmethod
    def _conflict(channel: Channel, requested: str) -> JsonRpcError:
        return invalid_request(
            f"MCP transport already selected the {channel.family} protocol family; {requested} traffic is not allowed"
        )

    async def _request(self, channel: Channel, req: Request, outlet: Outlet) -> dict[str, Any] | None:
        """Answer one request; None means a call task or a listen stream owns the response."""
        if channel.closed:
            raise invalid_request("this MCP session has ended")
        params = req.params if req.has_params else None
        if req.method == "server/discover" or has_modern_meta(params):
            ctx = decode_modern(params)
            if channel.family == "legacy":
                raise self._conflict(channel, "modern")
            return await self._modern(channel, req, params, ctx, outlet)
        if req.method == "initialize":
            return self._initialize(channel, params)
        if channel.family == "modern":
            raise invalid_params(MISSING_MODERN_META)
        return await self._legacy(channel, req, params, outlet)

    def _initialize(self, channel: Channel, params: Any) -> dict[str, Any]:
        if channel.family == "modern":
            raise self._conflict(channel, "legacy")
        if channel.family == "legacy":
            raise invalid_request("initialize has already completed")
        allowed = frozenset({"protocolVersion", "capabilities", "clientInfo", "_meta"})
        p = check_closed(params, allowed, "initialize", required=True)
        if not isinstance(p.get("protocolVersion"), str):
            raise invalid_params("initialize requires a protocolVersion string")
        if not isinstance(p.get("capabilities"), dict):
            raise invalid_params("initialize requires a capabilities object")
        info = p.get("clientInfo")
        if not (isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)):
            raise invalid_params("initialize requires clientInfo with string name and version")
        channel.family = "legacy"
        channel.legacy_ready = False
        return {"protocolVersion": LEGACY_VERSION, "capabilities": capabilities(), "serverInfo": server_info()}

    @staticmethod
    def _admit_legacy_operation(channel: Channel) -> None:
        if channel.family == "undecided":
            raise invalid_request("initialize must complete before MCP operation requests")
        if not channel.legacy_ready:
            raise invalid_request("notifications/initialized is required before MCP operation requests")

    async def _legacy(self, channel: Channel, req: Request, params: Any, outlet: Outlet) -> dict[str, Any] | None:
        method = req.method
        if method == "ping":
            self._admit_legacy_operation(channel)
            check_closed(params, frozenset({"_meta"}), "ping")
            return {}
        if method == "logging/setLevel":
            if channel.family == "undecided":
                raise invalid_request("initialize must complete before MCP logging requests")
            p = check_closed(params, frozenset({"level", "_meta"}), "logging/setLevel", required=True)
            channel.log_level = check_level(p.get("level"))
            return {}
        if method == "tools/list":
            self._admit_legacy_operation(channel)
            return {"tools": await self._list_tools(params)}
        if method == "tools/call":
            self._admit_legacy_operation(channel)
            await self._start_call(channel, req, params, None, outlet)
            return None
        if method == "resources/list":
            self._admit_legacy_operation(channel)
            return self._list_resources(params)
        if method == "resources/read":
            self._admit_legacy_operation(channel)
            return self._read_resource(params)
        if method == "resources/subscribe":
            self._admit_legacy_operation(channel)
            self._subscribe(channel, req, params, outlet)
            return None
        if method == "resources/unsubscribe":
            self._admit_legacy_operation(channel)
            self._unsubscribe(channel, params)
            return {}
        if channel.family == "undecided":
            raise invalid_request("initialize must be the first MCP operation")
        raise method_not_found(method)

    async def _modern(
        self, channel: Channel, req: Request, params: Any, ctx: ModernContext, outlet: Outlet
    ) -> dict[str, Any] | None:
        method = req.method
        if method == "server/discover":
            check_closed(params, frozenset({"_meta"}), "server/discover", required=True)
            return modern_envelope(
                {
                    "supportedVersions": list(SUPPORTED_MODERN_VERSIONS),
                    "capabilities": capabilities(),
                    "instructions": INSTRUCTIONS,
                    "ttlMs": PUBLIC_CACHE_TTL_MS,
                    "cacheScope": "public",
                }
            )
        if method == "tools/list":
            channel.family = "modern"
            tools = await self._list_tools(params)
            return modern_envelope({"tools": tools, "ttlMs": PUBLIC_CACHE_TTL_MS, "cacheScope": "public"})
        if method == "tools/call":
            channel.family = "modern"
            await self._start_call(channel, req, params, ctx, outlet)
            return None
        if method == "resources/list":
            channel.family = "modern"
            page = self._list_resources(params)
            return modern_envelope({**page, "ttlMs": RESOURCE_LIST_TTL_MS, "cacheScope": "private"})
        if method == "resources/read":
            channel.family = "modern"
            read = self._read_resource(params)
            return modern_envelope({**read, "ttlMs": RESOURCE_READ_TTL_MS, "cacheScope": "private"})
        if method == "subscriptions/listen":
            channel.family = "modern"
            self._listen(channel, req, params, outlet)
            return None
        if method in ("initialize", "ping", "logging/setLevel"):
            raise JsonRpcError(METHOD_NOT_FOUND, f"{method} is not part of MCP {MODERN_VERSION}")
        if method in ("resources/subscribe", "resources/unsubscribe"):
            message = f"{method} is not part of MCP {MODERN_VERSION}: use subscriptions/listen"
            raise JsonRpcError(METHOD_NOT_FOUND, message)
        raise method_not_found(method)

    async def _list_tools(self, params: Any) -> list[dict[str, Any]]:
        p = check_closed(params, frozenset({"cursor", "_meta"}), "tools/list")
        if "cursor" in p:
            raise invalid_params("tools/list is not paginated: cursor is not supported")
        return (await self.tools()).descriptors()

    # ---- resources ----------------------------------------------------------------------------------
    def _list_resources(self, params: Any) -> dict[str, Any]:
        p = check_closed(params, frozenset({"cursor", "_meta"}), "resources/list")
        broker = self._resource_broker()
        return _resources.list_page(broker.open_documents() if broker is not None else [], p)

    def _read_resource(self, params: Any) -> dict[str, Any]:
        p = check_closed(
            params, frozenset({"uri", "inputResponses", "requestState", "_meta"}), "resources/read", required=True
        )
        if "inputResponses" in p or "requestState" in p:
            raise invalid_params(
                "resources/read does not accept inputResponses or requestState: Beam never returns an "
                "input_required result, so there is no multi round-trip request to continue"
            )
        uri = self._uri(p, "resources/read")
        path = _resources.canonical(_resources.uri_to_path(uri))
        broker = self._resource_broker()
        snapshot = broker.diagnostics(path) if broker is not None else _resources.untracked(path)
        return _resources.contents(uri, _resources.payload(snapshot))

    @staticmethod
    def _uri(params: Mapping[str, Any], what: str) -> str:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise invalid_params(f"{what} requires a uri string")
        return uri

    def _subscribe(self, channel: Channel, req: Request, params: Any, outlet: Outlet) -> None:
        p = check_closed(params, frozenset({"uri", "_meta"}), "resources/subscribe", required=True)
        uri = self._uri(p, "resources/subscribe")
        path = _resources.canonical(_resources.uri_to_path(uri))
        self._resource_broker()  # a broken broker is an error here too
        subscriber = channel.session_subscriber
        if subscriber is None:
            subscriber = channel.session_subscriber = Subscriber(channel.notify)
        if uri not in subscriber.aliases and subscriber.count >= MAX_SUBSCRIPTIONS:
            raise JsonRpcError(
                INVALID_REQUEST,
                f"resources/subscribe: a session holds at most {MAX_SUBSCRIPTIONS} subscriptions",
                {"limit": MAX_SUBSCRIPTIONS},
            )
        # Record, then check: a change after this point is reported; one before it is in the replay.
        replay = self._hub.subscribe(subscriber, path, uri)
        self._respond(channel, outlet, req.id, {})
        if replay:
            self._hub.replay(subscriber, path, uri)

    def _unsubscribe(self, channel: Channel, params: Any) -> None:
        p = check_closed(params, frozenset({"uri", "_meta"}), "resources/unsubscribe", required=True)
        uri = self._uri(p, "resources/unsubscribe")
        subscriber = channel.session_subscriber
        if subscriber is None:
            _resources.uri_to_path(uri)  # only malformed URIs are errors
        else:
            self._hub.unsubscribe(subscriber, uri)

    def _listen(self, channel: Channel, req: Request, params: Any, outlet: Outlet) -> None:
        """Open a `subscriptions/listen` stream: acknowledge, replay, then updates until it is cancelled.

        Only `resourceSubscriptions` is honoured (the tool and resource lists never change). A stream that
        honours nothing is closed gracefully at once: its final result follows the acknowledgement.
        """
        p = check_closed(params, frozenset({"notifications", "_meta"}), "subscriptions/listen", required=True)
        wanted = p.get("notifications")
        if not isinstance(wanted, dict):
            raise invalid_params("subscriptions/listen requires a notifications object")
        for flag in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
            if flag in wanted and not isinstance(wanted[flag], bool):
                raise invalid_params(f"subscriptions/listen notifications.{flag} must be a boolean")
        uris = wanted.get("resourceSubscriptions", [])
        if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
            raise invalid_params("subscriptions/listen notifications.resourceSubscriptions must be an array of URIs")
        uris = list(dict.fromkeys(uris))
        if len(uris) > MAX_SUBSCRIPTIONS:
            raise invalid_params(
                f"subscriptions/listen names at most {MAX_SUBSCRIPTIONS} resources", {"limit": MAX_SUBSCRIPTIONS}
            )
        targets = [(_resources.canonical(_resources.uri_to_path(uri)), uri) for uri in uris]
        self._resource_broker()
        if targets and len(self._listens) >= MAX_LISTENS:
            raise JsonRpcError(
                INVALID_REQUEST,
                f"subscriptions/listen: at most {MAX_LISTENS} streams may be open; cancel one first",
                {"limit": MAX_LISTENS},
            )
        subscriber = Subscriber(outlet.message, req.id)
        replays = [(path, uri) for path, uri in targets if self._hub.subscribe(subscriber, path, uri)]
        honoured: dict[str, Any] = {"resourceSubscriptions": uris} if uris else {}
        ack = {"notifications": honoured, "_meta": subscriber.meta()}
        outlet.message(_jsonrpc.notification("notifications/subscriptions/acknowledged", ack), live=subscriber.live)
        if not targets:
            self._respond(channel, outlet, req.id, modern_envelope({"_meta": subscriber.meta()}))
            return
        channel.listens[req.id.key] = (subscriber, outlet)
        self._listens[subscriber] = (channel, req.id.key, outlet)
        for path, uri in replays:
            self._hub.replay(subscriber, path, uri)

    # ---- tools/call ---------------------------------------------------------------------------------
    async def _start_call(
        self, channel: Channel, req: Request, params: Any, ctx: ModernContext | None, outlet: Outlet
    ) -> None:
        p = check_closed(
            params,
            frozenset({"name", "arguments", "inputResponses", "requestState", "_meta"}),
            "tools/call",
            required=True,
        )
        if "inputResponses" in p or "requestState" in p:
            raise invalid_params(
                "tools/call does not accept inputResponses or requestState: Beam never returns an "
                "input_required result, so there is no multi round-trip request to continue"
            )
        name = p.get("name")
        if not isinstance(name, str):
            raise invalid_params("tools/call requires a tool name string")
        # The process tools work without the broker (beam_version must answer even when it cannot open).
        local = {tool.name: tool for tool in local_tools()}
        tool = local.get(name) or (await self.tools()).by_name.get(name)
        if tool is None:
            raise invalid_params(f"Unknown tool: {name}")
        arguments = p.get("arguments", {})
        if not isinstance(arguments, dict):
            raise invalid_params("tools/call arguments must be an object")
        meta = p.get("_meta") or {}
        token = meta.get("progressToken")
        if "progressToken" in meta and (isinstance(token, bool) or not isinstance(token, str | int | float)):
            raise invalid_params("_meta.progressToken must be a string or a number")
        call = _Call(req.id, tool, arguments, token, ctx, anyio.CancelScope(), [], channel, outlet)
        # The drop fence is fixed in admission order (stream order on stdio), across every channel.
        if tool.name == DROP_WORKSPACE:
            call.waits = [c.done for c in self._calls]
            self._last_drop = call.done
        elif self._last_drop is not None and not self._last_drop.is_set():
            call.waits = [self._last_drop]
        self._calls[call] = None
        channel.calls[req.id.key] = call
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._tg.start_soon(self._run_call, call)

    async def _run_call(self, call: _Call) -> None:
        notifier = self._notifier(call)
        line: bytes | None = None
        try:
            with call.scope:
                try:
                    result = await self._execute(call, notifier)
                    if call.modern is not None:
                        result = modern_envelope(result)
                    line = _jsonrpc.response(call.rid, result)
                except JsonRpcError as exc:
                    line = _jsonrpc.error_response(call.rid, exc)
                except Exception as exc:
                    log.exception("internal error in %s", call.tool.name)
                    line = _jsonrpc.error_response(call.rid, JsonRpcError(INTERNAL_ERROR, f"internal error: {exc}"))
        finally:
            notifier.close()
            del self._calls[call]
            del call.channel.calls[call.rid.key]
            if call.tool.name == DROP_WORKSPACE:
                self._hub.recheck()  # the broker does not report the files of a dropped workspace
            if line is None or call.cancelled:
                call.channel.owned.discard(call.rid.key)
                call.outlet.abandon()
            else:
                call.outlet.respond(line, functools.partial(call.channel.owned.discard, call.rid.key))
            call.done.set()
            if not self._calls:
                self._idle.set()

    def _notifier(self, call: _Call) -> CallNotifier:
        spec = call.tool.spec
        if spec is not None:
            from beam_broker import Progress

            kinds = Kinds(
                preparation=bool(spec.progress & Progress.PREPARATION),
                setup=bool(spec.progress & Progress.SETUP),
                file=bool(spec.progress & Progress.FILE),
            )
        else:
            kinds = Kinds(preparation=call.tool.name == BEAM_FEEDBACK_REPORT)
        modern, channel = call.modern, call.channel
        level: Callable[[], str | None] = (
            (lambda: modern.log_level) if modern is not None else (lambda: channel.log_level)
        )
        path = call.arguments.get("path")
        return CallNotifier(
            send=call.outlet.message,
            tool=call.tool.name,
            request_id=call.rid,
            token=call.token,
            path=path if isinstance(path, str) else None,
            kinds=kinds,
            log_level=level,
            status=call.tool.name not in (BEAM_VERSION, BEAM_STATS),
        )

    async def _watchdog(self, notifier: CallNotifier) -> None:
        await anyio.sleep(self.config.delay())
        notifier.status()

    async def _execute(self, call: _Call, notifier: CallNotifier) -> dict[str, Any]:
        tool = call.tool
        undeclared = sorted(k for k in call.arguments if k not in tool.properties)
        if undeclared:
            return tool_error(
                "invalidInput",
                f"{tool.name} accepts no undeclared input fields: {', '.join(undeclared)}",
                {"fields": undeclared},
            )
        if tool.name == DROP_WORKSPACE:
            return await self._drop(call, notifier)
        # Calls admitted after a drop wait for it (a full stream-order fence, process tools included).
        for event in call.waits:
            await event.wait()
        if tool.name == BEAM_VERSION:
            return tool_result(self._identity())
        if tool.name == BEAM_STATS:
            broker = self._broker
            return tool_result(broker.stats() if broker is not None else {"uptimeMs": 0, "workspaces": {}})
        if tool.name == BEAM_FEEDBACK_REPORT:
            return await self._watched(call, notifier, functools.partial(self._feedback, call, notifier))
        return await self._watched(call, notifier, functools.partial(self._operation, call, notifier))

    async def _watched(
        self, call: _Call, notifier: CallNotifier, work: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """Run `work` with the one-shot `beam.status` watchdog beside it."""
        # Modern requests without a log level get no logs, so their watchdog is not even started.
        if not notifier.status_enabled or (call.modern is not None and call.modern.log_level is None):
            return await work()
        result: dict[str, Any] = {}
        error: JsonRpcError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watchdog, notifier)
            try:
                result = await work()
            except JsonRpcError as exc:  # re-raised below, not wrapped in an exception group
                error = exc
            finally:
                tg.cancel_scope.cancel()
        if error is not None:
            raise error
        return result

    async def _operation(self, call: _Call, notifier: CallNotifier) -> dict[str, Any]:
        from beam_broker import BrokerError, CallContext

        assert call.tool.spec is not None
        broker = await self.broker()
        ctx = CallContext(emit=notifier.on_event, request_id=call.rid.value)
        try:
            return tool_result(await broker.call(call.tool.spec.name, call.arguments, ctx))
        except BrokerError as exc:
            if exc.code == RUNTIME_SETUP_CODE:
                message = exc.message
                if not message.startswith(RUNTIME_SETUP_PREFIX):
                    message = RUNTIME_SETUP_PREFIX + message
                raise JsonRpcError(INVALID_REQUEST, message, exc.data) from None
            return tool_result(exc.wire(), is_error=True)

    async def _drop(self, call: _Call, notifier: CallNotifier) -> dict[str, Any]:
        from beam_broker import BrokerError
        from beam_broker.workspace import resolve

        try:
            resolve(call.arguments.get("workspace"), for_drop=True)
        except BrokerError as exc:
            return tool_result(exc.wire(), is_error=True)
        # Emitted before waiting behind earlier requests; the broker's own preparation event is then a repeat.
        notifier.preparation("lean_drop_workspace: preparing workspace eviction")

        async def fenced() -> dict[str, Any]:
            for event in call.waits:
                await event.wait()
            return await self._operation(call, notifier)

        return await self._watched(call, notifier, fenced)

    async def _feedback(self, call: _Call, notifier: CallNotifier) -> dict[str, Any]:
        from beam_broker import BrokerError
        from beam_broker.workspace import resolve

        try:
            descriptor = resolve(call.arguments.get("workspace"))
        except BrokerError as exc:
            return tool_result(exc.wire(), is_error=True)
        confidential = call.arguments.get("confidential") is True
        notifier.preparation(
            "preparing confidential beam_feedback_report" if confidential else "collecting beam_feedback_report context"
        )
        from beam_feedback import FeedbackError, build_report

        snapshot = None
        broker = self._broker
        if not confidential and broker is not None:
            snapshot = await broker.runtime_snapshot(descriptor.root)
        identity: dict[str, Any] = {
            "name": SERVER_NAME,
            "version": __version__,
            "mcp_protocol": MODERN_VERSION,
            "runtime_active": bool(broker is not None and broker.active),
        }
        report = {**call.arguments, "workspace": {"root": descriptor.root}}
        build = functools.partial(
            build_report,
            report,
            runtime_stats=snapshot.get("stats") if snapshot else None,
            open_files=snapshot.get("open_files") if snapshot else None,
            identity=identity,
        )
        try:
            result = await anyio.to_thread.run_sync(build)
        except FeedbackError as exc:
            return tool_error(exc.code, exc.message)
        return tool_result(result.to_json())

    def _identity(self) -> dict[str, Any]:
        broker = self._broker
        out: dict[str, Any] = {
            "name": SERVER_NAME,
            "version": __version__,
            "mcp_protocol": MODERN_VERSION,
            "runtime_active": bool(broker is not None and broker.active),
        }
        if self.config.server_binary:
            out["server_binary"] = self.config.server_binary
        return out

    # ---- shutdown -----------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """EOF: refuse new requests, cancel cooperative calls, let drops finish, stop the broker, flush.

        Cancelled calls get no response; neither do open `subscriptions/listen` streams (an abrupt end). Idempotent.
        """
        self._closing = True
        self._hub.close_all()
        for channel, key, outlet in list(self._listens.values()):
            channel.listens.pop(key, None)
            channel.owned.discard(key)
            outlet.abandon()
        self._listens.clear()
        for call in list(self._calls):
            if call.tool.cancellable:
                call.cancelled = True
                call.scope.cancel()
        with anyio.move_on_after(self.config.shutdown_grace):
            await self._idle.wait()
        # A drop stuck past the grace period (a hung Lean server) must not keep the process alive.
        for call in list(self._calls):
            call.cancelled = True
            call.scope.cancel()
        await self._idle.wait()
        self._broker_stop.set()
        await self._broker_stopped.wait()
        self._out_send.close()
