"""Positions as Lean prints them (`FILE:LINE:COL`, line from 1, column from 0 in code points) and their LSP form."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beam_broker._cli.position import (
    LeanPosition,
    PositionError,
    Source,
    Target,
    in_lean_terms,
    lean_position,
    parse_target,
)


def test_targets_split_into_file_position_and_range() -> None:
    assert parse_target("Demo/Proofs.lean:4:31") == Target("Demo/Proofs.lean", LeanPosition(4, 31))
    assert parse_target("Demo/Proofs.lean:4") == Target("Demo/Proofs.lean", LeanPosition(4, 0))
    assert parse_target("A.lean:1:0-9:2") == Target("A.lean", LeanPosition(1, 0), LeanPosition(9, 2))
    assert parse_target("Demo/Proofs.lean") == Target("Demo/Proofs.lean")
    assert parse_target("odd:name.lean") == Target("odd:name.lean")
    assert parse_target("dir:1/A.lean:2:3") == Target("dir:1/A.lean", LeanPosition(2, 3))
    assert str(LeanPosition(4, 20)) == "4:20"
    with pytest.raises(PositionError, match="lines count from 1"):
        parse_target("A.lean:0:3")


def test_columns_count_code_points_and_lsp_characters_utf16_units() -> None:
    # `lean Demo/U.lean` (Lean 4.35) reports `Demo/U.lean:4:29` for `MyNat.zero` on this line; LSP says 31.
    source = Source.of("prelude\nimport Demo.Basic\n\n/- 𝔸𝔹 é -/ def u : MyTrue := MyNat.zero\n")
    assert source.to_lsp(LeanPosition(4, 29)) == (3, 31)
    assert source.to_lean(3, 31) == LeanPosition(4, 29)
    assert source.to_lean(3, 4) == LeanPosition(4, 4)  # inside the surrogate pair of 𝔸: the whole character
    assert source.to_lsp(LeanPosition(1, 10)) == (0, 10)  # past the end of `prelude`: stays past it
    assert source.to_lean(0, 10) == LeanPosition(1, 10)
    assert source.to_lsp(LeanPosition(99, 2)) == (98, 2)  # past the last line: nothing to convert with
    assert source.end() == (4, 0)
    assert Source.of("a\r\nb").line(0) == "a" and Source.of("ab").end() == (0, 2)
    assert lean_position(None, 3, 31) == LeanPosition(4, 31)
    assert lean_position(source, 3, 31) == LeanPosition(4, 29)


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n\r"), max_size=20))
def test_every_column_of_a_line_round_trips(line: str) -> None:
    source = Source.of(line + "\n")
    for column in range(len(line) + 2):
        lsp_line, character = source.to_lsp(LeanPosition(1, column))
        assert lsp_line == 0 and source.to_lean(0, character) == LeanPosition(1, column)


def test_a_file_is_read_as_utf8_text_or_not_at_all(tmp_path: Path) -> None:
    (tmp_path / "A.lean").write_text("α\nβ", encoding="utf-8")
    (tmp_path / "bad.lean").write_bytes(b"\xff")
    source = Source.read(tmp_path / "A.lean")
    assert source is not None and source.lines == ("α", "β")
    assert Source.read(tmp_path / "bad.lean") is None
    assert Source.read(tmp_path / "missing.lean") is None


def test_broker_messages_say_positions_as_lean_does() -> None:
    # Finding: `hover FILE:99:0` said "line 98 is out of range", `goals FILE:4:31` said "position (3, 31)".
    source = Source.of("prelude\nimport X\n\ndef 𝔸x := 1\n")
    assert in_lean_terms("line 98 is out of range (document has 5 lines)", source) == (
        "line 99 is past the end of the file (it has 4 lines)"
    )
    assert in_lean_terms("line 98 is out of range (document has 5 lines)", None) == (
        "line 99 is past the end of the file (it has 5 lines)"
    )
    assert in_lean_terms("character 40 is out of range on line 3 (13 UTF-16 code units)", source) == (
        "column 39 is past the end of line 4 (it has 11 characters)"  # code points, as Lean counts columns
    )
    assert in_lean_terms("position (3, 6) is inside the document, but no goals", source) == (
        "position 4:5 is inside the document, but no goals"
    )
    assert in_lean_terms("file not found: /x/A.lean", source) == "file not found: /x/A.lean"
