"""Lean's `$/lean/fileProgress` reports, read only as far as someone looks.

Owns `FileProgress`, one report: the document (URI and version), whether elaboration is done, whether it failed
(`fatal`), and the ranges still elaborating. Lean lists every range that is left, so while a long file elaborates
it sends hundreds of reports of up to tens of KiB each (a 1500-declaration file: ~600 reports, ~11 MiB), almost
all of them replaced by the next one before anybody reads their ranges. So:

- The summary (uri, version, done, fatal) is known at once; the ranges (`processing`, `params`) are decoded and
  validated the first time they are read, and never if nobody reads them. Their `extent` (the range covering them
  all, what a progress display shows) is scanned from a compact report's bytes without decoding it.
- `compact_report(body)` recognises a report in Lean's own serialisation (compact JSON, sorted keys, which the
  fake server copies) *before* the body is decoded, from its fixed beginning and end, when it says "still
  elaborating, nothing failed": such a report is summarised without decoding its ranges. Anything else (a final
  `processing: []`, a `kind: 2` fatal range anywhere, another spelling) is left to the strict decoder, so a
  report that ends a wait or marks a crash is always decoded and validated at once.
- A report whose deferred ranges turn out not to be valid (never seen from Lean) reads as still elaborating one
  empty range at the start of the file (its ranges are unknown; it never reads as done), and is logged.

It knows nothing about documents, barriers or events (the client, `_barrier` and the cache use it).
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
from typing import Final

from . import strict_json
from .lean import LeanFileProgressKind, LeanFileProgressParams, Position, Range

__all__ = ["FileProgress", "compact_report"]

log: logging.Logger = logging.getLogger("beam_lsp")

_PREFIX: Final = b'{"jsonrpc":"2.0","method":"$/lean/fileProgress","params":{"processing":[{'
_TAIL_START: Final = b'],"textDocument":{"uri":'
_TAIL: Final = re.compile(rb'\],"textDocument":\{"uri":("(?:[^"\\]|\\.)*"),"version":(0|[1-9][0-9]{0,15})\}\}\}')
_FATAL: Final = b'"kind":%d' % LeanFileProgressKind.FATAL_ERROR
_UNKNOWN_RANGE: Final = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
_RANGE: Final = re.compile(
    rb'"range":\{"end":\{"character":(0|[1-9][0-9]{0,15}),"line":(0|[1-9][0-9]{0,15})\},'
    rb'"start":\{"character":(0|[1-9][0-9]{0,15}),"line":(0|[1-9][0-9]{0,15})\}\}'
)


class FileProgress:
    """One `$/lean/fileProgress` report: its summary at once, its ranges when first read.

    Attributes:
        uri: The document.
        version: The document version the report is about (None when Lean did not say).
        done: Elaboration of `version` finished (`processing: []`).
        fatal: A range failed (`kind: 2`: a crashed worker or a failed header).
    """

    def __init__(
        self, uri: str, version: int | None, *, done: bool, fatal: bool, raw: object = None, body: bytes | None = None
    ) -> None:
        """Internal: use `from_params`, `from_model` or `compact_report`."""
        self.uri = uri
        self.version = version
        self.done = done
        self.fatal = fatal
        self._raw = raw  # the decoded `params` object, still unvalidated
        self._body = body  # or the whole undecoded message

    @classmethod
    def from_params(cls, params: object) -> FileProgress:
        """Summarise decoded `params` (the envelope is checked now, the ranges when first read).

        Raises:
            ValueError: The params are not a report: no `textDocument.uri` string, a version that is not an
                integer, or a `processing` that is not a list of objects.
        """
        if not isinstance(params, dict):
            raise ValueError("fileProgress params are not an object")
        document, processing = params.get("textDocument"), params.get("processing")
        if not isinstance(document, dict) or not isinstance(document.get("uri"), str):
            raise ValueError("fileProgress has no textDocument.uri")
        version = document.get("version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise ValueError("fileProgress version is not an integer")
        if not isinstance(processing, list) or not all(isinstance(p, dict) for p in processing):
            raise ValueError("fileProgress processing is not a list of objects")
        fatal = LeanFileProgressKind.FATAL_ERROR in map(dict.get, processing, itertools.repeat("kind"))
        return cls(document["uri"], version, done=not processing, fatal=fatal, raw=params)

    @classmethod
    def from_model(cls, params: LeanFileProgressParams) -> FileProgress:
        """A report from already validated params."""
        report = cls(
            params.textDocument.uri,
            params.textDocument.version,
            done=not params.processing,
            fatal=params.fatal,
        )
        report.__dict__["params"] = params
        return report

    @functools.cached_property
    def params(self) -> LeanFileProgressParams:
        """The whole report as a validated model (decoded on first use)."""
        try:
            raw = self._raw if self._body is None else strict_json.loads_object(self._body)["params"]
            return LeanFileProgressParams.from_json(raw)
        except (ValueError, KeyError) as exc:  # ModelError is a ValueError
            log.warning("a deferred fileProgress report is not valid; its ranges are unknown: %s", type(exc).__name__)
            document = {"uri": self.uri, "version": self.version}
            unknown = [] if self.done else [{"range": _UNKNOWN_RANGE, "kind": LeanFileProgressKind.PROCESSING}]
            return LeanFileProgressParams.from_json({"textDocument": document, "processing": unknown})
        finally:
            self._raw = self._body = None

    @functools.cached_property
    def processing(self) -> tuple[Range, ...]:
        """The ranges still elaborating (or failed, when `fatal`); empty when `done`."""
        return tuple(p.range for p in self.params.processing)

    @functools.cached_property
    def extent(self) -> Range | None:
        """The smallest range covering every range in `processing` (None when there is none).

        A report recognised in Lean's own spelling (`compact_report`) is scanned for its ranges without being
        decoded, when every range in it is spelled that way; anything else is read from `processing`.
        """
        body = self._body
        if body is not None:
            found = _RANGE.findall(body)
            if found and len(found) == body.count(b'"range":'):
                end = max((int(line), int(character)) for character, line, _, _ in found)
                start = min((int(line), int(character)) for _, _, character, line in found)
                return Range(
                    start=Position(line=start[0], character=start[1]), end=Position(line=end[0], character=end[1])
                )
        ranges = self.processing
        if not ranges:
            return None
        start = min((r.start.line, r.start.character) for r in ranges)
        end = max((r.end.line, r.end.character) for r in ranges)
        return Range(start=Position(line=start[0], character=start[1]), end=Position(line=end[0], character=end[1]))

    def __repr__(self) -> str:
        state = "fatal" if self.fatal else "done" if self.done else "processing"
        return f"FileProgress({self.uri!r}, version={self.version}, {state})"


def compact_report(body: bytes) -> FileProgress | None:
    """A still-elaborating, non-fatal report recognised in Lean's serialisation without decoding its ranges.

    Returns None for anything else (another message, a final or fatal report, another spelling): the caller
    decodes those strictly.
    """
    if not body.startswith(_PREFIX) or _FATAL in body:
        return None
    start = body.rfind(_TAIL_START)
    tail = _TAIL.fullmatch(body, start) if start > 0 else None
    if tail is None:
        return None
    try:
        uri = strict_json.loads(tail.group(1))
    except ValueError:
        return None
    return FileProgress(uri, int(tail.group(2)), done=False, fatal=False, body=body)
