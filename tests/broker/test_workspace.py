"""Workspace descriptors: validation messages, canonical roots, cache keys, tool paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from beam_broker import BrokerError
from beam_broker.errors import INVALID_INPUT
from beam_broker.workspace import cache_key, display_path, resolve, resolve_path


def project(tmp_path: Path, marker: str = "lean-toolchain") -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / marker).write_text("x")
    return root


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (None, "workspace is required"),
        ("/x", "must be an object"),
        ({"root": "relative/dir"}, "must be an absolute path"),
        ({"root": "/definitely/not/here"}, "does not resolve"),
        ({"root": "/x", "id": 1}, "accepts only the 'root' field"),
        ({"root": 3}, "must be a string"),
        ({"root": ""}, "must be a string"),
    ],
)
def test_bad_descriptors_are_invalid_input_with_the_pinned_messages(raw: object, needle: str) -> None:
    with pytest.raises(BrokerError) as info:
        resolve(raw)
    assert info.value.code == INVALID_INPUT and needle in info.value.message


def test_extra_descriptor_fields_are_listed_in_the_data() -> None:
    with pytest.raises(BrokerError) as info:
        resolve({"root": "/x", "b": 1, "a": 2})
    assert info.value.data == {"fields": ["a", "b"]}


def test_a_file_or_a_plain_directory_is_not_a_workspace(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(BrokerError, match="not a directory"):
        resolve({"root": str(tmp_path / "f")})
    with pytest.raises(BrokerError, match=r"not a Lean/Lake project \(expected lean-toolchain, lakefile.toml or"):
        resolve({"root": str(tmp_path)})


@pytest.mark.parametrize("marker", ["lean-toolchain", "lakefile.toml", "lakefile.lean"])
def test_any_project_marker_makes_a_workspace_and_symlinks_resolve(tmp_path: Path, marker: str) -> None:
    root = project(tmp_path, marker)
    (tmp_path / "alias").symlink_to(root)
    desc = resolve({"root": str(tmp_path / "alias")})
    assert desc.root == os.path.realpath(root)
    assert cache_key(desc.root) == f"local:{desc.root}"


def test_a_vanished_root_is_accepted_only_when_asked_and_then_normalized(tmp_path: Path) -> None:
    assert resolve({"root": "/gone/away/../proj"}, allow_vanished=True).root == "/gone/proj"
    (tmp_path / "f").write_text("")
    assert resolve({"root": str(tmp_path / "f")}, allow_vanished=True).root == str(tmp_path / "f")
    assert resolve({"root": str(tmp_path)}, allow_vanished=True).root == os.path.realpath(tmp_path)
    with pytest.raises(BrokerError):
        resolve({"root": "relative"}, allow_vanished=True)


def test_tool_paths_resolve_under_the_root_and_display_relative_to_it(tmp_path: Path) -> None:
    root = project(tmp_path)
    assert resolve_path(str(root), "A/B.lean") == root / "A/B.lean"
    assert resolve_path(str(root), "/elsewhere/C.lean") == Path("/elsewhere/C.lean")
    assert display_path(str(root), root / "A/B.lean") == "A/B.lean"
    assert display_path(str(root), Path("/elsewhere/C.lean")) == "file:///elsewhere/C.lean"
