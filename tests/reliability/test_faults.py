"""Fault injection through the MCP server: Lean dying at each phase, cancellation storms, EOF with calls pending.

The broker's own crash matrix (`tests/broker`) proves `workerExited` at every point of a sync; here the same
faults travel the whole stack, and what a client sees is checked: a tool error `workerExited` (never `-32603`,
never a hang), a server that keeps answering, and ids that are all accounted for.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.support import harness, make_project
from tests.support.fixtures import LeanGate, fake_cmd, fake_lake

pytestmark = pytest.mark.anyio

FILES = {"A.lean": "theorem a : True := by\n  trivial\n", "B.lean": "def b := ERROR_HERE\n"}
STORM = 200
"""Calls in the cancellation storm (CI)."""

PHASES = [
    ("lean_sync", {"path": "A.lean"}, "textDocument/didOpen"),
    ("lean_sync", {"path": "A.lean"}, "textDocument/waitForDiagnostics"),
    ("lean_save", {"path": "A.lean"}, "textDocument/didOpen"),
    ("lean_save", {"path": "A.lean"}, "textDocument/waitForDiagnostics"),
    ("lean_run_at", {"path": "A.lean", "version": 1, "line": 1, "character": 2, "text": "trivial"}, "$/lean/plainGoal"),
    (
        "lean_run_at",
        {"path": "A.lean", "version": 1, "line": 1, "character": 2, "text": "trivial"},
        "textDocument/waitForDiagnostics",
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "method"), PHASES)
async def test_lean_killed_at_each_phase_is_worker_exited_and_the_server_goes_on(
    tool: str, arguments: dict[str, Any], method: str, tmp_path: Path
) -> None:
    root = make_project(tmp_path / "p", FILES)
    env = fake_lake(tmp_path / "bin")
    ws = {"workspace": {"root": str(root)}}
    lean = {"crash_on": {"method": method, "exit_code": 9}}
    async with harness(lean, env=env) as h:
        with anyio.fail_after(30):
            response, _ = await h.call(tool, {**arguments, **ws})
        assert "result" in response, response
        error = response["result"]["structuredContent"]
        assert response["result"]["isError"] is True and error["code"] == "workerExited", error
        version, _ = await h.call("beam_version", {})
        assert version["result"]["isError"] is False


async def test_a_cancellation_storm_leaves_every_id_accounted_and_the_server_consistent(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    ws = {"workspace": {"root": str(root)}}
    rng = random.Random(20261130)
    async with harness() as h, LeanGate.install(root) as gate:
        tools: list[tuple[str, dict[str, Any]]] = [
            ("lean_sync", {"path": "A.lean"}),
            ("lean_hover", {"path": "A.lean", "version": 1, "line": 0, "character": 8}),
            ("lean_document_symbols", {"path": "A.lean", "version": 1}),
            ("lean_workspace_symbols", {"query": "a"}),
            ("beam_stats", {}),
        ]
        cancelled: set[int] = set()
        for rid in range(1, STORM + 1):
            name, arguments = rng.choice(tools)
            await h.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": {**arguments, **ws} if name != "beam_stats" else {}},
                }
            )
            if rng.random() < 0.6:
                victim = rng.randint(1, rid)
                await h.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": victim}})
                cancelled.add(victim)
            if rid == STORM // 2:
                gate.open()  # half the storm lands while Lean is held, half while it runs
        await h.fence()  # every admitted call has finished (or was cancelled)
        answered: dict[int, dict[str, Any]] = {}
        for message in await h.quiet():
            if "id" in message and "method" not in message:
                answered[message["id"]] = message
        for rid in range(1, STORM + 1):
            if rid not in cancelled:
                assert rid in answered, f"call {rid} was neither cancelled nor answered"
        for message in answered.values():
            assert "result" in message or message["error"]["code"] != -32603, message
        # Nothing is left in flight, the ids are free again, and Lean still answers.
        synced, _ = await h.call("lean_sync", {**ws, "path": "B.lean"}, rid=1)
        assert synced["result"]["structuredContent"]["diagnostics"]["counts"]["error"] == 1


async def test_eof_with_calls_pending_stops_the_process_promptly(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", FILES)
    lean = fake_cmd({"stall": ["textDocument/hover", "workspace/symbol"]})
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    ws = {"root": str(root)}
    calls = [
        ("lean_sync", {"workspace": ws, "path": "A.lean"}),
        ("lean_hover", {"workspace": ws, "path": "A.lean", "version": 1, "line": 0, "character": 8}),
        ("lean_workspace_symbols", {"workspace": ws, "query": "a"}),
    ]
    command = [sys.executable, "-m", "beam_mcp", "--lean-cmd", " ".join(lean)]
    async with await anyio.open_process(command) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        with anyio.fail_after(30):
            for rid, (name, arguments) in enumerate(calls, 1):
                message = {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments, "_meta": meta},
                }
                await proc.stdin.send((json.dumps(message) + "\n").encode())
                if rid == 1:  # the workspace is warm before the stalled calls arrive
                    assert b'"id":1' in await proc.stdout.receive()
        await proc.stdin.aclose()
        with anyio.fail_after(10):  # the stalled Lean calls are cancelled, Lean stops, the process exits
            assert await proc.wait() == 0
