"""The closed pydantic models at beam-feedback's boundary: the report input and the result.

This module owns field names, types, defaults and the invariants a report must satisfy on its own
(non-empty narrative, simple evidence names, one evidence source, confidential implies redaction,
no string that cannot cross the wire: a NUL character or a lone surrogate, in a value or a key).
It must not touch the filesystem or the environment; :mod:`beam_feedback.report` does that.

The input model mirrors the ``beam_feedback_report`` MCP tool input (including its ``workspace``
descriptor and ``include_collected``), so the MCP server can hand its validated arguments over
unchanged.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from beam_lsp.strict_json import find_invalid_text

__all__ = [
    "REPORT_SCHEMA",
    "BundleMode",
    "EvidenceEntry",
    "FeedbackReport",
    "FeedbackResult",
    "Kind",
    "ReportMetadata",
    "Severity",
    "WorkspaceRef",
]

REPORT_SCHEMA: Final = "beam.feedback.report-card.v1"
"""The ``metadata.schema`` value of every report this version produces."""

Kind = Literal["bug", "ux", "perf", "docs", "question"]
"""What kind of feedback a report is."""

Severity = Literal["low", "medium", "high", "critical"]
"""How much the reported problem hurts."""

BundleMode = Literal["none", "dir", "zip"]
"""Whether to write an evidence bundle: nothing, a directory, or a directory plus a zip of it."""

_INPUT_CONFIG: Final = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)
_OUTPUT_CONFIG: Final = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class WorkspaceRef(BaseModel):
    """A local workspace descriptor: ``{"root": "/absolute/path/to/lean/project"}``."""

    model_config = _INPUT_CONFIG

    root: str = Field(min_length=1, description="Absolute Lean/Lake project root path.")


class EvidenceEntry(BaseModel):
    """One piece of evidence: a name plus exactly one source, inline ``content`` or a file ``path``.

    ``content`` may be any JSON value; a string is kept as text, anything else is written as
    pretty-printed JSON. ``path`` is read at report time and must resolve inside the workspace
    root. ``name`` becomes ``evidence/<name>`` in a bundle, so it must be a simple file name.
    """

    model_config = _INPUT_CONFIG

    name: str = Field(description="Unique simple file name.")
    content: JsonValue = Field(None, description="Inline evidence (any JSON).")
    path: str | None = Field(None, description="A file in the workspace to attach (up to 1 MiB).")

    @field_validator("name")
    @classmethod
    def _simple_file_name(cls, name: str) -> str:
        if not name.strip() or "/" in name or "\\" in name or ".." in name or "\x00" in name or name == ".":
            raise ValueError(f"evidence name must be a simple file name (no '/', '\\' or '..'): {name!r}")
        return name

    @model_validator(mode="after")
    def _exactly_one_source(self) -> EvidenceEntry:
        has_content = "content" in self.model_fields_set
        has_path = self.path is not None
        if has_content == has_path:
            raise ValueError(f"evidence {self.name!r} needs exactly one of 'content' or 'path'")
        return self


class FeedbackReport(BaseModel):
    """A feedback report as written by its author (an agent or a person); closed and strict.

    Required: ``title``, ``summary``, ``reproduction``, ``expected``, ``actual`` (non-blank).
    ``tags`` drops blank entries. ``confidential`` requires ``redact`` (the default).
    ``include_collected`` controls whether the collected context is returned (and shown in the
    Markdown); it never restores project context in confidential mode. ``workspace`` is the
    project whose context is collected; without it nothing project-derived is collected.
    """

    model_config = _INPUT_CONFIG

    title: str = Field(description="One-line title of the problem.")
    summary: str = Field(description="What happened, in a few sentences.")
    reproduction: str = Field(description="Steps or tool calls that reproduce it.")
    expected: str = Field(description="What you expected.")
    actual: str = Field(description="What happened instead.")
    kind: Kind | None = Field(None, description="Kind of feedback.")
    severity: Severity | None = Field(None, description="How much the problem hurts.")
    impact: str | None = Field(None, description="Who or what it affects.")
    workaround: str | None = Field(None, description="A workaround, if you found one.")
    tags: list[str] = Field(default_factory=list, description="Free-form tags.")
    client_request_id: str | None = Field(None, description="Your id for the failing request, if any.")
    request: dict[str, JsonValue] | None = Field(None, description="The failing tool call.")
    response: dict[str, JsonValue] | None = Field(None, description="The answer it got.")
    evidence: list[EvidenceEntry] = Field(
        default_factory=list,
        description="Evidence: {name, content} or {name, path}.",
    )
    bundle: BundleMode = Field("none", description="Also write a local evidence bundle.")
    redact: bool = Field(True, description="Redact secrets and the home directory (required when confidential).")
    confidential: bool = Field(False, description="Collect nothing project-derived; do not echo the workspace.")
    include_collected: bool = Field(
        False, description="Return the collected context as 'collected' and in the Markdown."
    )
    workspace: WorkspaceRef | None = None

    @model_validator(mode="before")
    @classmethod
    def _sendable_text(cls, data: Any) -> Any:
        # Before any other check: NUL and lone surrogates can reach no path, process or encoder.
        found = find_invalid_text(data)
        if found is not None:
            raise ValueError(f"feedback input field '{found.path}' {found.reason}")
        return data

    @field_validator("title", "summary", "reproduction", "expected", "actual")
    @classmethod
    def _required_text(cls, value: str, info: ValidationInfo) -> str:
        if not value.strip():
            raise ValueError(f"required string field '{info.field_name}' is empty")
        return value

    @field_validator("tags")
    @classmethod
    def _drop_blank_tags(cls, tags: list[str]) -> list[str]:
        return [tag.strip() for tag in tags if tag.strip()]

    @model_validator(mode="after")
    def _check_report(self) -> FeedbackReport:
        if self.confidential and not self.redact:
            raise ValueError("'confidential' requires redaction; remove 'redact': false")
        names = [entry.name for entry in self.evidence]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"evidence names must be unique: {', '.join(duplicates)}")
        return self


class ReportMetadata(BaseModel):
    """The report card's metadata (``metadata`` in the result, ``metadata.json`` in a bundle)."""

    model_config = _OUTPUT_CONFIG

    schema_: Literal["beam.feedback.report-card.v1"] = Field(default=REPORT_SCHEMA, alias="schema")
    title: str
    kind: Kind | None
    severity: Severity | None
    generated_at: str
    active_root: str | None
    tags: list[str]
    bundle: BundleMode
    redacted: bool
    confidential: bool
    client_request_id: str | None

    def to_json(self) -> dict[str, JsonValue]:
        """Return the metadata as a JSON-ready dict (``schema`` first, nulls kept)."""
        return self.model_dump(mode="json", by_alias=True)


class FeedbackResult(BaseModel):
    """What :func:`beam_feedback.build_report` returns.

    ``to_json()`` gives the ``beam_feedback_report`` ``structuredContent`` shape: ``markdown``,
    ``metadata``, ``collection_warnings``, and only when present ``collected``, ``bundle_dir``,
    ``zip_path`` and ``workspace`` (never for confidential reports).
    """

    model_config = _OUTPUT_CONFIG

    markdown: str
    metadata: ReportMetadata
    collection_warnings: list[str]
    collected: dict[str, JsonValue] | None = None
    bundle_dir: str | None = None
    zip_path: str | None = None
    workspace: WorkspaceRef | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """Return the result as a JSON-ready dict; absent optional members are omitted."""
        result: dict[str, JsonValue] = {
            "markdown": self.markdown,
            "metadata": self.metadata.to_json(),
            "collection_warnings": list(self.collection_warnings),
        }
        if self.collected is not None:
            result["collected"] = self.collected
        if self.bundle_dir is not None:
            result["bundle_dir"] = self.bundle_dir
        if self.zip_path is not None:
            result["zip_path"] = self.zip_path
        if self.workspace is not None:
            result["workspace"] = {"root": self.workspace.root}
        return result
