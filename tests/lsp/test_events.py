"""beam_lsp._events: what a client publishes to subscribers, and the fan-out that never blocks the reader."""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio
import pytest

from beam_lsp import (
    DiagnosticsEvent,
    LeanClient,
    Position,
    ProgressEvent,
    ServerExited,
    ServerExitedEvent,
    path_to_uri,
)
from beam_lsp._events import Broadcast, EventStream, LspEvent
from beam_lsp._progress import FileProgress
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

pytestmark = pytest.mark.anyio


def _drain(stream: EventStream) -> list[LspEvent]:
    seen: list[LspEvent] = []
    while True:
        try:
            seen.append(stream.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return seen


async def test_a_full_subscriber_loses_events_and_they_are_counted() -> None:
    events = Broadcast()
    async with events.subscribe(1) as stream:
        events.send(ServerExitedEvent(ServerExited("one")))
        events.send(ServerExitedEvent(ServerExited("two")))
        [kept] = _drain(stream)
    assert isinstance(kept, ServerExitedEvent) and str(kept.error) == "one" and events.dropped == 1


async def test_a_subscriber_that_went_away_is_forgotten() -> None:
    events = Broadcast()
    async with events.subscribe(4) as stream:
        await stream.aclose()
        events.send(ServerExitedEvent(ServerExited("nobody listens")))
        events.send(ServerExitedEvent(ServerExited("still nobody")))
    assert events.dropped == 0


async def test_closing_ends_every_subscription() -> None:
    events = Broadcast()
    async with events.subscribe(4) as first, events.subscribe(4) as second:
        events.send(ServerExitedEvent(ServerExited("bye")))
        events.close()
        with anyio.fail_after(10):
            assert [e async for e in first] == [e async for e in second] != []


async def test_the_fake_server_streams_progress_diagnostics_and_the_exit(tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
            after = await stack.enter_async_context(client.subscribe())
            async with client.subscribe() as events:
                uri = path_to_uri(tmp_path / "A.lean")
                await client.open(uri, "def x := ERROR_HERE\n")
                with anyio.fail_after(10):
                    await client.sync(uri)
                seen = _drain(events)
        with anyio.fail_after(10):
            ended = [event async for event in after if isinstance(event, ServerExitedEvent)]
    progress = [e for e in seen if isinstance(e, ProgressEvent)]
    diags = [e for e in seen if isinstance(e, DiagnosticsEvent)]
    assert progress and progress[-1].params.processing == ()
    assert diags and diags[-1].version == 1 and diags[-1].diagnostics[0].message == "unknown identifier 'ERROR_HERE'"
    assert [e.error for e in ended] == [client.exited]


async def test_a_server_that_dies_ends_every_subscription_after_its_exit_event(tmp_path: Path) -> None:
    # `async for event in events` inside the client's block is the natural monitor loop: after Lean dies nothing
    # more can come, so it must end after the exit event instead of waiting until the block is left (which the
    # loop itself holds up). A subscription taken after the death gets the exit event and ends too.
    uri = path_to_uri(tmp_path / "A.lean")
    async with LeanClient.start(fake_cmd({"crash_on": {"method": "textDocument/hover"}}), cwd=tmp_path) as client:
        async with client.subscribe() as events:
            await client.open(uri, "def x := 1\n")
            with contextlib.suppress(ServerExited), anyio.fail_after(10):
                await client.hover(uri, Position(line=0, character=4))
            with anyio.fail_after(10):
                seen = [event async for event in events]
        async with client.subscribe() as late:
            with anyio.fail_after(10):
                late_seen = [event async for event in late]
        assert isinstance(seen[-1], ServerExitedEvent) and seen[-1].error is client.exited
        assert client.exited is not None and late_seen == [ServerExitedEvent(client.exited)]


@pytest.mark.lean
async def test_real_events_stream_progress_and_diagnostics(lean_toolchain: Toolchain, demo_root: Path) -> None:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as client:
        async with client.subscribe() as events:
            uri = path_to_uri(demo_root / "Demo/Broken.lean")
            await client.open(uri, (demo_root / "Demo/Broken.lean").read_text())
            with anyio.fail_after(60):
                await client.sync(uri)
            seen = _drain(events)
    progress = [e for e in seen if isinstance(e, ProgressEvent)]
    diags = [e for e in seen if isinstance(e, DiagnosticsEvent)]
    assert progress and progress[-1].params.processing == ()
    assert diags and diags[-1].diagnostics and diags[-1].version == 1


def _progress(uri: str, line: int, *, version: int | None = None, kind: int = 1) -> ProgressEvent:
    rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}
    processing = [] if line < 0 else [{"range": rng, "kind": kind}]
    return ProgressEvent(
        FileProgress.from_params({"processing": processing, "textDocument": {"uri": uri, "version": version}})
    )


async def test_a_final_or_fatal_report_or_a_new_version_is_queued_after_the_unread_one_never_merged() -> None:
    events = Broadcast()
    a = "file:///a.lean"
    async with events.subscribe(16, coalesce_progress=True) as stream:
        events.send(_progress(a, 1, version=1))
        events.send(_progress(a, 2, version=1))  # replaces line 1
        events.send(_progress(a, -1, version=1))  # final: queued after, not merged
        events.send(_progress(a, 3, version=2))  # a new version after the final report: queued after it
        events.send(_progress(a, 4, version=2))  # replaces line 3
        events.send(_progress(a, 5, version=3))  # another version: queued after, never merged into version 2
        events.send(_progress(a, 0, version=3, kind=2))  # fatal: queued after
        seen = [e.report for e in _drain(stream) if isinstance(e, ProgressEvent)]
        assert stream.coalesced == 2
    assert [(r.version, r.done, r.fatal) for r in seen] == [
        (1, False, False),
        (1, True, False),
        (2, False, False),
        (3, False, False),
        (3, False, True),
    ]
    assert [r.processing[0].start.line for r in seen if not r.done and not r.fatal] == [2, 4, 5]


async def test_a_coalescing_subscriber_reads_only_the_newest_unread_progress_of_each_document() -> None:
    events = Broadcast()
    async with events.subscribe(8, coalesce_progress=True) as stream, events.subscribe(8) as every:
        for line in (1, 2, 3):
            events.send(_progress("file:///a.lean", line))
        events.send(ServerExitedEvent(ServerExited("between")))
        events.send(_progress("file:///b.lean", 7))
        events.send(_progress("file:///a.lean", 4))  # a's unread event already holds 3: replaced in place
        seen = _drain(stream)
        assert stream.pending == 0 and stream.coalesced == 3
        events.send(_progress("file:///a.lean", 5))  # read meanwhile: queued anew
        later = _drain(stream)
        assert len(_drain(every)) == 7
    lines = [e.params.processing[0].range.start.line if isinstance(e, ProgressEvent) else None for e in seen]
    assert lines == [4, None, 7]
    assert [e.report.uri for e in later if isinstance(e, ProgressEvent)] == ["file:///a.lean"]


async def test_a_coalescing_subscriber_that_is_full_still_loses_new_documents_and_counts_them() -> None:
    events = Broadcast()
    async with events.subscribe(1, coalesce_progress=True) as stream:
        events.send(_progress("file:///a.lean", 1))
        events.send(_progress("file:///b.lean", 1))  # no room
        events.send(_progress("file:///a.lean", 2))  # replaces a's, needs no room
        [only] = _drain(stream)
    assert events.dropped == 1 and isinstance(only, ProgressEvent) and only.params.processing[0].range.start.line == 2


async def test_a_waiting_reader_wakes_for_each_event_and_ends_with_the_stream() -> None:
    events = Broadcast()
    async with events.subscribe(4) as stream, anyio.create_task_group() as tg:
        got: list[LspEvent] = []

        async def read() -> None:
            async for event in stream:
                got.append(event)  # noqa: PERF401 - each event must show as soon as it is read

        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        events.send(ServerExitedEvent(ServerExited("one")))
        await anyio.wait_all_tasks_blocked()
        assert len(got) == 1
        events.close()
        with anyio.fail_after(10):
            await anyio.wait_all_tasks_blocked()
    assert len(got) == 1
    with pytest.raises(anyio.ClosedResourceError):
        stream.receive_nowait()
    with pytest.raises(anyio.ClosedResourceError):
        await stream.receive()
