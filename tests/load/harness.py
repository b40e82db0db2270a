"""The load lane's engine: simulated agents over HTTP, workspaces with known answers, memory from outside, chaos.

A *workspace* is a copy of the built demo project with one file of its own, `Demo/Load.lean`, whose every answer
names the workspace's index `i` (a theorem `load{i}`, a goal about `p{i}`, `i % 3` errors naming `nope{i}`), so an
answer about another workspace, or from nothing, cannot pass for the right one. An *agent* is one HTTP client
(MCP 2026-07-28 requests with the headers a conforming client sends, `Mcp-Param-Workspace` included) that calls
tools back to back in a fixed mix (`MIX`): hovers, goals, syncs, probes (`lean_run_at`) and batches of attempts
(`lean_attempts`). Like an agent at work it stays in one workspace and moves to another at random now and then
(`SWITCH`), so the workspaces nobody works in go idle and the budget evicts them. Every answer is checked against
the expected one (`Workspace.wrong`); a refusal that promises nothing ran (`busy`, a draining replica's 503, a
connection refused while a replica restarts) or a version a moved workspace no longer has is retried, counted by
reason, and must end in the right answer (nothing lost). A sync must report exactly the workspace's errors: fewer
would be a false clean.

`Sampler` measures the Lean trees under every replica process from outside (`/proc`, the governor's rule: each
process's anonymous memory plus a tree's file pages once; and the plain sum of resident sets), and scrapes each
replica's `/metrics` for its own figure and its evictions. `chaos` drains one replica at random times and starts
it again; `rolling_restart` restarts every replica in turn.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import math
import os
import random
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx

from beam_broker._serve import memory
from tests.deploy.cluster import META, MODERN, Cluster

LOAD_FILE = "Demo/Load.lean"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CALL_TIMEOUT = 120.0
"""Seconds one HTTP request may take (a cold start under load included)."""
MAX_TRIES = 40
"""Tries of one call before it counts as lost (refusals, restarts and moves are retried until then)."""
RETRY_PAUSE = 0.1
"""Seconds before retrying a call refused by a replica that is going away (HAProxy needs a moment)."""
MIX: dict[str, float] = {
    "lean_hover": 0.30,
    "lean_goals": 0.25,
    "lean_sync": 0.15,
    "lean_run_at": 0.20,
    "lean_attempts": 0.10,
}
"""The tools agents call, and how often (cheap calls dominate, as with agents at work)."""
SWITCH = 0.05
"""The chance that an agent's next call is in another workspace (picked at random): about every 20 calls."""


def source(index: int) -> str:
    """Workspace `index`'s own file: every answer about it names `index`."""
    return (
        "prelude\nimport Demo.Basic\n\n"
        f"theorem load{index} : MyTrue := myTrue\n\n"
        f"theorem step{index} (p{index} : Prop) (hp : p{index}) : p{index} := by\n  skip\n"
        + f"example : MyTrue := nope{index}\n"
        * (index % 3)
    )


def errors(index: int) -> int:
    """Lean's errors in workspace `index`'s file: `skip` and the unsolved goal it leaves, and one per `nope`."""
    return 2 + index % 3


@dataclasses.dataclass(frozen=True)
class Workspace:
    """One workspace of the run: its index (what its answers name) and root."""

    index: int
    root: str

    def arguments(self, tool: str, version: int) -> dict[str, Any]:
        """The arguments of one call of `tool` in this workspace."""
        base: dict[str, Any] = {"workspace": {"root": self.root}, "path": LOAD_FILE}
        i = self.index
        if tool == "lean_sync":
            return {**base, "diagnostics_in_result": True}
        if tool == "lean_hover":
            return {**base, "version": version, "line": 3, "character": 9}
        if tool == "lean_goals":
            return {**base, "version": version, "line": 6, "character": 2, "mode": "before"}
        if tool == "lean_run_at":
            return {**base, "version": version, "line": 4, "character": 0, "text": f"example : MyTrue := load{i}\n"}
        texts = [f"example : MyTrue := load{i}", "example : MyTrue := nope", f"theorem again{i} : MyTrue := myTrue"]
        return {**base, "version": version, "line": 4, "character": 0, "texts": texts}

    def wrong(self, tool: str, out: dict[str, Any]) -> str | None:
        """What is wrong with an answer of `tool` in this workspace, or None when it is the expected one."""
        i = self.index
        if out.get("workspace") != {"root": self.root}:
            return f"answered about {out.get('workspace')}"
        if tool == "lean_sync":
            diagnostics = out["diagnostics"]
            messages = [item["message"] for item in diagnostics["items"]]
            if diagnostics["counts"]["error"] != errors(i):
                clean = " (a false clean)" if diagnostics["counts"]["error"] < errors(i) else ""
                return f"{diagnostics['counts']['error']} errors, expected {errors(i)}{clean}: {messages}"
            if sum(f"`nope{i}`" in m for m in messages) != i % 3 or out["readiness"]["save_ready"]:
                return f"not this workspace's errors: {messages}"
            return None
        if tool == "lean_hover":
            value = out.get("contents", {}).get("value")
            return None if value == f"```lean\nload{i} : MyTrue\n```" else f"hover {value!r}"
        if tool == "lean_goals":
            hyps = [{"names": [f"p{i}"], "type": "Prop"}, {"names": ["hp"], "type": f"p{i}"}]
            want = [{"goalPrefix": "⊢ ", "target": f"p{i}", "hyps": hyps}]
            return None if out.get("goals") == want else f"goals {out.get('goals')!r}"
        if tool == "lean_run_at":
            ok = out.get("success") is True and out.get("messages") == []
            return None if ok else f"run_at {out.get('success')} {out.get('messages')}"
        got = [attempt["success"] for attempt in out.get("attempts", [])]
        return None if got == [True, False, True] else f"attempts {got}"


