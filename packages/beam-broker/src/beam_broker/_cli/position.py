"""Positions as Lean prints them (`FILE:LINE:COL`) and their LSP form, for `lean-beam`.

Lean writes a position in a message as `Demo/Broken.lean:4:20`: the line counts from 1, the column from 0, in
Unicode code points (`lean`, `lake build` and the Lean server's own messages all do). LSP positions, which the
broker takes, count both from 0 and measure the column in UTF-16 code units. The two columns differ on any line
with a character outside the Basic Multilingual Plane before the position (U+1D538, a double-struck A, is one
code point and two UTF-16 units), so converting needs the line's text: `Source` holds a file's lines and
converts both ways.

Owns: parsing `FILE[:LINE[:COL]]` and `FILE:LINE:COL-LINE:COL` command-line targets, and the conversions. It
reads the file it is given and nothing else; it knows nothing about operations or the broker (standard library
only, so the daemon's client path stays cheap).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Final

from beam_broker.config import DEFAULT_MAX_SOURCE_BYTES

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


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


@dataclasses.dataclass(frozen=True)
class Source:
    """The lines of one file (split at line feeds, as Lean and LSP do), for position conversion."""

    lines: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Source:
        """The lines of `text` (a trailing newline starts an empty last line)."""
        return cls(tuple(text.split("\n")))

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
        """The text of 0-based line `index` ("" past the end), without a carriage return before the newline."""
        return self.lines[index].removesuffix("\r") if 0 <= index < len(self.lines) else ""

    def to_lsp(self, pos: LeanPosition) -> tuple[int, int]:
        """`(line, character)` in LSP terms (0-based line, UTF-16 column); a column past the end stays past it."""
        text = self.line(pos.line - 1)
        head = text[: pos.column]
        return pos.line - 1, sum(_units(ch) for ch in head) + max(0, pos.column - len(text))

    def to_lean(self, line: int, character: int) -> LeanPosition:
        """The Lean position of an LSP one (a column inside a surrogate pair counts the whole character)."""
        units, column = 0, 0
        text = self.line(line)
        for ch in text:
            if units >= character:
                break
            units += _units(ch)
            column += 1
        return LeanPosition(line + 1, column + max(0, character - units))

    def end(self) -> tuple[int, int]:
        """The LSP position just after the last character."""
        last = len(self.lines) - 1
        return last, sum(_units(ch) for ch in self.lines[last])


def lean_position(source: Source | None, line: int, character: int) -> LeanPosition:
    """The Lean position of an LSP one; without the text the UTF-16 column is taken as it is."""
    if source is None:
        return LeanPosition(line + 1, character)
    return source.to_lean(line, character)
