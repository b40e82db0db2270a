"""beam_lsp.client: the `LeanClient` facade (lifecycle, documents, typed requests, its one error boundary).

The fake lane drives the scripted fake Lean server (tests/support/fake_lean.py), including a server that dies at
each point of a session; the lean lane runs the same API against real Lean 4.35.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from lsprotocol import types

from beam_lsp import (
    DEFAULT_SERVER_REQUESTS,
    Availability,
    ContentModified,
    DiagnosticsCache,
    DiagnosticsEvent,
    DocumentError,
    DocumentNotOpen,
    Elaboration,
    InteractiveGoals,
    InvalidPosition,
    InvalidResult,
    JsonValue,
    LeanClient,
    LeanDiagnostic,
    LeanTag,
    Position,
    ProgressEvent,
    Range,
    ResponseError,
    RpcNeedsReconnect,
    RpcRef,
    ServerExited,
    TextDocument,
    path_to_uri,
    utf16_len,
)
from beam_lsp import errors as codes
from beam_lsp._events import EventStream, LspEvent
from beam_lsp.client import SHUTDOWN_TIMEOUT
from tests.support import procs, projects
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

pytestmark = pytest.mark.anyio
TEXT = "theorem x : True := by\n  trivial\n\ndef y := x\n"
CRASH_ITERATIONS = int(os.environ.get("BEAM_CRASH_ITERATIONS", "10"))


def P(line: int, character: int) -> Position:
    return Position(line=line, character=character)


def _drain_events(events: EventStream) -> list[LspEvent]:
    seen = []
    while events.pending:
        seen.append(events.receive_nowait())
    return seen


async def opened(client: LeanClient, tmp_path: Path, text: str = TEXT, name: str = "A.lean") -> str:
    uri = path_to_uri(tmp_path / name)
    await client.open(uri, text)
    return uri


# ---- a dead server is ServerExited on every path ------------------------------------------------------
@pytest.mark.parametrize(
    "method",
    [
        "textDocument/didOpen",
        "textDocument/didChange",
        "textDocument/didSave",
        "textDocument/waitForDiagnostics",
        "textDocument/hover",
    ],
)
async def test_a_server_dying_at_any_point_of_a_session_is_server_exited_every_time(
    tmp_path: Path, method: str
) -> None:
    config: dict[str, object] = {"crash_on": {"method": method, "exit_code": 7, "stderr": f"PANIC on {method}"}}
    for iteration in range(CRASH_ITERATIONS):
        async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
            uri = path_to_uri(tmp_path / f"A{iteration}.lean")
            with anyio.fail_after(30):
                errors = await _session_until_the_server_dies(client, uri)
            assert len(errors) >= 2 and all(error is client.exited for error in errors), (iteration, errors)
            exited = client.exited
            assert isinstance(exited, ServerExited) and exited.returncode == 7, (iteration, str(exited))
            assert f"PANIC on {method}" in exited.stderr_tail, (iteration, str(exited))
            await client.close(uri)  # never raises: the document is only forgotten
            for call in (client.sync(uri), client.request("workspace/symbol", {"query": ""})):
                with pytest.raises((ServerExited, DocumentNotOpen)):
                    await call
            with pytest.raises(ServerExited):
                await client.open(path_to_uri(tmp_path / "B.lean"), TEXT)


async def _session_until_the_server_dies(client: LeanClient, uri: str) -> list[Exception]:
    """Open `uri`, then keep changing it while syncing and hovering, until every path has failed."""
    errors: list[Exception] = []

    async def until_it_fails(step: Callable[[int], Awaitable[object]]) -> None:
        try:
            for i in range(100_000):
                await step(i)
        except Exception as exc:
            errors.append(exc)

    async def requests(_: int) -> None:
        await client.sync(uri)
        await client.hover(uri, P(0, 8))

    try:
        await client.open(uri, TEXT)
    except Exception as exc:
        errors.append(exc)
    async with anyio.create_task_group() as tg:
        # Writes race the exit (broken pipes) while requests wait for answers that never come.
        tg.start_soon(until_it_fails, lambda i: client.change(uri, f"{TEXT}-- {i}\n"))
        tg.start_soon(until_it_fails, requests)
    return errors


async def test_rpc_notifications_after_the_exit_are_server_exited(tmp_path: Path) -> None:
    config: dict[str, object] = {"crash_on": {"method": "textDocument/hover"}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10), pytest.raises(ServerExited):
            await client.hover(uri, P(0, 8))
        for call in (client.rpc_release(uri, "1", []), client.rpc_keep_alive(uri, "1"), client.change(uri, "")):
            with pytest.raises(ServerExited):
                await call


@pytest.mark.parametrize("kind", ["oversized", "no_content_length", "garbage_header"])
async def test_broken_framing_ends_the_session_with_a_typed_error(tmp_path: Path, kind: str) -> None:
    config: dict[str, object] = {"malformed": {"on": "textDocument/hover", "kind": kind, "then": "hang"}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path, max_message_bytes=1024 * 1024) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10), pytest.raises(ServerExited) as info:
            await client.hover(uri, P(0, 8))
        assert "unrecoverable protocol error" in str(info.value)


async def test_a_callers_own_exception_leaves_the_client_unwrapped(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="mine"):
        async with LeanClient.start(fake_cmd(), cwd=tmp_path):
            raise KeyError("mine")


# ---- documents ----------------------------------------------------------------------------------------
async def test_documents_are_mirrored_and_versions_count_up(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        assert await client.open(uri, TEXT, dependency_build_mode="never") == 1
        assert client.is_open(uri) and client.open_documents == [uri] and client.stats().open_documents == 1
        with pytest.raises(ValueError, match="already open"):
            await client.open(uri, TEXT)
        assert await client.change(uri, "def z := 1\n") == 2
        assert await client.restart_document(uri) == 3
        assert client.document(uri).text == "def z := 1\n"
        with anyio.fail_after(10):
            assert (await client.sync(uri)).version == 3
        await client.close(uri)
        await client.close(uri)  # unknown now: nothing happens
        assert not client.is_open(uri)
        with pytest.raises(DocumentNotOpen):
            await client.sync(uri)
        with pytest.raises(DocumentNotOpen):
            await client.change(uri, "")


async def test_a_change_waiting_behind_a_close_of_its_document_is_document_not_open(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        outcome: list[BaseException] = []

        async def change() -> None:
            try:
                await client.change(uri, "def z := 1\n")
            except DocumentNotOpen as exc:
                outcome.append(exc)

        lock = client._barrier.lock(uri)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                async with lock:  # hold the document's lock, as an in-flight notification would
                    tg.start_soon(change)
                    await anyio.wait_all_tasks_blocked()
                    tg.start_soon(client.close, uri)  # forgets the document at once, then queues for the lock
                    await anyio.wait_all_tasks_blocked()
        assert len(outcome) == 1 and not client.is_open(uri)


async def test_a_sync_whose_document_is_closed_meanwhile_is_document_not_open(tmp_path: Path) -> None:
    # Lean fails the pending `waitForDiagnostics` of a closed document with -32801 ("The file worker ... has been
    # terminated.", lean-wire.md); `sync` promises `DocumentNotOpen` then, not Lean's ContentModified.
    async with LeanClient.start(fake_cmd({"elab_ms": 60_000}), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        outcome: list[BaseException] = []

        async def sync() -> None:
            try:
                await client.sync(uri)
            except Exception as exc:
                outcome.append(exc)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sync)
                await anyio.wait_all_tasks_blocked()
                assert client.stats().pending == 1  # the waitForDiagnostics is out
                await client.close(uri)
        assert len(outcome) == 1 and isinstance(outcome[0], DocumentNotOpen)


def _versioned_edit(uri: str, version: int | None, edit: Range, new_text: str) -> types.WorkspaceEdit:
    """A workspace edit as Lean's code actions carry it (`documentChanges` naming the document's version)."""
    rng = types.Range(
        start=types.Position(line=edit.start.line, character=edit.start.character),
        end=types.Position(line=edit.end.line, character=edit.end.character),
    )
    identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    edits: list[types.TextEdit | types.AnnotatedTextEdit | types.SnippetTextEdit] = [
        types.TextEdit(range=rng, new_text=new_text)
    ]
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=identifier, edits=edits)])


async def test_an_edit_for_an_older_version_of_a_document_is_refused_not_spliced_into_the_new_text(
    tmp_path: Path,
) -> None:
    # A code action Lean computed for version 1 (the range of `1`), applied after the document changed: its range
    # now points into other text. LSP's version in `documentChanges` is there to refuse exactly this.
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path, "def x := 1\n")
        stale = _versioned_edit(uri, 1, Range(start=P(0, 9), end=P(0, 10)), "2")
        assert await client.change(uri, "def longer := 1\n") == 2
        with pytest.raises(DocumentError, match="version 1"):
            await client.apply_edit(stale)
        assert client.document(uri).text == "def longer := 1\n" and client.document(uri).version == 2
        current = _versioned_edit(uri, 2, Range(start=P(0, 14), end=P(0, 15)), "2")
        assert await client.apply_edit(current) == {uri: 3}
        assert client.document(uri).text == "def longer := 2\n"
        unversioned = _versioned_edit(uri, None, Range(start=P(0, 14), end=P(0, 15)), "3")
        assert await client.apply_edit(unversioned) == {uri: 4}
        assert client.document(uri).text == "def longer := 3\n"


def _two_document_edit(first: types.WorkspaceEdit, second: types.WorkspaceEdit) -> types.WorkspaceEdit:
    assert first.document_changes is not None and second.document_changes is not None
    return types.WorkspaceEdit(document_changes=[*first.document_changes, *second.document_changes])


@pytest.mark.parametrize("versioned", [True, False])
async def test_an_edit_of_two_documents_never_loses_a_change_made_to_the_second_while_the_first_is_sent(
    tmp_path: Path, versioned: bool
) -> None:
    # `apply_edit` of A then B: while A's part waits to be sent (A's lock held, as an in-flight notification of A
    # would), B changes. B's part must be applied to B's text of then, not to a copy read before A's wait: an edit
    # naming B's older version is refused (nothing changed), one naming no version applies on top of the change.
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        a = await opened(client, tmp_path, "def a := 1\n", name="A.lean")
        b = await opened(client, tmp_path, "def b := 1\n", name="B.lean")
        version = 1 if versioned else None
        edit = _two_document_edit(
            _versioned_edit(a, version, Range(start=P(0, 9), end=P(0, 10)), "2"),
            _versioned_edit(b, version, Range(start=P(0, 0), end=P(0, 0)), "-- edited\n"),
        )
        outcome: list[object] = []

        async def apply() -> None:
            try:
                outcome.append(await client.apply_edit(edit))
            except DocumentError as exc:
                outcome.append(exc)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                async with client._barrier.lock(a):
                    tg.start_soon(apply)
                    await anyio.wait_all_tasks_blocked()
                    assert await client.change(b, "def b := 1\ndef c := b\n") == 2  # while A's part waits
            if versioned:
                assert len(outcome) == 1 and isinstance(outcome[0], DocumentError)
                assert client.document(a).text == "def a := 1\n" and client.document(a).version == 1  # nothing changed
                assert client.document(b).text == "def b := 1\ndef c := b\n" and client.document(b).version == 2
            else:
                assert outcome == [{a: 2, b: 3}]
                assert client.document(a).text == "def a := 2\n"
                assert client.document(b).text == "-- edited\ndef b := 1\ndef c := b\n"
            symbols = await client.document_symbols(b)  # Lean holds the client's text of B
        assert [symbol.name for symbol in symbols] == ["b", "c"]


async def test_a_reopen_while_the_close_waits_for_the_documents_lock_is_not_closed_by_it(tmp_path: Path) -> None:
    # A `didClose` queued behind an in-flight notification of the document (a change waiting for the write lock)
    # must reach Lean before the `didOpen` of a reopen; after it, Lean would close the document the client holds
    # open, and every request about it would fail with "Cannot process request to closed file".
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                async with client._barrier.lock(uri):  # hold the document's lock, as an in-flight notification would
                    tg.start_soon(client.close, uri)  # forgets the document at once, then queues for the lock
                    await anyio.wait_all_tasks_blocked()
                    tg.start_soon(client.open, uri, "def z := x\n")
                    await anyio.wait_all_tasks_blocked()
            assert client.is_open(uri)
            assert (await client.sync(uri)).complete
            hover = await client.hover(uri, P(0, 4))
        assert hover is not None


async def test_a_deferred_change_reaches_lean_before_anything_that_asks_about_its_document(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10):
            await client.sync(uri)
        async with client.subscribe() as events:
            assert await client.change(uri, "def z := ERROR_HERE\n", defer=60) == 2
            assert await client.change(uri, "def fresh := ERROR_HERE\n", defer=60) == 3  # joins the first
            assert client.document(uri).version == 3 and client.document(uri).text == "def fresh := ERROR_HERE\n"
            await anyio.sleep(0.2)
            assert client.cache.get(uri).version == 1  # not sent: Lean still has version 1
            with anyio.fail_after(10):
                hover = await client.hover(uri, P(0, 5))  # the request sends the change first
                assert hover is not None and "fresh" in str(hover.contents)
                result = await client.sync(uri)
            seen = _drain_events(events)
        assert result.version == 3 and [d.message for d in result.errors] == [UNKNOWN]
        versions = {e.version for e in seen if isinstance(e, DiagnosticsEvent)}
        assert versions == {3}  # the two changes reached Lean as one version


async def test_a_deferred_change_is_sent_when_its_time_is_up_or_before_a_workspace_request(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        other = await opened(client, tmp_path, name="B.lean")
        async with client.subscribe() as events:
            await client.change(uri, "def z := ERROR_HERE\n", defer=0.05)
            with anyio.fail_after(10):
                while client.cache.get(uri).version != 2:
                    await events.receive()  # nobody asked: the timer sent it
            await client.change(other, "def w := ERROR_HERE\n", defer=60)
            await client.workspace_symbols("w")  # names no document: every deferred change goes first
            with anyio.fail_after(10):
                while client.cache.get(other).version != 2:
                    await events.receive()
            await client.change(uri, "def z := 2\n", defer=0.2)
            await client.hover(uri, P(0, 4))  # sends it before its time
            await client.change(uri, "def z := 3\n", defer=60)
            await anyio.sleep(0.4)  # the first change's timer is past: it does not send this one
            assert client.cache.get(uri).version == 3 and client.document(uri).version == 4
            await client.close(uri)
        assert not client.is_open(uri)
        with anyio.fail_after(10):
            assert (await client.sync(other)).version == 2


class _Wire:
    """Stands in for the client's stdin writer and records what the client writes, in the order Lean reads it."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send
        self.sent: list[tuple[str, JsonValue]] = []
        """The method and params of every message written (`""` for an answer to the server)."""

    async def send(self, data: bytes) -> None:
        message = json.loads(data.partition(b"\r\n\r\n")[2])
        self.sent.append((message.get("method", ""), message.get("params")))
        await self._send(data)

    def methods(self) -> list[str]:
        return [method for method, _ in self.sent]


