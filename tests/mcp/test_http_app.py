"""The Streamable HTTP endpoint (`beam_mcp._http.app`): its rules, both MCP families, answers, sessions, streams.

The real server and broker run over the fake Lean server. Complete answers are checked in-process (httpx's ASGI
transport); streaming, disconnects and leases on a loopback server (`served`); deadlines, failed writes and
exactly timed departures by driving the ASGI app with the test's own `receive` and `send` (`Driver`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from beam_mcp import HttpConfig, McpServer
from beam_mcp._http.app import Endpoint, build_app
from beam_mcp._resources import MAX_LISTENS, path_to_uri
from beam_mcp.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
)

from .http_support import (
    ACCEPT,
    HOLD,
    INIT,
    LEGACY,
    MODERN,
    POST_HEADERS,
    SUB_ID,
    TIMEOUT,
    Client,
    app_client,
    call,
    error_code,
    events,
    final,
    in_process,
    modern_headers,
    modern_meta,
    project,
    request,
    served,
    server_config,
    structured,
)

pytestmark = pytest.mark.anyio

DISCOVER = request(1, "server/discover")
BASE = {
    "content-type": "application/json",
    "accept": ACCEPT,
    "mcp-protocol-version": MODERN,
    "mcp-method": "server/discover",
}


def edit(headers: dict[str, str], changes: dict[str, str | None]) -> dict[str, str]:
    """`headers` with each named header replaced (None removes it)."""
    out = {k: v for k, v in headers.items() if k not in changes}
    return out | {k: v for k, v in changes.items() if v is not None}


def jsonrpc(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    if params is not None:
        message["params"] = params
    return message


def held_session_call(root: str) -> dict[str, Any]:
    """A legacy `tools/call` (id 3) that a `HOLD` server holds; its progress notification shows it runs."""
    args = {"workspace": {"root": root}, "query": "a"}
    return jsonrpc(
        3, "tools/call", {"name": "lean_workspace_symbols", "arguments": args, "_meta": {"progressToken": 1}}
    )


def _modern_body(rid: str, method: str) -> bytes:
    """A modern request's body with `rid` and `method` spliced in as JSON text (so they may hold escapes)."""
    meta = json.dumps({"_meta": modern_meta()})
    return f'{{"jsonrpc":"2.0","id":{rid},"method":"{method}","params":{meta}}}'.encode()


def in_session(sid: str, **extra: str) -> dict[str, str]:
    return {"mcp-session-id": sid, "mcp-protocol-version": LEGACY, **extra}


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(project(tmp_path / "proj"))


async def warm(client: Client, root: str) -> None:
    """Start the workspace's Lean server, so a held call goes straight to Lean (cancelling it is then prompt)."""
    response = await client.modern(call(next(client.ids), "lean_sync", {"workspace": {"root": root}, "path": "A.lean"}))
    assert final(response)["result"]["isError"] is False


async def drop(client: Client, root: str) -> dict[str, Any]:
    """Drop a workspace; the drop waits for every call admitted before it (the fence)."""
    with anyio.fail_after(TIMEOUT):
        response = await client.modern(call(next(client.ids), "lean_drop_workspace", {"workspace": {"root": root}}))
    result: dict[str, Any] = structured(response.json())
    return result


# ---- admission rules --------------------------------------------------------------------------------------------
# (id, request changes, expected status, expected JSON-RPC code); "{port}" is the endpoint's port.
REJECTED: list[tuple[str, dict[str, Any], int, int]] = [
    ("a foreign Host", {"host": "evil.example:{port}"}, 403, INVALID_REQUEST),
    ("a foreign Host without a port", {"host": "evil.example"}, 403, INVALID_REQUEST),
    ("a foreign Origin", {"origin": "http://evil.example"}, 403, INVALID_REQUEST),
    ("Origin null", {"origin": "null"}, 403, INVALID_REQUEST),
    ("a loopback Origin on another port", {"origin": "http://localhost:1"}, 403, INVALID_REQUEST),
    ("an https loopback Origin", {"origin": "https://localhost:{port}"}, 403, INVALID_REQUEST),
    ("another path", {"target": "/other"}, 404, INVALID_REQUEST),
    ("the root path", {"target": "/"}, 404, INVALID_REQUEST),
    ("the path with a trailing slash", {"target": "/mcp/"}, 404, INVALID_REQUEST),
    ("PUT", {"method": "PUT"}, 405, INVALID_REQUEST),
    ("GET without a session", {"method": "GET", "body": b""}, 405, INVALID_REQUEST),
    ("DELETE without a session", {"method": "DELETE", "body": b""}, 405, INVALID_REQUEST),
    ("no Content-Type", {"content-type": None}, 415, INVALID_REQUEST),
    ("a text/plain body", {"content-type": "text/plain"}, 415, INVALID_REQUEST),
    ("a non-UTF-8 charset", {"content-type": "application/json; charset=latin-1"}, 415, INVALID_REQUEST),
    ("no Accept", {"accept": None}, 406, INVALID_REQUEST),
    ("Accept without text/event-stream", {"accept": "application/json"}, 406, INVALID_REQUEST),
    ("Accept without application/json", {"accept": "text/event-stream"}, 406, INVALID_REQUEST),
    ("Accept refusing SSE with q=0", {"accept": "application/json, text/event-stream;q=0"}, 406, INVALID_REQUEST),
    ("GET accepting only JSON", {"method": "GET", "body": b"", "accept": "application/json"}, 406, INVALID_REQUEST),
    ("a body that is not JSON", {"body": b'{"jsonrpc": "2.0",'}, 400, PARSE_ERROR),
    ("a body with a repeated key", {"body": b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}'}, 400, PARSE_ERROR),
    ("a batch", {"body": json.dumps([DISCOVER]).encode()}, 400, INVALID_REQUEST),
    ("a bare JSON value", {"body": b"42"}, 400, INVALID_REQUEST),
    ("a client response", {"body": b'{"jsonrpc":"2.0","id":1,"result":{}}'}, 400, INVALID_REQUEST),
    ("an old JSON-RPC version", {"body": b'{"jsonrpc":"1.0","id":1,"method":"server/discover"}'}, 400, INVALID_REQUEST),
]

ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("Host localhost", {"host": "localhost:{port}"}),
    ("Host [::1]", {"host": "[::1]:{port}"}),
    ("Host without a port", {"host": "127.0.0.1"}),
    ("Host in capitals", {"host": "LOCALHOST:{port}"}),
    ("a loopback Origin", {"origin": "http://localhost:{port}"}),
    ("the bound address as Origin", {"origin": "http://127.0.0.1:{port}"}),
    ("an IPv6 loopback Origin", {"origin": "http://[::1]:{port}"}),
    ("a UTF-8 charset", {"content-type": "application/json; charset=utf-8"}),
    ("Accept */*", {"accept": "*/*"}),
    ("Accept by type wildcards", {"accept": "application/*, text/*"}),
    ("a query string", {"target": "/mcp?x=1"}),
]


