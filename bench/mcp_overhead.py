"""lean-beam-mcp: cold start to the `tools/list` answer, and `lean_hover` round trips against raw LSP hovers.

- cold start: spawn `lean-beam-mcp`, send a modern `tools/list` at once, time until its answer; the baseline is
  the same interpreter starting and exiting (`python -c pass`), alternated in the same run.
- hover over stdio: `tools/call lean_hover` through a `lean-beam-mcp` child (the whole MCP + broker + beam-lsp
  path an agent sees) vs a minimal hand-written LSP hover to a `lean --server` of the same toolchain, project
  and file.
- hover on the same Lean server: `lean_hover` through an in-process `McpServer` (JSON-RPC decode, admission,
  broker, projection, encode) vs `LeanClient.hover` on the Lean server that broker runtime owns.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from beam_lsp import Position, path_to_uri
from beam_mcp import McpServer, ServerConfig
from bench._common import built_project, interleaved, report
from bench.lsp_overhead import RawLsp

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def server_binary() -> list[str]:
    found = shutil.which("lean-beam-mcp", path=str(Path(sys.executable).parent)) or shutil.which("lean-beam-mcp")
    return [found] if found else [sys.executable, "-m", "beam_mcp"]


class StdioMcp:
    """A minimal MCP client over a child's stdio."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        self.buf = b""
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        rid = self.next_id
        await self.proc.stdin.send(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"
        )
        while True:
            while b"\n" not in self.buf:
                self.buf += await self.proc.stdout.receive()
            line, self.buf = self.buf.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == rid and "method" not in message:
                return message["result"]


async def _time_to_answer(cmd: list[str], method: str) -> float:
    """Seconds from spawning the server to the answer of its first request (shutdown is not timed)."""
    t0 = time.perf_counter()
    proc = await anyio.open_process(cmd, stderr=subprocess.DEVNULL)
    async with proc:
        await StdioMcp(proc).request(method, {"_meta": META})
        elapsed = time.perf_counter() - t0
        assert proc.stdin is not None
        await proc.stdin.aclose()
        await proc.wait()
    return elapsed


async def _time_process(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    await anyio.run_process(cmd)
    return time.perf_counter() - t0


async def cold_start(rounds: int) -> float:
    cmd = server_binary()
    python_pass = [sys.executable, "-c", "pass"]
    import_broker = [sys.executable, "-c", "import beam_broker.operations"]  # the registry and its models
    await _time_to_answer(cmd, "tools/list")  # warm the OS file cache
    discover, listing, floor, imports = [], [], [], []
    for _ in range(rounds):
        discover.append(await _time_to_answer(cmd, "server/discover"))
        floor.append(await _time_process(python_pass))
        listing.append(await _time_to_answer(cmd, "tools/list"))
        imports.append(await _time_process(import_broker))
    report("mcp cold start to server/discover", discover, floor, "lean-beam-mcp", "python -c pass")
    return report(
        "mcp cold start to tools/list", listing, imports, "lean-beam-mcp", "python -c 'import beam_broker.operations'"
    )


async def hover_stdio(rounds: int, root: Path, tc: Any) -> float:
    path = root / "Demo/Proofs.lean"
    uri, text = path_to_uri(path), path.read_text(encoding="utf-8")
    ws = {"root": str(root)}
    proc = await anyio.open_process(
        [*server_binary(), "--lean-cmd", shlex.join(tc.server_cmd())], env=tc.env(), stderr=subprocess.DEVNULL
    )
    lean_cmd = [str(tc.lean), "--server", "-Dserver.reportDelayMs=0"]
    env = tc.env() | {"LEAN_PATH": str(root / ".lake/build/lib/lean"), "LEAN_SRC_PATH": str(root)}
    raw_proc = await anyio.open_process(lean_cmd, cwd=root, env=env, stderr=subprocess.DEVNULL)
    async with proc, raw_proc:
        mcp = StdioMcp(proc)
        synced = await mcp.request(
            "tools/call",
            {"name": "lean_sync", "arguments": {"workspace": ws, "path": "Demo/Proofs.lean"}, "_meta": META},
        )
        version = synced["structuredContent"]["version"]
        hover_call = {
            "name": "lean_hover",
            "arguments": {"workspace": ws, "path": "Demo/Proofs.lean", "version": version, "line": 3, "character": 29},
            "_meta": META,
        }
        raw = RawLsp(raw_proc)
        await raw.start(root, uri, text)
        hover_params = {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 29}}

        async def mcp_hover() -> None:
            result = await mcp.request("tools/call", hover_call)
            assert result["isError"] is False

        async def raw_hover() -> None:
            await raw.request("textDocument/hover", hover_params)

        sub, base = await interleaved(mcp_hover, raw_hover, rounds)
        ratio = report("mcp lean_hover over stdio", sub, base, "lean-beam-mcp", "raw LSP")
        assert proc.stdin is not None
        await proc.stdin.aclose()
        await proc.wait()
        await raw.request("shutdown", None)
        await raw.send({"jsonrpc": "2.0", "method": "exit"})
        raw_proc.kill()
    return ratio


async def hover_same_server(rounds: int, root: Path, tc: Any) -> float:
    ws = {"root": str(root)}
    send, receive = anyio.create_memory_object_stream[bytes](math.inf)

    async def write(data: bytes) -> None:
        send.send_nowait(data)

    ids = iter(range(1, 10**9))

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        rid = next(ids)
        params = {"name": name, "arguments": arguments, "_meta": META}
        await server.receive(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()
        )
        while True:
            message = json.loads(await receive.receive())
            if message.get("id") == rid:
                return message["result"]

    with send, receive:
        async with McpServer.open(ServerConfig(lean_cmd=tc.server_cmd(), env=tc.env()), write) as server:
            synced = await call("lean_sync", {"workspace": ws, "path": "Demo/Proofs.lean"})
            version = synced["structuredContent"]["version"]
            # The baseline talks to the very Lean server the MCP call used (private access: a bench, not an API).
            broker = server._host.current()
            assert broker is not None
            runtime = broker.cached(str(root))
            assert runtime is not None
            client = await runtime.client()
            uri = path_to_uri(root / "Demo/Proofs.lean")
            args = {"workspace": ws, "path": "Demo/Proofs.lean", "version": version, "line": 3, "character": 29}

            async def mcp_hover() -> object:
                return await call("lean_hover", args)

            async def lsp_hover() -> object:
                return await client.hover(uri, Position(line=3, character=29))

            sub, base = await interleaved(mcp_hover, lsp_hover, rounds)
            return report("mcp lean_hover in-process, same Lean server", sub, base, "McpServer", "beam-lsp")


async def main(rounds: int = 200, cold_rounds: int = 10) -> dict[str, float]:
    ratios = {"cold_start": await cold_start(cold_rounds)}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        ratios["hover_stdio"] = await hover_stdio(rounds, root, tc)
        ratios["hover_same_server"] = await hover_same_server(rounds, root, tc)
    print(f"mcp benches took {time.perf_counter() - t0:.1f} s", flush=True)
    return ratios


if __name__ == "__main__":
    anyio.run(main)