def _uri(params: JsonValue) -> str:
    """The document a recorded notification names."""
    assert isinstance(params, dict) and isinstance(params["textDocument"], dict)
    uri = params["textDocument"]["uri"]
    assert isinstance(uri, str)
    return uri


def wire(client: LeanClient, monkeypatch: pytest.MonkeyPatch) -> _Wire:
    """Record every message the client writes from now on."""
    recorder = _Wire(client._rpc._send.send)
    monkeypatch.setattr(client._rpc, "_send", recorder)
    return recorder


async def test_files_changed_reaches_lean_after_every_deferred_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `didChangeWatchedFiles` says modules were rebuilt: Lean restarts the workers importing them, on the text it
    # has. A change the client still defers must reach Lean first, or Lean restarts a worker on the old text (or
    # applies the edit after the rebuild notice), as a request about the document would have flushed it.
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        a = await opened(client, tmp_path)
        b = await opened(client, tmp_path, name="B.lean")
        recorded = wire(client, monkeypatch)
        with anyio.fail_after(10):
            await client.change(a, "def z := ERROR_HERE\n", defer=60)
            await client.change(b, "def w := 1\n", save=False, defer=60)
            # Both deferred: nothing sent about them (an answer to a request of Lean's may go out meanwhile).
            assert [method for method in recorded.methods() if method] == []
            await client.files_changed([path_to_uri(tmp_path / "Dep.lean")])
            assert (await client.sync(a)).version == 2 and (await client.sync(b)).version == 2
        sent = recorded.methods()
        watched = sent.index("workspace/didChangeWatchedFiles")
        before = recorded.sent[:watched]
        assert sorted(_uri(params) for method, params in before if method == "textDocument/didChange") == [a, b]
        assert [_uri(params) for method, params in before if method == "textDocument/didSave"] == [a]  # `b`: no save
        assert "textDocument/didChange" not in sent[watched:]


