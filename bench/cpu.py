"""CPU of `lean-beam-mcp` against Lean's while a 1500-declaration file elaborates (issue 11: broker <= 0.1x Lean).

A `lean-beam-mcp` child over stdio, driven by the official MCP SDK client (`mcp.Client`, with a progress callback as
an agent's client has), serves the demo project on the lane's real Lean. Each round writes a new module of 1500
declarations (`tests.support.projects.long_file`) and times three `lean_sync` calls, each of which returns only once
Lean has elaborated the whole file:

- `open`: the first sync (didOpen, the whole file elaborates);
- `edit end`: a declaration appended at the end (Lean reuses every snapshot before it);
- `edit top`: a declaration inserted after the imports (every declaration elaborates again).

For each call it reads from /proc the CPU seconds (user + system) of the `lean-beam-mcp` process itself (not its
children) and of every Lean process below it (the server and its file workers), sampled every 50 ms so a worker
that exits during the call still counts, and prints the ratio beam/Lean per scenario (medians over the rounds) and
overall (sums). Set `BEAM_BENCH_PYSPY=DIR` to record a py-spy profile of `lean-beam-mcp` (raw collapsed stacks,
one file per run) while the rounds run, and `BEAM_BENCH_SERVER="CMD ARGS"` to measure another server command line
than the installed `lean-beam-mcp` (e.g. a patched build), which must take `--lean-cmd`.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from tests.support import projects

from beam_lsp._process import children_map, descendants
from bench._common import built_project, cpu_seconds
from bench.mcp_overhead import server_binary
from mcp import Client, StdioServerParameters

DECLARATIONS = 1500
SAMPLE_INTERVAL = 0.05


def children(pid: int) -> set[int]:
    """The direct children of `pid`."""
    return set(children_map().get(pid, []))


class CpuMeter:
    """CPU seconds used by one process and, separately, by all its descendants, between `start` and `stop`.

    Descendants are sampled every `SAMPLE_INTERVAL` seconds while the meter runs, so a process that exits in the
    middle still counts with its last sample (CPU time only grows).
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._own0 = 0.0
        self.own = 0.0
        self.children = 0.0

    def _sample(self) -> None:
        for pid in descendants(self.pid):
            cpu = cpu_seconds(pid)
            if cpu is not None:
                self._last[pid] = cpu

    async def measure(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work()` and account for the CPU used meanwhile."""
        self._base, self._last = {}, {}
        for pid in descendants(self.pid):
            cpu = cpu_seconds(pid)
            if cpu is not None:
                self._base[pid] = cpu
        self._own0 = cpu_seconds(self.pid) or 0.0
        result: Any = None
        async with anyio.create_task_group() as tg:

            async def sampler() -> None:
                while True:
                    self._sample()
                    await anyio.sleep(SAMPLE_INTERVAL)

            tg.start_soon(sampler)
            result = await work()
            tg.cancel_scope.cancel()
        self._sample()
        self.own = (cpu_seconds(self.pid) or 0.0) - self._own0
        self.children = sum(cpu - self._base.get(pid, 0.0) for pid, cpu in self._last.items())
        return result


class Scenario:
    """The measurements of one scenario over the rounds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.beam: list[float] = []
        self.lean: list[float] = []
        self.wall: list[float] = []

    def add(self, meter: CpuMeter, wall: float) -> None:
        self.beam.append(meter.own)
        self.lean.append(meter.children)
        self.wall.append(wall)

    def ratios(self) -> list[float]:
        return [b / le for b, le in zip(self.beam, self.lean, strict=True) if le > 0]

    def line(self) -> str:
        ratios = self.ratios()
        return (
            f"cpu {self.name}: lean-beam-mcp median {statistics.median(self.beam):.3f} s, Lean median "
            f"{statistics.median(self.lean):.3f} s, wall median {statistics.median(self.wall):.2f} s, "
            f"ratio beam/Lean median {statistics.median(ratios):.3f} (each: {', '.join(f'{r:.3f}' for r in ratios)})"
        )


def top_edit(text: str, i: int) -> str:
    head = "prelude\nimport Demo.Basic\n"
    assert text.startswith(head)
    return head + f"\ntheorem edited{i} (p : Prop) (hp : p) : p :=\n  hp\n" + text[len(head) :]


def end_edit(text: str, i: int) -> str:
    return text + f"\ntheorem appended{i} (p : Prop) (hp : p) : p :=\n  hp\n"


async def run(rounds: int, root: Path, tc: Any) -> dict[str, float]:
    cmd = shlex.split(os.environ.get("BEAM_BENCH_SERVER", "")) or server_binary()
    params = StdioServerParameters(
        command=cmd[0], args=[*cmd[1:], "--lean-cmd", shlex.join(tc.server_cmd())], env=tc.env()
    )
    scenarios = {name: Scenario(name) for name in ("open", "edit end", "edit top")}
    ws = {"root": str(root)}
    updates = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal updates
        updates += 1

    before = children(os.getpid())
    async with Client(params, mode="legacy") as client:
        [pid] = children(os.getpid()) - before  # the SDK spawned the server as our child
        meter = CpuMeter(pid)
        profiler = None
        if os.environ.get("BEAM_BENCH_PYSPY"):
            out = Path(os.environ["BEAM_BENCH_PYSPY"]) / f"beam-mcp-{pid}.txt"
            spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
            record = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "250", "-o", str(out)]
            profiler = await anyio.open_process(record, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        async def sync(rel: str) -> None:
            result = await client.call_tool("lean_sync", {"workspace": ws, "path": rel}, progress_callback=on_progress)
            assert result.is_error is False, result.structured_content

        # Warm up: the server, the header's worker and the imports.
        await sync("Demo/Proofs.lean")
        for i in range(rounds):
            rel = f"Demo/Cpu{i}.lean"
            path = root / rel
            text = projects.long_file(DECLARATIONS)
            for name, edit in (("open", None), ("edit end", end_edit), ("edit top", top_edit)):
                if edit is not None:
                    text = edit(text, i)
                path.write_text(text, encoding="utf-8")
                t0 = time.perf_counter()
                await meter.measure(functools.partial(sync, rel))
                scenarios[name].add(meter, time.perf_counter() - t0)
            await client.call_tool("lean_close", {"workspace": ws, "path": rel})
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            with anyio.fail_after(30):
                await profiler.wait()
    for scenario in scenarios.values():
        print(scenario.line(), flush=True)
    beam = sum(sum(s.beam) for s in scenarios.values())
    lean = sum(sum(s.lean) for s in scenarios.values())
    print(
        f"cpu overall: lean-beam-mcp {beam:.2f} s, Lean {lean:.2f} s, ratio beam/Lean {beam / lean:.3f} "
        f"({updates} progress notifications received)",
        flush=True,
    )
    ratios = {name: statistics.median(s.ratios()) for name, s in scenarios.items()}
    return ratios | {"overall": beam / lean}


async def main(rounds: int = 3) -> dict[str, float]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        ratios = await run(rounds, root, tc)
    print(f"cpu bench took {time.perf_counter() - t0:.1f} s", flush=True)
    return ratios


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 3)
