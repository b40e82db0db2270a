"""One call's context: the event watch, update-and-sync, and holding on to one Lean session per call."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, cast

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


# ---- the watch, unit by unit (Lean played through beam-lsp's event fan-out) -----------------------------
class _Client:
    """What `Call.watch` uses of a Lean client: a coalescing subscription."""

    def __init__(self) -> None:
        from beam_lsp._events import Broadcast

        self.events = Broadcast()
        self.coalescing: list[bool] = []

    def subscribe(self, *, coalesce_progress: bool = False) -> Any:
        self.coalescing.append(coalesce_progress)
        return self.events.subscribe(1024, coalesce_progress=coalesce_progress)


def _progress(uri: str, version: int, start: int | None) -> Any:
    from beam_lsp import ProgressEvent
    from beam_lsp._progress import FileProgress

    rng = {"start": {"line": start or 0, "character": 0}, "end": {"line": 50, "character": 0}}
    processing = [] if start is None else [{"range": rng, "kind": 1}]
    return ProgressEvent(
        FileProgress.from_params({"textDocument": {"uri": uri, "version": version}, "processing": processing})
    )


def _diag(line: int, message: str, severity: int = 1) -> Any:
    from beam_lsp import LeanDiagnostic

    rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 5}}
    return LeanDiagnostic.from_json({"range": rng, "message": message, "severity": severity})


async def _watched(send: Any, scope: str | None = "errors") -> tuple[list[Any], _Client]:
    from beam_broker._call import Watch

    events: list[Any] = []
    lean = _Client()
    ctx = Call(cast(Any, None), CallContext(emit=events.append), WorkspaceDescriptor(root="/w"))
    with anyio.fail_after(10):
        async with ctx.watch(cast(Any, lean), Watch(URI, "A.lean", version=2), scope):
            send(lean.events)
    return events, lean


URI = "file:///w/A.lean"


async def test_the_watch_reads_no_report_of_another_document_or_an_older_version() -> None:
    others = [_progress("file:///w/B_beamProbe1.lean", 2, 3), _progress(URI, 1, 3)]
    mine = [_progress(URI, 2, 3 + k) for k in range(30)] + [_progress(URI, 2, None)]

    def send(events: Any) -> None:
        for e in [*others, *mine]:
            events.send(e)

    streamed, lean = await _watched(send)
    assert lean.coalescing == [True]
    assert all("params" not in e.report.__dict__ for e in others), "reports the call does not watch stay undecoded"
    progress = [e.progress for e in streamed if isinstance(e, FileProgressEvent)]
    assert [p["done"] for p in progress] == [False, True]  # unread reports coalesce; the final one is kept apart
    assert progress[0]["range_start_line"] >= 4 and progress[-1]["updates"] >= 2


async def test_the_watch_streams_what_a_publish_added_not_what_was_stored_before() -> None:
    from beam_lsp import DiagnosticsEvent

    old, new, warning = _diag(0, "old"), _diag(1, "new"), _diag(2, "w", 2)

    def send(events: Any) -> None:
        events.send(DiagnosticsEvent(URI, 1, (old,), (old,)))  # an older version: ignored
        events.send(DiagnosticsEvent(URI, 2, (old, new, warning), (new, warning)))  # `old` was streamed before
        events.send(DiagnosticsEvent(URI, 2, (old, new, warning, new), (new,)))  # the same again: once

    streamed, _ = await _watched(send)
    assert [e.item["message"] for e in streamed if isinstance(e, DiagnosticEvent)] == ["new"]


async def test_a_completion_blocking_diagnostic_narrows_the_errors_scope_from_then_on() -> None:
    from beam_lsp import DiagnosticsEvent

    error, stale = _diag(1, "e"), _diag(0, "Imports are out of date and should be rebuilt", 3)
    later, fresh = _diag(3, "later"), _diag(4, "fresh")

    def send(events: Any) -> None:
        events.send(DiagnosticsEvent(URI, 2, (error,), (error,)))
        events.send(DiagnosticsEvent(URI, 2, (error, stale), (stale,)))
        events.send(DiagnosticsEvent(URI, 2, (error, stale, later), (later,)))  # incremental: still narrowed
        events.send(DiagnosticsEvent(URI, 2, (later, fresh), (later, fresh)))  # a whole publish without it

    streamed, _ = await _watched(send)
    shown = [e.item["message"] for e in streamed if isinstance(e, DiagnosticEvent)]
    assert shown == ["e", "Imports are out of date and should be rebuilt", "fresh"]