async def send(client: Client, changes: dict[str, Any]) -> httpx.Response:
    """The discover request of `BASE`, changed: `method`, `target`, `body` and headers (None removes one)."""
    changes = {k: v.format(port=client.port) if isinstance(v, str) else v for k, v in changes.items()}
    method = changes.pop("method", "POST")
    target = changes.pop("target", "/mcp")
    body = changes.pop("body", json.dumps(DISCOVER).encode())
    built = client.http.build_request(method, target, content=body, headers=edit(BASE, changes))
    for name in [k for k, v in changes.items() if v is None and k in built.headers]:
        del built.headers[name]  # httpx would send its default
    return await client.http.send(built)


@pytest.mark.parametrize(("changes", "status", "code"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
async def test_the_endpoint_rejects_requests_that_break_a_rule(changes: dict[str, Any], status: int, code: int) -> None:
    async with in_process() as client:
        response = await send(client, changes)
        assert response.status_code == status, response.text
        assert error_code(response) == code and response.json()["id"] in (None, 1)
        if status == 405:
            assert response.headers["allow"] in ("GET, POST, DELETE", "POST")


@pytest.mark.parametrize("changes", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
async def test_the_endpoint_accepts_loopback_and_equivalent_spellings(changes: dict[str, Any]) -> None:
    async with in_process() as client:
        response = await send(client, changes)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["supportedVersions"] == [MODERN]


async def test_host_is_checked_before_origin_and_origin_before_the_path() -> None:
    async with in_process() as client:
        response = await send(client, {"host": "evil.example", "origin": "http://evil.example", "target": "/x"})
        assert response.status_code == 403 and "Host" in response.json()["error"]["message"]
        response = await send(client, {"origin": "http://evil.example", "target": "/x"})
        assert response.status_code == 403 and "Origin" in response.json()["error"]["message"]


async def test_two_origin_headers_are_refused() -> None:
    async with in_process() as client:
        headers = [*BASE.items(), ("origin", "http://localhost:8765"), ("origin", "http://127.0.0.1:8765")]
        response = await client.http.post("/mcp", content=json.dumps(DISCOVER).encode(), headers=headers)
        assert response.status_code == 403 and error_code(response) == INVALID_REQUEST


async def test_allowed_hosts_and_origins_extend_the_loopback_lists() -> None:
    hosts, origins = ("mcp.internal", "pinned.internal:9"), ("https://app.example",)
    async with in_process(allowed_hosts=hosts, allowed_origins=origins) as client:
        assert (await send(client, {"host": "mcp.internal:8443"})).status_code == 200
        assert (await send(client, {"host": "pinned.internal:9"})).status_code == 200
        assert (await send(client, {"host": "pinned.internal:10"})).status_code == 403
        assert (await send(client, {"origin": "https://app.example"})).status_code == 200
        assert (await send(client, {"origin": "https://APP.example/"})).status_code == 200
        assert (await send(client, {"origin": "http://app.example"})).status_code == 403


async def test_a_head_over_the_limit_is_431_and_closes_the_connection() -> None:
    async with in_process(max_head=1024) as client:
        response = await send(client, {"x-big": "a" * 2000})
        assert response.status_code == 431 and error_code(response) == INVALID_REQUEST
        assert response.headers["connection"] == "close"


async def test_errors_from_the_head_read_the_body_so_the_connection_stays_usable() -> None:
    async with in_process() as client:
        response = await send(client, {"content-type": "text/plain"})
        assert response.status_code == 415 and "connection" not in response.headers
        response = await send(client, {"target": "/elsewhere"})
        assert response.status_code == 404 and "connection" not in response.headers


# ---- text that cannot be encoded as it is ------------------------------------------------------------------------
LONE = "\ud800"
"""A lone UTF-16 surrogate: valid in JSON as the escape `\\ud800`, but not encodable as UTF-8."""
BAD_UTF8 = b'{"jsonrpc":"2.0","id":"a\xed\xa0\x80","method":"tools/list"}'
"""A surrogate's code point encoded as UTF-8 bytes (ED A0 80) inside a string: not UTF-8."""
LONE_ID = b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}'
LONE_VERSION = b'{"jsonrpc":"\\ud800","id":"\\ud800","method":"tools/list"}'
LONE_METHOD = b'{"jsonrpc":"2.0","id":"\\ud800","method":"\\ud800"}'
LONE_TOOL = b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call","params":{"name":"\\ud800","arguments":{}}}'
# (id, body, where it goes, status, JSON-RPC code or None for a result, the id answered)
UNENCODABLE: list[tuple[str, bytes, str, int, int | None, Any]] = [
    ("invalid UTF-8 in a session", BAD_UTF8, "session", 400, PARSE_ERROR, None),
    ("invalid UTF-8 without a session", BAD_UTF8, "bare", 400, PARSE_ERROR, None),
    ("a lone surrogate id without a session", LONE_ID, "bare", 400, INVALID_REQUEST, LONE),
    ("a lone surrogate id in an unknown session", LONE_ID, "unknown session", 404, INVALID_REQUEST, LONE),
    ("a lone surrogate id and version", LONE_VERSION, "bare", 400, INVALID_REQUEST, LONE),
    ("a lone surrogate id in a session", LONE_ID, "session", 200, None, LONE),
    ("a lone surrogate method in a session", LONE_METHOD, "session", 200, METHOD_NOT_FOUND, LONE),
    ("a lone surrogate tool name in a session", LONE_TOOL, "session", 200, INVALID_PARAMS, LONE),
    ("a lone surrogate id of a modern request", _modern_body(r'"\ud800"', "tools/list"), "modern", 200, None, LONE),
    ("a lone surrogate method of a modern request", _modern_body(r'"\ud800"', r"\ud800"), "modern", 400,
     HEADER_MISMATCH, LONE),
]  # fmt: skip


def route(where: str, sid: str) -> dict[str, str]:
    """The headers that send a body `where` (a column of `UNENCODABLE`)."""
    return {
        "bare": {},
        "modern": {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"},
        "session": {"mcp-session-id": sid},
        "unknown session": {"mcp-session-id": "gone"},
    }[where]


@pytest.mark.parametrize(
    ("body", "where", "status", "code", "rid"), [c[1:] for c in UNENCODABLE], ids=[c[0] for c in UNENCODABLE]
)
async def test_text_that_cannot_be_encoded_is_answered_and_the_session_goes_on(
    body: bytes, where: str, status: int, code: int | None, rid: Any
) -> None:
    async with in_process() as client:
        sid = await client.open_session()
        response = await client.post(body, route(where, sid))
        assert response.status_code == status and response.headers["content-type"] == "application/json"
        answer = json.loads(response.content)  # strict UTF-8 JSON, the surrogate written as an escape
        assert answer["id"] == rid
        if code is None:
            assert "result" in answer, answer
        else:
            assert answer["error"]["code"] == code
        listing = await client.post(jsonrpc(2, "tools/list"), {"mcp-session-id": sid})
        assert listing.status_code == 200 and listing.json()["result"]["tools"]


async def test_text_that_cannot_be_encoded_costs_no_other_client_anything() -> None:
    async with served(server_config()) as client:
        bystander, sender = await client.open_session(), await client.open_session()
        for _, body, where, status, _, _ in UNENCODABLE:
            response = await client.post(body, route(where, sender))
            assert response.status_code == status and json.loads(response.content)
        listing = await client.post(jsonrpc(2, "tools/list"), {"mcp-session-id": bystander})
        assert listing.status_code == 200 and listing.json()["result"]["tools"]
        assert (await client.call_modern("tools/list")).status_code == 200


# ---- modern requests --------------------------------------------------------------------------------------------
HEADER_RULES: list[tuple[str, dict[str, str | None], int]] = [
    ("no MCP-Protocol-Version", {"mcp-protocol-version": None}, HEADER_MISMATCH),
    ("an MCP-Protocol-Version unlike the body", {"mcp-protocol-version": LEGACY}, HEADER_MISMATCH),
    ("no Mcp-Method", {"mcp-method": None}, HEADER_MISMATCH),
    ("an Mcp-Method unlike the body", {"mcp-method": "tools/list"}, HEADER_MISMATCH),
    ("no Mcp-Name", {"mcp-name": None}, HEADER_MISMATCH),
    ("an Mcp-Name unlike the tool", {"mcp-name": "beam_stats"}, HEADER_MISMATCH),
    ("an Mcp-Name in base64 of another tool", {"mcp-name": "=?base64?YmVhbV9zdGF0cw==?="}, HEADER_MISMATCH),
    ("a malformed base64 Mcp-Name", {"mcp-name": "=?base64?!!!?="}, HEADER_MISMATCH),
]


@pytest.mark.parametrize(("changes", "code"), [c[1:] for c in HEADER_RULES], ids=[c[0] for c in HEADER_RULES])
async def test_modern_headers_must_mirror_the_body(changes: dict[str, str | None], code: int) -> None:
    async with in_process() as client:
        message = call("h1", "beam_version")
        response = await client.post(message, edit(dict(modern_headers(message)), changes))
        assert response.status_code == 400
        body = response.json()
        assert body["error"]["code"] == code and body["id"] == "h1"
        assert body["error"]["message"].startswith("header mismatch:")


async def test_a_routing_header_sent_twice_is_a_header_mismatch() -> None:
    async with in_process() as client:
        message = request(1, "tools/list")
        response = await client.post(message, [*modern_headers(message), ("mcp-method", "tools/list")])
        assert response.status_code == 400 and error_code(response) == HEADER_MISMATCH


async def test_mcp_name_may_be_base64_and_resources_read_mirrors_its_uri(tmp_path: Path) -> None:
    async with in_process() as client:
        message = call(1, "beam_version")
        headers = edit(dict(modern_headers(message)), {"mcp-name": "=?base64?YmVhbV92ZXJzaW9u?="})
        response = await client.post(message, headers)
        assert response.status_code == 200 and structured(response.json())["name"] == "lean-beam-mcp"
        read = request(2, "resources/read", {"uri": path_to_uri(str(tmp_path / "A é.lean"))})
        assert (await client.modern(read)).status_code == 200
        assert (await client.post(read, edit(dict(modern_headers(read)), {"mcp-name": None}))).status_code == 400


PARAM_RULES: list[tuple[str, dict[str, str | None]]] = [
    ("no Mcp-Param-Workspace", {"mcp-param-workspace": None}),
    ("an Mcp-Param-Workspace unlike the root", {"mcp-param-workspace": "/elsewhere"}),
    ("a malformed base64 Mcp-Param-Workspace", {"mcp-param-workspace": "=?base64?!!!?="}),
]


@pytest.mark.parametrize("changes", [c[1] for c in PARAM_RULES], ids=[c[0] for c in PARAM_RULES])
async def test_a_workspace_call_must_mirror_its_root_in_mcp_param_workspace(
    root: str, changes: dict[str, str | None]
) -> None:
    async with in_process() as client:
        message = call("p1", "lean_sync", {"workspace": {"root": root}, "path": "A.lean"})
        response = await client.post(message, edit(dict(modern_headers(message)), changes))
        assert response.status_code == 400 and error_code(response) == HEADER_MISMATCH
        assert response.json()["id"] == "p1" and "Mcp-Param-Workspace" in response.json()["error"]["message"]
        stats = await client.modern(call("p2", "beam_stats"))
        assert structured(stats.json())["workspaces"] == {}  # refused before any Lean work


async def test_a_root_outside_printable_ascii_is_mirrored_in_base64(tmp_path: Path) -> None:
    root = str(project(tmp_path / "dé mo"))
    async with in_process() as client:
        message = call(1, "lean_update", {"workspace": {"root": root}, "path": "A.lean"})
        headers = modern_headers(message)
        assert ("mcp-param-workspace", "=?base64?" + base64.b64encode(root.encode()).decode() + "?=") in headers
        response = await client.post(message, headers)
        assert response.status_code == 200 and structured(final(response))["version"] == 1
        raw = [(k.encode(), v.encode()) for k, v in (*POST_HEADERS.items(), *headers) if k != "mcp-param-workspace"]
        raw.append((b"mcp-param-workspace", root.encode()))  # raw UTF-8 bytes are not a valid field value
        literal = await client.http.post(client.url, content=json.dumps(message).encode(), headers=raw)
        assert literal.status_code == 400 and error_code(literal) == HEADER_MISMATCH


async def test_only_modern_calls_of_tools_that_declare_a_param_header_are_checked(root: str) -> None:
    async with in_process() as client:
        stray = [*modern_headers(call(0, "beam_version")), ("mcp-param-workspace", "/anything")]
        version = await client.post(call(1, "beam_version"), stray)
        assert version.status_code == 200 and structured(version.json())["name"] == "lean-beam-mcp"
        unknown = call(2, "lean_nonexistent", {"workspace": {"root": root}})
        response = await client.post(unknown, edit(dict(modern_headers(unknown)), {"mcp-param-workspace": None}))
        assert response.status_code == 400 and error_code(response) == INVALID_PARAMS  # the server's: no such tool
        sid = await client.open_session()
        legacy = jsonrpc(
            3, "tools/call", {"name": "lean_update", "arguments": {"workspace": {"root": root}, "path": "A.lean"}}
        )
        answered = await client.post(legacy, in_session(sid))  # 2025-11-25 has no Mcp-Param-* headers
        assert structured(final(answered))["version"] == 1


async def test_a_registry_that_cannot_load_leaves_the_call_to_the_server(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with McpServer.open(server_config()) as server:

        async def unavailable() -> Any:
            raise JsonRpcError(INTERNAL_ERROR, "the Beam broker is unavailable: ImportError")

        monkeypatch.setattr(server, "tools", unavailable)
        endpoint = Endpoint(server, HttpConfig(), 8765)
        async with app_client(endpoint) as client:
            message = call(1, "lean_sync", {"workspace": {"root": root}, "path": "A.lean"})
            response = await client.post(message, edit(dict(modern_headers(message)), {"mcp-param-workspace": None}))
            assert response.status_code == 200 and final(response)["result"]["isError"] is False  # not refused
        endpoint.close()


async def test_modern_metadata_and_revision_errors_are_400() -> None:
    async with in_process() as client:
        bare = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        response = await client.post(bare, {"mcp-protocol-version": MODERN, "mcp-method": "tools/list"})
        assert response.status_code == 400 and error_code(response) == INVALID_PARAMS
        future = request(2, "tools/list", protocolVersion="2099-01-01")
        response = await client.post(future, modern_headers(future, "2099-01-01"))
        assert response.status_code == 400 and error_code(response) == UNSUPPORTED_PROTOCOL_VERSION
        assert response.json()["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


async def test_modern_errors_map_to_http_statuses_and_tool_errors_are_results() -> None:
    async with in_process() as client:
        unknown = await client.call_modern("prompts/list")
        assert unknown.status_code == 404 and error_code(unknown) == METHOD_NOT_FOUND
        init = await client.call_modern("initialize")
        assert init.status_code == 404 and error_code(init) == METHOD_NOT_FOUND
        no_tool = await client.call_modern("tools/call", {"name": "lean_nonexistent", "arguments": {}})
        assert no_tool.status_code == 400 and error_code(no_tool) == INVALID_PARAMS
        tool_error = await client.call_modern("tools/call", {"name": "lean_sync", "arguments": {"workspace": {}}})
        assert tool_error.status_code == 200 and tool_error.json()["result"]["isError"] is True


async def test_modern_results_without_notifications_are_json() -> None:
    async with in_process() as client:
        response = await client.call_modern("tools/list")
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        result = response.json()["result"]
        assert result["resultType"] == "complete" and result["tools"][0]["name"] == "beam_version"
        assert "mcp-session-id" not in response.headers


async def test_a_call_with_progress_answers_with_an_event_stream_ending_in_its_response(root: str) -> None:
    async with in_process() as client:
        args = {"workspace": {"root": root}, "path": "A.lean"}
        response = await client.modern(call(1, "lean_sync", args, progressToken="p"))
        assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
        assert response.headers["cache-control"] == "no-cache, no-transform"
        assert response.content.startswith(b"event: message\ndata: {") and response.content.endswith(b"}\n\n")
        *notes, final = events(response.content)
        progress = [n["params"] for n in notes]
        assert {n["method"] for n in notes} == {"notifications/progress"}
        assert [p["progress"] for p in progress] == list(range(1, len(progress) + 1))
        assert progress[0]["message"] == "lean_sync on A.lean: preparing the Lean workspace"
        assert any("done=true" in p["message"] for p in progress)
        assert final["id"] == 1 and structured(final)["version"] == 1
        assert final["result"]["resultType"] == "complete"


async def test_request_scoped_logs_travel_on_their_own_response(tmp_path: Path) -> None:
    broken = "theorem a : True := ERROR_HERE\n"
    root = str(project(tmp_path / "proj", {"A.lean": broken, "B.lean": broken}))
    async with in_process() as client:
        quiet = await client.modern(call(1, "lean_sync", {"workspace": {"root": root}, "path": "A.lean"}))
        assert quiet.headers["content-type"] == "application/json"  # no logLevel: no logs, so no stream
        args = {"workspace": {"root": root}, "path": "B.lean"}
        loud = await client.modern(call(2, "lean_sync", args, logLevel="error"))
        *notes, final = events(loud.content)
        [log] = [n for n in notes if n["method"] == "notifications/message"]
        assert log["params"]["logger"] == "lean.diagnostic" and "ERROR_HERE" in json.dumps(log["params"]["data"])
        assert final["id"] == 2 and "result" in final


async def test_notifications_are_accepted_with_202() -> None:
    async with in_process() as client:
        for note in (
            jsonrpc(None, "notifications/cancelled", {"requestId": 1}),
            jsonrpc(None, "notifications/initialized"),
            jsonrpc(None, "notifications/whatever", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
        ):
            response = await client.post(note)
            assert (response.status_code, response.content) == (202, b"")


async def test_a_bare_request_needs_a_session_or_modern_metadata() -> None:
    async with in_process() as client:
        response = await client.post(jsonrpc(5, "tools/list"))
        assert response.status_code == 400 and error_code(response) == INVALID_REQUEST
        assert response.json()["id"] == 5 and "Mcp-Session-Id" in response.json()["error"]["message"]
        legacy_header = await client.post(jsonrpc(5, "tools/list"), {"mcp-protocol-version": LEGACY})
        assert legacy_header.status_code == 400 and error_code(legacy_header) == INVALID_REQUEST


async def test_another_protocol_version_header_makes_a_bare_request_modern() -> None:
    async with in_process() as client:
        response = await client.post(jsonrpc(5, "tools/list"), {"mcp-protocol-version": MODERN})
        assert response.status_code == 400 and error_code(response) == INVALID_PARAMS  # its _meta is missing


async def test_every_modern_request_is_independent_so_ids_may_repeat_concurrently(root: str) -> None:
    async with served(server_config(HOLD)) as client:
        await warm(client, root)
        held = call(7, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="h")
        async with client.stream(held) as stream:
            assert (await stream.next()) is not None  # admitted: its preparation progress
            response = await client.modern(call(7, "beam_version"))
            assert response.json()["id"] == 7 and structured(response.json())["name"] == "lean-beam-mcp"


# ---- cancellation and the drop fence ----------------------------------------------------------------------------
async def test_closing_the_connection_cancels_the_call(root: str) -> None:
    async with served(server_config(HOLD)) as client:
        await warm(client, root)
        held = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="t")
        async with client.stream(held) as stream:
            assert stream.status == 200 and stream.content_type == "text/event-stream"
            first = await stream.next()
            assert first is not None and first["method"] == "notifications/progress"
        # The held call can only end by being cancelled, and the drop waits for it.
        assert (await drop(client, root))["dropped"] is True
        assert (await client.call_modern("tools/list")).status_code == 200  # the server carries on


async def test_closing_the_connection_does_not_cancel_a_drop(root: str) -> None:
    async with served(server_config(HOLD)) as client:
        await warm(client, root)
        held = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="t")
        async with client.stream(held) as stream:
            assert await stream.next() is not None
            dropping = call(2, "lean_drop_workspace", {"workspace": {"root": root}}, progressToken="d")
            async with client.stream(dropping) as drop_stream:
                prep = await drop_stream.next()  # admitted, waiting behind the held call
                assert (
                    prep is not None
                    and prep["params"]["message"] == "lean_drop_workspace: preparing workspace eviction"
                )
        # Both connections are closed: the held call is cancelled, and the drop goes on to drop the workspace.
        again = await drop(client, root)
        assert again == {
            "workspace": {"root": root},
            "dropped": False,
            "invalidated_handles": False,
            "reason": "notFound",
        }


async def test_the_drop_fence_spans_http_requests(root: str) -> None:
    async with served(server_config({"delay_ms": {"workspace/symbol": 1000}})) as client:
        slow = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="s")
        dropping = call(2, "lean_drop_workspace", {"workspace": {"root": root}}, progressToken="d")
        async with client.stream(slow) as slow_stream, client.stream(dropping) as drop_stream:
            assert await slow_stream.next() is not None
            prep = await drop_stream.next()
            assert prep is not None and prep["params"]["message"] == "lean_drop_workspace: preparing workspace eviction"
            # The drop waited for the call admitted before it: the call completed on its workspace.
            slow_final = (await slow_stream.rest())[-1]
            assert structured(slow_final)["result"] == [] and slow_final["result"]["isError"] is False
            drop_final = (await drop_stream.rest())[-1]
            assert structured(drop_final)["dropped"] is True


# ---- legacy sessions --------------------------------------------------------------------------------------------
async def test_a_legacy_session_lives_from_initialize_to_delete() -> None:
    async with in_process() as client:
        response = await client.post(jsonrpc(0, "initialize", INIT))
        sid = response.headers["mcp-session-id"]
        assert 40 <= len(sid) <= 64 and sid.isascii()
        early = await client.post(jsonrpc(1, "tools/list"), in_session(sid))
        assert early.status_code == 200 and error_code(early) == INVALID_REQUEST  # notifications/initialized first
        initialized = await client.post(jsonrpc(None, "notifications/initialized"), in_session(sid))
        assert initialized.status_code == 202
        tools = await client.post(jsonrpc(2, "tools/list"), {"mcp-session-id": sid})
        assert tools.status_code == 200 and "resultType" not in tools.json()["result"]
        again = await client.post(jsonrpc(3, "initialize", INIT), in_session(sid))
        assert again.status_code == 200 and error_code(again) == INVALID_REQUEST  # legacy errors are in the body
        assert (await client.post(jsonrpc(4, "ping"), in_session(sid))).json()["result"] == {}
        wrong = await client.post(jsonrpc(5, "ping"), in_session(sid, **{"mcp-protocol-version": MODERN}))
        assert wrong.status_code == 400 and error_code(wrong) == INVALID_REQUEST
        deleted = await client.http.delete("/mcp", headers={"mcp-session-id": sid})
        assert deleted.status_code == 204 and deleted.content == b""
        gone = await client.post(jsonrpc(6, "ping"), in_session(sid))
        assert gone.status_code == 404 and error_code(gone) == INVALID_REQUEST
        assert (await client.http.delete("/mcp", headers={"mcp-session-id": sid})).status_code == 404


async def test_a_failed_initialize_opens_no_session() -> None:
    async with in_process() as client:
        response = await client.post(jsonrpc(0, "initialize", {"protocolVersion": 7}))
        assert response.status_code == 200 and error_code(response) == INVALID_PARAMS
        assert "mcp-session-id" not in response.headers


async def test_sessions_are_independent_and_unknown_ones_are_404() -> None:
    async with in_process() as client:
        one, two = await client.open_session(), await client.open_session()
        assert one != two
        level = await client.post(jsonrpc(1, "logging/setLevel", {"level": "debug"}), in_session(one))
        assert level.json()["result"] == {}
        unknown = await client.post(jsonrpc(1, "ping"), in_session("no-such-session"))
        assert unknown.status_code == 404 and unknown.json()["id"] == 1
        stream = await client.http.get("/mcp", headers={"mcp-session-id": "no-such-session", "accept": ACCEPT})
        assert stream.status_code == 404


async def test_at_most_max_sessions_are_open() -> None:
    async with in_process(max_sessions=2) as client:
        first = await client.open_session()
        await client.open_session()
        full = await client.post(jsonrpc(1, "initialize", INIT))
        assert full.status_code == 429 and error_code(full) == INVALID_REQUEST
        assert "mcp-session-id" not in full.headers
        assert (await client.http.delete("/mcp", headers={"mcp-session-id": first})).status_code == 204
        await client.open_session()


async def test_idle_sessions_expire() -> None:
    async with in_process(session_idle=0.05) as client:
        sid = await client.open_session()
        await anyio.sleep(0.1)  # the session's idle time passes: time itself is what is tested
        assert (await client.post(jsonrpc(1, "ping"), in_session(sid))).status_code == 404


async def test_a_request_id_in_flight_in_the_session_cannot_be_reused(root: str) -> None:
    async with served(server_config(HOLD)) as client:
        await warm(client, root)
        sid = await client.open_session()
        held = held_session_call(root)
        async with client.stream(held, in_session(sid)) as stream:
            assert await stream.next() is not None
            reused = await client.post(jsonrpc(3, "ping"), in_session(sid))
            assert reused.status_code == 400 and error_code(reused) == INVALID_REQUEST
            other = await client.post(jsonrpc(3, "ping"), in_session(await client.open_session()))
            assert other.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}


async def test_a_cancelled_session_request_ends_its_stream_without_a_response(root: str) -> None:
    async with served(server_config(HOLD)) as client:
        await warm(client, root)
        sid = await client.open_session()
        held = held_session_call(root)
        async with client.stream(held, in_session(sid)) as stream:
            first = await stream.next()
            assert first is not None and first["method"] == "notifications/progress"
            cancel = jsonrpc(None, "notifications/cancelled", {"requestId": 3})
            assert (await client.post(cancel, in_session(sid))).status_code == 202
            assert await stream.rest() == []  # ended, with no response
        assert (await drop(client, root))["dropped"] is True


async def test_the_get_stream_carries_a_sessions_resource_updates(tmp_path: Path) -> None:
    root = str(project(tmp_path / "proj"))
    uri = path_to_uri(str(Path(root) / "A.lean"))
    async with served(server_config()) as client:
        sid = await client.open_session()
        subscribe = await client.post(jsonrpc(1, "resources/subscribe", {"uri": uri}), in_session(sid))
        assert subscribe.json()["result"] == {}
        sync = jsonrpc(
            2, "tools/call", {"name": "lean_sync", "arguments": {"workspace": {"root": root}, "path": "A.lean"}}
        )
        assert "result" in final(await client.post(sync, in_session(sid)))
        async with client.get_stream(sid) as stream:
            assert stream.status == 200 and stream.content_type == "text/event-stream"
            queued = await stream.next()  # queued while no stream was open
            assert queued == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
            second = await client.http.get("/mcp", headers={"mcp-session-id": sid, "accept": "text/event-stream"})
            assert second.status_code == 409 and error_code(second) == INVALID_REQUEST
            (Path(root) / "A.lean").write_text("theorem a : True := ERROR_HERE\n", encoding="utf-8")
            sync["id"] = 3
            assert "result" in final(await client.post(sync, in_session(sid)))
            update = await stream.next()
            assert update is not None and update["params"] == {"uri": uri}
            assert (await client.http.delete("/mcp", headers={"mcp-session-id": sid})).status_code == 204
            later = await stream.rest()  # the session ended: so does its stream
            assert {m["method"] for m in later} <= {"notifications/resources/updated"}


async def test_a_get_stream_ends_at_its_lease_and_another_may_follow() -> None:
    async with served(server_config(), stream_lease=(0.05, 0.1), keepalive=0.01) as client:
        sid = await client.open_session()
        async with client.get_stream(sid) as stream:
            assert await stream.rest() == []
        async with client.get_stream(sid) as stream:
            assert stream.status == 200


async def test_a_silent_get_stream_carries_keepalive_comments() -> None:
    # A lease far longer than the keepalive period even on a stalled machine: the comment must come before the end.
    async with served(server_config(), stream_lease=(120.0, 121.0), keepalive=0.01) as client:
        sid = await client.open_session()
        async with client.get_stream(sid) as stream:
            assert await stream.block() == b": keepalive\n\n"


# ---- listen streams ---------------------------------------------------------------------------------------------
async def test_a_listen_stream_acknowledges_and_carries_updates(tmp_path: Path) -> None:
    root = str(project(tmp_path / "proj"))
    uri = path_to_uri(str(Path(root) / "A.lean"))
    # A lease far longer than a sync on a loaded machine: the update must come on this stream, not after its end.
    async with served(server_config(), stream_lease=(120.0, 121.0)) as client:
        listen = request("L", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}})
        async with client.stream(listen) as stream:
            assert stream.status == 200 and stream.content_type == "text/event-stream"
            ack = await stream.next()
            assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"] == {"notifications": {"resourceSubscriptions": [uri]}, "_meta": {SUB_ID: "L"}}
            synced = await client.modern(call(1, "lean_sync", {"workspace": {"root": root}, "path": "A.lean"}))
            assert synced.json()["result"]["isError"] is False
            update = await stream.next()
            assert update == {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": uri, "_meta": {SUB_ID: "L"}},
            }