@pytest.mark.parametrize("seed", range(6))
async def test_lean_always_answers_about_the_text_we_hold_whatever_mix_of_deferred_and_sent_changes(
    tmp_path: Path, seed: int
) -> None:
    # Random edits (range edits with astral characters inside lines, lines inserted and deleted), each sent at
    # once or deferred (briefly or for long), mixed with requests, syncs and pauses: every answer is about the
    # client's own text. The fake's document symbols show its copy: names, lines and UTF-16 columns.
    rng = random.Random(seed)

    def expected(text: str) -> list[tuple[int, str, int, int, int]]:
        out = []
        for i, line in enumerate(text.split("\n")):
            if m := re.match(r"(def)\s+([^\s:(]+)", line):
                out.append((i, m.group(2), utf16_len(line[: m.start(2)]), utf16_len(line[: m.end(2)]), utf16_len(line)))
        return out

    def edited(text: str) -> str:
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        kind = rng.choice(["insert", "delete", "rename", "value"])
        if kind == "insert":
            value = rng.choice(["1", "\U0001d538", "\u00e9\U0001d539"])
            lines.insert(i, f"def n{rng.randrange(1000)} := {value}")
        elif kind == "delete" and len(lines) > 1:
            del lines[i]
        elif kind == "rename":
            lines[i] = re.sub(r"^def \S+", f"def m{rng.randrange(1000)}\U0001d538", lines[i])
        else:
            lines[i] = lines[i] + rng.choice(["\U0001d538", " x", "\u00e9"])
        return "\n".join(lines)

    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path, "".join(f"def n{i} := \U0001d538{i}\n" for i in range(6)))
        with anyio.fail_after(30):
            for _ in range(40):
                op = rng.choice(["edit", "edit", "edit", "ask", "sync", "pause"])
                if op == "edit":
                    text = edited(client.document(uri).text)
                    await client.change(uri, text, defer=rng.choice([0, 0.005, 60]))
                elif op == "ask":
                    got = [
                        (
                            s.range.start.line,
                            s.name,
                            s.selection_range.start.character,
                            s.selection_range.end.character,
                            s.range.end.character,
                        )
                        for s in await client.document_symbols(uri)
                        if isinstance(s, types.DocumentSymbol)
                    ]
                    assert got == expected(client.document(uri).text)
                elif op == "sync":
                    assert (await client.sync(uri)).version == client.document(uri).version
                else:
                    await anyio.sleep(0.01)
            result = await client.sync(uri)
        assert result.version == client.document(uri).version


