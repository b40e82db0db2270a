"""Probe text: where a speculative probe goes in a document, and the mirror text that runs it.

A probe never touches the source document: its text is placed in a private mirror holding the source up to
the insertion point, the probe text, and nothing after it (truncation keeps a probe's cost proportional to the
enclosing declaration; an unchanged prefix lets Lean reuse its snapshots). Pure text surgery on LSP positions
(including the text a position request needs in a mirror, the `by` rule that settles a probe's mode without
Lean, and the rules that let a batch of alternatives share one mirror version: side by side, under fresh names,
in copies of the enclosing declaration) plus the rules that attribute Lean's messages to the probe; no I/O.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Final

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
    r"inductive|axiom|opaque|import|in|seal|unseal|unif_hint|simproc|dsimproc|add_decl_doc|init_quot|grind_pattern|"
    r"alias|compile_inductive|register_option|register_simp_attr|recommended_spelling)(?![\w'])|"
    r"@\[|Elab|Meta|CoreM|Environment|modifyEnv|addDecl"
)
"""What may change the state a later command sees: `in` applies a command to the next one (the next alternative's,
in a shared version), and the rest change the environment, scopes or options."""
_SEARCH: Final = re.compile(
    r"(?<![\w'.])(?:exact\?%?|apply\?|rw\?|refine\?|have\?|rw_search|library_search|hint|observe\??|propose|"
    r"try\?|hammer|duper|canonical|suggest_premises)(?![\w'])"
)
"""Tactics that search every declaration in scope: in a shared version they would find the declarations (or the
copies of the goal's own declaration) that earlier alternatives left, which `run_at` would not see (an `exact?`
closing the goal with an earlier copy of itself)."""
_HASH_COMMAND = re.compile(r"(?<![\w'#.])#[A-Za-z_]")
"""A `#` command (`#exit` stops Lean from reading the rest, the next alternatives too)."""
_MODIFIERS = frozenset({"private", "protected", "noncomputable", "partial", "unsafe", "nonrec"})
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


def declaration_start(doc: TextDocument, pos: Position) -> int:
    """String offset where the command around the position starts: its first line in column 0.

    A blank line belongs to the command before it (as in `command_basis`).
    """
    start = pos.line
    while start > 0 and not (doc.line_text(start).strip() and indent(doc.line_text(start)) == 0):
        start -= 1
    return doc.offset_at(Position(line=start, character=0))


def without_tactics(doc: TextDocument, pos: Position) -> bool:
    """Whether no tactic block can hold the position, from the text alone: a command mode probe, surely.

    Lean has tactic goals only inside a `by` block. The command around the position (from the line where it
    starts in column 0 to its end, `command_basis`; a blank line belongs to the command before it) holding no
    `by` at all (not even inside a word or a comment) settles it without asking Lean; anything else is for
    Lean to say.
    """
    return "by" not in doc.text[declaration_start(doc, pos) : command_basis(doc, pos).prefix_end]


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


def _place(out: str, basis: Basis, raw: str, first: bool) -> tuple[str, int]:
    """`out` with one probe text placed after it as `basis` says, and the offset where the text starts.

    Proof mode indents the text's lines to the basis column (the first one continues the last source line when
    the basis is inline); command mode puts it on a line of its own after a blank line.
    """
    body = raw.strip("\n")
    lines = body.split("\n")
    if basis.mode == "proof":
        pad = " " * basis.column
        if first and basis.inline and not out.endswith("\n"):
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
    return out + sep + block, len(out) + len(sep) + len(first_pad)


def build(source: str, basis: Basis, texts: list[str]) -> ProbeText:
    """The mirror text: the source up to the basis, then each probe text in order, then nothing.

    A handle chain's texts continue one another.
    """
    out = source[: basis.prefix_end]
    offsets: list[int] = []
    for i, raw in enumerate(texts):
        out, offset = _place(out, basis, raw, i == 0)
        offsets.append(offset)
    out += "\n"
    doc = TextDocument("mirror", out, 0)
    return ProbeText(out, [doc.position_at(o) for o in offsets], doc.position_at(len(out) - 1))


COPY_LIMIT: Final = 1000
"""Longest declaration (from its first line to the basis, in characters) copied once per tactic alternative.

