"""Broker pieces without Lean: descriptors, verdicts, todo helpers, the registry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import beam_broker
from beam_broker import OPERATIONS, BrokerError
from beam_broker import _analysis as analysis
from beam_broker import _verdict as verdict
from beam_broker.errors import INVALID_INPUT
from beam_broker.runtime import header_imports, text_hash
from beam_broker.workspace import cache_key, module_name, resolve
from beam_lsp import LeanDiagnostic, LeanFileProgressParams, PlainGoal, Position, TextDocument


def test_every_public_name_resolves() -> None:
    for name in beam_broker.__all__:
        assert getattr(beam_broker, name) is not None


def project(tmp_path: Path, marker: str = "lean-toolchain") -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / marker).write_text("x")
    return root


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (None, "workspace is required"),
        ("/x", "must be an object"),
        ({"root": "relative/dir"}, "must be an absolute path"),
        ({"root": "/definitely/not/here"}, "does not resolve"),
        ({"root": "/x", "id": 1}, "accepts only the 'root' field"),
        ({"root": 3}, "must be a string"),
    ],
)
def test_bad_descriptors_are_invalid_input_with_the_pinned_messages(raw: object, needle: str) -> None:
    with pytest.raises(BrokerError) as info:
        resolve(raw)
    assert info.value.code == INVALID_INPUT and needle in info.value.message


def test_a_file_or_a_plain_directory_is_not_a_workspace(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(BrokerError, match="not a directory"):
        resolve({"root": str(tmp_path / "f")})
    with pytest.raises(BrokerError, match="not a Lean/Lake project"):
        resolve({"root": str(tmp_path)})


@pytest.mark.parametrize("marker", ["lean-toolchain", "lakefile.toml", "lakefile.lean"])
def test_any_project_marker_makes_a_workspace_and_symlinks_resolve(tmp_path: Path, marker: str) -> None:
    root = project(tmp_path, marker)
    (tmp_path / "alias").symlink_to(root)
    desc = resolve({"root": str(tmp_path / "alias")})
    assert desc.root == os.path.realpath(root)
    assert cache_key(desc.root) == f"local:{desc.root}"


def test_drop_accepts_a_canonical_root_that_no_longer_exists() -> None:
    assert resolve({"root": "/gone/away/../proj"}, for_drop=True).root == "/gone/proj"


def test_module_names_come_from_root_relative_paths() -> None:
    assert module_name("/r", Path("/r/Foo/Bar.lean")) == "Foo.Bar"
    assert module_name("/r", Path("/elsewhere/Foo.lean")) is None
    assert module_name("/r", Path("/r/notes.txt")) is None


def test_header_imports_skip_comments_and_stop_at_the_first_command() -> None:
    text = "/- doc\n comment -/\nprelude\n-- note\nimport A.B C\nimport A.B\n\ndef x := 1\nimport Z\n"
    assert header_imports(text) == ("A.B", "C")


def test_text_hash_ignores_line_ending_style() -> None:
    assert text_hash("a\r\nb\n") == text_hash("a\nb\n") != text_hash("a\nc\n")


def diag(message: str, severity: int = 1, **kw: object) -> LeanDiagnostic:
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    return LeanDiagnostic.model_validate({"range": rng, "message": message, "severity": severity, **kw})


def test_counts_use_effective_severity_and_silent_messages_are_dropped() -> None:
    diags = verdict.visible(
        [
            diag("e"),
            diag("w", 2),
            diag("i", 3),
            diag("h", 4),
            diag("?", 0),
            diag("Goals accomplished!", 3, isSilent=True),
            diag("Imports are out of date and should be rebuilt; use the Restart File command", 3),
        ]
    )
    c = verdict.counts(diags)
    assert (c.error, c.warning, c.information, c.hint, c.unknown, c.total) == (2, 1, 1, 1, 1, 6)


def test_readiness_blocks_on_errors_and_never_on_warnings() -> None:
    assert verdict.readiness([diag("w", 2)], elaborated=True).save_ready
    blocked = verdict.readiness([diag("bad\nmore"), diag("w", 2)], elaborated=True)
    assert (blocked.save_ready, blocked.reason, blocked.blocking_error_count) == (False, "documentErrors", 1)
    assert blocked.blocking_diagnostics[0].message == "bad" and blocked.blocking_diagnostics[0].save_blocking
    failed = verdict.readiness([], elaborated=False)
    assert (failed.save_ready, failed.reason) == (False, "documentDidNotElaborateSuccessfully")


def test_lake_setup_lines_are_recognized_only_in_their_exact_shape() -> None:
    assert verdict.is_setup_line(diag("✔ [2/5] Built Demo.Basic", 3))
    assert not verdict.is_setup_line(diag("✔ [2/5] Built Demo.Basic", 1))
    assert not verdict.is_setup_line(diag("Built something", 3))


def test_the_errors_scope_prefers_completion_blocking_diagnostics() -> None:
    stale = diag("Imports are out of date and should be rebuilt", 3)
    err, warn = diag("e"), diag("w", 2)
    assert [verdict.in_scope(d, "errors", [err, warn]) for d in (err, warn)] == [True, False]
    assert [verdict.in_scope(d, "errors", [stale, err]) for d in (stale, err)] == [True, False]
    assert verdict.in_scope(warn, "all", [warn])


def test_document_progress_uses_one_based_bounds_and_keeps_the_end_when_done() -> None:
    tracker = verdict.ProgressTracker()
    uri = "file:///x.lean"

    def feed(processing: list[dict[str, object]]) -> None:
        tracker.feed(
            LeanFileProgressParams.model_validate(
                {"textDocument": {"uri": uri, "version": 1}, "processing": processing}
            )
        )

    def rng(a: int, b: int, c: int, d: int) -> dict[str, object]:
        return {"range": {"start": {"line": a, "character": b}, "end": {"line": c, "character": d}}, "kind": 1}

    feed([rng(0, 0, 1, 0)])
    assert tracker.snapshot().dump() == {"updates": 1, "done": False, "range_start_line": 1, "range_end_line": 1}
    feed([rng(4, 0, 9, 0), rng(2, 0, 3, 5)])
    assert (tracker.range_start_line, tracker.range_end_line) == (3, 9)
    feed([])
    assert tracker.snapshot().dump() == {"updates": 3, "done": True, "range_end_line": 9}


def test_the_sorry_scan_skips_comments_strings_and_quoted_identifiers() -> None:
    text = (
        '-- sorry\n/- sorry /- nested sorry -/ -/\ndef «sorry» := "sorry \\" sorry"\n'
        "example := sorry\nx.sorry sorry_y\n"
    )
    found = analysis.sorry_ranges(text)
    assert [text[a:b] for a, b in found] == ["sorry"]
    assert text[: found[0][0]].count("\n") == 3


def test_todo_matching_is_half_open_for_ranges_and_inclusive_for_points() -> None:
    def r(a: int, b: int, c: int, d: int) -> dict[str, dict[str, int]]:
        return {"start": {"line": a, "character": b}, "end": {"line": c, "character": d}}

    item = r(1, 2, 1, 7)
    assert analysis.matches(item, r(0, 0, 5, 0))
    assert not analysis.matches(item, r(1, 7, 2, 0))
    assert analysis.matches(item, r(1, 7, 1, 7))  # a point at the end is inside
    assert not analysis.matches(item, r(1, 8, 1, 8))


def test_tactic_spans_for_goal_modes() -> None:
    doc = TextDocument("file:///x.lean", "theorem t : p := by exact h\n  skip\n", 1)
    assert analysis.tactic_span(doc, Position(line=1, character=4)) == (
        Position(line=1, character=2),
        Position(line=1, character=6),
    )
    start, end = analysis.tactic_span(doc, Position(line=0, character=22))
    assert (start.character, end.character) == (20, 27)


def test_interactive_goals_flatten_tagged_text() -> None:
    result = {
        "goals": [
            {
                "userName": "h",
                "goalPrefix": "⊢ ",
                "type": {"append": [{"text": "a "}, {"tag": [{"info": {}}, {"text": "= b"}]}]},
                "hyps": [
                    {"names": ["x", "y"], "type": {"text": "Nat"}},
                    {"names": ["z"], "type": {"text": "Nat"}, "val": {"text": "1"}},
                ],
            }
        ]
    }
    state = analysis.goals_from_interactive(result)
    assert state is not None
    assert state.dump() == {
        "goals": [
            {
                "userName": "h",
                "goalPrefix": "⊢ ",
                "target": "a = b",
                "hyps": [{"names": ["x", "y"], "type": "Nat"}, {"names": ["z"], "type": "Nat", "value": "1"}],
            }
        ]
    }


def test_plain_goals_parse_into_the_same_structure() -> None:
    plain = PlainGoal(rendered="", goals=["case succ\nn m : Nat\nh : n = m := rfl\n⊢ n + 1 = m + 1"])
    [goal] = analysis.goals_from_plain(plain).goals
    assert goal.userName == "succ" and goal.target == "n + 1 = m + 1"
    assert [(h.names, h.type, h.value) for h in goal.hyps] == [(["n", "m"], "Nat", None), (["h"], "n = m", "rfl")]


def test_the_registry_lists_upstream_tool_order_and_flags() -> None:
    names = [spec.tool for spec in OPERATIONS]
    assert names == [
        "lean_drop_workspace",
        "lean_run_at",
        "lean_run_at_handle",
        "lean_hover",
        "lean_signature_help",
        "lean_definition",
        "lean_references",
        "lean_document_symbols",
        "lean_workspace_symbols",
        "lean_goals",
        "lean_todo",
        "lean_code_action_resolve",
        "lean_run_with",
        "lean_run_with_linear",
        "lean_release",
        "lean_update",
        "lean_sync",
        "lean_refresh",
        "lean_save",
        "lean_close_save",
        "lean_close",
    ]
    assert sum(spec.read_only for spec in OPERATIONS) == 10
    assert {s.tool for s in OPERATIONS if s.destructive is False} == {"lean_run_at_handle", "lean_run_with"}
    assert {s.tool for s in OPERATIONS if s.idempotent} == {"lean_drop_workspace", "lean_close"}
    for spec in OPERATIONS:
        assert (
            spec.description.endswith(
                "Beam never applies source edits to `.lean` files on disk; the client applies source edits."
            )
            or spec.name == "drop_workspace"
        )
        required = [name for name, f in spec.input_model.model_fields.items() if f.is_required()]
        assert required[-1] == "workspace", spec.name


def test_every_registered_operation_has_a_runtime_handler() -> None:
    from beam_broker.operations import implemented
    from beam_broker.runtime import _Ops

    assert implemented() == OPERATIONS
    for spec in OPERATIONS:
        assert spec.name == "drop_workspace" or hasattr(_Ops, f"op_{spec.method}"), spec.name
