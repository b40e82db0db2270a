"""This tree against another commit, in one run: a settled `run_at` and a `sync` of an unchanged file.

"Within 1.1x of before" cannot be read off two runs on a shared two-core machine (the same command varies by 1.5x
from one minute to the next). Here the commit `BEAM_BENCH_BASE` (default `HEAD~1`) is checked out into a temporary
git worktree and the same timing child (`bench/_ab_child.py`) runs alternately on it and on this tree, each time
in a fresh process with its own Lean, `BEAM_BENCH_AB_ROUNDS` times (default 6); each child times `CALLS` of each
call after a warm-up. Ratios are this tree's median over the base's, so noise hits both alike.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._common import ROOT

CALLS = 300
PACKAGES = ("beam-lsp", "beam-broker", "beam-mcp", "beam-feedback")


def _run(tree: Path) -> dict[str, list[float]]:
    path = os.pathsep.join([*(str(tree / "packages" / p / "src") for p in PACKAGES), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "_ab_child.py"), str(CALLS)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


async def main() -> dict[str, float]:
    return compare()


def compare() -> dict[str, float]:
    """Alternate the timing child between this tree and the base commit; print and return the ratios."""
    base = os.environ.get("BEAM_BENCH_BASE", "HEAD~1")
    rounds = int(os.environ.get("BEAM_BENCH_AB_ROUNDS", "6"))
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), base], cwd=ROOT, check=True, capture_output=True
        )
        try:
            samples: dict[str, dict[str, list[float]]] = {"this": {}, "base": {}}
            for i in range(rounds):
                order = (("this", ROOT), ("base", tree)) if i % 2 == 0 else (("base", tree), ("this", ROOT))
                for label, where in order:
                    for key, times in _run(where).items():
                        samples[label].setdefault(key, []).extend(times)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    ratios: dict[str, float] = {}
    for key in samples["this"]:
        this, before = statistics.median(samples["this"][key]), statistics.median(samples["base"][key])
        ratios[key] = this / before
        print(
            f"{key}: this tree median {this * 1e3:.3f} ms, {base} median {before * 1e3:.3f} ms, "
            f"ratio {ratios[key]:.2f} (n={len(samples['this'][key])} each, {rounds} processes each)",
            flush=True,
        )
    return ratios
