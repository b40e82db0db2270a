from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from beam_broker import Broker, BrokerConfig
from tests.support.fixtures import built_demo, built_truth, demo_root, fake_cmd, lean_toolchain
from tests.support.projects import fake_project
from tests.support.toolchain import Toolchain

from .support import Cli, cli_env

__all__ = ["broker", "built_demo", "built_truth", "demo_root", "fake_cli", "lean_cli", "lean_toolchain", "state_dir"]


@pytest.fixture
async def broker(lean_toolchain: Toolchain) -> AsyncIterator[Broker]:
    """A broker whose workspaces run the lane's real Lean (`lake serve` with no report delay)."""
    config = BrokerConfig(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env())
    async with Broker.open(config) as b:
        yield b


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A short private XDG_RUNTIME_DIR (unix socket paths are limited to about 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="beam-cli-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def lean_cli(lean_toolchain: Toolchain, demo_root: Path, state_dir: Path) -> Iterator[Cli]:
    """`lean-beam` in the demo project with the lane's real Lean (`lake serve` from PATH)."""
    runner = Cli(cli_env(lean_toolchain.env(), state_dir), demo_root)
    yield runner
    runner.cleanup()


@pytest.fixture
def fake_cli(tmp_path: Path, state_dir: Path) -> Iterator[Cli]:
    """`lean-beam` in a small project served by the scripted fake Lean (`BEAM_LEAN_SERVER_CMD`)."""
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    runner = Cli(cli_env(dict(os.environ), state_dir, BEAM_LEAN_SERVER_CMD=shlex.join(fake_cmd())), root)
    yield runner
    runner.cleanup()
