"""lean-beam-mcp side by side with lean-lsp-mcp (the most used Lean MCP server) on the same real Lean and files.

The peer, `lean-lsp-mcp==0.29.0` from PyPI (the version issue 11 measured), is installed into its own virtual
environment under the bench's temporary directory (set `BEAM_BENCH_PEER_VENV=DIR` to keep and reuse one). Both
servers run over stdio under the same official MCP SDK client (`mcp.Client`, legacy handshake, which the peer
speaks), on the lane's real Lean 4.35 (`BEAM_TEST_TOOLCHAIN`, the toolchain's bin directories first on PATH, where
the peer finds `lake` and `lean`) and on one copy of the demo project, with `LEAN_PROJECT_PATH` naming it for the
peer. Subject and peer alternate in every measurement. Rows:

- cold start: spawn the server and run the handshake, until the `tools/list` answer;
- hover / goals on the demo files: `lean_hover` vs `lean_hover_info`, `lean_goals` (mode before) vs `lean_goal`;
- speculation on a file of 1500 declarations (`tests.support.projects.long_file(1500)`, a `by` proof at the top,
  a placeholder declaration right after the imports and one at the end, then an empty last line): one
  declaration run on the empty line before the 1500 declarations, Beam `lean_run_at` vs the peer's
  `lean_multi_attempt` with that one snippet (which it puts on that same line), settled (and, once, on the last
  line, after all of them), then right after an edit at the end and at the top (a placeholder's value changes:
  the line count stays, everything after it elaborates again): Beam calls `lean_update` and probes at once, the
  peer (which reads the file from disk on every call) probes at once; several consecutive calls, each call's
  time printed. Between two measurements each server is let settle
  (`lean_sync` / `lean_diagnostic_messages`), so neither measures while the other's Lean is still busy;
- goals and hover at the top of that file, settled and right after the edit at the top.

Every row prints both figures and the ratio peer/Beam (how many times faster Beam is).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from tests.support import projects
from tests.support.toolchain import Toolchain

from bench._common import built_project
from bench.mcp_overhead import server_binary
from mcp import Client, StdioServerParameters

PEER = "lean-lsp-mcp==0.29.0"
LONG = "Demo/Long.lean"
DECLARATIONS = 1500
PROBE = "theorem probe (p : Prop) (hp : p) : p := hp"
TARGET = "theorem target (p : Prop) (hp : p) : p := by\n  skip\n"
# 0-based positions in the long file: line 3 is `def edited : MyNat := ...` (hovered at `MyNat`), line 4 is
# empty (where the probe goes, before the 1500 declarations), line 6 is the `skip` of `theorem target`.
EDITED_LINE, PROBE_LINE, GOAL_LINE = 3, 4, 6
CALL_TIMEOUT = 300
Call = Callable[[], Awaitable[object]]
"""One timed call of a subject or a peer."""


def long_text(top: str, end: str) -> str:
    """The long file with the two placeholders set to `top` and `end`."""
    head = "prelude\nimport Demo.Basic\n\n"
    text = projects.long_file(DECLARATIONS, target=TARGET)
    assert text.startswith(head)
    return f"{head}def edited : MyNat := {top}\n\n{text[len(head) :]}\ndef tail : MyNat := {end}\n\n"


async def install_peer(base: Path) -> Path:
    """The `lean-lsp-mcp` executable of a virtual environment holding the pinned peer (created when missing)."""
    venv = Path(os.environ.get("BEAM_BENCH_PEER_VENV") or base / "peer-venv")
    exe = venv / "bin" / "lean-lsp-mcp"
    if not exe.exists():
        await anyio.run_process([sys.executable, "-m", "venv", str(venv)])
        await anyio.run_process([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", PEER], stderr=None)
    return exe


class Server:
    """One MCP server under the SDK client: how to start it and how its tools are called."""

    def __init__(self, name: str, params: StdioServerParameters) -> None:
        self.name = name
        self.params = params
        self.client: Client | None = None

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Client]:
        async with Client(self.params, mode="legacy") as client:
            self.client = client
            try:
                yield client
            finally:
                self.client = None

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self.client is not None
        with anyio.fail_after(CALL_TIMEOUT):
            result = await self.client.call_tool(tool, arguments)
        assert result.is_error is False, (self.name, tool, result)
        assert isinstance(result.structured_content, dict), (self.name, tool, result)
        return result.structured_content


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    t0 = time.perf_counter()
    await call()
    return time.perf_counter() - t0


def row(name: str, beam: list[float], peer: list[float]) -> float:
    """Print one row (medians, each call when few) and return peer/Beam."""
    mb, mp = statistics.median(beam), statistics.median(peer)

    def calls(xs: list[float]) -> str:
        return f" [{', '.join(f'{x * 1e3:.0f}' for x in xs)} ms]" if len(xs) <= 8 else ""

    ratio = mp / mb
    print(
        f"peers {name}: lean-beam-mcp median {mb * 1e3:.1f} ms{calls(beam)}, lean-lsp-mcp median {mp * 1e3:.1f} ms"
        f"{calls(peer)}, peer/Beam {ratio:.1f}x (n={len(beam)})",
        flush=True,
    )
    return ratio


class Bench:
    def __init__(self, root: Path, beam: Server, peer: Server) -> None:
        self.root = root
        self.beam = beam
        self.peer = peer
        self.ws = {"root": str(root)}
        self.version = 0
        self.lines = 0
        self.top = self.end = "MyNat.zero"

    def edited(self, where: str) -> str:
        """The long file with the placeholder at the top or at the end flipped (the text changes every time)."""
        flip = {"MyNat.zero": "MyNat.one", "MyNat.one": "MyNat.zero"}
        if where == "top":
            self.top = flip[self.top]
        else:
            self.end = flip[self.end]
        return long_text(self.top, self.end)

    def file(self, rel: str) -> str:
        return str(self.root / rel)

    def write(self, text: str) -> None:
        (self.root / LONG).write_text(text, encoding="utf-8")
        self.lines = len(text.splitlines())

    # ---- the calls (positions 0-based here; the peer's are 1-based) -------------------------------------------
    async def beam_update(self) -> None:
        self.version = (await self.beam.call("lean_update", {"workspace": self.ws, "path": LONG}))["version"]

    async def beam_settle(self) -> None:
        self.version = (await self.beam.call("lean_sync", {"workspace": self.ws, "path": LONG}))["version"]

    async def peer_settle(self) -> None:
        await self.peer.call("lean_diagnostic_messages", {"file_path": self.file(LONG)})

    async def beam_probe(self, line: int = PROBE_LINE) -> None:
        args = {"workspace": self.ws, "path": LONG, "version": self.version, "line": line, "character": 0}
        result = await self.beam.call("lean_run_at", args | {"text": PROBE})
        assert result["success"] is True, result

    async def peer_probe(self, line: int = PROBE_LINE) -> None:
        result = await self.peer.call(
            "lean_multi_attempt", {"file_path": self.file(LONG), "line": line + 1, "snippets": [PROBE]}
        )
        assert not result["items"][0]["diagnostics"], result

    async def beam_goals(self, rel: str, line: int, character: int) -> None:
        args = {"workspace": self.ws, "path": rel, "line": line, "character": character, "mode": "before"}
        result = await self.beam.call("lean_goals", args | {"version": self.version_of(rel)})
        assert result["goals"], result

    async def peer_goals(self, rel: str, line: int, character: int) -> None:
        result = await self.peer.call(
            "lean_goal", {"file_path": self.file(rel), "line": line + 1, "column": character + 1}
        )
        assert result["goals"], result

    async def beam_hover(self, rel: str, line: int, character: int) -> None:
        args = {"workspace": self.ws, "path": rel, "line": line, "character": character}
        result = await self.beam.call("lean_hover", args | {"version": self.version_of(rel)})
        assert result.get("contents"), result

    async def peer_hover(self, rel: str, line: int, character: int) -> None:
        result = await self.peer.call(
            "lean_hover_info", {"file_path": self.file(rel), "line": line + 1, "column": character + 1}
        )
        assert result["info"], result

    def version_of(self, rel: str) -> int:
        return self.version if rel == LONG else 1

    # ---- rows ---------------------------------------------------------------------------------------------------
    async def alternate(
        self, beam: Callable[[], Awaitable[object]], peer: Callable[[], Awaitable[object]], rounds: int
    ) -> tuple[list[float], list[float]]:
        b: list[float] = []
        p: list[float] = []
        for i in range(rounds):
            if i % 2 == 0:
                b.append(await timed(beam))
                p.append(await timed(peer))
            else:
                p.append(await timed(peer))
                b.append(await timed(beam))
        return b, p

    async def after_edit(
        self,
        edits: list[str],
        beam: Callable[[], Awaitable[object]],
        peer: Callable[[], Awaitable[object]],
        calls: int,
        label: str,
    ) -> tuple[list[float], list[float]]:
        """For each edit: write it, then Beam (`lean_update` + `calls` probes) and the peer (`calls` probes),
        the other one settled first; the first side alternates. Each call's time is printed, and a row for the
        first call after each edit; returns every call's time."""
        b_all: list[float] = []
        p_all: list[float] = []
        b_first: list[float] = []
        p_first: list[float] = []
        for i, text in enumerate(edits):
            self.write(text)
            order = [("beam", beam), ("peer", peer)] if i % 2 == 0 else [("peer", peer), ("beam", beam)]
            for side, probe in order:
                if side == "beam":
                    await self.beam_update()
                times = [await timed(probe) for _ in range(calls)]
                (b_all if side == "beam" else p_all).extend(times)
                (b_first if side == "beam" else p_first).append(times[0])
                print(
                    f"peers {label}, edit {i + 1}, {side}: " + ", ".join(f"{t * 1e3:.0f}" for t in times) + " ms",
                    flush=True,
                )
                await (self.beam_settle() if side == "beam" else self.peer_settle())
            await self.beam_settle()
            await self.peer_settle()
        row(f"{label}, first call after each edit", b_first, p_first)
        return b_all, p_all


