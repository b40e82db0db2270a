"""The official MCP Python SDK's Streamable HTTP client against the in-process HTTP server (fake broker).

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

from beam_broker import CallContext
from beam_mcp import _resources
from mcp import Client

from .http_support import http_server
from .support import TIMEOUT, FakeBroker, make_project

pytestmark = pytest.mark.anyio

MODES = ["legacy", "2026-07-28", "auto"]


def published(version: int) -> dict[str, Any]:
    return {"availability": "published", "diagnostics": [], "version": version, "elaboration": "complete"}


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_lists_and_calls_tools_with_progress_over_http(tmp_path: Path, mode: str) -> None:
    root = str(make_project(tmp_path / "proj"))
    async with http_server() as s, Client(s.url, mode=mode) as client:
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
        assert result.is_error is False and result.structured_content == {"workspace": {"root": root}, "op": "sync"}
        assert updates == ["lean_sync on A.lean: preparing the Lean workspace"]
        bad = await client.call_tool("lean_sync", {"workspace": {"root": "relative"}, "path": "A.lean"})
        assert bad.is_error is True


async def test_legacy_sdk_updates_arrive_on_the_get_stream(tmp_path: Path) -> None:
    path = str(tmp_path / "A.lean")
    uri = _resources.path_to_uri(path)
    broker = FakeBroker()
    broker.publish(path, published(1))
    send, receive = anyio.create_memory_object_stream[str](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            send.send_nowait(message.params.uri)

    async with send, receive, http_server(broker, max_sessions=1) as s:
        async with Client(s.url, mode="legacy", message_handler=on_message) as client:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource(uri)
            with anyio.fail_after(TIMEOUT):
                assert await receive.receive() == uri  # the replay
            broker.publish(path, published(2))
            with anyio.fail_after(TIMEOUT):
                assert await receive.receive() == uri
        # The client deleted its session at exit, so another may start (one session at most here).
        async with Client(s.url, mode="legacy") as again:
            assert (await again.list_resources()).resources == []


async def test_modern_sdk_listen_streams_over_http(tmp_path: Path) -> None:
    path = str(tmp_path / "A.lean")
    uri = _resources.path_to_uri(path)
    broker = FakeBroker()
    broker.publish(path, published(1))
    async with http_server(broker) as s, Client(s.url, mode="2026-07-28") as client:
        async with client.listen(resource_subscriptions=[uri]) as stream:
            assert stream.honored.resource_subscriptions == [uri]
            with anyio.fail_after(TIMEOUT):
                event = await stream.__anext__()
                assert isinstance(event, ResourceUpdated) and event.uri == uri  # the replay
                broker.publish(path, published(2))
                event = await stream.__anext__()
                assert isinstance(event, ResourceUpdated) and event.uri == uri
        assert (await client.read_resource(uri)).contents  # the server stays usable


async def test_cancelling_an_sdk_call_aborts_its_post_and_the_broker_work(tmp_path: Path) -> None:
    root = str(make_project(tmp_path / "proj"))
    started, stopped = anyio.Event(), anyio.Event()

    async def forever(arguments: Any, ctx: CallContext) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError

    async with http_server() as s, Client(s.url, mode="2026-07-28") as client:
        s.broker.handlers["sync"] = forever
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "lean_sync", {"workspace": {"root": root}, "path": "A.lean"})
            with anyio.fail_after(TIMEOUT):
                await started.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(TIMEOUT):
            await stopped.wait()
        assert s.broker.cancelled == ["sync"]
        assert (await client.call_tool("beam_version", {})).is_error is False
