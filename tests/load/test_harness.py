"""The load lane's own checks (no Lean needed): expected answers tell workspaces apart and catch a false clean."""

from __future__ import annotations

from typing import Any

from . import harness as h


def sync_answer(root: str, errors: int, named: int, index: int) -> dict[str, Any]:
    items = [{"message": f"Unknown identifier `nope{index}`"}] * named + [{"message": "unknown tactic"}] * (
        errors - named
    )
    return {
        "workspace": {"root": root},
        "version": 1,
        "diagnostics": {"counts": {"error": errors}, "items": items},
        "readiness": {"save_ready": errors == 0},
    }


def test_each_expected_answer_names_its_workspace() -> None:
    a, b = h.Workspace(1, "/w/1"), h.Workspace(2, "/w/2")
    hover = {"workspace": {"root": "/w/1"}, "contents": {"value": "```lean\nload1 : MyTrue\n```"}}
    assert a.wrong("lean_hover", hover) is None
    assert b.wrong("lean_hover", {**hover, "workspace": {"root": "/w/2"}}) == "hover '```lean\\nload1 : MyTrue\\n```'"
    assert a.wrong("lean_hover", {**hover, "workspace": {"root": "/w/2"}}) == "answered about {'root': '/w/2'}"
    assert a.wrong("lean_sync", sync_answer("/w/1", h.errors(1), 1, 1)) is None
    assert "not this workspace's errors" in (a.wrong("lean_sync", sync_answer("/w/1", h.errors(1), 1, 4)) or "")
    goals = [
        {
            "goalPrefix": "⊢ ",
            "target": "p2",
            "hyps": [{"names": ["p2"], "type": "Prop"}, {"names": ["hp"], "type": "p2"}],
        }
    ]
    assert b.wrong("lean_goals", {"workspace": {"root": "/w/2"}, "goals": goals}) is None
    assert a.wrong("lean_goals", {"workspace": {"root": "/w/1"}, "goals": goals}) is not None
    attempts = {"workspace": {"root": "/w/1"}, "attempts": [{"success": s} for s in (True, False, True)]}
    assert a.wrong("lean_attempts", attempts) is None
    assert a.wrong("lean_run_at", {"workspace": {"root": "/w/1"}, "success": True, "messages": []}) is None
    assert h.source(2).count("nope2") == 2 and h.errors(2) == 4


def test_fewer_errors_than_the_file_has_is_a_false_clean() -> None:
    a = h.Workspace(1, "/w/1")
    assert "(a false clean)" in (a.wrong("lean_sync", sync_answer("/w/1", 0, 0, 1)) or "")
    assert "(a false clean)" not in (a.wrong("lean_sync", sync_answer("/w/1", 9, 1, 1)) or "x")


def test_percentiles_and_metrics_text() -> None:
    values = [i / 1000 for i in range(1, 101)]
    assert h.percentile(values, 50) == 50.0 and h.percentile(values, 99) == 99.0 and h.percentile([], 99) == 0.0
    text = '# HELP x\nbeam_evictions_total{kind="document",reason="memory"} 3.0\n'
    text += 'beam_evictions_total{kind="workspace"} 2\n'
    assert h.parse_metrics(text)["beam_evictions_total"] == 5.0
