"""Fixture Lean projects for tests and benchmarks (prelude-only: no Init oleans exist on the lean435 lane)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
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


TOOLCHAIN_FILE = "lean-toolchain"
TOOLCHAIN = "leanprover/lean4:v4.35.0\n"


def fake_project(dest: Path, files: Mapping[str, str] | None = None) -> Path:
    """A minimal Lean project for the fake lane: a `lean-toolchain` file (what makes it a workspace) and `files`.

    `files` maps relative paths to their text; the fake Lean server turns markers in that text into diagnostics
    (`ERROR_HERE`, `WARN_HERE`, `sorry`, `GOALS_HERE`: see `tests/support/fake_lean.py`). Existing directories are
    reused, so a test may add files to a project later. Returns the project's resolved path.
    """
    dest.mkdir(parents=True, exist_ok=True)
    (dest / TOOLCHAIN_FILE).write_text(TOOLCHAIN, encoding="utf-8")
    for name, text in (files or {}).items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return dest.resolve()