async def test_a_listen_stream_ends_at_its_lease_without_a_result(tmp_path: Path) -> None:
    uri = path_to_uri(str(project(tmp_path / "proj") / "A.lean"))
    async with served(server_config(), stream_lease=(0.05, 0.1), keepalive=0.01) as client:
        listen = request("L", "subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}})
        async with client.stream(listen) as stream:
            ack = await stream.next()
            assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
            assert await stream.rest() == []  # the lease ended the stream, with no final result


async def test_a_listen_that_honours_nothing_closes_gracefully_with_its_result() -> None:
    async with in_process() as client:
        response = await client.call_modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        ack, final = events(response.content)
        assert ack["method"] == "notifications/subscriptions/acknowledged" and ack["params"]["notifications"] == {}
        assert final["result"]["_meta"][SUB_ID] == final["id"]


# ---- answers: keepalive, the request cap, deadlines -------------------------------------------------------------
async def test_a_silent_call_is_committed_to_an_event_stream_and_kept_alive(root: str) -> None:
    async with served(server_config(HOLD), keepalive=0.01) as client:
        await warm(client, root)
        held = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"})
        async with client.stream(held) as stream:
            assert stream.status == 200 and stream.content_type == "text/event-stream"
            assert await stream.block() == b": keepalive\n\n"


async def test_a_chunked_body_over_the_limit_is_413() -> None:
    async def chunks() -> Any:
        for _ in range(4):
            yield b" " * 500

    async with in_process(max_body=1000) as client:
        response = await client.http.post("/mcp", content=chunks(), headers=BASE)
        assert response.status_code == 413 and error_code(response) == INVALID_REQUEST
        assert response.headers["connection"] == "close"


class Driver:
    """Drives the ASGI app directly: `receive` and `send` are the test's, so deadlines, failures and departures can
    be provoked exactly.

    `receive` hands out `body` (one message) and whatever `feed` adds, then blocks (setting `waiting`) until
    `leave()` (then: `http.disconnect`); with `drip`, it sends one more byte of body every `drip` seconds instead
    of blocking. `send` records, sets `started` at the response head and `said` at the first body message, and on
    that message blocks or fails when told to. `ended` is set when the app has returned.
    """

    def __init__(self, endpoint: Endpoint, body: Any = b"", *, on_body: str = "record", drip: float | None = None):
        self.app = build_app(endpoint)
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.received: list[dict[str, Any]] = [{"type": "http.request", "body": raw, "more_body": False}]
        self.sent: list[dict[str, Any]] = []
        self.on_body = on_body
        self.drip = drip
        self.started = anyio.Event()
        self.said = anyio.Event()
        self.ended = anyio.Event()
        self.waiting = anyio.Event()
        self._gone = False
        self._wake = anyio.Event()

    @staticmethod
    def scope(method: str = "POST", headers: Any = ()) -> dict[str, Any]:
        fields = {**BASE, "host": "127.0.0.1:8765", **dict(headers)}
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.1"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": [(k.encode(), v.encode()) for k, v in fields.items()],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 8765),
        }

    def leave(self) -> None:
        """The client closes its connection."""
        self._gone = True
        self._wake.set()

    def feed(self, body: bytes, *, more: bool = False) -> None:
        """The client sends more of its body."""
        self.received.append({"type": "http.request", "body": body, "more_body": more})
        self._wake.set()

    async def receive(self) -> dict[str, Any]:
        while True:
            if self.received:
                return self.received.pop(0)
            if self._gone:
                return {"type": "http.disconnect"}
            if self.drip is not None:
                await anyio.sleep(self.drip)  # pacing a trickling client, not synchronization
                return {"type": "http.request", "body": b" ", "more_body": True}
            self.waiting.set()
            await self._wake.wait()
            self._wake = anyio.Event()

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(dict(message))
        if message["type"] == "http.response.start":
            self.started.set()
        if message["type"] == "http.response.body":
            self.said.set()
            if self.on_body == "fail":
                raise OSError("connection reset by peer")
            if self.on_body == "stall":
                await anyio.sleep_forever()  # the client stopped reading

    async def run(self, scope: dict[str, Any]) -> None:
        """Run the app on one request, to its end."""
        try:
            with anyio.fail_after(TIMEOUT):
                await self.app(scope, self.receive, self.send)
        finally:
            self.ended.set()

    async def start(self, tg: anyio.abc.TaskGroup, scope: dict[str, Any]) -> Driver:
        """Run the app in `tg` until its answer has started."""
        tg.start_soon(self.run, scope)
        with anyio.fail_after(TIMEOUT):
            await self.started.wait()
        return self

    @property
    def status(self) -> int:
        status: int = self.sent[0]["status"]
        return status

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        start = self.sent[0]
        headers = {k.decode(): v.decode() for k, v in start["headers"]}
        return start["status"], headers, b"".join(m.get("body", b"") for m in self.sent[1:])

    @property
    def finished(self) -> bool:
        """Whether the answer was sent to its end."""
        return any(m["type"] == "http.response.body" and not m.get("more_body") for m in self.sent)


