"""beam_lsp._file: `LeanFile` takes paths and code points, and turns them into URIs and UTF-16 positions."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from lsprotocol import types

from beam_lsp import InvalidPosition, LeanClient, Point0, Point1, Position, Range, path_to_uri
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

pytestmark = pytest.mark.anyio
ASTRAL = "/- 𝔸𝔹 é -/ theorem uni : True := trivial\nx\n"
"""Line 0: 𝔸 and 𝔹 take two UTF-16 units each, é one: code point 13 (`theorem`) is UTF-16 column 15."""


async def test_points_in_code_points_become_utf16_positions_and_back(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        doc = client.file("A.lean")
        assert doc.uri == path_to_uri(tmp_path / "A.lean") and not doc.is_open
        await doc.open(ASTRAL)
        assert doc.position(Point0(0, 13)) == doc.position(Point1(1, 14)) == Position(line=0, character=15)
        assert doc.position(Position(line=0, character=15)) == Position(line=0, character=15)
        assert doc.position(types.Position(line=1, character=1)) == Position(line=1, character=1)
        assert doc.point0(Position(line=0, character=15)) == Point0(0, 13)
        assert doc.point1(types.Position(line=0, character=15)) == Point1(1, 14)
        assert doc.range(Point0(0, 3), Point1(2, 2)) == Range(
            start=Position(line=0, character=3), end=Position(line=1, character=1)
        )
        for outside in (Point0(0, 42), Point0(3, 0), Point1(0, 1), Point1(1, 0), Point0(-1, 0)):
            with pytest.raises(InvalidPosition):
                doc.position(outside)
        with pytest.raises(InvalidPosition):
            doc.point0(Position(line=0, character=4))  # inside the surrogate pair of 𝔹
        with pytest.raises(InvalidPosition):
            doc.range(Point0(1, 0), Point0(0, 0))
        assert doc.document.text == ASTRAL and (await doc.change("y\n")) == 2 and doc.document.text == "y\n"
        await doc.close()
        assert not doc.is_open


async def test_open_reads_the_file_and_an_absolute_path_is_kept(tmp_path: Path) -> None:
    (tmp_path / "Sub").mkdir()
    (tmp_path / "Sub/B.lean").write_text("theorem b : True := trivial\n", encoding="utf-8")
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        relative, absolute = client.file("Sub/B.lean"), client.file(tmp_path / "Sub/B.lean")
        assert relative.path == absolute.path == tmp_path / "Sub/B.lean" and relative.uri == absolute.uri
        assert await relative.open() == 1
        with anyio.fail_after(10):
            assert (await relative.sync()).complete
            symbols = await absolute.document_symbols()
        assert [s.name for s in symbols] == ["b"]


async def test_open_sends_the_files_bytes_as_they_are_not_python_s_universal_newlines(tmp_path: Path) -> None:
    # Lean (and `lake build`) read a file's bytes: a lone CR is a character Lean refuses, a CRLF its own business.
    # Text-mode reading turned both into LF, so the document Lean checked was not the file on disk.
    raw = "theorem b : True := trivial\r\n-- one\rtwo\n"
    (tmp_path / "B.lean").write_bytes(raw.encode("utf-8"))
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        doc = client.file("B.lean")
        await doc.open()
        assert doc.document.text == raw and doc.document.line_count == 3


@pytest.mark.lean
async def test_real_lean_answers_the_same_for_a_point_as_for_its_utf16_position(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as client:
        doc = client.file("Demo/Unicode.lean")  # `/- 𝔸𝔹 é -/ theorem uni : MyTrue := myTrue` on line 3
        await doc.open()
        with anyio.fail_after(60):
            await doc.sync()
            by_point = await doc.hover(Point1(4, 36))  # `myTrue`, 1-based code points
            by_position = await client.hover(doc.uri, Position(line=3, character=37))
            goal = await doc.plain_goal(Point0(0, 0))
    assert by_point is not None and by_point == by_position and by_point.range is not None
    assert doc.point1(by_point.range.start) == Point1(4, 36) and goal is None


@pytest.mark.lean
async def test_real_lean_counts_a_carriage_return_that_ends_no_line_as_a_column(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    # Lean normalises CRLF only: a lone CR stays a character of its line (Lean's lexer refuses it, at its column),
    # and the client's lines, positions and end agree with Lean's.
    text = "prelude\r\nimport Demo.Basic\r\n\r\ntheorem cr\r: MyTrue := nope\r"
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as client:
        doc = client.file("Demo/Cr.lean")
        await doc.open(text)
        with anyio.fail_after(60):
            errors = (await doc.sync()).errors
        [nope] = [e for e in errors if "nope" in e.message]
        isolated = [e.range.start for e in errors if "isolated carriage return" in e.message]
        assert doc.point0(nope.range.start) == Point0(3, 23) and doc.point0(nope.range.end) == Point0(3, 27)
        assert Position(line=3, character=27) in isolated  # the CR ending the text, a column of line 3
        assert doc.document.line_text(3) == "theorem cr\r: MyTrue := nope\r"
        assert doc.document.end == Position(line=3, character=28)
        assert doc.point0(Position(line=3, character=28)) == Point0(3, 28)