def make_workspaces(built: Path, where: Path, count: int) -> list[Workspace]:
    """`count` copies of a built demo project, each with its own `Demo/Load.lean` (symlinked build outputs)."""
    import shutil

    out = []
    for i in range(count):
        root = where / f"ws{i}"
        shutil.copytree(built, root, symlinks=True)
        (root / LOAD_FILE).write_text(source(i), encoding="utf-8")
        out.append(Workspace(i, str(root.resolve())))
    return out


@dataclasses.dataclass
class Stats:
    """What the agents saw: latencies per tool (first try to right answer), retries, wrong and lost answers."""

    latencies: dict[str, list[float]] = dataclasses.field(default_factory=lambda: collections.defaultdict(list))
    retries: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    wrong: list[str] = dataclasses.field(default_factory=list)
    lost: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)
    """Calls that were not answered right on their first try (the rolling restart wants none)."""
    started: float = dataclasses.field(default_factory=time.monotonic)
    ended: float = 0.0

    @property
    def calls(self) -> int:
        return sum(len(each) for each in self.latencies.values())

    def throughput(self) -> float:
        return self.calls / max((self.ended or time.monotonic()) - self.started, 1e-9)

    def table(self) -> dict[str, dict[str, float]]:
        """Per tool: calls, p50 and p99 in ms."""
        out: dict[str, dict[str, float]] = {}
        for tool in sorted(self.latencies):
            values = sorted(self.latencies[tool])
            out[tool] = {"calls": len(values), "p50_ms": percentile(values, 50), "p99_ms": percentile(values, 99)}
        return out

    def p99(self) -> float:
        """p99 over every call, in ms."""
        return percentile(sorted(v for each in self.latencies.values() for v in each), 99)


def percentile(values: Sequence[float], p: float) -> float:
    """The `p`th percentile of sorted seconds, in ms (nearest rank; 0 for no values)."""
    if not values:
        return 0.0
    rank = max(0, min(len(values) - 1, math.ceil(p / 100 * len(values)) - 1))
    return values[rank] * 1000


class Refused(Exception):
    """A try that ran nothing or that a move invalidated: retried, and counted under `reason`."""

    def __init__(self, reason: str, pause: float = RETRY_PAUSE) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pause = pause


