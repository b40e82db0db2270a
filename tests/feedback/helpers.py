"""Plain helpers shared by the beam-feedback tests (fixtures live in conftest.py)."""

from __future__ import annotations

import stat
from pathlib import Path


def make_executable(path: Path, script: str) -> Path:
    """Write a POSIX shell script and make it executable."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + script + "\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def minimal_input(**extra: object) -> dict[str, object]:
    """The smallest valid report input, plus any extra fields."""
    return {
        "title": "Hover never answers",
        "summary": "lean_hover times out on Main.lean.",
        "reproduction": "Call lean_hover at 3:7.",
        "expected": "A hover answer.",
        "actual": "A timeout after 60 s.",
        **extra,
    }
