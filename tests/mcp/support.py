"""In-process MCP test support: a scripted fake broker and a harness that drives `McpServer` line by line."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from beam_broker import BY_NAME, OPERATIONS, BrokerError, CallContext, OperationSpec, PreparationEvent
from beam_broker.workspace import resolve
from beam_mcp import McpServer, ServerConfig

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
UNIMPLEMENTED = ("run_at", "run_at_handle", "run_with", "run_with_linear", "release")
TIMEOUT = 10


def modern_meta(**extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    for key, value in extra.items():
        meta[key if key == "progressToken" else f"io.modelcontextprotocol/{key}"] = value
    return meta


Handler = Callable[[Mapping[str, Any], CallContext], Awaitable[dict[str, Any]]]


class FakeBroker:
    """Implements `BrokerLike`: validates like the broker, then runs a scripted handler per operation.

    Diagnostics resources are scripted too: `open_docs` lists the open documents, `documents` holds what
    `diagnostics(path)` answers per canonical path, and `publish` changes one file and reports it to the
    listeners the way the broker's cache does.
    """

    def __init__(self, operations: tuple[OperationSpec, ...] | None = None) -> None:
        self.ops = operations if operations is not None else tuple(s for s in OPERATIONS if s.name not in UNIMPLEMENTED)
        self.handlers: dict[str, Handler] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self.roots: set[str] = set()
        self.opened = False
        self.closed = False
        self.open_docs: list[str] = []
        self.documents: dict[str, dict[str, Any]] = {}
        self.listeners: list[Callable[[str], None]] = []
        self.diagnostic_reads = 0

    # -- BrokerLike
    def operations(self) -> tuple[OperationSpec, ...]:
        return self.ops

    @property
    def active(self) -> bool:
        return bool(self.roots)

    def stats(self) -> dict[str, Any]:
        return {"uptimeMs": 1 if self.roots else 0, "workspaces": {f"local:{r}": {"root": r} for r in self.roots}}

    async def runtime_snapshot(self, root: str) -> dict[str, Any] | None:
        if root not in self.roots:
            return None
        return {"stats": {"root": root}, "open_files": [{"path": "Main.lean", "version": 1}]}

    def open_documents(self) -> list[str]:
        return sorted(self.open_docs)

    def diagnostics(self, path: str) -> dict[str, Any]:
        self.diagnostic_reads += 1
        canonical = os.path.realpath(path)
        snapshot = self.documents.get(canonical)
        if snapshot is None:
            return {"path": canonical, "tracked": False, "availability": "pending", "diagnostics": []}
        return {"path": canonical, "tracked": True, **snapshot}

    def add_diagnostics_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def publish(self, path: str, snapshot: dict[str, Any] | None = None, **fields: Any) -> None:
        """Replace (or with None, forget) one file's snapshot and report the change synchronously."""
        canonical = os.path.realpath(path)
        if snapshot is None and not fields:
            self.documents.pop(canonical, None)
        else:
            self.documents[canonical] = {**(snapshot or {}), **fields}
        for listener in list(self.listeners):
            listener(canonical)

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext | None = None) -> dict[str, Any]:
        spec = BY_NAME[name]
        ctx = ctx or CallContext()
        self.calls.append((name, dict(arguments)))
        extra = sorted(k for k in arguments if k not in spec.input_model.model_fields)
        if extra:
            raise BrokerError("invalidInput", f"{spec.tool} accepts no undeclared input fields: {', '.join(extra)}")
        descriptor = resolve(arguments.get("workspace"), for_drop=name == "drop_workspace")
        try:
            if name == "drop_workspace":
                ctx.emit(PreparationEvent("lean_drop_workspace: preparing workspace eviction"))
                handler = self.handlers.get(name)
                result = await handler(arguments, ctx) if handler else {}
                dropped = descriptor.root in self.roots
                self.roots.discard(descriptor.root)
                out: dict[str, Any] = {"dropped": dropped, "invalidated_handles": dropped}
                if not dropped:
                    out["reason"] = "notFound"
                return {"workspace": {"root": descriptor.root}, **out, **result}
            self.roots.add(descriptor.root)
            path = arguments.get("path")
            where = f" on {path}" if isinstance(path, str) else ""
            ctx.emit(PreparationEvent(f"{spec.tool}{where}: preparing the Lean workspace", path))
            handler = self.handlers.get(name)
            result = await handler(arguments, ctx) if handler else {"op": name}
            return {"workspace": {"root": descriptor.root}, **result}
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(name)
            raise
        finally:
            self.finished.append(name)


@contextlib.asynccontextmanager
async def fake_broker_cm(broker: FakeBroker) -> AsyncIterator[FakeBroker]:
    broker.opened = True
    try:
        yield broker
    finally:
        broker.closed = True


class Harness:
    """Drives one in-process server: send lines, read decoded output messages."""

    def __init__(
        self, server: McpServer, out: MemoryObjectReceiveStream[bytes], broker: FakeBroker, gate: list[anyio.Event]
    ) -> None:
        self.server = server
        self.out = out
        self.broker = broker
        self.ids = itertools.count(1)
        self.pending: list[dict[str, Any]] = []
        self._gate = gate

    def pause_output(self) -> anyio.Event:
        """Make the server's writer block before its next message until the returned event is set."""
        gate = anyio.Event()
        self._gate[:] = [gate]
        return gate

    async def send(self, message: Any) -> None:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self.server.receive(line + b"\n" if not line.endswith(b"\n") else line)

    async def recv(self) -> dict[str, Any]:
        if self.pending:
            return self.pending.pop(0)
        with anyio.fail_after(TIMEOUT):
            data = await self.out.receive()
        message: dict[str, Any] = json.loads(data)
        return message

    def raw_available(self) -> list[bytes]:
        out = []
        while True:
            try:
                out.append(self.out.receive_nowait())
            except anyio.WouldBlock:
                return out

    async def until(self, rid: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The response with id `rid` and the other messages seen before it."""
        seen: list[dict[str, Any]] = []
        while True:
            message = await self.recv()
            if "method" not in message and message.get("id") == rid and type(message.get("id")) is type(rid):
                return message, seen
            seen.append(message)

    async def request(self, method: str, params: Any = None, *, rid: Any = None) -> dict[str, Any]:
        rid = next(self.ids) if rid is None else rid
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        response, others = await self.until(rid)
        self.pending.extend(others)
        return response

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def initialize(self) -> None:
        response = await self.request(
            "initialize",
            {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
        assert "result" in response, response
        await self.notify("notifications/initialized")

    async def call(
        self, name: str, arguments: Any = None, *, modern: bool = True, rid: Any = None, **meta: Any
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Call a tool; returns the response and the notifications seen before it."""
        rid = next(self.ids) if rid is None else rid
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        if modern:
            params["_meta"] = modern_meta(**meta)
        elif meta:
            params["_meta"] = meta
        await self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        return await self.until(rid)


@contextlib.asynccontextmanager
async def harness(broker: FakeBroker | None = None, **config: Any) -> AsyncIterator[Harness]:
    broker = broker or FakeBroker()
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)
    gate: list[anyio.Event] = []

    async def write(data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        if gate:
            await gate[0].wait()
        send.send_nowait(data)

    config.setdefault("status_delay", 60.0)
    cfg = ServerConfig(broker_factory=lambda: fake_broker_cm(broker), **config)
    with send, receive:
        async with McpServer.open(cfg, write) as server:
            yield Harness(server, receive, broker, gate)


def make_project(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n", encoding="utf-8")
    return path.resolve()
