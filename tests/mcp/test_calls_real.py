"""Tool calls end to end on real Lean: the official MCP Python SDK client against the installed `lean-beam-mcp`.

Both revisions: `mode="legacy"` (initialize), `mode="2026-07-28"` (pinned modern) and `mode="auto"` (discover,
then modern). The server is the console script installed next to this interpreter.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import LoggingMessageNotificationParams

from mcp import Client, StdioServerParameters
from tests.support.toolchain import Toolchain

from .support import server_binary

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

MODES = ["legacy", "2026-07-28", "auto"]


class Session:
    def __init__(self, client: Client, root: Path) -> None:
        self.client = client
        self.root = root
        self.logs: list[LoggingMessageNotificationParams] = []

    def ws(self, **arguments: Any) -> dict[str, Any]:
        return {"workspace": {"root": str(self.root)}, **arguments}

    async def call(self, tool: str, updates: list[str] | None = None, **arguments: Any) -> dict[str, Any]:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if updates is not None:
                updates.append(message or "")

        with anyio.fail_after(120):
            result = await self.client.call_tool(tool, self.ws(**arguments), progress_callback=on_progress)
        assert result.is_error is False, result.structured_content
        assert isinstance(result.structured_content, dict)
        return result.structured_content


@asynccontextmanager
async def session(tc: Toolchain, root: Path, mode: str, **client: Any) -> AsyncIterator[Session]:
    params = StdioServerParameters(
        command=server_binary(), args=["--lean-cmd", shlex.join(tc.server_cmd())], env=tc.env()
    )
    holder: list[Session] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        holder[0].logs.append(params)

    if mode != "legacy":
        client.setdefault("log_level", "debug")
    async with Client(params, mode=mode, logging_callback=on_log, **client) as c:
        holder.append(Session(c, root))
        yield holder[0]


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_drives_the_real_lean_lane(lean_toolchain: Toolchain, demo_root: Path, mode: str) -> None:
    async with session(lean_toolchain, demo_root, mode) as s:
        expected = "2025-11-25" if mode == "legacy" else "2026-07-28"
        assert s.client.protocol_version == expected
        tools = {tool.name: tool for tool in (await s.client.list_tools()).tools}
        assert list(tools)[:4] == ["beam_version", "beam_stats", "beam_feedback_report", "lean_drop_workspace"]
        assert tools["lean_hover"].annotations is not None and tools["lean_hover"].annotations.read_only_hint
        assert tools["lean_sync"].annotations is None

        version = await s.client.call_tool("beam_version", {})
        assert version.structured_content is not None and version.structured_content["runtime_active"] is False

        progress: list[str] = []
        clean = await s.call("lean_sync", progress, path="Demo/Proofs.lean")
        assert clean["workspace"] == {"root": str(demo_root)}
        assert clean["diagnostics"]["counts"]["error"] == 0 and clean["readiness"]["save_ready"] is True
        assert clean["document_progress"]["done"] is True
        assert progress[0] == "lean_sync on Demo/Proofs.lean: preparing the Lean workspace"
        assert any("done=true" in message for message in progress)

        broken = await s.call("lean_sync", path="Demo/Broken.lean", diagnostics_in_result=True)
        assert broken["diagnostics"]["counts"]["error"] == 1 and broken["readiness"]["save_ready"] is False
        assert broken["diagnostics"]["items"][0]["severity"] == "error"
        streamed = [log for log in s.logs if log.logger == "lean.diagnostic"]
        assert streamed and streamed[-1].level == "error"

        hover = await s.call("lean_hover", path="Demo/Proofs.lean", version=clean["version"], line=3, character=29)
        assert "MyTrue" in str(hover)

        goals_file = await s.call("lean_sync", path="Demo/Goals.lean")
        goals = await s.call(
            "lean_goals", path="Demo/Goals.lean", version=goals_file["version"], line=4, character=2, mode="before"
        )
        assert goals["goals"] and goals["goals"][0]["target"].strip() == "p"

        raw_stats = await s.client.call_tool("beam_stats", {})
        assert raw_stats.structured_content is not None
        assert f"local:{demo_root}" in raw_stats.structured_content["workspaces"]

        dropped = await s.call("lean_drop_workspace")
        assert dropped == {"workspace": {"root": str(demo_root)}, "dropped": True, "invalidated_handles": True}
        again = await s.call("lean_drop_workspace")
        assert again["dropped"] is False and again["reason"] == "notFound"
        recreated = await s.call("lean_sync", path="Demo/Proofs.lean")
        assert recreated["version"] == 1 and recreated["diagnostics"]["counts"]["error"] == 0

        bad = await s.client.call_tool("lean_sync", {"workspace": {"root": "relative"}, "path": "Demo/Proofs.lean"})
        assert bad.is_error is True and bad.structured_content is not None
        assert bad.structured_content["code"] == "invalidInput"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sdk_cancellation_stops_a_slow_sync_and_the_server_stays_usable(
    lean_toolchain: Toolchain, demo_root: Path, mode: str
) -> None:
    slow = demo_root / "Demo" / "Slow.lean"
    decls = "\n".join(f"theorem t{i} : MyTrue := myTrue" for i in range(3000))
    slow.write_text(f"prelude\nimport Demo.Basic\n\n{decls}\n", encoding="utf-8")
    async with session(lean_toolchain, demo_root, mode) as s:
        started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message and "processing" in message:  # Lean is elaborating the file (not just preparing)
                started.set()

        async with anyio.create_task_group() as tg:

            async def slow_sync() -> None:
                await s.client.call_tool("lean_sync", s.ws(path="Demo/Slow.lean"), progress_callback=on_progress)
                raise AssertionError("the cancelled call answered")

            tg.start_soon(slow_sync)
            with anyio.fail_after(60):
                await started.wait()
            tg.cancel_scope.cancel()

        # A drop is a full stream-order fence: once it answers, the cancelled sync has ended in the broker.
        await s.client.call_tool("lean_drop_workspace", {"workspace": {"root": str(demo_root / "not-cached")}})
        stats = await s.client.call_tool("beam_stats", {})
        assert stats.structured_content is not None
        workspace = stats.structured_content["workspaces"][f"local:{demo_root}"]
        assert workspace["byBackend"]["lean"]["cancelledCount"] == 1
        after = await s.call("lean_sync", path="Demo/Proofs.lean")
        assert after["diagnostics"]["counts"]["error"] == 0
