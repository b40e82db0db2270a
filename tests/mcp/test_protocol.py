"""Protocol constants and per-request metadata (`_protocol`): log levels, modern metadata, the modern envelope."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from beam_mcp import _protocol
from beam_mcp._params import SetLevelParams
from beam_mcp.errors import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, JsonRpcError

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"x": {}},
}


@pytest.mark.parametrize(
    ("minimum", "level", "passes"),
    [
        (None, "emergency", False),
        ("debug", "debug", True),
        ("info", "debug", False),
        ("notice", "notice", True),
        ("notice", "info", False),
        ("warning", "error", True),
        ("emergency", "alert", False),
        ("emergency", "emergency", True),
    ],
)
def test_an_event_passes_when_it_is_at_least_as_severe_as_the_minimum(
    minimum: str | None, level: str, passes: bool
) -> None:
    assert _protocol.admits(minimum, level) is passes


@pytest.mark.parametrize("value", ["loud", "DEBUG", 3, None])
def test_only_the_eight_rfc_5424_levels_are_levels(value: Any) -> None:
    assert [_protocol.check_level(level) for level in _protocol.LOG_LEVELS] == list(_protocol.LOG_LEVELS)
    assert _protocol.LOG_LEVELS == typing.get_args(SetLevelParams.model_fields["level"].annotation)  # one list
    with pytest.raises(JsonRpcError) as caught:
        _protocol.check_level(value)
    assert caught.value.code == INVALID_PARAMS


@pytest.mark.parametrize(
    ("params", "modern"),
    [
        ({"_meta": {"io.modelcontextprotocol/logLevel": "debug"}}, True),
        ({"_meta": {"io.modelcontextprotocol/clientInfo": {}}}, True),
        ({"_meta": {"progressToken": 1}}, False),
        ({"_meta": "x"}, False),
        ({}, False),
        ([], False),
        (None, False),
    ],
)
def test_any_reserved_metadata_key_is_modern_evidence(params: Any, modern: bool) -> None:
    assert _protocol.has_modern_meta(params) is modern


def test_modern_metadata_decodes_to_a_request_context() -> None:
    ctx = _protocol.decode_modern({"_meta": META})
    assert (ctx.protocol_version, ctx.client_capabilities, ctx.client_info, ctx.log_level) == (
        "2026-07-28",
        {"x": {}},
        None,
        None,
    )
    info = {"name": "c", "version": "1", "title": "C"}
    ctx = _protocol.decode_modern(
        {"_meta": {**META, "io.modelcontextprotocol/clientInfo": info, "io.modelcontextprotocol/logLevel": "info"}}
    )
    assert (ctx.client_info, ctx.log_level) == (info, "info")


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"_meta": []},
        {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
        {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": 2026}},
        {"_meta": {**META, "io.modelcontextprotocol/clientCapabilities": []}},
        {"_meta": {**META, "io.modelcontextprotocol/clientInfo": {"name": "c"}}},
        {"_meta": {**META, "io.modelcontextprotocol/logLevel": "loud"}},
    ],
)
def test_malformed_modern_metadata_is_invalid_params(params: Any) -> None:
    with pytest.raises(JsonRpcError) as caught:
        _protocol.decode_modern(params)
    assert caught.value.code == INVALID_PARAMS


def test_an_unsupported_revision_names_the_supported_ones() -> None:
    with pytest.raises(JsonRpcError) as caught:
        _protocol.decode_modern({"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}})
    assert caught.value.wire() == {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": "Unsupported protocol version",
        "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"},
    }


def test_the_modern_envelope_marks_the_result_complete_and_keeps_other_meta() -> None:
    result = _protocol.modern_envelope({"tools": [], "_meta": {"io.modelcontextprotocol/subscriptionId": "l"}})
    assert result == {
        "tools": [],
        "resultType": "complete",
        "_meta": {
            "io.modelcontextprotocol/subscriptionId": "l",
            "io.modelcontextprotocol/serverInfo": _protocol.server_info(),
        },
    }
    assert _protocol.server_info()["name"] == _protocol.SERVER_NAME == "lean-beam-mcp"


def test_both_families_advertise_the_same_capabilities() -> None:
    assert _protocol.capabilities() == {
        "logging": {},
        "resources": {"subscribe": True, "listChanged": False},
        "tools": {"listChanged": False},
    }
