"""Streamable HTTP end to end on real Lean: httpx and the official MCP Python SDK (with a bearer token too).

The server runs in-process (`serve_http` with the real broker and this lane's Lean) on a loopback port.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from beam_mcp import ServerConfig
from beam_mcp._http import BearerToken
from mcp import Client
from tests.support.toolchain import Toolchain

from .http_support import events, modern_headers, request, served

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

TIMEOUT = 120


def real_config(tc: Toolchain) -> ServerConfig:
    return ServerConfig(lean_cmd=tc.server_cmd(), env=tc.env())


async def test_an_http_client_discovers_lists_and_syncs_with_sse_progress(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    async with served(real_config(lean_toolchain)) as client:
        assert client.url == f"http://127.0.0.1:{client.port}/mcp"
        found = (await client.modern(request(1, "server/discover"))).json()["result"]
        assert found["supportedVersions"] == ["2026-07-28"] and found["resultType"] == "complete"

        listing = (await client.modern(request(2, "tools/list"))).json()["result"]
        tools = [tool["name"] for tool in listing["tools"]]
        assert "lean_sync" in tools and "lean_run_at" in tools

        arguments = {"workspace": {"root": str(demo_root)}, "path": "Demo/Broken.lean", "diagnostics_in_result": True}
        sync = request(3, "tools/call", {"name": "lean_sync", "arguments": arguments}, progressToken="sync-1")
        with anyio.fail_after(TIMEOUT):
            response = await client.modern(sync)
        assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
        *notes, final = events(response.content)
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
    async with served(real_config(lean_toolchain)) as served_at, Client(served_at.url, mode=mode) as client:
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


async def test_the_sdk_sends_a_bearer_token_and_gets_an_outline_from_real_lean(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    token = "real-lane-token_0123456789"
    async with served(real_config(lean_toolchain), token=BearerToken(token)) as served_at:
        message = request(1, "server/discover")
        refused = await served_at.post(message, modern_headers(message))
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer ")
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(served_at.url, http_client=http)) as client:
            ws = {"workspace": {"root": str(demo_root)}}
            with anyio.fail_after(TIMEOUT):
                synced = await client.call_tool("lean_sync", {**ws, "path": "Demo/Proofs.lean"})
                assert isinstance(synced.structured_content, dict)
                at = {**ws, "path": "Demo/Proofs.lean", "version": synced.structured_content["version"]}
                outlined = await client.call_tool("lean_outline", at)
    assert outlined.is_error is False and isinstance(outlined.structured_content, dict)
    names = [(e["name"], e["kind"]) for e in outlined.structured_content["declarations"]]
    assert names == [("byTerm", "theorem"), ("idProof", "theorem"), ("two", "def")]
