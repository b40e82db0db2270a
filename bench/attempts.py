"""Batch attempts: `lean_attempts` with N=8 alternatives vs one `lean_run_at`, through `lean-beam-mcp` over stdio.

The subject and the baseline alternate in one run, on one `lean-beam-mcp` child with the lane's real Lean and the
default mirror bound (2 probe mirrors per document), at the top of a file of 1500 declarations
(`tests.support.projects.long_file(1500)`): each call brings fresh texts (new theorem names), so nothing is cached
between calls but Lean's unchanged prefix. Rows:

- warm: 8 alternatives in one `lean_attempts` call vs one `lean_run_at` (issue 23's target: at most 2x). The
  alternatives are theorems of their own names, which cannot see each other, so they share a mirror version
  (`_probe_text.shareable`);
- per alternative: the same batch divided by 8, against the same `lean_run_at`;
- one name: 8 alternatives declaring the same theorem (they share a version too: all but the first declare fresh
  names, mapped back in their messages) vs one `lean_run_at` (target: at most 2x);
- proof mode: 8 tactic alternatives at a `by` block of the same long file (copies of the declaration in one
  version) vs one `lean_run_at` of one of them (prelude fixtures parse only `{}`, which fails: each answer also
  asks Lean for the goals; target: at most 2x);
- CPU: the CPU seconds (user + system) of `lean-beam-mcp` and of every Lean process below it (printed as
  beam + Lean) over the same number of calls of each of the three batches above and of its `lean_run_at`, in
  alternate blocks: what a call costs, whatever else the cores run (wall-time ratios on a loaded machine measure
  the queue too); /proc counts in 10 ms ticks, so take it over 40 calls or more;
- tail: the 8-alternative batch on the 1500-declaration file vs on a file with none after the target (the cost
  follows the enclosing declaration, not the file: the ratio should stay near 1);
- cold: the first call on a freshly opened document (its mirrors start their Lean workers): a batch of 8 vs one
  `lean_run_at`.
"""

from __future__ import annotations

import itertools
import shlex
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from tests.support import projects

from beam_lsp._process import descendants
from bench._common import built_project, cpu_seconds, interleaved, report
from bench.mcp_overhead import META, StdioMcp, server_binary

N = 8
DECLARATIONS = 1500
LINE = 3
"""The line of `theorem target` in `projects.long_file` (0-based): the probes are commands after it."""