Lean elaborates each copy from its start, while a version per alternative reuses the snapshots of the tactics
before the basis; past a short declaration the copies would cost more than the versions they save.
"""


@dataclasses.dataclass(frozen=True)
class Rename:
    """An alternative's copy declares `fresh` where the source or its text declares `name` (last components)."""

    name: str
    fresh: str

    def back(self, text: str) -> str:
        """A message about the copy as Lean would print it about the declaration it copies."""
        return _in_message(self.fresh).sub(self.name, text)


@dataclasses.dataclass(frozen=True)
class Alternative:
    """Where one alternative of a shared version lies in it.

    Attributes:
        copy: Where its copy of the enclosing declaration starts (proof mode; its own start in command mode).
        start: Where its text starts: its messages start here or later.
        stop: Where the next alternative's copy starts (its messages start before it); None for the last one.
        end: Where its text ends (the goals after it, proof mode).
        rename: How its copy's declared name differs from the original, if it does.
    """

    copy: Position
    start: Position
    stop: Position | None
    end: Position
    rename: Rename | None


@dataclasses.dataclass(frozen=True)
class SharedText:
    """A mirror version that answers several alternatives at once (`shared`)."""

    text: str
    alternatives: list[Alternative]
    kept: list[tuple[int, str]]
    """(alternative, name) for each declared name that also has renamed copies: that alternative keeps it."""


def shared(source: str, basis: Basis, texts: list[str], declaration_start: int) -> SharedText:
    """The text of one mirror version that runs every alternative (`shareable`) as if each ran alone.

    Command mode: the source up to the basis, then the texts one after another (`build`), each declaring a
    name an earlier one declares under a fresh one. Proof mode: the source up to the basis and the first
    text (what `build` gives it alone, at the same positions), then for each further text a copy of the
    enclosing declaration (from `declaration_start` to the basis) under a fresh name, and the text.
    """
    out = source[: basis.prefix_end]
    offsets: list[tuple[int, int, int, Rename | None]] = []
    kept: list[tuple[int, str]] = []
    if basis.mode == "command":
        seen: dict[str, int] = {}
        for i, raw in enumerate(texts):
            head = _head(raw)
            rename = None
            if head is not None and head[0] in seen:
                rename = _fresh(head[0], len(offsets), out, texts)
                if (seen[head[0]], head[0]) not in kept:
                    kept.append((seen[head[0]], head[0]))
                raw = raw[: head[1]] + rename.fresh + raw[head[2] :]
            elif head is not None:
                seen[head[0]] = i
            out, start = _place(out, basis, raw, i == 0)
            offsets.append((start, start, len(out), rename))
    else:
        declaration = source[declaration_start : basis.prefix_end]
        head = _head(declaration)
        for i, raw in enumerate(texts):
            copy = declaration_start
            rename = None
            if i > 0:
                copy_text = declaration
                if head is not None:
                    rename = _fresh(head[0], i, source[: basis.prefix_end], texts)
                    copy_text = declaration[: head[1]] + rename.fresh + declaration[head[2] :]
                out = out if out.endswith("\n") else out + "\n"
                copy = len(out)
                out += copy_text
            out, start = _place(out, basis, raw, True)
            offsets.append((copy, start, len(out), rename))
        if head is not None and len(texts) > 1:
            kept.append((0, head[0]))
    out += "\n"
    doc = TextDocument("mirror", out, 0)
    found = [
        Alternative(doc.position_at(copy), doc.position_at(start), None, doc.position_at(end), rename)
        for copy, start, end, rename in offsets
    ]
    found = [dataclasses.replace(a, stop=b.copy) for a, b in itertools.pairwise(found)] + found[-1:]
    return SharedText(out, found, kept)


def _head(text: str) -> tuple[str, int, int] | None:
    """The last component of the name a declaration command declares, and where it is in `text`."""
    body = _DOC_COMMENT.sub("", text.lstrip(), count=1)
    skipped = len(text) - len(body)
    lead = _LEAD.match(body)
    if lead is None or lead.group(1) not in ("theorem", "lemma", "def", "abbrev"):
        return None
    found = _DECLARED.match(body, lead.end())
    if found is None:
        return None
    name = found.group(1)
    last = name.rsplit(".", 1)[-1]
    end = skipped + found.end(1)
    return last, end - len(last), end


