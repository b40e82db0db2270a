"""Goals, todo discovery and code-action helpers on the stock Lean server (no plugin).

Pure helpers over text and Lean's JSON: tactic spans for goals before/after, interactive-goal flattening,
the lexical `sorry` scan, todo matching and ordering. No I/O.
"""

from __future__ import annotations

from typing import Any

from beam_lsp import InteractiveGoals, LeanDiagnostic, PlainGoal, Position, TextDocument, utf16_len

from . import models as m

_IDENT = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'.")
HOLE_MESSAGES = ("don't know how to synthesize placeholder", "don't know how to synthesize implicit")
NO_GOALS = (
    "position ({line}, {character}) is inside the document, but Lean has no proof goals there; try a position "
    "inside a tactic or proof body"
)


# ---- goals --------------------------------------------------------------------------------------------
def indent(line: str) -> int:
    """The line's indentation in characters."""
    return len(line) - len(line.lstrip())


def inline_tactic_column(line: str) -> int | None:
    """Where a tactic written after `by` on the same line starts (the character after the last ` by `), if any.

    The one "tactic after `by`" rule: goal spans and probe bases both use it.
    """
    idx = line.rfind(" by ", indent(line))
    return None if idx < 0 else idx + 4


def tactic_span(doc: TextDocument, pos: Position) -> tuple[Position, Position]:
    """The tactic at a position, approximated by the line's non-blank text (one tactic per line).

    Lean answers goal requests "before" at a tactic's first character and "after" elsewhere in it, so Beam
    asks at the span's start for `before` and at its end for `after`.
    """
    line = doc.line_text(pos.line)
    if not line.strip():
        return pos, pos
    lead = utf16_len(line[: indent(line)])
    end = utf16_len(line.rstrip())
    inline = inline_tactic_column(line)
    if inline is not None and utf16_len(line[:inline]) <= pos.character:
        lead = utf16_len(line[:inline])  # a tactic after `by` on the same line: the span starts after `by `
    return Position(line=pos.line, character=lead), Position(line=pos.line, character=end)


def goals_from_interactive(result: InteractiveGoals | None) -> m.ProofState | None:
    """Structured goals from `Lean.Widget.getInteractiveGoals` (None when Lean has no goals there)."""
    if result is None:
        return None
    goals = []
    for g in result.goals:
        hyps = [
            m.Hyp(names=list(h.names), type=h.type.plain, value=h.val.plain if h.val is not None else None)
            for h in g.hyps
        ]
        user = g.userName
        goals.append(
            m.Goal(
                userName=user if user and user != "[anonymous]" else None,
                goalPrefix=g.goalPrefix,
                target=g.type.plain,
                hyps=hyps,
            )
        )
    return m.ProofState(goals=goals)


def goals_from_plain(plain: PlainGoal) -> m.ProofState:
    """Structured goals parsed from `$/lean/plainGoal` text (fallback when RPC is unavailable)."""
    goals = []
    for text in plain.goals:
        lines = text.split("\n")
        user = None
        if lines and lines[0].startswith("case "):
            user = lines[0][5:].strip()
            lines = lines[1:]
        hyps: list[m.Hyp] = []
        target = ""
        for i, line in enumerate(lines):
            if line.startswith("⊢ "):
                target = "\n".join([line[2:], *lines[i + 1 :]])
                break
            names, sep, rest = line.partition(" : ")
            if sep:
                typ, _, val = rest.partition(" := ")
                hyps.append(m.Hyp(names=names.split(), type=typ, value=val or None))
            elif hyps:
                last = hyps[-1]
                hyps[-1] = m.Hyp(names=last.names, type=f"{last.type}\n{line}", value=last.value)
        goals.append(m.Goal(userName=user, target=target, hyps=hyps))
    return m.ProofState(goals=goals)


def goals_from_unsolved(d: LeanDiagnostic) -> m.ProofState:
    """Goals listed by Lean's "unsolved goals" error (goals are separated by blank lines)."""
    body = d.message.split("\n", 1)[1] if "\n" in d.message else ""
    goals = [g for g in body.split("\n\n") if g.strip()]
    return goals_from_plain(PlainGoal(rendered="", goals=tuple(goals)))


# ---- todo ---------------------------------------------------------------------------------------------
def sorry_ranges(text: str) -> list[tuple[int, int]]:
    """Offsets of `sorry` tokens outside comments, strings and `«»` identifiers."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(text)
    depth = 0
    while i < n:
        if depth:
            if text.startswith("/-", i):
                depth += 1
                i += 2
            elif text.startswith("-/", i):
                depth -= 1
                i += 2
            else:
                i += 1
            continue
        c = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/-", i):
            depth = 1
            i += 2
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif c == "«":
            j = text.find("»", i)
            i = n if j < 0 else j + 1
        elif (
            text.startswith("sorry", i)
            and (i == 0 or text[i - 1] not in _IDENT)
            and (i + 5 >= n or text[i + 5] not in _IDENT)
        ):
            out.append((i, i + 5))
            i += 5
        elif c in _IDENT:
            while i < n and text[i] in _IDENT:
                i += 1
        else:
            i += 1
    return out


def _key(p: dict[str, Any]) -> tuple[int, int]:
    return (int(p["line"]), int(p["character"]))


def matches(item_range: dict[str, Any], query: dict[str, Any]) -> bool:
    """Todo matching: half-open overlap for a non-empty query, containment (end included) for a point."""
    qs, qe = _key(query["start"]), _key(query["end"])
    s, e = _key(item_range["start"]), _key(item_range["end"])
    if qs == qe:
        return s <= qs <= e
    return (s < qe and qs < e) or (s == e and qs <= s < qe)


def is_hole(d: LeanDiagnostic) -> bool:
    """A diagnostic reporting an unsolved term hole."""
    return d.message.startswith(HOLE_MESSAGES)


def is_unsolved_goals(d: LeanDiagnostic) -> bool:
    """Lean's "unsolved goals" error (tag 1), which marks an incomplete proof."""
    return bool(d.leanTags and 1 in d.leanTags) or d.message.startswith("unsolved goals")


KIND_ORDER = {"sorry": 0, "hole": 1, "incomplete_proof": 2, "diagnostic": 3, "code_action": 4}


def action_range(action: dict[str, Any], query: dict[str, Any]) -> dict[str, Any]:
    """Where a code action applies: its first diagnostic's range, else its first edit's, else the query."""
    diagnostics = action.get("diagnostics") or []
    if diagnostics and isinstance(diagnostics[0], dict) and "range" in diagnostics[0]:
        return dict(diagnostics[0]["range"])
    for change in (action.get("edit") or {}).get("documentChanges") or []:
        edits = change.get("edits") or []
        if edits:
            return dict(edits[0]["range"])
    return query


def finish(items: list[m.TodoItem]) -> list[m.TodoItem]:
    """Deduplicate by (kind, range) and sort by start, end, kind."""
    seen: set[tuple[str, str]] = set()
    out = []
    for it in items:
        k = (it.kind, repr(sorted(it.range["start"].items()) + sorted(it.range["end"].items())))
        if k in seen:
            continue
        seen.add(k)
        out.append(it)
    out.sort(key=lambda it: (_key(it.range["start"]), _key(it.range["end"]), KIND_ORDER[it.kind]))
    return out
