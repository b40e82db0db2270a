"""The public API of beam-lsp is exactly `beam_lsp.__all__`, and importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest

import beam_lsp


def test_every_public_name_resolves() -> None:
    for name in beam_lsp.__all__:
        assert getattr(beam_lsp, name) is not None, name


def test_all_has_no_duplicates() -> None:
    assert len(beam_lsp.__all__) == len(set(beam_lsp.__all__))


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


def test_the_client_and_the_broker_load_lsprotocol_only_when_an_answer_needs_it() -> None:
    # lsprotocol is about half of the Lean stack's import time; the MCP server loads it after its broker opened.
    code = (
        "import sys, beam_lsp.client, beam_broker.runtime, beam_broker.broker; "
        "print(sorted(m for m in ('lsprotocol', 'cattrs') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
