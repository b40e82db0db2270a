"""Fixtures for beam-feedback tests: report inputs, fake Lean projects, controlled environments."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from beam_feedback import Redactor


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fake home directory that holds the Lean project, so home redaction shows up in paths."""
    path = tmp_path / "home" / "ada"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def project(home: Path) -> Path:
    """A Lean project with a toolchain, a TOML lakefile and a manifest (no git)."""
    root = home / "proj"
    root.mkdir()
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n", encoding="utf-8")
    (root / "lakefile.toml").write_text('name = "proj"\n', encoding="utf-8")
    manifest = {
        "version": 7,
        "packagesDir": ".lake/packages",
        "packages": [
            {
                "type": "git",
                "name": "mathlib",
                "url": "https://github.com/leanprover-community/mathlib4",
                "rev": "0123456789abcdef0123456789abcdef01234567",
                "inputRev": "master",
                "scope": "",
            },
            {"type": "path", "name": "local", "dir": "../local", "scope": ""},
        ],
        "name": "proj",
    }
    (root / "lake-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """An empty directory to use as the whole PATH; tests add fake tools to it."""
    path = tmp_path / "bin"
    path.mkdir()
    return path


@pytest.fixture
def env(bin_dir: Path, home: Path, tmp_path: Path) -> dict[str, str]:
    """A closed environment: PATH is only ``bin_dir``, HOME is the fake home, git is confined."""
    return {
        "PATH": str(bin_dir),
        "HOME": str(home),
        # Keep a stray repository above tmp_path from being discovered.
        "GIT_CEILING_DIRECTORIES": str(tmp_path),
    }


@pytest.fixture
def redactor(env: dict[str, str]) -> Redactor:
    """The redactor a report built with ``env`` would use (HOME only, no secrets)."""
    return Redactor.from_sources(env, home=True)


@pytest.fixture
def git_path() -> str:
    """The directory of a real git, or skip (only the git-state tests need one)."""
    from shutil import which

    git = which("git")
    if git is None:
        pytest.skip("git is not installed")
    return os.path.dirname(git)
