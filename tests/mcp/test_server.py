"""The server (`server`): the protocol-family state machine, the legacy lifecycle and each family's method table.

Texts asserted here are the ones the MCP contract pins (`/work/shared/spec/beam-upstream.md` §2.3-2.4).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from beam_mcp._jsonrpc import classify, loads
from beam_mcp.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from .support import INIT, LEGACY, MODERN, SERVER_INFO_KEY, Sink, harness, modern_meta

pytestmark = pytest.mark.anyio

CAPABILITIES = {
    "logging": {},
    "resources": {"subscribe": True, "listChanged": False},
    "tools": {"listChanged": False},
}
MISSING_META = (
    "modern MCP requests require _meta.io.modelcontextprotocol/protocolVersion and "
    "_meta.io.modelcontextprotocol/clientCapabilities"
)


def error_code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    code: int = response["error"]["code"]
    return code


# ---- legacy lifecycle ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("tools/list", None, "initialize must complete before MCP operation requests"),
        ("tools/call", {"name": "beam_version"}, "initialize must complete before MCP operation requests"),
        ("ping", None, "initialize must complete before MCP operation requests"),
        ("logging/setLevel", {"level": "info"}, "initialize must complete before MCP logging requests"),
        ("resources/list", None, "initialize must complete before MCP operation requests"),
        (
            "resources/read",
            {"uri": "lsp-diagnostics:///a.lean"},
            "initialize must complete before MCP operation requests",
        ),
        (
            "resources/subscribe",
            {"uri": "lsp-diagnostics:///a.lean"},
            "initialize must complete before MCP operation requests",
        ),
        ("prompts/list", None, "initialize must be the first MCP operation"),
    ],
)
async def test_legacy_requests_before_initialize_are_invalid(method: str, params: Any, message: str) -> None:
    async with harness() as h:
        response = await h.request(method, params)
        assert response["error"] == {"code": INVALID_REQUEST, "message": message}


async def test_legacy_lifecycle_initialize_then_initialized_then_operations() -> None:
    async with harness() as h:
        init = await h.request("initialize", {**INIT, "protocolVersion": "2025-06-18"})
        assert init["result"] == {
            "protocolVersion": LEGACY,
            "capabilities": CAPABILITIES,
            "serverInfo": {"name": "lean-beam-mcp", "version": init["result"]["serverInfo"]["version"]},
        }
        waiting = await h.request("tools/list")
        assert waiting["error"] == {
            "code": INVALID_REQUEST,
            "message": "notifications/initialized is required before MCP operation requests",
        }
        assert (await h.request("logging/setLevel", {"level": "info"}))["result"] == {}
        # The lifecycle allows pings between initialize and initialized (over HTTP the two may cross).
        assert (await h.request("ping"))["result"] == {}
        await h.notify("notifications/initialized", {"bogus": 1})  # malformed: ignored, not ready
        assert error_code(await h.request("tools/list")) == INVALID_REQUEST
        await h.notify("notifications/initialized", {"_meta": {}})
        assert (await h.request("ping"))["result"] == {}
        listed = await h.request("tools/list")
        assert "resultType" not in listed["result"] and "ttlMs" not in listed["result"]
        assert listed["result"]["tools"][0]["name"] == "beam_version"
        again = await h.request("initialize", INIT)
        assert again["error"] == {"code": INVALID_REQUEST, "message": "initialize has already completed"}
        unknown = await h.request("prompts/list")
        assert unknown["error"] == {"code": METHOD_NOT_FOUND, "message": "method not found: prompts/list"}
        modern_only = await h.request("subscriptions/listen", {"notifications": {}})
        assert modern_only["error"] == {"code": METHOD_NOT_FOUND, "message": "method not found: subscriptions/listen"}


async def test_initialized_before_initialize_is_ignored() -> None:
    async with harness() as h:
        await h.notify("notifications/initialized")
        assert (await h.request("initialize", INIT))["result"]["protocolVersion"] == LEGACY
        waiting = await h.request("tools/list")
        assert waiting["error"]["message"] == "notifications/initialized is required before MCP operation requests"


async def test_legacy_family_rejects_modern_traffic() -> None:
    async with harness() as h:
        await h.initialize()
        for method in ("server/discover", "tools/list", "tools/call"):
            response = await h.request(method, {"name": "beam_version", "_meta": modern_meta()})
            assert response["error"] == {
                "code": INVALID_REQUEST,
                "message": "MCP transport already selected the legacy protocol family; modern traffic is not allowed",
            }


async def test_a_legacy_tool_result_carries_no_modern_envelope() -> None:
    async with harness() as h:
        await h.initialize()
        response = await h.request("tools/call", {"name": "beam_version", "arguments": {}})
        assert set(response["result"]) == {"content", "structuredContent", "isError"}


# ---- modern ----------------------------------------------------------------------------------------------------
async def test_discover_is_public_cacheable_and_does_not_select_a_family() -> None:
    async with harness() as h:
        response = await h.request("server/discover", {"_meta": modern_meta()})
        result = response["result"]
        assert result["supportedVersions"] == [MODERN]
        assert result["capabilities"] == CAPABILITIES
        assert (
            result["instructions"]
            == "Use an explicit local workspace descriptor on every workspace-bound Beam tool call."
        )
        assert (result["ttlMs"], result["cacheScope"], result["resultType"]) == (3600000, "public", "complete")
        assert result["_meta"][SERVER_INFO_KEY]["name"] == "lean-beam-mcp"
        await h.initialize()  # a legacy client may still follow discovery
        assert "result" in await h.request("tools/list")


async def test_the_first_modern_operation_selects_the_modern_family() -> None:
    async with harness() as h:
        listed = await h.request("tools/list", {"_meta": modern_meta()})
        result = listed["result"]
        assert (result["ttlMs"], result["cacheScope"], result["resultType"]) == (3600000, "public", "complete")
        assert result["_meta"][SERVER_INFO_KEY]["name"] == "lean-beam-mcp"
        bare = await h.request("tools/list")
        assert bare["error"] == {"code": INVALID_PARAMS, "message": MISSING_META}
        legacy = await h.request("initialize", INIT)
        assert legacy["error"] == {
            "code": INVALID_REQUEST,
            "message": "MCP transport already selected the modern protocol family; legacy traffic is not allowed",
        }


@pytest.mark.parametrize(
    ("method", "fields"),
    [
        ("tools/call", {"name": "beam_version"}),
        ("resources/list", {}),
        ("resources/read", {"uri": "lsp-diagnostics:///a.lean"}),
        ("subscriptions/listen", {"notifications": {}}),
    ],
)
async def test_every_modern_operation_selects_the_modern_family(method: str, fields: dict[str, Any]) -> None:
    async with harness() as h:
        assert "result" in await h.request(method, {**fields, "_meta": modern_meta()})
        assert error_code(await h.request("initialize", INIT)) == INVALID_REQUEST


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "prompts/list"]
)
async def test_modern_initialize_ping_set_level_and_unknown_methods_are_not_found(method: str) -> None:
    async with harness() as h:
        assert error_code(await h.request(method, {"_meta": modern_meta(), "level": "info"})) == METHOD_NOT_FOUND
        # none of them selected the family: legacy initialize still works
        assert "result" in await h.request("initialize", INIT)


@pytest.mark.parametrize(
    "meta",
    [
        {"io.modelcontextprotocol/protocolVersion": MODERN},
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {**modern_meta(), "io.modelcontextprotocol/protocolVersion": 2026},
        {**modern_meta(), "io.modelcontextprotocol/clientCapabilities": []},
        {**modern_meta(), "io.modelcontextprotocol/clientInfo": {"name": "x"}},
        {**modern_meta(), "io.modelcontextprotocol/logLevel": "loud"},
        {"io.modelcontextprotocol/logLevel": "debug"},
    ],
)
async def test_malformed_modern_metadata_is_invalid_params(meta: dict[str, Any]) -> None:
    async with harness() as h:
        assert error_code(await h.request("tools/list", {"_meta": meta})) == INVALID_PARAMS
        assert error_code(await h.request("server/discover", {"_meta": meta})) == INVALID_PARAMS
        assert error_code(await h.request("server/discover")) == INVALID_PARAMS
        assert error_code(await h.request("server/discover", {"_meta": modern_meta(), "x": 1})) == INVALID_PARAMS
        assert "result" in await h.request("initialize", INIT)  # nothing selected the modern family


async def test_unsupported_modern_versions_name_the_supported_ones() -> None:
    async with harness() as h:
        meta = {**modern_meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
        response = await h.request("tools/list", {"_meta": meta})
        assert response["error"] == {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": "Unsupported protocol version",
            "data": {"supported": [MODERN], "requested": "2099-01-01"},
        }


async def test_modern_results_and_tool_errors_carry_the_envelope_but_json_rpc_errors_do_not() -> None:
    async with harness() as h:
        ok, _ = await h.call("beam_version", {})
        assert ok["result"]["resultType"] == "complete" and SERVER_INFO_KEY in ok["result"]["_meta"]
        bad, _ = await h.call("beam_version", {"x": 1})
        assert bad["result"]["isError"] is True and bad["result"]["resultType"] == "complete"
        assert SERVER_INFO_KEY in bad["result"]["_meta"]
        err = await h.request("tools/call", {"name": "nope", "_meta": modern_meta()})
        assert set(err) == {"jsonrpc", "id", "error"}


# ---- channels ---------------------------------------------------------------------------------------------------
async def test_each_channel_has_its_own_family() -> None:
    async with harness() as h:
        await h.initialize()  # the stdio channel is legacy now
        channel, sink = h.server.channel(), Sink()
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
        await h.server.handle(channel, classify(loads(json.dumps(request))), sink)
        assert sink.response is not None and "tools" in sink.response["result"]
        assert channel.family == "modern"
        fixed, sink = h.server.channel(family="modern"), Sink()
        bare = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        await h.server.handle(fixed, classify(loads(json.dumps(bare))), sink)
        assert sink.response is not None and sink.response["error"]["code"] == INVALID_PARAMS