@pytest.fixture
async def server() -> Any:
    async with McpServer.open(server_config(HOLD)) as opened:
        yield opened


async def test_a_body_declared_over_the_limit_is_413_without_being_read(server: McpServer) -> None:
    driver = Driver(Endpoint(server, HttpConfig(), 8765))
    driver.received.clear()  # reading it would block the test
    await driver.run(driver.scope(headers={"content-length": str(4 * 1024 * 1024 + 1)}))
    status, headers, body = driver.answer()
    assert status == 413 and headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == INVALID_REQUEST


async def test_a_rejected_head_with_a_body_too_large_to_drain_closes_the_connection(server: McpServer) -> None:
    driver = Driver(Endpoint(server, HttpConfig(), 8765))
    driver.received.clear()
    await driver.run(driver.scope(headers={"host": "evil.example", "content-length": str(4 * 1024 * 1024 + 1)}))
    status, headers, _ = driver.answer()
    assert status == 403 and headers["connection"] == "close"


async def test_a_rejected_head_whose_body_breaks_the_limit_closes_the_connection() -> None:
    async def chunks() -> Any:
        for _ in range(4):
            yield b" " * 500

    async with in_process(max_body=1000) as client:
        headers = {**BASE, "content-type": "text/plain"}
        response = await client.http.post("/mcp", content=chunks(), headers=headers)
        assert response.status_code == 415 and response.headers["connection"] == "close"


