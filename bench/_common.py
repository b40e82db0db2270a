"""Shared helpers for benchmarks: the real toolchain, a project, interleaved timing and ratio reports."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import projects, toolchain  # noqa: E402


def built_project(dest: Path) -> tuple[toolchain.Toolchain, Path]:
    """Build the real toolchain and a demo project copy with Demo.Basic compiled."""
    tc = toolchain.from_env() or toolchain.lean435()
    root = projects.copy_project("demo", dest)
    out = projects.lake_build(tc, root, "Demo.Basic", "Demo.Proofs")
    if out.returncode != 0:
        raise SystemExit(out.stdout + out.stderr)
    return tc, root


async def interleaved(
    subject: Callable[[], Awaitable[object]],
    baseline: Callable[[], Awaitable[object]],
    rounds: int,
    warmup: int = 5,
) -> tuple[list[float], list[float]]:
    """Time `subject` and `baseline` alternately (noise hits both alike); returns seconds per call each."""
    for _ in range(warmup):
        await subject()
        await baseline()
    a: list[float] = []
    b: list[float] = []
    for i in range(rounds):
        first, second, fa, fb = (subject, baseline, a, b) if i % 2 == 0 else (baseline, subject, b, a)
        t0 = time.perf_counter()
        await first()
        fa.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await second()
        fb.append(time.perf_counter() - t0)
    return a, b


def report(name: str, subject: list[float], baseline: list[float], subject_label: str, baseline_label: str) -> float:
    """Print medians and the subject/baseline ratio of medians; return the ratio."""
    ms, mb = statistics.median(subject), statistics.median(baseline)
    ratio = ms / mb if mb else float("inf")
    print(
        f"{name}: {subject_label} median {ms * 1e3:.3f} ms, {baseline_label} median {mb * 1e3:.3f} ms, "
        f"ratio {ratio:.2f} (n={len(subject)})",
        flush=True,
    )
    return ratio


_TICK: int = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of one process (its own, not its children's); None when it is gone (/proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # the command name may hold spaces and parentheses
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)
