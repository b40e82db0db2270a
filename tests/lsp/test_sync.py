"""beam_lsp._sync: the blocking facade has every method of the async client, with the same guarantees."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
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
from tests.support.toolchain import Toolchain

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


def test_an_exception_leaving_the_block_shuts_the_server_down_and_goes_on(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="the caller's own"):
        with SyncLeanClient.start(fake_cmd(), cwd=tmp_path, timeout=30) as client:
            client.open(path_to_uri(tmp_path / "A.lean"), TEXT)
            raise KeyError("the caller's own")
    assert client.client.exited is not None and not _running(client.client.pid)


# ---- a client entered by hand and never left ------------------------------------------------------------------------
HAND_ENTERED = """
import gc, json, os, sys
from beam_lsp import SyncLeanClient
from beam_lsp._process import descendants

cmd, root, rel, mode = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
started = SyncLeanClient.start(cmd, cwd=root, timeout=120)
lean = started.__enter__()  # entered by hand, never left
if mode != "held":
    del started  # only the client is kept: the context manager is collected
doc = lean.file(rel)
doc.open()
doc.sync()
pid = lean.client.pid
print(json.dumps([pid, *descendants(pid)]), flush=True)
if mode == "collected":
    del lean, doc
    gc.collect()
    print(json.dumps(os.path.exists(f"/proc/{pid}")), flush=True)
"""


def _running(pid: int) -> bool:
    """Whether a process runs (a zombie no longer does; an orphan's may wait for a reaper in a container)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _end_hand_entered_script(cmd: list[str], root: Path, rel: str, mode: str, env: dict[str, str] | None) -> list[str]:
    """Run the script above; it must exit by itself, its Lean processes gone. Returns its output lines."""
    argv = [sys.executable, "-c", HAND_ENTERED, json.dumps(cmd), str(root), rel, mode]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as script:
        try:
            out, err = script.communicate(timeout=60)  # the bound of a hang: the interpreter waited for the loop
        except subprocess.TimeoutExpired:
            script.kill()
            out, err = script.communicate()
            for pid in json.loads(out.splitlines()[0]) if out else []:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the script did not exit with its client entered by hand and never left:\n{err}")
    assert script.returncode == 0, err
    lines = out.splitlines()
    pids = json.loads(lines[0])
    assert [pid for pid in pids if _running(pid)] == []  # no Lean process is left behind
    return lines


@pytest.mark.parametrize("mode", ["held", "dropped", "collected"])
def test_a_client_entered_by_hand_and_never_left_shuts_lean_down_when_collected_or_at_exit(
    tmp_path: Path, mode: str
) -> None:
    (tmp_path / "A.lean").write_text(TEXT, encoding="utf-8")
    lines = _end_hand_entered_script(fake_cmd(), tmp_path, "A.lean", mode, None)
    if mode == "collected":
        assert lines[1] == "false"  # gone when the client was collected, before the interpreter's exit


@pytest.mark.lean
def test_real_a_client_entered_by_hand_and_never_left_leaves_no_lean_process_at_exit(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    lines = _end_hand_entered_script(
        lean_toolchain.server_cmd(), demo_root, "Demo/Basic.lean", "held", lean_toolchain.env()
    )
    assert len(json.loads(lines[0])) >= 2  # the server and the file's worker, all gone
