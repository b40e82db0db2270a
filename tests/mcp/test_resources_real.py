"""Diagnostics resources end to end: the official MCP Python SDK against the installed `lean-beam-mcp` on real Lean.

A client syncs `Demo/Broken.lean`, lists and reads its diagnostics resource, subscribes (legacy
`resources/subscribe`, or a modern `subscriptions/listen` stream), fixes the file on disk, syncs again, and is
told to re-read by `notifications/resources/updated`.
"""

from __future__ import annotations

import json
import shlex
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import ResourceUpdatedNotification, TextResourceContents

from mcp import Client, StdioServerParameters
from tests.support.toolchain import Toolchain

from .support import server_binary

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

TIMEOUT = 120
FIXED = "prelude\nimport Demo.Basic\n\ntheorem bad : MyTrue := myTrue\n\ntheorem fine : MyTrue := myTrue\n"


def params(tc: Toolchain) -> StdioServerParameters:
    return StdioServerParameters(
        command=server_binary(), args=["--lean-cmd", shlex.join(tc.server_cmd())], env=tc.env()
    )


async def sync(client: Client, root: Path) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        result = await client.call_tool("lean_sync", {"workspace": {"root": str(root)}, "path": "Demo/Broken.lean"})
    assert result.is_error is False and isinstance(result.structured_content, dict)
    return result.structured_content


async def read(client: Client, uri: str) -> dict[str, Any]:
    result = await client.read_resource(uri)
    [content] = result.contents
    assert isinstance(content, TextResourceContents) and content.mime_type == "application/json"
    document: dict[str, Any] = json.loads(content.text)
    return document


async def listed_uri(client: Client, root: Path) -> str:
    resources = (await client.list_resources()).resources
    [resource] = resources
    assert resource.name == "Broken.lean" and resource.mime_type == "application/json"
    assert resource.uri == f"lsp-diagnostics://{root}/Demo/Broken.lean"
    return resource.uri


def check_broken(document: dict[str, Any], root: Path) -> None:
    assert document["path"] == str(root / "Demo/Broken.lean")
    assert (document["tracked"], document["availability"], document["version"]) == (True, "published", 1)
    assert (document["elaboration"], document["indexing_in_progress"]) == ("complete", False)
    [error] = document["diagnostics"]
    assert error["severity"] == 1 and error["message"].startswith("Type mismatch") and "fullRange" in error


async def until_fixed(client: Client, uri: str, next_update: Callable[[], Any]) -> dict[str, Any]:
    """Wait for updates until a read shows the fixed version (Lean may report a processing state first)."""
    with anyio.fail_after(TIMEOUT):
        while True:
            assert await next_update() == uri
            document = await read(client, uri)
            if document["version"] == 2 and document["elaboration"] == "complete":
                return document


async def test_legacy_subscription_reports_the_fix(lean_toolchain: Toolchain, demo_root: Path) -> None:
    send, receive = anyio.create_memory_object_stream[str](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            send.send_nowait(message.params.uri)

    async def next_update() -> str:
        return await receive.receive()

    async with send, receive, Client(params(lean_toolchain), mode="legacy", message_handler=on_message) as client:
        assert client.protocol_version == "2025-11-25"
        assert await client.list_resources() is not None  # nothing open yet
        await sync(client, demo_root)
        uri = await listed_uri(client, demo_root)
        check_broken(await read(client, uri), demo_root)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)
        with anyio.fail_after(TIMEOUT):
            assert await next_update() == uri  # the replay: the file already has diagnostics
        (demo_root / "Demo/Broken.lean").write_text(FIXED, encoding="utf-8")
        fixed = await sync(client, demo_root)
        assert fixed["version"] == 2 and fixed["diagnostics"]["counts"]["error"] == 0
        document = await until_fixed(client, uri, next_update)
        assert document["diagnostics"] == []


async def test_modern_listen_reports_the_fix(lean_toolchain: Toolchain, demo_root: Path) -> None:
    async with Client(params(lean_toolchain), mode="2026-07-28") as client:
        await sync(client, demo_root)
        uri = await listed_uri(client, demo_root)
        check_broken(await read(client, uri), demo_root)
        async with client.listen(resource_subscriptions=[uri], tools_list_changed=True) as stream:
            assert stream.honored.resource_subscriptions == [uri] and not stream.honored.tools_list_changed

            async def next_update() -> str:
                event = await stream.__anext__()
                assert isinstance(event, ResourceUpdated)
                return event.uri

            with anyio.fail_after(TIMEOUT):
                assert await next_update() == uri  # the replay
            (demo_root / "Demo/Broken.lean").write_text(FIXED, encoding="utf-8")
            fixed = await sync(client, demo_root)
            assert fixed["version"] == 2 and fixed["diagnostics"]["counts"]["error"] == 0
            document = await until_fixed(client, uri, next_update)
            assert document["diagnostics"] == []
        # Ending the stream cancelled it; the server stays usable.
        assert (await read(client, uri))["version"] == 2
