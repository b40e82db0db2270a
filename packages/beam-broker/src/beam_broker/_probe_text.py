"""Probe text: where a speculative probe goes in a document, and the mirror text that runs it.

A probe never touches the source document: its text is placed in a private mirror holding the source up to
the insertion point, the probe text, and nothing after it (truncation keeps a probe's cost proportional to the
enclosing declaration; an unchanged prefix lets Lean reuse its snapshots). Pure text surgery on LSP positions
(including the text a position request needs in a mirror, the `by` rule that settles a probe's mode without
Lean, and the rule that lets a batch of command alternatives share one mirror version) plus the rules that
attribute Lean's messages to the probe; no I/O.
"""

from __future__ import annotations

import dataclasses
import re

from beam_lsp import LeanDiagnostic, Position, TextDocument, severity_label, utf16_len

from ._documents import header_text
from ._verdict import indent, inline_tactic_column

_TRACE = re.compile(r"^\[[A-Za-z_][\w.]*\]")
_DOC_COMMENT = re.compile(r"\A/--.*?-/\s*", re.DOTALL)
_LEAD = re.compile(
    r"\A(?:(?:private|protected|noncomputable)\s+)*(theorem|lemma|def|abbrev|example|#check|#reduce|#print|#eval)\b"
)
_COMMANDS = re.compile(r"(?<![\w#'.])(?:theorem|lemma|def|abbrev|example)(?![\w'])|#(?:check|reduce|print|eval)")
_DECLARED = re.compile(r"\s+([^\s(){}\[\]⦃⦄:]+)")
_SHARED_STATE = re.compile(
    r"(?<![\w'])(?:instance|attribute|deriving|local|scoped|macro|macro_rules|syntax|notation|infix|infixl|infixr|"
    r"prefix|postfix|elab|elab_rules|open|export|namespace|section|end|variable|universe|mutual|set_option|"
    r"initialize|builtin_initialize|run_cmd|run_elab|run_meta|include|omit|declare_syntax_cat|class|structure|"
    r"inductive|axiom|opaque|import)(?![\w'])|@\[|Elab|Meta|CoreM|Environment|modifyEnv|addDecl"
)
_PARSE_ERROR = re.compile(r"\A(?:unexpected|expected|unterminated)\b|missing end of")


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
    the same, so are positions, and Lean elaborates nothing after the declaration (a position-scoped answer never
    waits behind the rest of the file). The cut is never
    inside the header (a mirror whose imports change restarts its Lean worker).
    """
    end = max(command_basis(doc, pos).prefix_end, len(header_text(doc.text)))
    return doc.text[:end] + "\n"


@dataclasses.dataclass(frozen=True)
class ProbeText:
    """A mirror's full text, where each probe text starts in it, and where the last one ends (UTF-16 positions)."""

    text: str
    starts: list[Position]
    span_end: Position

    @property
    def span_start(self) -> Position:
        """Where the last probe text starts: a probe chain's messages are the ones from here on."""
        return self.starts[-1]

    def spans(self) -> list[tuple[Position, Position | None]]:
        """Each text's (start, stop) for `in_span`: up to the next text's start, the last one's to the end."""
        return list(zip(self.starts, [*self.starts[1:], None], strict=True))


def build(source: str, basis: Basis, texts: list[str]) -> ProbeText:
    """The mirror text: the source up to the basis, then each probe text in order, then nothing.

    A handle chain's texts continue one another; a batch's command alternatives (`isolated`) stand side by side.
    """
    out = source[: basis.prefix_end]
    pad = " " * basis.column
    offsets: list[int] = []
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
        offsets.append(len(out) + len(sep) + (len(first_pad) if basis.mode == "proof" else 0))
        out = out + sep + block
    out += "\n"
    doc = TextDocument("mirror", out, 0)
    return ProbeText(out, [doc.position_at(o) for o in offsets], doc.position_at(len(out) - 1))


def isolated(texts: list[str]) -> bool:
    """Whether command-mode alternatives can share one mirror version and each be answered as if run alone.

    Conservative, from the text alone (a `False` only costs a version per alternative): every text is one
    command (an optional doc comment, then exactly one of `theorem`/`lemma`/`def`/`abbrev`/`example`/`#check`/
    `#reduce`/`#print`/`#eval`), none changes state a later command would see beyond its own declaration (no
    attributes, instances, notation, `open`, `set_option`, namespaces, sections, variables, meta-programming),
    the declared names differ, and no text mentions a name another one declares. Then an alternative's messages
    are the same whether the others come before it or not: Lean elaborates each command in the environment the
    earlier ones left, and they left nothing this one uses. Parse errors are the one leak (Lean resumes at the
    next command, so a message may land in the next alternative's span): `batch_parse_error` catches them.
    """
    if len(texts) < 2:
        return False
    declared: list[str | None] = []
    for raw in texts:
        text = _DOC_COMMENT.sub("", raw.strip(), count=1)
        lead = _LEAD.match(text)
        if lead is None or len(_COMMANDS.findall(text)) != 1 or _SHARED_STATE.search(text):
            return False
        found = _DECLARED.match(text, lead.end()) if lead.group(1) in ("theorem", "lemma", "def", "abbrev") else None
        declared.append(found.group(1).rsplit(".", 1)[-1] if found else None)
    names = [n for n in declared if n is not None]
    if len(set(names)) != len(names):
        return False
    for i, raw in enumerate(texts):
        for j, declared_name in enumerate(declared):
            if declared_name is not None and i != j and _mentions(raw, declared_name):
                return False
    return True


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w']){re.escape(name)}(?![\w'!?])", text) is not None


def batch_parse_error(diags: list[LeanDiagnostic], start: Position) -> bool:
    """Whether Lean reported a parse error at or after `start` (a batch's alternatives may then be misattributed)."""
    return any(d.is_error and in_span(d, start) and _PARSE_ERROR.search(d.message) for d in diags)


def in_span(d: LeanDiagnostic, start: Position, stop: Position | None = None) -> bool:
    """Whether a diagnostic starts at or after `start` and before `stop`.

    Without `stop`, up to the end of the text: a probe's text is the last thing in its mirror, and Lean puts the
    error of a command cut off by the end of the input (`unexpected end of input`) past its last character.
    """
    s = (d.range.start.line, d.range.start.character)
    return (start.line, start.character) <= s and (stop is None or s < (stop.line, stop.character))


def is_trace(d: LeanDiagnostic) -> bool:
    """An information message rendered from a trace node (`[Class.name] ...`)."""
    return (d.severity or 3) >= 3 and bool(_TRACE.match(d.message))


def run_severity(d: LeanDiagnostic) -> str:
    """A run message's severity: errors and warnings keep theirs, everything else is `information`."""
    label = severity_label(d.severity)
    return label if label in ("error", "warning") else "information"
