"""Streamable HTTP test support: the endpoint in-process (httpx's ASGI transport) or on a loopback port.

Both drive the real `McpServer` and `beam_broker.Broker` over the scripted fake Lean server (`fake_cmd`), in a
project that `project` creates. `in_process` is for what buffering does not hide (one request, one complete
answer); `served` runs `serve_http` (hypercorn) for streaming, disconnects, leases and framing. `Events` reads
an event stream message by message.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import itertools
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx

from beam_mcp import HttpConfig, McpServer, ServerConfig, serve_http
from beam_mcp._http.app import Endpoint, build_app
from tests.support.fixtures import fake_cmd

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TIMEOUT = 20
ACCEPT = "application/json, text/event-stream"
POST_HEADERS = {"content-type": "application/json", "accept": ACCEPT}
INIT = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
SUB_ID = "io.modelcontextprotocol/subscriptionId"
HOLD = {"stall": ["workspace/symbol"]}
"""Fake Lean settings that hold `lean_workspace_symbols` until it is cancelled."""
Headers = Mapping[str, str] | Sequence[tuple[str, str]]


def modern_meta(**extra: Any) -> dict[str, Any]:
    """Per-request modern metadata; `progressToken=` and other keys (`logLevel=`, ...) are added."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    for key, value in extra.items():
        meta[key if key == "progressToken" else f"io.modelcontextprotocol/{key}"] = value
    return meta


def modern_headers(message: Mapping[str, Any], version: str = MODERN) -> list[tuple[str, str]]:
    """The headers a conforming client sends with a modern request.

    `MCP-Protocol-Version`, `Mcp-Method`, (for name-bearing methods) `Mcp-Name`, and for a tool call
    `Mcp-Param-Workspace`, which mirrors `arguments.workspace.root` (every Beam tool that takes a workspace
    declares it with `x-mcp-header`).
    """
    headers = [("mcp-protocol-version", version), ("mcp-method", message["method"])]
    field = {"tools/call": "name", "resources/read": "uri"}.get(message["method"])
    params = message.get("params") or {}
    if field is not None and field in params:
        headers.append(("mcp-name", params[field]))
    if message["method"] == "tools/call" and isinstance(params, Mapping):
        root = workspace_root(params.get("arguments"))
        if root is not None:
            headers.append(("mcp-param-workspace", root))
    return headers


def workspace_root(arguments: Any) -> str | None:
    """`arguments.workspace.root` encoded as a client mirrors it in `Mcp-Param-Workspace` (None: no header).

    Plain when it is printable ASCII without edge spaces, else `=?base64?...?=`; a root that cannot be written as
    UTF-8 (a lone surrogate) cannot be mirrored at all.
    """
    workspace = arguments.get("workspace") if isinstance(arguments, Mapping) else None
    root = workspace.get("root") if isinstance(workspace, Mapping) else None
    if not isinstance(root, str):
        return None
    if re.fullmatch(r"[\x20-\x7e]*", root) and root == root.strip() and not re.fullmatch(r"=\?base64\?.*\?=", root):
        return root
    try:
        return f"=?base64?{base64.b64encode(root.encode()).decode()}?="
    except UnicodeEncodeError:
        return None


def project(path: Path, files: Mapping[str, str] | None = None) -> Path:
    """A Lean project for the fake server: a `lean-toolchain` file and `files` (default: a clean `A.lean`)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n", encoding="utf-8")
    for name, text in (files if files is not None else {"A.lean": "theorem a : True := trivial\n"}).items():
        (path / name).write_text(text, encoding="utf-8")
    return path.resolve()


def server_config(lean: Mapping[str, object] | None = None, **options: Any) -> ServerConfig:
    """A server over the fake Lean server configured by `lean` (no `beam.status` notices unless asked)."""
    options.setdefault("status_delay", 60.0)
    return ServerConfig(lean_cmd=fake_cmd(dict(lean) if lean else None), **options)


def events(body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a complete event stream, checking its framing (comments skipped)."""
    out: list[dict[str, Any]] = []
    assert body.endswith(b"\n\n") or not body, body
    for block in body.split(b"\n\n")[:-1]:
        lines = block.decode().split("\n")
        if all(line.startswith(":") for line in lines):
            continue
        assert len(lines) == 2 and lines[0] == "event: message" and lines[1].startswith("data: "), block
        out.append(json.loads(lines[1][len("data: ") :]))
    return out


