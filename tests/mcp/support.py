"""In-process MCP test support: a harness that drives `McpServer` line by line over the real broker.

Every harness opens `McpServer.open(ServerConfig(lean_cmd=..., ...), write)`: a real `beam_broker.Broker` whose
workspaces run the scripted fake Lean server (`tests/support/fake_lean.py`) configured by `lean`. Timing and
faults are scripted there (`stall`, `elab_ms`, `crash_on`, `worker_crash_on`, diagnostics markers in the files of
a project), a project's Lean work can be held until the test releases it (`LeanGate`), and the broker is
observed through tool results and `beam_stats` (on a side channel that leaves the stdio stream alone).

Every successful tool result a harness sees is checked against its tool's `outputSchema` (`tools/list`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped]
from anyio.streams.memory import MemoryObjectReceiveStream

from beam_mcp import McpServer, ServerConfig
from beam_mcp._jsonrpc import classify, loads
from tests.support.fixtures import LeanGate, fake_cmd, gated_cmd
from tests.support.projects import fake_project

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TIMEOUT = 20
INIT = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
VANISHED_ROOT = "/nonexistent/beam-test-fence"
"""A root no test creates: dropping it is a no-op that still waits for every call admitted before it."""

__all__ = [
    "INIT",
    "LEGACY",
    "MODERN",
    "SERVER_INFO_KEY",
    "TIMEOUT",
    "Collected",
    "Harness",
    "LeanGate",
    "Sink",
    "call_message",
    "harness",
    "logs",
    "make_project",
    "modern_meta",
    "progress",
    "server_binary",
    "structured",
]


def server_binary() -> str:
    """The installed `lean-beam-mcp` console script next to this interpreter (what MCP clients start)."""
    found = shutil.which("lean-beam-mcp", path=str(Path(sys.executable).parent)) or shutil.which("lean-beam-mcp")
    assert found, "lean-beam-mcp is not installed next to this interpreter"
    return found


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


def make_project(path: Path, files: Mapping[str, str] | None = None) -> Path:
    """A fake-lane Lean project at `path` (see `tests.support.projects.fake_project`)."""
    return fake_project(path, files)


def call_message(rid: Any, name: str, arguments: Any = None, *, modern: bool = True, **meta: Any) -> dict[str, Any]:
    """A `tools/call` request (modern metadata unless `modern=False`)."""
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if modern:
        params["_meta"] = modern_meta(**meta)
    elif meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def structured(response: dict[str, Any]) -> Any:
    """The `structuredContent` of a tool result, checking it is also the one text content."""
    assert "result" in response, response
    result = response["result"]
    assert result["content"][0]["type"] == "text" and len(result["content"]) == 1
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"]


def progress(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The params of the `notifications/progress` among `notes`."""
    return [n["params"] for n in notes if n.get("method") == "notifications/progress"]


def logs(notes: list[dict[str, Any]], logger: str) -> list[dict[str, Any]]:
    """The params of the `notifications/message` of `logger` among `notes`."""
    return [
        n["params"] for n in notes if n.get("method") == "notifications/message" and n["params"]["logger"] == logger
    ]


class Sink:
    """An `Outlet` that keeps what it is given: decoded messages, then `response` or `abandoned`."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.response: dict[str, Any] | None = None
        self.abandoned = False
        self.done = anyio.Event()

    def message(
        self, data: bytes, on_flushed: Callable[[], None] | None = None, live: Callable[[], bool] | None = None
    ) -> None:
        assert not self.done.is_set(), "a message after the request ended"
        if live is None or live():
            self.messages.append(json.loads(data))
        if on_flushed is not None:
            on_flushed()

    def respond(self, data: bytes, on_flushed: Callable[[], None] | None = None) -> None:
        assert not self.done.is_set(), "a second terminal message"
        self.response = json.loads(data)
        self.done.set()
        if on_flushed is not None:
            on_flushed()

    def abandon(self) -> None:
        assert not self.done.is_set(), "a second terminal message"
        self.abandoned = True
        self.done.set()


class Collected:
    """A channel's `notify` (where a legacy session's updates go): keeps every message written."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def __call__(self, data: bytes, on_flushed: Callable[[], None], live: Callable[[], bool]) -> None:
        if live():
            self.messages.append(json.loads(data))
        on_flushed()