def _fresh(name: str, index: int, text: str, texts: list[str]) -> Rename:
    """A name for a copy that nothing in the mirror's copy of the source (`text`) or the texts mentions.

    An imported module may still declare it: `run.run_batch` then hears Lean say so (`declared_again`).
    """
    k = index
    while True:
        fresh = f"{name}_beam{k}"
        if not any(mentions(t, fresh) for t in (text, *texts)):
            return Rename(name, fresh)
        k += 1000


def shareable(texts: list[str], basis: Basis, source: str, declaration_start: int) -> bool:
    """Whether the alternatives can share one mirror version (`shared`), each answered as if run alone.

    Conservative, from the text alone (a `False` only costs a version per alternative).

    Command mode: every text is one command (an optional doc comment, then exactly one of `theorem`/`lemma`/
    `def`/`abbrev`/`example`/`#check`/`#reduce`/`#print`/`#eval`), none changes state a later command would see
    beyond its own declaration (no attributes, instances, notation, `open`, `set_option`, namespaces, sections,
    variables, meta-programming), and no text mentions a name another one declares; a name several texts declare
    is mentioned nowhere but in their heads (their copies after the first declare fresh names: Lean elaborates
    each command in the environment the earlier ones left, and they left nothing this one uses).

    Proof mode (the declaration is the enclosing command, from `declaration_start` to the basis): it is
    short (`COPY_LIMIT`), one `theorem`/`lemma`/`def`/`abbrev`/`example` that changes no shared state and
    mentions its own name nowhere but in its head; the texts hold no command and change no shared state, and
    none mentions the declaration's name. Each copy of the declaration then elaborates as the declaration would.

    Every text must end outside any comment, string or `«name»` it opens (`_closed`; one left open would swallow
    the next alternative), hold no `#` command but its lead (`#exit` stops Lean reading the rest) and no `in` (it
    applies a command to the next one); in proof mode the line above the declaration must not belong to its
    command (`open Foo in`, an attribute: `_attached`), since the copies start at the declaration's own line.

    Nothing is shared inside a `mutual` block (every command after it joins the block), nor when an alternative uses
    a tactic that searches every declaration in scope (`exact?`, `apply?`, `hint`, ...: `_SEARCH`). Parse errors
    are the one leak (Lean resumes at the next command, so a message may land in the next alternative's span):
    `batch_parse_error` catches them. A name whose first declaration Lean mentions in a message (already
    declared, say) sends the batch back to one version each (`run.run_batch`).
    """
    if len(texts) < 2 or _in_mutual(source[: basis.prefix_end]) or not all(map(_closed, texts)):
        return False
    if any(_SEARCH.search(text) for text in texts):
        return False
    if basis.mode == "proof":
        return not _attached(source[:declaration_start]) and _tactics_shareable(
            texts, source[declaration_start : basis.prefix_end]
        )
    heads: list[tuple[str, int, int] | None] = []
    for raw in texts:
        text = _DOC_COMMENT.sub("", raw.strip(), count=1)
        lead = _LEAD.match(text)
        if lead is None or len(_COMMANDS.findall(text)) != 1 or _SHARED_STATE.search(text):
            return False
        if len(_HASH_COMMAND.findall(text)) != lead.group(1).startswith("#"):
            return False
        heads.append(_head(raw))
    leads: dict[str, str] = {}
    for raw, head in zip(texts, heads, strict=True):
        if head is None:
            continue
        # Copies declare the same full name only when everything before the name is the same (modifiers too).
        key = " ".join(_DOC_COMMENT.sub("", raw[: head[1]].lstrip(), count=1).split())
        if leads.setdefault(head[0], key) != key or "«" in head[0]:
            return False
    for i, raw in enumerate(texts):
        head = heads[i]
        rest = raw if head is None else raw[: head[1]] + raw[head[2] :]
        if any(other is not None and j != i and mentions(rest, other[0]) for j, other in enumerate(heads)):
            return False
    return True


