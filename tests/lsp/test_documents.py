"""beam_lsp.documents: the document mirror, UTF-16 positions and file URIs."""

from __future__ import annotations

import pytest

from beam_lsp import InvalidPosition, Position, Range, TextDocument
from beam_lsp.documents import path_to_uri, uri_to_path, utf16_len


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
