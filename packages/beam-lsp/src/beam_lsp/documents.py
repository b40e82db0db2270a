"""The client's mirror of open documents: text, versions and UTF-16 position conversion.

Owns the text the client believes the server has for each URI; its lines and columns follow `lines`, the one
copy of those rules. It never reads or writes files.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote, urlsplit

from .errors import InvalidPosition
from .lean import JsonValue, Position, _checked_position
from .lines import codepoint_column, line_content, utf16_column, utf16_len


class PositionLike(Protocol):
    """A position argument: 0-based `line` and UTF-16 `character` (Beam's `Position` or lsprotocol's)."""

    @property
    def line(self) -> int:
        """0-based line."""
        ...

    @property
    def character(self) -> int:
        """0-based column in UTF-16 code units."""
        ...


class RangeLike(Protocol):
    """A range argument, end exclusive (Beam's `Range` or lsprotocol's)."""

    @property
    def start(self) -> PositionLike:
        """Where it starts."""
        ...

    @property
    def end(self) -> PositionLike:
        """Where it ends (exclusive)."""
        ...


class TextEditLike(Protocol):
    """A text edit: a range of the text and what replaces it (lsprotocol's `TextEdit`)."""

    @property
    def range(self) -> RangeLike:
        """The range replaced (in the text before any edit)."""
        ...

    @property
    def new_text(self) -> str:
        """What replaces it."""
        ...


def apply_text_edits(text: str | TextDocument, edits: Sequence[TextEditLike]) -> str:
    """The text after LSP text edits (from a code action, a rename, an inlay hint), as LSP applies them.

    Every range refers to the text before any edit; inserts at the same position keep their order.

    Raises:
        InvalidPosition: A range is outside the text, reversed, or overlaps another edit.
    """
    doc = text if isinstance(text, TextDocument) else TextDocument("", text, 0)
    spans = []
    for index, edit in enumerate(edits):
        start, end = doc.offset_at(edit.range.start), doc.offset_at(edit.range.end)
        if start > end:
            raise InvalidPosition("an edit's range starts after its end")
        spans.append((start, end, index, edit.new_text))
    spans.sort()
    pieces: list[str] = []
    at = 0
    for start, end, _, new_text in spans:
        if start < at:
            raise InvalidPosition("two edits overlap")
        pieces += [doc.text[at:start], new_text]
        at = end
    pieces.append(doc.text[at:])
    return "".join(pieces)


def path_to_uri(path: str | Path) -> str:
    """Turn an absolute filesystem path into a `file://` URI (percent-encoded as Lean and VS Code do)."""
    p = Path(path)
    if not p.is_absolute():
        raise ValueError(f"path is not absolute: {path}")
    return "file://" + quote(p.as_posix(), safe="/")


def uri_to_path(uri: str) -> Path:
    """Turn a `file://` URI back into a path.

    Raises:
        ValueError: The URI is not a `file:` URI.
    """
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise ValueError(f"not a file URI: {uri}")
    return Path(unquote(parts.path))


def common_prefix(a: str, b: str) -> int:
    """How many characters `a` and `b` share at their beginning.

    A binary search over slice comparisons (C-speed compares, O(n) copying in all), never a loop over
    characters: texts here are whole Lean files.
    """
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # a[:lo] == b[:lo]; the answer is at most hi
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix, at most `limit` (the same search as `common_prefix`)."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclasses.dataclass
class TextDocument:
    """One open document: its text, version and line index."""

    uri: str
    text: str
    version: int
    language_id: str = "lean4"
    _line_starts: list[int] = dataclasses.field(default_factory=list, repr=False)
    _checked: object = dataclasses.field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index()

    def _index(self) -> None:
        starts = [0]
        find = self.text.find
        i = find("\n")
        while i >= 0:
            starts.append(i + 1)
            i = find("\n", i + 1)
        self._line_starts = starts

    def change_to(self, text: str) -> dict[str, JsonValue]:
        """The `didChange` content change that turns this document's text into `text`.

        One range edit covering only what differs (the common prefix and suffix stay), so Lean's watchdog and
        worker decode a few bytes instead of the whole file on every version. The whole text is sent instead
        when nothing differs (a new version of the same text, which restarts a crashed worker) or when either
        text holds a carriage return (Lean normalises CRLF, so positions past one are not certain to agree).
        """
        old = self.text
        if old == text or "\r" in old or "\r" in text:
            return {"text": text}
        start = common_prefix(old, text)
        tail = _common_suffix(old, text, min(len(old), len(text)) - start)
        rng: JsonValue = {"start": self.position_at(start).wire(), "end": self.position_at(len(old) - tail).wire()}
        return {"range": rng, "text": text[start : len(text) - tail]}

    def replace(self, text: str, version: int) -> None:
        """Replace the whole text and set a new version."""
        self.text = text
        self.version = version
        self._checked = None
        self._index()

    @property
    def line_count(self) -> int:
        """Number of lines (a trailing newline starts an empty last line)."""
        return len(self._line_starts)

    def line_text(self, line: int) -> str:
        """Text of one line without its line feed (and a carriage return before it: see `lines.split_lines`)."""
        start = self._line_starts[line]
        if line + 1 < len(self._line_starts):
            return line_content(self.text[start : self._line_starts[line + 1] - 1])
        return self.text[start:]  # no line feed follows: a carriage return ending it is a character

    def position_of(self, line: int, column: int) -> Position:
        """The LSP position (UTF-16) of a 0-based line and code-point column of the text.

        Raises:
            InvalidPosition: The line or column is outside the text.
        """
        if line < 0 or column < 0 or line >= len(self._line_starts):
            raise InvalidPosition(f"line {line}, column {column} is outside the text ({self.line_count} lines)")
        text = self.line_text(line)
        if column > len(text):
            raise InvalidPosition(f"column {column} is past the end of line {line} ({len(text)} characters)")
        position = _checked_position(line, column if text.isascii() else utf16_len(text[:column]))
        self._checked = position  # inside this text by construction: `validate` need not look again
        return position

    def validate(self, pos: PositionLike) -> None:
        """Check that `pos` lies inside the text.

        Raises:
            InvalidPosition: The line or the UTF-16 column is out of range, or splits a surrogate pair.
        """
        if pos is self._checked:
            return
        if pos.line >= self.line_count:
            raise InvalidPosition(f"line {pos.line} is out of range (document has {self.line_count} lines)")
        line = self.line_text(pos.line)
        if line.isascii() and pos.character <= len(line):  # the common case: one unit per character
            return
        width = utf16_len(line)
        if pos.character > width:
            raise InvalidPosition(
                f"character {pos.character} is out of range on line {pos.line} ({width} UTF-16 code units)"
            )
        self.offset_at(pos)

    def validate_range(self, rng: RangeLike) -> None:
        """Check both ends of `rng` and that start <= end.

        Raises:
            InvalidPosition: An end lies outside the text or the range is reversed.
        """
        self.validate(rng.start)
        self.validate(rng.end)
        if (rng.start.line, rng.start.character) > (rng.end.line, rng.end.character):
            raise InvalidPosition("range start is after its end")

    def offset_at(self, pos: PositionLike) -> int:
        """String index (code points) of a UTF-16 position.

        Raises:
            InvalidPosition: The position splits a surrogate pair or is out of range.
        """
        if pos.line >= self.line_count:
            raise InvalidPosition(f"line {pos.line} is out of range")
        line = self.line_text(pos.line)
        if line.isascii():
            if pos.character <= len(line):
                return self._line_starts[pos.line] + pos.character
            raise InvalidPosition(f"character {pos.character} is out of range on line {pos.line}")
        column = codepoint_column(line, pos.character)
        if column > len(line):
            raise InvalidPosition(f"character {pos.character} is out of range on line {pos.line}")
        if utf16_column(line, column) != pos.character:
            raise InvalidPosition(f"character {pos.character} splits a surrogate pair on line {pos.line}")
        return self._line_starts[pos.line] + column

    def position_at(self, offset: int) -> Position:
        """UTF-16 position of a string index (clamped to the text)."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        start = self._line_starts[line]
        before = self.text[start:offset]
        if self.text.startswith("\n", offset):  # between the CR and the LF of a CRLF: the end of the line
            before = line_content(before)
        return Position(line=line, character=utf16_len(before))

    @property
    def end(self) -> Position:
        """Position just past the last character."""
        return self.position_at(len(self.text))