async def test_requests_for_unknown_documents_or_bad_positions_are_never_sent(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        sent = client.stats().requests
        with pytest.raises(DocumentNotOpen):
            await client.hover(path_to_uri(tmp_path / "Nope.lean"), P(0, 0))
        with pytest.raises(InvalidPosition):
            await client.hover(uri, P(99, 0))
        with pytest.raises(InvalidPosition):
            await client.code_actions(uri, Range(start=P(1, 0), end=P(0, 0)))
        with pytest.raises(DocumentNotOpen):
            await client.document_symbols(path_to_uri(tmp_path / "Nope.lean"))
        assert client.stats().requests == sent


# ---- typed requests over the fake server --------------------------------------------------------------
async def test_the_handshake_records_what_the_server_said(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path, initialization_options={"editDelay": 0}) as client:
        assert client.server_info == types.ServerInfo(name="Lean 4 Server", version="0.3.0")
        assert client.capabilities.hover_provider is True


async def test_typed_requests_turn_lean_answers_into_typed_results(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"goal": "⊢ p"}), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10):
            assert (await client.sync(uri)).complete
            hover = await client.hover(uri, P(0, 8))
            goal = await client.plain_goal(uri, P(0, 20))
            no_goal = await client.plain_goal(uri, P(3, 0))
            term = await client.plain_term_goal(uri, P(0, 20))
            signature = await client.signature_help(uri, P(0, 8))
            definition = await client.definition(uri, P(3, 9))
            declaration = await client.declaration(uri, P(3, 9))
            references = await client.references(uri, P(3, 9), include_declaration=False)
            symbols = await client.document_symbols(uri)
            workspace = await client.workspace_symbols("x")
            actions = await client.code_actions(uri, Range(start=P(0, 0), end=P(0, 5)))
            resolved = await client.resolve_code_action(types.CodeAction(title="t", data={"k": [1]}))
            raw = await client.request("$/lean/waitForILeans", {"textDocument": {"uri": uri}})
            await client.wait_for_ileans()
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value == "```lean\nx\n```" and hover.range is not None
    assert goal is not None and goal.goals == ("⊢ p",) and no_goal is None
    assert term is None and signature is None
    assert definition == [] and declaration == [] and references == [] and workspace == [] and actions == []
    assert [(s.name, s.kind) for s in symbols] == [("x", types.SymbolKind.Method), ("y", types.SymbolKind.Method)]
    assert isinstance(symbols[0], types.DocumentSymbol)
    assert resolved == types.CodeAction(title="t", data={"k": [1]}) and raw == {}


async def test_completion_answers_a_typed_list_and_resolve_sends_an_item_s_opaque_data_back(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10):
            listed = await client.completion(uri, P(3, 9))
            item = types.CompletionItem(
                label="x", kind=types.CompletionItemKind.Constant, data=["opaque", 3, {"k": None}]
            )
            resolved = await client.resolve_completion(item)
        sent = client.stats().requests
        with pytest.raises(InvalidPosition):
            await client.completion(uri, P(9, 0))
        assert client.stats().requests == sent
    assert listed == types.CompletionList(is_incomplete=True, items=())
    assert resolved == item


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ([{"label": "a"}], types.CompletionList(is_incomplete=False, items=(types.CompletionItem(label="a"),))),
        (None, types.CompletionList(is_incomplete=False, items=())),
        (
            {"isIncomplete": True, "items": [{"label": "b"}]},
            types.CompletionList(is_incomplete=True, items=(types.CompletionItem(label="b"),)),
        ),
    ],
)
async def test_completion_takes_every_shape_lsp_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: object, expected: types.CompletionList
) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)

        async def request(method: str, params: object = None) -> object:
            assert method == "textDocument/completion"
            return answer

        monkeypatch.setattr(client, "_request", request)
        assert await client.completion(uri, P(0, 0)) == expected


async def test_an_answer_of_the_wrong_shape_is_invalid_result_and_the_session_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        answers: list[object] = [{"contents": 3}, ["not a location"], {"rendered": 1}, "x"]

        async def request(method: str, params: object = None) -> object:
            return answers.pop(0)

        monkeypatch.setattr(client, "_request", request)
        for call in (client.hover, client.definition, client.plain_goal, client.document_highlights):
            with pytest.raises(InvalidResult) as info:
                await call(uri, P(0, 0))
            assert "token" not in str(info.value)
        monkeypatch.undo()
        with anyio.fail_after(10):
            assert await client.hover(uri, P(0, 8)) is not None


