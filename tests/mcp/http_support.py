"""Streamable HTTP test support: the in-process server on a loopback port, and a small h11 client.

The client is deliberately low level (one connection, raw headers, partial writes, abrupt close) so the tests can
break every rule the transport enforces; `post`/`request` cover the ordinary one-shot cases.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc
import h11

from beam_mcp import HttpConfig, ServerConfig, serve_http

from .support import MODERN, TIMEOUT, FakeBroker, fake_broker_cm, modern_meta

ACCEPT = "application/json, text/event-stream"
Headers = Sequence[tuple[str, str]]


@dataclasses.dataclass
class Response:
    """A complete HTTP response."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k == name.lower()]
        return values[-1] if values else None

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0]

    def json(self) -> Any:
        assert self.content_type == "application/json", (self.status, self.headers, self.body)
        return json.loads(self.body)

    def events(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages of an SSE body, in order."""
        assert self.content_type == "text/event-stream", (self.status, self.headers, self.body)
        return [json.loads(data) for data in sse_data(self.body)]

    def comments(self) -> int:
        return sum(1 for block in self.body.split(b"\n\n") if block.startswith(b":"))


def sse_data(body: bytes) -> list[str]:
    """The `data` of each complete SSE event in `body` (comments skipped; the framing is checked)."""
    out: list[str] = []
    for block in body.split(b"\n\n")[:-1]:
        lines = block.decode().split("\n")
        if all(line.startswith(":") for line in lines):
            continue
        assert lines[0] == "event: message", block
        assert len(lines) == 2 and lines[1].startswith("data: "), block
        out.append(lines[1][len("data: ") :])
    return out


class Client:
    """One HTTP/1.1 connection to the server."""

    def __init__(self, stream: anyio.abc.SocketStream, port: int) -> None:
        self.stream = stream
        self.port = port
        self.h11 = h11.Connection(h11.CLIENT)
        self.buffer = bytearray()

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, port: int) -> AsyncIterator[Client]:
        with anyio.fail_after(TIMEOUT):
            stream = await anyio.connect_tcp("127.0.0.1", port)
        async with stream:
            yield cls(stream, port)

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send(data)

    async def send_request(
        self, method: str, headers: Headers, body: bytes = b"", *, target: str = "/mcp", host: str | None = None
    ) -> None:
        fields = [("host", host if host is not None else f"127.0.0.1:{self.port}"), *headers]
        if method in ("POST", "PUT") and not any(k.lower() == "content-length" for k, _ in fields):
            fields.append(("content-length", str(len(body))))
        await self.send_raw(self.h11.send(h11.Request(method=method, target=target, headers=fields)) or b"")
        if body:
            await self.send_raw(self.h11.send(h11.Data(data=body)) or b"")
        await self.send_raw(self.h11.send(h11.EndOfMessage()) or b"")

    async def post(self, message: Any, headers: Headers = ()) -> None:
        """Send a JSON-RPC message as a POST with the media types a client must send."""
        fields = [("content-type", "application/json"), ("accept", ACCEPT), *headers]
        await self.send_request("POST", fields, json.dumps(message).encode())

    async def post_modern(self, message: Mapping[str, Any]) -> None:
        """POST a modern request with the headers a conforming client sends."""
        await self.post(message, modern_headers(message))

    async def _event(self) -> h11.Event:
        while True:
            event = self.h11.next_event()
            if isinstance(event, h11.Event):
                return event
            assert event is h11.NEED_DATA, event
            try:
                data = await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                data = b""
            self.h11.receive_data(data)

    async def head(self) -> h11.Response:
        with anyio.fail_after(TIMEOUT):
            event = await self._event()
        assert isinstance(event, h11.Response), event
        return event

    async def chunk(self) -> bytes | None:
        """The next piece of the body; None at its end."""
        with anyio.fail_after(TIMEOUT):
            event = await self._event()
        if isinstance(event, h11.Data):
            return bytes(event.data)
        assert isinstance(event, h11.EndOfMessage), event
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()  # keep-alive: ready for the next request
        return None

    async def next_message(self) -> dict[str, Any] | None:
        """The next JSON-RPC message of an SSE body (comments skipped); None at its end."""
        while True:
            end = self.buffer.find(b"\n\n")
            if end >= 0:
                block = bytes(self.buffer[: end + 2])
                del self.buffer[: end + 2]
                for data in sse_data(block):
                    message: dict[str, Any] = json.loads(data)
                    return message
                continue
            piece = await self.chunk()
            if piece is None:
                assert not self.buffer, self.buffer
                return None
            self.buffer += piece

    async def response(self) -> Response:
        head = await self.head()
        body = bytearray()
        while (piece := await self.chunk()) is not None:
            body += piece
        headers = [(k.decode().lower(), v.decode()) for k, v in head.headers]
        return Response(head.status_code, headers, bytes(body))

    async def closed_by_server(self) -> bool:
        """Whether the server closed the connection (reads until EOF, bounded)."""
        with anyio.fail_after(TIMEOUT):
            try:
                data = await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return True
        return not data


@dataclasses.dataclass
class Served:
    """A running in-process HTTP server."""

    url: str
    port: int
    broker: FakeBroker
    ids: itertools.count[int] = dataclasses.field(default_factory=lambda: itertools.count(1))

    def client(self) -> contextlib.AbstractAsyncContextManager[Client]:
        return Client.connect(self.port)

    async def request(
        self, method: str, headers: Headers = (), body: bytes = b"", *, target: str = "/mcp", host: str | None = None
    ) -> Response:
        async with self.client() as client:
            await client.send_request(method, headers, body, target=target, host=host)
            return await client.response()

    async def post(self, message: Any, headers: Headers = (), **kw: Any) -> Response:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        fields = [("content-type", "application/json"), ("accept", ACCEPT), *headers]
        return await self.request("POST", fields, body, **kw)

    def modern(
        self, method: str, params: Mapping[str, Any] | None = None, *, rid: Any = None, **meta: Any
    ) -> dict[str, Any]:
        """A modern request body."""
        body_params = {**(params or {}), "_meta": modern_meta(**meta)}
        return {"jsonrpc": "2.0", "id": next(self.ids) if rid is None else rid, "method": method, "params": body_params}

    async def call_modern(
        self, method: str, params: Mapping[str, Any] | None = None, headers: Headers | None = None, **meta: Any
    ) -> Response:
        """POST a modern request with the headers a conforming client sends (or `headers` instead)."""
        message = self.modern(method, params, **meta)
        return await self.post(message, modern_headers(message) if headers is None else headers)


def modern_headers(message: Mapping[str, Any], version: str = MODERN) -> list[tuple[str, str]]:
    """`MCP-Protocol-Version`, `Mcp-Method` and (for name-bearing methods) `Mcp-Name` of a modern request."""
    headers = [("mcp-protocol-version", version), ("mcp-method", message["method"])]
    field = {"tools/call": "name", "resources/read": "uri"}.get(message["method"])
    params = message.get("params") or {}
    if field is not None and field in params:
        headers.append(("mcp-name", params[field]))
    return headers


@contextlib.asynccontextmanager
async def http_server(broker: FakeBroker | None = None, **options: Any) -> AsyncIterator[Served]:
    """The server on 127.0.0.1 (a free port) over a scripted broker; `options` are `HttpConfig` fields, plus
    `ServerConfig` fields prefixed `server_`."""
    broker = broker or FakeBroker()
    server_options = {k.removeprefix("server_"): options.pop(k) for k in list(options) if k.startswith("server_")}
    server_options.setdefault("status_delay", 60.0)
    server_options.setdefault("broker_factory", lambda: fake_broker_cm(broker))
    config = ServerConfig(**server_options)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(TIMEOUT):
            url = await tg.start(serve_http, config, HttpConfig(host="127.0.0.1", port=0, **options))
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        yield Served(url, port, broker)
        tg.cancel_scope.cancel()
