"""lean-beam-mcp's own stderr lines (`beam_mcp._logs`): text and JSON, naming no probe mirror, redacted."""

from __future__ import annotations

import json
import logging
import sys

from beam_lsp import Redactor
from beam_mcp._logs import JsonFormatter, TextFormatter

SECRET = "s3cr3t-token-value"
MIRROR = "file:///w/demo/Demo/Proofs_beamProbe1.lean"
SAID = f"probe of {MIRROR} (Demo.Proofs_beamProbe2.x) failed with token {SECRET}"


def record(exc_info: bool = False) -> logging.LogRecord:
    info = None
    if exc_info:
        try:
            raise RuntimeError(f"in {MIRROR}: {SECRET}")
        except RuntimeError:
            info = sys.exc_info()
    return logging.LogRecord("beam_mcp", logging.WARNING, __file__, 1, "%s", (SAID,), info)


def test_a_text_line_names_the_mirrors_source_and_hides_the_secret() -> None:
    line = TextFormatter(Redactor({"API_TOKEN": SECRET})).format(record(exc_info=True))
    assert "_beamProbe" not in line and SECRET not in line
    assert "file:///w/demo/Demo/Proofs.lean (Demo.Proofs.x)" in line
    assert "[redacted:API_TOKEN]" in line  # the line did reach the secret


def test_a_json_line_names_the_mirrors_source_in_its_message_and_exception_and_hides_the_secret() -> None:
    line = JsonFormatter(Redactor({"API_TOKEN": SECRET})).format(record(exc_info=True))
    fields = json.loads(line)
    assert "_beamProbe" not in line and SECRET not in line
    assert (
        fields["message"]
        == "probe of file:///w/demo/Demo/Proofs.lean (Demo.Proofs.x) failed with token [redacted:API_TOKEN]"
    )
    assert "RuntimeError: in file:///w/demo/Demo/Proofs.lean: [redacted:API_TOKEN]" in fields["exception"]