async def test_interactive_goals_reuse_one_rpc_session_and_reconnect_once_when_it_expires(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"rpc": True, "rpc_outdated": 1}), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10):
            goals = await client.interactive_goals(uri, P(0, 20))  # the first call finds its session outdated
            again = await client.interactive_goals(uri, P(0, 20))
            none = await client.interactive_goals(uri, P(3, 0))
            session = await client.rpc_connect(uri)
            await client.rpc_keep_alive(uri, session)
            await client.rpc_release(uri, session, [RpcRef(p="1")])
            with pytest.raises(ResponseError) as unknown:
                await client.rpc_call(uri, session, P(0, 0), "Nope.method", {})
    assert goals == again == InteractiveGoals.from_json({"goals": [{"goalPrefix": "⊢ ", "type": {"text": "True"}}]})
    assert goals is not None and goals.goals[0].plain == "⊢ True"
    assert none is None and unknown.value.code == codes.METHOD_NOT_FOUND


async def test_concurrent_rpc_calls_on_a_document_share_one_session_connected_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second session would never be kept alive or released: concurrent callers wait for the first one's connect.
    async with LeanClient.start(fake_cmd({"rpc": True}), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        recorded = wire(client, monkeypatch)
        answers: list[InteractiveGoals | None] = []

        async def goals() -> None:
            answers.append(await client.interactive_goals(uri, P(0, 20)))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(goals)
        assert recorded.methods().count("$/lean/rpc/connect") == 1
        assert len(answers) == 4 and all(answer is not None for answer in answers)
        calls = [params for method, params in recorded.sent if method == "$/lean/rpc/call"]
        assert len({str(params["sessionId"]) for params in calls if isinstance(params, dict)}) == 1


async def test_a_failed_rpc_connect_is_not_kept_and_a_reopened_document_connects_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with LeanClient.start(fake_cmd({"rpc": True}), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        recorded = wire(client, monkeypatch)
        connect = client.rpc_connect
        attempts = 0

        async def failing_once(uri: str) -> int | str:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                await anyio.wait_all_tasks_blocked()  # the other caller waits for this connect by now
                raise ContentModified(codes.CONTENT_MODIFIED, "File changed.")
            return await connect(uri)

        monkeypatch.setattr(client, "rpc_connect", failing_once)
        outcomes: list[object] = []

        async def goals() -> None:
            try:
                outcomes.append(await client.interactive_goals(uri, P(0, 20)))
            except ContentModified as exc:
                outcomes.append(exc)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(goals)
                tg.start_soon(goals)
            assert sum(isinstance(outcome, ContentModified) for outcome in outcomes) == 1  # the other one connected
            assert recorded.methods().count("$/lean/rpc/connect") == 1
            await client.close(uri)
            await client.open(uri, TEXT)
            reopened = len(recorded.sent)
            assert await client.interactive_goals(uri, P(0, 20)) is not None
        # The old session died with the worker: a new one first, not a call in the old one that Lean refuses.
        rpc = [method for method in recorded.methods()[reopened:] if method.startswith("$/lean/rpc/")]
        assert rpc == ["$/lean/rpc/connect", "$/lean/rpc/call"]


async def test_an_rpc_session_that_expires_twice_in_a_row_is_rpc_needs_reconnect(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"rpc": True, "rpc_outdated": 2}), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10), pytest.raises(RpcNeedsReconnect) as info:
            await client.interactive_goals(uri, P(0, 20))
    assert info.value.code == codes.RPC_NEEDS_RECONNECT


async def test_secrets_in_logs_stderr_and_diagnostics_are_redacted(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "MY_API_TOKEN": "supersecret-0123456789"}
    config: dict[str, object] = {"log_env": {"vars": ["MY_API_TOKEN"], "diagnostic_var": "MY_API_TOKEN"}}
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path, env=env) as client:
        uri = await opened(client, tmp_path, "theorem x : True := trivial\n")
        with anyio.fail_after(10):
            # The log notification precedes the elaboration messages in the stream, so it is in by now.
            result = await client.sync(uri)
        texts = [d.message for d in result.diagnostics] + [e.message for e in client.cache.logs.entries()]
    # Lean's stderr is another pipe, read on its own: all of it is in once the server has exited.
    texts.append(client.stderr_tail())
    assert all("supersecret" not in t for t in texts)
    assert all("[redacted:MY_API_TOKEN]" in t for t in texts)


# ---- closed documents: never a false clean ------------------------------------------------------------
BROKEN = "theorem t : True := ERROR_HERE\n"
UNKNOWN = "unknown identifier 'ERROR_HERE'"


async def round_trip(client: LeanClient) -> None:
    """Return once the server has handled everything sent before (the fake answers in order)."""
    await client.request("workspace/symbol", {"query": ""})


