"""beam_lsp._convert: Lean's JSON answers as lsprotocol types and Lean models, the direct paths equal to the
converter's, and a wrong shape is `InvalidResult`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types

from beam_lsp import InvalidPosition, InvalidResult, PlainGoal, SemanticToken, TextDocument, apply_text_edits
from beam_lsp._convert import (
    converter,
    decode_semantic_tokens,
    edit_versions,
    hover,
    locations,
    model,
    plain_locations,
    text_edits,
)

RNG = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}
naturals = st.integers(min_value=-2, max_value=2**31) | st.booleans()  # the direct path refuses what lsprotocol does
positions = st.fixed_dictionaries({"line": naturals, "character": naturals})
ranges = st.fixed_dictionaries({"start": positions, "end": positions})


@given(
    kind=st.sampled_from(["markdown", "plaintext"]),
    value=st.text(),
    rng=st.one_of(st.none(), ranges),
)
def test_the_direct_hover_path_builds_what_the_converter_builds(kind: str, value: str, rng: Any) -> None:
    raw: dict[str, Any] = {"contents": {"kind": kind, "value": value}}
    if rng is not None:
        raw["range"] = rng
    try:
        expected = converter().structure(raw, types.Hover)
    except Exception:  # lsprotocol bounds positions to 2**31 - 1
        with pytest.raises(InvalidResult):
            hover("textDocument/hover", raw)
    else:
        assert hover("textDocument/hover", raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        {"contents": "plain string"},
        {"contents": [{"language": "lean", "value": "x"}]},
        {"contents": {"kind": "markdown", "value": "x"}, "range": RNG, "extra": 1},
        {"contents": {"kind": "markdown", "value": "x"}, "range": {"start": {"line": 0, "character": 0}}},
    ],
)
def test_other_hover_shapes_take_the_converter(raw: dict[str, Any]) -> None:
    try:
        expected: object = converter().structure(raw, types.Hover)
    except Exception:
        expected = InvalidResult
    if expected is InvalidResult:
        with pytest.raises(InvalidResult):
            hover("textDocument/hover", raw)
    else:
        assert hover("textDocument/hover", raw) == expected


@pytest.mark.parametrize(
    "raw",
    [{"contents": 3}, {"contents": {"kind": "markdown", "value": "x"}, "range": {"start": 1, "end": 2}}, [1], "x"],
)
def test_a_hover_of_the_wrong_shape_is_invalid_result(raw: object) -> None:
    with pytest.raises(InvalidResult) as info:
        hover("textDocument/hover", raw)
    assert info.value.method == "textDocument/hover"


def test_locations_keep_the_shape_lean_chose_and_one_location_is_a_list() -> None:
    link = {"targetUri": "file:///a.lean", "targetRange": RNG, "targetSelectionRange": RNG}
    location = {"uri": "file:///a.lean", "range": RNG}
    found = locations("textDocument/definition", [link, location])
    assert [type(x) for x in found] == [types.LocationLink, types.Location]
    assert found[1] == converter().structure(location, types.Location)
    assert locations("textDocument/definition", location) == [found[1]]
    assert locations("textDocument/definition", None) == []
    with pytest.raises(InvalidResult):
        plain_locations("textDocument/references", [link])
    with pytest.raises(InvalidResult):
        locations("textDocument/definition", [{"uri": "file:///a.lean", "range": {"start": -1}}])


def test_lean_models_that_do_not_validate_are_invalid_result() -> None:
    assert model("$/lean/plainGoal", {"rendered": "r", "goals": []}, PlainGoal).goals == ()
    with pytest.raises(InvalidResult, match=r"\$/lean/plainGoal .* PlainGoal \(got an object\)"):
        model("$/lean/plainGoal", {"rendered": 1}, PlainGoal)


def test_semantic_tokens_decode_to_absolute_named_tokens() -> None:
    legend = types.SemanticTokensLegend(token_types=["keyword", "variable"], token_modifiers=["declaration", "x"])
    data = [1, 0, 3, 0, 0, 0, 4, 1, 1, 0, 2, 2, 5, 1, 3, 0, 9, 1, 7, 2]
    assert decode_semantic_tokens(data, legend) == [
        SemanticToken(1, 0, 3, "keyword", ()),
        SemanticToken(1, 4, 1, "variable", ()),
        SemanticToken(3, 2, 5, "variable", ("declaration", "x")),
        SemanticToken(3, 11, 1, "7", ("x",)),  # outside the legend: named by its number
    ]
    assert decode_semantic_tokens([0, 0, 1, 0, 0, 5], None) == [SemanticToken(0, 0, 1, "0", ())]  # a cut tail


def test_a_workspace_edit_s_text_edits_come_by_document_in_order() -> None:
    edit = converter().structure(
        {
            "changes": {"file:///a.lean": [{"range": RNG, "newText": "x"}]},
            "documentChanges": [
                {"textDocument": {"uri": "file:///a.lean", "version": 1}, "edits": [{"range": RNG, "newText": "y"}]},
                {"textDocument": {"uri": "file:///b.lean", "version": 1}, "edits": []},
            ],
        },
        types.WorkspaceEdit,
    )
    # Both forms of one edit (LSP allows it): `documentChanges` is taken, never both (that applies the edit twice).
    assert {uri: [e.new_text for e in edits] for uri, edits in text_edits(edit).items()} == {
        "file:///a.lean": ["y"],
        "file:///b.lean": [],
    }
    assert edit_versions(edit) == {"file:///a.lean": 1, "file:///b.lean": 1}
    only_changes = types.WorkspaceEdit(changes=edit.changes)
    assert {uri: [e.new_text for e in edits] for uri, edits in text_edits(only_changes).items()} == {
        "file:///a.lean": ["x"]
    }
    assert edit_versions(only_changes) == {}
    with pytest.raises(ValueError, match="file operations"):
        text_edits(types.WorkspaceEdit(document_changes=[types.CreateFile(uri="file:///c.lean")]))


def _edit(l0: int, c0: int, l1: int, c1: int, text: str) -> types.TextEdit:
    return types.TextEdit(
        range=types.Range(start=types.Position(line=l0, character=c0), end=types.Position(line=l1, character=c1)),
        new_text=text,
    )


def test_text_edits_apply_to_the_text_before_any_of_them_in_utf16_columns() -> None:
    text = "a𝔸b\ncd\n"
    edits = [_edit(1, 0, 1, 2, "CD"), _edit(0, 3, 0, 4, "B"), _edit(0, 0, 0, 0, "<"), _edit(0, 0, 0, 0, "<<")]
    assert apply_text_edits(text, edits) == "<<<a𝔸B\nCD\n"
    assert apply_text_edits(TextDocument("file:///x", text, 1), []) == text
    with pytest.raises(InvalidPosition, match="overlap"):
        apply_text_edits(text, [_edit(1, 0, 1, 2, "x"), _edit(1, 1, 1, 2, "y")])
    with pytest.raises(InvalidPosition, match="splits a surrogate pair"):
        apply_text_edits(text, [_edit(0, 2, 0, 2, "x")])
