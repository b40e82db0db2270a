"""beam-lsp side by side with leanclient.aio (the Python Lean client people pick) on the same real Lean and files.

The peer, `leanclient==0.13.2` from PyPI, is installed into its own virtual environment under the bench's temporary
directory (set `BEAM_BENCH_PEER_VENV=DIR` to keep and reuse one); it is never a dependency of Beam. Each round runs
one child process per client (`bench/_lsp_peer_child.py`: the measurements are described there), beam-lsp and
leanclient alternating, on one copy of the demo project with Demo.Basic and Demo.Proofs built, 50 small files and a
file of 1500 declarations (`tests.support.projects.long_file`), and the lane's real Lean 4.35 started as
`lean --server -Dserver.reportDelayMs=0` by both. `BEAM_BENCH_ROUNDS` (default 3) rounds, `BEAM_BENCH_N` (default
2000) requests per row.

Every row prints the median over the rounds of each client and the ratio beam-lsp / leanclient (above 1: beam-lsp
is faster, for rates; for seconds, CPU and memory the ratio is leanclient / beam-lsp, so above 1 still means
beam-lsp is better).

`BEAM_BENCH_CALLGRIND=1` measures instead what load on a shared machine cannot blur: the instructions each client
process executes per request (sequential hover, sequential goal, pipelined hover), per file opened and per Lean
message while the long file elaborates, counted by `valgrind --tool=callgrind` (needs valgrind) in one child per
client, against the same real Lean; `BEAM_BENCH_N` (default 1000 here) requests per phase.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from tests.support import projects

from bench._common import built_project
from bench._lsp_peer_child import WORKERS

PEER = "leanclient==0.13.2"
CHILD = Path(__file__).resolve().parent / "_lsp_peer_child.py"
OPEN_FILES = 50
DECLARATIONS = 1500


async def install_peer(base: Path) -> Path:
    """The Python of a virtual environment holding the pinned peer (created when missing)."""
    venv = Path(os.environ.get("BEAM_BENCH_PEER_VENV") or base / "peer-venv")
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import leanclient.aio"]
    if not python.exists() or (await anyio.run_process(probe, check=False)).returncode != 0:
        await anyio.run_process([sys.executable, "-m", "venv", str(venv)])
        await anyio.run_process([str(python), "-m", "pip", "install", "-q", PEER], stderr=None)
    return python


def prepare(root: Path) -> None:
    """The 50 small files and the long file, next to the demo's own."""
    for i in range(OPEN_FILES):
        (root / f"Demo/Open{i:02d}.lean").write_text(
            f"prelude\nimport Demo.Basic\n\ntheorem open{i} : MyTrue := myTrue\n", encoding="utf-8"
        )
    (root / "Demo/Long.lean").write_text(projects.long_file(DECLARATIONS), encoding="utf-8")


async def child(python: Path, which: str, root: Path, lean: Path, env: dict[str, str], n: int) -> dict[str, Any]:
    done = await anyio.run_process(
        [str(python), str(CHILD), which, str(root), str(lean), str(n)], env=env, cwd=root, stderr=None
    )
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


