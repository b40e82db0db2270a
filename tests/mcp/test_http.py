"""Streamable HTTP: the endpoint's rules, both families over HTTP, SSE framing, cancellation, sessions, limits.

Everything runs in-process over a real loopback socket against the scripted fake broker (`http_support`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from beam_broker import CallContext, DiagnosticEvent, FileProgressEvent
from beam_mcp import _resources
from beam_mcp.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from .http_support import ACCEPT, Client, Response, Served, http_server, modern_headers
from .support import LEGACY, MODERN, TIMEOUT, FakeBroker, make_project, modern_meta

pytestmark = pytest.mark.anyio

INIT = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
SUB_ID = "io.modelcontextprotocol/subscriptionId"


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(make_project(tmp_path / "proj"))


def discover(rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {"_meta": modern_meta()}}


BASE = [
    ("content-type", "application/json"),
    ("accept", ACCEPT),
    ("mcp-protocol-version", MODERN),
    ("mcp-method", "server/discover"),
]


def edit(headers: list[tuple[str, str]], changes: dict[str, str | None]) -> list[tuple[str, str]]:
    """`headers` with each named header replaced (None removes it)."""
    out = [(k, v) for k, v in headers if k not in changes]
    return out + [(k, v) for k, v in changes.items() if v is not None]


def error_of(response: Response) -> int:
    body = response.json()
    assert "result" not in body, body
    code: int = body["error"]["code"]
    return code


def structured(message: dict[str, Any]) -> Any:
    return message["result"]["structuredContent"]


def published(version: int) -> dict[str, Any]:
    return {"availability": "published", "diagnostics": [], "version": version, "elaboration": "complete"}


def jsonrpc(rid: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    if params is not None:
        message["params"] = params
    return message


# ---- admission rules --------------------------------------------------------------------------------------------
# (id, request changes, expected status, expected JSON-RPC code); "{port}" is the server's port.
REJECTED: list[tuple[str, dict[str, Any], int, int]] = [
    ("a foreign Host", {"host": "evil.example:{port}"}, 403, INVALID_REQUEST),
    ("a foreign Host without a port", {"host": "evil.example"}, 403, INVALID_REQUEST),
    ("a foreign Origin", {"origin": "http://evil.example"}, 403, INVALID_REQUEST),
    ("Origin null", {"origin": "null"}, 403, INVALID_REQUEST),
    ("a loopback Origin on another port", {"origin": "http://localhost:1"}, 403, INVALID_REQUEST),
    ("an https loopback Origin", {"origin": "https://localhost:{port}"}, 403, INVALID_REQUEST),
    ("another path", {"target": "/other"}, 404, INVALID_REQUEST),
    ("the root path", {"target": "/"}, 404, INVALID_REQUEST),
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
    ("a body that is not JSON", {"body": b'{"jsonrpc": "2.0",'}, 400, PARSE_ERROR),
    ("a body with a repeated key", {"body": b'{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}'}, 400, PARSE_ERROR),
    ("a batch", {"body": json.dumps([discover()]).encode()}, 400, INVALID_REQUEST),
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


async def _send(s: Served, changes: dict[str, Any]) -> Response:
    changes = {k: v.format(port=s.port) if isinstance(v, str) else v for k, v in changes.items()}
    method = changes.pop("method", "POST")
    target = changes.pop("target", "/mcp")
    host = changes.pop("host", None)
    body = changes.pop("body", json.dumps(discover()).encode())
    return await s.request(method, edit(BASE, changes), body, target=target, host=host)


@pytest.mark.parametrize(("changes", "status", "code"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
async def test_the_endpoint_rejects_requests_that_break_a_rule(changes: dict[str, Any], status: int, code: int) -> None:
    async with http_server() as s:
        response = await _send(s, changes)
        assert response.status == status, response
        assert error_of(response) == code
        if status == 405:
            assert response.header("allow") is not None


@pytest.mark.parametrize("changes", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
async def test_the_endpoint_accepts_loopback_and_equivalent_spellings(changes: dict[str, Any]) -> None:
    async with http_server() as s:
        response = await _send(s, changes)
        assert response.status == 200, response
        assert response.json()["result"]["supportedVersions"] == [MODERN]


async def test_host_is_checked_before_origin_and_before_the_path() -> None:
    async with http_server() as s:
        response = await _send(s, {"host": "evil.example", "origin": "http://evil.example", "target": "/x"})
        assert response.status == 403 and "Host" in response.json()["error"]["message"]
        response = await _send(s, {"origin": "http://evil.example", "target": "/x"})
        assert response.status == 403 and "Origin" in response.json()["error"]["message"]


async def test_allowed_hosts_and_origins_extend_the_loopback_lists() -> None:
    hosts, origins = ("mcp.internal", "pinned.internal:9"), ("https://app.example",)
    async with http_server(allowed_hosts=hosts, allowed_origins=origins) as s:
        assert (await _send(s, {"host": "mcp.internal:8443"})).status == 200
        assert (await _send(s, {"host": "pinned.internal:9"})).status == 200
        assert (await _send(s, {"host": "pinned.internal:10"})).status == 403
        assert (await _send(s, {"origin": "https://app.example"})).status == 200
        assert (await _send(s, {"origin": "https://APP.example/"})).status == 200
        assert (await _send(s, {"origin": "http://app.example"})).status == 403


async def test_errors_before_the_body_keep_the_connection_usable() -> None:
    async with http_server() as s, s.client() as client:
        await client.send_request("POST", edit(BASE, {"content-type": "text/plain"}), b"{}")
        assert (await client.response()).status == 415
        await client.send_request("POST", BASE, json.dumps(discover()).encode())
        assert (await client.response()).status == 200


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
    async with http_server() as s:
        message = s.modern("tools/call", {"name": "beam_version", "arguments": {}}, rid="h1")
        response = await s.post(message, edit(modern_headers(message), changes))
        assert response.status == 400
        body = response.json()
        assert body["error"]["code"] == code and body["id"] == "h1"
        assert body["error"]["message"].startswith("header mismatch:")


async def test_a_routing_header_sent_twice_is_a_header_mismatch() -> None:
    async with http_server() as s:
        message = s.modern("tools/list")
        response = await s.post(message, [*modern_headers(message), ("mcp-method", "tools/list")])
        assert response.status == 400 and error_of(response) == HEADER_MISMATCH


async def test_mcp_name_may_be_base64_and_resources_read_mirrors_its_uri(tmp_path: Path) -> None:
    async with http_server() as s:
        message = s.modern("tools/call", {"name": "beam_version", "arguments": {}})
        response = await s.post(message, edit(modern_headers(message), {"mcp-name": "=?base64?YmVhbV92ZXJzaW9u?="}))
        assert response.status == 200 and structured(response.json())["name"] == "lean-beam-mcp"
        target = _resources.path_to_uri(str(tmp_path / "A é.lean"))
        read = s.modern("resources/read", {"uri": target})
        assert (await s.post(read, modern_headers(read))).status == 200
        assert (await s.post(read, edit(modern_headers(read), {"mcp-name": None}))).status == 400


async def test_modern_metadata_and_revision_errors_are_400() -> None:
    async with http_server() as s:
        bare = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        response = await s.post(bare, [("mcp-protocol-version", MODERN), ("mcp-method", "tools/list")])
        assert response.status == 400 and error_of(response) == INVALID_PARAMS
        future = s.modern("tools/list", protocolVersion="2099-01-01")
        response = await s.post(future, modern_headers(future, "2099-01-01"))
        assert response.status == 400 and error_of(response) == UNSUPPORTED_PROTOCOL_VERSION
        assert response.json()["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


async def test_modern_errors_map_to_http_statuses() -> None:
    async with http_server() as s:
        unknown = await s.call_modern("prompts/list")
        assert unknown.status == 404 and error_of(unknown) == METHOD_NOT_FOUND
        init = await s.call_modern("initialize")
        assert init.status == 404 and error_of(init) == METHOD_NOT_FOUND
        no_tool = await s.call_modern("tools/call", {"name": "lean_nonexistent", "arguments": {}})
        assert no_tool.status == 400 and error_of(no_tool) == INVALID_PARAMS
        tool_error = await s.call_modern("tools/call", {"name": "lean_sync", "arguments": {"workspace": {}}})
        assert tool_error.status == 200 and tool_error.json()["result"]["isError"] is True


async def test_an_internal_error_is_500() -> None:
    class Broken:
        async def __aenter__(self) -> Any:
            raise RuntimeError("no broker today")

        async def __aexit__(self, *exc: object) -> None:
            return None

    async with http_server(server_broker_factory=Broken) as s:
        response = await s.call_modern("tools/list")
        assert response.status == 500 and error_of(response) == INTERNAL_ERROR


async def test_modern_results_without_notifications_are_json() -> None:
    async with http_server() as s:
        response = await s.call_modern("tools/list")
        assert response.status == 200 and response.content_type == "application/json"
        result = response.json()["result"]
        assert result["resultType"] == "complete" and result["tools"][0]["name"] == "beam_version"
        assert response.header("mcp-session-id") is None


async def test_a_call_with_progress_answers_with_an_event_stream_ending_in_its_response(root: str) -> None:
    async def sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        ctx.emit(FileProgressEvent("A.lean", {"updates": 1, "done": False, "range_end_line": 3}))
        ctx.emit(FileProgressEvent("A.lean", {"updates": 9, "done": True}))
        return {"version": 1}

    async with http_server() as s:
        s.broker.handlers["sync"] = sync
        args = {"name": "lean_sync", "arguments": {"workspace": {"root": root}, "path": "A.lean"}}
        response = await s.call_modern("tools/call", args, progressToken="p")
        assert response.status == 200 and response.content_type == "text/event-stream"
        assert response.header("cache-control") == "no-cache, no-transform"
        assert response.body.startswith(b"event: message\ndata: {") and response.body.endswith(b"}\n\n")
        *notes, final = response.events()
        assert [n["method"] for n in notes] == ["notifications/progress"] * 3
        assert [n["params"]["progress"] for n in notes] == [1, 2, 3]
        assert notes[0]["params"]["message"] == "lean_sync on A.lean: preparing the Lean workspace"
        assert "done=true" in notes[2]["params"]["message"]
        assert structured(final)["version"] == 1 and final["result"]["resultType"] == "complete"


async def test_request_scoped_logs_travel_on_their_own_response(root: str) -> None:
    item = {"path": "A.lean", "severity": "error", "message": "boom", "version": 1}

    async def sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        ctx.emit(DiagnosticEvent(item))
        return {}

    async with http_server() as s:
        s.broker.handlers["sync"] = sync
        args = {"name": "lean_sync", "arguments": {"workspace": {"root": root}, "path": "A.lean"}}
        quiet = await s.call_modern("tools/call", args)
        assert quiet.content_type == "application/json"  # no logLevel: no logs, so no stream
        loud = await s.call_modern("tools/call", args, logLevel="error")
        [log, final] = loud.events()
        assert log["method"] == "notifications/message" and log["params"]["logger"] == "lean.diagnostic"
        assert "result" in final


async def test_a_silent_call_is_kept_alive_with_sse_comments(root: str) -> None:
    release = anyio.Event()

    async def slow(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        await release.wait()
        return {"slow": True}

    async with http_server(keepalive=0.05) as s, s.client() as client:
        s.broker.handlers["update"] = slow
        message = s.modern("tools/call", {"name": "lean_update", "arguments": {"workspace": {"root": root}}})
        await client.post_modern(message)
        head = await client.head()
        assert head.status_code == 200 and dict(head.headers)[b"content-type"] == b"text/event-stream"
        assert await client.chunk() == b": keepalive\n\n"
        release.set()
        final = await client.next_message()
        assert final is not None and structured(final)["slow"] is True
        assert await client.next_message() is None


async def test_notifications_are_accepted_with_202() -> None:
    async with http_server() as s:
        for note in (
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"_meta": modern_meta()}},
        ):
            response = await s.post(note)
            assert (response.status, response.body) == (202, b"")


async def test_a_bare_request_needs_a_session_or_modern_metadata() -> None:
    async with http_server() as s:
        response = await s.post({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        assert response.status == 400 and error_of(response) == INVALID_REQUEST
        assert response.json()["id"] == 5 and "Mcp-Session-Id" in response.json()["error"]["message"]
        legacy_header = await s.post(
            {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, [("mcp-protocol-version", LEGACY)]
        )
        assert legacy_header.status == 400 and error_of(legacy_header) == INVALID_REQUEST


async def test_every_modern_request_is_independent_so_ids_may_repeat_concurrently(root: str) -> None:
    release = anyio.Event()
    started = anyio.Event()

    async def slow(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"slow": True}

    async with http_server() as s, s.client() as client:
        s.broker.handlers["sync"] = slow
        message = s.modern("tools/call", {"name": "lean_sync", "arguments": {"workspace": {"root": root}}}, rid=7)
        await client.post_modern(message)
        with anyio.fail_after(TIMEOUT):
            await started.wait()
        other = s.modern("tools/call", {"name": "beam_version", "arguments": {}}, rid=7)
        response = await s.post(other, modern_headers(other))
        assert response.json()["id"] == 7 and structured(response.json())["name"] == "lean-beam-mcp"
        release.set()
        assert structured((await client.response()).json())["slow"] is True


# ---- cancellation -----------------------------------------------------------------------------------------------
async def test_closing_the_connection_cancels_the_call(root: str) -> None:
    started, stopped = anyio.Event(), anyio.Event()

    async def forever(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError

    async with http_server() as s:
        s.broker.handlers["sync"] = forever
        async with s.client() as client:
            args = {"name": "lean_sync", "arguments": {"workspace": {"root": root}, "path": "A.lean"}}
            message = s.modern("tools/call", args, progressToken="t")
            await client.post_modern(message)
            assert (await client.head()).status_code == 200
            first = await client.next_message()
            assert first is not None and first["method"] == "notifications/progress"
            with anyio.fail_after(TIMEOUT):
                await started.wait()
        with anyio.fail_after(TIMEOUT):
            await stopped.wait()
        assert s.broker.cancelled == ["sync"]
        assert (await s.call_modern("tools/list")).status == 200  # the server carries on


async def test_closing_the_connection_does_not_cancel_a_drop(root: str) -> None:
    started, release, finished = anyio.Event(), anyio.Event(), anyio.Event()

    async def drop(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        await release.wait()
        finished.set()
        return {}

    async with http_server() as s:
        s.broker.handlers["drop_workspace"] = drop
        async with s.client() as client:
            message = s.modern(
                "tools/call", {"name": "lean_drop_workspace", "arguments": {"workspace": {"root": root}}}
            )
            await client.post_modern(message)
            with anyio.fail_after(TIMEOUT):
                await started.wait()
        release.set()
        with anyio.fail_after(TIMEOUT):
            await finished.wait()
        assert s.broker.cancelled == []
        after = await s.call_modern("tools/call", {"name": "lean_update", "arguments": {"workspace": {"root": root}}})
        assert after.status == 200 and s.broker.finished == ["drop_workspace", "update"]


async def test_the_drop_fence_spans_http_requests(root: str) -> None:
    order: list[str] = []
    release = anyio.Event()
    started = anyio.Event()

    async def slow_sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        await release.wait()
        order.append("sync")
        return {}

    async def drop(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        order.append("drop")
        return {}

    async with http_server() as s, anyio.create_task_group() as tg:
        s.broker.handlers.update(sync=slow_sync, drop_workspace=drop)
        ws = {"workspace": {"root": root}}
        tg.start_soon(s.call_modern, "tools/call", {"name": "lean_sync", "arguments": {**ws, "path": "A.lean"}})
        with anyio.fail_after(TIMEOUT):
            await started.wait()
        async with s.client() as client:
            message = s.modern("tools/call", {"name": "lean_drop_workspace", "arguments": ws}, progressToken="d")
            await client.post_modern(message)
            await client.head()
            prep = await client.next_message()  # the drop's preparation comes before it waits behind the sync
            assert prep is not None and prep["params"]["message"] == "lean_drop_workspace: preparing workspace eviction"
            assert order == []
            release.set()
            final = await client.next_message()
            assert final is not None and structured(final)["dropped"] is True
        assert order == ["sync", "drop"]


# ---- legacy sessions --------------------------------------------------------------------------------------------
async def open_session(s: Served) -> str:
    response = await s.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
    assert response.status == 200 and response.json()["result"]["protocolVersion"] == LEGACY
    sid = response.header("mcp-session-id")
    assert sid is not None and 40 <= len(sid) <= 64 and sid.isascii()
    return sid


def in_session(sid: str, *extra: tuple[str, str]) -> list[tuple[str, str]]:
    return [("mcp-session-id", sid), ("mcp-protocol-version", LEGACY), *extra]


async def test_a_legacy_session_lives_from_initialize_to_delete() -> None:
    async with http_server() as s:
        sid = await open_session(s)
        early = await s.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, in_session(sid))
        assert early.status == 200 and error_of(early) == INVALID_REQUEST  # notifications/initialized first
        initialized = await s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, in_session(sid))
        assert initialized.status == 202
        tools = await s.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, [("mcp-session-id", sid)])
        assert tools.status == 200 and "resultType" not in tools.json()["result"]
        again = await s.post({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": INIT}, in_session(sid))
        assert error_of(again) == INVALID_REQUEST and again.status == 200  # legacy errors are in the body
        unknown = await s.post({"jsonrpc": "2.0", "id": 4, "method": "ping"}, in_session(sid))
        assert unknown.json()["result"] == {}
        wrong = await s.post(
            {"jsonrpc": "2.0", "id": 5, "method": "ping"}, edit(in_session(sid), {"mcp-protocol-version": MODERN})
        )
        assert wrong.status == 400 and error_of(wrong) == INVALID_REQUEST
        deleted = await s.request("DELETE", [("mcp-session-id", sid)])
        assert (deleted.status, deleted.body) == (204, b"")
        gone = await s.post({"jsonrpc": "2.0", "id": 6, "method": "ping"}, in_session(sid))
        assert gone.status == 404 and error_of(gone) == INVALID_REQUEST
        assert (await s.request("DELETE", [("mcp-session-id", sid)])).status == 404


async def test_an_unknown_session_is_404_and_a_failed_initialize_opens_none() -> None:
    async with http_server() as s:
        response = await s.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, [("mcp-session-id", "nope")])
        assert response.status == 404
        bad = await s.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
        assert error_of(bad) == INVALID_PARAMS and bad.header("mcp-session-id") is None


async def test_sessions_are_independent(root: str) -> None:
    item = {"path": "A.lean", "severity": "warning", "message": "w", "version": 1}

    async def sync(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        ctx.emit(DiagnosticEvent(item))
        return {}

    async with http_server() as s:
        s.broker.handlers["sync"] = sync
        quiet, loud = await open_session(s), await open_session(s)
        for sid in (quiet, loud):
            await s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, in_session(sid))
        await s.post(
            {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "error"}}, in_session(quiet)
        )
        call = {"name": "lean_sync", "arguments": {"workspace": {"root": root}, "path": "A.lean"}}
        for sid, logs in ((quiet, 0), (loud, 1)):
            response = await s.post(
                {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}, in_session(sid)
            )
            if logs:
                assert [m.get("method") for m in response.events()] == ["notifications/message", None]
            else:
                assert "result" in response.json()


async def test_a_legacy_call_reports_progress_on_its_response_and_ids_are_per_session(root: str) -> None:
    release, started = anyio.Event(), anyio.Event()

    async def slow(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"done": True}

    async with http_server() as s:
        s.broker.handlers["sync"] = slow
        sid = await open_session(s)
        await s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, in_session(sid))
        call = {"name": "lean_sync", "arguments": {"workspace": {"root": root}}, "_meta": {"progressToken": 1}}
        body = json.dumps({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": call}).encode()
        async with s.client() as client:
            await client.send_request("POST", [*BASE[:2], *in_session(sid)], body)
            await client.head()
            progress = await client.next_message()
            assert progress is not None and progress["params"]["progressToken"] == 1
            with anyio.fail_after(TIMEOUT):
                await started.wait()
            reused = await s.post({"jsonrpc": "2.0", "id": "x", "method": "ping"}, in_session(sid))
            assert reused.status == 400 and error_of(reused) == INVALID_REQUEST
            other = await open_session(s)  # another session may use the same id
            await s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, in_session(other))
            assert "result" in (await s.post({"jsonrpc": "2.0", "id": "x", "method": "ping"}, in_session(other))).json()
            release.set()
            final = await client.next_message()
            assert final is not None and structured(final)["done"] is True


async def test_a_legacy_cancellation_from_another_post_ends_the_call_without_a_response(root: str) -> None:
    started, stopped = anyio.Event(), anyio.Event()

    async def forever(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError

    async with http_server() as s:
        s.broker.handlers["sync"] = forever
        sid = await open_session(s)
        await s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, in_session(sid))
        call = {"name": "lean_sync", "arguments": {"workspace": {"root": root}}}
        async with s.client() as client:
            body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}).encode()
            await client.send_request("POST", [*BASE[:2], *in_session(sid)], body)
            with anyio.fail_after(TIMEOUT):
                await started.wait()
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
            assert (await s.post(cancel, in_session(sid))).status == 202
            response = await client.response()
            assert response.status == 200 and response.events() == []
        with anyio.fail_after(TIMEOUT):
            await stopped.wait()


async def test_at_most_max_sessions_are_open() -> None:
    async with http_server(max_sessions=2) as s:
        first = await open_session(s)
        await open_session(s)
        full = await s.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
        assert full.status == 429 and error_of(full) == INVALID_REQUEST and full.header("mcp-session-id") is None
        assert (await s.request("DELETE", [("mcp-session-id", first)])).status == 204
        await open_session(s)


async def test_idle_sessions_expire() -> None:
    async with http_server(session_idle=0.1) as s:
        sid = await open_session(s)
        with anyio.fail_after(TIMEOUT):
            while True:
                await anyio.sleep(0.3)  # quiet for longer than the idle time (a request would refresh it)
                if (await s.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, in_session(sid))).status == 404:
                    break


async def test_the_get_stream_carries_a_sessions_resource_updates(tmp_path: Path) -> None:
    path = str(tmp_path / "A.lean")
    broker = FakeBroker()
    broker.publish(path, published(1))
    async with http_server(broker) as s:
        sid = await open_session(s)
        await s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, in_session(sid))
        target = _resources.path_to_uri(path)
        subscribe = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": target}}
        assert (await s.post(subscribe, in_session(sid))).json()["result"] == {}
        no_accept = await s.request("GET", [("mcp-session-id", sid), ("accept", "application/json")])
        assert no_accept.status == 406
        async with s.client() as client:
            await client.send_request("GET", [("mcp-session-id", sid), ("accept", "text/event-stream")])
            assert (await client.head()).status_code == 200
            replay = await client.next_message()  # queued while no stream was open
            assert replay == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": target}}
            second = await s.request("GET", [("mcp-session-id", sid), ("accept", "text/event-stream")])
            assert second.status == 409
            broker.publish(path, published(2))
            update = await client.next_message()
            assert update is not None and update["params"] == {"uri": target}
            assert (await s.request("DELETE", [("mcp-session-id", sid)])).status == 204
            assert await client.next_message() is None  # the session ended: so does its stream


# ---- listen streams ---------------------------------------------------------------------------------------------
async def test_a_listen_stream_acknowledges_updates_and_ends_at_its_lease_without_a_result(tmp_path: Path) -> None:
    path = str(tmp_path / "A.lean")
    target = _resources.path_to_uri(path)
    async with http_server(stream_lease=(0.3, 0.4)) as s, s.client() as client:
        message = s.modern("subscriptions/listen", {"notifications": {"resourceSubscriptions": [target]}}, rid="L")
        await client.post_modern(message)
        head = await client.head()
        assert head.status_code == 200 and dict(head.headers)[b"content-type"] == b"text/event-stream"
        ack = await client.next_message()
        assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"] == {"notifications": {"resourceSubscriptions": [target]}, "_meta": {SUB_ID: "L"}}
        s.broker.publish(path, published(1))
        update = await client.next_message()
        assert update == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": target, "_meta": {SUB_ID: "L"}},
        }
        with anyio.fail_after(TIMEOUT):
            assert await client.next_message() is None  # the lease ended the stream, with no final result
        # The connection stays usable, and the subscription is gone.
        await client.send_request("POST", BASE, json.dumps(discover()).encode())
        assert (await client.response()).status == 200
        s.broker.publish(path, published(2))


async def test_a_listen_that_honours_nothing_closes_gracefully_with_its_result() -> None:
    async with http_server() as s:
        response = await s.call_modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        ack, final = response.events()
        assert ack["method"] == "notifications/subscriptions/acknowledged" and ack["params"]["notifications"] == {}
        assert final["result"]["_meta"][SUB_ID] == final["id"]


async def test_listen_streams_share_the_server_limit_and_a_closed_one_frees_its_slot(tmp_path: Path) -> None:
    target = _resources.path_to_uri(str(tmp_path / "A.lean"))
    params = {"notifications": {"resourceSubscriptions": [target]}}
    async with http_server() as s, anyio.create_task_group() as tg:
        opened: list[anyio.Event] = []
        closers: list[anyio.Event] = []

        async def listen(ready: anyio.Event, close: anyio.Event) -> None:
            async with s.client() as client:
                message = s.modern("subscriptions/listen", params)
                await client.post_modern(message)
                await client.head()
                assert await client.next_message() is not None
                ready.set()
                await close.wait()

        for _ in range(_resources.MAX_LISTENS):
            opened.append(anyio.Event())
            closers.append(anyio.Event())
            tg.start_soon(listen, opened[-1], closers[-1])
        with anyio.fail_after(TIMEOUT):
            for event in opened:
                await event.wait()
        full = await s.call_modern("subscriptions/listen", params)
        assert full.status == 400 and error_of(full) == INVALID_REQUEST
        assert full.json()["error"]["data"] == {"limit": _resources.MAX_LISTENS}
        closers[0].set()
        with anyio.fail_after(TIMEOUT):
            while True:
                async with s.client() as client:
                    message = s.modern("subscriptions/listen", params)
                    await client.send_request(
                        "POST", [*BASE[:2], *modern_headers(message)], json.dumps(message).encode()
                    )
                    if (await client.head()).status_code == 200:
                        break
                    await client.response()
                await anyio.sleep(0.02)
        for close in closers:
            close.set()


# ---- limits and timeouts ----------------------------------------------------------------------------------------
async def test_a_body_over_4_mib_is_413_without_being_read() -> None:
    async with http_server() as s, s.client() as client:
        head = f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{s.port}\r\ncontent-type: application/json\r\n"
        head += f"accept: {ACCEPT}\r\ncontent-length: {4 * 1024 * 1024 + 1}\r\n\r\n"
        await client.send_raw(head.encode())
        response = await client.response()
        assert response.status == 413 and error_of(response) == INVALID_REQUEST
        assert response.header("connection") == "close"


async def test_a_chunked_body_over_the_limit_is_413() -> None:
    async with http_server(max_body=1000) as s, s.client() as client:
        headers = [("content-type", "application/json"), ("accept", ACCEPT), ("transfer-encoding", "chunked")]
        await client.send_request("POST", headers, b" " * 2000)
        assert (await client.response()).status == 413


async def test_a_stalled_head_is_408_and_an_idle_connection_is_closed_quietly() -> None:
    async with http_server(header_timeout=0.2) as s:
        async with s.client() as client:
            await client.send_raw(f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{s.port}\r\n".encode())
            response = await client.response()
            assert response.status == 408 and error_of(response) == INVALID_REQUEST
        async with s.client() as client:
            assert await client.closed_by_server()


async def test_a_stalled_body_is_408() -> None:
    async with http_server(body_timeout=0.2) as s, s.client() as client:
        head = f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{s.port}\r\ncontent-type: application/json\r\n"
        await client.send_raw((head + f"accept: {ACCEPT}\r\ncontent-length: 10\r\n\r\n{{}}").encode())
        assert (await client.response()).status == 408


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"NOT HTTP\r\n\r\n", 400),
        (b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * (70 * 1024) + b"\r\n\r\n", 431),
        (b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * (200 * 1024) + b"\r\n\r\n", 431),
    ],
    ids=["a malformed request line", "an oversized head", "a head past the parser limit"],
)
async def test_malformed_or_oversized_heads_are_refused(raw: bytes, status: int) -> None:
    async with http_server() as s, s.client() as client:
        await client.send_raw(raw)
        assert (await client.response()).status == status


async def test_connections_beyond_the_limit_are_refused_with_503() -> None:
    async with http_server(max_connections=2) as s, s.client() as one, s.client() as two:
        await one.send_raw(b"POST")  # both are open and counted
        await two.send_raw(b"POST")
        async with s.client() as three:
            response = await three.response()
            assert response.status == 503 and error_of(response) == INVALID_REQUEST
        await one.send_raw(f" /mcp HTTP/1.1\r\nhost: 127.0.0.1:{s.port}\r\ncontent-length: 0\r\n\r\n".encode())
        assert (await one.response()).status == 415


async def test_a_body_behind_expect_100_continue_is_read_at_once() -> None:
    async with http_server() as s, s.client() as client:
        body = json.dumps(discover()).encode()
        await client.send_request("POST", [*BASE, ("expect", "100-continue")], body)
        response = await client.response()
        assert response.status == 200 and response.json()["result"]["resultType"] == "complete"


async def test_a_client_that_stops_reading_is_dropped_after_the_write_timeout(root: str) -> None:
    returned = anyio.Event()
    padding = 8_000_000

    async def huge(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        returned.set()
        return {"padding": "x" * padding}

    async with http_server(write_timeout=0.2) as s, s.client() as client:
        # A small, fixed receive buffer (no autotuning): the response cannot fit in what the kernel holds.
        raw = client.stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.broker.handlers["update"] = huge
        await client.post_modern(
            s.modern("tools/call", {"name": "lean_update", "arguments": {"workspace": {"root": root}}})
        )
        with anyio.fail_after(TIMEOUT):
            await returned.wait()
        await anyio.sleep(2)  # not reading, for ten times the write timeout
        received = 0
        with anyio.fail_after(TIMEOUT):
            while True:
                try:
                    received += len(await client.stream.receive())
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        assert received < 2 * padding  # the server gave up and closed the connection mid-response
        assert (await s.call_modern("tools/list")).status == 200


async def test_one_connection_serves_requests_one_after_another() -> None:
    async with http_server() as s, s.client() as client:
        for rid in range(3):
            await client.send_request("POST", BASE, json.dumps(discover(rid)).encode())
            assert (await client.response()).json()["id"] == rid


# ---- the command --------------------------------------------------------------------------------------------------
async def test_the_command_serves_http_on_a_free_port_and_stops_on_sigterm() -> None:
    proc = await anyio.open_process([sys.executable, "-m", "beam_mcp", "--http", "127.0.0.1:0"])
    async with proc:
        try:
            assert proc.stderr is not None
            line = b""
            with anyio.fail_after(60):
                while b"\n" not in line:
                    line += await proc.stderr.receive()
            text = line.decode()
            assert text.startswith("lean-beam-mcp: serving MCP over Streamable HTTP at http://127.0.0.1:")
            url = text.split(" at ", 1)[1].split()[0]
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            assert url == f"http://127.0.0.1:{port}/mcp"
            async with Client.connect(port) as client:
                await client.send_request("POST", BASE, json.dumps(discover()).encode())
                assert (await client.response()).status == 200
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(60):
                assert await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--http", "nope"], "no valid port"),
        (["--http", "::1:80"], "brackets"),
        (["--http", "127.0.0.1:99999"], "no valid port"),
        (["--allowed-host", "x"], "need --http"),
        (["--http", "127.0.0.1:0", "--self-check", "A.lean"], "cannot be combined"),
    ],
)
def test_bad_http_arguments_are_usage_errors(args: list[str], fragment: str) -> None:
    done = subprocess.run([sys.executable, "-m", "beam_mcp", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and fragment in done.stderr


def test_an_address_in_use_exits_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "beam_mcp", "--http", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert done.returncode == 1 and f"cannot serve HTTP on 127.0.0.1:{port}" in done.stderr
