"""beam_lsp._handshake: what the client tells Lean it is, and how it answers Lean's own requests."""

from __future__ import annotations

import pytest

from beam_lsp import _handshake
from beam_lsp._handshake import initialize_params

pytestmark = pytest.mark.anyio


async def test_lean_requests_to_the_client_get_neutral_answers() -> None:
    assert await _handshake._configuration({"items": [{}, {}]}) == [None, None]
    assert await _handshake._configuration("junk") == []
    assert (await _handshake._apply_edit({}))["applied"] is False
    await _handshake._acknowledge(None)  # answered with null


def test_the_client_asks_lean_for_incremental_diagnostics() -> None:
    params = initialize_params("file:///p", {"editDelay": 0})
    assert params["capabilities"]["lean"] == {"incrementalDiagnosticSupport": True}
    assert params["rootUri"] == "file:///p" and params["initializationOptions"] == {"editDelay": 0}
    assert "initializationOptions" not in initialize_params("file:///p", None)
