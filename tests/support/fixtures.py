"""Pytest fixtures shared by every test package (imported by the package conftests)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import projects, toolchain
from .toolchain import Toolchain

FAKE_LEAN = Path(__file__).resolve().parent / "fake_lean.py"


def fake_cmd(config: dict[str, object] | None = None) -> list[str]:
    """Command line that starts the scripted fake Lean server with `config`."""
    cmd = [sys.executable, str(FAKE_LEAN)]
    if config:
        cmd += ["--config", json.dumps(config)]
    return cmd


@pytest.fixture(scope="session")
def lean_toolchain() -> Toolchain:
    """The real Lean toolchain of this lane; skips where the lane has none (fake lane, elan absent)."""
    tc = toolchain.from_env()
    if tc is None:
        pytest.skip("no real Lean toolchain in this lane (BEAM_TEST_TOOLCHAIN)")
    return tc


@pytest.fixture(scope="session")
def built_demo(lean_toolchain: Toolchain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo project with Demo.Basic and Demo.Proofs built once per session (read-only for tests)."""
    root = projects.copy_project("demo", tmp_path_factory.mktemp("built") / "demo")
    result = projects.lake_build(lean_toolchain, root, "Demo.Basic", "Demo.Proofs")
    assert result.returncode == 0, result.stdout + result.stderr
    return root


@pytest.fixture
def demo_root(built_demo: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the built demo project that a test may edit."""
    dest = tmp_path / "demo"
    shutil.copytree(built_demo, dest, symlinks=True)
    yield dest.resolve()
