"""The Streamable HTTP transport: one MCP endpoint over HTTP/1.1 (h11 on anyio sockets).

This module owns HTTP: the listener and its connection limit, HTTP/1.1 framing (h11) and its timeouts (request
head, body stall, write stall), the endpoint's admission rules (Host, then Origin, path, method, Content-Type,
Accept, body size and shape), the MCP header rules of each revision (`MCP-Protocol-Version`, `Mcp-Method`,
`Mcp-Name`, `Mcp-Session-Id`), legacy `2025-11-25` sessions (creation, lookup, idle expiry, DELETE, the GET
stream), and how the messages of one request become one HTTP response: `application/json` when the response
comes first, else `text/event-stream` (a notification, or a keepalive after a silent while, came first). It also
bounds `subscriptions/listen` and GET streams with a jittered lease and turns a closed connection into the
cancellation of its request. It must not know MCP semantics beyond routing: every message goes to
`McpServer.handle` on a channel (a fresh modern channel per request, or the legacy session's channel).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import http
import json
import logging
import math
import random
import secrets
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio
import anyio.abc
import h11
from anyio.abc import SocketAttribute

from . import _jsonrpc
from ._jsonrpc import Invalid, Notification, Request
from ._protocol import (
    LEGACY_VERSION,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    MISSING_MODERN_META,
    has_modern_meta,
)
from .errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    JsonRpcError,
    invalid_params,
)
from .server import Channel, McpServer, ServerConfig

log = logging.getLogger("beam_mcp.http")

ENDPOINT: Final = "/mcp"
"""The one MCP endpoint path; every other path is 404."""
MAX_BODY: Final = 4 * 1024 * 1024
"""Largest accepted request body (bytes): 413 beyond it."""
MAX_HEAD: Final = 64 * 1024
"""Largest accepted request line plus headers (bytes): 431 beyond it."""
HEADER_TIMEOUT: Final = 30.0
"""Seconds a started request head may take to arrive (408 after it); an idle keep-alive connection is closed."""
BODY_TIMEOUT: Final = 30.0
"""Seconds a request body may stall without a byte (408 after it)."""
WRITE_TIMEOUT: Final = 30.0
"""Seconds one write may stall (the client stopped reading): the connection is closed and its request cancelled."""
MAX_CONNECTIONS: Final = 512
"""Open connections; one more is answered 503 and closed."""
MAX_SESSIONS: Final = 100
"""Legacy `2025-11-25` sessions; one more `initialize` is answered 429."""
SESSION_IDLE: Final = 300.0
"""Seconds a legacy session lives without a request in flight or an open GET stream."""
STREAM_LEASE: Final = (900.0, 1800.0)
"""A listen or GET stream ends, without a final result, after a uniformly random lifetime in this range (s)."""
LINGER: Final = 2.0
"""Seconds unread request bytes are drained after an error response that closes the connection (so the client
reads the response instead of a reset)."""
KEEPALIVE: Final = 15.0
"""Seconds of silence on a response before an SSE comment keeps it alive (and commits a silent call to SSE)."""

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
NAME_BEARING: Final = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
"""Methods whose `Mcp-Name` header mirrors a params field."""
_ROUTING_HEADERS: Final = ("mcp-protocol-version", "mcp-method", "mcp-name")
_B64_PREFIX: Final = "=?base64?"
_B64_SUFFIX: Final = "?="
_SSE_HEADERS: Final = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache, no-transform"),
    ("x-accel-buffering", "no"),
]


@dataclasses.dataclass(frozen=True)
class HttpConfig:
    """Settings of the Streamable HTTP transport (the defaults are the documented limits).

    Attributes:
        host: Address to bind. Keep it on loopback: the endpoint has no authentication.
        port: Port to bind; 0 picks a free one.
        allowed_hosts: More `Host` header names to accept (`name` for any port, `name:port` for one), beside
            the loopback names and the bound address.
        allowed_origins: More `Origin` values to accept (`scheme://host:port`), beside the loopback origins on
            the bound port.
        max_body: Largest request body in bytes (413).
        header_timeout: Seconds for a started request head (408).
        body_timeout: Seconds a request body may stall (408).
        write_timeout: Seconds one response write may stall before the connection is dropped.
        max_connections: Concurrently open connections (503 beyond).
        max_sessions: Legacy sessions (429 beyond).
        session_idle: Seconds an idle legacy session lives.
        stream_lease: Bounds of the random lifetime of a listen or GET stream (seconds).
        keepalive: Seconds of silence before an SSE keepalive comment.
    """

    host: str = "127.0.0.1"
    port: int = 0
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body: int = MAX_BODY
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    write_timeout: float = WRITE_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
    max_sessions: int = MAX_SESSIONS
    session_idle: float = SESSION_IDLE
    stream_lease: tuple[float, float] = STREAM_LEASE
    keepalive: float = KEEPALIVE


def url_host(host: str) -> str:
    """`host` as written in a URL or a `Host` header (IPv6 literals in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def split_host(value: str) -> tuple[str, str | None]:
    """A `Host` header (or allow-list entry) as (lowercased name, port or None); IPv6 names keep their brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        name, rest = value[: end + 1], value[end + 1 :]
        return name, rest[1:] if rest.startswith(":") else None
    name, colon, port = value.rpartition(":")
    if not colon or ":" in name:
        return value, None
    return name, port


def decode_header_value(value: str) -> str | None:
    """An MCP mirror header: plain printable ASCII, or `=?base64?<UTF-8 in base64>?=` (None when malformed)."""
    if value.startswith(_B64_PREFIX) and value.endswith(_B64_SUFFIX) and len(value) >= len(_B64_PREFIX + _B64_SUFFIX):
        payload = value[len(_B64_PREFIX) : -len(_B64_SUFFIX)]
        try:
            return base64.b64decode(payload, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def accepts(values: Sequence[str], media: str) -> bool:
    """Whether `Accept` header values admit `media` (`*/*` and `type/*` count; `q=0` excludes)."""
    kind = media.split("/", 1)[0]
    for part in ",".join(values).split(","):
        fields = part.split(";")
        media_range = fields[0].strip().lower()
        weight = 1.0
        for field in fields[1:]:
            key, _, number = field.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(number)
                except ValueError:
                    weight = 0.0
        if weight > 0 and media_range in (media, f"{kind}/*", "*/*"):
            return True
    return False


def status_of(error_code: int) -> int:
    """The HTTP status of a JSON-RPC error in the modern family (and of transport rejections)."""
    if error_code == METHOD_NOT_FOUND:
        return 404
    if error_code == INTERNAL_ERROR:
        return 500
    return 400


def _short(session_id: str) -> str:
    # Session ids are bearer tokens: logs only name them by a short hash.
    return hashlib.sha256(session_id.encode()).hexdigest()[:8]


def _error_body(code: int, message: str, rid: Any = None) -> bytes:
    return _jsonrpc.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}).encode()


def _canned(status: int, message: str) -> bytes:
    """A complete response written without h11 (before a request head was parsed), closing the connection."""
    body = _error_body(INVALID_REQUEST, message)
    phrase = http.HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Closed(Exception):
    """The connection is finished (the client left, a write stalled, or an error response closed it)."""


class _Rejected(Exception):
    """A request is answered with an HTTP error status and a JSON-RPC error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int = INVALID_REQUEST,
        rid: Any = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = _error_body(code, message, rid)
        self.headers = list(headers)

    @classmethod
    def of(cls, error: JsonRpcError, rid: Any = None) -> _Rejected:
        rejected = cls(status_of(error.code), error.message, code=error.code, rid=rid)
        rejected.body = _jsonrpc.dumps({"jsonrpc": "2.0", "id": rid, "error": error.wire()}).encode()
        return rejected


# ---- replies ----------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Item:
    data: bytes
    on_flushed: Callable[[], None] | None
    live: Callable[[], bool] | None
    final: bool

    def flushed(self) -> None:
        if self.on_flushed is not None:
            self.on_flushed()


class _Reply:
    """An `Outlet`: the messages of one request (or of a legacy session's GET stream), drained by a connection.

    Unbounded, like the stdio writer's queue: the server bounds what it queues (one update per subscribed URI
    in flight, throttled progress).
    """

    def __init__(self) -> None:
        self._send, self._recv = anyio.create_memory_object_stream[_Item](math.inf)
        self.ended = False

    # -- Outlet
    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        self._put(_Item(data, on_flushed, live, final=False))

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        self._put(_Item(data, on_flushed, None, final=True))
        self.abandon()

    def abandon(self) -> None:
        self.ended = True
        self._send.close()

    # -- the connection's side
    def _put(self, item: _Item) -> None:
        try:
            self._send.send_nowait(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            item.flushed()

    async def next(self, timeout: float) -> _Item | None:
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

    def take(self) -> _Item | None:
        """The next message if one is queued."""
        try:
            return self._recv.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):
            return None

    def close(self) -> None:
        """Nobody will read on: drop what is queued (running its callbacks), and whatever comes later."""
        self.abandon()
        while (item := self.take()) is not None:
            item.flushed()
        self._recv.close()


class _Discard:
    """The outlet of a notification: nothing is ever sent for one."""

    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        if on_flushed is not None:
            on_flushed()

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        if on_flushed is not None:
            on_flushed()

    def abandon(self) -> None:
        pass


# ---- one connection ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _HttpRequest:
    method: str
    target: str
    headers: list[tuple[str, str]]

    @classmethod
    def of(cls, event: h11.Request) -> _HttpRequest:
        headers = [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in event.headers]
        return cls(event.method.decode("ascii", "replace"), event.target.decode("latin-1"), headers)

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def get(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if values else None

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]


class _Connection:
    """One client connection: h11's state, reads with timeouts, writes bounded by the write timeout."""

    def __init__(self, stream: anyio.abc.SocketStream, config: HttpConfig) -> None:
        self.stream = stream
        self.config = config
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.sse = False
        self.closing = False
        self.broken = False

    async def _receive(self) -> bytes:
        try:
            return await self.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return b""

    async def _write(self, data: bytes) -> None:
        if not data:
            return
        try:
            with anyio.fail_after(self.config.write_timeout):
                await self.stream.send(data)
        except anyio.get_cancelled_exc_class():
            self.broken = True  # part of the message may be unwritten: the connection cannot go on
            raise
        except TimeoutError:
            log.info("closing a connection whose client stopped reading")
            raise _Closed from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise _Closed from None

    async def write_canned(self, response: bytes) -> None:
        """A complete response written without h11 (no request head was parsed); the connection then closes."""
        self.closing = True
        await self._write(response)

    async def linger(self) -> None:
        """Stop writing and drain what the client still sends, briefly, so it reads our response, not a reset."""
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self.stream.send_eof()
        drained = 0
        with anyio.move_on_after(LINGER):
            while drained <= MAX_HEAD + self.config.max_body and (data := await self._receive()):
                drained += len(data)

    async def send(self, event: h11.Event) -> None:
        try:
            data = self.h11.send(event)
        except h11.LocalProtocolError:
            raise _Closed from None
        await self._write(data or b"")

    # -- reading
    async def read_head(self) -> h11.Request | None:
        """The next request head; None when the client closed or stayed idle.

        Raises:
            _Closed: After answering a malformed (400), oversized (431) or stalled (408) head.
        """
        deadline = anyio.current_time() + self.config.header_timeout
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                await self.write_canned(_canned(exc.error_status_hint, f"malformed HTTP request: {exc}"))
                raise _Closed from None
            if isinstance(event, h11.Request):
                # h11 bounds only a head still arriving; one that came in a single read is measured here.
                size = len(event.target) + sum(len(name) + len(value) + 4 for name, value in event.headers)
                if size > MAX_HEAD:
                    await self.respond(431, _error_body(INVALID_REQUEST, "the request head is too large"), close=True)
                    raise _Closed
                return event
            if event is h11.NEED_DATA:
                with anyio.move_on_after(deadline - anyio.current_time()):
                    self.h11.receive_data(await self._receive())
                    continue
                if self.h11.trailing_data[0]:
                    await self.write_canned(_canned(408, "the request head did not arrive in time"))
                    raise _Closed
                return None  # an idle keep-alive connection
            return None  # ConnectionClosed, or PAUSED after a client error

    async def read_body(self, limit: int) -> bytes:
        """The request body.

        Raises:
            _Rejected: 413 beyond `limit`, 408 when it stalls.
        """
        body = bytearray()
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise _Rejected(exc.error_status_hint, f"malformed HTTP request body: {exc}") from None
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > limit:
                    raise _Rejected(413, f"the request body is larger than {limit} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            elif event is h11.NEED_DATA:
                if self.h11.they_are_waiting_for_100_continue:
                    await self.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue"))
                data = b""
                with anyio.move_on_after(self.config.body_timeout):
                    data = await self._receive()
                    if not data:
                        raise _Closed
                if not data:
                    raise _Rejected(408, "the request body stalled")
                self.h11.receive_data(data)
            else:
                raise _Closed

    async def wait_gone(self) -> None:
        """Return when the client closes the connection (read while a response is pending).

        Bytes of a pipelined next request are kept for h11; past one head plus one body they are no longer read,
        so a client that floods pipelined requests is only noticed leaving by a failed write.
        """
        while True:
            data = await self._receive()
            if not data:
                return
            self.h11.receive_data(data)
            if len(self.h11.trailing_data[0]) > MAX_HEAD + self.config.max_body:
                await anyio.sleep_forever()

    # -- writing
    async def respond(
        self, status: int, body: bytes = b"", headers: Sequence[tuple[str, str]] = (), *, close: bool = False
    ) -> None:
        """A complete response (`application/json` when there is a body)."""
        fields = list(headers)
        self.closing = self.closing or close
        if body:
            fields.append(("content-type", "application/json"))
        if status != 204:
            fields.append(("content-length", str(len(body))))
        if close:
            fields.append(("connection", "close"))
        reason = http.HTTPStatus(status).phrase.encode("ascii")
        await self.send(h11.Response(status_code=status, headers=fields, reason=reason))
        if body:
            await self.send(h11.Data(data=body))
        await self.send(h11.EndOfMessage())

    async def reject(self, rejected: _Rejected, *, close: bool = False) -> None:
        await self.respond(rejected.status, rejected.body, rejected.headers, close=close)

    async def start_events(self, headers: Sequence[tuple[str, str]] = ()) -> None:
        """Commit the response to `text/event-stream` (200)."""
        self.sse = True
        await self.send(h11.Response(status_code=200, headers=[*_SSE_HEADERS, *headers], reason=b"OK"))

    async def event(self, data: bytes) -> None:
        """One SSE event carrying one JSON-RPC message (compact JSON never contains a line break)."""
        await self.send(h11.Data(data=b"event: message\ndata: " + data + b"\n\n"))

    async def comment(self) -> None:
        await self.send(h11.Data(data=b": keepalive\n\n"))

    async def end_events(self) -> None:
        self.sse = False
        await self.send(h11.EndOfMessage())

    def next_cycle(self) -> bool:
        """Get ready for the next request on this connection; False when it must close."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False


# ---- sessions ---------------------------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class _Session:
    """A legacy `2025-11-25` session: its channel, and the mailbox its GET stream drains."""

    id: str
    mailbox: _Reply
    channel: Channel
    last_seen: float
    active: int = 0
    streaming: bool = False

    def idle_since(self, now: float) -> float:
        return 0.0 if self.active or self.streaming else now - self.last_seen


# ---- the transport ----------------------------------------------------------------------------------------------
class _Transport:
    """The endpoint: admission rules, routing to channels, legacy sessions, connections."""

    def __init__(self, server: McpServer, config: HttpConfig, port: int) -> None:
        self.server = server
        self.config = config
        self.port = port
        bound = url_host(config.host).lower()
        self.url = f"http://{url_host(config.host)}:{port}{ENDPOINT}"
        self.hosts = {split_host(entry) for entry in (*LOOPBACK_NAMES, bound, *config.allowed_hosts)}
        origins = {f"http://{name}:{port}" for name in (*LOOPBACK_NAMES, bound)}
        self.origins = origins | {origin.strip().lower().rstrip("/") for origin in config.allowed_origins}
        self.sessions: dict[str, _Session] = {}
        self.connections = 0

    # -- connections
    async def connection(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            conn = _Connection(stream, self.config)
            if self.connections >= self.config.max_connections:
                with contextlib.suppress(_Closed):
                    await conn.write_canned(_canned(503, "too many open connections; retry later"))
                    await conn.linger()
                return
            self.connections += 1
            try:
                while (head := await conn.read_head()) is not None:
                    await self.request(conn, _HttpRequest.of(head))
                    if not conn.next_cycle():
                        break
            except _Closed:
                pass
            except Exception:
                log.exception("HTTP connection failed")
            finally:
                self.connections -= 1
            if conn.closing:
                await conn.linger()

    async def request(self, conn: _Connection, req: _HttpRequest) -> None:
        """Answer one request (its head is read; its body is not)."""
        length = req.get("content-length")
        too_large = length is not None and length.isdigit() and int(length) > self.config.max_body
        try:
            self.check_head(req)
        except _Rejected as rejected:
            if not too_large:
                await self.discard_body(conn)
            await conn.reject(rejected, close=not self.body_read(conn))
            return
        if too_large:
            await conn.reject(
                _Rejected(413, f"the request body is larger than {self.config.max_body} bytes"), close=True
            )
            return
        try:
            body = await conn.read_body(self.config.max_body)
        except _Rejected as rejected:
            await conn.reject(rejected, close=True)
            return
        try:
            if req.method == "POST":
                await self.post(conn, req, body)
            elif req.method == "GET":
                await self.get(conn, req)
            else:
                await self.delete(conn, req)
        except _Rejected as rejected:
            await conn.reject(rejected)

    @staticmethod
    def body_read(conn: _Connection) -> bool:
        return conn.h11.their_state is h11.DONE

    async def discard_body(self, conn: _Connection) -> None:
        """Read and drop a rejected request's body when it is small enough, so the connection stays usable."""
        with anyio.move_on_after(self.config.body_timeout):
            try:
                await conn.read_body(self.config.max_body)
            except _Rejected:
                pass

    def check_head(self, req: _HttpRequest) -> None:
        """Host, Origin, path, method, then the media types (in this order, before the body is read).

        Raises:
            _Rejected: The first rule the request breaks.
        """
        host = req.get("host")
        name, port = split_host(host or "")
        if (name, port) not in self.hosts and (name, None) not in self.hosts:
            raise _Rejected(403, f"Host {host!r} is not allowed (DNS rebinding protection; see --allowed-host)")
        origins = req.all("origin")
        if origins and (len(origins) > 1 or origins[0].strip().lower().rstrip("/") not in self.origins):
            raise _Rejected(403, f"Origin {', '.join(origins)!r} is not allowed (see --allowed-origin)")
        if req.path != ENDPOINT:
            raise _Rejected(404, f"no MCP endpoint at {req.path!r}: use {ENDPOINT}")
        if req.method not in ("POST", "GET", "DELETE"):
            raise _Rejected(405, f"method {req.method} is not allowed", headers=[("allow", "GET, POST, DELETE")])
        if req.method == "POST":
            ctype = req.get("content-type") or ""
            media, *params = (field.strip().lower() for field in ctype.split(";"))
            charset = next((p.partition("=")[2].strip('"') for p in params if p.startswith("charset=")), "utf-8")
            if media != "application/json" or charset not in ("utf-8", "utf8"):
                raise _Rejected(415, f"Content-Type must be application/json (got {ctype!r})")
            accept = req.all("accept")
            if not (accepts(accept, "application/json") and accepts(accept, "text/event-stream")):
                raise _Rejected(406, "Accept must list both application/json and text/event-stream")
        elif req.method == "GET" and not accepts(req.all("accept"), "text/event-stream"):
            raise _Rejected(406, "Accept must list text/event-stream")

    # -- POST
    async def post(self, conn: _Connection, req: _HttpRequest, body: bytes) -> None:
        try:
            decoded = _jsonrpc.loads(body)
        except (ValueError, RecursionError) as exc:
            raise _Rejected(400, f"parse error: {exc}", code=PARSE_ERROR) from None
        if isinstance(decoded, list):
            raise _Rejected(400, "a POST body carries one JSON-RPC message; batches are not supported")
        message = _jsonrpc.classify(decoded)
        if isinstance(message, Invalid):
            raise _Rejected.of(message.error, message.id.value if message.id is not None else None)
        params = message.params if message.has_params else None
        if isinstance(message, Request) and (message.method == "server/discover" or has_modern_meta(params)):
            await self.modern(conn, req, message)
            return
        sid = req.get("mcp-session-id")
        if sid is not None:
            await self.in_session(conn, req, message, sid)
        elif isinstance(message, Notification):
            # Nothing to act on: a modern notification has no stream to cancel or initialize (a client cancels
            # by closing its response), and a legacy one belongs to a session.
            await conn.respond(202)
        elif message.method == "initialize":
            await self.initialize(conn, message)
        elif (req.get("mcp-protocol-version") or LEGACY_VERSION) != LEGACY_VERSION:
            await self.modern(conn, req, message)
        else:
            raise _Rejected(
                400,
                "Mcp-Session-Id header required: start an MCP 2025-11-25 session with initialize, or send MCP "
                "2026-07-28 requests with their per-request _meta",
                rid=message.id.value,
            )

    async def modern(self, conn: _Connection, req: _HttpRequest, message: Request) -> None:
        """One stateless request: the header rules, then a fresh modern channel for it alone."""
        rejection = modern_header_error(req, message)
        if rejection is not None:
            raise _Rejected.of(rejection, message.id.value)
        await self.exchange(conn, self.server.channel(family="modern"), message, modern=True)

    async def initialize(self, conn: _Connection, message: Request) -> None:
        self.expire()
        if len(self.sessions) >= self.config.max_sessions:
            raise _Rejected(
                429,
                f"at most {self.config.max_sessions} MCP sessions may be open; end one with DELETE or let it expire",
                rid=message.id.value,
            )
        mailbox = _Reply()
        session = _Session(secrets.token_urlsafe(32), mailbox, self.server.channel(notify=mailbox.message), 0.0)
        reply = _Reply()
        await self.server.handle(session.channel, message, reply)  # answered at once
        item = reply.take()
        reply.close()
        assert item is not None and item.final
        headers: list[tuple[str, str]] = []
        if "result" in json.loads(item.data):
            session.last_seen = anyio.current_time()
            self.sessions[session.id] = session
            headers.append(("mcp-session-id", session.id))
            log.info("MCP session %s opened", _short(session.id))
        else:
            mailbox.close()
        try:
            await conn.respond(200, item.data, headers)
        finally:
            item.flushed()

    def session(self, sid: str, rid: Any = None) -> _Session:
        session = self.sessions.get(sid)
        if session is None or session.channel.closed:
            raise _Rejected(404, "unknown or expired MCP session: initialize a new one", rid=rid)
        return session

    async def in_session(self, conn: _Connection, req: _HttpRequest, message: Request | Notification, sid: str) -> None:
        rid = message.id.value if isinstance(message, Request) else None
        session = self.session(sid, rid)
        version = req.get("mcp-protocol-version")
        if version is not None and version != LEGACY_VERSION:
            raise _Rejected(
                400, f"MCP-Protocol-Version {version!r} does not match this {LEGACY_VERSION} session", rid=rid
            )
        session.last_seen = anyio.current_time()
        if isinstance(message, Notification):
            await self.server.handle(session.channel, message, _Discard())
            await conn.respond(202)
            return
        if session.channel.owns(message.id):
            raise _Rejected(400, f"request id {message.id} is already in use in this session", rid=rid)
        session.active += 1
        try:
            await self.exchange(conn, session.channel, message, modern=False)
        finally:
            session.active -= 1
            session.last_seen = anyio.current_time()

    async def exchange(self, conn: _Connection, channel: Channel, message: Request, *, modern: bool) -> None:
        """Hand one request to the server and write its messages as this HTTP response.

        A closed connection (or a stalled write, or an expired listen lease) cancels the request.
        """
        reply = _Reply()
        lease = self.lease() if message.method == "subscriptions/listen" else math.inf
        finished = False
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.watch, conn, tg.cancel_scope)
                try:
                    await self.server.handle(channel, message, reply)
                    with anyio.move_on_after(lease):
                        finished = await self.write_reply(conn, reply, modern=modern)
                    if conn.sse and not conn.broken:  # the lease expired: the stream ends without a final result
                        await conn.end_events()
                except _Closed:
                    pass
                tg.cancel_scope.cancel()
        finally:
            if not finished:
                self.server.cancel(channel, message.id)
            reply.close()
        if conn.broken or conn.h11.our_state is not h11.DONE:
            raise _Closed  # the client left (or stopped reading) mid-response

    @staticmethod
    async def watch(conn: _Connection, scope: anyio.CancelScope) -> None:
        """Cancel `scope` when the client closes the connection."""
        await conn.wait_gone()
        scope.cancel()

    async def write_reply(self, conn: _Connection, reply: _Reply, *, modern: bool) -> bool:
        """Write one request's messages; True when its response (or its abandonment) was reached."""
        try:
            first = await reply.next(self.config.keepalive)
        except anyio.EndOfStream:
            await conn.start_events()  # abandoned before anything was sent: an empty stream
            await conn.end_events()
            return True
        if first is not None and first.final:
            status = 200
            if modern:
                error = json.loads(first.data).get("error")
                status = status_of(error["code"]) if isinstance(error, dict) else 200
            try:
                await conn.respond(status, first.data)
            finally:
                first.flushed()
            return True
        await conn.start_events()
        item = first
        while True:
            if item is None:
                await conn.comment()
            else:
                try:
                    if item.live is None or item.live():
                        await conn.event(item.data)
                finally:
                    item.flushed()
                if item.final:
                    break
            try:
                item = await reply.next(self.config.keepalive)
            except anyio.EndOfStream:
                break
        await conn.end_events()
        return True

    def lease(self) -> float:
        low, high = self.config.stream_lease
        return random.uniform(low, high)

    # -- GET and DELETE (legacy sessions only)
    async def get(self, conn: _Connection, req: _HttpRequest) -> None:
        """The GET stream of a legacy session: its `resources/updated` notifications, until the lease ends."""
        sid = req.get("mcp-session-id")
        if sid is None:
            raise _no_session(req.method)
        session = self.session(sid)
        if session.streaming:
            raise _Rejected(409, "this MCP session already has an open GET stream")
        session.streaming = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.watch, conn, tg.cancel_scope)
                try:
                    await conn.start_events()
                    with anyio.move_on_after(self.lease()):
                        await self.drain(conn, session.mailbox)
                    if not conn.broken:
                        await conn.end_events()
                except _Closed:
                    pass
                tg.cancel_scope.cancel()
        finally:
            session.streaming = False
            session.last_seen = anyio.current_time()
        if conn.broken or conn.h11.our_state is not h11.DONE:
            raise _Closed

    async def drain(self, conn: _Connection, mailbox: _Reply) -> None:
        """Write a session's notifications until it ends (a message not written stays for the next GET)."""
        while True:
            try:
                item = await mailbox.next(self.config.keepalive)
            except anyio.EndOfStream:
                return  # the session ended
            if item is None:
                await conn.comment()
                continue
            try:
                if item.live is None or item.live():
                    await conn.event(item.data)
            finally:
                item.flushed()

    async def delete(self, conn: _Connection, req: _HttpRequest) -> None:
        sid = req.get("mcp-session-id")
        if sid is None:
            raise _no_session(req.method)
        self.end(self.session(sid), "deleted")
        await conn.respond(204)

    def end(self, session: _Session, why: str) -> None:
        self.sessions.pop(session.id, None)
        self.server.close_channel(session.channel)
        session.mailbox.close()
        log.info("MCP session %s %s", _short(session.id), why)

    def expire(self) -> None:
        now = anyio.current_time()
        for session in list(self.sessions.values()):
            if session.idle_since(now) >= self.config.session_idle:
                self.end(session, "expired")

    async def sweep(self) -> None:
        """Expire idle sessions (runs until cancelled)."""
        period = min(max(self.config.session_idle / 4, 0.01), 30.0)
        while True:
            await anyio.sleep(period)
            self.expire()


