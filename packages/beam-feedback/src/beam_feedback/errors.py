"""Exceptions raised by beam-feedback.

This module owns the exception hierarchy and the error-code constants; it holds no logic.

Hierarchy::

    FeedbackError                 root; every error this package raises on purpose
    ├── InvalidReportError        the report input or its evidence is invalid (code INVALID_INPUT)
    └── BundleError               an evidence bundle could not be written (code BUNDLE_FAILED)

Collection problems (a missing ``git``, an unreadable manifest, a command that timed out) are never
exceptions: they become ``collection_warnings`` in the result.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BUNDLE_FAILED", "INVALID_INPUT", "BundleError", "FeedbackError", "InvalidReportError"]

INVALID_INPUT: Final = "invalidInput"
"""Error code for report input that fails validation (the MCP ``invalidInput`` tool error)."""

BUNDLE_FAILED: Final = "bundleFailed"
"""Error code for a bundle that could not be written (unwritable output path, lock timeout)."""


class FeedbackError(Exception):
    """Root of every error beam-feedback raises on purpose.

    Attributes:
        code: A stable, machine-readable error code (one of the constants in this module).
        message: The human-readable message, also the exception's ``str()``.
    """

    code: str = INVALID_INPUT

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidReportError(FeedbackError):
    """The report input is invalid: a missing or mistyped field, an undeclared field, bad evidence."""

    code = INVALID_INPUT


class BundleError(FeedbackError):
    """An evidence bundle could not be written; nothing partial is left behind."""

    code = BUNDLE_FAILED
