"""beam_lsp.documents: the document mirror, UTF-16 positions and file URIs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_lsp import InvalidPosition, Position, Range, TextDocument
from beam_lsp.documents import common_prefix, path_to_uri, uri_to_path
from beam_lsp.lines import codepoint_column, split_lines, utf16_column, utf16_len


def test_utf16_positions_count_surrogate_pairs_as_two_units() -> None:
    doc = TextDocument("file:///x.lean", "ab\n/- 𝔸𝔹 é -/ x\n", 1)
    assert utf16_len("𝔸") == 2
    off = doc.offset_at(Position(line=1, character=13))
    assert doc.text[off] == "x"
    assert doc.position_at(off) == Position(line=1, character=13)
    assert doc.end == Position(line=2, character=0)


def test_position_inside_a_surrogate_pair_is_invalid() -> None:
    doc = TextDocument("file:///x.lean", "/- 𝔸 -/\n", 1)
    with pytest.raises(InvalidPosition, match="surrogate"):
        doc.validate(Position(line=0, character=4))


def test_positions_past_the_line_or_the_document_are_invalid() -> None:
    doc = TextDocument("file:///x.lean", "abc\nde", 1)
    doc.validate(Position(line=1, character=2))
    with pytest.raises(InvalidPosition, match="line 2"):
        doc.validate(Position(line=2, character=0))
    with pytest.raises(InvalidPosition, match="character 3"):
        doc.validate(Position(line=1, character=3))
    with pytest.raises(InvalidPosition, match="start is after"):
        doc.validate_range(Range(start=Position(line=1, character=1), end=Position(line=0, character=0)))


def test_offsets_of_positions_outside_the_text_are_invalid() -> None:
    doc = TextDocument("file:///x.lean", "abc\nde", 1)
    with pytest.raises(InvalidPosition, match="line 5"):
        doc.offset_at(Position(line=5, character=0))
    with pytest.raises(InvalidPosition, match="character 9"):
        doc.offset_at(Position(line=0, character=9))


def test_position_at_clamps_to_the_text() -> None:
    doc = TextDocument("file:///x.lean", "ab\ncd", 1)
    assert doc.position_at(-5) == Position(line=0, character=0)
    assert doc.position_at(99) == Position(line=1, character=2)


def test_replacing_the_text_reindexes_lines_and_sets_the_version() -> None:
    doc = TextDocument("file:///x.lean", "a", 1)
    doc.replace("a\nb\nc", 7)
    assert doc.version == 7 and doc.line_count == 3 and doc.line_text(1) == "b" and doc.line_text(2) == "c"


def test_file_uris_round_trip_with_percent_encoding() -> None:
    uri = path_to_uri("/tmp/a b/Ünï.lean")
    assert uri == "file:///tmp/a%20b/%C3%9Cn%C3%AF.lean"
    assert str(uri_to_path(uri)) == "/tmp/a b/Ünï.lean"
    with pytest.raises(ValueError, match="not absolute"):
        path_to_uri("rel/x.lean")
    with pytest.raises(ValueError, match="not a file URI"):
        uri_to_path("https://example.com/x.lean")


# ---- didChange content: only what differs ------------------------------------------------------------------
def lean_applies(text: str, change: dict[str, Any]) -> str:
    """What Lean's `replaceLspRange` makes of `text` (lines end at `\\n`; a column counts UTF-16 units)."""
    if "range" not in change:
        return str(change["text"])
    starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    def offset(p: dict[str, int]) -> int:
        if p["line"] >= len(starts):
            return len(text)
        i, units = starts[p["line"]], 0
        while units < p["character"] and i < len(text) and text[i] != "\n":
            units += 2 if ord(text[i]) > 0xFFFF else 1
            i += 1
        return i

    rng = change["range"]
    return text[: offset(rng["start"])] + str(change["text"]) + text[offset(rng["end"]) :]


