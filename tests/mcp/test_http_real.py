"""Streamable HTTP end to end on real Lean: a raw HTTP client and the official MCP Python SDK.

The server runs in-process (`serve_http` with the real broker and this lane's Lean) on a loopback port.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_mcp import HttpConfig, ServerConfig, serve_http
from mcp import Client
from tests.support.toolchain import Toolchain

from .http_support import Client as HttpClient
from .http_support import modern_headers
from .support import modern_meta

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

TIMEOUT = 120


@contextlib.asynccontextmanager
async def real_server(tc: Toolchain) -> AsyncIterator[tuple[str, int]]:
    config = ServerConfig(lean_cmd=tc.server_cmd(), env=tc.env())
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(TIMEOUT):
            url = await tg.start(serve_http, config, HttpConfig())
        yield url, int(url.rsplit(":", 1)[1].split("/")[0])
        tg.cancel_scope.cancel()


def modern(rid: int, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": modern_meta(**meta)}}


async def test_an_http_client_discovers_lists_and_syncs_with_sse_progress(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    async with real_server(lean_toolchain) as (url, port), HttpClient.connect(port) as client:
        assert url == f"http://127.0.0.1:{port}/mcp"
        discover = modern(1, "server/discover")
        await client.post_modern(discover)
        found = (await client.response()).json()["result"]
        assert found["supportedVersions"] == ["2026-07-28"] and found["resultType"] == "complete"

        listing = modern(2, "tools/list")
        await client.post_modern(listing)
        tools = [tool["name"] for tool in (await client.response()).json()["result"]["tools"]]
        assert "lean_sync" in tools and "lean_run_at" in tools

        arguments = {"workspace": {"root": str(demo_root)}, "path": "Demo/Broken.lean", "diagnostics_in_result": True}
        sync = modern(3, "tools/call", {"name": "lean_sync", "arguments": arguments}, progressToken="sync-1")
        await client.post(sync, modern_headers(sync))
        with anyio.fail_after(TIMEOUT):
            response = await client.response()
        assert response.status == 200 and response.content_type == "text/event-stream"
        *notes, final = response.events()
        progress = [n["params"] for n in notes if n["method"] == "notifications/progress"]
        assert progress and all(p["progressToken"] == "sync-1" for p in progress)
        assert [p["progress"] for p in progress] == list(range(1, len(progress) + 1))
        assert progress[0]["message"] == "lean_sync on Demo/Broken.lean: preparing the Lean workspace"
        assert any("done=true" in p["message"] for p in progress)
        assert final["id"] == 3 and final["result"]["resultType"] == "complete"
        result = final["result"]["structuredContent"]
        assert json.loads(final["result"]["content"][0]["text"]) == result
        assert result["workspace"] == {"root": str(demo_root)} and result["version"] == 1
        assert result["diagnostics"]["counts"]["error"] == 1 and result["readiness"]["save_ready"] is False
        assert result["diagnostics"]["items"][0]["severity"] == "error"
        assert result["document_progress"]["done"] is True


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28", "auto"])
async def test_the_sdk_drives_real_lean_over_http(lean_toolchain: Toolchain, demo_root: Path, mode: str) -> None:
    async with real_server(lean_toolchain) as (url, _), Client(url, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert any(tool.name == "lean_sync" for tool in (await client.list_tools()).tools)
        updates: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append(message or "")

        arguments = {"workspace": {"root": str(demo_root)}, "path": "Demo/Broken.lean"}
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool("lean_sync", arguments, progress_callback=on_progress)
        assert result.is_error is False and isinstance(result.structured_content, dict)
        assert result.structured_content["diagnostics"]["counts"]["error"] == 1
        assert updates[0] == "lean_sync on Demo/Broken.lean: preparing the Lean workspace"
        assert any("done=true" in message for message in updates)
        [resource] = (await client.list_resources()).resources
        assert resource.uri == f"lsp-diagnostics://{demo_root}/Demo/Broken.lean"
