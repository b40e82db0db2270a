"""Independent workspaces behind HAProxy: throughput with 1 vs 3 replicas, memory per workspace, failover timeline.

Setup: `tests/deploy/cluster.py` (the shipped `deploy/haproxy/haproxy.cfg` in front of `lean-beam-mcp --http`
replicas on loopback) over real Lean (`BEAM_TEST_TOOLCHAIN=lean435` by default), one built copy of the demo project
per workspace. Each workspace is one client making `lean_run_at` (a fresh theorem elaborated in a warm probe
mirror) and `lean_hover` calls back to back, every workspace at once, with the headers a conforming MCP 2026-07-28
client sends (`Mcp-Param-Workspace` included, so HAProxy keeps each workspace on one replica). Phases alternate
1 and 3 replicas. Every replica shares this machine's cores, so the ratio shows what replication buys on one box
(little: each workspace already has its own Lean process); docs/deploy.md turns the figures into a per-replica
capacity estimate. Then, with 3 replicas, the replica holding the most workspaces is killed and each of its
workspaces calls again at once: kill -> the stale-handle answer -> the first successful call on the new replica.

Needs `haproxy` (apt-get install -y haproxy). Run: `python -m bench.deploy [rounds [calls]]` (default: 3 phases
of 100 calls per workspace, for each replica count, twice).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from tests.deploy.cluster import META, MODERN, Cluster, cluster, haproxy_binary

from beam_lsp._process import descendants
from bench._common import built_project, cpu_seconds

WORKSPACES = 6
PATH = "Demo/Proofs.lean"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def tool(http: httpx.AsyncClient, url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One modern `tools/call` with conforming headers; its result (`structuredContent` and `isError`)."""
    params = {"name": name, "arguments": arguments, "_meta": META}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {**HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    headers["mcp-param-workspace"] = arguments["workspace"]["root"]  # printable ASCII: tempfile paths
    response = await http.post(url, content=json.dumps(message).encode(), headers=headers)
    body = response.text
    if response.headers.get("content-type") == "text/event-stream":  # progress came first: the response is last
        body = [line for line in body.splitlines() if line.startswith("data: ")][-1][len("data: ") :]
    result: dict[str, Any] = json.loads(body)["result"]
    return result


class Workspace:
    """One client working in one copy of the demo project."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.http = httpx.AsyncClient(timeout=300)
        self.probes = 0

    @property
    def ws(self) -> dict[str, Any]:
        return {"workspace": {"root": self.root}}

    async def ok(self, url: str, name: str, **arguments: Any) -> dict[str, Any]:
        result = await tool(self.http, url, name, {**self.ws, **arguments})
        assert result["isError"] is False, (name, result["structuredContent"])
        out: dict[str, Any] = result["structuredContent"]
        return out

    async def warm(self, url: str) -> None:
        """Start the workspace's Lean server and open its probe mirror."""
        await self.ok(url, "lean_sync", path=PATH)
        await self.work(url, 1)

    async def work(self, url: str, calls: int) -> None:
        """`calls` calls back to back: a fresh theorem elaborated in the probe mirror, then a hover, in turn."""
        for i in range(calls):
            if i % 2 == 0:
                self.probes += 1
                text = f"theorem probe{self.probes} (p q : Prop) (hp : p) (hq : q) : p := (fun (_x : q) => hp) hq"
                ran = await self.ok(url, "lean_run_at", path=PATH, version=1, line=3, character=0, text=text)
                assert ran["success"] is True, ran
            else:
                await self.ok(url, "lean_hover", path=PATH, version=1, line=3, character=29)


def rss_mib(pids: list[int]) -> float:
    """Resident memory of these processes (MiB)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, StopIteration):
            status = Path(f"/proc/{pid}/status").read_text()
            total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return total / 1024


def cpu_s(pids: list[int]) -> float:
    """CPU time (user + system) these processes have used so far (s)."""
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


class Cpu:
    """CPU time per call of each part: the replicas' Python, their Lean processes, HAProxy and the client."""

    def __init__(self, c: Cluster) -> None:
        replicas = [r.child.process.pid for r in c.replicas]
        self.parts = {
            "replica": replicas,
            "lean": [pid for r in replicas for pid in descendants(r)],
            "haproxy": [c.haproxy.process.pid],
        }
        self.total: dict[str, float] = dict.fromkeys([*self.parts, "client"], 0.0)
        self.calls = 0

    def now(self) -> dict[str, float]:
        times = os.times()
        return {**{name: cpu_s(pids) for name, pids in self.parts.items()}, "client": times.user + times.system}

    def add(self, before: dict[str, float], after: dict[str, float], calls: int) -> None:
        for name in self.total:
            self.total[name] += after[name] - before[name]
        self.calls += calls

    def line(self) -> str:
        per = {name: seconds / self.calls * 1e3 for name, seconds in self.total.items()}
        return "CPU per call: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in per.items())


async def phase(c: Cluster, team: list[Workspace], calls: int, cpu: Cpu) -> float:
    """Every workspace makes `calls` calls at once; calls per second over the wall time."""
    before = cpu.now()
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for workspace in team:
            tg.start_soon(workspace.work, c.url, calls)
    wall = time.perf_counter() - t0
    cpu.add(before, cpu.now(), len(team) * calls)
    return len(team) * calls / wall


async def measure(replicas: int, team: list[Workspace], lean: Any, rounds: int, calls: int) -> list[float]:
    """Throughput of `rounds` phases with `replicas` replicas (after warming every workspace)."""
    async with cluster(replicas, lean.server_cmd(), env=lean.env()) as c:
        async with anyio.create_task_group() as tg:
            for workspace in team:
                tg.start_soon(workspace.warm, c.url)
        placement = await c.placement()
        spread = {name: list(placement.values()).count(name) for name in sorted(set(placement.values()))}
        cpu = Cpu(c)
        out = [await phase(c, team, calls, cpu) for _ in range(rounds)]
        python = rss_mib(cpu.parts["replica"]) / replicas
        lean_mib = rss_mib(cpu.parts["lean"]) / len(team)
        print(
            f"{replicas} replica(s): workspaces per replica {spread}; memory: {python:.0f} MiB per replica process, "
            f"{lean_mib:.0f} MiB of Lean per workspace; {cpu.line()}",
            flush=True,
        )
        return out


async def failover(team: list[Workspace], lean: Any) -> list[tuple[float, float, float]]:
    """Kill the busiest of 3 replicas; per moved workspace: kill -> stale answer, -> first success, cold call."""
    async with cluster(3, lean.server_cmd(), env=lean.env()) as c:
        handles: dict[str, Any] = {}

        async def prepare(workspace: Workspace) -> None:
            await workspace.warm(c.url)
            text = "theorem held (p : Prop) (hp : p) : p := hp"
            ran = await workspace.ok(c.url, "lean_run_at_handle", path=PATH, version=1, line=3, character=0, text=text)
            handles[workspace.root] = ran["next_handle"]

        async with anyio.create_task_group() as tg:
            for workspace in team:
                tg.start_soon(prepare, workspace)
        placement = await c.placement()
        victim = max(sorted(set(placement.values())), key=list(placement.values()).count)
        moved = [workspace for workspace in team if placement[workspace.root] == victim]
        timeline: list[tuple[float, float, float]] = []

        async def recover(workspace: Workspace, killed: float) -> None:
            arguments = {"path": PATH, "handle": handles[workspace.root], "text": "#check held"}
            stale = await tool(workspace.http, c.url, "lean_run_with", {**workspace.ws, **arguments})
            stale_at = time.monotonic()
            assert stale["structuredContent"]["data"] == {"reason": "staleSession"}, stale
            await workspace.work(c.url, 1)
            ok_at = time.monotonic()
            await workspace.work(c.url, 1)
            timeline.append((stale_at - killed, ok_at - killed, time.monotonic() - ok_at))

        killed = await c.kill(victim)
        async with anyio.create_task_group() as tg:
            for workspace in moved:
                tg.start_soon(recover, workspace, killed)
        assert (await c.states())[victim].startswith("DOWN")
        return timeline


async def main(rounds: int = 3, calls: int = 100) -> dict[str, float]:
    if haproxy_binary() is None:
        raise SystemExit("bench.deploy needs haproxy: apt-get install -y haproxy")
    with tempfile.TemporaryDirectory() as tmp:
        lean, built = built_project(Path(tmp) / "demo")
        roots = []
        for i in range(WORKSPACES):
            dest = Path(tmp) / f"ws{i}"
            shutil.copytree(built, dest, symlinks=True)
            roots.append(dest.resolve())
        team = [Workspace(root) for root in roots]
        try:
            one: list[float] = []
            three: list[float] = []
            for _ in range(2):  # alternate, so drift on this shared machine hits both
                one += await measure(1, team, lean, rounds, calls)
                three += await measure(3, team, lean, rounds, calls)
            m1, m3 = statistics.median(one), statistics.median(three)
            print(
                f"deploy throughput ({WORKSPACES} workspaces, lean_run_at + lean_hover): 1 replica median "
                f"{m1:.1f} calls/s, 3 replicas median {m3:.1f} calls/s, ratio {m3 / m1:.2f} (n={len(one)} phases "
                f"of {WORKSPACES * calls} calls each)",
                flush=True,
            )
            timeline = await failover(team, lean)
            for stale_s, ok_s, next_s in timeline:
                print(
                    f"failover: kill -> stale-handle answer {stale_s * 1e3:.0f} ms, -> first success on the new "
                    f"replica {ok_s * 1e3:.0f} ms (the call after it: {next_s * 1e3:.0f} ms)",
                    flush=True,
                )
        finally:
            for workspace in team:
                await workspace.http.aclose()
        return {"three_vs_one": m3 / m1, "failover_first_success_s": max(ok for _, ok, _ in timeline)}


if __name__ == "__main__":
    numbers = [int(arg) for arg in sys.argv[1:3]]
    anyio.run(lambda: main(*numbers))
