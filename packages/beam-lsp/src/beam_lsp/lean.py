"""Typed models for Lean's extensions to LSP (`$/lean/*`, `textDocument/waitForDiagnostics`, Lean diagnostics).

Inbound models accept unknown fields (Lean adds fields over time) and keep them, so a diagnostic round-trips
with everything Lean said (`fullRange`, `isSilent`, `leanTags`, ...). Field names keep Lean's JSON casing.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Inbound(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class Position(_Inbound):
    """An LSP position: 0-based line and UTF-16 code unit offset."""

    line: int = Field(ge=0)
    character: int = Field(ge=0)


class Range(_Inbound):
    """An LSP range, end exclusive."""

    start: Position
    end: Position


class DiagnosticSeverity(enum.IntEnum):
    """LSP diagnostic severities."""

    ERROR = 1
    WARNING = 2
    INFORMATION = 3
    HINT = 4

    @property
    def label(self) -> str:
        """The lower-case name Beam uses on the wire (`"error"`, `"warning"`, `"information"`, `"hint"`)."""
        return self.name.lower()


def severity_label(value: int | None) -> str:
    """The label of an LSP severity number, or `"unknown"` for a missing or unknown one."""
    try:
        return DiagnosticSeverity(value).label if value is not None else "unknown"
    except ValueError:
        return "unknown"


class LeanTag(enum.IntEnum):
    """Lean's `leanTags` on diagnostics."""

    UNSOLVED_GOALS = 1
    GOALS_ACCOMPLISHED = 2


class LeanDiagnostic(_Inbound):
    """A diagnostic as Lean publishes it: the LSP fields plus `fullRange`, `isSilent` and `leanTags`."""

    range: Range
    message: str
    severity: int | None = None
    code: int | str | None = None
    source: str | None = None
    fullRange: Range | None = None
    isSilent: bool | None = None
    leanTags: list[int] | None = None
    tags: list[int] | None = None
    relatedInformation: list[dict[str, Any]] | None = None
    data: Any = None

    @property
    def is_error(self) -> bool:
        """Whether this is a user-visible error (severity 1 and not silent)."""
        return self.severity == DiagnosticSeverity.ERROR and not self.isSilent

    def wire(self) -> dict[str, Any]:
        """The diagnostic as LSP JSON (Lean casing, absent fields omitted)."""
        return self.model_dump(mode="json", exclude_none=True)


class PublishDiagnosticsParams(_Inbound):
    """`textDocument/publishDiagnostics` params."""

    uri: str
    version: int | None = None
    diagnostics: list[LeanDiagnostic]
    isIncremental: bool | None = None


class LeanFileProgressKind(enum.IntEnum):
    """`$/lean/fileProgress` processing kinds."""

    PROCESSING = 1
    FATAL_ERROR = 2


class LeanFileProgressProcessingInfo(_Inbound):
    """One range Lean is still elaborating (or failed on, kind 2)."""

    range: Range
    kind: int = LeanFileProgressKind.PROCESSING


class VersionedTextDocumentIdentifier(_Inbound):
    """A document URI and version."""

    uri: str
    version: int | None = None


class LeanFileProgressParams(_Inbound):
    """`$/lean/fileProgress` params: an empty `processing` list means elaboration finished."""

    textDocument: VersionedTextDocumentIdentifier
    processing: list[LeanFileProgressProcessingInfo]

    @property
    def fatal(self) -> bool:
        """Whether Lean reports a fatal error (worker crash or header failure)."""
        return any(p.kind == LeanFileProgressKind.FATAL_ERROR for p in self.processing)


class PlainGoal(_Inbound):
    """`$/lean/plainGoal` result: one rendered string per goal; empty when the goals are solved."""

    rendered: str
    goals: list[str]


class PlainTermGoal(_Inbound):
    """`$/lean/plainTermGoal` result: the expected type at a term, with its range."""

    goal: str
    range: Range


class RpcConnectResult(_Inbound):
    """`$/lean/rpc/connect` result."""

    sessionId: int | str


def publish_params(params: Any) -> tuple[str, int | None, list[Any], bool]:
    """The uri, version, raw diagnostics and `isIncremental` of `publishDiagnostics` params.

    Only the shape is checked: the cache validates the diagnostics it keeps as `LeanDiagnostic`s.

    Raises:
        ValueError: No uri string, a version that is not an integer, or diagnostics that are not objects.
    """
    if not isinstance(params, dict) or not isinstance(params.get("uri"), str):
        raise ValueError("publishDiagnostics has no uri")
    version, diagnostics = params.get("version"), params.get("diagnostics")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise ValueError("publishDiagnostics version is not an integer")
    if not isinstance(diagnostics, list) or not all(isinstance(d, dict) for d in diagnostics):
        raise ValueError("publishDiagnostics diagnostics is not a list of objects")
    return params["uri"], version, diagnostics, params.get("isIncremental") is True