_MUTUAL: Final = re.compile(r"^[ \t]*(?:/-.*?-/[ \t]*)*mutual(?![\w'])", re.MULTILINE)
"""A `mutual` command: indented, or after a comment on its line, too (Lean reads it wherever a command may start)."""
_END: Final = re.compile(r"^[ \t]*end(?![\w'])", re.MULTILINE)


def _in_mutual(prefix: str) -> bool:
    """Whether the text ends inside a `mutual` block (every command after it would join the block)."""
    ends = [found.end() for found in _MUTUAL.finditer(prefix)]
    return bool(ends) and _END.search(prefix, ends[-1]) is None


def _closed(text: str) -> bool:
    """Whether `text` ends outside every comment, string, character or `«name»` it opens.

    One that stays open would swallow the next alternative in a shared version (and never report its own
    `unterminated ...` error). Conservative: raw and interpolated strings, and a `'` that starts no plain
    character literal, count as open.
    """
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            i = n if (j := text.find("\n", i)) < 0 else j + 1
        elif text.startswith("/-", i):
            depth, i = 1, i + 2
            while i < n and depth:
                step = 2 if text.startswith(("/-", "-/"), i) else 1
                depth += 1 if text.startswith("/-", i) else -1 if step == 2 else 0
                i += step
            if depth:
                return False
        elif c == '"':
            if i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_!#'"):  # r"..", r#".."#, s!"..": not followed
                return False
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            if i >= n:
                return False
            i += 1
        elif c == "«":
            if (j := text.find("»", i)) < 0:
                return False
            i = j + 1
        elif c == "'" and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_'!?.")):
            if text.startswith("\\", i + 1):
                j = text.find("'", i + 3)
                if j < 0 or j > i + 12:
                    return False
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                i += 3
            else:
                return False
        else:
            i += 1
    return True


def _attached(before: str) -> bool:
    """Whether the line before a declaration may belong to its command.

    `open Foo in`, `set_option .. in`, an attribute or a modifier there applies to the declaration, and a copy of
    it from its own first line would elaborate without it.
    """
    line = re.sub(r"--.*\Z", "", before.rstrip().rsplit("\n", 1)[-1]).rstrip()
    if re.search(r"(?<![\w'])in\Z", line):
        return True
    if line[:1].isspace():  # the body of the command before (`  simp [h]`): an attribute starts in column 0
        return False
    words = line.split()
    return line.startswith("@[") or line.endswith("]") or (bool(words) and all(w in _MODIFIERS for w in words))


def _tactics_shareable(texts: list[str], declaration: str) -> bool:
    """Whether tactic alternatives can run in copies of `declaration` (`shareable`, proof mode)."""
    text = _DOC_COMMENT.sub("", declaration.lstrip(), count=1)
    lead = _LEAD.match(text)
    if len(declaration) > COPY_LIMIT or lead is None or lead.group(1).startswith("#"):
        return False
    if len(_COMMANDS.findall(text)) != 1 or _SHARED_STATE.search(text) or _HASH_COMMAND.search(text):
        return False
    if not _closed(declaration):
        return False
    head = _head(declaration)
    if head is not None and ("«" in head[0] or mentions(declaration[: head[1]] + declaration[head[2] :], head[0])):
        return False
    for raw in texts:
        if _COMMANDS.search(raw) or _SHARED_STATE.search(raw) or _HASH_COMMAND.search(raw):
            return False
        if head is not None and mentions(raw, head[0]):
            return False
    return True


def in_message(message: str, name: str) -> bool:
    """Whether a message of Lean's mentions `name` (quoted `'name'` or `` `name` ``, or in a dotted name too)."""
    return _in_message(name).search(message) is not None


def declared_again(message: str, name: str) -> bool:
    """Whether a message of Lean's says `name` was already declared (by an imported module, for a fresh name)."""
    return "has already been declared" in message and in_message(message, name)


def _in_message(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?![\w!?])")  # Lean quotes names in 'single quotes' too


def mentions(text: str, name: str) -> bool:
    """Whether `text` mentions `name` as a whole identifier."""
    # The substring test first: most names are not there, and a batch asks about every pair of texts.
    return name in text and re.search(rf"(?<![\w']){re.escape(name)}(?![\w'!?])", text) is not None


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
