"""The package as a whole: its public names, and a layout a newcomer can read (sizes, no import cycles)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import beam_broker

PACKAGE = Path(beam_broker.__file__).parent
MODULE_LINES = 600
CLASS_LINES = 400


def test_every_public_name_resolves() -> None:
    for name in beam_broker.__all__:
        assert getattr(beam_broker, name) is not None
    with pytest.raises(AttributeError):
        beam_broker.NotAName  # noqa: B018


def modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.glob("*.py"))}


def test_no_module_or_class_is_too_big_to_hold_one_concept() -> None:
    for name, tree in modules().items():
        lines = (PACKAGE / f"{name}.py").read_text(encoding="utf-8").count("\n")
        assert lines <= MODULE_LINES, f"{name}.py has {lines} lines"
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                assert size <= CLASS_LINES, f"{name}.{node.name} has {size} lines"


def imports(tree: ast.Module, names: set[str]) -> set[str]:
    """The package modules a module imports, at any level (type-checking-only imports included)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is not None:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("beam_broker."):
            found.add(node.module.split(".")[1])
    return found & names


def test_the_modules_import_each_other_without_cycles() -> None:
    trees = modules()
    names = set(trees) - {"__init__"}
    graph = {name: imports(trees[name], names) - {name} for name in names}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, "import cycle: " + " -> ".join((*path, name))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, (*path, name))
        done.add(name)

    for name in sorted(names):
        visit(name, ())