def _no_session(method: str) -> _Rejected:
    return _Rejected(
        405,
        f"{method} serves only MCP 2025-11-25 sessions (Mcp-Session-Id); MCP 2026-07-28 uses POST, "
        "and subscriptions/listen for updates",
        headers=[("allow", "POST")],
    )


def modern_header_error(req: _HttpRequest, message: Request) -> JsonRpcError | None:
    """The first broken MCP `2026-07-28` header rule of a request, or None.

    In order: a routing header sent twice (`-32020`); required `_meta` missing (`-32602`); `MCP-Protocol-Version`
    missing or unlike the body's `_meta` revision, `Mcp-Method` missing or unlike the method, `Mcp-Name` missing
    or unlike the params field it mirrors (`-32020`). An unsupported revision is then the server's `-32022`.
    """
    for name in _ROUTING_HEADERS:
        if len(req.all(name)) > 1:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: {name} appears more than once")
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_PROTOCOL_VERSION not in meta or META_CLIENT_CAPABILITIES not in meta:
        return invalid_params(MISSING_MODERN_META)
    version = req.get("mcp-protocol-version")
    if version is None:
        return JsonRpcError(HEADER_MISMATCH, "header mismatch: MCP-Protocol-Version header is required")
    if version != meta[META_PROTOCOL_VERSION]:
        return JsonRpcError(
            HEADER_MISMATCH,
            f"header mismatch: MCP-Protocol-Version {version!r} is not the body's {meta[META_PROTOCOL_VERSION]!r}",
        )
    method = req.get("mcp-method")
    if method is None:
        return JsonRpcError(HEADER_MISMATCH, "header mismatch: Mcp-Method header is required")
    if method != message.method:
        return JsonRpcError(HEADER_MISMATCH, f"header mismatch: Mcp-Method {method!r} is not {message.method!r}")
    field = NAME_BEARING.get(message.method)
    if field is not None and isinstance(params.get(field), str):
        raw = req.get("mcp-name")
        if raw is None:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: Mcp-Name header is required for {message.method}")
        if decode_header_value(raw) != params[field]:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: Mcp-Name {raw!r} is not params.{field}")
    return None


