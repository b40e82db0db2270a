"""beam_lsp._handshake: what the client tells Lean it is, and the default answers to Lean's own requests."""

from __future__ import annotations

import pytest

from beam_lsp import DEFAULT_SERVER_REQUESTS, JsonValue
from beam_lsp._handshake import default_handlers, initialize_params

pytestmark = pytest.mark.anyio


async def test_lean_requests_to_the_client_get_neutral_answers_and_edits_are_refused() -> None:
    handlers = default_handlers()
    assert await handlers["workspace/configuration"]({"items": [{}, {}]}) == [None, None]
    assert await handlers["workspace/configuration"]("junk") == []
    refused = await handlers["workspace/applyEdit"]({"edit": {}})
    assert isinstance(refused, dict) and refused["applied"] is False
    assert await handlers["client/registerCapability"](None) is None
    assert set(DEFAULT_SERVER_REQUESTS) == set(handlers)


def test_every_call_gives_a_new_table_the_caller_may_change() -> None:
    default_handlers().clear()
    assert "workspace/applyEdit" in default_handlers()


def test_the_client_asks_lean_for_incremental_diagnostics() -> None:
    params = initialize_params("file:///p", {"editDelay": 0})
    assert params["capabilities"]["lean"] == {"incrementalDiagnosticSupport": True}
    assert params["rootUri"] == "file:///p" and params["initializationOptions"] == {"editDelay": 0}
    assert "initializationOptions" not in initialize_params("file:///p", None)


def test_a_callers_capabilities_are_merged_into_the_clients_own() -> None:
    assert "applyEdit" not in initialize_params("file:///p", None)["capabilities"]["workspace"]
    extra: dict[str, JsonValue] = {
        "workspace": {"applyEdit": True},
        "lean": {"silentDiagnosticSupport": True},
        "x": [1],
    }
    caps = initialize_params("file:///p", None, extra)["capabilities"]
    assert caps["workspace"] == {"configuration": True, "applyEdit": True}
    assert caps["lean"] == {"incrementalDiagnosticSupport": True, "silentDiagnosticSupport": True}
    assert caps["x"] == [1] and caps["textDocument"]["hover"] == {"contentFormat": ["markdown", "plaintext"]}