async def cold_start(beam: Server, peer: Server, rounds: int) -> float:
    async def start(server: Server) -> float:
        t0 = time.perf_counter()
        async with server.session() as client:
            await client.list_tools()
            return time.perf_counter() - t0  # shutting down is not timed

    await start(beam)  # warm the OS file cache for both
    await start(peer)
    b: list[float] = []
    p: list[float] = []
    for i in range(rounds):
        if i % 2 == 0:
            b.append(await start(beam))
            p.append(await start(peer))
        else:
            p.append(await start(peer))
            b.append(await start(beam))
    return row("cold start to tools/list", b, p)


async def run(root: Path, tc: Toolchain, peer_exe: Path, rounds: int, slow_rounds: int) -> dict[str, float]:
    env = tc.env()
    cmd = shlex.split(os.environ.get("BEAM_BENCH_SERVER", "")) or server_binary()
    beam = Server(
        "lean-beam-mcp",
        StdioServerParameters(command=cmd[0], args=[*cmd[1:], "--lean-cmd", shlex.join(tc.server_cmd())], env=env),
    )
    peer = Server(
        "lean-lsp-mcp", StdioServerParameters(command=str(peer_exe), env=env | {"LEAN_PROJECT_PATH": str(root)})
    )
    ratios = {"cold_start": await cold_start(beam, peer, rounds=max(4, rounds // 3))}
    async with beam.session(), peer.session():
        bench = Bench(root, beam, peer)
        # Demo files: warm both (open the documents), then alternate.
        for rel in ("Demo/Proofs.lean", "Demo/Goals.lean"):
            await beam.call("lean_sync", {"workspace": bench.ws, "path": rel})
            await peer.call("lean_diagnostic_messages", {"file_path": bench.file(rel)})
        b, p = await bench.alternate(
            lambda: bench.beam_hover("Demo/Proofs.lean", 3, 29),
            lambda: bench.peer_hover("Demo/Proofs.lean", 3, 29),
            rounds,
        )
        ratios["hover"] = row("hover (Demo/Proofs.lean)", b, p)
        b, p = await bench.alternate(
            lambda: bench.beam_goals("Demo/Goals.lean", 4, 2), lambda: bench.peer_goals("Demo/Goals.lean", 4, 2), rounds
        )
        ratios["goals"] = row("goals (Demo/Goals.lean)", b, p)

        # The long file, settled.
        bench.write(long_text("MyNat.zero", "MyNat.zero"))
        await bench.beam_settle()
        await bench.peer_settle()
        await bench.beam_probe()  # the first probe opens Beam's mirror; the first multi-attempt warms the peer's pool
        await bench.peer_probe()
        b, p = await bench.alternate(bench.beam_probe, bench.peer_probe, slow_rounds)
        settled_probe = statistics.median(b)
        ratios["run_at_settled"] = row(
            f"lean_run_at vs lean_multi_attempt before {DECLARATIONS} declarations, settled", b, p
        )
        last = bench.lines - 1
        await bench.beam_probe(last)
        await bench.peer_probe(last)
        b, p = await bench.alternate(lambda: bench.beam_probe(last), lambda: bench.peer_probe(last), slow_rounds)
        ratios["run_at_last_line_settled"] = row(
            f"lean_run_at vs lean_multi_attempt after {DECLARATIONS} declarations (last line), settled", b, p
        )
        b, p = await bench.alternate(
            lambda: bench.beam_goals(LONG, GOAL_LINE, 2), lambda: bench.peer_goals(LONG, GOAL_LINE, 2), rounds
        )
        settled_goals = statistics.median(b)
        ratios["goals_long_settled"] = row("goals at the top of the long file, settled", b, p)
        b, p = await bench.alternate(
            lambda: bench.beam_hover(LONG, EDITED_LINE, 13), lambda: bench.peer_hover(LONG, EDITED_LINE, 13), rounds
        )
        settled_hover = statistics.median(b)
        ratios["hover_long_settled"] = row("hover at the top of the long file, settled", b, p)

        # Right after an edit: at the end, then at the top.
        async def after_edits(
            where: str, what: str, label: str, beam: Call, peer: Call, calls: int, settled: float
        ) -> float:
            edits = [bench.edited(where) for _ in range(slow_rounds)]
            b, p = await bench.after_edit(edits, beam, peer, calls, f"{what} after an edit at the {where}")
            ratio = row(f"{label} right after an edit at the {where}", b, p)
            median = statistics.median(b)
            print(f"peers   Beam after the {where} edit / Beam settled: {median / settled:.1f}x", flush=True)
            return ratio

        probe, peer_probe = bench.beam_probe, bench.peer_probe
        ratios["run_at_after_end_edit"] = await after_edits(
            "end", "run_at", "lean_run_at", probe, peer_probe, 4, settled_probe
        )
        ratios["run_at_after_top_edit"] = await after_edits(
            "top", "run_at", "lean_run_at", probe, peer_probe, 4, settled_probe
        )
        ratios["goals_after_top_edit"] = await after_edits(
            "top",
            "goals",
            "goals",
            lambda: bench.beam_goals(LONG, GOAL_LINE, 2),
            lambda: bench.peer_goals(LONG, GOAL_LINE, 2),
            3,
            settled_goals,
        )
        ratios["hover_after_top_edit"] = await after_edits(
            "top",
            "hover",
            "hover",
            lambda: bench.beam_hover(LONG, EDITED_LINE, 13),
            lambda: bench.peer_hover(LONG, EDITED_LINE, 13),
            3,
            settled_hover,
        )
    return ratios


async def main(rounds: int = 30, slow_rounds: int = 3) -> dict[str, float]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        peer_exe = await install_peer(Path(tmp))
        tc, root = built_project(Path(tmp) / "demo")
        ratios = await run(root, tc, peer_exe, rounds, slow_rounds)
    print(f"peers bench took {time.perf_counter() - t0:.1f} s", flush=True)
    return ratios


if __name__ == "__main__":
    anyio.run(main)
