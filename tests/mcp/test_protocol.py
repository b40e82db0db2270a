"""Protocol families, lifecycle, envelopes and errors, driven in-process line by line."""

from __future__ import annotations

from typing import Any

import pytest

from beam_mcp.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from .support import LEGACY, MODERN, Harness, harness, modern_meta

pytestmark = pytest.mark.anyio

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
INIT = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
CAPABILITIES = {
    "logging": {},
    "resources": {"subscribe": True, "listChanged": False},
    "tools": {"listChanged": False},
}


def error_code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    code: int = response["error"]["code"]
    return code


# ---- envelopes --------------------------------------------------------------------------------------------
async def test_parse_errors_answer_with_a_null_id_and_the_reader_keeps_going() -> None:
    async with harness() as h:
        for line in (b"\n", b"{oops\n", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}\n'):
            await h.send(line)
            response = await h.recv()
            assert response["id"] is None and response["error"]["code"] == PARSE_ERROR
        discovered = await h.request("server/discover", {"_meta": modern_meta()})
        assert "result" in discovered


async def test_client_responses_are_rejected_echoing_their_id() -> None:
    async with harness() as h:
        await h.send({"jsonrpc": "2.0", "id": 9, "result": {}})
        response = await h.recv()
        assert response == {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {"code": INVALID_REQUEST, "message": "client message must be a JSON-RPC request or notification"},
        }


async def test_undeclared_envelope_members_are_rejected_for_requests_and_notifications() -> None:
    async with harness() as h:
        await h.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT, "extra": 1})
        response = await h.recv()
        assert response["id"] == 1 and response["error"]["code"] == INVALID_REQUEST
        assert "extra" in response["error"]["message"]
        await h.send({"jsonrpc": "2.0", "method": "notifications/initialized", "token": 1})
        response = await h.recv()
        assert response["id"] is None and response["error"]["code"] == INVALID_REQUEST


async def test_string_and_integer_ids_are_distinct_and_echoed_as_sent() -> None:
    async with harness() as h:
        await h.send(b'{"jsonrpc":"2.0","id":7.0,"method":"server/discover","params":{"_meta":'
                     b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
                     b'"io.modelcontextprotocol/clientCapabilities":{}}}}\n')  # fmt: skip
        [raw] = [await h.out.receive()]
        assert raw.startswith(b'{"jsonrpc":"2.0","id":7.0,"result"')
        a = await h.request("server/discover", {"_meta": modern_meta()}, rid="7")
        b = await h.request("server/discover", {"_meta": modern_meta()}, rid=7)
        assert a["id"] == "7" and b["id"] == 7


async def test_a_request_reusing_an_active_id_is_ignored_and_the_id_is_reusable_after_the_answer() -> None:
    async with harness() as h:
        release = anyio_event()

        async def slow(arguments: Any, ctx: Any) -> dict[str, Any]:
            await release.wait()
            return {"slow": True}

        h.broker.handlers["update"] = slow
        root = project(h)
        await h.send(call_message(5, "lean_update", {"workspace": {"root": root}, "path": "A.lean"}))
        await h.send({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": modern_meta()}})
        await h.send({"jsonrpc": "2.0", "id": 5, "bad": True})  # malformed, same id: ignored too
        release.set()
        response, _ = await h.until(5)
        assert response["result"]["structuredContent"]["slow"] is True
        assert h.raw_available() == []
        again = await h.request("tools/list", {"_meta": modern_meta()}, rid=5)
        assert "tools" in again["result"]


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


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {**INIT, "protocolVersion": 20251125},
        {**INIT, "capabilities": []},
        {"protocolVersion": LEGACY, "capabilities": {}},
        {**INIT, "clientInfo": {"name": "c"}},
        {**INIT, "extra": True},
    ],
)
async def test_invalid_initialize_is_rejected_without_changing_state(params: Any) -> None:
    async with harness() as h:
        assert error_code(await h.request("initialize", params)) == INVALID_PARAMS
        assert "result" in await h.request("initialize", INIT)


async def test_legacy_lifecycle_initialize_then_initialized_then_operations() -> None:
    async with harness() as h:
        init = await h.request("initialize", {**INIT, "protocolVersion": "2025-06-18"})
        assert init["result"] == {
            "protocolVersion": LEGACY,
            "capabilities": CAPABILITIES,
            "serverInfo": {"name": "lean-beam-mcp", "version": init["result"]["serverInfo"]["version"]},
        }
        waiting = await h.request("tools/list")
        assert waiting["error"]["message"] == "notifications/initialized is required before MCP operation requests"
        assert (await h.request("logging/setLevel", {"level": "info"}))["result"] == {}
        await h.notify("notifications/initialized", {"bogus": 1})  # malformed: ignored, not ready
        assert error_code(await h.request("ping")) == INVALID_REQUEST
        await h.notify("notifications/initialized")
        assert (await h.request("ping"))["result"] == {}
        listed = await h.request("tools/list")
        assert "resultType" not in listed["result"] and "ttlMs" not in listed["result"]
        assert listed["result"]["tools"][0]["name"] == "beam_version"
        assert error_code(await h.request("initialize", INIT)) == INVALID_REQUEST
        assert error_code(await h.request("tools/list", {"cursor": "x"})) == INVALID_PARAMS
        assert error_code(await h.request("tools/list", {"_meta": 3})) == INVALID_PARAMS
        assert error_code(await h.request("logging/setLevel", {"level": "loud"})) == INVALID_PARAMS
        assert error_code(await h.request("ping", {"x": 1})) == INVALID_PARAMS
        unknown = await h.request("prompts/list")
        assert unknown["error"] == {"code": METHOD_NOT_FOUND, "message": "method not found: prompts/list"}
        modern_only = await h.request("subscriptions/listen", {"notifications": {}})
        assert modern_only["error"] == {"code": METHOD_NOT_FOUND, "message": "method not found: subscriptions/listen"}


