"""The abuse table of issue 10: each numbered finding, on stdio and over HTTP where both apply.

Every row failed before the hardening and passes now; rows that only one layer can show (the broker's
file-reading rules, the HTTP starvation rules) are tested there too. Both transports here run the real broker
over the fake Lean server; stdio is the in-process stdio channel of `McpServer`, HTTP the ASGI app through httpx.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_mcp import ServerConfig
from tests.mcp import http_support as web
from tests.mcp.support import INIT, harness, make_project, modern_meta
from tests.support.fixtures import fake_cmd

pytestmark = pytest.mark.anyio

INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SECRET = "s3cr3t-t0ken-value"
FILES = {"A.lean": "theorem a : True := by\n  trivial\n", "B.lean": "def b := ERROR_HERE\n"}


class Transport:
    """One way to reach a server: send raw bytes or a tool call, get the final JSON-RPC answer."""

    async def raw(self, line: bytes) -> dict[str, Any]:
        raise NotImplementedError

    async def call(self, name: str, arguments: Any) -> dict[str, Any]:
        raise NotImplementedError

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class Stdio(Transport):
    def __init__(self, h: Any) -> None:
        self.h = h

    async def raw(self, line: bytes) -> dict[str, Any]:
        await self.h.send(line)
        with anyio.fail_after(20):
            return dict(await self.h.recv())

    async def call(self, name: str, arguments: Any) -> dict[str, Any]:
        response, _ = await self.h.call(name, arguments)
        return dict(response)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return dict(await self.h.request(method, {**params, "_meta": modern_meta()}))


class Http(Transport):
    def __init__(self, client: web.Client) -> None:
        self.client = client

    async def raw(self, line: bytes) -> dict[str, Any]:
        response = await self.client.post(line, {"mcp-protocol-version": "2026-07-28"})
        return web.final(response)

    async def call(self, name: str, arguments: Any) -> dict[str, Any]:
        return web.final(await self.client.modern(web.call(next(self.client.ids), name, arguments)))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return web.final(await self.client.call_modern(method, params))


@contextlib.asynccontextmanager
async def reach(kind: str, lean: dict[str, Any] | None = None, **config: Any) -> AsyncIterator[Transport]:
    if kind == "stdio":
        async with harness(lean, **config) as h:
            yield Stdio(h)
    else:
        config.setdefault("lean_cmd", fake_cmd(lean))
        config.setdefault("status_delay", 60.0)
        async with web.in_process(ServerConfig(**config)) as client:
            yield Http(client)


def tool_error(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" in response and response["result"]["isError"] is True, response
    error: dict[str, Any] = response["result"]["structuredContent"]
    return error


def no_internal_error(response: dict[str, Any]) -> None:
    assert response.get("error", {}).get("code") != INTERNAL_ERROR, response
    if "result" in response and response["result"].get("isError"):
        assert response["result"]["structuredContent"]["code"] != "internalError", response


BOTH = pytest.mark.parametrize("kind", ["stdio", "http"])


# ---- 1. one message kills it -------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list","params":{}}',
        b'{"jsonrpc":"2.0","id":1,"method":"\\ud800","params":{}}',
        b'{"jsonrpc":"2.0","id":"\\udfff","method":"tools/call","params":{"name":"\\ud800"}}',
    ],
)
async def test_1_a_lone_surrogate_in_an_id_method_or_name_is_answered_and_the_server_lives(
    kind: str, line: bytes
) -> None:
    async with reach(kind) as t:
        answer = await t.raw(line)
        assert "error" in answer and answer["error"]["code"] != INTERNAL_ERROR
        assert answer["id"] in ("\ud800", "\udfff", 1, None)  # echoed exactly (as a \udXXX escape on the wire)
        version = await t.call("beam_version", {})
        assert version["result"]["structuredContent"]["name"] == "lean-beam-mcp"


@BOTH
async def test_1_invalid_utf8_inside_a_json_string_is_a_parse_error(kind: str) -> None:
    async with reach(kind) as t:
        answer = await t.raw(b'{"jsonrpc":"2.0","id":1,"method":"tools/\xed\xa0\x80list"}')
        assert answer["error"]["code"] == PARSE_ERROR and answer["id"] is None
        assert "result" in await t.call("beam_version", {})


# ---- 2. special files as sources -----------------------------------------------------------------------------------
@BOTH
async def test_2_a_device_as_a_source_is_refused_at_once(kind: str, tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    async with reach(kind) as t:
        with anyio.fail_after(20):
            answer = await t.call("lean_sync", {"workspace": {"root": str(root)}, "path": "/dev/zero"})
        assert tool_error(answer)["code"] == "invalidParams"


@BOTH
async def test_2_a_fifo_as_a_source_never_blocks_and_a_later_drop_and_call_work(kind: str, tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    os.mkfifo(root / "F.lean")
    ws = {"workspace": {"root": str(root)}}
    async with reach(kind) as t:
        with anyio.fail_after(20):
            assert tool_error(await t.call("lean_update", {**ws, "path": "F.lean"}))["code"] == "invalidParams"
            assert "result" in await t.call("lean_drop_workspace", ws)
            synced = await t.call("lean_sync", {**ws, "path": "A.lean"})
        assert synced["result"]["isError"] is False


# ---- 3. NUL bytes and lone surrogates in arguments -------------------------------------------------------------------
ARGUMENT_CASES = [
    ("lean_sync", "path", "A\x00.lean"),
    ("lean_sync", "path", "A\ud800.lean"),
    ("lean_run_at", "text", "trivial\x00"),
    ("lean_workspace_symbols", "query", "a\udc00"),
    ("lean_hover", "path", "\x00"),
    ("beam_feedback_report", "title", "t\x00itle"),
]


@BOTH
@pytest.mark.parametrize(("tool", "field", "value"), ARGUMENT_CASES)
async def test_3_nul_or_a_lone_surrogate_is_invalid_input_naming_the_field(
    kind: str, tool: str, field: str, value: str, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "p", FILES)
    bases: dict[str, dict[str, Any]] = {
        "lean_sync": {"path": "A.lean"},
        "lean_run_at": {"path": "A.lean", "version": 1, "line": 1, "character": 2, "text": "trivial"},
        "lean_workspace_symbols": {"query": "a"},
        "lean_hover": {"path": "A.lean", "version": 1, "line": 0, "character": 0},
        "beam_feedback_report": {"title": "t", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a"},
    }
    base = bases[tool]
    async with reach(kind) as t:
        answer = await t.call(tool, {**base, field: value, "workspace": {"root": str(root)}})
        error = tool_error(answer)
        assert error["code"] == "invalidInput" and field in error["message"], error


@BOTH
async def test_3_nul_in_the_workspace_root_is_invalid_input(kind: str, tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    async with reach(kind) as t:
        answer = await t.call("lean_sync", {"workspace": {"root": f"{root}\x00"}, "path": "A.lean"})
        assert tool_error(answer)["code"] == "invalidInput"


# ---- 5. secrets in the Lean command ----------------------------------------------------------------------------------
@BOTH
async def test_5_a_failing_lean_command_never_echoes_its_secret_flag(kind: str, tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    lean_cmd = [str(tmp_path / "no-such-lean-server"), f"--auth-token={SECRET}"]
    async with reach(kind, lean_cmd=lean_cmd) as t:
        answer = await t.call("lean_sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
    assert answer["error"]["code"] == INVALID_REQUEST
    assert answer["error"]["message"].startswith("could not set up Lean Beam MCP runtime: ")
    assert SECRET not in json.dumps(answer, ensure_ascii=False)


# ---- 6. writes outside the workspace ---------------------------------------------------------------------------------
async def test_6_a_symlinked_beam_directory_refuses_the_bundle(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".beam").symlink_to(elsewhere)
    report = {"title": "t", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a", "bundle": "dir"}
    async with reach("stdio") as t:
        answer = await t.call("beam_feedback_report", {**report, "workspace": {"root": str(root)}})
    assert tool_error(answer)["code"] != "internalError"
    assert list(elsewhere.iterdir()) == []


# ---- 7. option injection into Lake -----------------------------------------------------------------------------------
async def test_7_a_file_named_like_an_option_never_reaches_lake_as_one(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", {**FILES, "--help.lean": "theorem h : True := trivial\n"})
    async with reach("stdio") as t:
        answer = await t.call("lean_save", {"workspace": {"root": str(root)}, "path": "--help.lean"})
    assert tool_error(answer)["code"] == "saveTargetNotModule"


# ---- 8. no false clean after a close ---------------------------------------------------------------------------------
@BOTH
async def test_8_a_closed_file_with_errors_never_reads_clean(kind: str, tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    ws = {"workspace": {"root": str(root)}}
    uri = "lsp-diagnostics://" + str(root / "B.lean")
    async with reach(kind) as t:
        assert (await t.call("lean_sync", {**ws, "path": "B.lean"}))["result"]["isError"] is False
        assert (await t.call("lean_close", {**ws, "path": "B.lean"}))["result"]["isError"] is False
        read = await t.request("resources/read", {"uri": uri})
    document = json.loads(read["result"]["contents"][0]["text"])
    assert document["open"] is False
    assert document["diagnostics"], document  # what Lean said while it was open, not the close's empty list


# ---- 10. lax inputs --------------------------------------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("lean_hover", {"path": "A.lean", "version": 1, "line": "3", "character": 0}),
        ("lean_sync", {"path": "A.lean", "diagnostics_in_result": "true"}),
        ("lean_references", {"path": "A.lean", "version": "1", "line": 0, "character": 0}),
    ],
)
async def test_10_strings_are_not_coerced_to_integers_or_booleans(
    kind: str, tool: str, arguments: dict[str, Any], tmp_path: Path
) -> None:
    root = make_project(tmp_path / "p", FILES)
    async with reach(kind) as t:
        answer = await t.call(tool, {**arguments, "workspace": {"root": str(root)}})
    assert tool_error(answer)["code"] == "invalidInput"


# ---- 11. protocol details (2025-11-25) -------------------------------------------------------------------------------
async def test_11_ping_task_member_and_resource_templates() -> None:
    async with harness() as h:
        assert "result" in await h.request("initialize", INIT)
        assert (await h.request("ping"))["result"] == {}  # before notifications/initialized
        await h.notify("notifications/initialized")
        listed = await h.request("resources/templates/list")
        assert listed["result"]["resourceTemplates"][0]["uriTemplate"].startswith("lsp-diagnostics:///")
        called = await h.request("tools/call", {"name": "beam_version", "arguments": {}, "task": {"ttl": 1000}})
        assert called["result"]["isError"] is False


# ---- 12. the first request of a fresh process ---------------------------------------------------------------------
async def test_12_feedback_as_the_first_request_of_a_fresh_process_works(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    report = {"title": "t", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a"}
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "beam_feedback_report",
            "arguments": {**report, "workspace": {"root": str(root)}},
            "_meta": modern_meta(),
        },
    }
    follow = {
        **message,
        "id": 2,
        "params": {
            **message["params"],
            "name": "lean_sync",
            "arguments": {"workspace": {"root": str(root)}, "path": "A.lean"},
        },
    }
    command = [sys.executable, "-m", "beam_mcp", "--lean-cmd", " ".join(fake_cmd())]
    with anyio.fail_after(60):
        async with await anyio.open_process(command) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.send((json.dumps(message) + "\n").encode())
            answers: dict[int, Any] = {}
            buffer = b""
            while len(answers) < 2:
                buffer += await proc.stdout.receive()
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    decoded = json.loads(line)
                    if "id" in decoded:
                        answers[decoded["id"]] = decoded
                        if decoded["id"] == 1:
                            await proc.stdin.send((json.dumps(follow) + "\n").encode())
            await proc.stdin.aclose()
            await proc.wait()
    assert answers[1]["result"]["isError"] is False, answers[1]
    assert answers[2]["result"]["isError"] is False, answers[2]


# ---- 13. a Lean command that exits at once -----------------------------------------------------------------------
@BOTH
@pytest.mark.parametrize("command", [["false"], ["true"], "crash-at-initialize"])
async def test_13_a_lean_command_that_exits_at_once_is_the_runtime_setup_error(
    kind: str, command: Any, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "p", FILES)
    lean_cmd = fake_cmd({"crash_on": {"method": "initialize"}}) if isinstance(command, str) else command
    async with reach(kind, lean_cmd=lean_cmd) as t:
        answer = await t.call("lean_sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
    assert answer["error"]["code"] == INVALID_REQUEST, answer
    assert answer["error"]["message"].startswith("could not set up Lean Beam MCP runtime: ")


# ---- 14. resources while Lean starts or after it failed to start -----------------------------------------------------
def _held_start(fifo: Path) -> list[str]:
    """A Lean command that starts the fake server only once something is written to `fifo` (no polling)."""
    script = f"import os, sys; open({str(fifo)!r}).read(); os.execv(sys.executable, {fake_cmd()!r})"
    return [sys.executable, "-c", script]


async def test_14_a_read_while_lean_starts_is_32051_and_after_a_failed_start_the_setup_error(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    uri = "lsp-diagnostics://" + str(root / "A.lean")
    fifo = tmp_path / "start"
    os.mkfifo(fifo)
    ws = {"workspace": {"root": str(root)}}
    async with harness(lean_cmd=_held_start(fifo)) as h:
        await h.send(
            {
                "jsonrpc": "2.0",
                "id": "sync",
                "method": "tools/call",
                "params": {"name": "lean_sync", "arguments": {**ws, "path": "A.lean"}, "_meta": modern_meta()},
            }
        )
        with anyio.fail_after(20):
            while True:  # the broker is starting Lean (held at the fifo) once the read says so
                read = await h.request("resources/read", {"uri": uri, "_meta": modern_meta()})
                if "error" in read:
                    break
                await anyio.wait_all_tasks_blocked()
        assert read["error"]["code"] == -32051, read
        with open(fifo, "w") as release:  # noqa: ASYNC230 - a FIFO write is immediate once the reader waits
            release.write("go")
        synced, _ = await h.until("sync")
        assert synced["result"]["isError"] is False
        read = await h.request("resources/read", {"uri": uri, "_meta": modern_meta()})
        assert "result" in read


async def test_14_a_failed_start_updates_subscribers_and_reads_fail_with_the_setup_error(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    uri = "lsp-diagnostics://" + str(root / "A.lean")
    async with harness(lean_cmd=["false"]) as h:
        await h.initialize()
        assert (await h.request("resources/subscribe", {"uri": uri}))["result"] == {}
        synced, seen = await h.call("lean_sync", {"workspace": {"root": str(root)}, "path": "A.lean"}, modern=False)
        assert synced["error"]["code"] == INVALID_REQUEST
        updates = [m for m in [*seen, *await h.quiet()] if m.get("method") == "notifications/resources/updated"]
        assert [u["params"]["uri"] for u in updates] == [uri]
        read = await h.request("resources/read", {"uri": uri})
        assert read["error"]["code"] == INVALID_REQUEST
        assert read["error"]["message"].startswith("could not set up Lean Beam MCP runtime: ")
