"""Printing for `lean-beam`: JSON, the short lines broker events become, and diagnostics as Lean prints them.

Owns the text of single items: a JSON document, the plain line of a progress event (what a log or a pipe gets),
and a diagnostic as `FILE:LINE:COL: severity: message` with Lean's own position convention (line from 1,
column from 0 in code points; see `position`). Where and when lines go (stdout, stderr, the live line) is
`progress`'; whole results as text are `human`'s. It decides no exit status and runs nothing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote, urlsplit

from beam_broker.events import BrokerEvent, FileProgressEvent, PreparationEvent, SetupEvent

from .position import Source, where


def _dump(value: Any, compact: bool, ascii_only: bool = False) -> str:
    if compact:
        return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=ascii_only, indent=2)


def _write(stream: TextIO, text: str) -> None:
    """Write all of `text` and flush; a reader that went away raises `BrokenPipeError`, however much was written.

    A file stream is written with `os.write` until every byte is out: a pipe whose reader exits in the middle of
    one large write accepts part of it, and Python's buffered writer then reports success for the whole (so
    `lean-beam --json ... | head` exited 0 instead of 141). The next `os.write` gets `EPIPE`.

    Raises:
        UnicodeEncodeError: The stream's encoding cannot encode the text (nothing was written).
        BrokenPipeError: The reader is gone.
    """
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's buffer): its own write is all there is
        stream.write(text)
        stream.flush()
        return
    data = memoryview(text.encode(stream.encoding or "utf-8"))
    stream.flush()  # what was written through the stream goes first
    while data:
        data = data[os.write(fd, data) :]


def write_text(stream: TextIO, text: str) -> None:
    """Write text (escaping what a stream that cannot encode it rejects) and flush."""
    try:
        _write(stream, text)
    except UnicodeEncodeError:
        _write(stream, text.encode("ascii", "backslashreplace").decode("ascii"))


def print_json(value: Any, *, compact: bool, stream: TextIO | None = None) -> None:
    """Write JSON and a newline (falling back to ASCII escapes on a stream that cannot encode the text)."""
    out = stream if stream is not None else sys.stdout
    try:
        _write(out, _dump(value, compact) + "\n")
    except UnicodeEncodeError:
        _write(out, _dump(value, compact, ascii_only=True) + "\n")


def preparation_text(event: PreparationEvent) -> str:
    """A preparation event for a person: the file and what is done, no MCP tool name (`A.lean: preparing ...`)."""
    if not event.doing:  # an older daemon: its message is all there is
        return event.message
    return f"{event.path}: {event.doing}" if event.path else event.doing


def progress_line(event: BrokerEvent) -> str | None:
    """The plain line of a progress event (`beam: A.lean: elaborating lines 4-9`), None when it has none."""
    if isinstance(event, PreparationEvent):
        return f"beam: {preparation_text(event)}"
    if isinstance(event, SetupEvent):
        return f"beam: setup: {event.message}"
    if isinstance(event, FileProgressEvent):
        progress = event.progress
        if progress.get("done"):
            return f"beam: {event.path}: elaborated"
        start, end = progress.get("range_start_line"), progress.get("range_end_line")
        if not isinstance(start, int):
            return None
        lines = f"lines {start}-{end}" if isinstance(end, int) and end > start else f"line {start}"
        return f"beam: {event.path}: elaborating {lines}"
    return None


class Sources:
    """The text of the project's files, read once each, to print positions as Lean does."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._files: dict[str, Source | None] = {}

    def file(self, path: str) -> Path:
        """A result's path (root-relative, absolute, or a `file:` URI) as a filesystem path."""
        if path.startswith("file:"):
            return Path(unquote(urlsplit(path).path))
        return Path(os.path.join(self.root, path))

    def get(self, path: str) -> Source | None:
        """The file's lines, or None when it cannot be read."""
        if path not in self._files:
            self._files[path] = Source.read(self.file(path))
        return self._files[path]

    def where(self, path: str, position: Mapping[str, Any] | None) -> str:
        """`path:LINE:COL` for an LSP position of the file, as Lean prints it (`position.where`)."""
        return where(display(path), self.get(path), position)


def display(path: str) -> str:
    """A path as shown to a person (a `file:` URI of a file outside the project becomes its path)."""
    return unquote(urlsplit(path).path) if path.startswith("file:") else path


_SEVERITY_WORDS = {"information": "info"}
"""Lean says `info:` where the broker's label is `information`; the other labels are Lean's words already."""


def severity_word(label: str) -> str:
    """The word Lean prints for a broker severity label."""
    return _SEVERITY_WORDS.get(label, label)


def diagnostic_line(item: Mapping[str, Any], sources: Sources | None) -> str:
    """`path:line:column: severity: message` (a `DiagItem`), as `lean` prints it (`message_line`).

    A message Lean names says so as `lean` does: `error(lean.unknownIdentifier): Unknown identifier ...`.
    """
    path = str(item.get("path", "?"))
    start = (item.get("range") or {}).get("start")
    if sources is not None:
        at = sources.where(path, start)
    else:  # no project files at hand: the diagnostic's own file (`uri`) gives the line's text
        uri = item.get("uri")
        source = Source.read(Path(display(uri))) if isinstance(uri, str) and uri.startswith("file:") else None
        at = where(display(path), source, start)
    return message_line(at, str(item.get("severity", "unknown")), str(item.get("message", "")), item.get("code"))


def message_line(at: str | None, severity: str, text: str, code: object = None) -> str:
    """One Lean message as `lean` prints it: `FILE:LINE:COL: error(NAME): text`; more lines follow verbatim.

    Every message `lean-beam` prints as text goes through here (a sync's diagnostics, a probe's messages,
    interactive diagnostics, `run-code`'s), so all of them show Lean's name for the message the same way.

    Args:
        at: Where (`FILE:LINE:COL`), or None for a message with no place of its own (a probe's).
        severity: The broker's label (`information` prints as Lean's `info`).
        text: The message.
        code: Lean's name for the message (its diagnostic `code`, `lean.unknownIdentifier`), if it names one.
    """
    word = severity_word(severity)
    label = f"{word}({code})" if isinstance(code, str) and code else word
    return f"{at}: {label}: {text}" if at is not None else f"{label}: {text}"


def error_line(error: Mapping[str, Any], *, verbose: bool) -> str:
    """A broker error for a person: `lean-beam: error: MESSAGE`, its protocol code (`[invalidParams]`) only with -v.

    The code is for scripts (they read it in the `--json` error) and for reports; a person reads the message.
    """
    code = f" [{error.get('code')}]" if verbose else ""
    return f"lean-beam: error: {error.get('message')}{code}"


def diagnostic_key(item: Mapping[str, Any]) -> str:
    """What identifies one diagnostic across the live events and the final result (to print it once).

    The message counts by its first line only: a save's blocking diagnostics carry just that line.
    """
    start = (item.get("range") or {}).get("start")
    first = str(item.get("message", "")).split("\n", 1)[0]
    return json.dumps([item.get("path"), start, item.get("severity"), first], sort_keys=True)
