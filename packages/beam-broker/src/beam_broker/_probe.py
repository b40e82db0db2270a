"""Probe text: where a speculative probe goes in a document, and the mirror text that runs it.

A probe never touches the source document: its text is placed in a private mirror holding the source up to
the insertion point, the probe text, and nothing after it (truncation keeps a probe's cost proportional to the
enclosing declaration; an unchanged prefix lets Lean reuse its snapshots). Pure text surgery on LSP positions
(including the text a position request needs in a mirror, and the `by` rule that settles a probe's mode without
Lean) plus the rules that attribute Lean's messages to the probe; no I/O.
"""

from __future__ import annotations

import dataclasses
import re

from beam_lsp import LeanDiagnostic, Position, TextDocument, severity_label, utf16_len

from ._analysis import indent, inline_tactic_column
from ._documents import header_text

_TRACE = re.compile(r"^\[[A-Za-z_][\w.]*\]")


@dataclasses.dataclass(frozen=True)
class Basis:
    """Where a probe runs in the source document.

    Attributes:
        mode: `proof` (tactics on the goals there) or `command` (a command after the enclosing command).
        prefix_end: String offset in the source text where the mirror's copy of the source ends.
        column: Column (in characters) the probe's lines are indented to (proof mode), else 0.
        inline: The probe continues the last source line (a tactic after `by` on the same line).
        goal_position: Where the source's goals describe the probe's starting state (proof mode).
    """

    mode: str
    prefix_end: int
    column: int
    inline: bool = False
    goal_position: Position | None = None


def _line_end(doc: TextDocument, line: int) -> int:
    return doc.offset_at(Position(line=line, character=utf16_len(doc.line_text(line))))


def proof_basis(doc: TextDocument, pos: Position) -> Basis:
    """Insertion point for tactics: before the tactic at its first character, after it otherwise.

    Tactics are approximated by lines (one tactic per line, continuation lines indented deeper), which is
    how nearly all Lean proofs are laid out; a tactic after `by` on the declaration line is handled too.
    """
    line = doc.line_text(pos.line)
    stripped = line.strip()
    col = indent(line)
    ends_with_by = stripped == "by" or stripped.endswith((" by", ":=by", "(by"))
    if ends_with_by:
        # Position on the `... := by` line: the probe is the first tactic of the block.
        nxt = next((i for i in range(pos.line + 1, doc.line_count) if doc.line_text(i).strip()), None)
        column = indent(doc.line_text(nxt)) if nxt is not None and indent(doc.line_text(nxt)) > col else col + 2
        return Basis("proof", _line_end(doc, pos.line), column, goal_position=pos)
    inline = inline_tactic_column(line)
    start_col = col if inline is None else inline
    start_units = utf16_len(line[:start_col])
    if pos.character <= start_units:
        # Before the tactic: the mirror's copy stops at the tactic's first character.
        start = Position(line=pos.line, character=start_units)
        return Basis("proof", doc.offset_at(start), start_col, inline=True, goal_position=start)
    # After the tactic: keep its continuation lines (indented deeper), then continue at its column.
    end_line = pos.line
    for i in range(pos.line + 1, doc.line_count):
        text = doc.line_text(i)
        if text.strip() and indent(text) <= col:
            break
        if text.strip():
            end_line = i
    tactic_end = Position(line=end_line, character=utf16_len(doc.line_text(end_line).rstrip()))
    return Basis("proof", _line_end(doc, end_line), start_col, goal_position=tactic_end)


def command_basis(doc: TextDocument, pos: Position) -> Basis:
    """Insertion point for a command: after the command containing the position.

    A command ends where the next non-blank line starts in column 0.
    """
    end_line = pos.line
    for i in range(pos.line + 1, doc.line_count):
        text = doc.line_text(i)
        if text.strip() and indent(text) == 0:
            break
        if text.strip():
            end_line = i
    return Basis("command", _line_end(doc, end_line), 0)


def without_tactics(doc: TextDocument, pos: Position) -> bool:
    """Whether no tactic block can hold the position, from the text alone: a command mode probe, surely.

    Lean has tactic goals only inside a `by` block. The command around the position (from the line where it
    starts in column 0 to its end, `command_basis`; a blank line belongs to the command before it) holding no
    `by` at all (not even inside a word or a comment) settles it without asking Lean; anything else is for
    Lean to say.
    """
    start = pos.line
    while start > 0 and not (doc.line_text(start).strip() and indent(doc.line_text(start)) == 0):
        start -= 1
    begin = doc.offset_at(Position(line=start, character=0))
    return "by" not in doc.text[begin : command_basis(doc, pos).prefix_end]


def declaration_text(doc: TextDocument, pos: Position) -> str:
    """The document's text up to the end of the command (declaration) containing `pos`, then a newline.

    A mirror holding it answers position requests at `pos` as the document would: the text before the cut is
    the same, so are positions, and Lean elaborates nothing after the declaration (DESIGN §4). The cut is never
    inside the header (a mirror whose imports change restarts its Lean worker).
    """
    end = max(command_basis(doc, pos).prefix_end, len(header_text(doc.text)))
    return doc.text[:end] + "\n"


@dataclasses.dataclass(frozen=True)
class ProbeText:
    """A mirror's full text and the span (UTF-16 positions) of the last probe text in it."""

    text: str
    span_start: Position
    span_end: Position


def build(source: str, basis: Basis, texts: list[str]) -> ProbeText:
    """The mirror text: the source up to the basis, then each probe text in order, then nothing."""
    out = source[: basis.prefix_end]
    pad = " " * basis.column
    start_offset = len(out)
    for i, raw in enumerate(texts):
        body = raw.strip("\n")
        lines = body.split("\n")
        if basis.mode == "proof":
            if i == 0 and basis.inline and not out.endswith("\n"):
                sep = ""
                first_pad = ""
            else:
                sep = "" if out.endswith("\n") else "\n"
                first_pad = pad
            block = first_pad + lines[0] + "".join("\n" + pad + ln if ln.strip() else "\n" for ln in lines[1:])
        else:
            sep = "\n\n" if not out.endswith("\n") else "\n"
            first_pad = ""
            block = body
        start_offset = len(out) + len(sep) + (len(first_pad) if basis.mode == "proof" else 0)
        out = out + sep + block
    out += "\n"
    doc = TextDocument("mirror", out, 0)
    return ProbeText(out, doc.position_at(start_offset), doc.position_at(len(out) - 1))


def in_span(d: LeanDiagnostic, start: Position, end: Position) -> bool:
    """Whether a diagnostic starts inside the probe's span (end included)."""
    s = (d.range.start.line, d.range.start.character)
    return (start.line, start.character) <= s <= (end.line, end.character)


def is_trace(d: LeanDiagnostic) -> bool:
    """An information message rendered from a trace node (`[Class.name] ...`)."""
    return (d.severity or 3) >= 3 and bool(_TRACE.match(d.message))


def run_severity(d: LeanDiagnostic) -> str:
    """A run message's severity: errors and warnings keep theirs, everything else is `information`."""
    label = severity_label(d.severity)
    return label if label in ("error", "warning") else "information"
