"""beam_lsp._sync: the blocking facade has every method of the async client, with the same guarantees."""

from __future__ import annotations

import inspect
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from beam_lsp import (
    DiagnosticsEvent,
    DocumentNotOpen,
    LeanClient,
    LeanFile,
    Point0,
    Position,
    ProgressEvent,
    ServerExited,
    SyncLeanClient,
    SyncLeanFile,
    path_to_uri,
)
from tests.support.fixtures import fake_cmd

ROOT = Path(__file__).resolve().parents[2]
TEXT = "theorem x : True := by\n  trivial\n\ndef y := x\n"


def _public(cls: type) -> dict[str, inspect.Signature | str]:
    out: dict[str, inspect.Signature | str] = {}
    for name in dir(cls):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, property):
            out[name] = "property"
        elif inspect.isfunction(static):
            out[name] = inspect.signature(static)
    return out


@pytest.mark.parametrize(("async_cls", "sync_cls"), [(LeanClient, SyncLeanClient), (LeanFile, SyncLeanFile)])
def test_every_public_method_of_the_async_class_is_there_with_the_same_parameters(
    async_cls: type, sync_cls: type
) -> None:
    asynchronous, blocking = _public(async_cls), _public(sync_cls)
    missing = sorted(set(asynchronous) - set(blocking))
    assert missing == []
    for name, signature in asynchronous.items():
        if name in ("start", "subscribe", "file"):  # same parameters, a blocking shape (context managers, handles)
            continue
        if isinstance(signature, inspect.Signature):
            other = blocking[name]
            assert isinstance(other, inspect.Signature), name
            assert list(other.parameters) == list(signature.parameters), name
            assert str(other.return_annotation) == str(signature.return_annotation), name
        else:
            assert blocking[name] == "property", name
    start_async = inspect.signature(LeanClient.start).parameters
    start_sync = inspect.signature(SyncLeanClient.start).parameters
    assert list(start_async) == list(start_sync)[: len(start_async)]


def test_the_generated_wrappers_are_what_the_generator_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gen_sync.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_a_script_drives_lean_without_async(tmp_path: Path) -> None:
    uri = path_to_uri(tmp_path / "A.lean")
    with SyncLeanClient.start(fake_cmd({"goal": "⊢ p"}), cwd=tmp_path, timeout=30) as client:
        assert client.open(uri, TEXT) == 1
        assert client.sync(uri).complete
        hover = client.hover(uri, Position(line=0, character=8))
        goal = client.plain_goal(uri, Position(line=0, character=20))
        assert client.document(uri).version == 1 and client.is_open(uri) and client.open_documents == [uri]
        assert client.stats().requests >= 2 and client.diagnostics(uri).open
        with pytest.raises(DocumentNotOpen):
            client.hover(path_to_uri(tmp_path / "B.lean"), Position(line=0, character=0))
        assert client.call(lambda: client.client.cache.get(uri).version) == 1
        assert threading.current_thread() is threading.main_thread()
    assert hover is not None and goal is not None and goal.goals == ("⊢ p",)


def test_a_file_handle_takes_paths_and_code_points(tmp_path: Path) -> None:
    (tmp_path / "A.lean").write_text(TEXT, encoding="utf-8")
    with SyncLeanClient.start(fake_cmd(), cwd=tmp_path, timeout=30) as client:
        doc = client.file("A.lean")
        assert doc.open() == 1 and doc.is_open and doc.uri == path_to_uri(tmp_path / "A.lean")
        assert doc.sync().complete
        hover = doc.hover(Point0(3, 4))
        assert doc.position(Point0(3, 4)) == Position(line=3, character=4)
        doc.close()
        assert not client.is_open(doc.uri)
    assert hover is not None


def test_events_are_received_blocking_with_a_timeout(tmp_path: Path) -> None:
    uri = path_to_uri(tmp_path / "A.lean")
    with SyncLeanClient.start(fake_cmd(), cwd=tmp_path, timeout=30) as client, client.subscribe() as events:
        client.open(uri, "ERROR_HERE\n")
        client.sync(uri)
        seen = [events.receive(timeout=10) for _ in range(events.pending)]
        with pytest.raises(TimeoutError):
            events.receive(timeout=0.05)
    assert any(isinstance(e, DiagnosticsEvent) and e.diagnostics for e in seen)
    assert any(isinstance(e, ProgressEvent) and e.report.done for e in seen)


def test_a_call_that_times_out_is_cancelled_on_the_loop_and_the_client_goes_on(tmp_path: Path) -> None:
    uri = path_to_uri(tmp_path / "A.lean")
    with SyncLeanClient.start(fake_cmd({"stall": ["textDocument/hover"]}), cwd=tmp_path, timeout=0.5) as client:
        client.open(uri, TEXT)
        with pytest.raises(TimeoutError):
            client.hover(uri, Position(line=0, character=8))
        assert client.stats().cancellations_sent == 1  # the abandoned request was cancelled at Lean
        assert client.sync(uri).complete


def test_a_server_that_dies_is_server_exited_from_every_blocking_call(tmp_path: Path) -> None:
    uri = path_to_uri(tmp_path / "A.lean")
    with SyncLeanClient.start(fake_cmd({"crash_on": {"method": "textDocument/hover"}}), cwd=tmp_path) as client:
        client.open(uri, TEXT)
        with pytest.raises(ServerExited):
            client.hover(uri, Position(line=0, character=8))
        with pytest.raises(ServerExited):
            client.sync(uri)
        assert client.exited is not None


def test_a_client_used_after_its_block_is_server_exited_as_the_async_one_is(tmp_path: Path) -> None:
    # The async client after `async with` raises `ServerExited` from every call; the facade must not surface the
    # portal's own "This portal is not running" (a RuntimeError a caller cannot tell from a bug) instead.
    uri = path_to_uri(tmp_path / "A.lean")
    with SyncLeanClient.start(fake_cmd(), cwd=tmp_path, timeout=30) as client:
        client.open(uri, TEXT)
        doc = client.file("A.lean")
    with pytest.raises(ServerExited, match="shut the server down"):
        client.hover(uri, Position(line=0, character=8))
    with pytest.raises(ServerExited):
        client.open(path_to_uri(tmp_path / "B.lean"), TEXT)
    with pytest.raises(ServerExited):
        doc.hover(Point0(0, 8))
