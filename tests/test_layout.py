"""The four packages as a newcomer reads them: public names, module and class sizes, imports without cycles.

Every module of every package is walked, at any depth (`beam_broker/_ops/sync.py` as well as `beam_lsp/client.py`),
so a folder added later is guarded from its first file. An import counts wherever it is written (inside a function
or under `TYPE_CHECKING` too): a lazy import that points back up is still an arrow pointing back up.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = ("beam_lsp", "beam_broker", "beam_mcp", "beam_feedback")
DEPENDS_ON: dict[str, set[str]] = {
    "beam_lsp": set(),
    "beam_broker": {"beam_lsp"},
    "beam_feedback": {"beam_lsp"},
    "beam_mcp": {"beam_lsp", "beam_broker", "beam_feedback"},
}
"""Which other packages each package may import: dependencies point down only."""
MODULE_LINES = 600
CLASS_LINES = 400
REPO = Path(__file__).resolve().parent.parent


def package_dir(package: str) -> Path:
    return REPO / "packages" / package.replace("_", "-") / "src" / package


def module_files(package: str) -> Iterator[tuple[str, Path]]:
    """`(dotted name, file)` of every module of a package, subpackages included (`__init__` names its package)."""
    root = package_dir(package).parent
    for path in sorted(package_dir(package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


MODULES: dict[str, Path] = {name: path for package in PACKAGES for name, path in module_files(package)}


def test_every_package_and_subpackage_is_walked() -> None:
    # The guard must see the rooms: a glob of the top folder alone would miss them.
    assert {"beam_broker._ops.sync", "beam_broker._probes.run", "beam_broker._cli.daemon", "beam_mcp._http.app"} <= set(
        MODULES
    )


KNOWN_DEBTS_SIZE = {
    "beam_lsp._sync_methods": "generated from LeanClient and LeanFile by scripts/gen_sync.py (the blocking twin)",
    "beam_lsp._sync_methods.SyncClientMethods": "generated, as above",
}
"""Modules and classes over the size guide that this guard found when it first walked every package. Each one is
a debt to pay (split it along its concepts, or say why a generated file is exempt), not a precedent: the list may
only shrink, and a test fails once an entry is no longer over the size."""
KNOWN_DEBTS_IMPORT = {
    ("beam_lsp._file", "beam_lsp.client"): "LeanFile's annotation of its client (under TYPE_CHECKING) points back up",
    ("beam_mcp._tools", "beam_mcp._calls"): "the compat tools' runner type (under TYPE_CHECKING) points back up",
    ("beam_mcp._compat._surface", "beam_mcp._calls"): "as above",
    ("beam_mcp._compat._core", "beam_mcp._calls"): "as above",
    (
        "beam_mcp._tools",
        "beam_mcp._compat",
    ): "the tool set builds the lean-lsp-mcp surface (a lazy import), whose tools are _tools.Tool",
}
"""Import arrows that close a cycle, found when this guard first walked every package: debts, as above."""


def oversized() -> dict[str, int]:
    """Every module over `MODULE_LINES` and class over `CLASS_LINES`, with its size."""
    found: dict[str, int] = {}
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MODULE_LINES:
            found[name] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > CLASS_LINES:
                    found[f"{name}.{node.name}"] = size
    return found


def test_no_module_or_class_is_too_big_to_hold_one_concept() -> None:
    found = oversized()
    assert {name: size for name, size in found.items() if name not in KNOWN_DEBTS_SIZE} == {}
    assert set(KNOWN_DEBTS_SIZE) <= set(found), "a debt is paid: strike it from KNOWN_DEBTS_SIZE"


def resolve(module: str, path: Path, node: ast.ImportFrom) -> list[str]:
    """The modules of our packages an import statement names (a `from X import y` names `X.y` if y is a module)."""
    if node.level:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    found = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES]
    return found or [base]


def imports(module: str, path: Path) -> set[str]:
    """The modules of our packages that `module` imports anywhere in its text (nearest existing module)."""
    named: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            named.extend(resolve(module, path, node))
        elif isinstance(node, ast.Import):
            named.extend(alias.name for alias in node.names)
    found = set()
    for name in named:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found - {module}


GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def test_packages_import_only_the_packages_below_them() -> None:
    upward = [
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if (home := target.split(".")[0]) != name.split(".")[0] and home not in DEPENDS_ON[name.split(".")[0]]
    ]
    assert upward == []


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (as the path that closes it), or None."""
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for target in sorted(graph[name]):
            found = visit(target, (*path, name))
            if found is not None:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, ())
        if found is not None:
            return found
    return None


