"""Beam feedback reports, evidence bundles and the ``beam-feedback`` CLI.

A report is the author's narrative (title, summary, reproduction, expected, actual, ...) plus
local debug context collected without starting Lean, rendered as paste-ready Markdown with its
metadata, redacted, and optionally written as a local evidence bundle. Beam never uploads it.

Example:
    >>> from beam_feedback import build_report
    >>> result = build_report({"title": "t", "summary": "s", "reproduction": "r",
    ...                        "expected": "e", "actual": "a"})
    >>> result.markdown.splitlines()[0]
    '# t'
"""

from __future__ import annotations

from beam_feedback.__about__ import __version__
from beam_feedback.collect import CollectedContext, collect_context
from beam_feedback.errors import BUNDLE_FAILED, INVALID_INPUT, BundleError, FeedbackError, InvalidReportError
from beam_feedback.models import (
    REPORT_SCHEMA,
    BundleMode,
    EvidenceEntry,
    FeedbackReport,
    FeedbackResult,
    Kind,
    ReportMetadata,
    Severity,
    WorkspaceRef,
)
from beam_feedback.report import build_report, load_report, parse_report, read_input
from beam_lsp.redaction import Redactor, is_secret_name

__all__ = [
    "__version__",
    # building reports
    "build_report",
    "parse_report",
    "load_report",
    "read_input",
    "collect_context",
    "CollectedContext",
    # models
    "FeedbackReport",
    "EvidenceEntry",
    "WorkspaceRef",
    "FeedbackResult",
    "ReportMetadata",
    "Kind",
    "Severity",
    "BundleMode",
    "REPORT_SCHEMA",
    # redaction (beam-lsp's redactor, the one every Beam package uses)
    "Redactor",
    "is_secret_name",
    # errors
    "FeedbackError",
    "InvalidReportError",
    "BundleError",
    "INVALID_INPUT",
    "BUNDLE_FAILED",
]
