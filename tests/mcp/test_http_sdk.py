"""The official MCP Python SDK's Streamable HTTP client against `serve_http` (real broker, fake Lean server).

Legacy (`initialize`, session id, GET stream, DELETE at exit), pinned modern and auto (discover) modes; resource
updates arrive on the legacy GET stream or on a modern listen stream; cancelling a call aborts its POST.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import ResourceUpdatedNotification

from beam_mcp._resources import path_to_uri
from mcp import Client

from .http_support import HOLD, TIMEOUT, project, served, server_config

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28", "auto"]
BROKEN = "theorem a : True := ERROR_HERE\n"


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_lists_and_calls_tools_with_progress_over_http(tmp_path: Path, mode: str) -> None:
    root = str(project(tmp_path / "proj"))
    async with served(server_config()) as s, Client(s.url, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = [tool.name for tool in (await client.list_tools()).tools]
        assert tools[:4] == ["beam_version", "beam_stats", "beam_feedback_report", "lean_drop_workspace"]
        updates: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append(message or "")

        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool(
                "lean_sync", {"workspace": {"root": root}, "path": "A.lean"}, progress_callback=on_progress
            )
        assert result.is_error is False and isinstance(result.structured_content, dict)
        assert result.structured_content["workspace"] == {"root": root} and result.structured_content["version"] == 1
        assert updates[0] == "lean_sync on A.lean: preparing the Lean workspace"
        assert any("done=true" in message for message in updates)
        bad = await client.call_tool("lean_sync", {"workspace": {"root": "relative"}, "path": "A.lean"})
        assert bad.is_error is True


async def test_legacy_sdk_updates_arrive_on_the_get_stream(tmp_path: Path) -> None:
    root = project(tmp_path / "proj")
    uri = path_to_uri(str(root / "A.lean"))
    send, receive = anyio.create_memory_object_stream[str](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            send.send_nowait(message.params.uri)

    sync = {"workspace": {"root": str(root)}, "path": "A.lean"}
    async with send, receive, served(server_config(), max_sessions=1) as s:
        async with Client(s.url, mode="legacy", message_handler=on_message) as client:
            assert (await client.call_tool("lean_sync", sync)).is_error is False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource(uri)
            with anyio.fail_after(TIMEOUT):
                assert await receive.receive() == uri  # the replay
            (root / "A.lean").write_text(BROKEN, encoding="utf-8")
            assert (await client.call_tool("lean_sync", sync)).is_error is False
            with anyio.fail_after(TIMEOUT):
                assert await receive.receive() == uri
        # The client deleted its session at exit, so another may start (one session at most here).
        async with Client(s.url, mode="legacy") as again:
            assert [r.uri for r in (await again.list_resources()).resources] == [uri]


async def test_modern_sdk_listen_streams_over_http(tmp_path: Path) -> None:
    root = project(tmp_path / "proj")
    uri = path_to_uri(str(root / "A.lean"))
    sync = {"workspace": {"root": str(root)}, "path": "A.lean"}
    async with served(server_config()) as s, Client(s.url, mode="2026-07-28") as client:
        assert (await client.call_tool("lean_sync", sync)).is_error is False
        async with client.listen(resource_subscriptions=[uri]) as stream:
            assert stream.honored.resource_subscriptions == [uri]
            with anyio.fail_after(TIMEOUT):
                event = await stream.__anext__()
                assert isinstance(event, ResourceUpdated) and event.uri == uri  # the replay
                (root / "A.lean").write_text(BROKEN, encoding="utf-8")
                assert (await client.call_tool("lean_sync", sync)).is_error is False
                event = await stream.__anext__()
                assert isinstance(event, ResourceUpdated) and event.uri == uri
        assert (await client.read_resource(uri)).contents  # the server stays usable


async def test_cancelling_an_sdk_call_aborts_its_post_and_the_broker_work(tmp_path: Path) -> None:
    root = str(project(tmp_path / "proj"))
    async with served(server_config(HOLD)) as s, Client(s.url, mode="2026-07-28") as client:
        started = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        assert (await client.call_tool("lean_sync", {"workspace": {"root": root}, "path": "A.lean"})).is_error is False
        async with anyio.create_task_group() as tg:
            held = {"workspace": {"root": root}, "query": "a"}
            tg.start_soon(lambda: client.call_tool("lean_workspace_symbols", held, progress_callback=on_progress))
            with anyio.fail_after(TIMEOUT):
                await started.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(TIMEOUT):  # the drop waits for the held call, which only a cancellation ends
            dropped = await client.call_tool("lean_drop_workspace", {"workspace": {"root": root}})
        assert dropped.structured_content is not None and dropped.structured_content["dropped"] is True
        assert (await client.call_tool("beam_version", {})).is_error is False