async def tool_call(http: httpx.AsyncClient, url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One MCP 2026-07-28 `tools/call` with conforming headers; its structured result.

    Raises:
        Refused: nothing ran (busy, 503, connection refused), or the call's version or handle belongs elsewhere.
        AssertionError: any other failure (a wrong error is a wrong answer).
    """
    params = {"name": name, "arguments": arguments, "_meta": META}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {**HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    headers["mcp-param-workspace"] = arguments["workspace"]["root"]  # printable ASCII: test paths
    try:
        response = await http.post(url, content=json.dumps(message).encode(), headers=headers)
    except httpx.TransportError as exc:  # a replica went away mid-request (a kill would; a drain must not)
        raise Refused(f"transport:{type(exc).__name__}") from exc
    if response.status_code in (502, 503, 504):
        raise Refused(f"http{response.status_code}")
    assert response.status_code == 200, (response.status_code, response.text[:500])
    body = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [line for line in body.splitlines() if line.startswith("data: ")]
        if not events:
            raise Refused("streamEnded")
        body = events[-1][len("data: ") :]
    reply = json.loads(body)
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    out: dict[str, Any] = result.get("structuredContent") or {}
    if result.get("isError"):
        code, data = out.get("code"), dict(out.get("data") or {})
        if code == "busy":
            raise Refused(f"busy:{data.get('reason', data.get('scope', ''))}", data.get("retryAfterMs", 100) / 1000)
        if code == "contentModified" and data.get("reason") in ("documentVersionMismatch", "staleSession"):
            raise Refused(f"moved:{data['reason']}", 0)
        raise AssertionError(f"{name} failed: {out}")
    return out


class Agent:
    """One simulated agent: an HTTP client calling tools on random workspaces until told to stop."""

    def __init__(self, url: str, workspaces: Sequence[Workspace], stats: Stats, seed: int, *, strict: bool = False):
        self.url = url
        self.workspaces = workspaces
        self.stats = stats
        self.rng = random.Random(seed)
        self.strict = strict
        """Every call must be answered right on its first try (a rolling restart): anything else is a failure."""
        self.versions: dict[str, int] = {}

    async def run(self, until: float, stop: anyio.Event) -> None:
        """Call tools back to back until `time.monotonic()` passes `until` or `stop` is set."""
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT, limits=limits) as http:
            tools, weights = list(MIX), list(MIX.values())
            ws = self.rng.choice(self.workspaces)
            while time.monotonic() < until and not stop.is_set():
                if self.rng.random() < SWITCH:
                    ws = self.rng.choice(self.workspaces)
                await self.call(http, ws, self.rng.choices(tools, weights)[0])

    async def warm(self, workspaces: Sequence[Workspace]) -> None:
        """Sync each of `workspaces` once (their Lean starts)."""
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
            for ws in workspaces:
                await self.call(http, ws, "lean_sync")

    async def call(self, http: httpx.AsyncClient, ws: Workspace, tool: str) -> None:
        """One call, retried while refused, its answer checked; recorded in the stats."""
        started = time.perf_counter()
        for attempt in range(MAX_TRIES):
            try:
                out = await tool_call(http, self.url, tool, ws.arguments(tool, self.versions.get(ws.root, 1)))
            except Refused as refused:
                self.stats.retries[refused.reason] += 1
                if self.strict:
                    self.stats.failed.append(f"{tool} ws{ws.index}: {refused.reason}")
                if refused.reason.startswith("moved"):
                    synced = await self.sync_version(http, ws)
                    if synced is None:
                        continue
                await anyio.sleep(refused.pause * (1 + attempt / 4))
                continue
            except AssertionError as exc:
                self.stats.wrong.append(f"{tool} ws{ws.index}: {exc}")
                return
            if tool == "lean_sync" and "version" in out:
                self.versions[ws.root] = out["version"]
            problem = ws.wrong(tool, out)
            if problem is not None:
                self.stats.wrong.append(f"{tool} ws{ws.index}: {problem}")
                return
            self.stats.latencies[tool].append(time.perf_counter() - started)
            return
        self.stats.lost.append(f"{tool} ws{ws.index}: still refused after {MAX_TRIES} tries")

    async def sync_version(self, http: httpx.AsyncClient, ws: Workspace) -> int | None:
        """The file's version where the workspace is now (a sync), or None when that too was refused."""
        try:
            out = await tool_call(http, self.url, "lean_sync", ws.arguments("lean_sync", 1))
        except Refused as refused:
            self.stats.retries[refused.reason] += 1
            return None
        version: int = out["version"]
        self.versions[ws.root] = version
        return version


async def agents(
    url: str,
    workspaces: Sequence[Workspace],
    count: int,
    seconds: float,
    *,
    strict: bool = False,
    seed: int = 0,
    stop: anyio.Event | None = None,
    warm: bool = False,
    check: bool = True,
) -> Stats:
    """`count` agents calling for `seconds` (or until `stop` is set; each finishes the call it is in); what they saw.

    With `warm`, instead, one sync of every workspace in turn (spread over `count` agents). With `check` (the
    default) a wrong or lost answer fails at once; without, the caller reads them in the stats.
    """
    stats = Stats()
    until = time.monotonic() + seconds
    async with anyio.create_task_group() as tg:
        for k in range(count):
            agent = Agent(url, workspaces, stats, seed * 1000 + k, strict=strict)
            if warm:
                tg.start_soon(agent.warm, workspaces[k::count])
            else:
                tg.start_soon(agent.run, until, stop or anyio.Event())
    stats.ended = time.monotonic()
    if check:
        assert not stats.wrong, f"wrong answers: {stats.wrong[:10]}"
        assert not stats.lost, f"lost calls: {stats.lost[:10]}"
    assert stats.calls > 0 or warm or stats.wrong, "no call was answered"
    return stats


# ---- memory and counters, from outside ----------------------------------------------------------------------------
@dataclasses.dataclass
class Sample:
    """One look at one replica: its Lean trees measured from outside, and what its /metrics said."""

    at: float
    replica: str
    held: int
    rss: int
    reported: int | None


@dataclasses.dataclass
class Sampler:
    """Samples every replica of a cluster (or a single server's process) until stopped."""

    pids: Callable[[], dict[str, int]]
    """The replicas now: name -> process id."""
    metrics_urls: Callable[[], dict[str, str]]
    interval: float = 0.2
    samples: list[Sample] = dataclasses.field(default_factory=list)
    evictions: dict[tuple[str, int], float] = dataclasses.field(default_factory=dict)
    """The last `beam_evictions_total` seen per replica process (a restarted replica counts from 0 again)."""

    def lean(self, pid: int) -> tuple[int, int]:
        """What the Lean trees under one replica process hold (governor's rule) and their plain resident sum."""
        held = rss = 0
        for child in memory._children(pid) or []:
            usage = memory.measure(child)
            held += usage.total
            rss += usage.rss
        return held, rss

    async def run(self, http: httpx.AsyncClient) -> None:
        while True:
            urls = self.metrics_urls()
            for name, pid in self.pids().items():
                held, rss = self.lean(pid)
                reported = None
                with contextlib.suppress(httpx.HTTPError, KeyError):
                    if name in urls:
                        figures = parse_metrics((await http.get(urls[name], timeout=5)).text)
                        reported = int(figures.get("beam_lean_resident_bytes_all", 0))
                        self.evictions[(name, pid)] = figures.get("beam_evictions_total", 0.0)
                self.samples.append(Sample(time.monotonic(), name, held, rss, reported))
            await anyio.sleep(self.interval)

    def peak(self, since: float = 0.0, until: float = float("inf")) -> tuple[int, int]:
        """The largest figures one replica reached from `since` to before `until`: held, plain resident sum."""
        chosen = [s for s in self.samples if since <= s.at < until]
        return max((s.held for s in chosen), default=0), max((s.rss for s in chosen), default=0)

    def total_evictions(self) -> int:
        return int(sum(self.evictions.values()))


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text: each metric name's values summed over its labels."""
    out: dict[str, float] = collections.defaultdict(float)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        out[name_labels.split("{", 1)[0]] += float(value)
    return out


@contextlib.asynccontextmanager
async def sampling(sampler: Sampler) -> AsyncIterator[Sampler]:
    """Run `sampler` in the background for the duration of the block."""
    async with httpx.AsyncClient() as http, anyio.create_task_group() as tg:
        tg.start_soon(sampler.run, http)
        try:
            yield sampler
        finally:
            tg.cancel_scope.cancel()


def cluster_sampler(c: Cluster) -> Sampler:
    def pids() -> dict[str, int]:
        return {r.name: r.child.process.pid for r in c.replicas if r.alive}

    def urls() -> dict[str, str]:
        return {r.name: r.url.rsplit("/", 1)[0] + "/metrics" for r in c.replicas if r.alive}

    return Sampler(pids, urls)


def cpu_seconds(pid: int) -> float:
    """CPU seconds of a process tree: every live process's own and reaped children's (ended ones count once)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for each in memory.descendants(pid):
        try:
            with open(f"/proc/{each}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        total += sum(int(fields[k]) for k in (11, 12, 13, 14)) / tick  # utime stime cutime cstime
    return total


# ---- chaos --------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Restarts:
    """Replica drains and restarts done, with each drained replica's exit status."""

    done: list[tuple[str, int]] = dataclasses.field(default_factory=list)


async def chaos(c: Cluster, until: float, every: float, rng: random.Random, restarts: Restarts) -> None:
    """Drain a random replica (SIGTERM) and start it again, at random intervals averaging `every` seconds."""
    while True:
        pause = rng.uniform(every / 2, every * 1.5)
        if time.monotonic() + pause >= until:
            return
        await anyio.sleep(pause)
        name = rng.choice([r.name for r in c.replicas])
        restarts.done.append((name, await c.drain_restart(name)))


async def rolling_restart(c: Cluster, restarts: Restarts, done: anyio.Event) -> None:
    """Every replica in turn: drain it, start it again, wait until HAProxy has it back; then set `done`."""
    for name in [r.name for r in c.replicas]:
        restarts.done.append((name, await c.drain_restart(name)))
    done.set()


def mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def report(title: str, stats: Stats) -> list[str]:
    """Lines for people: throughput, p50/p99 per tool, retries, wrong and lost answers."""
    lines = [f"{title}: {stats.calls} calls in {stats.ended - stats.started:.1f} s, {stats.throughput():.1f} calls/s"]
    for tool, row in stats.table().items():
        lines.append(f"  {tool:14} {row['calls']:6.0f} calls  p50 {row['p50_ms']:8.1f} ms  p99 {row['p99_ms']:8.1f} ms")
    retries = ", ".join(f"{k} {v}" for k, v in sorted(stats.retries.items())) or "none"
    lines.append(f"  retries: {retries}; wrong answers {len(stats.wrong)}, lost {len(stats.lost)}")
    return lines


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0