async def serve_http(
    config: ServerConfig,
    http_config: HttpConfig | None = None,
    *,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP over Streamable HTTP until cancelled, then shut down like stdio's EOF.

    Use `url = await tg.start(serve_http, config, http_config)`: the endpoint URL (with the port actually bound)
    is reported once the socket listens. On cancellation open connections are closed, in-flight calls cancelled,
    an admitted drop completes and Lean stops.

    Args:
        config: Server settings (shared by every request and session).
        http_config: Transport settings; None: loopback on a free port with the documented limits.
        task_status: Receives the endpoint URL.

    Raises:
        OSError: The address cannot be bound.
    """
    http_config = http_config or HttpConfig()
    listener = await anyio.create_tcp_listener(local_host=http_config.host, local_port=http_config.port)
    async with listener, McpServer.open(config) as server:
        async with anyio.create_task_group() as tg:
            transport = _Transport(server, http_config, listener.extra(SocketAttribute.local_port))
            tg.start_soon(transport.sweep)
            tg.start_soon(listener.serve, transport.connection, tg)
            log.info("serving MCP over Streamable HTTP at %s", transport.url)
            task_status.started(transport.url)
            try:
                await anyio.sleep_forever()
            finally:
                for session in list(transport.sessions.values()):
                    transport.end(session, "closed at shutdown")
