"""The local workspace descriptor `{"root": <absolute path>}`: validation, canonical root, cache key, tool paths.

A descriptor selects the Lean runtime and toolchain; it is not a filesystem sandbox. What makes a directory a
Lean/Lake project is `beam_lsp.project`'s rule (the only copy); this module adds the descriptor's messages.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from beam_lsp.project import PROJECT_MARKERS, is_project_root

from .errors import invalid_input, invalid_params

LEAN_SUFFIX = ".lean"
"""What every Lean source file's name ends with (Lean and Lake know a module's file by it)."""


class WorkspaceDescriptor(BaseModel):
    """The public local workspace descriptor."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    root: str = Field(min_length=1, description="Absolute Lean/Lake project root path.")


def cache_key(canonical_root: str) -> str:
    """The private, deterministic runtime key for a canonical root."""
    return f"local:{canonical_root}"


def resolve(raw: Any, *, allow_vanished: bool = False) -> WorkspaceDescriptor:
    """Validate a raw descriptor and return it with the canonical root.

    Args:
        raw: The JSON value given as `workspace`.
        allow_vanished: Accept an absolute root whose directory or project markers have vanished (an operation
            on the broker's table of runtimes, such as dropping a canonical descriptor echoed earlier): it is
            normalized lexically instead.

    Raises:
        BrokerError: `invalidInput` with the messages the contract pins.
    """
    if raw is None:
        raise invalid_input('workspace is required: pass {"workspace": {"root": "/abs/project"}}')
    if not isinstance(raw, dict):
        raise invalid_input('workspace must be an object {"root": <absolute path>}')
    extra = sorted(k for k in raw if k != "root")
    if extra:
        raise invalid_input(
            f"workspace descriptor accepts only the 'root' field (got: {', '.join(extra)})",
            {"fields": extra},
        )
    root = raw.get("root")
    if not isinstance(root, str) or not root:
        raise invalid_input("workspace root is required and must be a string")
    if not os.path.isabs(root):
        raise invalid_input(f"workspace root must be an absolute path: {root}")
    if not os.path.exists(root):
        if allow_vanished:
            return WorkspaceDescriptor(root=os.path.normpath(root))
        raise invalid_input(f"workspace root does not resolve: {root}")
    canonical = os.path.realpath(root)
    if not os.path.isdir(canonical):
        if allow_vanished:
            return WorkspaceDescriptor(root=os.path.normpath(root))
        raise invalid_input(f"workspace root is not a directory: {root}")
    if not is_project_root(Path(canonical)):
        if allow_vanished:
            return WorkspaceDescriptor(root=canonical)
        raise invalid_input(
            f"workspace root is not a Lean/Lake project (expected {', '.join(PROJECT_MARKERS[:-1])} or "
            f"{PROJECT_MARKERS[-1]}): {root}"
        )
    return WorkspaceDescriptor(root=canonical)


def resolve_path(root: str, path: str) -> Path:
    """Resolve a tool `path` against a canonical root (absolute paths are canonicalized independently)."""
    p = Path(path)
    full = p if p.is_absolute() else Path(root) / p
    return Path(os.path.realpath(full))


def check_lean_source(root: str, path: str) -> Path:
    """The one path check of a tool `path`: it names a Lean source file (`resolve_path`, then `.lean`).

    The canonical path is checked (a `.lean` symlink to `notes.txt` is `notes.txt` to Lean). Nothing is read:
    whether the file exists and is readable is `_documents.read_source`'s to say when it reads it.

    Raises:
        BrokerError: `invalidParams` with `data.reason = "notLeanSource"` for any other file (`lakefile.toml`,
            `/etc/hostname`): Lean would elaborate it as Lean text and answer with nonsense.
    """
    full = resolve_path(root, path)
    if not full.name.endswith(LEAN_SUFFIX) or full.name == LEAN_SUFFIX:
        raise invalid_params(
            f"not a Lean source file: {path}; Beam works only on Lean source files (`*{LEAN_SUFFIX}`)",
            {"reason": "notLeanSource", "path": str(full)},
        )
    return full


def display_path(root: str, path: Path) -> str:
    """Root-relative path when inside the root, else the file URI."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_uri()
