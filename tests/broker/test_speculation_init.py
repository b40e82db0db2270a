"""Proof-mode probes that close or leave goals: they need real tactics, i.e. a toolchain with Init.

The lean435 lane has no Init oleans (no tactic parses there); these run in the elan lane.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker
from tests.support import projects
from tests.support.toolchain import Toolchain

pytestmark = [pytest.mark.anyio, pytest.mark.lean]


@pytest.fixture
def init_root(lean_toolchain: Toolchain, tmp_path: Path) -> Path:
    if lean_toolchain.kind == "lean435":
        pytest.skip("needs a toolchain with Init oleans (elan lane); the lean435 wheel ships none")
    return projects.copy_project("initdemo", tmp_path / "initdemo")


async def run(broker: Broker, root: Path, line: int, character: int, text: str, tool: str = "run_at") -> dict[str, Any]:
    with anyio.fail_after(300):
        await broker.call("update", {"workspace": {"root": str(root)}, "path": "InitDemo/Basic.lean"})
        return await broker.call(
            tool,
            {
                "workspace": {"root": str(root)},
                "path": "InitDemo/Basic.lean",
                "version": 1,
                "line": line,
                "character": character,
                "text": text,
            },
        )


async def test_a_probe_that_closes_the_goal_reports_no_goals(broker: Broker, init_root: Path) -> None:
    result = await run(broker, init_root, 6, 2, "exact id")
    assert result["success"] is True and result["proof_state"] == {"goals": []}


async def test_a_probe_that_leaves_goals_reports_them(broker: Broker, init_root: Path) -> None:
    result = await run(broker, init_root, 1, 2, "constructor")
    assert result["success"] is True
    assert [g["target"] for g in result["proof_state"]["goals"]] == ["p", "q"]


async def test_before_and_after_a_tactic_differ(broker: Broker, init_root: Path) -> None:
    before = await run(broker, init_root, 2, 2, "exact hp")  # at `exact hp`: runs instead of it
    assert before["success"] is True and [g["target"] for g in before["proof_state"]["goals"]] == ["q"]
    after = await run(broker, init_root, 2, 5, "exact hq")  # inside `exact hp`: runs after it
    assert after["success"] is True and after["proof_state"] == {"goals": []}


async def test_a_failing_tactic_keeps_the_goals_at_the_basis(broker: Broker, init_root: Path) -> None:
    result = await run(broker, init_root, 6, 2, "exact 42")
    assert result["success"] is False and result["messages"][0]["severity"] == "error"
    assert [g["target"] for g in result["proof_state"]["goals"]] == ["p → p"]


async def test_a_handle_chain_of_tactics_closes_the_proof(broker: Broker, init_root: Path) -> None:
    first = await run(broker, init_root, 1, 2, "constructor", tool="run_at_handle")
    handle = first["next_handle"]
    ws = {"workspace": {"root": str(init_root)}, "path": "InitDemo/Basic.lean"}
    second = await broker.call("run_with", {**ws, "handle": handle, "text": "exact hp"})
    third = await broker.call("run_with", {**ws, "handle": second["next_handle"], "text": "exact hq"})
    assert third["success"] is True and third["proof_state"] == {"goals": []}
