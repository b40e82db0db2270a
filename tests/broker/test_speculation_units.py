"""Probe text surgery and handle bookkeeping (no Lean)."""

from __future__ import annotations

import pytest

from beam_broker import BrokerError
from beam_broker import _speculation as spec
from beam_broker import errors as codes
from beam_lsp import Position, TextDocument

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
    basis = spec.proof_basis(doc(), P(2, 2))
    probe = spec.build(SOURCE, basis, ["exact hp"])
    assert probe.text == "prelude\ntheorem t (p : Prop) (hp : p) : p := by\n  exact hp\n"
    assert (probe.span_start, probe.span_end) == (P(2, 2), P(2, 10))
    assert basis.goal_position == P(2, 2)


def test_inside_a_tactic_the_probe_runs_after_it_and_its_continuation_lines() -> None:
    basis = spec.proof_basis(doc(), P(3, 5))
    probe = spec.build(SOURCE, basis, ["exact h\n  -- more"])
    assert probe.text.endswith("  have h : p :=\n    hp\n  exact h\n    -- more\n")
    assert "broken" not in probe.text
    assert probe.span_start == P(5, 2)
    assert basis.goal_position == P(4, 6)


def test_on_the_by_line_the_probe_becomes_the_first_tactic_at_the_blocks_indentation() -> None:
    basis = spec.proof_basis(doc(), P(1, 39))
    probe = spec.build(SOURCE, basis, ["intro x"])
    assert probe.text == "prelude\ntheorem t (p : Prop) (hp : p) : p := by\n  intro x\n"


def test_a_tactic_after_by_on_the_same_line_is_a_basis_too() -> None:
    text = "theorem u : q := by exact hq\n"
    d = TextDocument("file:///x/B.lean", text, 1)
    before = spec.build(text, spec.proof_basis(d, P(0, 20)), ["skip"])
    assert before.text == "theorem u : q := by skip\n"
    after = spec.build(text, spec.proof_basis(d, P(0, 24)), ["skip"])
    assert after.text == "theorem u : q := by exact hq\n                    skip\n"


def test_command_mode_appends_after_the_enclosing_command_and_drops_the_rest() -> None:
    basis = spec.command_basis(doc(), P(1, 3))
    probe = spec.build(SOURCE, basis, ["#check t", "#check t"])
    assert probe.text.endswith("    hp\n  exact h\n\n#check t\n\n#check t\n")
    assert "later" not in probe.text
    assert probe.span_start == P(9, 0)  # the span is the last text's


def test_handles_are_per_document_and_die_with_edits() -> None:
    store = spec.HandleStore()
    basis = spec.command_basis(doc(), P(1, 0))
    raw = store.mint("tok", "file:///x/A.lean", 1, basis, ("def a := 1",))
    assert store.get(raw, "file:///x/A.lean").texts == ("def a := 1",)
    with pytest.raises(BrokerError) as other:
        store.get(raw, "file:///x/B.lean")
    assert other.value.code == codes.INVALID_PARAMS
    store.invalidate_document("file:///x/A.lean", keep_version=2)
    with pytest.raises(BrokerError) as stale:
        store.get(raw, "file:///x/A.lean")
    assert stale.value.code == codes.CONTENT_MODIFIED
    with pytest.raises(BrokerError) as unknown:
        store.get("runAt:nope", "file:///x/A.lean")
    assert unknown.value.code == codes.INVALID_PARAMS and "unknown handle" in unknown.value.message


@pytest.mark.parametrize(
    "handle",
    [
        None,
        {},
        {"workspaceId": "w", "backend": "lean", "epoch": "1", "session": "s", "raw": {"value": "r"}},
        {"workspaceId": "w", "backend": "rocq", "epoch": 1, "session": "s", "raw": {"value": "r"}},
        {"workspaceId": "w", "backend": "lean", "epoch": 1, "session": "s", "raw": "r"},
    ],
)
def test_malformed_handles_are_invalid_params(handle: object) -> None:
    with pytest.raises(BrokerError, match="malformed handle") as info:
        spec.unwrap(handle)  # type: ignore[arg-type]
    assert info.value.code == codes.INVALID_PARAMS


def test_wrap_and_unwrap_round_trip() -> None:
    wrapped = spec.wrap("local:/r", 3, "123-456", "runAt:x")
    assert spec.unwrap(wrapped) == ("local:/r", 3, "123-456", "runAt:x")
