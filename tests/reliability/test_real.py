"""The real-Lean subset of the reliability suite: Lean killed mid-sync through MCP, and hostile inputs on real Lean."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import anyio
import pytest

from tests.mcp.support import harness
from tests.support import projects
from tests.support.toolchain import Toolchain

pytestmark = [pytest.mark.anyio, pytest.mark.lean]


async def test_killing_real_lean_mid_sync_is_worker_exited_over_mcp_and_the_next_call_recovers(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500), encoding="utf-8")
    ws = {"workspace": {"root": str(demo_root)}}
    async with harness(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env()) as h:
        first, _ = await h.call("lean_update", {**ws, "path": "Demo/Proofs.lean"})
        assert first["result"]["isError"] is False
        broker = h.server._host.current()  # the test reaches the server's broker for the Lean pid it must kill
        assert broker is not None
        runtime = broker.cached(str(demo_root))
        assert runtime is not None
        group = os.getpgid((await runtime.client()).pid)
        await h.send(
            {
                "jsonrpc": "2.0",
                "id": "long",
                "method": "tools/call",
                "params": {
                    "name": "lean_sync",
                    "arguments": {**ws, "path": "Demo/Long.lean"},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                        "progressToken": "p",
                    },
                },
            }
        )
        with anyio.fail_after(60):
            while (message := await h.recv()).get("method") != "notifications/progress" or "processing" not in str(
                message
            ):
                pass  # Lean is elaborating the long file now
        os.killpg(group, signal.SIGKILL)
        with anyio.fail_after(60):
            response, _ = await h.until("long")
        assert response["result"]["isError"] is True
        assert response["result"]["structuredContent"]["code"] == "workerExited"
        again, _ = await h.call("lean_sync", {**ws, "path": "Demo/Proofs.lean"})
        assert again["result"]["isError"] is False and again["result"]["structuredContent"]["version"] == 1


async def test_hostile_inputs_on_real_lean_are_answered_without_internal_errors(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    ws = {"workspace": {"root": str(demo_root)}}
    os.mkfifo(demo_root / "Demo/Fifo.lean")
    async with harness(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env()) as h:
        synced, _ = await h.call("lean_sync", {**ws, "path": "Demo/Proofs.lean"})
        version = synced["result"]["structuredContent"]["version"]
        cases = [
            ({**ws, "path": "/dev/zero"}, "lean_sync", "invalidParams"),
            ({**ws, "path": "Demo/Fifo.lean"}, "lean_update", "invalidParams"),
            ({**ws, "path": "Demo/Proofs.lean\x00"}, "lean_sync", "invalidInput"),
            (
                {**ws, "path": "Demo/Proofs.lean", "version": version, "line": "3", "character": 0},
                "lean_hover",
                "invalidInput",
            ),
            (
                {**ws, "path": "Demo/Proofs.lean", "version": version, "line": 3, "character": 2, "text": "\ud800"},
                "lean_run_at",
                "invalidInput",
            ),
        ]
        for arguments, tool, code in cases:
            with anyio.fail_after(30):
                response, _ = await h.call(tool, arguments)
            assert response["result"]["isError"] is True, (tool, response)
            assert response["result"]["structuredContent"]["code"] == code, (tool, response)
        await h.send(b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list","params":{}}\n')
        answered = await h.recv()
        assert answered["id"] == "\ud800" and answered["error"]["code"] != -32603
        still, _ = await h.call(
            "lean_goals",
            {**ws, "path": "Demo/Proofs.lean", "version": version, "line": 8, "character": 2, "mode": "before"},
        )
        assert "result" in still and json.dumps(still).find("internalError") < 0