def final(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response an answer ends with (`application/json`, or the last event of a stream)."""
    if response.headers["content-type"] == "text/event-stream":
        return events(response.content)[-1]
    message: dict[str, Any] = response.json()
    return message


def error_code(response: httpx.Response) -> int:
    """The JSON-RPC error code of an `application/json` answer."""
    assert response.headers["content-type"] == "application/json", response
    body = response.json()
    assert "result" not in body, body
    code: int = body["error"]["code"]
    return code


def structured(message: Mapping[str, Any]) -> Any:
    """The `structuredContent` of a tool result."""
    assert "result" in message, message
    return message["result"]["structuredContent"]


def call(rid: Any, name: str, arguments: Mapping[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A modern `tools/call` request."""
    params = {"name": name, "arguments": dict(arguments or {}), "_meta": modern_meta(**meta)}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def request(rid: Any, method: str, params: Mapping[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A modern request."""
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": modern_meta(**meta)}}


@dataclasses.dataclass
class Client:
    """An httpx client bound to the endpoint, with MCP helpers."""

    http: httpx.AsyncClient
    url: str
    port: int
    ids: itertools.count[int] = dataclasses.field(default_factory=lambda: itertools.count(1))

    async def post(self, message: Any, headers: Headers = (), **kw: Any) -> httpx.Response:
        """POST a JSON-RPC message (or raw bytes) with the media types a client must send, plus `headers`."""
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        return await self.http.post(self.url, content=body, headers=[*POST_HEADERS.items(), *_pairs(headers)], **kw)

    async def modern(self, message: Mapping[str, Any]) -> httpx.Response:
        """POST a modern request with the headers a conforming client sends."""
        return await self.post(message, modern_headers(message))

    async def call_modern(
        self, method: str, params: Mapping[str, Any] | None = None, headers: Headers | None = None, **meta: Any
    ) -> httpx.Response:
        """POST a new modern request with conforming headers (or `headers` instead)."""
        message = request(next(self.ids), method, params, **meta)
        return await self.post(message, modern_headers(message) if headers is None else headers)

    @contextlib.asynccontextmanager
    async def stream(self, message: Any, headers: Headers | None = None) -> AsyncIterator[Events]:
        """POST a request and read its answer as it arrives; leaving the block early closes the connection."""
        if headers is None:
            headers = modern_headers(message)
        body = json.dumps(message).encode()
        fields = [*POST_HEADERS.items(), *_pairs(headers)]
        async with self.http.stream("POST", self.url, content=body, headers=fields) as response:
            yield Events(response)

    @contextlib.asynccontextmanager
    async def get_stream(self, sid: str) -> AsyncIterator[Events]:
        """Open a legacy session's GET stream."""
        fields = {"mcp-session-id": sid, "accept": "text/event-stream"}
        async with self.http.stream("GET", self.url, headers=fields) as response:
            yield Events(response)

    async def open_session(self) -> str:
        """`initialize` and `notifications/initialized`: a ready legacy session."""
        response = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        assert response.status_code == 200 and response.json()["result"]["protocolVersion"] == LEGACY
        sid = response.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.post(note, {"mcp-session-id": sid})).status_code == 202
        return sid


class Events:
    """The answer of a streamed request: its status and headers, then its SSE messages one by one."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_raw()
        self._buffer = b""

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def content_type(self) -> str:
        return str(self.response.headers.get("content-type", ""))

    async def block(self) -> bytes | None:
        """The next raw SSE block (an event or a comment, with its blank line); None at the end of the stream."""
        with anyio.fail_after(TIMEOUT):
            while (end := self._buffer.find(b"\n\n")) < 0:
                try:
                    self._buffer += await self._chunks.__anext__()
                except StopAsyncIteration:
                    assert not self._buffer, self._buffer
                    return None
        block, self._buffer = self._buffer[: end + 2], self._buffer[end + 2 :]
        return block

    async def next(self) -> dict[str, Any] | None:
        """The next JSON-RPC message (comments skipped); None at the end of the stream."""
        while (block := await self.block()) is not None:
            if block.startswith(b":"):
                continue
            [message] = events(block)
            return message
        return None

    async def rest(self) -> list[dict[str, Any]]:
        """Every remaining message, to the end of the stream."""
        out = []
        while (message := await self.next()) is not None:
            out.append(message)
        return out


def _pairs(headers: Headers) -> list[tuple[str, str]]:
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


@contextlib.asynccontextmanager
async def in_process(config: ServerConfig | None = None, **http: Any) -> AsyncIterator[Client]:
    """The ASGI app over a real server, driven in-process by httpx (answers arrive complete).

    `http` are `HttpConfig` fields; the endpoint believes it is bound to 127.0.0.1:8765.
    """
    async with McpServer.open(config or server_config()) as server:
        endpoint = Endpoint(server, HttpConfig(**http), 8765)
        try:
            async with app_client(endpoint) as client:
                yield client
        finally:
            endpoint.close()


@contextlib.asynccontextmanager
async def app_client(endpoint: Endpoint) -> AsyncIterator[Client]:
    """An httpx client on `endpoint`, in-process."""
    transport = httpx.ASGITransport(app=build_app(endpoint))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http_client:
        yield Client(http_client, endpoint.url, 8765)


@contextlib.asynccontextmanager
async def served(config: ServerConfig | None = None, **http: Any) -> AsyncIterator[Client]:
    """`serve_http` on a free loopback port, with an httpx client (no connection limit); `http`: `HttpConfig`."""
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(TIMEOUT):
            url = await tg.start(serve_http, config or server_config(), HttpConfig(host="127.0.0.1", port=0, **http))
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT, limits=limits) as http_client:
            yield Client(http_client, url, port)
        tg.cancel_scope.cancel()