class Harness:
    """Drives one in-process server over its stdio channel: send lines, read decoded output messages."""

    def __init__(self, server: McpServer, out: MemoryObjectReceiveStream[bytes], gate: list[anyio.Event]) -> None:
        self.server = server
        self.out = out
        self.ids = itertools.count(1)
        self.pending: list[dict[str, Any]] = []
        self._gate = gate
        self._calls: dict[tuple[type, Any], str] = {}
        self._schemas: dict[str, dict[str, Any]] | None = None
        self.checked = 0
        """How many successful tool results were checked against their outputSchema."""

    # -- output
    def pause_output(self) -> anyio.Event:
        """Make the server's writer block before its next message until the returned event is set."""
        gate = anyio.Event()
        self._gate[:] = [gate]
        return gate

    async def send(self, message: Any) -> None:
        """Send one line (a JSON value, or raw bytes)."""
        if isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message:
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("name"), str):
                self._calls[(type(message["id"]), message["id"])] = params["name"]
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self.server.receive(line if line.endswith(b"\n") else line + b"\n")

    async def recv(self) -> dict[str, Any]:
        """The next output message (bounded wait)."""
        if self.pending:
            return self.pending.pop(0)
        with anyio.fail_after(TIMEOUT):
            data = await self.out.receive()
        message: dict[str, Any] = json.loads(data)
        await self._check(message)
        return message

    def raw_available(self) -> list[bytes]:
        """Every output line written so far and not read yet."""
        out = []
        while True:
            try:
                out.append(self.out.receive_nowait())
            except anyio.WouldBlock:
                return out

    async def quiet(self) -> list[dict[str, Any]]:
        """Everything the server sent once no task can make progress without outside input."""
        await anyio.wait_all_tasks_blocked()
        out, self.pending = self.pending, []
        for line in self.raw_available():
            message = json.loads(line)
            await self._check(message)
            out.append(message)
        return out

    async def until(self, rid: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response with id `rid` and the other messages seen before it."""
        seen: list[dict[str, Any]] = []
        while True:
            message = await self.recv()
            if "method" not in message and message.get("id") == rid and type(message.get("id")) is type(rid):
                return message, seen
            seen.append(message)

    # -- requests
    async def request(self, method: str, params: Any = None, *, rid: Any = None) -> dict[str, Any]:
        """Send a request and return its response (other messages stay pending)."""
        rid = next(self.ids) if rid is None else rid
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        response, others = await self.until(rid)
        self.pending.extend(others)
        return response

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self) -> None:
        """The legacy handshake: `initialize`, then `notifications/initialized`."""
        response = await self.request("initialize", INIT)
        assert "result" in response, response
        await self.notify("notifications/initialized")

    async def call(
        self, name: str, arguments: Any = None, *, modern: bool = True, rid: Any = None, **meta: Any
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Call a tool; returns the response and the messages seen before it."""
        rid = next(self.ids) if rid is None else rid
        await self.send(call_message(rid, name, arguments, modern=modern, **meta))
        return await self.until(rid)

    # -- a private modern channel (what an HTTP transport uses): observes the server without touching stdio
    async def side(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A modern request on a fresh channel of its own; returns its response."""
        sink = Sink()
        message = {
            "jsonrpc": "2.0",
            "id": "side",
            "method": method,
            "params": {**(params or {}), "_meta": modern_meta()},
        }
        with anyio.fail_after(TIMEOUT):
            await self.server.handle(self.server.channel(family="modern"), classify(loads(json.dumps(message))), sink)
            await sink.done.wait()
        assert sink.response is not None, "the side request was abandoned"
        return sink.response

    async def stats(self) -> dict[str, Any]:
        """`beam_stats` (the broker's view: workspaces, sessions, per-operation counts).

        A surface that does not serve `beam_stats` (`--tools lean-lsp-mcp`) is read from its broker directly.
        """
        if "beam_stats" not in (await self.server.tools()).by_name:
            broker = self.server._host.current()
            return broker.stats() if broker is not None else {"uptimeMs": 0, "workspaces": {}}
        response = await self.side("tools/call", {"name": "beam_stats", "arguments": {}})
        assert "result" in response, response
        out: dict[str, Any] = response["result"]["structuredContent"]
        return out

    async def ops(self, root: str | Path) -> dict[str, dict[str, Any]]:
        """Per-operation metrics of the workspace `root` (empty when it is not cached)."""
        workspace = (await self.stats())["workspaces"].get(f"local:{root}")
        return {} if workspace is None else dict(workspace["byBackend"]["lean"]["ops"])

    async def fence(self) -> None:
        """Wait until every call admitted so far has finished (a drop is a full stream-order fence)."""
        response = await self.side(
            "tools/call", {"name": "lean_drop_workspace", "arguments": {"workspace": {"root": VANISHED_ROOT}}}
        )
        assert response["result"]["structuredContent"]["dropped"] is False, response

    async def schemas(self) -> dict[str, dict[str, Any]]:
        """Each listed tool's `outputSchema` (tools without one are left out)."""
        if self._schemas is None:
            listed = await self.side("tools/list")
            self._schemas = {t["name"]: t["outputSchema"] for t in listed["result"]["tools"] if "outputSchema" in t}
        return self._schemas

    async def _check(self, message: dict[str, Any]) -> None:
        """Validate a successful tool result against its tool's outputSchema."""
        if "method" in message or "id" not in message:
            return
        name = self._calls.pop((type(message["id"]), message["id"]), None)
        result = message.get("result")
        if name is None or not isinstance(result, dict) or result.get("isError") is not False:
            return
        schema = (await self.schemas()).get(name)
        if schema is not None:
            jsonschema.validate(result["structuredContent"], schema)
            self.checked += 1


@contextlib.asynccontextmanager
async def harness(lean: dict[str, Any] | None = None, **config: Any) -> AsyncIterator[Harness]:
    """An open server whose broker runs the fake Lean server with `lean` (held by any installed `LeanGate`).

    `config` goes to `ServerConfig` (`status_delay` defaults to 60 s so only tests that want it see a notice).
    """
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)
    gate: list[anyio.Event] = []

    async def write(data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        if gate:
            await gate[0].wait()
        send.send_nowait(data)

    config.setdefault("status_delay", 60.0)
    config.setdefault("lean_cmd", gated_cmd(fake_cmd(lean)))
    with send, receive:
        async with McpServer.open(ServerConfig(**config), write) as server:
            yield Harness(server, receive, gate)
