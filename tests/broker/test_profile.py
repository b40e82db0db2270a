"""Profile: one declaration elaborated with Lean's profiler on, on a mirror, and Lean's times read back.

The fake lane scripts the profiler's messages on the mirror's declaration line and checks how they are read:
categories summed, times per source line (the profiler options' lines mapped away), the trace steps with the
most time of their own, the other messages. The real lane profiles prelude fixtures on Lean 4.35.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beam_broker import Broker
from beam_broker import errors as codes
from beam_broker._probes.profile import OPTIONS, profiler_times, trace_steps

from .support import call, error_of, fake_project, open_broker

pytestmark = pytest.mark.anyio
SOURCE = "theorem t : True := trivial\n\ndef d := 1\n"
OPTION_LINES = OPTIONS.count("\n")
TRACE = (
    "[Elab.command] [0.0200] theorem d\n"
    "  [Elab.step] [0.0150] \u2705\ufe0f expected type: Nat\n"
    "    [Meta.isDefEq] [0.0100] Nat =?= Nat\n"
    "    more text of the isDefEq node\n"
    "  [Elab.step] [0.0010] 1"
)


def on_line(line: int, message: str, severity: int = 3) -> dict[str, Any]:
    return {"line": line, "message": message, "severity": severity}


async def profile_d(tmp_path: Path, diagnostics: list[dict[str, Any]], **args: Any) -> dict[str, Any]:
    """Profile `d` (source line 2; mirror line 2 + the options' lines) with these diagnostics on the mirror."""
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker({"diagnostics": {"_beamProbe1.lean": diagnostics}}) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "profile", root, path="A.lean", version=1, line=2, character=4, **args)
        source = await call(broker, "sync", root, path="A.lean")
    assert source["version"] == 1 and (root / "A.lean").read_text() == SOURCE, "the source is never touched"
    return result


# ---- fake lane ------------------------------------------------------------------------------------------
async def test_profiler_times_are_summed_per_category_and_per_source_line(tmp_path: Path) -> None:
    line = 2 + OPTION_LINES
    result = await profile_d(
        tmp_path,
        [
            on_line(line, "elaboration took 12.5ms\ntype checking took 1.5ms"),
            on_line(line, "elaboration took 0.5ms"),
            on_line(line, "compilation took 0.002s"),
            on_line(0, "a message on the options' lines"),
        ],
    )
    assert (result["name"], result["version"], result["success"]) == ("d", 1, True)
    assert result["range"]["start"] == {"line": 2, "character": 0}
    assert result["categories"] == [
        {"category": "elaboration", "ms": 13.0},
        {"category": "compilation", "ms": 2.0},
        {"category": "type checking", "ms": 1.5},
    ]
    assert result["total_ms"] == 16.5
    assert result["lines"] == [{"line": 2, "ms": 16.5, "text": "def d := 1"}]
    assert result["slowest"] == [] and result["messages"] == []


async def test_trace_steps_come_back_slowest_first_by_their_own_time(tmp_path: Path) -> None:
    result = await profile_d(tmp_path, [on_line(2 + OPTION_LINES, TRACE)], threshold_ms=0)
    by_own = [(s["trace_class"], s["self_ms"]) for s in result["slowest"]]
    assert by_own == [("Meta.isDefEq", 10.0), ("Elab.step", 5.0), ("Elab.command", 4.0), ("Elab.step", 1.0)]
    step = result["slowest"][1]
    assert (step["ms"], step["depth"], step["line"], step["text"]) == (15.0, 1, 2, "expected type: Nat")
    assert result["categories"] == [] and result["total_ms"] == 0.0


async def test_the_declaration_s_other_messages_are_returned_and_an_error_is_no_success(tmp_path: Path) -> None:
    result = await profile_d(
        tmp_path,
        [on_line(2 + OPTION_LINES, "declaration uses 'sorry'", 2), on_line(2 + OPTION_LINES, "type mismatch", 1)],
    )
    assert result["messages"] == [
        {"severity": "warning", "text": "declaration uses 'sorry'"},
        {"severity": "error", "text": "type mismatch"},
    ]
    assert result["success"] is False


async def test_a_position_outside_every_declaration_or_a_bad_threshold_is_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": SOURCE})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        blank = await error_of(broker, "profile", root, path="A.lean", version=1, line=1, character=0)
        negative = await error_of(broker, "profile", root, path="A.lean", version=1, line=0, character=0,
                                  threshold_ms=-1)  # fmt: skip
        text = await error_of(broker, "profile", root, path="A.lean", version=1, line=0, character=0,
                              threshold_ms="10")  # fmt: skip
    assert blank.code == codes.INVALID_PARAMS and "no declaration at 1:0" in blank.message
    assert negative.code == codes.INVALID_INPUT and text.code == codes.INVALID_INPUT


def test_only_messages_made_of_took_lines_are_profiler_times() -> None:
    assert profiler_times("elaboration took 1.5ms\nlinting took 2e-3s") == [("elaboration", 1.5), ("linting", 2.0)]
    assert profiler_times("elaboration took 1.5ms\nand something else") == []
    assert profiler_times("x : Nat") == []


def test_trace_lines_that_are_not_nodes_continue_the_node_before() -> None:
    steps = trace_steps(TRACE, 7)
    assert [s.text for s in steps] == ["theorem d", "expected type: Nat", "Nat =?= Nat", "1"]
    assert {s.line for s in steps} == {7}


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_real_lean_reports_profiler_categories_and_lines_for_one_declaration(
    broker: Broker, demo_root: Path
) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    result = await call(broker, "profile", demo_root, path="Demo/Proofs.lean", version=1, line=5, character=8,
                        threshold_ms=0)  # fmt: skip
    assert (result["name"], result["success"], result["messages"]) == ("idProof", True, [])
    assert result["range"]["start"] == {"line": 5, "character": 0} and result["range"]["end"]["line"] == 6
    categories = {c["category"]: c["ms"] for c in result["categories"]}
    assert categories["elaboration"] > 0 and "type checking" in categories
    assert result["total_ms"] == pytest.approx(sum(categories.values()), abs=0.01) and result["total_ms"] > 0
    assert {line["line"] for line in result["lines"]} <= {5, 6} and result["lines"]
    assert any(step["trace_class"] == "Elab.command" for step in result["slowest"])
    source = await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    assert source["version"] == 1 and source["diagnostics"]["counts"]["total"] == 0
    assert "profiler" not in (demo_root / "Demo/Proofs.lean").read_text()


@pytest.mark.lean
async def test_real_lean_profiles_a_declaration_with_an_error_as_no_success(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Broken.lean")
    result = await call(broker, "profile", demo_root, path="Demo/Broken.lean", version=1, line=3, character=0)
    assert result["name"] == "bad" and result["success"] is False
    assert [m["severity"] for m in result["messages"]] == ["error"]
    assert result["total_ms"] > 0