async def main(rounds: int = 40, cold_rounds: int = 6) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        (root / "Demo/Long.lean").write_text(projects.long_file(DECLARATIONS), encoding="utf-8")
        (root / "Demo/Short.lean").write_text(projects.long_file(0), encoding="utf-8")
        proof_target = "theorem target (p : Prop) (hp : p) : p := by\n  {}\n"
        (root / "Demo/Tactic.lean").write_text(projects.long_file(DECLARATIONS, target=proof_target), encoding="utf-8")
        ws = {"root": str(root)}
        cmd = [*server_binary(), "--lean-cmd", shlex.join(tc.server_cmd())]
        proc = await anyio.open_process(cmd, env=tc.env(), stderr=subprocess.DEVNULL)
        ratios: dict[str, float] = {}
        async with proc:
            mcp = StdioMcp(proc)
            names = itertools.count()

            async def tool(name: str, **arguments: Any) -> dict[str, Any]:
                params = {"name": name, "arguments": {"workspace": ws, **arguments}, "_meta": META}
                result = await mcp.request("tools/call", params)
                assert result["isError"] is False, result
                out: dict[str, Any] = result["structuredContent"]
                return out

            def text() -> str:
                return f"theorem probe{next(names)} (p : Prop) (hp : p) : p := target p hp"

            def run_at(path: str) -> Callable[[], Awaitable[object]]:
                async def go() -> object:
                    out = await tool("lean_run_at", path=path, version=1, line=LINE, character=0, text=text())
                    assert out["success"], out
                    return out

                return go

            def attempts(path: str, *, one_name: bool = False) -> Callable[[], Awaitable[object]]:
                async def go() -> object:
                    texts = [text() for _ in range(N)]
                    if one_name:  # the same theorem, each with another binder name
                        name = texts[0].split()[1]
                        texts = [f"theorem {name} (p : Prop) (h{j} : p) : p := target p h{j}" for j in range(N)]
                    out = await tool("lean_attempts", path=path, version=1, line=LINE, character=0, texts=texts)
                    assert all(a["success"] for a in out["attempts"]) and out["mode"] == "command", out
                    return out

                return go

            async def tactic_run_at() -> object:
                out = await tool("lean_run_at", path="Demo/Tactic.lean", version=1, line=4, character=2, text="{}")
                assert not out["success"] and out["proof_state"], out
                return out

            async def tactic_attempts() -> object:
                texts = ["{}"] * N
                out = await tool("lean_attempts", path="Demo/Tactic.lean", version=1, line=4, character=2, texts=texts)
                assert out["mode"] == "proof" and all(a["proof_state"] for a in out["attempts"]), out
                return out

            for path in ("Demo/Long.lean", "Demo/Short.lean", "Demo/Tactic.lean"):
                await tool("lean_sync", path=path)
            batch, single = await interleaved(attempts("Demo/Long.lean"), run_at("Demo/Long.lean"), rounds)
            ratios["attempts8_vs_run_at"] = report(
                f"lean_attempts N={N} vs one lean_run_at ({DECLARATIONS} declarations)",
                batch,
                single,
                f"attempts N={N}",
                "run_at",
            )
            ratios["per_attempt_vs_run_at"] = report(
                "per alternative vs one lean_run_at", [t / N for t in batch], single, "per alternative", "run_at"
            )
            long_run_at = run_at("Demo/Long.lean")
            same, single = await interleaved(attempts("Demo/Long.lean", one_name=True), long_run_at, rounds)
            ratios["one_name_attempts8_vs_run_at"] = report(
                f"lean_attempts N={N}, one theorem name vs one lean_run_at", same, single,
                f"attempts N={N}", "run_at",
            )  # fmt: skip
            proof, single = await interleaved(tactic_attempts, tactic_run_at, rounds)
            ratios["proof_attempts8_vs_run_at"] = report(
                f"proof mode: lean_attempts N={N} vs one lean_run_at", proof, single, f"attempts N={N}", "run_at"
            )
            pairs: list[tuple[str, Callable[[], Awaitable[object]], Callable[[], Awaitable[object]]]] = [
                ("own names", attempts("Demo/Long.lean"), long_run_at),
                ("one name", attempts("Demo/Long.lean", one_name=True), long_run_at),
                ("proof mode", tactic_attempts, tactic_run_at),
            ]
            for label, subject, baseline in pairs:
                (beam, lean), (beam1, lean1) = await cpu_blocks(proc.pid, subject, baseline, rounds)
                ratios[f"cpu_{label.replace(' ', '_')}"] = ratio = (beam + lean) / (beam1 + lean1)
                ms = [v / rounds * 1e3 for v in (beam + lean, beam, lean, beam1 + lean1, beam1, lean1)]
                print(
                    f"CPU (lean-beam-mcp + Lean), {label}: attempts N={N} {ms[0]:.1f} ms per call "
                    f"({ms[1]:.1f} + {ms[2]:.1f}), run_at {ms[3]:.1f} ms ({ms[4]:.1f} + {ms[5]:.1f}), "
                    f"ratio {ratio:.2f} (n={rounds})",
                    flush=True,
                )
            tail, none = await interleaved(attempts("Demo/Long.lean"), attempts("Demo/Short.lean"), rounds)
            ratios["tail1500_vs_tail0"] = report(
                f"lean_attempts N={N}, {DECLARATIONS} vs 0 declarations after", tail, none, "tail 1500", "tail 0"
            )
            cold_batch: list[float] = []
            cold_single: list[float] = []
            for i in range(cold_rounds):
                for kind, times, go in (("A", cold_batch, attempts), ("R", cold_single, run_at)):
                    path = f"Demo/Cold{kind}{i}.lean"
                    (root / path).write_text(projects.long_file(DECLARATIONS), encoding="utf-8")
                    await tool("lean_sync", path=path)
                    t0 = time.perf_counter()
                    await go(path)()
                    times.append(time.perf_counter() - t0)
                    await tool("lean_close", path=path)
            ratios["cold_attempts8_vs_run_at"] = report(
                f"cold mirrors: lean_attempts N={N} vs one lean_run_at", cold_batch, cold_single, "attempts", "run_at"
            )
            print(f"  (cold run_at median {statistics.median(cold_single) * 1e3:.1f} ms opens one Lean worker)")
            assert proc.stdin is not None
            await proc.stdin.aclose()
            await proc.wait()
        return ratios


def tree_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of a process, and of every process below it (the Lean server and its workers)."""
    return cpu_seconds(pid) or 0.0, sum(cpu_seconds(p) or 0.0 for p in descendants(pid))


async def cpu_blocks(
    pid: int, subject: Callable[[], Awaitable[object]], baseline: Callable[[], Awaitable[object]], rounds: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """CPU seconds `rounds` calls of `subject` and of `baseline` cost the server and its Lean, in alternate blocks.

    Wall time on a machine whose cores other work shares measures the queue; CPU time is what a call costs.
    Workers stay up between calls (warm mirrors), so the tree's sum before and after a block is the block's cost.
    """
    used = [[0.0, 0.0], [0.0, 0.0]]
    block = max(1, rounds // 4)
    for start in range(0, rounds, block):
        for which, work in ((0, subject), (1, baseline)):
            before = tree_cpu(pid)
            for _ in range(min(block, rounds - start)):
                await work()
            after = tree_cpu(pid)
            used[which][0] += after[0] - before[0]
            used[which][1] += after[1] - before[1]
    return (used[0][0], used[0][1]), (used[1][0], used[1][1])


if __name__ == "__main__":
    anyio.run(main)
