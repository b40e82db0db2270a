"""Snapshot tokens on real Lean, through the official MCP SDK client against the installed `lean-beam-mcp`.

`--contract upstream-2026-11` serves upstream Beam's current contract (its 24 tools, `snapshot` only); the default
surface takes and answers snapshots beside versions. Every token rule is exercised on a real Lean server: an
unchanged file keeps its token; an edit, a refresh, a close and reopen and a dropped workspace give fresh ones
(identical text included); a token of another file is rejected; a stale token is upstream's `snapshotMismatch`.
(A restarted Lean server is covered on the fake lane, `tests/broker/test_snapshots.py`, where a crash can be
scripted.)
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_lsp import path_to_uri
from mcp import Client, StdioServerParameters
from tests.support.toolchain import Toolchain

from .support import server_binary

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

GOALS = "Demo/Goals.lean"
BASIC = "Demo/Basic.lean"


class Session:
    """One SDK client session on one workspace: calls that must succeed, and calls that must fail."""

    def __init__(self, client: Client, root: Path) -> None:
        self.client = client
        self.root = root

    async def _call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        with anyio.fail_after(120):
            result = await self.client.call_tool(tool, {"workspace": {"root": str(self.root)}, **arguments})
        assert isinstance(result.structured_content, dict), result
        return bool(result.is_error), result.structured_content

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        failed, content = await self._call(tool, arguments)
        assert not failed, content
        return content

    async def error(self, tool: str, **arguments: Any) -> dict[str, Any]:
        failed, content = await self._call(tool, arguments)
        assert failed, content
        return content

    async def stale(self, path: str, snapshot: str, current: str) -> None:
        """A document call with `snapshot` fails with upstream's error naming `current`."""
        failure = await self.error("lean_document_symbols", path=path, snapshot=snapshot)
        assert failure["code"] == "contentModified", failure
        assert failure["data"] == {
            "reason": "snapshotMismatch",
            "expectedSnapshot": snapshot,
            "currentSnapshot": current,
            "uri": path_to_uri(self.root / path),
        }


@asynccontextmanager
async def session(tc: Toolchain, root: Path, mode: str, *args: str) -> AsyncIterator[Session]:
    params = StdioServerParameters(
        command=server_binary(), args=["--lean-cmd", shlex.join(tc.server_cmd()), *args], env=tc.env()
    )
    async with Client(params, mode=mode) as client:
        yield Session(client, root)


async def test_upstreams_contract_serves_snapshot_tokens_under_every_rule(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    async with session(lean_toolchain, demo_root, "2026-07-28", "--contract", "upstream-2026-11") as s:
        tools = {tool.name: tool for tool in (await s.client.list_tools()).tools}
        assert len(tools) == 24 and "lean_completions" not in tools
        hover = tools["lean_hover"].input_schema
        assert hover["required"] == ["path", "snapshot", "line", "character", "workspace"]
        assert "version" not in hover["properties"] and "oneOf" not in hover

        synced = await s.ok("lean_sync", path=GOALS)
        token = synced["snapshot"]
        assert "version" not in synced, "no version beside a snapshot"
        updated = await s.ok("lean_update", path=GOALS)
        assert updated == {"workspace": {"root": str(demo_root)}, "snapshot": token, "changed": False}
        goals = await s.ok("lean_goals", path=GOALS, snapshot=token, line=4, character=2, mode="before")
        assert [goal["target"] for goal in goals["goals"]] == ["p"]
        assert (await s.ok("lean_document_symbols", path=GOALS, snapshot=token))["result"]
        refused = await s.error("lean_document_symbols", path=GOALS, version=1)
        assert refused["code"] == "invalidInput" and refused["data"]["fields"] == ["version"]

        refreshed = (await s.ok("lean_refresh", path=GOALS))["snapshot"]  # the same text, reopened
        assert refreshed != token
        await s.stale(GOALS, token, refreshed)

        source = demo_root / GOALS
        text = source.read_text()
        source.write_text(text + "-- an edit\n")
        edited = (await s.ok("lean_update", path=GOALS))["snapshot"]
        source.write_text(text)
        restored = (await s.ok("lean_update", path=GOALS))["snapshot"]  # back to the refreshed text
        assert len({refreshed, edited, restored}) == 3
        await s.stale(GOALS, refreshed, restored)

        await s.ok("lean_close", path=GOALS)
        reopened = (await s.ok("lean_update", path=GOALS))["snapshot"]
        assert reopened != restored
        await s.stale(GOALS, restored, reopened)

        basic = (await s.ok("lean_update", path=BASIC))["snapshot"]
        await s.stale(BASIC, reopened, basic)  # another file's token

        await s.ok("lean_drop_workspace")
        fresh = (await s.ok("lean_update", path=GOALS))["snapshot"]
        assert fresh not in {token, refreshed, edited, restored, reopened}
        await s.stale(GOALS, reopened, fresh)
        goals = await s.ok("lean_goals", path=GOALS, snapshot=fresh, line=4, character=2, mode="before")
        assert [goal["target"] for goal in goals["goals"]] == ["p"]


async def test_the_default_surface_takes_a_snapshot_or_a_version(lean_toolchain: Toolchain, demo_root: Path) -> None:
    async with session(lean_toolchain, demo_root, "legacy") as s:
        synced = await s.ok("lean_sync", path=GOALS)
        assert synced["version"] == 1 and isinstance(synced["snapshot"], str)
        by_token = await s.ok("lean_goals", path=GOALS, snapshot=synced["snapshot"], line=4, character=2, mode="after")
        by_version = await s.ok("lean_goals", path=GOALS, version=1, line=4, character=2, mode="after")
        assert by_token == by_version and by_token["goals"]
        both = await s.error(
            "lean_goals", path=GOALS, version=1, snapshot=synced["snapshot"], line=4, character=2, mode="after"
        )
        assert both["code"] == "invalidInput" and "exactly one of version and snapshot" in both["message"]
