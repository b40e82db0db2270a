"""`lean-beam-mcp --tools lean-lsp-mcp` against lean-lsp-mcp 0.32.0: the same six-call session, call by call.

Both servers run over stdio under the official MCP SDK client on the lane's real Lean 4.35 and the same copy of the
demo project (`LEAN_PROJECT_PATH` names it for both; the peer is installed as `bench/peers.py` does, pinned here
to 0.32.0). The session is lean-lsp-mcp's own calls: diagnostics, goal (before/after a line), hover, outline,
multi-attempt, run_code. Rows:

- cold pass: a fresh server for each run (each starts its Lean on the first call), each call's time, and the
  start: spawn to the end of the MCP handshake. The session's total is printed twice, without the start and from
  the spawn: lean-lsp-mcp imports everything before it answers `initialize`, Beam answers at once and loads its
  Lean stack while the client goes on, so the first call is where Beam pays what lean-lsp-mcp paid in its start.
  Both run from compiled bytecode, as an installed wheel does: lean-lsp-mcp's venv was compiled by pip; Beam's
  editable sources are compiled once into the bench's own `PYTHONPYCACHEPREFIX` before anything is measured (a
  development environment may set `PYTHONDONTWRITEBYTECODE`, and every start would compile them again);
- the first call after a pause: a fresh server per run, the first call (diagnostics) `PAUSE` seconds after the
  handshake, as an agent makes it once it has read the tool list (a server that starts its Lean at start-up, as
  `--tools lean-lsp-mcp` does, has it running by then; lean-lsp-mcp starts its Lean with that call);
- warm pass: the same session again in the running servers, median per call over `rounds`;
- multi-attempt with a long tail: one snippet on the line before 1500 declarations
  (`tests.support.projects.long_file`), settled, median over `slow_rounds`;
- the floor of the warm session: what any server that asks Lean for every answer pays at least. Lean's own time
  for the four calls that need Lean on an unchanged file (goal: two `plainGoal`s at once; hover; multi-attempt:
  a new version of a copy of the file with the snippet, elaborated, and its goal; run_code: a new version of a
  scratch document, elaborated), asked by a bare beam-lsp client on a Lean of its own, plus six MCP round trips
  (an SDK `ping` to each server: the client, stdio and the server's JSON-RPC, no tool). Diagnostics and the
  outline of an unchanged version need no Lean request. The best ratio any such server can reach is the peer's
  warm session over that floor.

Subject and peer alternate in every measurement; every row prints both and the ratio peer/Beam.
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from tests.support import projects

from bench._common import built_project
from bench.mcp_overhead import server_binary
from bench.peers import install_peer
from mcp import Client, StdioServerParameters

PEER = "lean-lsp-mcp==0.32.0"
LONG = "Demo/Long.lean"
PAUSE = 1.0
"""Seconds between the handshake and the first call in the pass that pauses there."""


def calls(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """The six-call session (1-based lines, as lean-lsp-mcp takes them)."""

    def f(rel: str) -> str:
        return str(root / rel)

    return [
        ("lean_diagnostic_messages", {"file_path": f("Demo/Broken.lean")}),
        ("lean_goal", {"file_path": f("Demo/Goals.lean"), "line": 5}),
        ("lean_hover_info", {"file_path": f("Demo/Proofs.lean"), "line": 4, "column": 28}),
        ("lean_file_outline", {"file_path": f("Demo/Proofs.lean")}),
        ("lean_multi_attempt", {"file_path": f("Demo/Goals.lean"), "line": 5, "snippets": ["exact hp"]}),
        ("lean_run_code", {"code": "prelude\nimport Demo.Basic\n#check myTrue\n"}),
    ]


def compiled_env(env: dict[str, str], cache: Path, python: str = sys.executable) -> dict[str, str]:
    """`env` for Beam's server with its sources compiled into `cache` (see the module docstring).

    Args:
        env: The server's environment.
        cache: The `PYTHONPYCACHEPREFIX` to compile into.
        python: The interpreter the server runs (another tree's, under `BEAM_BENCH_SERVER`).
    """
    out = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": str(cache)}
    where = "import importlib, os\nfor m in ('beam_broker', 'beam_feedback', 'beam_lsp', 'beam_mcp'):\n"
    where += "    print(os.path.dirname(importlib.import_module(m).__file__))"
    found = subprocess.run([python, "-c", where], env=out, check=True, capture_output=True, text=True)
    packages = found.stdout.split()  # the sources the server imports (an editable install's)
    subprocess.run([python, "-m", "compileall", "-q", *packages], env=out, check=True)
    return out


async def lean_floor(root: Path, server_cmd: list[str], env: dict[str, str], rounds: int) -> dict[str, float]:
    """Lean's own time (seconds, medians) for the warm session's calls that need Lean, asked by a bare client."""
    from beam_lsp import LeanClient, Point0

    goals_text = (root / "Demo/Goals.lean").read_text(encoding="utf-8")
    snippet = goals_text.replace("  skip", "  exact hp")
    assert snippet != goals_text
    header = "prelude\nimport Demo.Basic\n"
    times: dict[str, list[float]] = {"goal": [], "hover": [], "multi_attempt": [], "run_code": []}
    async with LeanClient.start(server_cmd, cwd=root, env=env) as client:
        goals, proofs = client.file("Demo/Goals.lean"), client.file("Demo/Proofs.lean")
        probe, scratch = client.file("Demo/GoalsFloorProbe.lean"), client.file("Demo/FloorScratch.lean")
        for f, text in ((goals, None), (proofs, None), (probe, goals_text), (scratch, header + "#check myTrue\n")):
            await f.open(text)
            await f.sync()

        async def goal() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(goals.plain_goal, Point0(4, 2))
                tg.start_soon(goals.plain_goal, Point0(4, 6))

        for i in range(rounds + 2):  # two rounds of warm-up
            t0 = time.perf_counter()
            await goal()
            t1 = time.perf_counter()
            await proofs.hover(Point0(3, 27))
            t2 = time.perf_counter()
            await probe.change(snippet, save=False)  # the snippet's version: elaborated, then its goal
            await client.sync(probe.uri, reported=True)  # the header is kept: Lean's final progress is the barrier
            await probe.plain_goal(Point0(4, 10))
            t3 = time.perf_counter()
            await probe.change(goals_text, save=False)  # back (not timed): the next round changes it again
            await client.sync(probe.uri, reported=True)
            t4 = time.perf_counter()
            await scratch.change(f"{header}-- run {i}\n#check myTrue\n", save=False)  # the command elaborated again
            await client.sync(scratch.uri, reported=True)
            t5 = time.perf_counter()
            if i >= 2:
                for name, seconds in zip(times, (t1 - t0, t2 - t1, t3 - t2, t5 - t4), strict=True):
                    times[name].append(seconds)
    return {name: statistics.median(values) for name, values in times.items()}


async def ping(client: Client, rounds: int) -> float:
    """The median MCP round trip of `ping` (seconds)."""
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        await client.send_ping()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


async def timed(client: Client, tool: str, args: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    with anyio.fail_after(300):
        result = await client.call_tool(tool, args)
    assert not result.is_error, (tool, result)
    return time.perf_counter() - t0


def show(label: str, beam: list[float], peer: list[float]) -> float:
    b, p = statistics.median(beam), statistics.median(peer)
    print(
        f"peers-compat {label}: lean-beam-mcp {b * 1e3:.1f} ms, lean-lsp-mcp {p * 1e3:.1f} ms, peer/Beam {p / b:.1f}x"
    )
    return p / b


async def main(rounds: int = 10, cold_runs: int = 5, slow_rounds: int = 3, paused_runs: int = 3) -> dict[str, float]:
    os.environ.setdefault("BEAM_BENCH_PEER_VENV", "")
    with tempfile.TemporaryDirectory() as tmp:
        import bench.peers as peers

        peers.PEER = PEER
        peer_exe = await install_peer(Path(tmp))
        tc, root = built_project(Path(tmp) / "demo")
        (root / LONG).write_text(projects.long_file(1500), encoding="utf-8")
        env = tc.env() | {"LEAN_PROJECT_PATH": str(root)}
        cmd = shlex.split(os.environ.get("BEAM_BENCH_SERVER", "")) or server_binary()
        python = Path(cmd[0]).parent / "python"  # the interpreter of the tree the server runs from
        beam = StdioServerParameters(
            command=cmd[0],
            args=[*cmd[1:], "--tools", "lean-lsp-mcp", "--lean-cmd", shlex.join(tc.server_cmd())],
            env=compiled_env(env, Path(tmp) / "pycache", str(python) if python.exists() else sys.executable),
        )
        peer = StdioServerParameters(command=str(peer_exe), env=env)
        session = calls(root)
        ratios: dict[str, float] = {}
        cold: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name, _ in session}
        starts: tuple[list[float], list[float]] = ([], [])
        totals: tuple[list[float], list[float]] = ([], [])
        spawned: tuple[list[float], list[float]] = ([], [])
        for run in range(cold_runs):
            order = [(0, beam), (1, peer)] if run % 2 == 0 else [(1, peer), (0, beam)]
            for side, params in order:
                t0 = time.perf_counter()
                async with Client(params, mode="legacy") as client:
                    start = time.perf_counter() - t0
                    times = [await timed(client, name, args) for name, args in session]
                for (name, _), t in zip(session, times, strict=True):
                    cold[name][side].append(t)
                starts[side].append(start)
                totals[side].append(sum(times))
                spawned[side].append(start + sum(times))
        ratios["cold start"] = show("cold start (spawn to the end of the handshake)", *starts)
        for name, (b, p) in cold.items():
            ratios[f"cold {name}"] = show(f"cold {name}", b, p)
        opening = session[0][0]
        ratios["cold first answer"] = show(
            f"cold start + {opening} (spawn to the first answer)",
            [s + t for s, t in zip(starts[0], cold[opening][0], strict=True)],
            [s + t for s, t in zip(starts[1], cold[opening][1], strict=True)],
        )
        ratios["cold session"] = show("cold session total (after the handshake)", *totals)
        ratios["cold session from spawn"] = show("cold session total from spawn", *spawned)
        paused: tuple[list[float], list[float]] = ([], [])
        for run in range(paused_runs):
            order = [(0, beam), (1, peer)] if run % 2 == 0 else [(1, peer), (0, beam)]
            for side, params in order:
                async with Client(params, mode="legacy") as client:
                    await anyio.sleep(PAUSE)  # the agent reads the tool list and decides (not a wait for a condition)
                    paused[side].append(await timed(client, *session[0]))
        ratios["cold first call after a pause"] = show(f"cold {opening} {PAUSE:.0f} s after the handshake", *paused)
        async with Client(beam, mode="legacy") as cb, Client(peer, mode="legacy") as cp:
            for name, args in session:  # open everything once
                await timed(cb, name, args)
                await timed(cp, name, args)
            warm: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name, _ in session}
            for i in range(rounds):
                for name, args in session:
                    first, second = (cb, cp) if i % 2 == 0 else (cp, cb)
                    t1 = await timed(first, name, args)
                    t2 = await timed(second, name, args)
                    warm[name][0].append(t1 if first is cb else t2)
                    warm[name][1].append(t2 if first is cb else t1)
            for name, (b, p) in warm.items():
                ratios[f"warm {name}"] = show(f"warm {name}", b, p)
            warm_beam = sum(statistics.median(b) for b, _ in warm.values())
            warm_peer = sum(statistics.median(p) for _, p in warm.values())
            ratios["warm session"] = show("warm session (sum of medians)", [warm_beam], [warm_peer])
            rtt_beam, rtt_peer = await ping(cb, rounds * 3), await ping(cp, rounds * 3)
            lean = await lean_floor(root, tc.server_cmd(), env, rounds)
            floor = sum(lean.values()) + len(session) * min(rtt_beam, rtt_peer)
            print(
                "peers-compat warm floor: Lean "
                + ", ".join(f"{name} {seconds * 1e3:.1f} ms" for name, seconds in lean.items())
                + f"; MCP ping lean-beam-mcp {rtt_beam * 1e3:.2f} ms, lean-lsp-mcp {rtt_peer * 1e3:.2f} ms;"
                f" floor of a {len(session)}-call session {floor * 1e3:.1f} ms: the best any server asking Lean every"
                f" time reaches is peer/floor {warm_peer / floor:.1f}x (lean-beam-mcp: {warm_peer / warm_beam:.1f}x)"
            )
            ratios["warm floor"] = warm_peer / floor
            long_args = {
                "file_path": str(root / LONG),
                "line": 4,
                "snippets": ["theorem probe (p : Prop) (hp : p) : p := hp"],
            }
            await timed(cb, "lean_diagnostic_messages", {"file_path": str(root / LONG)})
            await timed(cp, "lean_diagnostic_messages", {"file_path": str(root / LONG)})
            await timed(cb, "lean_multi_attempt", long_args)
            await timed(cp, "lean_multi_attempt", long_args)
            b_long: list[float] = []
            p_long: list[float] = []
            for i in range(slow_rounds):
                if i % 2 == 0:
                    b_long.append(await timed(cb, "lean_multi_attempt", long_args))
                    p_long.append(await timed(cp, "lean_multi_attempt", long_args))
                else:
                    p_long.append(await timed(cp, "lean_multi_attempt", long_args))
                    b_long.append(await timed(cb, "lean_multi_attempt", long_args))
            ratios["multi_attempt long tail"] = show("lean_multi_attempt before 1500 declarations", b_long, p_long)
    return ratios


if __name__ == "__main__":
    anyio.run(main)
