"""The public API of beam-lsp beyond what `tests/test_layout.py` checks of every package: old homes, cheap imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

import beam_lsp


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = beam_lsp.Nope


def test_names_that_existed_before_the_split_still_import_from_the_client_module() -> None:
    from beam_lsp import client

    for name in ("LeanClient", "SyncResult", "DiagnosticsEvent", "ProgressEvent", "ServerExitedEvent", "ClientStats"):
        assert getattr(client, name) is getattr(beam_lsp, name)


def test_importing_the_package_the_redactor_and_the_parsers_does_not_load_the_client() -> None:
    code = (
        "import sys, beam_lsp, beam_lsp.redaction, beam_lsp.strict_json, beam_lsp.project; "
        "print(sorted(m for m in ('beam_lsp.client', 'lsprotocol', 'anyio') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
