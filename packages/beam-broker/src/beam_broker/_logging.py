"""Log output of broker processes, redacted: a failure's traceback, and every line a `lean-beam` process writes.

Owns `log_failure` (log an exception with its traceback, the whole text redacted first: the standard
`exc_info` path would format the exception's text unredacted) and `RedactingFormatter` (the formatter the
`lean-beam` CLI and daemon install, so no log line they write carries a secret). Which values are secret is the
configuration's business (`BrokerConfig.redactor`); how they are replaced is beam-lsp's `Redactor`. Both also
name no probe mirror (Lean text in a failure or a log line may quote one: `_invisible.text` maps it to its
source). Standard library, the redactor and `_invisible` only: the error boundary imports it.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from beam_lsp.redaction import Redactor

from . import _invisible as invisible


def log_failure(logger: logging.Logger, redactor: Redactor, exc: BaseException, message: str, *args: Any) -> None:
    """Log `message % args` and the traceback of `exc` at ERROR level, both redacted."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    logger.error("%s\n%s", _clean(redactor, message % args if args else message), _clean(redactor, text))


class RedactingFormatter(logging.Formatter):
    """A `logging.Formatter` whose whole output (message, arguments, traceback) goes through a redactor."""

    def __init__(self, redactor: Redactor, fmt: str | None = None) -> None:
        """Format like `logging.Formatter(fmt)`, then redact."""
        super().__init__(fmt)
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, redacted, naming no probe mirror."""
        return _clean(self._redactor, super().format(record))


def _clean(redactor: Redactor, text: str) -> str:
    # Mirrors first: the redactor may shorten a home directory inside a mirror's URI.
    return redactor.redact(invisible.text(text))