async def test_a_stalled_body_is_408_and_closes_the_connection(server: McpServer) -> None:
    driver = Driver(Endpoint(server, HttpConfig(body_timeout=0.01), 8765))
    driver.received = [{"type": "http.request", "body": b"{", "more_body": True}]
    await driver.run(driver.scope())
    status, headers, body = driver.answer()
    assert status == 408 and headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == INVALID_REQUEST


async def test_a_client_that_leaves_while_sending_its_body_gets_no_answer(server: McpServer) -> None:
    driver = Driver(Endpoint(server, HttpConfig(), 8765))
    driver.received = [{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}]
    await driver.run(driver.scope())
    assert driver.sent == []


async def test_a_body_that_outlives_its_deadline_is_408_however_steadily_it_trickles(server: McpServer) -> None:
    endpoint = Endpoint(server, HttpConfig(body_deadline=0.2, body_timeout=TIMEOUT), 8765)
    driver = Driver(endpoint, drip=0.01)  # a byte every 10 ms: never a stall
    driver.received = [{"type": "http.request", "body": b"{", "more_body": True}]
    await driver.run(driver.scope())
    status, headers, body = driver.answer()
    assert status == 408 and headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["code"] == INVALID_REQUEST and error["message"] == "the request body took longer than 0.2 s"
    assert endpoint.intake.receiving == 0


