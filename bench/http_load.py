"""lean-beam-mcp over Streamable HTTP: `lean_hover` from 8 concurrent clients against 1 client, on real Lean.

A `lean-beam-mcp --http 127.0.0.1:0` child serves the demo project (the lane's toolchain, `Demo/Proofs.lean`
synced once); each client is an httpx connection sending MCP `2026-07-28` `tools/call lean_hover` requests back
to back. A round is one phase of 1 client and one phase of 8 clients (each client making the same number of calls),
their order alternating between rounds so noise hits both alike. Per mode it prints the per-call latency median and
p95 and the throughput (calls per second of phase wall time), then the 8-client/1-client ratios.
"""

from __future__ import annotations

import json
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench._common import built_project
from bench.mcp_overhead import META, server_binary

POST_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
}


class Mode:
    """The calls of one mode (1 or 8 clients): per-call latencies, and calls and wall time per phase."""

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.latencies: list[float] = []
        self.calls = 0
        self.wall = 0.0

    def p95(self) -> float:
        return statistics.quantiles(self.latencies, n=20)[-1]

    def throughput(self) -> float:
        return self.calls / self.wall

    def line(self) -> str:
        return (
            f"http lean_hover, {self.clients} client{'s' if self.clients > 1 else ''}: "
            f"median {statistics.median(self.latencies) * 1e3:.2f} ms, p95 {self.p95() * 1e3:.2f} ms, "
            f"throughput {self.throughput():.1f} calls/s (n={len(self.latencies)})"
        )


async def start_server(tc: Any) -> tuple[anyio.abc.Process, str]:
    """A `lean-beam-mcp --http` child on a free loopback port, and its endpoint URL."""
    proc = await anyio.open_process(
        [*server_binary(), "--http", "127.0.0.1:0", "--lean-cmd", shlex.join(tc.server_cmd())],
        env=tc.env(),
        stdout=subprocess.DEVNULL,
    )
    assert proc.stderr is not None
    line = b""
    with anyio.fail_after(120):
        while b"\n" not in line:
            line += await proc.stderr.receive()
    text = line.decode()
    if " at http://" not in text:
        raise SystemExit(f"lean-beam-mcp --http did not start: {text}")
    return proc, text.split(" at ", 1)[1].split()[0]


async def tool_call(http: httpx.AsyncClient, url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One modern `tools/call`; its structured result."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": META},
    }
    headers = {**POST_HEADERS, "mcp-name": name}
    workspace = arguments.get("workspace")
    if isinstance(workspace, dict):  # the routing header a 2026-07-28 client mirrors from x-mcp-header
        headers["mcp-param-workspace"] = workspace["root"]
    response = await http.post(url, content=json.dumps(message).encode(), headers=headers)
    body = response.text
    if response.headers.get("content-type") == "text/event-stream":  # progress came first: the response is last
        body = [line for line in body.splitlines() if line.startswith("data: ")][-1][len("data: ") :]
    result: dict[str, Any] = json.loads(body)["result"]
    assert result["isError"] is False, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


async def phase(mode: Mode, clients: list[httpx.AsyncClient], url: str, args: dict[str, Any], calls: int) -> None:
    """Every client of `mode` makes `calls` hovers back to back, all clients at once."""

    async def run(http: httpx.AsyncClient) -> None:
        for _ in range(calls):
            t0 = time.perf_counter()
            await tool_call(http, url, "lean_hover", args)
            mode.latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for http in clients[: mode.clients]:
            tg.start_soon(run, http)
    mode.wall += time.perf_counter() - t0
    mode.calls += mode.clients * calls


async def hover_load(root: Path, tc: Any, rounds: int, calls: int, warmup: int = 3) -> dict[str, float]:
    proc, url = await start_server(tc)
    async with proc:
        try:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
            clients = [httpx.AsyncClient(timeout=120, limits=limits) for _ in range(8)]
            try:
                ws = {"root": str(root)}
                synced = await tool_call(clients[0], url, "lean_sync", {"workspace": ws, "path": "Demo/Proofs.lean"})
                args = {
                    "workspace": ws,
                    "path": "Demo/Proofs.lean",
                    "version": synced["version"],
                    "line": 3,
                    "character": 29,
                }
                one, eight = Mode(1), Mode(8)
                for _ in range(warmup):
                    await phase(Mode(8), clients, url, args, calls)
                for i in range(rounds):
                    first, second = (one, eight) if i % 2 == 0 else (eight, one)
                    await phase(first, clients, url, args, calls)
                    await phase(second, clients, url, args, calls)
            finally:
                for http in clients:
                    await http.aclose()
        finally:
            proc.terminate()
            with anyio.fail_after(30):
                await proc.wait()
    print(one.line(), flush=True)
    print(eight.line(), flush=True)
    latency = statistics.median(eight.latencies) / statistics.median(one.latencies)
    p95 = eight.p95() / one.p95()
    throughput = eight.throughput() / one.throughput()
    print(
        f"http lean_hover, 8 clients / 1 client: median latency ratio {latency:.2f}, p95 ratio {p95:.2f}, "
        f"throughput ratio {throughput:.2f}",
        flush=True,
    )
    return {"latency_8_vs_1": latency, "p95_8_vs_1": p95, "throughput_8_vs_1": throughput}


async def main(rounds: int = 20, calls: int = 10) -> dict[str, float]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        ratios = await hover_load(root, tc, rounds, calls)
    print(f"http load bench took {time.perf_counter() - t0:.1f} s", flush=True)
    return ratios


if __name__ == "__main__":
    anyio.run(main)
