"""Proof state: goals before/after a tactic, todo items in a range, code action resolution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beam_broker import Broker
from beam_broker import errors as codes

from .support import call, error_of, fake_lake, fake_project, open_broker, spy

pytestmark = pytest.mark.anyio
PROOF = "theorem t : True := by\n  exact trivial\n"
PROOF_IMPORTING = "import Demo.Basic\n" + PROOF


async def test_goals_before_and_after_a_tactic_come_structured(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": PROOF})
    async with open_broker({"goal_trigger": "exact", "rpc": True, "goal": "h : True\n⊢ True"}) as broker:
        await call(broker, "update", root, path="A.lean")
        before = await call(broker, "goals", root, path="A.lean", version=1, line=1, character=4, mode="before")
        after = await call(broker, "goals", root, path="A.lean", version=1, line=1, character=4, mode="after")
        none = await error_of(broker, "goals", root, path="A.lean", version=1, line=0, character=0, mode="after")
        bad = await error_of(broker, "goals", root, path="A.lean", version=1, line=9, character=0, mode="after")
    assert (
        before
        == after
        == {"workspace": {"root": str(root)}, "goals": [{"goalPrefix": "⊢ ", "target": "True", "hyps": []}]}
    )
    assert none.code == codes.INVALID_PARAMS and "no proof goals there" in none.message
    assert bad.code == codes.INVALID_PARAMS


async def test_no_goals_over_a_stale_import_names_the_import_instead_of_the_position(tmp_path: Path) -> None:
    """Lean knows nothing past an import it could not load: "try a position inside a tactic" would mislead."""
    root = fake_project(tmp_path / "p", {"Demo/Basic.lean": "def one := 1\n", "Demo/Goals.lean": PROOF_IMPORTING})
    async with open_broker(env=fake_lake(tmp_path / "bin")) as broker:
        await call(broker, "save", root, path="Demo/Basic.lean")
        await call(broker, "sync", root, path="Demo/Goals.lean")
        fresh = await error_of(
            broker, "goals", root, path="Demo/Goals.lean", version=1, line=2, character=2, mode="before"
        )
        (root / "Demo/Basic.lean").write_text("def one := 1\ndef two := 2\n")
        stale = await error_of(
            broker, "goals", root, path="Demo/Goals.lean", version=1, line=2, character=2, mode="before"
        )
    assert fresh.code == codes.INVALID_PARAMS and "no proof goals there" in fresh.message
    assert stale.code == codes.INVALID_PARAMS and stale.data is not None  # upstream's code for no goals
    assert "no proof goals there, and the imports of Demo/Goals.lean are out of date (Demo.Basic)" in stale.message
    assert stale.message.endswith("Save them in this order: Demo/Basic.lean; then retry.")
    assert stale.data["reason"] == "staleImports" and stale.data["saveDeps"] == ["Demo/Basic.lean"]


async def test_goals_at_a_position_are_asked_of_lean_once_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lean's goals at a position of a version do not change; an agent asks again and again at one place.
    root = fake_project(tmp_path / "p", {"A.lean": PROOF})
    asked = spy(monkeypatch, "interactive_goals", "plain_goal")
    at: dict[str, Any] = {"path": "A.lean", "line": 1, "character": 4}
    async with open_broker({"goal_trigger": "exact", "rpc": True, "goal": "h : True\n⊢ True"}) as broker:
        await call(broker, "sync", root, path="A.lean")
        first = await call(broker, "goals", root, version=1, mode="before", **at)
        again = await call(broker, "goals", root, version=1, mode="before", **at)
        after = await call(broker, "goals", root, version=1, mode="after", **at)  # another position: asked
        once = len(asked)
        (root / "A.lean").write_text(PROOF + "\ntheorem u : True := by\n  exact trivial\n", encoding="utf-8")
        await call(broker, "sync", root, path="A.lean")
        changed = await call(broker, "goals", root, version=2, mode="before", **at)
    assert once == 2 and len(asked) == 3, asked  # the change forgot what version 1 answered
    assert first == again == after == changed


async def test_goals_fall_back_to_the_plain_goal_when_rpc_fails(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": PROOF})
    lean = {"goal_trigger": "exact", "rpc": True, "rpc_outdated": 2, "goal": "h : Nat\n⊢ True"}
    async with open_broker(lean) as broker:
        await call(broker, "update", root, path="A.lean")
        state = await call(broker, "goals", root, path="A.lean", version=1, line=1, character=2, mode="before")
    # The plain goal's text is parsed (the fake's interactive goals carry no hypotheses).
    assert state["goals"] == [{"goalPrefix": "⊢ ", "target": "True", "hyps": [{"names": ["h"], "type": "Nat"}]}]


async def test_a_document_that_changed_under_the_goals_request_is_content_modified_not_a_fallback(
    tmp_path: Path,
) -> None:
    # Only a missing or expired RPC session falls back to the plain goal: Lean's "content modified" is an answer.
    root = fake_project(tmp_path / "p", {"A.lean": PROOF})
    lean = {"goal_trigger": "exact", "rpc": True, "content_modified": ["$/lean/rpc/call"], "goal": "h : Nat\n⊢ True"}
    async with open_broker(lean) as broker:
        await call(broker, "update", root, path="A.lean")
        err = await error_of(broker, "goals", root, path="A.lean", version=1, line=1, character=2, mode="before")
    assert err.code == codes.CONTENT_MODIFIED


TODO = (
    "-- sorry in a comment\n"
    "theorem a : True := by\n"
    "  sorry\n"
    "def h : Nat := ERROR_HERE\n"
    "theorem b : True := by GOALS_HERE\n"
    "def w := WARN_HERE\n"
)
EVERYTHING: dict[str, Any] = {
    "path": "A.lean",
    "version": 1,
    "start_line": 0,
    "start_character": 0,
    "end_line": 6,
    "end_character": 0,
}


async def test_todo_finds_sorry_holes_incomplete_proofs_and_diagnostics(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": TODO})
    lean = {
        "marker_messages": {"ERROR_HERE": "don't know how to synthesize placeholder"},
        "goal_trigger": "GOALS_HERE",
    }
    async with open_broker(lean) as broker:
        await call(broker, "update", root, path="A.lean")
        result = await call(broker, "todo", root, **EVERYTHING)
        only = await call(broker, "todo", root, **EVERYTHING, kinds=["sorry", "incomplete_proof"], suggest="none")
        point = await call(
            broker,
            "todo",
            root,
            **(EVERYTHING | {"start_line": 2, "start_character": 4, "end_line": 2, "end_character": 4}),
        )
    kinds = [(i["kind"], i["range"]["start"]["line"]) for i in result["items"]]
    assert kinds == [
        ("diagnostic", 0),  # the fake flags every `sorry` word; the lexical scan skips the comment
        ("sorry", 2),
        ("diagnostic", 2),
        ("hole", 3),
        ("diagnostic", 3),
        ("incomplete_proof", 4),
        ("diagnostic", 4),
        ("diagnostic", 5),
    ]
    assert result["version"] == 1 and result["range"]["end"] == {"line": 6, "character": 0}
    sorry = result["items"][1]
    assert sorry["run_at_position"] == {"line": 2, "character": 2} and sorry["message"] == "syntactic sorry"
    incomplete = result["items"][5]
    assert incomplete["run_at_text"] == "exact ?_" and incomplete["proof_state"]["goals"][0]["target"] == "True"
    assert [(i["kind"], i.get("run_at_text")) for i in only["items"]] == [("sorry", None), ("incomplete_proof", None)]
    assert [i["kind"] for i in point["items"]] == ["sorry", "diagnostic"]


async def test_todo_refuses_bad_ranges_and_an_unfinished_elaboration(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": TODO})
    async with open_broker({"worker_crash_on": "textDocument/waitForDiagnostics"}) as broker:
        await call(broker, "update", root, path="A.lean")
        bad = await error_of(broker, "todo", root, **(EVERYTHING | {"end_line": 60}))
        failed = await error_of(broker, "todo", root, **EVERYTHING)
    assert bad.code == codes.INVALID_PARAMS
    assert failed.code == codes.SYNC_BARRIER_INCOMPLETE and "did not finish elaborating" in failed.message


async def test_code_action_resolve_checks_the_action_targets_this_document(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": TODO, "B.lean": PROOF})
    uri = (root / "A.lean").as_uri()
    action = {"title": "Rename", "data": {"params": {"textDocument": {"uri": uri}}}}
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        await call(broker, "update", root, path="B.lean")
        resolved = await call(broker, "code_action_resolve", root, path="A.lean", version=1, code_action=action)
        no_data = await error_of(broker, "code_action_resolve", root, path="A.lean", version=1, code_action={"x": 1})
        other = await error_of(broker, "code_action_resolve", root, path="B.lean", version=1, code_action=action)
        stale = await error_of(broker, "code_action_resolve", root, path="A.lean", version=7, code_action=action)
    assert isinstance(resolved.pop("snapshot"), str)
    assert resolved == {"workspace": {"root": str(root)}, "version": 1, "code_action": action}
    assert no_data.code == codes.INVALID_PARAMS and "requires codeAction.data" in no_data.message
    assert other.code == codes.INVALID_PARAMS and "targets" in other.message
    assert stale.code == codes.CONTENT_MODIFIED


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_goals_before_and_after_are_structured(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Goals.lean")
    for mode in ("before", "after"):
        state = await call(
            broker, "goals", demo_root, path="Demo/Goals.lean", version=1, line=4, character=3, mode=mode
        )
        [goal] = state["goals"]
        assert goal["target"] == "p" and goal["goalPrefix"] == "⊢ "
        assert goal["hyps"] == [{"names": ["p"], "type": "Prop"}, {"names": ["hp"], "type": "p"}]
    none = await error_of(
        broker, "goals", demo_root, path="Demo/Goals.lean", version=1, line=0, character=0, mode="after"
    )
    assert none.code == codes.INVALID_PARAMS and "no proof goals there" in none.message


@pytest.mark.lean
async def test_todo_finds_sorry_holes_incomplete_proofs_and_resolvable_code_actions(
    broker: Broker, demo_root: Path
) -> None:
    (demo_root / "Demo/Todo.lean").write_text(
        "prelude\nimport Demo.Basic\n\n-- sorry in a comment\ntheorem a (p : Prop) (hp : p) : p := by\n  sorry\n\n"
        "def h : MyNat := _\n\ntheorem unusedVar (p : Prop) (hp : p) : MyTrue :=\n  (fun (x : p) => myTrue) hp\n"
    )
    await call(broker, "update", demo_root, path="Demo/Todo.lean")
    everything: dict[str, Any] = {
        "path": "Demo/Todo.lean",
        "version": 1,
        "start_line": 0,
        "start_character": 0,
        "end_line": 11,
        "end_character": 0,
    }
    result = await call(
        broker, "todo", demo_root, **everything, kinds=["sorry", "hole", "incomplete_proof", "code_action"]
    )
    kinds = [(i["kind"], i["range"]["start"]["line"]) for i in result["items"]]
    assert kinds == [("incomplete_proof", 4), ("sorry", 5), ("hole", 7), ("code_action", 10)]
    incomplete = result["items"][0]
    assert incomplete["run_at_text"] == "exact ?_" and incomplete["proof_state"]["goals"][0]["target"] == "p"
    action = result["items"][-1]["code_action"]
    resolved = await call(
        broker, "code_action_resolve", demo_root, path="Demo/Todo.lean", version=1, code_action=action
    )
    assert resolved["code_action"]["edit"]["documentChanges"][0]["edits"][0]["newText"] == "_x"
    stale = await error_of(
        broker, "code_action_resolve", demo_root, path="Demo/Todo.lean", version=7, code_action=action
    )
    assert stale.code == codes.CONTENT_MODIFIED
    await call(broker, "update", demo_root, path="Demo/Proofs.lean")
    other = await error_of(
        broker, "code_action_resolve", demo_root, path="Demo/Proofs.lean", version=1, code_action=action
    )
    assert other.code == codes.INVALID_PARAMS and "targets" in other.message
    point = await call(
        broker,
        "todo",
        demo_root,
        **(everything | {"start_line": 5, "start_character": 4, "end_line": 5, "end_character": 4}),
        kinds=["sorry"],
        suggest="none",
    )
    assert [i["kind"] for i in point["items"]] == ["sorry"]


# ---- position requests while Lean elaborates the document again (DESIGN §4) ----------------------------------
async def test_goals_come_from_a_mirror_while_the_document_elaborates_again_and_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": PROOF})
    asked = spy(monkeypatch, "interactive_goals", "plain_goal")
    at: dict[str, Any] = {"path": "A.lean", "line": 1, "character": 4, "mode": "before"}
    async with open_broker({"goal_trigger": "exact", "rpc": True, "elab_ms": 60_000}) as broker:
        await call(broker, "update", root, path="A.lean")
        first = await call(broker, "goals", root, version=1, **at)  # opened and elaborating: the document
        (root / "A.lean").write_text(PROOF + "\ntheorem later : True := trivial\n")
        assert (await call(broker, "update", root, path="A.lean"))["version"] == 2
        again = await call(broker, "goals", root, version=2, **at)  # elaborating again: a mirror
        runtime = broker.cached(str(root))
        assert runtime is not None
        [mirror] = next(iter(runtime.pools.values())).mirrors
    assert first == again and first["goals"]
    assert asked == [("interactive_goals", "A.lean"), ("interactive_goals", "A_beamProbe1.lean")]
    assert mirror.text == PROOF, "the mirror holds the text up to the end of the declaration"
