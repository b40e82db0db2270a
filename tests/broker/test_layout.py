"""Where a Lake package keeps its sources and build artifacts (`_lake.Layout`): the lakefile's `srcDir`/`buildDir`."""

from __future__ import annotations

from pathlib import Path

import pytest

from beam_broker._freshness import Freshness
from beam_broker._lake import Layout, Layouts, read_layout

pytestmark = pytest.mark.anyio


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_without_a_lakefile_sources_are_at_the_root_and_artifacts_in_dot_lake_build(tmp_path: Path) -> None:
    layout = read_layout(tmp_path)
    assert layout == Layout.default(tmp_path)
    assert layout.source_path("Demo.«A B»") == tmp_path / "Demo/A B.lean"
    assert layout.olean_path("Demo.Basic") == tmp_path / ".lake/build/lib/lean/Demo/Basic.olean"
    assert layout.module_of(tmp_path / "Demo/Basic.lean") == "Demo.Basic"


def test_lakefile_toml_sets_the_package_and_library_source_directories_and_the_build_directory(tmp_path: Path) -> None:
    lakefile = """\
name = "demo"
srcDir = "src"
buildDir = "./out"

[[lean_lib]]
name = "Demo"

[[lean_lib]]
name = "Extra"
srcDir = "extra"
"""
    root = write(tmp_path, {"lakefile.toml": lakefile, "src/extra/Extra/A.lean": "x\n", "src/Demo/B.lean": "y\n"})
    layout = read_layout(root)
    assert layout.source_dirs == (root / "src", root / "src/extra")
    assert layout.build_dir == root / "out"
    assert layout.source_path("Demo.B") == root / "src/Demo/B.lean"
    assert layout.source_path("Extra.A") == root / "src/extra/Extra/A.lean"  # the directory that holds it
    assert layout.source_path("Demo.Gone") == root / "src/Demo/Gone.lean"  # none does: the first
    assert layout.module_file("--help") is None and layout.module_file("Demo.Gone") is None
    assert layout.olean_path("Extra.A") == root / "out/lib/lean/Extra/A.olean"
    assert layout.module_of(root / "src/extra/Extra/A.lean") == "Extra.A"  # the innermost directory names it
    assert layout.module_of(root / "src/Demo/B.lean") == "Demo.B"
    assert layout.module_of(root / "Scratch.lean") is None  # outside every source directory: no module


def test_lakefile_lean_is_read_with_a_plain_pattern_outside_comments(tmp_path: Path) -> None:
    lakefile = """\
import Lake
open Lake DSL

-- srcDir := "commented"
package demo where
  srcDir := "src"
  buildDir := "build"
/- lean_lib Hidden where
  srcDir := "hidden" -/
lean_lib Demo where
  srcDir := "lib"

@[default_target]
lean_lib Other
"""
    root = write(tmp_path, {"lakefile.lean": lakefile, "lakefile.toml": 'srcDir = "ignored"\n'})
    layout = read_layout(root)  # lakefile.lean first, as Lake reads it
    assert layout.source_dirs == (root / "src/lib", root / "src")
    assert layout.build_dir == root / "build"


def test_a_malformed_lakefile_toml_gives_the_defaults(tmp_path: Path) -> None:
    root = write(tmp_path, {"lakefile.toml": "srcDir = \n"})
    assert read_layout(root) == Layout.default(root)


def test_the_layout_is_read_again_when_the_lakefile_changes(tmp_path: Path) -> None:
    layouts = Layouts(tmp_path)
    assert layouts.get() == Layout.default(tmp_path)
    write(tmp_path, {"lakefile.toml": 'srcDir = "src"\n'})
    assert layouts.get().source_dirs == (tmp_path / "src",)


async def test_freshness_finds_imports_under_src_dir_and_their_oleans_under_build_dir(tmp_path: Path) -> None:
    """Taking the sources at the root, an import whose `.olean` exists read as a module whose source is gone
    (`needsSave` for ever); with the build elsewhere too, no import was seen at all (an edit read clean)."""
    lakefile = 'name = "p"\nsrcDir = "src"\nbuildDir = "out"\n[[lean_lib]]\nname = "P"\n'
    files = {"lakefile.toml": lakefile, "src/P/Base.lean": "prelude\n", "src/P/Top.lean": "prelude\nimport P.Base\n"}
    root = write(tmp_path, files)
    layout = read_layout(root)
    for module in ("P.Base", "P.Top"):
        layout.olean_path(module).parent.mkdir(parents=True, exist_ok=True)
        layout.olean_path(module).write_bytes(b"built")

    async def lake(modules: list[str]) -> int:
        return 0  # Lake: built from their current sources

    fresh = Freshness(
        str(root), lambda p: p.relative_to(root).as_posix(), lake, max_source_bytes=1 << 20, layout=lambda: layout
    )
    nodes = await fresh.closure(("P.Top",))
    assert [(n.name, n.path, n.source is not None) for n in nodes] == [
        ("P.Base", root / "src/P/Base.lean", True),
        ("P.Top", root / "src/P/Top.lean", True),
    ]
    loaded = await fresh.loading(("P.Top",))
    assert await fresh.stale(("P.Top",), loaded, {}) == []
    (root / "src/P/Base.lean").write_text("prelude\ndef edited := 1\n")
    assert [(s.module, s.path, s.needs_save) for s in await fresh.stale(("P.Top",), loaded, {})] == [
        ("P.Base", "src/P/Base.lean", True),
        ("P.Top", "src/P/Top.lean", True),
    ]
