"""beam-lsp per-request overhead: `LeanClient.hover` / `plain_goal` vs a minimal hand-written raw LSP exchange.

Both talk to their own `lean --server` (same command, same project, same open file, warmed up), and the two
are timed alternately in the same run, so machine noise hits both alike. Prints the ratio of medians.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from beam_lsp import LeanClient, Position, path_to_uri
from bench._common import built_project, interleaved, report


class RawLsp:
    """The baseline: the least code that can do an LSP request (no validation, models or bookkeeping)."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        self.buf = b""
        self.next_id = 0

    async def send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        await self.proc.stdin.send(b"Content-Length: %d\r\n\r\n%b" % (len(body), body))

    async def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while b"\r\n\r\n" not in self.buf:
            self.buf += await self.proc.stdout.receive()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        n = int(head.split(b":")[1])
        while len(self.buf) < n:
            self.buf += await self.proc.stdout.receive()
        body, self.buf = self.buf[:n], self.buf[n:]
        msg: dict[str, Any] = json.loads(body)
        return msg

    async def start(self, root: Path, uri: str, text: str) -> None:
        """Handshake, open one document and wait until Lean has elaborated it."""
        await self.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {}})
        await self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        await self.send(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "lean4", "version": 1, "text": text}},
            }
        )
        await self.request("textDocument/waitForDiagnostics", {"uri": uri, "version": 1})

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        rid = self.next_id
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            msg = await self.recv()
            if "method" in msg:
                if "id" in msg:  # server-to-client request: answer it
                    await self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                continue
            if msg.get("id") == rid:
                return msg.get("result")


async def main(rounds: int = 200) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        path = root / "Demo/Goals.lean"
        uri, text = path_to_uri(path), path.read_text()
        cmd = [str(tc.lean), "--server", "-Dserver.reportDelayMs=0"]
        env = tc.env() | {"LEAN_PATH": str(root / ".lake/build/lib/lean"), "LEAN_SRC_PATH": str(root)}
        ratios = {}
        async with LeanClient.start(cmd, cwd=root, env=env) as client:
            await client.open(uri, text)
            await client.sync(uri)
            proc = await anyio.open_process(cmd, cwd=root, env=env, stderr=subprocess.DEVNULL)
            async with proc:
                raw = RawLsp(proc)
                await raw.start(root, uri, text)
                hover_pos = Position(line=3, character=9)
                goal_pos = Position(line=3, character=43)

                def raw_call(method: str, pos: Position) -> Callable[[], Awaitable[Any]]:
                    params = {"textDocument": {"uri": uri}, "position": pos.wire()}
                    return lambda: raw.request(method, params)

                cases: list[tuple[str, Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]] = [
                    ("hover", lambda: client.hover(uri, hover_pos), raw_call("textDocument/hover", hover_pos)),
                    ("plainGoal", lambda: client.plain_goal(uri, goal_pos), raw_call("$/lean/plainGoal", goal_pos)),
                ]
                for name, subject, baseline in cases:
                    sub, base = await interleaved(subject, baseline, rounds)
                    ratios[name] = report(f"lsp {name}", sub, base, "beam-lsp", "raw LSP")
                await raw.request("shutdown", None)
                await raw.send({"jsonrpc": "2.0", "method": "exit"})
                proc.kill()
        return ratios


if __name__ == "__main__":
    anyio.run(main)
