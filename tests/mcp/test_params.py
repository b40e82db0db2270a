"""Request params (`_params`): every method's params are closed and strictly typed; a violation is `-32602`.

Only the code is asserted, and that the request changed nothing: the texts are the formatter's, except the ones
the MCP contract pins (MRTR continuations mention `input_required`, an unknown tool is "Unknown tool: <name>").
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from beam_mcp.errors import INVALID_PARAMS

from .support import INIT, LEGACY, harness, modern_meta

pytestmark = pytest.mark.anyio


def error_code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    code: int = response["error"]["code"]
    return code


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        [],
        {**INIT, "protocolVersion": 20251125},
        {**INIT, "capabilities": []},
        {"protocolVersion": LEGACY, "capabilities": {}},
        {**INIT, "clientInfo": {"name": "c"}},
        {**INIT, "clientInfo": {"name": "c", "version": 1}},
        {**INIT, "extra": True},
        {**INIT, "_meta": 3},
    ],
)
async def test_invalid_initialize_is_rejected_without_changing_state(params: Any) -> None:
    async with harness() as h:
        assert error_code(await h.request("initialize", params)) == INVALID_PARAMS
        assert "result" in await h.request("initialize", INIT)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {"cursor": "x"}),
        ("tools/list", {"_meta": 3}),
        ("tools/list", {"extra": 1}),
        ("tools/list", [1]),
        ("logging/setLevel", {"level": "loud"}),
        ("logging/setLevel", {"level": 3}),
        ("logging/setLevel", {}),
        ("logging/setLevel", {"level": "info", "x": 1}),
        ("ping", {"x": 1}),
        ("resources/list", {"extra": 1}),
        ("resources/read", {}),
        ("resources/read", {"uri": 7}),
        ("resources/read", {"uri": "lsp-diagnostics:///a.lean", "extra": 1}),
        ("resources/subscribe", {}),
        ("resources/subscribe", {"uri": "lsp-diagnostics:///a.lean", "x": 1}),
        ("resources/unsubscribe", {}),
        ("resources/unsubscribe", {"uri": "lsp-diagnostics:///a.lean", "x": 1}),
        ("tools/call", {}),
        ("tools/call", {"name": 3}),
        ("tools/call", {"name": "beam_version", "arguments": []}),
        ("tools/call", {"name": "beam_version", "extra": 1}),
    ],
)
async def test_legacy_params_violations_are_invalid_params(method: str, params: Any) -> None:
    async with harness() as h:
        await h.initialize()
        assert error_code(await h.request(method, params)) == INVALID_PARAMS
        assert (await h.request("ping"))["result"] == {}


@pytest.mark.parametrize(
    ("method", "fields"),
    [
        ("server/discover", {"x": 1}),
        ("tools/list", {"cursor": "x"}),
        ("tools/call", {"name": "beam_version", "arguments": "{}"}),
        ("resources/list", {"cursor": 1}),
        ("resources/templates/list", {"cursor": "x"}),
        ("resources/read", {"uri": ["lsp-diagnostics:///a.lean"]}),
        ("subscriptions/listen", {}),
        ("subscriptions/listen", {"notifications": []}),
        ("subscriptions/listen", {"notifications": {}, "x": 1}),
        ("subscriptions/listen", {"notifications": {"toolsListChanged": "yes"}}),
        ("subscriptions/listen", {"notifications": {"resourceSubscriptions": "lsp-diagnostics:///a.lean"}}),
        ("subscriptions/listen", {"notifications": {"resourceSubscriptions": [1]}}),
    ],
)
async def test_modern_params_violations_are_invalid_params(method: str, fields: dict[str, Any]) -> None:
    async with harness() as h:
        response = await h.request(method, {**fields, "_meta": modern_meta()})
        assert error_code(response) == INVALID_PARAMS
        assert "resultType" not in response and "_meta" not in response  # JSON-RPC errors carry no envelope
        assert await h.quiet() == []  # no acknowledgement, no stream


@pytest.mark.parametrize(
    ("params", "pinned"),
    [
        ({"name": "beam_version", "requestState": "s"}, "input_required"),
        ({"name": "beam_version", "inputResponses": {}}, "input_required"),
        ({"name": "lean_request_at"}, "Unknown tool: lean_request_at"),
        ({"name": "$/lean/runAt"}, "Unknown tool: $/lean/runAt"),
        ({"name": "beam_feedback"}, "Unknown tool: beam_feedback"),
    ],
)
async def test_tools_call_continuations_and_unknown_tools_are_invalid_params(
    params: dict[str, Any], pinned: str
) -> None:
    async with harness() as h:
        response = await h.request("tools/call", {**params, "_meta": modern_meta()})
        assert error_code(response) == INVALID_PARAMS
        assert pinned in response["error"]["message"]


@pytest.mark.parametrize("field", ["requestState", "inputResponses"])
async def test_resources_read_rejects_continuations(field: str) -> None:
    async with harness() as h:
        params = {"uri": "lsp-diagnostics:///a.lean", field: {}, "_meta": modern_meta()}
        response = await h.request("resources/read", params)
        assert error_code(response) == INVALID_PARAMS and "input_required" in response["error"]["message"]


@pytest.mark.parametrize("token", [True, None, {"a": 1}, [1]])
async def test_progress_tokens_must_be_strings_or_numbers(token: Any) -> None:
    async with harness() as h:
        response = await h.request("tools/call", {"name": "beam_version", "_meta": modern_meta(progressToken=token)})
        assert error_code(response) == INVALID_PARAMS


@pytest.mark.parametrize("token", ["t", 0, -3, 1.5, "1.50"])
async def test_valid_progress_tokens_are_echoed_verbatim(token: Any, fake_project: Any) -> None:
    root = fake_project("proj", {"A.lean": "def a := 1\n"})
    async with harness() as h:
        arguments = {"workspace": {"root": str(root)}, "path": "A.lean"}
        _, notes = await h.call("lean_update", arguments, progressToken=token)
        assert [n["params"]["progressToken"] for n in notes] == [token]


async def test_a_raw_number_token_keeps_its_spelling() -> None:
    async with harness() as h:
        meta = json.dumps(modern_meta())[1:-1].encode()
        line = (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lean_drop_workspace",'
            b'"arguments":{"workspace":{"root":"/nonexistent/x"}},"_meta":{"progressToken":1.50,' + meta + b"}}}"
        )
        await h.send(line)
        raw = await h.out.receive()
        assert b'"progressToken":1.50' in raw
