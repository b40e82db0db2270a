"""One call's context: the event watch, update-and-sync, and holding on to one Lean session per call."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import CallContext, DiagnosticEvent, FileProgressEvent, SetupEvent
from beam_broker._call import Call
from beam_broker.workspace import WorkspaceDescriptor
from beam_lsp import ServerExited

from .support import call, fake_project, open_broker

pytestmark = pytest.mark.anyio
SETUP = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}, "severity": 3}


async def test_a_sync_streams_progress_setup_lines_and_scoped_diagnostics_once(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "import B\ndef x := 1\n"})
    lean = {
        "diagnostics": {
            "A.lean": [
                {**SETUP, "message": "✔ [1/2] Built B"},
                {**SETUP, "message": "✔ [1/2] Built B"},  # republished: streamed once
                {"line": 1, "message": "unknown identifier", "severity": 1},
                {"line": 1, "message": "unused", "severity": 2},
            ]
        }
    }
    events: list[Any] = []
    async with open_broker(lean) as broker:
        result = await call(broker, "sync", root, ctx=CallContext(emit=events.append), path="A.lean")
    assert result["diagnostics"]["counts"] == {
        "error": 1,
        "warning": 1,
        "information": 1,  # Lean's cache keeps one copy of a repeated diagnostic
        "hint": 0,
        "unknown": 0,
        "total": 3,
    }
    assert [e for e in events if isinstance(e, SetupEvent)] == [SetupEvent("✔ [1/2] Built B", "A.lean")]
    shown = [(e.item["severity"], e.item["message"]) for e in events if isinstance(e, DiagnosticEvent)]
    assert shown == [("information", "✔ [1/2] Built B"), ("error", "unknown identifier")]
    progress = [e.progress for e in events if isinstance(e, FileProgressEvent)]
    assert progress[0]["done"] is False and progress[-1]["done"] is True


async def test_a_call_keeps_its_server_and_fails_when_that_server_dies(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        runtime = broker.cached(str(root))
        assert runtime is not None
        ctx = Call(runtime, CallContext(), WorkspaceDescriptor(root=str(root)))
        client = await ctx.client()
        assert await ctx.client() is client
        os.kill(client.pid, signal.SIGKILL)
        with anyio.fail_after(20):
            await client.wait_exited()
        with pytest.raises(ServerExited):
            await ctx.client()
        with pytest.raises(ServerExited):
            await ctx.update("A.lean")
        await ctx.close("A.lean")  # a dead server has nothing to close
        fresh = Call(runtime, CallContext(), WorkspaceDescriptor(root=str(root)))
        assert await fresh.client() is not client and runtime.epoch == 2
