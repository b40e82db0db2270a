"""How `lean-beam-mcp` writes its logs to stderr: text lines, or JSON lines for log shippers, both redacted.

Owns the formatters: every field of a line (message, arguments, traceback) passes the broker's one rule for log
text (`beam_broker.redact_log_text`): a probe mirror's name becomes its source's, as in every answer, and the
redactor of the broker's configuration hides the values of secret-named environment variables and the secret
flags of the Lean command. So a JSON line hides what a text line hides. It must not configure anything but the
handler it is given.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Final

from beam_broker import redact_log_text
from beam_lsp.redaction import Redactor

FORMATS: Final = ("text", "json")
TEXT: Final = "lean-beam-mcp: %(levelname)s %(name)s: %(message)s"


class TextFormatter(logging.Formatter):
    """`lean-beam-mcp: LEVEL logger: message`, naming no probe mirror, redacted."""

    def __init__(self, redactor: Redactor) -> None:
        """Format with `TEXT`, then map mirror names and redact."""
        super().__init__(TEXT)
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The redacted line."""
        return redact_log_text(self._redactor, super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `time` (RFC 3339, UTC), `level`, `logger`, `message`, `exception` when there is one.

    Each text names no probe mirror and is redacted before it is encoded.
    """

    def __init__(self, redactor: Redactor) -> None:
        """Redact with `redactor`."""
        super().__init__()
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        """The redacted JSON line (no newline)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line: dict[str, Any] = {
            "time": stamp,
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact_log_text(self._redactor, record.getMessage()),
        }
        if record.exc_info:
            line["exception"] = redact_log_text(self._redactor, self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def configure(level: int, kind: str, redactor: Redactor) -> None:
    """Log to stderr at `level`, as `kind` (`text` or `json`) lines, redacted.

    Like `logging.basicConfig`, it does nothing when logging is already set up (a program embedding the command).
    """
    import sys

    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(redactor) if kind == "json" else TextFormatter(redactor))
    root.addHandler(handler)
    root.setLevel(level)