def _shared(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


_texts = st.text(alphabet="ab \n\u00e9\U0001d538", max_size=40)


@st.composite
def _edits(draw: st.DrawFn) -> tuple[str, str]:
    old = draw(_texts)
    if draw(st.booleans()):
        return old, draw(_texts)  # unrelated texts
    i = draw(st.integers(0, len(old)))
    j = draw(st.integers(i, len(old)))
    return old, old[:i] + draw(_texts) + old[j:]  # one edit, as agents make them


@given(_edits())
def test_common_prefix_counts_the_characters_two_texts_begin_with(edit: tuple[str, str]) -> None:
    old, new = edit
    assert common_prefix(old, new) == _shared(old, new)


@settings(max_examples=500)
@given(_edits())
def test_a_change_lean_applies_gives_the_new_text_and_spans_only_what_differs(edit: tuple[str, str]) -> None:
    old, new = edit
    change = TextDocument("file:///x.lean", old, 1).change_to(new)
    assert lean_applies(old, change) == new
    if old == new:
        assert change == {"text": new}
        return
    start = _shared(old, new)
    tail = _shared(old[start:][::-1], new[start:][::-1])
    assert change["text"] == new[start : len(new) - tail]


def test_a_change_keeps_the_prefix_and_suffix_and_counts_columns_in_utf16() -> None:
    old = "prelude\n/- \U0001d538\u00e9 -/ def x := a\n-- tail\n"
    change = TextDocument("file:///x.lean", old, 1).change_to(old.replace(":= a", ":= bc"))
    assert change == {
        "range": {"start": {"line": 1, "character": 19}, "end": {"line": 1, "character": 20}},
        "text": "bc",
    }


@pytest.mark.parametrize(("old", "new"), [("a\r\nb", "a\r\nc"), ("a\nb", "a\r\nb"), ("same", "same")])
def test_the_whole_text_is_sent_for_carriage_returns_or_an_unchanged_text(old: str, new: str) -> None:
    assert TextDocument("file:///x.lean", old, 1).change_to(new) == {"text": new}


def test_lines_and_columns_are_counted_as_lean_and_lsp_count_them() -> None:
    # `lines` is the one copy: Lean's columns are code points, LSP's UTF-16 units; a CR before LF is no character.
    line = "/- 𝔸𝔹 é -/ def u : MyTrue := MyNat.zero"
    assert utf16_column(line, 29) == 31 and codepoint_column(line, 31) == 29
    assert codepoint_column(line, 4) == 4  # inside the surrogate pair of 𝔸: the whole character
    assert utf16_column("ab", 5) == 5 and codepoint_column("ab", 5) == 5  # past the end: one per column
    assert split_lines("a\r\nb\n") == ["a", "b", ""]
    doc = TextDocument("file:///a.lean", "a\r\nb\n", 1)
    assert [doc.line_text(i) for i in range(doc.line_count)] == split_lines(doc.text)
    assert doc.offset_at(Position(line=0, character=1)) == 1 and doc.position_at(2) == Position(line=0, character=1)
    with pytest.raises(InvalidPosition):
        doc.offset_at(Position(line=0, character=2))  # the CR is not a column Lean knows


@pytest.mark.parametrize("text", ["a\rb\nc", "ab\r", "a\r\r\nb", "x\r\n\r"])
def test_a_carriage_return_not_before_a_line_feed_is_a_column_and_positions_round_trip(text: str) -> None:
    # Lean normalises only CRLF (lean-wire.md): a lone CR, mid-line or at the very end, stays a character of its
    # line. Every offset that is a position Lean knows maps to it and back.
    doc = TextDocument("file:///a.lean", text, 1)
    lines = split_lines(text)
    assert [doc.line_text(i) for i in range(doc.line_count)] == lines
    assert lines == [line.removesuffix("\r") for line in text.split("\n")[:-1]] + [text.split("\n")[-1]]
    for offset in range(len(text) + 1):
        if offset < len(text) and text[offset] == "\n" and text[offset - 1 : offset] == "\r":
            continue  # between the CR and the LF of a CRLF: no position of Lean's
        assert doc.offset_at(doc.position_at(offset)) == offset
    assert doc.end == Position(line=len(lines) - 1, character=len(lines[-1]))