async def test_legacy_family_rejects_modern_traffic() -> None:
    async with harness() as h:
        await h.initialize()
        for method in ("server/discover", "tools/list"):
            response = await h.request(method, {"_meta": modern_meta()})
            assert response["error"]["code"] == INVALID_REQUEST
            assert "already selected the legacy protocol family" in response["error"]["message"]


# ---- modern --------------------------------------------------------------------------------------------------
async def test_discover_is_public_cacheable_and_does_not_select_a_family() -> None:
    async with harness() as h:
        response = await h.request("server/discover", {"_meta": modern_meta()})
        result = response["result"]
        assert result["supportedVersions"] == [MODERN]
        assert result["capabilities"] == CAPABILITIES
        assert result["instructions"].startswith("Use an explicit local workspace descriptor")
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
        assert bare["error"]["code"] == INVALID_PARAMS
        assert "require _meta.io.modelcontextprotocol/protocolVersion" in bare["error"]["message"]
        legacy = await h.request("initialize", INIT)
        assert legacy["error"]["code"] == INVALID_REQUEST
        assert "already selected the modern protocol family" in legacy["error"]["message"]


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


async def test_unsupported_modern_versions_name_the_supported_ones() -> None:
    async with harness() as h:
        meta = {**modern_meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
        response = await h.request("tools/list", {"_meta": meta})
        assert response["error"] == {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": "Unsupported protocol version",
            "data": {"supported": [MODERN], "requested": "2099-01-01"},
        }


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"name": "beam_version", "requestState": "s"}, "input_required"),
        ({"name": "beam_version", "inputResponses": {}}, "input_required"),
        ({"name": "lean_request_at"}, "Unknown tool: lean_request_at"),
        ({"name": "$/lean/runAt"}, "Unknown tool"),
        ({"name": "beam_feedback"}, "Unknown tool"),
        ({"name": "lean_run_at"}, "Unknown tool"),  # not implemented by this broker: never listed nor callable
        ({"name": 3}, "tool name"),
        ({"name": "beam_version", "arguments": []}, "arguments must be an object"),
        ({"name": "beam_version", "extra": 1}, "undeclared"),
    ],
)
async def test_tools_call_envelope_errors_are_json_rpc_errors(params: dict[str, Any], fragment: str) -> None:
    async with harness() as h:
        response = await h.request("tools/call", {**params, "_meta": modern_meta()})
        assert response["error"]["code"] == INVALID_PARAMS
        assert fragment in response["error"]["message"]


@pytest.mark.parametrize("token", [True, None, {"a": 1}, [1]])
async def test_progress_tokens_must_be_strings_or_numbers(token: Any) -> None:
    async with harness() as h:
        response = await h.request("tools/call", {"name": "beam_version", "_meta": modern_meta(progressToken=token)})
        assert response["error"]["code"] == INVALID_PARAMS


async def test_modern_results_and_tool_errors_carry_the_envelope_but_json_rpc_errors_do_not() -> None:
    async with harness() as h:
        ok, _ = await h.call("beam_version", {})
        assert ok["result"]["resultType"] == "complete" and SERVER_INFO_KEY in ok["result"]["_meta"]
        bad, _ = await h.call("beam_version", {"x": 1})
        assert bad["result"]["isError"] is True and bad["result"]["resultType"] == "complete"
        err = await h.request("tools/call", {"name": "nope", "_meta": modern_meta()})
        assert set(err) == {"jsonrpc", "id", "error"}


async def test_unknown_notifications_are_ignored_and_malformed_cancels_too() -> None:
    async with harness() as h:
        await h.notify("notifications/whatever", {"x": 1})
        await h.notify("notifications/cancelled", {"requestId": 1, "extra": 2})
        await h.notify("notifications/cancelled", "nope")
        assert h.raw_available() == []


async def test_requests_after_shutdown_began_are_refused() -> None:
    async with harness() as h:
        await h.server.shutdown()
        # The writer is closed: nothing can be answered, and nothing crashes.
        await h.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta()}})


# ---- helpers -------------------------------------------------------------------------------------------------
def anyio_event() -> Any:
    import anyio

    return anyio.Event()


def project(h: Harness) -> str:
    import tempfile
    from pathlib import Path

    from .support import make_project

    return str(make_project(Path(tempfile.mkdtemp()) / "proj"))


def call_message(rid: Any, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": modern_meta(**meta)},
    }


async def test_an_invalid_message_never_releases_the_id_of_an_active_request() -> None:
    import anyio

    async with harness() as h:
        release = anyio.Event()

        async def slow(arguments: Any, ctx: Any) -> dict[str, Any]:
            await release.wait()
            return {}

        h.broker.handlers["update"] = slow
        root = project(h)
        await h.send({"jsonrpc": "2.0", "id": 8, "extra": 1, "method": "x"})  # invalid, id 8 echoed
        await h.send(call_message(8, "lean_update", {"workspace": {"root": root}, "path": "A.lean"}))
        invalid = await h.recv()
        assert invalid["id"] == 8 and "error" in invalid
        await anyio.wait_all_tasks_blocked()
        await h.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"_meta": modern_meta()}})
        release.set()
        response, others = await h.until(8)
        assert "structuredContent" in response["result"] and others == []
        assert h.raw_available() == []
