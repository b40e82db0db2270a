"""beam_lsp.project: Lake markers, project-root discovery and module names (the only copy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from beam_lsp import project
from beam_lsp.project import (
    LAKEFILES,
    PROJECT_MARKERS,
    TOOLCHAIN_FILE,
    find_project_root,
    is_module_name,
    is_project_root,
    module_name,
    read_toolchain,
)
from tests.lsp.helpers import stdlib_only


def test_the_markers_are_the_toolchain_file_and_both_lakefiles() -> None:
    assert PROJECT_MARKERS == ("lean-toolchain", "lakefile.toml", "lakefile.lean")


@pytest.mark.parametrize("marker", PROJECT_MARKERS)
def test_any_one_marker_makes_a_project_root(tmp_path: Path, marker: str) -> None:
    assert not is_project_root(tmp_path)
    (tmp_path / marker).write_text("", encoding="utf-8")
    assert is_project_root(tmp_path)


def test_the_nearest_root_at_or_above_a_directory_wins(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "pkgs" / "inner"
    deep = inner / "Inner" / "Deep"
    deep.mkdir(parents=True)
    (outer / "lakefile.lean").write_text("", encoding="utf-8")
    (inner / "lean-toolchain").write_text("", encoding="utf-8")
    assert find_project_root(deep) == inner
    assert find_project_root(inner) == inner
    assert find_project_root(outer / "pkgs") == outer


def test_a_file_starts_the_search_at_its_parent(tmp_path: Path) -> None:
    (tmp_path / "lakefile.toml").write_text("", encoding="utf-8")
    (tmp_path / "A").mkdir()
    source = tmp_path / "A" / "B.lean"
    source.write_text("", encoding="utf-8")
    assert find_project_root(source) == tmp_path
    assert find_project_root(tmp_path / "A" / "NotYet.lean") == tmp_path  # a path that does not exist yet


def test_no_marker_anywhere_above_gives_none(tmp_path: Path) -> None:
    if any(is_project_root(parent) for parent in tmp_path.parents):
        pytest.skip("the temporary directory lives inside a Lean project")
    (tmp_path / "x").mkdir()
    assert find_project_root(tmp_path / "x") is None


def test_module_names_follow_the_path_under_the_root(tmp_path: Path) -> None:
    assert module_name(tmp_path, tmp_path / "Foo" / "Bar.lean") == "Foo.Bar"
    assert module_name(str(tmp_path), tmp_path / "Main.lean") == "Main"


@pytest.mark.parametrize("rel", ["Foo/Bar.olean", "Foo/Bar", "README.md", ".lean"])
def test_non_lean_files_have_no_module_name(tmp_path: Path, rel: str) -> None:
    assert module_name(tmp_path, tmp_path / rel) is None


def test_files_outside_the_root_have_no_module_name(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    assert module_name(root, tmp_path / "other" / "A.lean") is None
    assert module_name(root, root / ".." / "A.lean") is None
    assert module_name(root, Path("A.lean")) is None


@pytest.mark.parametrize(
    "name", ["Foo", "Foo.Bar", "Mathlib.Data.Nat.Basic", "foo_bar'", "x₁.y!", "Über.Straße", "«my module».Sub"]
)
def test_lean_identifiers_joined_by_dots_are_module_names(name: str) -> None:
    assert is_module_name(name)


@pytest.mark.parametrize(
    "name", ["", "-Foo", "--help", "Foo.", ".Foo", "Foo..Bar", "1Foo", "Foo/Bar", "Foo Bar", "«»", "Foo.-x"]
)
def test_options_paths_and_malformed_names_are_not_module_names(name: str) -> None:
    assert not is_module_name(name)


def test_the_module_imports_only_the_standard_library() -> None:
    assert stdlib_only(project)


def test_the_toolchain_is_the_first_line_of_lean_toolchain(tmp_path: Path) -> None:
    (tmp_path / TOOLCHAIN_FILE).write_text("  leanprover/lean4:v4.35.0 \nignored\n", encoding="utf-8")
    assert read_toolchain(tmp_path) == "leanprover/lean4:v4.35.0"
    (tmp_path / TOOLCHAIN_FILE).write_text("\n  \n", encoding="utf-8")
    assert read_toolchain(tmp_path) is None
    with pytest.raises(FileNotFoundError):
        read_toolchain(tmp_path / "nowhere")
    assert PROJECT_MARKERS == (TOOLCHAIN_FILE, *LAKEFILES)
