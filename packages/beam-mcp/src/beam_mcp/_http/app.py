"""The Streamable HTTP endpoint as an ASGI application (starlette): MCP over `POST`, `GET` and `DELETE /mcp`.

This module owns what the endpoint does with a request: the admission rules in their documented order (the request
cap, the head size, HTTP/1, Host and Origin for every path, then the path, the bearer token, the method and the
media types; `GET /healthz` passes only the head size, HTTP/1, Host and Origin), routing a POST to a channel (a
fresh modern channel per MCP `2026-07-28` request, or a legacy `2025-11-25` session's channel), the header rules of
each revision (for a tool call, also the `Mcp-Param-*` headers its tool declares), how the messages of one request
become one answer (`application/json` when the response comes first, else `text/event-stream`; keepalive comments;
a closed connection cancels the request; listen and GET streams end at a jittered lease), the legacy GET stream and
DELETE, the operator's routes (`/healthz` liveness, `/readyz` readiness, `/metrics` and the status page `/`, the last
two behind the bearer token), draining (readiness false, new requests 503 with `Retry-After` but notifications such as
`notifications/cancelled` and DELETE taken, answers in progress finish up to a deadline) and stopping every answer at
shutdown. It must not know MCP semantics beyond routing (every message goes to `McpServer.handle`), nor run a server or
own sockets (`serve.py` does).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from beam_mcp import _jsonrpc
from beam_mcp._jsonrpc import Invalid, Notification, Request
from beam_mcp._protocol import LEGACY_VERSION, has_modern_meta
from beam_mcp._tools import PROCESS_TOOLS, ParamHeader
from beam_mcp.errors import JsonRpcError
from beam_mcp.server import Channel, McpServer

from .config import ENDPOINT, HEALTH, METRICS, READY, STATUS, HttpConfig
from .drain import Drain
from .health import health, readiness
from .intake import Intake
from .metrics import CONTENT_TYPE, Metrics
from .outlet import Discard, Item, Reply
from .rules import (
    Admission,
    Rejected,
    head_size,
    modern_header_error,
    not_found,
    param_header_error,
    starts_work,
    status_of,
    url_host,
)
from .sessions import Session, Sessions
from .status import page
from .wire import Closed, Wire


class Endpoint:
    """The MCP endpoint of one bound address: admission, routing to channels, sessions, answers.

    Attributes:
        url: The endpoint URL (with the bound port).
        sessions: The open legacy sessions.
        intake: The request bodies being received.
        active: Requests being answered (their body read).
        started: `time.monotonic()` when the endpoint was made (the health check's uptime).
    """

    def __init__(self, server: McpServer, config: HttpConfig, port: int) -> None:
        self.server = server
        self.config = config
        self.url = f"http://{url_host(config.host)}:{port}{ENDPOINT}"
        self.admission = Admission(config.host, port, config.allowed_hosts, config.allowed_origins, config.token)
        self.sessions = Sessions(server, config)
        self.intake = Intake(config.max_receiving, config.body_deadline)
        self.active = 0
        self.started = time.monotonic()
        self.metrics = Metrics(server)
        self._drain = Drain(config.drain_linger)
        self._closing = False
        self._answers: set[anyio.CancelScope] = set()

    def close(self) -> None:
        """Stop: new requests are refused (503), sessions end, every answer in progress is cut short.

        The ASGI server then closes the connections; the calls of cut answers are cancelled, except an admitted
        `lean_drop_workspace`, which the server lets complete.
        """
        self._closing = True
        self.sessions.end_all("closed at shutdown")
        for scope in list(self._answers):
            scope.cancel()

    @property
    def stopping(self) -> bool:
        """Whether `close` was called (new requests are refused; health checks answer 503)."""
        return self._closing

    async def drain_calls(self, deadline: float) -> None:
        """Stop taking requests and let the answers in progress finish, for at most `deadline` seconds.

        Readiness turns false at once (a balancer takes the replica out) and new requests to the endpoint are
        answered 503 with `Retry-After` (safe to retry elsewhere: nothing ran); a request admitted before the drain
        runs, even if its call reaches the broker after it (the broker refusing it would answer `busy`, a tool
        result no balancer retries). Listen and GET streams are not waited for. Once the answers in progress are
        done it lingers until no request has come for `config.drain_linger` seconds (the balancer has stopped
        sending, so no connection is reset unanswered when the socket closes); then the broker refuses whatever
        still reaches it, and `close` cuts what is left.
        """
        self.server.drain(refuse=False)
        await self._drain.run(deadline)
        self.server.drain()

    @property
    def draining(self) -> bool:
        """Whether a drain has begun (readiness is false; new requests are refused)."""
        return self._drain.draining

    # ---- admission ------------------------------------------------------------------------------------------
    def wire(self, scope: Scope, receive: Receive, send: Send) -> Wire:
        """The exchange of one request, its body read in this endpoint's intake."""
        return Wire(scope, receive, send, self.config, self.intake)

    def busy(self, *, starts_work: bool = True) -> Rejected | None:
        """Rule 0a: the 503 when the endpoint stops, drains (for a request that may start work) or is full.

        Full: `max_requests` are being answered. None when the request may go on.

        A drain still takes what starts no work (`starts_work` false: a notification, a DELETE): that is how
        clients help it finish, cancelling calls in flight and ending sessions.
        """
        if self._closing or self.draining:
            self._drain.requested()
            if self._closing or starts_work:
                return Rejected(
                    503, "this replica is shutting down; retry (elsewhere)", close=True, headers=[("retry-after", "1")]
                )
        if self.active >= self.config.max_requests:
            return Rejected(503, "too many requests in progress; retry later", close=True)
        return None

    async def admit(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """The rules every request passes before routing: the request cap, the head size, HTTP/1, Host, Origin.

        Health checks are exempt from the request cap: a replica busy answering is alive.
        """
        wire = self.wire(scope, receive, send)
        try:
            # Whether a POST to the endpoint starts work is known once its body is read (`serving` decides then).
            no_work = scope["path"] == ENDPOINT and scope["method"] in ("POST", "DELETE")
            busy = self.busy(starts_work=not no_work) if scope["path"] not in (HEALTH, READY, METRICS, STATUS) else None
            if busy is not None:
                await wire.reject(busy)
                return
            if head_size(scope["raw_path"], scope["query_string"], scope["headers"]) > self.config.max_head:
                await wire.reject(Rejected(431, "the request head is too large", close=True))
                return
            try:
                if scope.get("http_version", "1.1") not in ("1.0", "1.1"):
                    # hypercorn accepts HTTP/2 (prior knowledge); the endpoint's streams are specified over HTTP/1.1
                    raise Rejected(505, "only HTTP/1.1 is supported")
                self.admission.check_origin(Headers(scope=scope))
            except Rejected as rejected:
                await wire.discard_body()
                await wire.reject(rejected)
                return
        except Closed:
            return
        await app(scope, receive, send)

    @contextlib.contextmanager
    def serving(self, *, starts_work: bool = True) -> Iterator[None]:
        """A request being answered: it counts against `max_requests` from the end of its body to its answer's.

        Raises:
            Rejected: 503 when the cap was reached while its body arrived, or the endpoint drains or stops (a drain
                still takes a request that starts no work).
        """
        busy = self.busy(starts_work=starts_work)
        if busy is not None:
            raise busy
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request to the endpoint path."""
        wire = self.wire(scope, receive, send)
        headers = Headers(scope=scope)
        method = scope["method"]
        try:
            try:
                self.admission.check_token(headers)
                Admission.check_request(method, headers)
            except Rejected:
                await wire.discard_body()
                raise
            body = await wire.read_body()
            with self.serving(starts_work=not self.draining or starts_work(method, body)):
                if method == "POST":
                    await self.post(wire, headers, body)
                elif method == "GET":
                    await self.get(wire, headers)
                else:
                    await self.delete(wire, headers)
        except Rejected as rejected:
            await wire.reject(rejected)
        except Closed:
            pass  # the answer is cut short: the ASGI server closes the connection

    # ---- POST -----------------------------------------------------------------------------------------------
    async def post(self, wire: Wire, headers: Headers, body: bytes) -> None:
        """Rules 8 and 9 (one JSON-RPC message), then route it.

        A modern request, a message of a session, a notification without one (202), a new session, or refused.
        """
        try:
            decoded = _jsonrpc.decode(body)
        except JsonRpcError as exc:
            raise Rejected.of(exc) from None
        if isinstance(decoded, list):
            raise Rejected(400, "a POST body carries one JSON-RPC message; batches are not supported")
        message = _jsonrpc.classify(decoded)
        if isinstance(message, Invalid):
            raise Rejected.of(message.error, message.id.value if message.id is not None else None)
        params = message.params if message.has_params else None
        if isinstance(message, Request) and (message.method == "server/discover" or has_modern_meta(params)):
            await self.modern(wire, headers, message)
            return
        sid = headers.get("mcp-session-id")
        if sid is not None:
            await self.in_session(wire, headers, message, sid)
        elif isinstance(message, Notification):
            # Nothing to act on: a modern notification has no stream to cancel or initialize (a client cancels
            # by closing its response), and a legacy one belongs to a session.
            await wire.respond(202)
        elif message.method == "initialize":
            await self.initialize(wire, message)
        elif (headers.get("mcp-protocol-version") or LEGACY_VERSION) != LEGACY_VERSION:
            await self.modern(wire, headers, message)
        else:
            raise Rejected(
                400,
                "Mcp-Session-Id header required: start an MCP 2025-11-25 session with initialize, or send MCP "
                "2026-07-28 requests with their per-request _meta",
                rid=message.id.value,
            )

    async def modern(self, wire: Wire, headers: Headers, message: Request) -> None:
        """One stateless request: the header rules, then a fresh modern channel for it alone."""
        rejection = modern_header_error(headers, message)
        if rejection is None and message.method == "tools/call":
            params = message.params if isinstance(message.params, dict) else {}
            declared = await self.param_headers(params.get("name"))
            rejection = param_header_error(headers, declared, params.get("arguments"))
        if rejection is not None:
            raise Rejected.of(rejection, message.id.value)
        await self.exchange(wire, self.server.channel(family="modern"), message, modern=True)

    async def param_headers(self, tool: object) -> tuple[ParamHeader, ...]:
        """The `Mcp-Param-*` headers a tool declares; none for an unknown tool (the server answers it)."""
        if not isinstance(tool, str) or tool in PROCESS_TOOLS:  # these declare none, and need no registry
            return ()
        try:
            found = (await self.server.tools()).by_name.get(tool)
        except JsonRpcError:  # the registry could not load: the call itself is answered with this error
            return ()
        return found.param_headers if found is not None else ()

    async def initialize(self, wire: Wire, message: Request) -> None:
        """A new legacy session, registered when its `initialize` succeeds (429 beyond the cap)."""
        if self.sessions.full():
            raise Rejected(
                429,
                f"at most {self.config.max_sessions} MCP sessions may be open; end one with DELETE or let it expire",
                rid=message.id.value,
            )
        session = self.sessions.new()
        reply = Reply()
        await self.server.handle(session.channel, message, reply)  # answered at once
        item = reply.take()
        reply.close()
        assert item is not None and item.final
        headers: list[tuple[str, str]] = []
        if "result" in json.loads(item.data):
            self.sessions.add(session)
            headers.append(("mcp-session-id", session.id))
        else:
            self.sessions.discard(session)
        try:
            await wire.respond(200, item.data, headers)
        finally:
            item.flushed()

    def session(self, sid: str, rid: Any = None) -> Session:
        """The open session `sid`.

        Raises:
            Rejected: 404 when it is unknown, expired or ended.
        """
        session = self.sessions.get(sid)
        if session is None:
            raise Rejected(404, "unknown or expired MCP session: initialize a new one", rid=rid)
        return session

    async def in_session(self, wire: Wire, headers: Headers, message: Request | Notification, sid: str) -> None:
        """A message of a legacy session."""
        rid = message.id.value if isinstance(message, Request) else None
        session = self.session(sid, rid)
        version = headers.get("mcp-protocol-version")
        if version is not None and version != LEGACY_VERSION:
            raise Rejected(
                400, f"MCP-Protocol-Version {version!r} does not match this {LEGACY_VERSION} session", rid=rid
            )
        session.touch()
        if isinstance(message, Notification):
            await self.server.handle(session.channel, message, Discard())
            await wire.respond(202)
            return
        if session.channel.owns(message.id):
            raise Rejected(400, f"request id {message.id} is already in use in this session", rid=rid)
        session.active += 1
        try:
            await self.exchange(wire, session.channel, message, modern=False)
        finally:
            session.active -= 1
            session.touch()

    # ---- answers --------------------------------------------------------------------------------------------
    async def exchange(self, wire: Wire, channel: Channel, message: Request, *, modern: bool) -> None:
        """Hand one request to the server and write its messages as this answer.

        A closed connection, a stalled write, an expired listen lease or shutdown cuts the answer short and cancels
        a 2026-07-28 request; a 2025-11-25 session's request runs on (its answer lost) until it ends, is cancelled
        by `notifications/cancelled`, or its session ends.

        Raises:
            Closed: The answer was cut short.
        """
        reply = Reply()
        streams = message.method == "subscriptions/listen"
        lease = self.lease() if streams else math.inf
        finished = False
        # a drain waits for these answers, not for streams
        with contextlib.nullcontext() if streams else self._drain.answering():
            try:
                async with self.answering(wire):
                    await self.server.handle(channel, message, reply)
                    with anyio.move_on_after(lease):
                        finished = await self.write_reply(wire, reply, modern=modern)
                    if not finished and not wire.broken:  # the lease expired: the stream ends without a result
                        if not wire.started:
                            await wire.start_events()
                        await wire.end_events()
            finally:
                # 2026-07-28: closing the response stream is the cancellation. 2025-11-25: "Disconnection SHOULD NOT
                # be interpreted as the client cancelling its request" (it sends `notifications/cancelled`): the call
                # runs on, its answer dropped, until it ends or the session does (DELETE, expiry, shutdown).
                if not finished and modern:
                    self.server.cancel(channel, message.id)
                reply.close()
        if not wire.done:
            raise Closed

    @contextlib.asynccontextmanager
    async def answering(self, wire: Wire) -> AsyncIterator[None]:
        """The scope of one answer: cut short when the client leaves, a write fails, or at shutdown."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch, wire, tg.cancel_scope)
            self._answers.add(tg.cancel_scope)
            try:
                yield
            except Closed:
                pass  # a write failed or stalled: `wire.done` stays false
            finally:
                self._answers.discard(tg.cancel_scope)
                tg.cancel_scope.cancel()

    async def write_reply(self, wire: Wire, reply: Reply, *, modern: bool) -> bool:
        """Write one request's messages; True when its response (or its abandonment) was reached."""
        try:
            first = await reply.next(self.config.keepalive)
        except anyio.EndOfStream:
            await wire.start_events()  # abandoned before anything was sent: an empty stream
            await wire.end_events()
            return True
        if first is not None and first.final:
            status = 200
            if modern:
                error = json.loads(first.data).get("error")
                status = status_of(error["code"]) if isinstance(error, dict) else 200
            try:
                await wire.respond(status, first.data)
            finally:
                first.flushed()
            return True
        await wire.start_events()
        item = first
        while item is None or not item.final:
            await _write_item(wire, item)
            try:
                item = await reply.next(self.config.keepalive)
            except anyio.EndOfStream:
                await wire.end_events()
                return True
        await _write_item(wire, item)
        await wire.end_events()
        return True

    def lease(self) -> float:
        """A stream's lifetime: uniformly random within the configured bounds."""
        low, high = self.config.stream_lease
        return random.uniform(low, high)

    # ---- GET and DELETE (legacy sessions only) --------------------------------------------------------------
    async def get(self, wire: Wire, headers: Headers) -> None:
        """The GET stream of a legacy session: its `resources/updated` notifications, until the lease ends."""
        session = self.session(_session_id(headers, "GET"))
        if session.streaming:
            raise Rejected(409, "this MCP session already has an open GET stream")
        session.streaming = True
        try:
            async with self.answering(wire):
                await wire.start_events()
                with anyio.move_on_after(self.lease()):
                    await self.drain(wire, session.mailbox)
                if not wire.broken:
                    await wire.end_events()
        finally:
            session.streaming = False
            session.touch()
        if not wire.done:
            raise Closed

    async def drain(self, wire: Wire, mailbox: Reply) -> None:
        """Write a session's notifications until it ends (a message not written stays for the next GET)."""
        while True:
            try:
                item = await mailbox.next(self.config.keepalive)
            except anyio.EndOfStream:
                return  # the session ended
            await _write_item(wire, item)

    async def delete(self, wire: Wire, headers: Headers) -> None:
        """End a legacy session (204)."""
        self.sessions.end(self.session(_session_id(headers, "DELETE")), "deleted")
        await wire.respond(204)


async def _write_item(wire: Wire, item: Item | None) -> None:
    """One message as an event (skipped when no longer wanted), or a keepalive comment for silence."""
    if item is None:
        await wire.comment()
        return
    try:
        if item.wanted:
            await wire.event(item.data)
    finally:
        item.flushed()


async def _watch(wire: Wire, scope: anyio.CancelScope) -> None:
    await wire.wait_gone()
    scope.cancel()


def _session_id(headers: Headers, method: str) -> str:
    sid = headers.get("mcp-session-id")
    if sid is None:
        raise Rejected(
            405,
            f"{method} serves only MCP 2025-11-25 sessions (Mcp-Session-Id); MCP 2026-07-28 uses POST, "
            "and subscriptions/listen for updates",
            headers=[("allow", "POST")],
        )
    return sid


class _Probe:
    """A load balancer's `GET` probe: a status and a JSON body, never cached (ASGI app of a route; see `health.py`)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def answer(self) -> tuple[int, bytes]:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        wire = self.endpoint.wire(scope, receive, send)
        with contextlib.suppress(Closed):
            await wire.discard_body()
            if scope["method"] != "GET":
                await wire.reject(Rejected(405, f"method {scope['method']} is not allowed", headers=[("allow", "GET")]))
                return
            status, body = self.answer()
            await wire.respond(status, body, [("cache-control", "no-store")])


class _Health(_Probe):
    """`GET /healthz`: the replica's status."""

    def answer(self) -> tuple[int, bytes]:
        endpoint = self.endpoint
        return health(endpoint.server, endpoint.started, stopping=endpoint.stopping, draining=endpoint.draining)


class _Ready(_Probe):
    """`GET /readyz`: 200 while the replica takes calls; 503 while it starts, drains or stops."""

    def answer(self) -> tuple[int, bytes]:
        endpoint = self.endpoint
        ready = endpoint.server.ready and not endpoint.draining and not endpoint.stopping
        state = "ready" if ready else "stopping" if endpoint.stopping else "draining" if endpoint.draining else ""
        return readiness(state or "starting")


class _Operator:
    """`GET /metrics` (Prometheus text) and `GET /` (the status page): behind the bearer token when one is set."""

    def __init__(self, endpoint: Endpoint, what: str) -> None:
        self.endpoint = endpoint
        self.what = what

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoint
        wire = endpoint.wire(scope, receive, send)
        with contextlib.suppress(Closed):
            await wire.discard_body()
            try:
                if self.what == STATUS and scope["method"] != "GET":
                    raise not_found(scope["path"])  # a request meant for /mcp: point at it, as for any other path
                endpoint.admission.check_token(Headers(scope=scope))
                if scope["method"] != "GET":
                    raise Rejected(405, f"method {scope['method']} is not allowed", headers=[("allow", "GET")])
            except Rejected as rejected:
                await wire.reject(rejected)
                return
            if self.what == METRICS:
                body, kind = endpoint.metrics.render(), CONTENT_TYPE
            else:
                body, kind = page(endpoint.server, endpoint.metrics), "text/html; charset=utf-8"
            await wire.respond(200, body, [("content-type", kind), ("cache-control", "no-store")])


class _NotFound:
    """Rule 3: any path but the endpoint's is 404, answered once its body was read (ASGI app of a route)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        wire = self.endpoint.wire(scope, receive, send)
        with contextlib.suppress(Closed):
            await wire.discard_body()
            await wire.reject(not_found(scope["path"]))


class _Admit:
    """Pure ASGI middleware: every `http` request passes `Endpoint.admit` before routing."""

    def __init__(self, app: ASGIApp, endpoint: Endpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.endpoint.admit(scope, receive, send, self.app)
        else:
            await self.app(scope, receive, send)


def build_app(endpoint: Endpoint) -> Starlette:
    """The ASGI application of `endpoint`: admission middleware, `/mcp`, `/healthz`, a JSON-RPC 404 elsewhere."""
    return Starlette(
        routes=[
            Route(ENDPOINT, endpoint),
            Route(HEALTH, _Health(endpoint)),
            Route(READY, _Ready(endpoint)),
            Route(METRICS, _Operator(endpoint, METRICS)),
            Route(STATUS, _Operator(endpoint, STATUS)),
            Route("/{path:path}", _NotFound(endpoint)),
        ],
        middleware=[Middleware(_Admit, endpoint=endpoint)],
    )