def stalled_body(endpoint: Endpoint) -> Driver:
    """A request whose body started and then stopped (until it is fed or leaves)."""
    driver = Driver(endpoint)
    driver.received = [{"type": "http.request", "body": b"{", "more_body": True}]
    return driver


async def test_a_new_request_evicts_the_body_that_has_been_arriving_longest(server: McpServer) -> None:
    endpoint = Endpoint(server, HttpConfig(max_receiving=2), 8765)
    async with anyio.create_task_group() as tg:
        oldest, younger = stalled_body(endpoint), stalled_body(endpoint)
        for driver in (oldest, younger):
            tg.start_soon(driver.run, driver.scope())
            with anyio.fail_after(TIMEOUT):
                await driver.waiting.wait()
        assert endpoint.intake.receiving == 2
        listing = request(1, "tools/list")
        fresh = Driver(endpoint, listing)
        await fresh.run(fresh.scope(headers=modern_headers(listing)))
        assert fresh.status == 200 and json.loads(fresh.answer()[2])["result"]["tools"]
        with anyio.fail_after(TIMEOUT):
            await oldest.ended.wait()
        status, headers, body = oldest.answer()
        assert status == 408 and headers["connection"] == "close"
        error = json.loads(body)["error"]
        assert error["code"] == INVALID_REQUEST and error["message"].startswith("the request body was too slow")
        assert not younger.ended.is_set() and endpoint.intake.receiving == 1 and endpoint.intake.evictions == 1
        younger.leave()
    assert younger.sent == [] and endpoint.intake.receiving == 0


