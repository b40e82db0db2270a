"""Turning Lean's diagnostics and file progress into Beam's verdicts.

Owns: effective severities, counts, save readiness, diagnostic items, Lake setup-line recognition, the
scope filter, stale-import detection and the `document_progress` accumulator. Pure functions: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from beam_lsp import LeanDiagnostic, LeanFileProgressParams, Range, severity_label
from beam_lsp.lines import codepoint_column

from . import models as m

if TYPE_CHECKING:
    from beam_lsp import ProgressEvent, TextDocument

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
    )


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
            message=d.message.splitlines()[0] if d.message else "",
            save_blocking=True,
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
        parts.append(f"{line + 1}:{codepoint_column(text, character) + 1}: {b.message}")
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
