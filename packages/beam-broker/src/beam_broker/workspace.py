"""The local workspace descriptor `{"root": <absolute path>}`: validation, canonical root, cache key.

A descriptor selects the Lean runtime and toolchain; it is not a filesystem sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import invalid_input

PROJECT_MARKERS = ("lean-toolchain", "lakefile.toml", "lakefile.lean")


class WorkspaceDescriptor(BaseModel):
    """The public local workspace descriptor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root: str = Field(description="Absolute Lean/Lake project root path.")


def cache_key(canonical_root: str) -> str:
    """The private, deterministic runtime key for a canonical root."""
    return f"local:{canonical_root}"


def resolve(raw: Any, *, for_drop: bool = False) -> WorkspaceDescriptor:
    """Validate a raw descriptor and return it with the canonical root.

    Args:
        raw: The JSON value given as `workspace`.
        for_drop: Accept an absolute root whose directory or project markers have vanished (drop of a
            canonical descriptor echoed earlier): it is normalized lexically instead.

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
        if for_drop:
            return WorkspaceDescriptor(root=os.path.normpath(root))
        raise invalid_input(f"workspace root does not resolve: {root}")
    canonical = os.path.realpath(root)
    if not os.path.isdir(canonical):
        if for_drop:
            return WorkspaceDescriptor(root=os.path.normpath(root))
        raise invalid_input(f"workspace root is not a directory: {root}")
    if not any(os.path.exists(os.path.join(canonical, m)) for m in PROJECT_MARKERS):
        if for_drop:
            return WorkspaceDescriptor(root=canonical)
        raise invalid_input(
            f"workspace root is not a Lean/Lake project (expected lean-toolchain, lakefile.toml or "
            f"lakefile.lean): {root}"
        )
    return WorkspaceDescriptor(root=canonical)


def resolve_path(root: str, path: str) -> Path:
    """Resolve a tool `path` against a canonical root (absolute paths are canonicalized independently)."""
    p = Path(path)
    full = p if p.is_absolute() else Path(root) / p
    return Path(os.path.realpath(full))


def display_path(root: str, path: Path) -> str:
    """Root-relative path when inside the root, else the file URI."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_uri()


def module_name(root: str, path: Path) -> str | None:
    """Lean module name of a file under the root (`Foo/Bar.lean` -> `Foo.Bar`), else None."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return None
    if rel.suffix != ".lean":
        return None
    return ".".join(rel.with_suffix("").parts)
