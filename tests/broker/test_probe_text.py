"""Probe text surgery: where a probe goes and the mirror text that runs it (no Lean)."""

from __future__ import annotations

from beam_broker import _probe_text as probe_text
from beam_lsp import LeanDiagnostic, Position, TextDocument

SOURCE = (
    "prelude\n"
    "theorem t (p : Prop) (hp : p) : p := by\n"
    "  skip\n"
    "  have h : p :=\n"
    "    hp\n"
    "  exact h\n"
    "\n"
    "theorem later : p := broken\n"
)


def doc() -> TextDocument:
    return TextDocument("file:///x/A.lean", SOURCE, 1)


def P(line: int, character: int) -> Position:
    return Position(line=line, character=character)


def test_at_a_tactics_first_character_the_probe_replaces_it_and_everything_after() -> None:
    basis = probe_text.proof_basis(doc(), P(2, 2))
    probe = probe_text.build(SOURCE, basis, ["exact hp"])
    assert probe.text == "prelude\ntheorem t (p : Prop) (hp : p) : p := by\n  exact hp\n"
    assert (probe.span_start, probe.span_end) == (P(2, 2), P(2, 10))
    assert basis.goal_position == P(2, 2)


def test_inside_a_tactic_the_probe_runs_after_it_and_its_continuation_lines() -> None:
    basis = probe_text.proof_basis(doc(), P(3, 5))
    probe = probe_text.build(SOURCE, basis, ["exact h\n  -- more"])
    assert probe.text.endswith("  have h : p :=\n    hp\n  exact h\n    -- more\n")
    assert "broken" not in probe.text
    assert probe.span_start == P(5, 2)
    assert basis.goal_position == P(4, 6)


def test_on_the_by_line_the_probe_becomes_the_first_tactic_at_the_blocks_indentation() -> None:
    basis = probe_text.proof_basis(doc(), P(1, 39))
    probe = probe_text.build(SOURCE, basis, ["intro x"])
    assert probe.text == "prelude\ntheorem t (p : Prop) (hp : p) : p := by\n  intro x\n"


def test_a_tactic_after_by_on_the_same_line_is_a_basis_too() -> None:
    text = "theorem u : q := by exact hq\n"
    d = TextDocument("file:///x/B.lean", text, 1)
    before = probe_text.build(text, probe_text.proof_basis(d, P(0, 20)), ["skip"])
    assert before.text == "theorem u : q := by skip\n"
    after = probe_text.build(text, probe_text.proof_basis(d, P(0, 24)), ["skip"])
    assert after.text == "theorem u : q := by exact hq\n                    skip\n"


def test_command_mode_appends_after_the_enclosing_command_and_drops_the_rest() -> None:
    basis = probe_text.command_basis(doc(), P(1, 3))
    probe = probe_text.build(SOURCE, basis, ["#check t", "#check t"])
    assert probe.text.endswith("    hp\n  exact h\n\n#check t\n\n#check t\n")
    assert "later" not in probe.text
    assert probe.span_start == P(9, 0)  # the span is the last text's


def diag(message: str, severity: int | None, line: int = 0, character: int = 0) -> LeanDiagnostic:
    at = {"line": line, "character": character}
    return LeanDiagnostic.from_json({"range": {"start": at, "end": at}, "message": message, "severity": severity})


def test_messages_belong_to_the_probe_when_they_start_inside_its_span() -> None:
    start, stop = P(2, 2), P(3, 4)
    assert probe_text.in_span(diag("x", 1, 2, 2), start, stop)
    assert probe_text.in_span(diag("x", 1, 3, 3), start, stop)
    assert not probe_text.in_span(diag("x", 1, 2, 1), start, stop)
    assert not probe_text.in_span(diag("x", 1, 3, 4), start, stop)


def test_a_probe_owns_every_message_after_its_start_even_at_the_end_of_the_input() -> None:
    # Lean puts `unexpected end of input` on the line after the last one: a cut-off probe must still fail.
    probe = probe_text.build(SOURCE, probe_text.command_basis(doc(), P(1, 3)), ["theorem t2 : T := ("])
    end_of_input = diag("unexpected end of input", 1, probe.span_end.line + 1, 0)
    assert probe_text.in_span(end_of_input, probe.span_start)
    assert not probe_text.in_span(diag("x", 1, probe.span_start.line - 1, 0), probe.span_start)


def test_run_messages_fold_hints_into_information_and_traces_are_recognized() -> None:
    assert [probe_text.run_severity(diag("m", s)) for s in (1, 2, 3, 4, None)] == [
        "error",
        "warning",
        "information",
        "information",
        "information",
    ]
    assert probe_text.is_trace(diag("[Meta.synthInstance] ✅ Nat", 3))
    assert not probe_text.is_trace(diag("[Meta.synthInstance] failed", 1)) and not probe_text.is_trace(diag("plain", 3))


def test_a_command_without_by_has_no_tactic_goals_and_anything_else_is_for_lean() -> None:
    text = (
        "prelude\n"
        "def edited : Nat := 1\n"
        "\n"
        "theorem t (p : Prop) (hp : p) : p := by\n"
        "  exact hp\n"
        "\n"
        "def standby := 2\n"  # `by` inside a word: not settled by the text
        "def f :=\n"
        "  3\n"
    )
    d = TextDocument("file:///x/A.lean", text, 1)
    assert probe_text.without_tactics(d, P(1, 4))
    assert probe_text.without_tactics(d, P(2, 0))  # a blank line: the def before it
    assert not probe_text.without_tactics(d, P(4, 2)) and not probe_text.without_tactics(d, P(5, 0))
    assert not probe_text.without_tactics(d, P(6, 0))
    assert probe_text.without_tactics(d, P(8, 2)) and probe_text.without_tactics(d, P(0, 0))


def test_the_declaration_text_ends_after_the_command_around_the_position() -> None:
    d = doc()
    assert probe_text.declaration_text(d, P(2, 2)) == SOURCE[: SOURCE.index("\n\ntheorem later")] + "\n"
    assert probe_text.declaration_text(d, P(7, 3)) == SOURCE
    cut = probe_text.declaration_text(d, P(4, 4))
    assert TextDocument("m", cut, 1).line_text(4) == d.line_text(4), "positions before the cut are the same"
    header = TextDocument("file:///x/B.lean", "prelude\nimport A\nimport B\n\ndef x := 1\n", 1)
    never_inside_the_header = "prelude\nimport A\nimport B\n\n\n"
    assert probe_text.declaration_text(header, P(1, 3)) == never_inside_the_header
