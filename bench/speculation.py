"""Speculation cost: a probe on a declaration followed by 0 vs 300 declarations, and cold vs warm mirrors.

Probe mirrors truncate the source after the probe, so the cost should follow the enclosing declaration, not
the file: the 300-tail / 0-tail ratio should stay near 1. A cold probe opens a new mirror (a Lean worker that
loads the imports); a warm one rewrites an open mirror and Lean reuses its unchanged prefix. What comes before
the probe is not free: probes after the 300 declarations and before them, alternating on one document (each keeps
a warm mirror of its own), show what Lean's walk over the earlier declarations costs per mirror version.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from tests.support import projects

from beam_broker import Broker, BrokerConfig
from bench._common import built_project, interleaved, report


async def main(rounds: int = 60, cold_rounds: int = 12) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        (root / "Demo/Zero.lean").write_text(projects.long_file(0))
        (root / "Demo/Tail.lean").write_text(projects.long_file(300))
        ratios: dict[str, float] = {}
        async with Broker.open(BrokerConfig(lean_cmd=tc.server_cmd(), env=tc.env())) as broker:
            ws = {"root": str(root)}
            for path in ("Demo/Zero.lean", "Demo/Tail.lean"):
                await broker.call("sync", {"workspace": ws, "path": path})

            def probe(path: str, i: list[int], line: int = 3) -> Callable[[], Awaitable[object]]:
                async def go() -> object:
                    i[0] += 1  # a fresh command each time: nothing is cached between probes but Lean's prefix
                    text = f"theorem probe{i[0]} (p : Prop) (hp : p) : p := target p hp"
                    args = {"workspace": ws, "path": path, "version": 1, "line": line, "character": 0, "text": text}
                    result = await broker.call("run_at", args)
                    assert result["success"], result
                    return result

                return go

            tail, zero = await interleaved(probe("Demo/Tail.lean", [0]), probe("Demo/Zero.lean", [0]), rounds)
            ratios["tail300_vs_tail0"] = report("run_at, 300 vs 0 declarations after", tail, zero, "tail 300", "tail 0")
            last = len(projects.long_file(300).splitlines())  # the empty line after the last declaration
            late, early = probe("Demo/Tail.lean", [0], last), probe("Demo/Tail.lean", [10**6])
            after, before = await interleaved(late, early, rounds)
            ratios["after300_vs_top"] = report(
                "run_at, after vs before 300 declarations", after, before, "after 300", "before"
            )
            cold: list[float] = []
            warm: list[float] = []
            for i in range(cold_rounds):
                path = f"Demo/Cold{i}.lean"
                (root / path).write_text(projects.long_file(0))
                await broker.call("update", {"workspace": ws, "path": path})
                args = {"workspace": ws, "path": path, "version": 1, "line": 3, "character": 0, "text": "#check target"}
                t0 = time.perf_counter()
                await broker.call("run_at", args)
                cold.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await broker.call("run_at", {**args, "text": "#check target\n#check target"})
                warm.append(time.perf_counter() - t0)
                await broker.call("close", {"workspace": ws, "path": path})
            ratios["cold_vs_warm"] = report("run_at, cold vs warm mirror", cold, warm, "cold", "warm")
            print(f"  (cold median {statistics.median(cold) * 1e3:.1f} ms includes opening a Lean worker)")
        return ratios
