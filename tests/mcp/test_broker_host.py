"""Hosting the broker (`_broker_host`): opened in the background, and what still works when it cannot be opened."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from beam_broker import OPERATIONS
from beam_mcp.errors import INTERNAL_ERROR

from .support import harness, modern_meta, structured

pytestmark = pytest.mark.anyio


async def test_a_broker_that_cannot_be_opened_leaves_the_process_tools_working(
    fake_project: Callable[..., Path],
) -> None:
    root = fake_project("proj", {"A.lean": "def a := 1\n"})
    async with harness(broker={"no_such_setting": True}) as h:  # a BrokerConfig that cannot be built
        version, _ = await h.call("beam_version")
        assert structured(version)["runtime_active"] is False
        stats, _ = await h.call("beam_stats")
        assert structured(stats) == {"uptimeMs": 0, "workspaces": {}}
        listed = await h.request("tools/list", {"_meta": modern_meta()})
        assert len(listed["result"]["tools"]) == len(OPERATIONS) + 3  # the registry needs no broker
        synced, _ = await h.call("lean_sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
        assert synced["error"]["code"] == INTERNAL_ERROR
        assert synced["error"]["message"].startswith("the Beam broker is unavailable")
        for method, fields in (
            ("resources/list", {}),
            ("resources/read", {"uri": "lsp-diagnostics:///a.lean"}),
            ("subscriptions/listen", {"notifications": {"resourceSubscriptions": ["lsp-diagnostics:///a.lean"]}}),
        ):
            response = await h.request(method, {**fields, "_meta": modern_meta()})
            assert response["error"]["code"] == INTERNAL_ERROR, method


async def test_a_broker_that_cannot_be_opened_still_lets_feedback_be_reported(
    fake_project: Callable[..., Path],
) -> None:
    # A broken setup is exactly when people send feedback: the report needs no broker, and still hides the
    # Lean server command's secrets.
    root = fake_project("proj", {"A.lean": "def a := 1\n"})
    secret = "cmd-secret-0123456789"
    async with harness(broker={"no_such_setting": True}, lean_cmd=["lean", f"--auth-token={secret}"]) as h:
        report = {"title": "t", "summary": f"ran {secret}", "reproduction": "r", "expected": "e", "actual": "a"}
        response, _ = await h.call("beam_feedback_report", {**report, "workspace": {"root": str(root)}})
        assert response["result"]["isError"] is False
        assert "ran [redacted:auth-token]" in structured(response)["markdown"]


async def test_the_broker_opens_in_the_background_and_serves_every_workspace(
    fake_project: Callable[..., Path],
) -> None:
    first = fake_project("first", {"A.lean": "def a := 1\n"})
    second = fake_project("second", {"B.lean": "def b := 1\n"})
    async with harness() as h:
        assert "result" in await h.request("server/discover", {"_meta": modern_meta()})  # before the broker is used
        for root, name in ((first, "A.lean"), (second, "B.lean")):
            response, _ = await h.call("lean_update", {"workspace": {"root": str(root)}, "path": name})
            assert structured(response)["version"] == 1
        assert set((await h.stats())["workspaces"]) == {f"local:{first}", f"local:{second}"}
