"""Printing for `lean-beam`: JSON results and errors, and broker events as short human lines.

Owns the output format only: what is printed where (stdout for results, stderr for events and errors) and how a
stream that cannot encode the text is handled. It decides no exit status and runs nothing.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from .events import BrokerEvent, DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent


def _dump(value: Any, compact: bool, ascii_only: bool = False) -> str:
    if compact:
        return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=ascii_only, indent=2)


def print_json(value: Any, *, compact: bool, stream: TextIO | None = None) -> None:
    """Write JSON and a newline (falling back to ASCII escapes on a stream that cannot encode the text)."""
    out = stream if stream is not None else sys.stdout
    try:
        out.write(_dump(value, compact) + "\n")
    except UnicodeEncodeError:
        out.write(_dump(value, compact, ascii_only=True) + "\n")
    out.flush()


class EventPrinter:
    """Broker events as short human lines on stderr (one call's worth of state: repeated progress dropped)."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self._progress: dict[str, str] = {}

    def __call__(self, event: BrokerEvent) -> None:
        """Print the event's line, if any."""
        if self.quiet:
            return
        line = self.render(event)
        if line is not None:
            out = self.stream if self.stream is not None else sys.stderr
            try:
                out.write(line + "\n")
            except UnicodeEncodeError:
                out.write(line.encode("ascii", "backslashreplace").decode("ascii") + "\n")
            out.flush()

    def render(self, event: BrokerEvent) -> str | None:
        """The line for an event, or None when it adds nothing."""
        if isinstance(event, PreparationEvent):
            return f"beam: {event.message}"
        if isinstance(event, SetupEvent):
            return f"beam: setup: {event.message}"
        if isinstance(event, FileProgressEvent):
            progress = event.progress
            if progress.get("done"):
                text = f"beam: {event.path}: elaborated"
            elif progress.get("range_start_line") is not None:
                start, end = progress["range_start_line"], progress.get("range_end_line")
                lines = f"lines {start}-{end}" if isinstance(end, int) and end > start else f"line {start}"
                text = f"beam: {event.path}: elaborating {lines}"
            else:
                return None
            if self._progress.get(event.path) == text:
                return None
            self._progress[event.path] = text
            return text
        return _diagnostic_line(event)


def _diagnostic_line(event: DiagnosticEvent) -> str:
    """`path:line:column: severity: message` (1-based, like compilers), continuation lines indented."""
    item = event.item
    start = (item.get("range") or {}).get("start") or {}
    where = f"{item.get('path', '?')}:{int(start.get('line', 0)) + 1}:{int(start.get('character', 0)) + 1}"
    first, *rest = str(item.get("message", "")).splitlines() or [""]
    return "\n".join([f"{where}: {item.get('severity', 'unknown')}: {first}", *(f"  {line}" for line in rest)])
