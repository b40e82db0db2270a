"""Results as text for a person: one renderer per output model, Lean's own formats, and the exit status."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from beam_broker import OPERATIONS
from beam_broker._cli.human import RENDERERS, View, file_has_errors, goal_lines, refused_save, render, render_error
from beam_broker._cli.render import Sources, diagnostic_key
from tests.support.projects import fake_project

PROOFS = "prelude\nimport Demo.Basic\n\ntheorem byTerm : MyTrue := myTrue\n\ndef two : MyNat := MyNat.succ MyNat.one\n"
BASIC = "prelude\ninductive MyTrue : Prop where\n  | intro\n\ntheorem myTrue : MyTrue := MyTrue.intro\n"
GOAL = {"goalPrefix": "⊢ ", "target": "p", "hyps": [{"names": ["p"], "type": "Prop"}, {"names": ["hp"], "type": "p"}]}


@pytest.fixture
def view(tmp_path: Path) -> View:
    root = fake_project(tmp_path / "demo", {"Demo/Proofs.lean": PROOFS, "Demo/Basic.lean": BASIC})
    return View(Sources(str(root)), "Demo/Proofs.lean")


def rng(line: int, character: int) -> dict[str, Any]:
    return {"start": {"line": line, "character": character}, "end": {"line": line, "character": character + 1}}


def test_every_output_model_of_the_registry_has_a_renderer() -> None:
    assert {spec.output_model.__name__ for spec in OPERATIONS} <= set(RENDERERS)


def test_an_unknown_output_model_prints_as_json(view: View) -> None:
    assert render("FutureResult", {"a": 1}, view) == ["{", '  "a": 1', "}"]


def test_goals_print_as_lean_shows_them() -> None:
    assert goal_lines([GOAL]) == ["p : Prop", "hp : p", "⊢ p"]
    case = {"userName": "succ", "target": "q", "hyps": [{"names": ["a", "b"], "type": "Nat", "value": "0"}]}
    assert goal_lines([GOAL, case]) == ["p : Prop", "hp : p", "⊢ p", "", "case succ", "a b : Nat := 0", "⊢ q"]
    assert goal_lines([]) == ["no goals"]


def test_sync_prints_the_diagnostics_not_seen_yet_then_a_summary(view: View) -> None:
    item = {"path": "Demo/Proofs.lean", "severity": "error", "range": rng(3, 27), "message": "Type mismatch\n  x"}
    other = {**item, "range": rng(5, 4), "message": "unused"}
    view.printed.add(diagnostic_key(item))  # streamed live already
    result = {
        "path": "Demo/Proofs.lean",
        "version": 2,
        "diagnostics": {"counts": {"error": 2, "warning": 1, "information": 1}, "items": [item, other]},
        "readiness": {"save_ready": False, "reason": "documentErrors"},
    }
    assert render("SyncReply", result, view) == [
        "Demo/Proofs.lean:6:4: error: unused",
        "Demo/Proofs.lean (version 2): 2 errors, 1 warning, 1 info message, not save-ready",
    ]
    assert file_has_errors(result) is True
    clean = {
        "path": "A.lean",
        "version": 1,
        "diagnostics": {"counts": {}},
        "readiness": {"save_ready": True, "reason": "ok"},
    }
    assert render("SyncReply", clean, view) == ["A.lean (version 1): no errors or warnings, save-ready"]
    assert file_has_errors(clean) is False
    failed = {**clean, "readiness": {"save_ready": False, "reason": "documentDidNotElaborateSuccessfully"}}
    assert render("SyncReply", failed, view)[-1].endswith("did not elaborate successfully")
    assert file_has_errors({"diagnostics": {"counts": {"error": 1}}}) is True and file_has_errors({}) is False


def test_a_sync_that_rebuilt_its_imports_says_so_before_its_verdict(view: View) -> None:
    clean = {"path": "Demo/Top.lean", "version": 1, "diagnostics": {"counts": {}}, "readiness": {"reason": "ok"}}
    assert render("SyncReply", {**clean, "rebuilt_imports": ["Demo/Basic.lean", "Demo/Mid.lean"]}, view) == [
        "Demo/Top.lean: saved its stale imports first: Demo/Basic.lean, Demo/Mid.lean",
        "Demo/Top.lean (version 1): no errors or warnings, save-ready",
    ]
    assert render("SyncReply", {**clean, "rebuilt_imports": []}, view)[0] == (
        "Demo/Top.lean: reloaded its imports (they were saved already)"
    )
    assert len(render("SyncReply", clean, view)) == 1


def test_save_and_close_save_say_what_was_written(view: View) -> None:
    saved = {"path": "Demo/Proofs.lean", "module": "Demo.Proofs", "version": 1, "olean": "/p/.lake/Proofs.olean"}
    line = "Demo/Proofs.lean (version 1): saved Demo.Proofs to /p/.lake/Proofs.olean"
    assert render("SaveReply", saved, view) == [line]
    assert render("CloseSaveResult", {"closed": True, "saved": saved}, view) == [line, "Demo/Proofs.lean: closed"]


def test_a_save_refused_for_errors_shows_them_and_anything_else_is_an_error_line(view: View) -> None:
    sync = {
        "path": "Demo/Proofs.lean",
        "version": 1,
        "diagnostics": {"counts": {"error": 1}},
        "readiness": {
            "save_ready": False,
            "reason": "documentErrors",
            "blocking_diagnostics": [{"range": rng(3, 27), "severity": "error", "message": "Type mismatch"}],
            "blocking_messages": [{"message": "elaboration failed"}],
        },
    }
    error = {"code": "invalidParams", "message": "cannot save", "data": {"sync": sync}}
    assert refused_save(error) is sync
    out, err = render_error(error, view)
    assert out == [
        "Demo/Proofs.lean:4:27: error: Type mismatch",
        "Demo/Proofs.lean: error: elaboration failed",
        "Demo/Proofs.lean (version 1): 1 error, not save-ready",
    ]
    assert err == ["lean-beam: not saved: the file has errors"]
    stale = {"code": "contentModified", "message": "stale", "data": {"reason": "documentVersionMismatch"}}
    assert refused_save(stale) is None and refused_save({"code": "x", "data": {"sync": {}}}) is None
    assert render_error(stale, view) == ([], ["lean-beam: error: stale"])
    assert render_error(stale, view, verbose=True) == ([], ["lean-beam: error: stale [contentModified]"])


def test_hover_is_its_text_and_signature_help_its_labels(view: View) -> None:
    hover = {"contents": {"kind": "markdown", "value": "```lean\nmyTrue : MyTrue\n```\n***\n*import Demo.Basic*"}}
    assert render("HoverResult", hover, view) == ["myTrue : MyTrue", "", "*import Demo.Basic*"]
    assert render("HoverResult", {"contents": ["plain", {"value": "more"}]}, view) == ["plain", "more"]
    assert render("HoverResult", {"result": None}, view) == ["no hover information"]
    assert render("HoverResult", {"contents": ""}, view) == ["no hover information"]
    signatures = {"signatures": [{"label": "f (x : Nat) : Nat", "documentation": "doc"}, {"label": "g"}]}
    assert render("SignatureHelpResult", signatures, view) == ["f (x : Nat) : Nat", "  doc", "g"]
    assert render("SignatureHelpResult", {"result": None}, view) == ["no signature help"]


def test_document_symbols_are_an_indented_outline_with_lean_positions(view: View) -> None:
    symbols = [
        {"name": "byTerm", "kind": 6, "range": rng(3, 0), "selectionRange": rng(3, 8)},
        {
            "name": "two",
            "kind": 6,
            "range": rng(5, 0),
            "selectionRange": rng(5, 4),
            "children": [{"name": "inner", "range": rng(5, 10), "selectionRange": rng(5, 10)}],
        },
    ]
    assert render("LspList", {"result": symbols}, view) == [
        "theorem byTerm  4:8",
        "def two         6:4",
        "  inner         6:10",
    ]
    assert render("LspList", {"result": []}, view) == ["nothing found"]


def test_locations_and_workspace_symbols_print_where_they_are_with_the_source_line(view: View) -> None:
    root = view.sources.root
    definition = [{"targetUri": f"file://{root}/Demo/Basic.lean", "targetSelectionRange": rng(4, 8)}]
    assert render("LspList", {"result": definition}, view) == [
        "Demo/Basic.lean:5:8: theorem myTrue : MyTrue := MyTrue.intro"
    ]
    references = [{"uri": "file:///elsewhere/X.lean", "range": rng(0, 0)}]
    assert render("LspList", {"result": references}, view) == ["/elsewhere/X.lean:1:0"]
    symbols = [
        {"location": {"uri": f"file://{root}/Demo/Basic.lean", "range": rng(4, 8)}, "name": "myTrue", "kind": 14},
        {"location": {"uri": f"file://{root}/Demo/Basic.lean", "range": rng(1, 10)}, "name": "M", "containerName": "N"},
    ]
    assert render("LspList", {"result": symbols}, view) == [
        "Demo/Basic.lean:5:8: myTrue",
        "Demo/Basic.lean:2:10: M (in N)",
    ]


def test_probe_results_are_messages_then_the_goals_after(view: View) -> None:
    ok = {"success": True, "messages": [{"severity": "information", "text": "two : MyNat"}], "proof_state": None}
    assert render("RunResult", {**ok, "next_handle": None}, view) == ["two : MyNat"]
    failed = {
        "success": False,
        "messages": [{"severity": "error", "text": "unknown tactic"}, {"severity": "warning", "text": "w"}],
        "traces": ["trace line"],
        "proof_state": {"goals": [GOAL]},
        "next_handle": {"raw": {"value": "h"}},
    }
    assert render("RunResult", failed, view) == [
        "error: unknown tactic",
        "warning: w",
        "trace line",
        "",
        "p : Prop",
        "hp : p",
        "⊢ p",
        'handle: {"raw":{"value":"h"}}',
    ]
    named = {"severity": "error", "text": "Unknown identifier `x`", "code": "lean.unknownIdentifier"}
    assert render("RunResult", {"success": False, "messages": [named]}, view) == [
        "error(lean.unknownIdentifier): Unknown identifier `x`"  # as `lean` and a sync print it
    ]
    assert render("RunResult", {"success": True, "messages": []}, view) == ["ok"]
    assert render("RunResult", {"success": False}, view) == ["error: the text did not elaborate"]
    assert render("GoalsResult", {"goals": [GOAL]}, view) == ["p : Prop", "hp : p", "⊢ p"]


def test_todo_items_suggest_the_run_at_command_to_try(view: View) -> None:
    item = {
        "kind": "incomplete_proof",
        "range": rng(3, 27),
        "message": "incomplete proof",
        "run_at_position": {"line": 4, "character": 0},
        "run_at_text": "exact ?_",
    }
    result = {"version": 1, "items": [item, {"kind": "sorry", "range": rng(5, 0)}]}
    assert render("TodoResult", result, view) == [
        "Demo/Proofs.lean:4:27: incomplete_proof: incomplete proof",
        "  try: lean-beam run-at Demo/Proofs.lean:5:0 --text 'exact ?_'",
        "Demo/Proofs.lean:6:0: sorry: sorry",
    ]
    assert render("TodoResult", {"version": 3, "items": []}, view) == ["Demo/Proofs.lean: nothing to do (version 3)"]


def test_a_resolved_code_action_lists_its_edits(view: View) -> None:
    root = view.sources.root
    edit = {"range": rng(3, 27), "newText": "exact h"}
    action = {
        "title": "Try this: exact h",
        "edit": {
            "changes": {f"file://{root}/Demo/Proofs.lean": [edit]},
            "documentChanges": [{"textDocument": {"uri": f"file://{root}/Demo/Basic.lean"}, "edits": [edit]}],
        },
    }
    assert render("CodeActionResolveResult", {"code_action": action}, view) == [
        "Try this: exact h",
        '  Demo/Proofs.lean:4:27: replace with "exact h"',
        '  Demo/Basic.lean:4:27: replace with "exact h"',
    ]


def test_document_and_workspace_bookkeeping_read_as_sentences(view: View) -> None:
    assert render("UpdateResult", {"version": 2, "changed": True}, view) == [
        "Demo/Proofs.lean (version 2): read from disk"
    ]
    assert render("UpdateResult", {"version": 2, "changed": False}, view) == ["Demo/Proofs.lean (version 2): unchanged"]
    assert render("CloseResult", {"closed": True}, view) == ["Demo/Proofs.lean: closed"]
    assert render("NullResult", {"result": None}, view) == ["done"]
    ws = {"workspace": {"root": "/p"}}
    assert render("DropResult", {**ws, "dropped": True}, view) == ["dropped the Lean runtime of /p"]
    assert render("DropResult", {**ws, "dropped": False}, view) == ["nothing to drop: no Lean runtime for /p"]


def test_completions_list_label_type_and_kind_and_say_how_many_were_left_out(view: View) -> None:
    result = {
        "items": [{"label": "myTrue", "kind": "constant", "detail": "MyTrue"}, {"label": "MyNat"}],
        "dropped": 3,
    }
    assert render("CompletionsResult", result, view) == [
        "myTrue : MyTrue (constant)",
        "MyNat",
        "... and 3 more (--limit N shows more)",
    ]
    assert render("CompletionsResult", {"items": [], "dropped": 0}, view) == ["no completions"]


def test_the_outline_lists_imports_then_declarations_indented_by_namespace(view: View) -> None:
    result = {
        "imports": [{"module": "Demo.Basic"}],
        "declarations": [
            {"name": "N", "kind": "namespace", "signature": None, "range": rng(3, 0), "selection_range": rng(3, 10)},
            {
                "name": "byTerm",
                "kind": "theorem",
                "modifiers": ["private"],
                "signature": "byTerm : MyTrue",
                "container": ["N"],
                "range": rng(3, 0),
                "selection_range": rng(3, 8),
            },
            {"name": "two", "kind": None, "signature": "other", "range": rng(5, 4)},
        ],
    }
    assert render("OutlineResult", result, view) == [
        "import Demo.Basic",
        "namespace N                        4:10",
        "  private theorem byTerm : MyTrue  4:8",
        "two                                6:4",
    ]
    assert render("OutlineResult", {"imports": None, "declarations": []}, view) == ["nothing declared"]


def test_batch_attempts_print_one_block_per_text_in_order(view: View) -> None:
    ok = {"success": True, "messages": [{"severity": "information", "text": "byTerm : MyTrue"}], "proof_state": None}
    bad = {"success": False, "messages": [], "proof_state": {"goals": [GOAL]}, "next_handle": None}
    assert render("AttemptsResult", {"mode": "proof", "attempts": [ok, bad]}, view) == [
        "attempt 1: succeeded",
        "  byTerm : MyTrue",
        "attempt 2: failed",
        "  p : Prop",
        "  hp : p",
        "  ⊢ p",
    ]


def test_a_multi_line_message_of_an_attempt_stays_inside_its_block(view: View) -> None:
    mismatch = "Type mismatch\n  MyNat.zero\nhas type\n  MyNat"
    bad = {"success": False, "messages": [{"severity": "error", "text": mismatch}], "proof_state": None}
    assert render("AttemptsResult", {"mode": "proof", "attempts": [bad]}, view) == [
        "attempt 1: failed",
        "  error: Type mismatch",
        "    MyNat.zero",
        "  has type",
        "    MyNat",
    ]


def test_axioms_print_lean_s_answer_and_flag_sorry_and_nonstandard_axioms(view: View) -> None:
    said = "'t' depends on axioms: [sorryAx, myAx]"
    result = {"name": "t", "axioms": ["sorryAx", "myAx"], "uses_sorry": True, "nonstandard": ["sorryAx", "myAx"],
              "messages": [{"severity": "information", "text": said}]}  # fmt: skip
    assert render("AxiomsResult", result, view) == [
        said,
        "warning: t depends on sorryAx (a sorry, or an error Lean recovered from)",
        "t depends on nonstandard axioms: myAx",
    ]
    assert render("AxiomsResult", {"name": "u", "axioms": None, "nonstandard": [], "messages": []}, view) == [
        "u: Lean printed no axioms"
    ]


def test_a_profile_prints_times_per_category_line_and_step(view: View) -> None:
    result = {
        "name": "two",
        "total_ms": 1.5,
        "categories": [{"category": "elaboration", "ms": 1.5}],
        "lines": [{"line": 5, "ms": 1.5, "text": "def two : MyNat := MyNat.succ MyNat.one"}],
        "slowest": [{"trace_class": "Elab.command", "ms": 1.2, "self_ms": 0.8, "text": "def two"}],
        "messages": [{"severity": "warning", "text": "unused"}],
    }
    assert render("ProfileResult", result, view) == [
        "two: 1.5 ms",
        "  elaboration: 1.5 ms",
        "Demo/Proofs.lean:6:0: 1.5 ms: def two : MyNat := MyNat.succ MyNat.one",
        "slowest steps (time of their own):",
        "  [Elab.command] 0.8 ms: def two",
        "warning: unused",
    ]


def test_a_scratch_run_prints_its_messages_at_their_place_in_the_text(view: View) -> None:
    message = {"severity": "error", "text": "Unknown identifier `x`", "range": rng(2, 7)}
    assert render("RunCodeResult", {"success": False, "messages": [message]}, view) == [
        "<scratch>:3:7: error: Unknown identifier `x`"
    ]
    named = {**message, "code": "lean.unknownIdentifier"}
    assert render("RunCodeResult", {"success": False, "messages": [named]}, view) == [
        "<scratch>:3:7: error(lean.unknownIdentifier): Unknown identifier `x`"
    ]
    assert render("RunCodeResult", {"success": True, "messages": []}, view) == ["ok"]


def test_a_scratch_message_after_a_character_outside_the_bmp_is_at_its_code_point_column(view: View) -> None:
    # Lean prints `<file>:1:20` for `nope` here; LSP (the broker's range) says UTF-16 character 21: 𝔸 is two units.
    text = "def x : Nat := /-𝔸-/ nope\n"
    message = {"severity": "error", "text": "Unknown identifier `nope`", "range": rng(0, 21)}
    scratch = dataclasses.replace(view, text=text)
    assert render("RunCodeResult", {"success": False, "messages": [message]}, scratch) == [
        "<scratch>:1:20: error: Unknown identifier `nope`"
    ]


def test_term_goals_widgets_and_interactive_diagnostics_print_as_text(view: View) -> None:
    assert render("TermGoalResult", {"goal": "p : Prop\n⊢ p", "range": rng(3, 4)}, view) == ["p : Prop", "⊢ p"]
    assert render("TermGoalResult", {"goal": None, "range": None}, view) == ["no term here"]
    widget = {"id": "w", "javascriptHash": "42", "range": rng(3, 4)}
    assert render("WidgetsResult", {"widgets": [widget]}, view) == ["Demo/Proofs.lean:4:4: w (javascriptHash 42)"]
    assert render("WidgetsResult", {"widgets": []}, view) == ["no widgets"]
    assert render("WidgetSourceResult", {"source": {"sourcetext": "export {}\n"}}, view) == ["export {}"]
    expr = {"tag": [{"info": {"p": "0"}, "subexprPos": "/"}, {"text": "MyNat.zero"}]}
    tagged = {"append": [{"text": "Type mismatch "}, {"tag": [{"expr": expr}, {"text": ""}]}]}
    found = {"diagnostics": [{"range": rng(3, 27), "severity": 1, "message": tagged}]}
    assert render("InteractiveDiagnosticsResult", found, view) == [
        "Demo/Proofs.lean:4:27: error: Type mismatch MyNat.zero"
    ]
    named = {"range": rng(3, 27), "severity": 1, "message": {"text": "Unknown"}, "code": "lean.unknownIdentifier"}
    assert render("InteractiveDiagnosticsResult", {"diagnostics": [named]}, view) == [
        "Demo/Proofs.lean:4:27: error(lean.unknownIdentifier): Unknown"
    ]
    assert render("InteractiveDiagnosticsResult", {"diagnostics": []}, view) == ["no diagnostics"]
    assert file_has_errors(found) is False, "the call answered: only a sync's verdict is the file's exit status"
