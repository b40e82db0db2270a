"""Lean/Lake projects on disk: project markers and roots, the toolchain a project names, module names.

The only copy of these rules in Beam: the broker (workspace descriptors, save), the CLIs (`lean-beam`,
`beam-feedback`, `lean-beam-mcp --self-check`), `lean-beam doctor` and feedback reports all use it. Standard
library only; it reads directory entries, and no file but `lean-toolchain` (bounded).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

TOOLCHAIN_FILE: Final = "lean-toolchain"
"""The file naming the toolchain a project uses (elan reads it)."""
LAKEFILES: Final = ("lakefile.toml", "lakefile.lean")
"""Lake's configuration files (a project has one; both is an ambiguous setup)."""
PROJECT_MARKERS: Final = (TOOLCHAIN_FILE, *LAKEFILES)
"""A directory holding any of these is a Lean/Lake project root."""
_TOOLCHAIN_MAX: Final = 4096

# A Lean identifier component: letters (any script), `_`, digits and `'`/`!`/`?` after the first character, or
# a «guillemet-quoted» name. Lake module names never start with a dash, so they cannot be read as options.
_COMPONENT: Final = re.compile(r"(?:[^\W\d]|_)[\w'!?]*|«[^«»\n]+»")


def is_project_root(directory: Path) -> bool:
    """Whether `directory` holds a Lean/Lake project marker."""
    return any((directory / marker).exists() for marker in PROJECT_MARKERS)


def find_project_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` (a directory, or a file's parent) that is a project root."""
    first = start if start.is_dir() else start.parent
    for directory in (first, *first.parents):
        if is_project_root(directory):
            return directory
    return None


def read_toolchain(root: Path) -> str | None:
    """The toolchain `root`'s `lean-toolchain` names (its first line, stripped: `leanprover/lean4:v4.35.0`).

    Returns:
        None when the file is empty (at most its first 4 KiB are read).

    Raises:
        FileNotFoundError: The project has no `lean-toolchain`.
        OSError: It cannot be read.
    """
    with (root / TOOLCHAIN_FILE).open(encoding="utf-8", errors="replace") as f:
        text = f.read(_TOOLCHAIN_MAX).strip()
    return text.splitlines()[0].strip() if text else None


def elan_toolchain_dir(toolchain: str) -> str | None:
    """The directory name elan gives a toolchain: `leanprover/lean4:v4.35.0` -> `leanprover--lean4---v4.35.0`.

    Returns:
        None for a name that is no directory of elan's `toolchains` (`..` is elan's home itself, whose `bin/lake`
        is elan's own proxy; `.` is `toolchains`).
    """
    folder = toolchain.replace("/", "--").replace(":", "---")
    return folder if folder not in ("", ".", "..") else None


def module_name(root: str | Path, path: Path) -> str | None:
    """The Lean module a `.lean` file under `root` defines (`Foo/Bar.lean` -> `Foo.Bar`), else None.

    The test is lexical (nothing is resolved): a path that leaves `root` through `..` is outside it.
    """
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    if ".." in rel.parts or rel.suffix != ".lean" or not rel.with_suffix("").parts:
        return None
    return ".".join(rel.with_suffix("").parts)


def is_module_name(name: str) -> bool:
    """Whether `name` is a valid Lean module name (dot-separated identifiers; never an option like `--help`)."""
    return bool(name) and all(_COMPONENT.fullmatch(part) for part in name.split("."))