def test_no_import_cycle_anywhere_in_the_packages() -> None:
    graph = {name: targets - {b for a, b in KNOWN_DEBTS_IMPORT if a == name} for name, targets in GRAPH.items()}
    found = cycle(graph)
    assert found is None, "import cycle: " + " -> ".join(found or [])
    for importer, imported in KNOWN_DEBTS_IMPORT:
        assert imported in GRAPH[importer], "a debt is paid: strike it from KNOWN_DEBTS_IMPORT"


def test_the_cycle_finder_finds_a_cycle_through_a_subpackage() -> None:
    # The guard itself: a cycle that closes in a room is found, one that does not is not.
    graph = {"p.a": {"p._ops.b"}, "p._ops.b": {"p.c"}, "p.c": {"p.a"}}
    assert cycle(graph) == ["p._ops.b", "p.c", "p.a", "p._ops.b"]
    assert cycle({**graph, "p.c": set()}) is None


def test_a_relative_import_resolves_against_the_package_it_is_written_in() -> None:
    tree = ast.parse("from . import models\nfrom ..errors import BrokerError\nfrom .run import run_at\n")
    nodes = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
    where = MODULES["beam_broker._probes.attempts"]
    assert [resolve("beam_broker._probes.attempts", where, node) for node in nodes] == [
        ["beam_broker._probes.models"],
        ["beam_broker.errors"],
        ["beam_broker._probes.run"],
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_once_and_nothing_else_does(package: str) -> None:
    module: ModuleType = importlib.import_module(package)
    names: list[str] = module.__all__
    assert len(names) == len(set(names)), "duplicates in __all__"
    for name in names:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError):
        module.NotAName  # noqa: B018


def type_checking_names(package: str) -> set[str]:
    """The names a package's `__init__` imports under `if TYPE_CHECKING:` (what type checkers see)."""
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    found.update(alias.asname or alias.name for alias in stmt.names)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_type_checkers_see_exactly_the_public_names(package: str) -> None:
    # Each name is written in the lazy table (which gives `__all__`) and in the `TYPE_CHECKING` imports.
    module = importlib.import_module(package)
    assert type_checking_names(package) == set(module.__all__) - {"__version__"}


ROOMS = ("_cli", "_ops", "_probes")
"""beam-broker's rooms: they import its core, which never imports them."""
BELOW = ("_serve",)
"""beam-broker's folders below its core: the core imports them, and they import only its leaves."""
LEAVES = {"beam_broker.config", "beam_broker.errors", "beam_broker._outbound"}


def test_the_broker_top_level_is_its_core_three_rooms_and_one_folder_below() -> None:
    top = package_dir("beam_broker")
    assert len(list(top.glob("*.py"))) <= 22
    folders = sorted(p.name for p in top.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(ROOMS + BELOW)


def below(name: str) -> bool:
    return any(name.startswith(f"beam_broker.{folder}") for folder in BELOW)


def test_a_folder_below_the_broker_core_imports_only_the_leaves_of_the_core() -> None:
    # Imports for annotations count too; the runtime's type is the one the governor needs (it never imports the
    # runtime module at run time, which imports the folder).
    allowed = LEAVES | {"beam_broker.runtime"}
    found = {
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if below(name)
        for target in targets
        if target.startswith("beam_broker") and not below(target) and target not in allowed
    }
    assert found == set()