async def test_closing_a_document_with_errors_never_makes_it_read_clean(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client, client.subscribe() as events:
        uri = await opened(client, tmp_path, BROKEN)
        with anyio.fail_after(10):
            assert [d.message for d in (await client.sync(uri)).errors] == [UNKNOWN]
            while events.pending:
                events.receive_nowait()
            await client.close(uri)
            await round_trip(client)  # Lean's clearing publish for the closed file has arrived by now
        snap = client.cache.get(uri)
        assert (snap.availability, snap.version, snap.elaboration, snap.open) == (
            Availability.PUBLISHED,
            1,
            Elaboration.COMPLETE,
            False,
        )
        assert [d.message for d in snap.diagnostics] == [UNKNOWN]
        assert events.pending == 0  # the clearing publish reached no subscriber


async def test_a_reopened_document_never_takes_the_clearing_publish_of_its_closed_lifetime(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path, BROKEN)
        await client.change(uri, BROKEN + "-- version 2\n")
        with anyio.fail_after(10):
            assert (await client.sync(uri)).errors
            await client.close(uri)
            await client.open(uri, BROKEN)  # version 1 again, while Lean still owes the clearing publish of 2
            result = await client.sync(uri)
        assert result.complete and [d.message for d in result.errors] == [UNKNOWN]
        assert result.diagnostics_version == 1 and client.cache.get(uri).open is True


async def test_leaving_the_client_keeps_what_lean_said_about_its_open_documents(tmp_path: Path) -> None:
    cache = DiagnosticsCache()
    async with LeanClient.start(fake_cmd(), cwd=tmp_path, cache=cache) as client:
        uri = await opened(client, tmp_path, BROKEN)
        with anyio.fail_after(10):
            await client.sync(uri)
    # Lean publishes [] for every open file on shutdown; the cache keeps the errors and says the file is closed.
    snap = cache.get(uri)
    assert (snap.availability, snap.open, [d.message for d in snap.diagnostics]) == (
        Availability.PUBLISHED,
        False,
        [UNKNOWN],
    )


async def test_the_documents_of_a_dead_server_read_as_closed_with_their_last_diagnostics(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd({"crash_on": {"method": "textDocument/hover"}}), cwd=tmp_path) as client:
        uri = await opened(client, tmp_path, BROKEN)
        with anyio.fail_after(10):
            await client.sync(uri)
            with pytest.raises(ServerExited):
                await client.hover(uri, P(0, 8))
        snap = client.cache.get(uri)
        assert snap.open is False and [d.message for d in snap.diagnostics] == [UNKNOWN]


# ---- against real Lean --------------------------------------------------------------------------------
@pytest.fixture
async def client(lean_toolchain: Toolchain, demo_root: Path) -> AsyncIterator[LeanClient]:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as c:
        yield c


async def open_file(client: LeanClient, root: Path, rel: str) -> str:
    path = root / rel
    uri = path_to_uri(path)
    await client.open(uri, path.read_text(encoding="utf-8"))
    return uri


@pytest.mark.lean
async def test_real_clean_file_syncs_complete_with_no_diagnostics(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Proofs.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
    assert result.elaboration is Elaboration.COMPLETE and result.complete
    assert result.version == 1 and result.diagnostics == () and result.diagnostics_version == 1
    assert result.availability is Availability.PUBLISHED
    assert client.server_info is not None and client.server_info.name == "Lean 4 Server"


@pytest.mark.lean
async def test_real_type_error_is_reported_with_its_range_and_full_range(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Broken.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
    assert result.complete
    [err] = result.errors
    assert err.message.startswith("Type mismatch")
    assert err.range.start.line == 3 and err.fullRange is not None and err.fullRange.start.line == 3


@pytest.mark.lean
async def test_real_warning_comes_with_a_code_action_that_resolves(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Warn.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
        [warning] = result.diagnostics
        assert warning.severity == 2 and "not explicitly referenced" in warning.message
        actions = await client.code_actions(uri, Range(start=P(4, 8), end=P(4, 9)))
        assert actions and isinstance(actions[0], types.CodeAction) and actions[0].title == "Try this: _x"
        resolved = await client.resolve_code_action(actions[0])
        assert resolved.edit is not None
        versions = await client.apply_edit(resolved.edit)
    assert versions == {uri: 2}
    assert client.document(uri).text.splitlines()[4] == "  (fun (_x : p) => myTrue) hp"


@pytest.mark.lean
async def test_real_unsolved_goals_and_plain_goals_in_a_tactic_block(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Goals.lean")
    with anyio.fail_after(60):
        result = await client.sync(uri)
        unsolved = [d for d in result.errors if d.leanTags and LeanTag.UNSOLVED_GOALS in d.leanTags]
        assert unsolved and unsolved[0].message.startswith("unsolved goals")
        before = await client.plain_goal(uri, P(3, 43))
        inside = await client.plain_goal(uri, P(4, 2))
        term = await client.plain_term_goal(uri, P(3, 43))
        outside = await client.plain_goal(uri, P(0, 0))
    assert before is not None and before.goals == ("p : Prop\nhp : p\n⊢ p",)
    assert inside is not None and inside.goals == before.goals
    assert term is None and outside is None


@pytest.mark.lean
async def test_real_structured_goals_come_from_lean_rpc(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Goals.lean")
    with anyio.fail_after(60):
        await client.sync(uri)
        goals = await client.interactive_goals(uri, P(4, 2))
    assert goals is not None
    [goal] = goals.goals
    assert [h.names for h in goal.hyps] == [("p",), ("hp",)]
    assert goal.goalPrefix == "⊢ " and goal.plain == "p : Prop\nhp : p\n⊢ p"


@pytest.mark.lean
async def test_real_navigation_requests_answer_across_modules(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Proofs.lean")
    with anyio.fail_after(60):
        await client.sync(uri)
        hover = await client.hover(uri, P(3, 29))
        none_hover = await client.hover(uri, P(2, 0))
        definition = await client.definition(uri, P(3, 29))
        refs = await client.references(uri, P(3, 29), include_declaration=True)
        symbols = await client.document_symbols(uri)
        ws = await client.workspace_symbols("idPro")
        sig = await client.signature_help(uri, P(6, 3))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("```lean\nmyTrue : MyTrue\n```")
    assert none_hover is None
    [target] = definition
    target_uri = target.target_uri if isinstance(target, types.LocationLink) else target.uri
    assert target_uri == path_to_uri(demo_root / "Demo/Basic.lean")
    assert {r.uri for r in refs} >= {uri, path_to_uri(demo_root / "Demo/Basic.lean")}
    assert [s.name for s in symbols] == ["byTerm", "idProof", "two"]
    assert [s.name for s in ws] == ["idProof"]
    assert sig is None


@pytest.mark.lean
async def test_real_completions_after_a_dot_resolve_to_their_types(client: LeanClient, demo_root: Path) -> None:
    text = "prelude\nimport Demo.Basic\n\ndef probe := MyNat.\n"
    path = demo_root / "Demo" / "Complete.lean"
    path.write_text(text, encoding="utf-8")
    uri = await open_file(client, demo_root, "Demo/Complete.lean")
    with anyio.fail_after(60):
        listed = await client.completion(uri, P(3, 19))
        by_label = {item.label: item for item in listed.items}
        resolved = await client.resolve_completion(by_label["succ"])
    assert {"zero", "succ", "one"} <= set(by_label)
    assert by_label["succ"].kind == types.CompletionItemKind.Constructor
    assert resolved.label == "succ" and resolved.detail == "MyNat → MyNat"


@pytest.mark.lean
async def test_real_positions_are_utf16_and_validated_before_sending(client: LeanClient, demo_root: Path) -> None:
    uri = await open_file(client, demo_root, "Demo/Unicode.lean")
    with anyio.fail_after(60):
        await client.sync(uri)
        hover = await client.hover(uri, P(3, 38))  # `myTrue` after two astral characters and an é
    assert hover is not None and hover.range is not None
    assert (hover.range.start.character, hover.range.end.character) == (37, 43)
    sent = client.stats().requests
    with pytest.raises(InvalidPosition):
        await client.hover(uri, P(3, 4))  # inside the surrogate pair of 𝔸
    with pytest.raises(InvalidPosition):
        await client.hover(uri, P(99, 0))
    assert client.stats().requests == sent


@pytest.mark.lean
async def test_real_lean_applies_every_change_as_the_text_we_hold(client: LeanClient, demo_root: Path) -> None:
    # Each version goes to Lean as one range edit (only what differs); a second document opened with the last
    # text must get the same diagnostics, position for position. Columns after astral characters and é count
    # UTF-16 units; an unknown identifier's name and range show where Lean's copy would differ.
    def decl(i: int, value: str) -> str:
        return f"/- \U0001d538{i}\u00e9 -/ theorem t{i} : MyTrue := {value}\n"

    head = "prelude\nimport Demo.Basic\n\n"
    texts = [head + "".join(decl(i, "myTrue" if i % 2 else f"x{i}") for i in range(8))]
    edits: list[Callable[[str], str]] = [
        lambda t: t.replace(":= x2", ":= \U0001d539y2"),  # inside a line after an astral character
        lambda t: t.replace(decl(3, "myTrue"), decl(3, "myTrue") + decl(30, "\u00e9z30")),  # a line inserted
        lambda t: t.replace(decl(5, "myTrue") + decl(6, "x6"), ""),  # two lines deleted
        lambda t: t + decl(8, "w8"),  # at the end
        lambda t: t.replace(head, head + "/- \U0001d538 -/\n"),  # at the top: every line after it moves
        lambda t: t.replace("\U0001d539y2", "y2\U0001d539"),  # astral characters on both sides of the edit
    ]
    for edit in edits:
        texts.append(edit(texts[-1]))
        assert texts[-1] != texts[-2] and "range" in TextDocument("file:///x", texts[-2], 1).change_to(texts[-1])
    uri = path_to_uri(demo_root / "Demo/Edited.lean")
    copy = path_to_uri(demo_root / "Demo/EditedCopy.lean")
    await client.open(uri, texts[0])
    with anyio.fail_after(120):
        for text in texts[1:]:
            await client.change(uri, text)
            await client.sync(uri)
        await client.open(copy, texts[-1])
        edited, opened = (await client.sync(uri)).diagnostics, (await client.sync(copy)).diagnostics

    # Lean publishes a re-elaborated file's messages in the order its snapshots finish, not in source order.
    def where(d: LeanDiagnostic) -> tuple[int, int, int, int, str]:
        r = d.range
        return (r.start.line, r.start.character, r.end.line, r.end.character, d.message)

    assert sorted(map(where, edited)) == sorted(map(where, opened))
    unknown = sorted(d.message.split("`")[1] for d in edited if d.message.startswith("Unknown identifier"))
    assert unknown == ["w8", "x0", "x4", "y2\U0001d539", "\u00e9z30"], [d.message for d in edited]


@pytest.mark.lean
async def test_real_a_deferred_change_is_what_lean_answers_about(client: LeanClient, demo_root: Path) -> None:
    uri = path_to_uri(demo_root / "Demo/Deferred.lean")
    head = "prelude\nimport Demo.Basic\n\n"
    await client.open(uri, head + "theorem first : MyTrue := myTrue\n")
    with anyio.fail_after(120):
        assert (await client.sync(uri)).errors == ()
        await client.change(uri, head + "theorem renamed : MyTrue := nope\n", defer=60)
        await client.change(uri, head + "theorem renamed : MyTrue := myTrue\n#check nope\n", defer=60)
        hover = await client.hover(uri, P(3, 10))  # sends both changes, as one version, first
        result = await client.sync(uri)
    assert hover is not None and "renamed" in str(hover.contents)
    assert result.version == 3 and [d.message for d in result.errors] == ["Unknown identifier `nope`"]


@pytest.mark.lean
async def test_real_requests_for_unknown_or_closed_documents_are_typed_errors(
    client: LeanClient, demo_root: Path
) -> None:
    with pytest.raises(DocumentNotOpen):
        await client.hover(path_to_uri(demo_root / "Nope.lean"), P(0, 0))
    uri = await open_file(client, demo_root, "Demo/Proofs.lean")
    await client.close(uri)
    with pytest.raises(DocumentNotOpen):
        await client.sync(uri)


@pytest.mark.lean
async def test_real_multi_module_imports_resolve_through_built_oleans(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    (demo_root / "Demo/Uses.lean").write_text(
        "prelude\nimport Demo.Proofs\n\ntheorem again (p : Prop) (hp : p) : p := idProof p hp\n"
    )
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as client:
        uri = await open_file(client, demo_root, "Demo/Uses.lean")
        with anyio.fail_after(60):
            result = await client.sync(uri)
            definition = await client.definition(uri, P(3, 43))
    assert result.complete and result.diagnostics == ()
    [target] = definition
    target_uri = target.target_uri if isinstance(target, types.LocationLink) else target.uri
    assert target_uri == path_to_uri(demo_root / "Demo/Proofs.lean")


@pytest.mark.lean
async def test_real_a_dead_server_fails_pending_requests_at_once_with_its_stderr(
    client: LeanClient, demo_root: Path
) -> None:
    path = demo_root / "Demo/Long.lean"
    path.write_text(projects.long_file(1500))
    uri = path_to_uri(path)
    errors: list[BaseException] = []
    with anyio.fail_after(60):
        async with client.subscribe() as events, anyio.create_task_group() as tg:
            await client.open(uri, path.read_text())

            async def do_sync() -> None:
                try:
                    await client.sync(uri)
                except ServerExited as exc:
                    errors.append(exc)

            tg.start_soon(do_sync)
            # Lean is elaborating (its own signal) and our barrier request is in flight: kill the server now.
            async for event in events:
                if isinstance(event, ProgressEvent) and event.params.processing and client.stats().pending:
                    break
            procs.kill(client.pid)
        exited = await client.wait_exited()
    assert errors and errors[0] is exited
    assert exited.returncode is not None and exited.returncode < 0
    with pytest.raises(ServerExited):
        await client.hover(uri, P(0, 0))


@pytest.mark.lean
async def test_real_secrets_in_lean_output_are_redacted(lean_toolchain: Toolchain, demo_root: Path) -> None:
    env = lean_toolchain.env()
    env["BEAM_TEST_TOKEN"] = "sekritvalue12345"
    (demo_root / "Demo/Leak.lean").write_text("prelude\nimport Demo.Basic\n\ndef x : MyTrue := sekritvalue12345\n")
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=env) as client:
        uri = await open_file(client, demo_root, "Demo/Leak.lean")
        with anyio.fail_after(60):
            result = await client.sync(uri)
    [err] = result.errors
    assert "sekritvalue12345" not in err.message
    assert "[redacted:BEAM_TEST_TOKEN]" in err.message


@pytest.mark.lean
async def test_real_a_shared_cache_returns_to_pending_when_a_new_server_starts(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    cache = DiagnosticsCache()
    cmd, env = lean_toolchain.server_cmd(), lean_toolchain.env()
    async with LeanClient.start(cmd, cwd=demo_root, env=env, cache=cache) as client:
        uri = await open_file(client, demo_root, "Demo/Broken.lean")
        with anyio.fail_after(60):
            await client.sync(uri)
        assert cache.get(uri).availability is Availability.PUBLISHED
    async with LeanClient.start(cmd, cwd=demo_root, env=env, cache=cache):
        assert cache.get(uri).availability is Availability.PENDING


@pytest.mark.lean
async def test_real_a_closed_and_reopened_file_with_errors_never_reads_clean(
    client: LeanClient, demo_root: Path
) -> None:
    uri = await open_file(client, demo_root, "Demo/Broken.lean")
    text = client.document(uri).text
    await client.change(uri, text + "\n-- version 2\n")
    with anyio.fail_after(120):
        assert (await client.sync(uri)).errors
        await client.close(uri)
        await client.open(uri, text)  # version 1 again, while Lean owes the clearing publish of version 2
        result = await client.sync(uri)
        assert result.complete and result.errors and result.diagnostics_version == 1
        await client.close(uri)
        await client.request("workspace/symbol", {"query": "target"})
    snap = client.cache.get(uri)
    assert snap.open is False and snap.availability is Availability.PUBLISHED
    assert snap.version == 1 and any(d.is_error for d in snap.diagnostics)


async def test_cancelling_start_during_the_handshake_kills_the_server_at_once(tmp_path: Path) -> None:
    # The reader is cancelled with the caller, so waiting for an answer to `shutdown` would only time out.
    silent = [sys.executable, "-c", "import time; time.sleep(60)"]  # reads nothing, answers nothing
    started = anyio.current_time()
    with anyio.move_on_after(0.5):
        async with LeanClient.start(silent, cwd=tmp_path):
            pytest.fail("the handshake cannot complete")
    assert anyio.current_time() - started < SHUTDOWN_TIMEOUT


async def test_long_progress_reports_reach_the_barrier_and_subscribers_undecoded(tmp_path: Path) -> None:
    # The fake server writes reports as Lean does (compact, sorted keys): the still-elaborating one is summarised
    # from its bytes, the final one decoded; both count for the barrier and reach subscribers.
    async with LeanClient.start(fake_cmd({"elab_ms": 50}), cwd=tmp_path) as client, client.subscribe() as events:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10):
            result = await client.sync(uri)
        seen = [e for e in _drain_events(events) if isinstance(e, ProgressEvent)]
    assert result.complete
    first, last = seen[0].report, seen[-1].report
    assert not first.done and "params" not in vars(first) and first.processing  # decoded only now
    assert last.done and last.processing == ()


async def test_malformed_publish_params_are_skipped_and_counted(tmp_path: Path) -> None:
    from beam_lsp.lean import publish_params

    for params in (
        None,
        {"uri": 1},
        {"uri": "file:///a", "version": "1", "diagnostics": []},
        {"uri": "file:///a", "version": False, "diagnostics": []},
        {"uri": "file:///a", "diagnostics": [1]},
        {"uri": "file:///a"},
    ):
        with pytest.raises(ValueError):
            publish_params(params)
    assert publish_params({"uri": "file:///a", "version": 2, "diagnostics": [], "isIncremental": True}) == (
        "file:///a",
        2,
        [],
        True,
    )


# ---- requests the server sends the client -------------------------------------------------------------
async def test_a_caller_answers_the_servers_requests_and_the_default_refuses_edits(tmp_path: Path) -> None:
    edit = {"jsonrpc": "2.0", "id": "e1", "method": "workspace/applyEdit", "params": {"edit": {"changes": {}}}}
    config: dict[str, object] = {"inject": {"on": "textDocument/hover", "send": [edit], "times": -1}}
    asked: list[object] = []
    answered = anyio.Event()

    async def apply(params: JsonValue) -> JsonValue:
        asked.append(params)
        answered.set()
        return {"applied": True}

    async with LeanClient.start(
        fake_cmd(config), cwd=tmp_path, server_requests={"workspace/applyEdit": apply}
    ) as client:
        uri = await opened(client, tmp_path)
        with anyio.fail_after(10):
            await client.hover(uri, P(0, 8))
            await answered.wait()
    assert asked == [{"edit": {"changes": {}}}]
    refused = await DEFAULT_SERVER_REQUESTS["workspace/applyEdit"]({"edit": {}})
    assert isinstance(refused, dict) and refused["applied"] is False