async def instructions(
    python: Path, which: str, root: Path, lean: Path, env: dict[str, str], n: int, out: Path
) -> dict[str, float]:
    """Instructions of one client's process per request in each phase, and per Lean message in `long`."""
    cmd = ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}", str(python), str(CHILD), which]
    done = await anyio.run_process(
        [*cmd, str(root), str(lean), str(n)], env=env | {"BEAM_BENCH_CALLGRIND_DUMP": "1"}, cwd=root, stderr=None
    )
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    per: dict[str, float] = {}
    for dump in out.parent.glob(out.name + ".*"):
        text = dump.read_text(encoding="utf-8", errors="replace")
        label = re.search(r"^desc: Trigger: .*dump (\w+)", text, re.M)
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if label and total:
            count = {"pipelined": n // WORKERS * WORKERS, "long": result["long"]["messages"], "open50": OPEN_FILES}
            per[label.group(1)] = int(total.group(1)) / count.get(label.group(1), n)
            if label.group(1) == "open50":  # per file and per message: the phases end at different messages
                per["open50_message"] = int(total.group(1)) / max(1, int(result["open50_messages"]))
    return per


async def main_callgrind(python: Path, root: Path, lean: Path, env: dict[str, str], tmp: Path) -> dict[str, float]:
    n = int(os.environ.get("BEAM_BENCH_N", "1000"))
    beam = await instructions(Path(sys.executable), "beam", root, lean, env, n, tmp / "beam.out")
    peer = await instructions(python, "leanclient", root, lean, env, n, tmp / "leanclient.out")
    ratios = {}
    for phase, what in (
        ("hover", "sequential hover"),
        ("goal", "sequential goal"),
        ("pipelined", "pipelined hover"),
        ("open50", "file opened (50 files)"),
        ("open50_message", "Lean message (50 files opening)"),
        ("long", "Lean message (1500 declarations elaborating)"),
    ):
        ratios[phase] = peer[phase] / beam[phase]
        print(
            f"lsp_peers instructions per {what} (callgrind): beam-lsp {beam[phase] / 1000:.0f}k, "
            f"leanclient.aio {peer[phase] / 1000:.0f}k, beam-lsp better by {ratios[phase]:.2f}x",
            flush=True,
        )
    return ratios


def row(name: str, unit: str, beam: list[float], peer: list[float], *, higher_is_better: bool) -> float:
    """Print one row (medians and each round) and return how many times better beam-lsp is."""
    mb, mp = statistics.median(beam), statistics.median(peer)
    ratio = mb / mp if higher_is_better else mp / mb
    rounds = "; ".join(f"{b:.4g} vs {p:.4g}" for b, p in zip(beam, peer, strict=True))
    print(
        f"lsp_peers {name}: beam-lsp {mb:.4g} {unit}, leanclient.aio {mp:.4g} {unit}, "
        f"beam-lsp better by {ratio:.2f}x (rounds: {rounds})",
        flush=True,
    )
    return ratio


async def main() -> dict[str, float]:
    rounds = int(os.environ.get("BEAM_BENCH_ROUNDS", "3"))
    n = int(os.environ.get("BEAM_BENCH_N", "2000"))
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        prepare(root)
        peer = await install_peer(Path(tmp))
        lib = root / ".lake/build/lib/lean"
        env = tc.env() | {"LEAN_PATH": str(lib), "LEAN_SRC_PATH": str(root)}
        if os.environ.get("BEAM_BENCH_CALLGRIND"):
            return await main_callgrind(peer, root, tc.lean, env, Path(tmp))
        results: dict[str, list[dict[str, Any]]] = {"beam": [], "leanclient": []}
        for i in range(rounds):
            order = ["beam", "leanclient"] if i % 2 == 0 else ["leanclient", "beam"]
            for which in order:
                python = Path(sys.executable) if which == "beam" else peer
                results[which].append(await child(python, which, root, tc.lean, env, n))
                print(f"lsp_peers round {i + 1} {which}: {json.dumps(results[which][-1])}", flush=True)
    b, p = results["beam"], results["leanclient"]

    def per_message(r: dict[str, Any]) -> float:
        return float(r["long"]["cpu"]) / max(1, int(r["long"]["messages"])) * 1e6

    ratios = {
        "hover": row("sequential hover", "/s", [r["hover"] for r in b], [r["hover"] for r in p], higher_is_better=True),
        "goal": row("sequential goal", "/s", [r["goal"] for r in b], [r["goal"] for r in p], higher_is_better=True),
        "pipelined": row(
            "pipelined hover (8 in flight)",
            "/s",
            [r["pipelined"] for r in b],
            [r["pipelined"] for r in p],
            higher_is_better=True,
        ),
        "hover_cpu": row(
            "client CPU per sequential hover",
            "us",
            [r["hover_cpu_us"] for r in b],
            [r["hover_cpu_us"] for r in p],
            higher_is_better=False,
        ),
        "goal_cpu": row(
            "client CPU per sequential goal",
            "us",
            [r["goal_cpu_us"] for r in b],
            [r["goal_cpu_us"] for r in p],
            higher_is_better=False,
        ),
        "pipelined_cpu": row(
            "client CPU per pipelined hover",
            "us",
            [r["pipelined_cpu_us"] for r in b],
            [r["pipelined_cpu_us"] for r in p],
            higher_is_better=False,
        ),
        "open50": row(
            "open 50 files until elaborated",
            "s",
            [r["open50"] for r in b],
            [r["open50"] for r in p],
            higher_is_better=False,
        ),
        "long_cpu": row(
            "client CPU per Lean message, 1500 declarations",
            "us",
            [per_message(r) for r in b],
            [per_message(r) for r in p],
            higher_is_better=False,
        ),
        "rss": row(
            "client RSS at the end", "KiB", [r["VmRSS"] for r in b], [r["VmRSS"] for r in p], higher_is_better=False
        ),
        "peak_rss": row(
            "client peak RSS", "KiB", [r["VmHWM"] for r in b], [r["VmHWM"] for r in p], higher_is_better=False
        ),
    }
    messages = {which: [r["long"]["messages"] for r in rs] for which, rs in results.items()}
    print(f"lsp_peers messages from Lean while the long file elaborated: {messages}", flush=True)
    return ratios


if __name__ == "__main__":
    anyio.run(main)
