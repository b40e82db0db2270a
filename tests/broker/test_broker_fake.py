"""Broker behaviour that needs faults real Lean cannot produce on demand (scripted fake server)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from beam_broker import RUNTIME_SETUP, Broker, BrokerConfig, BrokerError
from beam_broker import errors as codes
from tests.support.fixtures import fake_cmd

pytestmark = pytest.mark.anyio


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n")
    (root / "A.lean").write_text("theorem x : True := trivial\n")
    return root


async def test_a_missing_server_command_is_a_runtime_setup_error(tmp_path: Path) -> None:
    root = project(tmp_path)
    async with Broker.open(BrokerConfig(env={"PATH": str(tmp_path / "empty")})) as broker:
        with pytest.raises(BrokerError) as info:
            await broker.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
    assert info.value.code == RUNTIME_SETUP and "lake" in info.value.message


async def test_the_server_command_comes_from_the_environment_when_not_given(tmp_path: Path) -> None:
    root = project(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "BEAM_LEAN_SERVER_CMD": " ".join(fake_cmd())}
    async with Broker.open(BrokerConfig(env=env)) as broker:
        with anyio.fail_after(20):
            result = await broker.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
    assert result["readiness"]["save_ready"] is True


async def test_a_server_that_dies_fails_the_call_and_the_next_call_restarts_it(tmp_path: Path) -> None:
    root = project(tmp_path)
    config = BrokerConfig(
        lean_cmd=fake_cmd({"crash_on": {"method": "textDocument/hover"}}), env={"PATH": "/usr/bin:/bin"}
    )
    args = {"workspace": {"root": str(root)}, "path": "A.lean"}
    async with Broker.open(config) as broker:
        with anyio.fail_after(20):
            await broker.call("sync", args)
            with pytest.raises(BrokerError) as info:
                await broker.call("hover", {**args, "version": 1, "line": 0, "character": 8})
            assert info.value.code == codes.WORKER_EXITED
            assert info.value.data is not None and "INTERNAL PANIC" in info.value.data["stderrTail"]
            again = await broker.call("update", args)
        assert (again["version"], again["changed"]) == (1, True)
        lean = broker.stats()["workspaces"][f"local:{root}"]["byBackend"]["lean"]
        assert (lean["sessionStarts"], lean["sessionRestarts"], lean["workerExitedCount"]) == (2, 1, 1)


async def test_lean_errors_keep_their_lsp_names(tmp_path: Path) -> None:
    root = project(tmp_path)
    config = BrokerConfig(
        lean_cmd=fake_cmd({"content_modified": ["textDocument/hover"]}), env={"PATH": "/usr/bin:/bin"}
    )
    args = {"workspace": {"root": str(root)}, "path": "A.lean"}
    async with Broker.open(config) as broker:
        with anyio.fail_after(20):
            await broker.call("update", args)
            with pytest.raises(BrokerError) as info:
                await broker.call("hover", {**args, "version": 1, "line": 0, "character": 8})
    assert info.value.code == codes.CONTENT_MODIFIED and info.value.data == {"lspCode": -32801}
