"""Probe verdict logic against the scripted fake server (shapes copied from real Lean).

The fake reports `unsolved goals` (leanTags [1]) for lines with GOALS_HERE and an error for ERROR_HERE, so the
attribution rules can be checked exactly: an error inside the probe span fails the probe; the enclosing
declaration's unsolved-goals error means goals remain; without it the goals are solved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig
from tests.support.fixtures import fake_cmd

pytestmark = pytest.mark.anyio


async def probe(tmp_path: Path, source: str, text: str, line: int, character: int) -> dict[str, Any]:
    root = tmp_path / "proj"
    root.mkdir(exist_ok=True)
    (root / "lean-toolchain").write_text("x\n")
    (root / "A.lean").write_text(source)
    args = {"workspace": {"root": str(root)}, "path": "A.lean"}
    async with Broker.open(BrokerConfig(lean_cmd=fake_cmd(), env={"PATH": "/usr/bin:/bin"})) as broker:
        with anyio.fail_after(20):
            await broker.call("update", args)
            return await broker.call(
                "run_at", {**args, "version": 1, "line": line, "character": character, "text": text}
            )


async def test_an_error_inside_the_probe_fails_it(tmp_path: Path) -> None:
    result = await probe(tmp_path, "theorem t : True := by\n  skip\n", "ERROR_HERE", 0, 22)
    assert result["success"] is False
    assert result["messages"] == [{"severity": "error", "text": "unknown identifier 'ERROR_HERE'"}]
    assert result["proof_state"] == {"goals": [{"goalPrefix": "⊢ ", "target": "True", "hyps": []}]}


async def test_the_enclosing_unsolved_goals_error_means_goals_remain_not_failure(tmp_path: Path) -> None:
    source = "theorem t : True /- GOALS_HERE -/ := by\n  skip\n"
    result = await probe(tmp_path, source, "fine", 0, len(source.split("\n")[0]))
    assert result["success"] is True and result["messages"] == []
    assert result["proof_state"]["goals"], "goals remain"


async def test_without_an_unsolved_goals_error_the_goals_are_solved(tmp_path: Path) -> None:
    result = await probe(tmp_path, "theorem t : True := by\n  skip\n", "fine", 0, 22)
    assert result == {**result, "success": True, "messages": [], "proof_state": {"goals": []}}


async def test_messages_before_the_probe_belong_to_the_source_not_the_probe(tmp_path: Path) -> None:
    result = await probe(tmp_path, "def e := ERROR_HERE\ntheorem t : True := by\n  skip\n", "fine", 1, 22)
    assert result["success"] is True and result["messages"] == []