async def test_slow_bodies_do_not_count_against_the_request_cap(server: McpServer) -> None:
    endpoint = Endpoint(server, HttpConfig(max_requests=1), 8765)
    async with anyio.create_task_group() as tg:
        slow = [stalled_body(endpoint) for _ in range(3)]
        for driver in slow:
            tg.start_soon(driver.run, driver.scope())
            with anyio.fail_after(TIMEOUT):
                await driver.waiting.wait()
        listing = request(1, "tools/list")
        fresh = Driver(endpoint, listing)
        await fresh.run(fresh.scope(headers=modern_headers(listing)))
        assert fresh.status == 200 and endpoint.active == 0
        for driver in slow:
            driver.leave()


async def test_a_body_that_ends_when_the_cap_is_reached_is_503(server: McpServer, root: str) -> None:
    endpoint = Endpoint(server, HttpConfig(max_requests=1), 8765)
    async with app_client(endpoint) as client, anyio.create_task_group() as tg:
        await warm(client, root)
        listing = request(2, "tools/list")
        late = Driver(endpoint)
        late.received = [{"type": "http.request", "body": json.dumps(listing).encode()[:5], "more_body": True}]
        tg.start_soon(late.run, late.scope(headers=modern_headers(listing)))
        with anyio.fail_after(TIMEOUT):
            await late.waiting.wait()  # admitted on its head, its body not complete
        held = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="t")
        holder = await Driver(endpoint, held).start(tg, Driver.scope(headers=modern_headers(held)))
        late.feed(json.dumps(listing).encode()[5:])
        with anyio.fail_after(TIMEOUT):
            await late.ended.wait()
        status, headers, body = late.answer()
        assert status == 503 and headers["connection"] == "close"
        assert json.loads(body)["error"]["code"] == INVALID_REQUEST
        holder.leave()


async def test_a_failed_write_ends_the_answer(server: McpServer) -> None:
    endpoint = Endpoint(server, HttpConfig(), 8765)
    listing = request(1, "tools/list")
    driver = Driver(endpoint, listing, on_body="fail")
    await driver.run(driver.scope(headers=modern_headers(listing)))  # returns, with the answer cut short
    assert driver.sent[0]["status"] == 200 and driver.said.is_set()
    refused = Driver(endpoint, on_body="fail")
    await refused.run(refused.scope(headers={"host": "evil.example"}))
    assert refused.sent[0]["status"] == 403 and refused.said.is_set()


async def test_a_stalled_write_abandons_the_answer_and_cancels_the_call(server: McpServer, root: str) -> None:
    endpoint = Endpoint(server, HttpConfig(write_timeout=0.01), 8765)
    async with app_client(endpoint) as client:
        await warm(client, root)
        held = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="t")
        driver = Driver(endpoint, held, on_body="stall")
        await driver.run(driver.scope(headers=modern_headers(held)))  # the app gives up on its own
        assert driver.said.is_set() and driver.sent[0]["status"] == 200 and not driver.finished
        assert (await drop(client, root))["dropped"] is True  # the held call was cancelled


async def test_a_lease_that_ends_during_a_stalled_write_cuts_the_stream_short(server: McpServer) -> None:
    endpoint = Endpoint(server, HttpConfig(stream_lease=(0.01, 0.01)), 8765)
    listen = request(
        "L", "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["lsp-diagnostics:///A.lean"]}}
    )
    driver = Driver(endpoint, listen, on_body="stall")
    await driver.run(driver.scope(headers=modern_headers(listen)))
    assert driver.said.is_set() and not driver.finished


async def test_a_lease_that_ends_before_anything_was_said_is_an_empty_stream() -> None:
    async with in_process(stream_lease=(0.0, 0.0)) as client:
        params = {"notifications": {"resourceSubscriptions": ["lsp-diagnostics:///A.lean"]}}
        response = await client.call_modern("subscriptions/listen", params)
        assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
        assert response.content == b""


async def test_a_session_request_cancelled_before_it_said_anything_is_an_empty_stream(
    server: McpServer, root: str
) -> None:
    endpoint = Endpoint(server, HttpConfig(), 8765)
    async with app_client(endpoint) as client:
        await warm(client, root)
        sid = await client.open_session()
        args = {"workspace": {"root": root}, "query": "a"}
        driver = Driver(endpoint, jsonrpc(3, "tools/call", {"name": "lean_workspace_symbols", "arguments": args}))
        async with anyio.create_task_group() as tg:
            tg.start_soon(driver.run, driver.scope(headers=in_session(sid)))
            await anyio.wait_all_tasks_blocked()  # admitted: the answer waits for the call
            cancel = jsonrpc(None, "notifications/cancelled", {"requestId": 3})
            assert (await client.post(cancel, in_session(sid))).status_code == 202
        status, headers, body = driver.answer()
        assert (status, headers["content-type"], body) == (200, "text/event-stream", b"")
        endpoint.close()


