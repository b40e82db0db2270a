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

from typing import TYPE_CHECKING

from beam_feedback.__about__ import __version__
from beam_lsp.lazy import lazy_exports

if TYPE_CHECKING:
    from beam_feedback.collect import CollectedContext as CollectedContext
    from beam_feedback.collect import collect_context as collect_context
    from beam_feedback.errors import BUNDLE_FAILED as BUNDLE_FAILED
    from beam_feedback.errors import INVALID_INPUT as INVALID_INPUT
    from beam_feedback.errors import BundleError as BundleError
    from beam_feedback.errors import FeedbackError as FeedbackError
    from beam_feedback.errors import InvalidReportError as InvalidReportError
    from beam_feedback.models import REPORT_SCHEMA as REPORT_SCHEMA
    from beam_feedback.models import BundleMode as BundleMode
    from beam_feedback.models import EvidenceEntry as EvidenceEntry
    from beam_feedback.models import FeedbackReport as FeedbackReport
    from beam_feedback.models import FeedbackResult as FeedbackResult
    from beam_feedback.models import Kind as Kind
    from beam_feedback.models import ReportMetadata as ReportMetadata
    from beam_feedback.models import Severity as Severity
    from beam_feedback.models import WorkspaceRef as WorkspaceRef
    from beam_feedback.report import build_report as build_report
    from beam_feedback.report import load_report as load_report
    from beam_feedback.report import parse_report as parse_report
    from beam_feedback.report import read_input as read_input
    from beam_lsp.redaction import Redactor as Redactor
    from beam_lsp.redaction import is_secret_name as is_secret_name

# Every name loads on first use: the MCP server imports `beam_feedback.errors` without the report machinery.
_NAMES, __getattr__ = lazy_exports(
    __name__,
    {
        ".report": ("build_report", "parse_report", "load_report", "read_input"),
        ".collect": ("collect_context", "CollectedContext"),
        ".models": (
            "FeedbackReport",
            "EvidenceEntry",
            "WorkspaceRef",
            "FeedbackResult",
            "ReportMetadata",
            "Kind",
            "Severity",
            "BundleMode",
            "REPORT_SCHEMA",
        ),
        "beam_lsp.redaction": ("Redactor", "is_secret_name"),
        ".errors": ("FeedbackError", "InvalidReportError", "BundleError", "INVALID_INPUT", "BUNDLE_FAILED"),
    },
)
__all__ = ["__version__", *_NAMES]
