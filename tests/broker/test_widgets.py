"""Lean's term goal and widget RPC: `term_goal`, `widgets`, `widget_source`, `interactive_diagnostics`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from beam_broker import Broker
from beam_broker import errors as codes
from beam_lsp import InteractiveDiagnostic

from .support import call, error_of, fake_project, open_broker

pytestmark = pytest.mark.anyio
SOURCE = "theorem two : True := trivial\ndef helper := ERROR_HERE\n"
WIDGET = {"id": "w", "javascriptHash": "42", "props": {}}
LEAN = {"rpc": True, "term_goal": "⊢ True", "widgets": [WIDGET], "widget_sources": {"42": "export {}"}}


async def test_the_term_goal_and_the_widgets_at_a_position_are_lean_s(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    at: dict[str, Any] = {"path": "A.lean", "version": 1, "line": 0, "character": 23}
    async with open_broker(LEAN) as broker:
        await call(broker, "update", root, path="A.lean")
        term = await call(broker, "term_goal", root, **at)
        blank = await call(broker, "term_goal", root, **{**at, "character": 13})
        widgets = await call(broker, "widgets", root, **at)
        source = await call(broker, "widget_source", root, path="A.lean", version=1, javascript_hash="42")
        unknown = await error_of(broker, "widget_source", root, path="A.lean", version=1, javascript_hash="7")
        stale = await error_of(broker, "term_goal", root, **{**at, "version": 2})
    ws = {"root": str(root)}
    trivial = {"start": {"line": 0, "character": 22}, "end": {"line": 0, "character": 29}}
    assert term == {"workspace": ws, "version": 1, "goal": "⊢ True", "range": trivial}
    assert blank == {"workspace": ws, "version": 1, "goal": None, "range": None}
    assert widgets == {"workspace": ws, "version": 1, "widgets": [WIDGET]}
    assert source == {"workspace": ws, "version": 1, "source": {"sourcetext": "export {}"}}
    assert unknown.code == codes.INVALID_PARAMS and "hash 7" in unknown.message
    assert stale.code == codes.CONTENT_MODIFIED


async def test_interactive_diagnostics_are_those_of_the_complete_version_in_the_line_range(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE + "theorem t : True := sorry\n"})
    async with open_broker(LEAN) as broker:
        await call(broker, "update", root, path="A.lean")
        every = await call(broker, "interactive_diagnostics", root, path="A.lean", version=1)
        first = await call(broker, "interactive_diagnostics", root, path="A.lean", version=1, start_line=0, end_line=2)
    assert [(d["range"]["start"]["line"], d["message"]) for d in every["diagnostics"]] == [
        (1, {"text": "unknown identifier 'ERROR_HERE'"}),
        (2, {"text": "declaration uses 'sorry'"}),
    ]
    assert [d["range"]["start"]["line"] for d in first["diagnostics"]] == [1]


async def test_interactive_diagnostics_of_a_version_lean_did_not_finish_are_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    async with open_broker({**LEAN, "worker_crash_on": "textDocument/waitForDiagnostics"}) as broker:
        await call(broker, "update", root, path="A.lean")
        error = await error_of(broker, "interactive_diagnostics", root, path="A.lean", version=1)
    assert error.code == codes.SYNC_BARRIER_INCOMPLETE


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_term_goals_widgets_and_interactive_diagnostics_on_real_lean(broker: Broker, demo_root: Path) -> None:
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    at: dict[str, Any] = {"path": "Demo/Proofs.lean", "version": 1}
    term = await call(broker, "term_goal", demo_root, **at, line=3, character=27)
    hyps = await call(broker, "term_goal", demo_root, **at, line=6, character=2)
    none = await call(broker, "term_goal", demo_root, **at, line=3, character=2)
    assert (term["goal"], term["range"]["start"], term["range"]["end"]) == (
        "⊢ MyTrue",
        {"line": 3, "character": 27},
        {"line": 3, "character": 33},
    )
    assert hyps["goal"] == "p : Prop\nhp : p\n⊢ p"
    assert none["goal"] is None and none["range"] is None
    widgets = await call(broker, "widgets", demo_root, **at, line=3, character=27)
    assert widgets["widgets"] == []  # the prelude fixtures define no widget
    unknown = await error_of(broker, "widget_source", demo_root, **at, javascript_hash="123")
    assert unknown.code == codes.INVALID_PARAMS and "No widget module with hash 123" in unknown.message
    await call(broker, "update", demo_root, path="Demo/Broken.lean")
    found = await call(broker, "interactive_diagnostics", demo_root, path="Demo/Broken.lean", version=1)
    [mismatch] = found["diagnostics"]
    assert mismatch["range"]["start"] == {"line": 3, "character": 20}
    # Plain text: Beam's session does not say hasWidgets (with it, Lean would publish traces as "(trace)").
    assert InteractiveDiagnostic.from_json(mismatch).message.plain.startswith("Type mismatch\n  MyNat.zero\nhas type")
    assert '"tag"' not in json.dumps(mismatch["message"])
    elsewhere = await call(
        broker, "interactive_diagnostics", demo_root, path="Demo/Broken.lean", version=1, start_line=4, end_line=9
    )
    assert elsewhere["diagnostics"] == []
