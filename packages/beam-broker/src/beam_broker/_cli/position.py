"""Positions as Lean prints them (`FILE:LINE:COL`) and their LSP form, for `lean-beam`.

Lean writes a position in a message as `Demo/Broken.lean:4:20`: the line counts from 1, the column from 0, in
Unicode code points (`lean`, `lake build` and the Lean server's own messages all do). LSP positions, which the
broker takes, count both from 0 and measure the column in UTF-16 code units. The two columns differ on any line
with a character outside the Basic Multilingual Plane before the position (U+1D538, a double-struck A, is one
code point and two UTF-16 units), so converting needs the line's text: `Source` holds a file's lines and
converts both ways.

Owns: parsing `FILE[:LINE[:COL]]` and `FILE:LINE:COL-LINE:COL` command-line targets, and writing an LSP position
as `FILE:LINE:COL` (`where`): every position `lean-beam` prints goes through it. Lines and column conversions are
`beam_lsp.lines` (the one copy of those rules). It reads the file it is given and nothing else, and knows nothing
about operations or the broker.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from beam_broker.config import DEFAULT_MAX_SOURCE_BYTES
from beam_lsp.lines import codepoint_column, split_lines, utf16_column, utf16_len

_TARGET: Final = re.compile(r"^(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))?(?:-(?P<eline>\d+):(?P<ecol>\d+))?$")
MAX_SOURCE_CHARS: Final = DEFAULT_MAX_SOURCE_BYTES
"""Longest file read to convert positions (the broker's source size limit)."""


class PositionError(ValueError):
    """A `FILE:LINE:COL` target that does not name a position (the message says why)."""


@dataclasses.dataclass(frozen=True)
class LeanPosition:
    """A position as Lean prints it: 1-based line, 0-based column in code points."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


@dataclasses.dataclass(frozen=True)
class Target:
    """A command-line file argument split into the file and an optional position or range."""

    path: str
    start: LeanPosition | None = None
    end: LeanPosition | None = None


def parse_target(text: str) -> Target:
    """Split `FILE`, `FILE:LINE`, `FILE:LINE:COL` or `FILE:LINE:COL-LINE:COL` (a missing column is 0).

    Raises:
        PositionError: A line 0 (Lean's lines count from 1).
    """
    match = _TARGET.match(text)
    if match is None:
        return Target(text)
    start = _position(match["line"], match["col"] or "0")
    end = _position(match["eline"], match["ecol"]) if match["eline"] is not None else None
    return Target(match["path"], start, end)


def _position(line: str, column: str) -> LeanPosition:
    if int(line) < 1:
        raise PositionError(f"line {line}: lines count from 1, as Lean prints them")
    return LeanPosition(int(line), int(column))


@dataclasses.dataclass(frozen=True)
class Source:
    """The lines of one file (`beam_lsp.lines.split_lines`), for position conversion."""

    lines: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Source:
        """The lines of `text` (a trailing newline starts an empty last line)."""
        return cls(tuple(split_lines(text)))

    @classmethod
    def read(cls, path: Path) -> Source | None:
        """The file's lines, or None when it cannot be read as UTF-8 text (the broker then reports why)."""
        try:
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read(MAX_SOURCE_CHARS + 1)
        except (OSError, UnicodeDecodeError):
            return None
        return None if len(text) > MAX_SOURCE_CHARS else cls.of(text)

    def line(self, index: int) -> str:
        """The text of 0-based line `index` ("" past the end)."""
        return self.lines[index] if 0 <= index < len(self.lines) else ""

    def to_lsp(self, pos: LeanPosition) -> tuple[int, int]:
        """`(line, character)` in LSP terms (0-based line, UTF-16 column); a column past the end stays past it."""
        return pos.line - 1, utf16_column(self.line(pos.line - 1), pos.column)

    def to_lean(self, line: int, character: int) -> LeanPosition:
        """The Lean position of an LSP one (a column inside a surrogate pair counts the whole character)."""
        return LeanPosition(line + 1, codepoint_column(self.line(line), character))

    def end(self) -> tuple[int, int]:
        """The LSP position just after the last character."""
        last = len(self.lines) - 1
        return last, utf16_len(self.lines[last])


def lean_position(source: Source | None, line: int, character: int) -> LeanPosition:
    """The Lean position of an LSP one; without the text the UTF-16 column is taken as it is."""
    if source is None:
        return LeanPosition(line + 1, character)
    return source.to_lean(line, character)


def where(path: str, source: Source | None, position: Mapping[str, Any] | None) -> str:
    """`path:LINE:COL` for an LSP position (`{line, character}`) of the text `source` holds, as Lean prints it.

    Without the text (a file that cannot be read) the UTF-16 column is printed as it is; a missing or malformed
    position is the start of the text.
    """
    pos = position or {}
    line, character = pos.get("line"), pos.get("character")
    return f"{path}:{lean_position(source, _count(line), _count(character))}"


_LINE_PAST_END: Final = re.compile(r"\bline (\d+) is out of range(?: \(document has (\d+) lines\))?")
_COLUMN_PAST_END: Final = re.compile(
    r"\bcharacter (\d+) is out of range on line (\d+)(?: \((\d+) UTF-16 code units\))?"
)
_POSITION: Final = re.compile(r"\bposition \((\d+), (\d+)\)")


def in_lean_terms(message: str, source: Source | None) -> str:
    """A broker message with its LSP positions (0-based, UTF-16) said as Lean says them (`LINE:COL`).

    The broker speaks LSP to its clients (`line 98 is out of range`, `position (3, 31)`); a person typed
    `FILE:99:0` and `FILE:4:31`, so that is what the message must say back. Other text is left as it is.
    """

    def line_past_end(match: re.Match[str]) -> str:
        count = _line_count(source) if source is not None else None
        if count is None and match[2] is not None:
            count = int(match[2])
        tail = f" (it has {count} line{'s' if count != 1 else ''})" if count is not None else ""
        return f"line {int(match[1]) + 1} is past the end of the file{tail}"

    def column_past_end(match: re.Match[str]) -> str:
        line = int(match[2])
        text = source.line(line) if source is not None else None
        column = codepoint_column(text, int(match[1])) if text is not None else int(match[1])
        tail = f" (it has {len(text)} characters)" if text is not None else ""
        return f"column {column} is past the end of line {line + 1}{tail}"

    def position(match: re.Match[str]) -> str:
        return f"position {lean_position(source, int(match[1]), int(match[2]))}"

    message = _LINE_PAST_END.sub(line_past_end, message)
    message = _COLUMN_PAST_END.sub(column_past_end, message)
    return _POSITION.sub(position, message)


def _line_count(source: Source) -> int:
    """Lines as an editor numbers them (a final newline starts no line of its own)."""
    lines = len(source.lines)
    return lines - 1 if lines > 1 and source.lines[-1] == "" else lines


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
