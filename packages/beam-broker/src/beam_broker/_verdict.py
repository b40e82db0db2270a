"""What Lean's answers mean for Beam: verdicts from diagnostics and file progress, and the proof state.

Owns, for diagnostics: effective severities, counts, save readiness, diagnostic items, Lake setup-line
recognition, the scope filter, stale-import detection and the `document_progress` accumulator; for proofs (on the
stock Lean server, no plugin): tactic spans for goals before/after, interactive and plain goals as Beam's proof
state, the lexical `sorry` scan, todo matching and ordering. Pure functions over text and Lean's JSON: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from beam_lsp import (
    InteractiveGoals,
    LeanDiagnostic,
    LeanFileProgressParams,
    PlainGoal,
    Position,
    Range,
    TextDocument,
    severity_label,
    utf16_len,
)
from beam_lsp.lines import codepoint_column

from . import models as m

if TYPE_CHECKING:
    from beam_lsp import ProgressEvent

_STALE_TEXTS = (
    "Failed to build module dependencies.",
    "error: target is out-of-date and needs to be rebuilt",
    "Imports are out of date and should be rebuilt",
)
_SETUP_VERBS = (
    "Ran",
    "Running",
    "Reused",
    "Reusing",
    "Replayed",
    "Replaying",
    "Unpacked",
    "Unpacking",
    "Fetched",
    "Fetching",
    "Built",
    "Building",
)
_SETUP_LINE = re.compile("^[\u2714\u2716\u26a0\u2139] \\[")  # check, cross, warning or info sign, then " ["


def is_completion_blocking(d: LeanDiagnostic) -> bool:
    """A diagnostic that means the barrier is incomplete (stale or failed imports)."""
    return any(text in d.message for text in _STALE_TEXTS)


def is_setup_line(d: LeanDiagnostic) -> bool:
    """Lake setup progress that Lean republishes as an information diagnostic on the header."""
    r = d.range
    if d.severity != 3 or (r.start.line, r.start.character, r.end.line, r.end.character) != (0, 0, 1, 0):
        return False
    text = d.message.strip()
    return bool(_SETUP_LINE.match(text)) and any(f" {verb} " in text for verb in _SETUP_VERBS)


def visible(diags: Iterable[LeanDiagnostic]) -> list[LeanDiagnostic]:
    """User-visible diagnostics (silent editor-only messages such as "Goals accomplished!" removed)."""
    return [d for d in diags if not d.isSilent]


def effective_severity(d: LeanDiagnostic) -> str:
    """Severity name, with completion-blocking diagnostics counted as errors."""
    if is_completion_blocking(d):
        return "error"
    return severity_label(d.severity)


def counts(diags: Sequence[LeanDiagnostic]) -> m.DiagnosticCounts:
    """Counts by effective severity."""
    acc = {"error": 0, "warning": 0, "information": 0, "hint": 0, "unknown": 0}
    for d in diags:
        acc[effective_severity(d)] += 1
    return m.DiagnosticCounts(**acc, total=sum(acc.values()))


def _range(d: LeanDiagnostic) -> dict[str, Any]:
    return (d.fullRange or d.range).wire()


def item(
    d: LeanDiagnostic, *, path: str, uri: str, version: int | None, save_blocking: bool | None = None
) -> m.DiagItem:
    """A diagnostic as a `DiagItem` (range = Lean's fullRange)."""
    return m.DiagItem(
        path=path,
        uri=uri,
        severity=effective_severity(d),  # type: ignore[arg-type]
        range=_range(d),
        message=d.message,
        completion_blocking=is_completion_blocking(d),
        save_blocking=save_blocking,
        version=version,
        code=lean_name(d),
    )


def lean_name(d: LeanDiagnostic) -> str | None:
    """The name Lean gives the error (`lean.unknownIdentifier`: its diagnostic `code`), if it names one.

    `lean` prints it as `error(lean.unknownIdentifier): ...`; the CLI does the same.
    """
    return d.code if isinstance(d.code, str) and d.code else None


def in_scope(d: LeanDiagnostic, scope: str, all_diags: Sequence[LeanDiagnostic]) -> bool:
    """The scope filter: `errors` shows completion-blocking ones if any, else errors and setup lines."""
    return scoped(d, scope, any_blocking=scope != "all" and any(is_completion_blocking(x) for x in all_diags))


def scoped(d: LeanDiagnostic, scope: str, *, any_blocking: bool) -> bool:
    """`in_scope` when the caller knows whether any diagnostic of the set is completion-blocking."""
    if scope == "all":
        return True
    if any_blocking:
        return is_completion_blocking(d)
    return effective_severity(d) == "error" or is_setup_line(d)


def readiness(diags: Sequence[LeanDiagnostic], *, elaborated: bool) -> m.Readiness:
    """Save readiness from the user-visible diagnostics of a complete barrier.

    Without Lean-side code Beam cannot see unreported frontend messages, so the evidence is the error
    diagnostics; a document whose elaboration did not finish (fatal progress) is never ready.
    """
    errors = [d for d in diags if effective_severity(d) == "error"]
    blocking = [
        m.BlockingDiagnostic(
            range=_range(d),
            severity="error",
            message=d.message,  # whole: a script reading the JSON gets what Lean said, not its first line
            save_blocking=True,
            code=lean_name(d),
            completion_blocking=is_completion_blocking(d),
        )
        for d in errors
    ]
    if not elaborated:
        return m.Readiness(
            save_ready=False,
            reason="documentDidNotElaborateSuccessfully",
            blocking_error_count=max(1, len(blocking)),
            blocking_diagnostics=blocking,
            blocking_messages=[],
        )
    if blocking:
        return m.Readiness(
            save_ready=False,
            reason="documentErrors",
            blocking_error_count=len(blocking),
            blocking_diagnostics=blocking,
            blocking_messages=[],
        )
    return m.Readiness(
        save_ready=True, reason="ok", blocking_error_count=0, blocking_diagnostics=[], blocking_messages=[]
    )


def save_blocked_message(ready: m.Readiness, doc: TextDocument) -> str:
    """Upstream's preview: up to 3 blocking diagnostics of `doc` as `L:C: msg`.

    Both count from 1, and the column counts code points, as Lean's own positions do (upstream's are Lean's); the
    diagnostics' ranges are LSP's (UTF-16 columns), so the line's text converts them.
    """
    parts = []
    for b in ready.blocking_diagnostics[:3]:
        line, character = b.range["start"]["line"], b.range["start"]["character"]
        text = doc.line_text(line) if 0 <= line < doc.line_count else ""
        first = b.message.splitlines()[0] if b.message else ""
        parts.append(f"{line + 1}:{codepoint_column(text, character) + 1}: {first}")
    more = len(ready.blocking_diagnostics) - 3
    tail = f" (and {more} more)" if more > 0 else ""
    return "cannot save artifacts for a document with errors; diagnostics: " + " | ".join(parts) + tail


PROGRESS_EVENT_STEP = 25
"""A call streams a `FileProgressEvent` for the first report it sees, then every 25th, and every final one."""


@dataclasses.dataclass
class ProgressTracker:
    """Accumulates `$/lean/fileProgress` into the `document_progress` shape (1-based line bounds).

    `updates` counts the reports the broker read (its event stream coalesces reports it has not read yet, so
    while Lean elaborates a long file this is fewer than Lean sent). A report's ranges are read only when they
    are needed: for a report a call streams as an event (`track`: the range covering them, which beam-lsp scans
    without decoding the report), or one fed whole (`feed`).
    """

    updates: int = 0
    done: bool = False
    range_start_line: int | None = None
    range_end_line: int | None = None
    reported_at: int | None = dataclasses.field(default=None, compare=False, repr=False)
    """`updates` when the line range was last computed for a streamed event (None: never in this call)."""

    def feed(self, params: LeanFileProgressParams) -> None:
        """Fold one notification in, ranges included."""
        self.updates += 1
        ranges = [p.range for p in params.processing]
        if not ranges:
            self._extent(None)
            return
        start = min(ranges, key=lambda r: (r.start.line, r.start.character)).start
        end = max(ranges, key=lambda r: (r.end.line, r.end.character)).end
        self._extent(Range(start=start, end=end))

    def track(self, event: ProgressEvent) -> bool:
        """Fold one report in from its summary; True when it is due as an event (then its extent is read).

        Due: the first report this tracker streams, every `PROGRESS_EVENT_STEP`-th after it, and every final or
        fatal one. Other reports only count, and leave the line range of the last due one.
        """
        report = event.report
        self.updates += 1
        due = (
            report.done
            or report.fatal
            or self.reported_at is None
            or self.updates >= self.reported_at + PROGRESS_EVENT_STEP
        )
        if due:
            self.reported_at = self.updates
            self._extent(None if report.done else report.extent)
        else:
            self.done = False
        return due

    def _extent(self, extent: Range | None) -> None:
        """Take the range covering what Lean still elaborates (None: done) as 1-based line bounds."""
        self.done = extent is None
        if extent is None:
            self.range_start_line = None
            return
        self.range_start_line = extent.start.line + 1
        end = extent.end
        # An end at a line start excludes that line; an empty range at a line start ((8,0)-(8,0)) would
        # otherwise end before it starts.
        end_line = end.line if end.character == 0 and end.line > 0 else end.line + 1
        self.range_end_line = max(end_line, self.range_start_line)

    def snapshot(self) -> m.DocumentProgress:
        """The current value."""
        return m.DocumentProgress(
            updates=self.updates,
            done=self.done,
            range_start_line=self.range_start_line,
            range_end_line=self.range_end_line,
        )

    def copy(self) -> ProgressTracker:
        """An independent copy (a call starts from the document's last known progress; it streams afresh)."""
        return dataclasses.replace(self, reported_at=None)


# ---- proof state and todo --------------------------------------------------------------------------------
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
