"""The MCP server: the protocol-family state machine and one method table per family.

`McpServer` consumes client messages and produces output messages. A transport hands it each message with
the `Channel` it arrived on and the `Outlet` its answer goes to: stdio has one channel and one outlet (the
serialized stdout writer, `receive`); Streamable HTTP has a channel per modern request or legacy session and
an outlet per HTTP response (`handle`). This module decides what a request means: which protocol family it
belongs to (undecided -> legacy or modern, per channel), whether the legacy lifecycle admits it, and which
method handler answers it (`LEGACY` and `MODERN` tables). The mechanics live elsewhere: ids, cancel scopes,
the fence and shutdown in `_dispatch`, params models in `_params`, tool calls in `_calls`, the broker's
lifetime in `_broker_host`, diagnostics resources in `_resources`. It must not contain Lean semantics nor know
HTTP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc

from beam_broker.operations import REGISTRY, Registry

from . import _jsonrpc, _resources, _subscriptions
from ._broker_host import BrokerHost
from ._calls import Calls, CallSettings
from ._dispatch import Channel, Dispatcher, Family, Outlet, StdioWriter
from ._jsonrpc import Notification, Request, RequestId
from ._params import CallParams, InitializeParams, ListenParams, ListParams, Params, ReadParams, SetLevelParams, parse
from ._protocol import (
    INSTRUCTIONS,
    LEGACY_VERSION,
    MISSING_MODERN_META,
    MODERN_VERSION,
    PUBLIC_CACHE_TTL_MS,
    RESOURCE_LIST_TTL_MS,
    RESOURCE_READ_TTL_MS,
    SUPPORTED_MODERN_VERSIONS,
    ModernContext,
    capabilities,
    decode_modern,
    has_modern_meta,
    modern_envelope,
    server_info,
)
from ._resources import ResourceMethods
from ._subscriptions import UpdateHub
from ._tools import CONTRACTS, SURFACES, Contract, Surface, ToolSet, feedback_tool
from .errors import PARSE_ERROR, JsonRpcError, invalid_params, invalid_request, method_not_found

__all__ = ["Channel", "McpServer", "Outlet", "ServerConfig"]

STATUS_DELAY_ENV: Final = "LEAN_BEAM_MCP_TEST_STATUS_DELAY_MS"
"""Overrides the 2 s `beam.status` delay (milliseconds; for tests)."""
DEFAULT_STATUS_DELAY: Final = 2.0
SHUTDOWN_GRACE: Final = 30.0
"""Seconds EOF waits for admitted drops before cancelling them too."""
FENCE_GRACE: Final = 120.0
"""Seconds a fence (`lean_drop_workspace`) waits for the calls admitted before it before interrupting them."""
INITIALIZE_WAIT: Final = 5.0
"""Seconds a legacy `initialize` waits at most for the Lean started at start-up (`ServerConfig.prewarm`): long enough
for an import and Lean's start on a loaded machine, short of the connection timeouts of MCP clients."""


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Settings of one MCP server.

    Attributes:
        lean_cmd: Lean server command for every workspace (`--lean-cmd`); None: the broker's default.
        env: Environment for Lean processes; None: this process's.
        status_delay: Seconds before a slow call without a progress token emits its `beam.status` notice
            (None: 2 s, or `LEAN_BEAM_MCP_TEST_STATUS_DELAY_MS`).
        server_binary: Reported by `beam_version`.
        shutdown_grace: Seconds EOF waits for admitted drops before cancelling them too.
        fence_grace: Seconds a fence waits for the calls admitted before it; calls still running then are
            interrupted (answered with a `requestCancelled` tool error) so that a hung call cannot block the
            fence, and every call after it, forever.
        update_interval: Seconds between two `resources/updated` of one file for one subscriber while Lean is
            still elaborating it (updates on completion, failure or other changes are not delayed).
        broker: More `beam_broker.BrokerConfig` settings (e.g. `mirrors_per_document`).
        tools: Which tools `tools/list` lists and `tools/call` serves (`--tools`): `all`, or `beam`, upstream Beam's
            24 tools exactly, for clients that want nothing else.
        contract: How Lean tools name a document state (`--contract`): `seed` (numeric versions; snapshot tokens
            beside them except on the `beam` surface) or `upstream-2026-11` (upstream Beam's 24 tools with
            snapshot tokens only; `tools` must then be `all` or `beam`).
        registry: The broker operations it serves (tests inject handlers by passing another).
        prewarm: On the `lean-lsp-mcp` surface, start the Lean server of the project known at start-up
            (`LEAN_PROJECT_PATH`, else the working directory when it is a project) as soon as the broker is open,
            beside the MCP handshake, rather than with the first call; a legacy `initialize` is then answered once
            that Lean answered its own handshake and the Lean stack is imported, or after `initialize_wait` seconds,
            whichever comes first.
        initialize_wait: The longest a legacy `initialize` waits for the prewarmed Lean (see `prewarm`).
    """

    lean_cmd: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    status_delay: float | None = None
    server_binary: str | None = None
    shutdown_grace: float = SHUTDOWN_GRACE
    fence_grace: float = FENCE_GRACE
    update_interval: float = _subscriptions.UPDATE_INTERVAL
    broker: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    tools: Surface = "all"
    contract: Contract = "seed"
    registry: Registry = REGISTRY
    prewarm: bool = True
    initialize_wait: float = INITIALIZE_WAIT

    def __post_init__(self) -> None:
        if self.tools not in SURFACES:
            raise ValueError(f"ServerConfig.tools must be one of {', '.join(SURFACES)}, not {self.tools!r}")
        if self.contract not in CONTRACTS:
            raise ValueError(f"ServerConfig.contract must be one of {', '.join(CONTRACTS)}, not {self.contract!r}")
        if self.contract != "seed" and self.tools == "lean-lsp-mcp":
            raise ValueError(f"ServerConfig.contract {self.contract} serves upstream Beam's tools, not lean-lsp-mcp's")

    def delay(self) -> float:
        """The effective `beam.status` delay in seconds."""
        if self.status_delay is not None:
            return self.status_delay
        raw = os.environ.get(STATUS_DELAY_ENV)
        if raw and raw.isdigit():
            return int(raw) / 1000
        return DEFAULT_STATUS_DELAY


@dataclasses.dataclass(frozen=True)
class Incoming:
    """One routed request: where it came from, its raw params, and its modern context (None: legacy)."""

    channel: Channel
    req: Request
    params: Any
    modern: ModernContext | None
    outlet: Outlet


Handler = Callable[["McpServer", Incoming], Awaitable["dict[str, Any] | None"]]
"""A method handler: the result, or None when a call or a stream owns the response."""


class McpServer:
    """The MCP server of one process: the broker, tools, calls and subscriptions of every channel (use `open`)."""

    def __init__(self, config: ServerConfig, tg: anyio.abc.TaskGroup, writer: StdioWriter | None) -> None:
        """Internal: use `McpServer.open`."""
        self.config = config
        self._writer = writer
        self._stdio = Channel(writer.notify, "undecided") if writer is not None else None
        self._dispatcher = Dispatcher(tg, fence_grace=config.fence_grace)
        self._hub = UpdateHub(self._document, config.update_interval)
        self._host = BrokerHost(
            lean_cmd=config.lean_cmd,
            env=config.env,
            on_change=self._hub.changed,
            on_open=self._opened,
            # lean-lsp-mcp keeps a scratch file open for lean_run_code; so does its drop-in (see `warm_scratch`)
            config={"warm_scratch": config.tools == "lean-lsp-mcp", **config.broker},
            registry=config.registry,
            prewarm=_compat_root if config.tools == "lean-lsp-mcp" and config.prewarm else None,
        )
        self._call_listeners: list[Callable[[str, str, float], None]] = []
        self.draining = False
        self._refusing = False  # the broker refuses new tool calls (`drain(refuse=True)`)
        self._toolset: ToolSet | None = None
        self._calls = Calls(self._dispatcher, self._host, self.tools, CallSettings(config.delay, config.server_binary))
        self._resources = ResourceMethods(self._hub, self._host.check)

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
            writer = StdioWriter() if write is not None else None
            server = cls(config, tg, writer)
            if writer is not None and write is not None:
                tg.start_soon(writer.run, write)
            tg.start_soon(server._run_host)
            tg.start_soon(server._calls.clock.run)
            tg.start_soon(server._hub.run)
            try:
                yield server
            finally:
                with anyio.CancelScope(shield=True):
                    await server.shutdown()

    async def _run_host(self) -> None:
        await self._host.run()

    def _opened(self) -> None:
        self._hub.recheck()  # subscriptions recorded while the broker was loading
        broker = self._host.current()
        if broker is not None:
            for listener in self._call_listeners:
                broker.add_call_listener(listener)
            if self._refusing:
                broker.drain()

    # ---- operations (a shared server: metrics, readiness, draining) -------------------------------------------
    def observe_calls(self, listener: Callable[[str, str, float], None]) -> None:
        """Call `listener(tool, outcome, seconds)` after every registry tool call (once the broker is open)."""
        self._call_listeners.append(listener)
        broker = self._host.current()
        if broker is not None:
            broker.add_call_listener(listener)

    @property
    def ready(self) -> bool:
        """Whether calls are taken now: the broker is open and the server is not draining or shutting down."""
        return self._host.current() is not None and not self.draining and not self._dispatcher.closing

    def drain(self, *, refuse: bool = True) -> None:
        """Drain: readiness, metrics and the status page say so; with `refuse`, the broker admits no tool call.

        A refused call fails with the broker's `busy` (`draining`): a tool result a balancer does not retry. So a
        transport that refuses new requests itself (HTTP answers 503, which a balancer retries elsewhere) drains
        with `refuse=False` first, and refuses at the broker only once the requests it admitted before the drain
        are answered: those must run, not fail. Calls the broker admitted go on either way.
        """
        self.draining = True
        if not refuse:
            return
        self._refusing = True
        broker = self._host.current()
        if broker is not None:
            broker.drain()

    def broker_status(self) -> dict[str, Any] | None:
        """The broker's `status()` (memory, calls, evictions, errors per workspace); None while it loads.

        Never waits and never starts anything.
        """
        broker = self._host.current()
        return broker.status() if broker is not None else None

    # ---- transports ---------------------------------------------------------------------------------------------
    def channel(self, *, notify: _subscriptions.Send | None = None, family: Family = "undecided") -> Channel:
        """A new channel for a transport that carries more than one stream (HTTP).

        Args:
            notify: Where messages that belong to no request go (a legacy session's `resources/updated`); None
                drops them.
            family: The family the transport already selected (a modern HTTP request is modern from the start).
        """
        return Channel(notify, family)

    async def handle(self, channel: Channel, message: _jsonrpc.Message, outlet: Outlet) -> None:
        """Handle one client message that arrived on `channel`; its answer (if any) goes to `outlet`.

        Returns once the message is answered or, for a tool call or a listen stream, admitted: the rest of its
        output follows on `outlet`, which always ends with `respond` or `abandon`. A message whose id is in use
        on the channel is ignored (nothing is sent to `outlet`); transports that cannot leave a request
        unanswered check `Channel.owns` first. Notifications send nothing.
        """
        await self._dispatcher.handle(channel, message, outlet, route=self._route, notification=self._notification)

    def cancel(self, channel: Channel, rid: RequestId) -> None:
        """Cancel one request of `channel` as `notifications/cancelled` does.

        A cooperative call stops without a response; a listen stream ends without a result and frees its id. A
        fence (not cancellable), finished requests and unknown ids are left alone.
        """
        self._dispatcher.cancel(channel, rid)
        self._resources.end_listen(channel, rid)

    def close_channel(self, channel: Channel) -> None:
        """End a channel (an expired or deleted HTTP session): cancel its requests, end its subscriptions.

        An admitted fence still completes. Idempotent.
        """
        channel.closed = True
        for call in list(channel.calls.values()):
            self.cancel(channel, call.rid)
        self._resources.close_channel(channel)

    def _stdio_channel(self) -> tuple[Channel, StdioWriter]:
        if self._stdio is None or self._writer is None:
            raise RuntimeError("this McpServer was opened without a writer: use channel() and handle()")
        return self._stdio, self._writer

    async def receive(self, line: bytes) -> None:
        """Handle one stdio input line (the reader calls this for every line, in order)."""
        channel, writer = self._stdio_channel()
        await self.handle(channel, _jsonrpc.parse_line(_jsonrpc.strip_line(line)), writer)

    def receive_oversized(self) -> None:
        """A stdio line over the transport's size limit was discarded."""
        channel, writer = self._stdio_channel()
        error = JsonRpcError(PARSE_ERROR, "parse error: message too large")
        self._dispatcher.respond(channel, writer, None, error=error, owned=False)

    # ---- shutdown -----------------------------------------------------------------------------------------------
    async def shutdown(self) -> None:
        """EOF: refuse new requests, cancel cooperative calls, let fences finish, stop the broker, flush.

        Cancelled calls get no response; neither do open `subscriptions/listen` streams (an abrupt end). Idempotent.
        """
        self._dispatcher.closing = True
        self._resources.close_all()
        await self._dispatcher.drain(self.config.shutdown_grace)
        self._calls.clock.close()
        await self._host.stop()
        if self._writer is not None:
            self._writer.close()

    def workspace_count(self) -> int:
        """How many workspace runtimes the broker holds now: 0 while it loads or if it could not open.

        Never waits and never starts anything (a health check may call it at any time).
        """
        broker = self._host.current()
        return broker.workspace_count if broker is not None else 0

    # ---- registry -----------------------------------------------------------------------------------------------
    async def tools(self) -> ToolSet:
        """The tool set of the configured surface (its schemas are built on first use, then kept)."""
        if self._toolset is None and self.config.tools == "lean-lsp-mcp":
            from ._compat import compat_tools  # lean-lsp-mcp's 22 tools, and no feedback tool to build for them

            compat = compat_tools()
            self._toolset = ToolSet(compat, {tool.name: tool for tool in compat})
        if self._toolset is None:
            from beam_feedback.models import FeedbackReport, FeedbackResult  # pydantic models: loaded when listed

            feedback = feedback_tool(FeedbackReport, FeedbackResult)
            self._toolset = ToolSet.build(
                self.config.registry, feedback, surface=self.config.tools, contract=self.config.contract
            )
        return self._toolset

    def _document(self, path: str) -> dict[str, Any]:
        broker = self._host.current()
        return _resources.payload(broker.diagnostics(path) if broker is not None else _resources.untracked(path))

    # ---- routing ------------------------------------------------------------------------------------------------
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

    @staticmethod
    def _conflict(channel: Channel, requested: str) -> JsonRpcError:
        return invalid_request(
            f"MCP transport already selected the {channel.family} protocol family; {requested} traffic is not allowed"
        )

    async def _route(self, channel: Channel, req: Request, outlet: Outlet) -> dict[str, Any] | None:
        """Answer one request; None means a call task or a listen stream owns the response."""
        params = req.params if req.has_params else None
        if req.method == "server/discover" or has_modern_meta(params):
            ctx = decode_modern(params)
            if channel.family == "legacy":
                raise self._conflict(channel, "modern")
            handler = MODERN.get(req.method)
            if handler is None:
                raise _modern_unknown(req.method)
            if req.method != "server/discover":
                channel.family = "modern"
            return await handler(self, Incoming(channel, req, params, ctx, outlet))
        if req.method == "initialize":
            return await self._initialize(channel, params)
        if channel.family == "modern":
            raise invalid_params(MISSING_MODERN_META)
        entry = LEGACY.get(req.method)
        if entry is None:
            if channel.family == "undecided":
                raise invalid_request("initialize must be the first MCP operation")
            raise method_not_found(req.method)
        gate, handler = entry
        gate(channel)
        return await handler(self, Incoming(channel, req, params, None, outlet))

    async def _initialize(self, channel: Channel, params: Any) -> dict[str, Any]:
        if channel.family == "modern":
            raise self._conflict(channel, "legacy")
        if channel.family == "legacy":
            raise invalid_request("initialize has already completed")
        parse(InitializeParams, params, "initialize")
        channel.family = "legacy"
        channel.legacy_ready = False
        if self._host.prewarms:
            # The surface that starts its project's Lean at start-up (`--tools lean-lsp-mcp`) answers once that Lean
            # answered its own handshake and the Lean stack is imported, as lean-lsp-mcp answers once its start-up
            # work is done: a call sent right after the handshake then waits for neither (nor competes with the
            # import for the interpreter). Bounded, so that a slow start (a toolchain being installed) never holds
            # the client's handshake for long.
            with anyio.move_on_after(self.config.initialize_wait):
                await self._host.started()
        return {"protocolVersion": LEGACY_VERSION, "capabilities": capabilities(), "serverInfo": server_info()}

    # ---- method handlers (shared by both families where the method exists in both) ----------------------------
    async def _discover(self, inc: Incoming) -> dict[str, Any]:
        parse(Params, inc.params, "server/discover")
        return modern_envelope(
            {
                "supportedVersions": list(SUPPORTED_MODERN_VERSIONS),
                "capabilities": capabilities(),
                "instructions": INSTRUCTIONS,
                "ttlMs": PUBLIC_CACHE_TTL_MS,
                "cacheScope": "public",
            }
        )

    async def _ping(self, inc: Incoming) -> dict[str, Any]:
        parse(Params, inc.params, "ping")
        return {}

    async def _set_level(self, inc: Incoming) -> dict[str, Any]:
        inc.channel.log_level = parse(SetLevelParams, inc.params, "logging/setLevel").level
        return {}

    async def _tools_list(self, inc: Incoming) -> dict[str, Any]:
        if parse(ListParams, inc.params, "tools/list").cursor is not None:
            raise invalid_params("tools/list is not paginated: cursor is not supported")
        tools = (await self.tools()).descriptors()
        return _cached({"tools": tools}, inc.modern, PUBLIC_CACHE_TTL_MS, "public")

    async def _tools_call(self, inc: Incoming) -> None:
        params = parse(CallParams, inc.params, "tools/call")
        await self._calls.start(inc.channel, inc.req, params, inc.modern, inc.outlet)

    async def _resources_list(self, inc: Incoming) -> dict[str, Any]:
        page = self._resources.list(parse(ListParams, inc.params, "resources/list"))
        return _cached(page, inc.modern, RESOURCE_LIST_TTL_MS, "private")

    async def _templates_list(self, inc: Incoming) -> dict[str, Any]:
        if parse(ListParams, inc.params, "resources/templates/list").cursor is not None:
            raise invalid_params("resources/templates/list is not paginated: cursor is not supported")
        return _cached({"resourceTemplates": _resources.templates()}, inc.modern, PUBLIC_CACHE_TTL_MS, "public")

    async def _resources_read(self, inc: Incoming) -> dict[str, Any]:
        read = self._resources.read(parse(ReadParams, inc.params, "resources/read"))
        return _cached(read, inc.modern, RESOURCE_READ_TTL_MS, "private")

    async def _subscribe(self, inc: Incoming) -> None:
        self._resources.subscribe(inc.channel, inc.req, inc.params, inc.outlet)

    async def _unsubscribe(self, inc: Incoming) -> dict[str, Any]:
        self._resources.unsubscribe(inc.channel, inc.params)
        return {}

    async def _listen(self, inc: Incoming) -> None:
        params = parse(ListenParams, inc.params, "subscriptions/listen")
        self._resources.listen(inc.channel, inc.req, params, inc.outlet)


def _compat_root() -> tuple[str, list[str]] | None:
    """The project the `lean-lsp-mcp` surface knows at start-up, and the files to elaborate there ahead of any call.

    Its projection reads this process's environment: `LEAN_PROJECT_PATH` and `LEAN_MCP_PREWARM_FILES`.
    """
    from ._compat._project import prewarm_files, startup_root  # the surface's modules load once the broker is open

    root = startup_root(os.environ, Path.cwd())
    return (str(root), prewarm_files(os.environ)) if root is not None else None


def _cached(result: dict[str, Any], modern: ModernContext | None, ttl_ms: int, scope: str) -> dict[str, Any]:
    """A legacy result as is; a modern one in its envelope with its cache hints."""
    if modern is None:
        return result
    return modern_envelope({**result, "ttlMs": ttl_ms, "cacheScope": scope})


# ---- lifecycle gates and method tables --------------------------------------------------------------------------
def _initialized(channel: Channel) -> None:
    """Pings: allowed once `initialize` completed (the lifecycle allows them before `initialized`, too)."""
    if channel.family == "undecided":
        raise invalid_request("initialize must complete before MCP operation requests")


def _initialized_session(channel: Channel) -> None:
    if channel.family == "undecided":
        raise invalid_request("initialize must complete before MCP logging requests")


def _operation(channel: Channel) -> None:
    if channel.family == "undecided":
        raise invalid_request("initialize must complete before MCP operation requests")
    if not channel.legacy_ready:
        raise invalid_request("notifications/initialized is required before MCP operation requests")


def _modern_unknown(method: str) -> JsonRpcError:
    if method in ("initialize", "ping", "logging/setLevel"):
        return JsonRpcError(method_not_found(method).code, f"{method} is not part of MCP {MODERN_VERSION}")
    if method in ("resources/subscribe", "resources/unsubscribe"):
        message = f"{method} is not part of MCP {MODERN_VERSION}: use subscriptions/listen"
        return JsonRpcError(method_not_found(method).code, message)
    return method_not_found(method)


LEGACY: Final[Mapping[str, tuple[Callable[[Channel], None], Handler]]] = {
    "ping": (_initialized, McpServer._ping),
    "logging/setLevel": (_initialized_session, McpServer._set_level),
    "tools/list": (_operation, McpServer._tools_list),
    "tools/call": (_operation, McpServer._tools_call),
    "resources/list": (_operation, McpServer._resources_list),
    "resources/templates/list": (_operation, McpServer._templates_list),
    "resources/read": (_operation, McpServer._resources_read),
    "resources/subscribe": (_operation, McpServer._subscribe),
    "resources/unsubscribe": (_operation, McpServer._unsubscribe),
}
"""MCP 2025-11-25 (after `initialize`, which selects the family): method -> (lifecycle gate, handler)."""

MODERN: Final[Mapping[str, Handler]] = {
    "server/discover": McpServer._discover,
    "tools/list": McpServer._tools_list,
    "tools/call": McpServer._tools_call,
    "resources/list": McpServer._resources_list,
    "resources/templates/list": McpServer._templates_list,
    "resources/read": McpServer._resources_read,
    "subscriptions/listen": McpServer._listen,
}
"""MCP 2026-07-28 (every request carries its own `_meta`): method -> handler."""
