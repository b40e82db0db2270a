"""Plain helpers shared by the beam-lsp tests (fixtures live in conftest.py)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import ModuleType


def imported_modules(module: ModuleType) -> set[str]:
    """Top-level names of every module `module`'s source imports (relative imports excluded)."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names.add(node.module.split(".")[0])
    return names


def stdlib_only(module: ModuleType) -> bool:
    """Whether `module` imports nothing outside the standard library (relative imports included)."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    relative = any(isinstance(node, ast.ImportFrom) and node.level > 0 for node in ast.walk(tree))
    return not relative and imported_modules(module) <= set(sys.stdlib_module_names)