async def test_a_session_call_runs_on_when_its_connection_closes_until_it_is_cancelled(
    server: McpServer, root: str
) -> None:
    # MCP 2025-11-25 (basic/transports): "Disconnection SHOULD NOT be interpreted as the client cancelling its
    # request. To cancel, the client SHOULD explicitly send an MCP CancelledNotification." (2026-07-28 differs.)
    endpoint = Endpoint(server, HttpConfig(), 8765)
    async with app_client(endpoint) as client:
        await warm(client, root)
        sid = await client.open_session()
        driver = Driver(endpoint, held_session_call(root))
        async with anyio.create_task_group() as tg:
            tg.start_soon(driver.run, driver.scope(headers=in_session(sid)))
            with anyio.fail_after(TIMEOUT):
                await driver.said.wait()  # the call runs: its preparation progress is on the wire
            driver.leave()
        assert not driver.finished  # the answer is lost with the connection
        session = endpoint.sessions.get(sid)
        assert session is not None
        running = session.channel.calls.get(("n", 3))
        assert running is not None and not running.cancelled, "a closed connection cancelled a legacy call"
        cancel = jsonrpc(None, "notifications/cancelled", {"requestId": 3})
        assert (await client.post(cancel, in_session(sid))).status_code == 202
        assert (await drop(client, root))["dropped"] is True  # the drop waits for the held call: it was cancelled
        endpoint.close()


async def _draining(endpoint: Endpoint, tg: anyio.abc.TaskGroup) -> anyio.Event:
    """Begin draining `endpoint` in `tg`; the event is set once the drain is over."""
    over = anyio.Event()

    async def drain() -> None:
        await endpoint.drain_calls(TIMEOUT)
        over.set()

    tg.start_soon(drain)
    await anyio.wait_all_tasks_blocked()
    assert endpoint.draining
    return over


async def test_a_drain_takes_a_sessions_cancel_and_delete_and_refuses_its_new_requests(
    server: McpServer, root: str
) -> None:
    """2025-11-25: `notifications/cancelled` and DELETE are how a client helps a drain finish; they start no work."""
    endpoint = Endpoint(server, HttpConfig(drain_linger=0), 8765)
    async with app_client(endpoint) as client:
        await warm(client, root)
        sid = await client.open_session()
        driver = Driver(endpoint, held_session_call(root))
        async with anyio.create_task_group() as tg:
            tg.start_soon(driver.run, driver.scope(headers=in_session(sid)))
            with anyio.fail_after(TIMEOUT):
                await driver.said.wait()  # the call runs: its preparation progress is on the wire
            over = await _draining(endpoint, tg)
            refused = await client.post(jsonrpc(4, "ping"), in_session(sid))
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            get = await client.http.get("/mcp", headers={"mcp-session-id": sid, "accept": "text/event-stream"})
            assert get.status_code == 503  # a new stream is new work too
            cancel = jsonrpc(None, "notifications/cancelled", {"requestId": 3})
            assert (await client.post(cancel, in_session(sid))).status_code == 202
            with anyio.fail_after(TIMEOUT):
                await driver.ended.wait()  # cancelled: its stream ends without a response
            assert [m.get("id") for m in events(driver.answer()[2])] == [None]  # the progress notification alone
            deleted = await client.http.delete("/mcp", headers={"mcp-session-id": sid})
            assert deleted.status_code == 204 and endpoint.sessions.get(sid) is None
            with anyio.fail_after(TIMEOUT):
                await over.wait()  # nothing left to answer: the drain is over
        assert (await client.post(jsonrpc(5, "ping"), in_session(sid))).status_code == 503
        endpoint.close()


async def test_a_drain_takes_modern_notifications_and_cancellation_and_refuses_new_requests(
    server: McpServer, root: str
) -> None:
    """2026-07-28: closing the response cancels a request; a notification starts nothing (202), a request is 503."""
    endpoint = Endpoint(server, HttpConfig(drain_linger=0), 8765)
    async with app_client(endpoint) as client:
        await warm(client, root)
        held = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="t")
        async with anyio.create_task_group() as tg:
            holder = await Driver(endpoint, held).start(tg, Driver.scope(headers=modern_headers(held)))
            over = await _draining(endpoint, tg)
            refused = await client.call_modern("tools/list")
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            note = jsonrpc(None, "notifications/cancelled", {"requestId": 1, "_meta": modern_meta()})
            assert (await client.post(note, {"mcp-protocol-version": MODERN})).status_code == 202
            assert not over.is_set()
            holder.leave()  # the client cancels by closing its response
            with anyio.fail_after(TIMEOUT):
                await over.wait()
        assert not holder.finished
        endpoint.close()


async def test_requests_beyond_the_cap_are_503_until_one_ends(server: McpServer, root: str) -> None:
    endpoint = Endpoint(server, HttpConfig(max_requests=1), 8765)
    async with app_client(endpoint) as client, anyio.create_task_group() as tg:
        await warm(client, root)
        held = call(1, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="t")
        holder = await Driver(endpoint, held).start(tg, Driver.scope(headers=modern_headers(held)))
        refused = await client.call_modern("tools/list")
        assert refused.status_code == 503 and error_code(refused) == INVALID_REQUEST
        assert refused.headers["connection"] == "close"
        holder.leave()
        await holder.ended.wait()
        assert (await client.call_modern("tools/list")).status_code == 200


async def test_listen_streams_share_the_server_limit_and_a_closed_one_frees_its_slot(server: McpServer) -> None:
    endpoint = Endpoint(server, HttpConfig(), 8765)
    params = {"notifications": {"resourceSubscriptions": ["lsp-diagnostics:///A.lean"]}}
    listens = [request(f"L{n}", "subscriptions/listen", params) for n in range(MAX_LISTENS + 1)]
    async with app_client(endpoint) as client, anyio.create_task_group() as tg:
        drivers = [await Driver(endpoint, m).start(tg, Driver.scope(headers=modern_headers(m))) for m in listens]
        *open_ones, refused = drivers
        assert all(d.status == 200 for d in open_ones) and refused.status == 400
        error = json.loads(refused.answer()[2])["error"]
        assert error["code"] == INVALID_REQUEST and error["data"] == {"limit": MAX_LISTENS}
        open_ones[0].leave()
        await open_ones[0].ended.wait()
        again = await Driver(endpoint, listens[0]).start(tg, Driver.scope(headers=modern_headers(listens[0])))
        assert again.status == 200
        for driver in (*open_ones, again):
            driver.leave()
        assert (await client.call_modern("tools/list")).status_code == 200


async def test_closing_a_get_stream_lets_another_open(server: McpServer) -> None:
    endpoint = Endpoint(server, HttpConfig(), 8765)
    async with app_client(endpoint) as client, anyio.create_task_group() as tg:
        sid = await client.open_session()
        get = Driver.scope("GET", {"mcp-session-id": sid, "accept": "text/event-stream"})
        first = await Driver(endpoint).start(tg, get)
        assert first.status == 200
        busy = await client.http.get("/mcp", headers={"mcp-session-id": sid, "accept": "text/event-stream"})
        assert busy.status_code == 409
        first.leave()
        await first.ended.wait()
        second = await Driver(endpoint).start(tg, get)
        assert second.status == 200
        endpoint.close()  # ends the session, and so its stream
