"""Goal and todo analysis without Lean: tactic spans, goal parsing, the sorry scan, matching, ordering."""

from __future__ import annotations

from beam_broker import _verdict as verdict
from beam_broker import models as m
from beam_lsp import InteractiveGoals, LeanDiagnostic, PlainGoal, Position, TextDocument


def test_the_tactic_after_by_starts_after_the_last_by_of_the_line() -> None:
    assert verdict.inline_tactic_column("theorem u : q := by exact hq") == 20
    assert verdict.inline_tactic_column("  exact h") is None
    assert verdict.inline_tactic_column("  by exact h") is None  # a leading `by` is the line's own tactic
    assert verdict.indent("    x") == 4


def test_tactic_spans_for_goal_modes() -> None:
    doc = TextDocument("file:///x.lean", "theorem t : p := by exact h\n  skip\n\n", 1)
    assert verdict.tactic_span(doc, Position(line=1, character=4)) == (
        Position(line=1, character=2),
        Position(line=1, character=6),
    )
    start, end = verdict.tactic_span(doc, Position(line=0, character=22))
    assert (start.character, end.character) == (20, 27)
    start, _ = verdict.tactic_span(doc, Position(line=0, character=3))  # before `by`: the whole line
    assert start.character == 0
    blank = Position(line=2, character=0)
    assert verdict.tactic_span(doc, blank) == (blank, blank)


def test_interactive_goals_flatten_tagged_text() -> None:
    tag = {"info": {"p": "0"}, "subexprPos": "/"}
    result = {
        "goals": [
            {
                "userName": "h",
                "goalPrefix": "⊢ ",
                "type": {"append": [{"text": "a "}, {"tag": [tag, {"text": "= b"}]}]},
                "hyps": [
                    {"names": ["x", "y"], "type": {"text": "Nat"}},
                    {"names": ["z"], "type": {"text": "Nat"}, "val": {"text": "1"}},
                ],
            },
            {"userName": "[anonymous]", "type": {"append": [{"text": "p"}, {"text": "!"}]}, "hyps": []},
        ]
    }
    state = verdict.goals_from_interactive(InteractiveGoals.from_json(result))
    assert state is not None
    assert state.dump() == {
        "goals": [
            {
                "userName": "h",
                "goalPrefix": "⊢ ",
                "target": "a = b",
                "hyps": [{"names": ["x", "y"], "type": "Nat"}, {"names": ["z"], "type": "Nat", "value": "1"}],
            },
            {"goalPrefix": "⊢ ", "target": "p!", "hyps": []},
        ]
    }
    assert verdict.goals_from_interactive(None) is None


def test_plain_goals_parse_into_the_same_structure() -> None:
    plain = PlainGoal(rendered="", goals=("case succ\nn m : Nat\nh : n = m := rfl\n  more\n⊢ n + 1 = m + 1",))
    [goal] = verdict.goals_from_plain(plain).goals
    assert goal.userName == "succ" and goal.target == "n + 1 = m + 1"
    assert [(h.names, h.type, h.value) for h in goal.hyps] == [
        (["n", "m"], "Nat", None),
        (["h"], "n = m\n  more", "rfl"),  # a continuation line belongs to the hypothesis' type
    ]


def test_unsolved_goals_errors_list_their_goals() -> None:
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}
    d = LeanDiagnostic.from_json({"range": rng, "message": "unsolved goals\n⊢ p\n\n⊢ q", "severity": 1})
    assert verdict.is_unsolved_goals(d)
    assert [g.target for g in verdict.goals_from_unsolved(d).goals] == ["p", "q"]
    tagged = LeanDiagnostic.from_json({"range": rng, "message": "x", "leanTags": [1]})
    assert verdict.is_unsolved_goals(tagged)
    hole = LeanDiagnostic.from_json({"range": rng, "message": "don't know how to synthesize placeholder"})
    assert verdict.is_hole(hole) and not verdict.is_hole(d)


def test_the_sorry_scan_skips_comments_strings_and_quoted_identifiers() -> None:
    text = (
        '-- sorry\n/- sorry /- nested sorry -/ -/\ndef «sorry» := "sorry \\" sorry"\n'
        "example := sorry\nx.sorry sorry_y\n"
    )
    found = verdict.sorry_ranges(text)
    assert [text[a:b] for a, b in found] == ["sorry"]
    assert text[: found[0][0]].count("\n") == 3
    assert verdict.sorry_ranges("sorry -- end") == [(0, 5)]


def test_todo_matching_is_half_open_for_ranges_and_inclusive_for_points() -> None:
    def r(a: int, b: int, c: int, d: int) -> dict[str, dict[str, int]]:
        return {"start": {"line": a, "character": b}, "end": {"line": c, "character": d}}

    item = r(1, 2, 1, 7)
    assert verdict.matches(item, r(0, 0, 5, 0))
    assert not verdict.matches(item, r(1, 7, 2, 0))
    assert verdict.matches(item, r(1, 7, 1, 7))  # a point at the end is inside
    assert not verdict.matches(item, r(1, 8, 1, 8))
    assert verdict.matches(r(1, 3, 1, 3), r(1, 0, 1, 5))  # an empty item inside a range


def test_a_code_action_applies_where_its_diagnostic_or_first_edit_is() -> None:
    query = {"start": {"line": 0, "character": 0}, "end": {"line": 9, "character": 0}}
    at = {"start": {"line": 2, "character": 1}, "end": {"line": 2, "character": 4}}
    assert verdict.action_range({"diagnostics": [{"range": at}]}, query) == at
    edit = {"edit": {"documentChanges": [{"edits": []}, {"edits": [{"range": at, "newText": "_x"}]}]}}
    assert verdict.action_range(edit, query) == at
    assert verdict.action_range({"title": "nothing"}, query) == query


def test_todo_items_are_deduplicated_and_ordered_by_position_then_kind() -> None:
    def item(kind: str, line: int) -> m.TodoItem:
        rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 1}}
        return m.TodoItem(kind=kind, range=rng)  # type: ignore[arg-type]

    done = verdict.finish([item("diagnostic", 2), item("sorry", 2), item("hole", 1), item("sorry", 2)])
    assert [(i.kind, i.range["start"]["line"]) for i in done] == [("hole", 1), ("sorry", 2), ("diagnostic", 2)]
