"""Lines and columns of a text as Lean and LSP count them: the one copy of these rules in Beam.

A line is the text between line feeds, without a carriage return before its line feed (Lean reads CRLF as LF, so
its positions never count one). An LSP column counts UTF-16 code units; Lean's (in the positions it prints, such as
`Demo/A.lean:4:20`) counts code points. The two differ on a line with a character outside the Basic Multilingual
Plane before the position (U+1D538, a double-struck A, is one code point and two UTF-16 units). beam-lsp's document
mirror, the broker and `lean-beam` all convert with these functions. Standard library only (the `lean-beam` client
path imports it without pydantic).
"""

from __future__ import annotations

__all__ = ["codepoint_column", "line_content", "split_lines", "utf16_column", "utf16_len"]


def utf16_len(text: str) -> int:
    """Length of `text` in UTF-16 code units (a character outside the Basic Multilingual Plane takes two)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def line_content(raw: str) -> str:
    """A line as Lean counts it: the text up to its line feed, without the carriage return of a CRLF ending.

    `raw` must end where a line feed follows; the last line of a text has none, so a carriage return ending it
    is a character (Lean normalises CRLF only).
    """
    return raw.removesuffix("\r")


def split_lines(text: str) -> list[str]:
    """The lines of `text` as Lean and LSP count them (a trailing line feed starts an empty last line)."""
    *lines, last = text.split("\n")
    return [line_content(line) for line in lines] + [last]


def utf16_column(line: str, column: int) -> int:
    """The UTF-16 column (LSP's) of the code-point column `column` of `line` (Lean's); past its end, one per column."""
    return utf16_len(line[:column]) + max(0, column - len(line))


def codepoint_column(line: str, character: int) -> int:
    """The code-point column (Lean's) of the UTF-16 column `character` of `line` (LSP's).

    A column inside a surrogate pair counts the whole character; past the end of the line, one per unit.
    """
    if line.isascii():
        return character
    units = 0
    for column, ch in enumerate(line):
        if units >= character:
            return column
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line) + max(0, character - units)
