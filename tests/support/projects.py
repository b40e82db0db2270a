"""Fixture Lean projects for tests and benchmarks (prelude-only: no Init oleans exist on the lean435 lane)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .toolchain import Toolchain

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def copy_project(name: str, dest: Path) -> Path:
    """Copy fixture project `name` to `dest` (which must not exist) and return the copy's resolved path."""
    shutil.copytree(FIXTURES / name, dest, ignore=shutil.ignore_patterns(".lake"))
    return dest.resolve()


def lake_build(toolchain: Toolchain, root: Path, *modules: str) -> subprocess.CompletedProcess[str]:
    """Run `lake build MODULE...` in `root` (the stand-in on lean435, real Lake on elan)."""
    return subprocess.run(
        [str(toolchain.lake), "build", *modules],
        cwd=root,
        env=toolchain.env(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )


def long_file(n_after: int, *, target: str | None = None) -> str:
    """A module with a target theorem followed by `n_after` similar declarations (for benchmarks)."""
    head = "prelude\nimport Demo.Basic\n\n"
    target = target or "theorem target (p : Prop) (hp : p) : p :=\n  hp\n"
    body = "".join(
        f"\ntheorem after{i} (p q : Prop) (hp : p) (hq : q) : p :=\n  (fun (_x : q) => hp) hq\n" for i in range(n_after)
    )
    return head + target + body
