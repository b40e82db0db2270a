"""The daemon protocol's client side: where a root's daemon lives, the wire, requests, spawning."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream

from beam_broker import BrokerError, DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent
from beam_broker import errors as codes
from beam_broker._cli import daemon_client as client
from beam_broker.events import BrokerEvent
from tests.support.projects import fake_project

from .support import wait_dead


def test_socket_paths_hash_the_canonical_root_under_a_private_directory(tmp_path: Path, state_dir: Path) -> None:
    root = fake_project(tmp_path / "p")
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    paths = client.paths_for(str(root), {"XDG_RUNTIME_DIR": str(state_dir)})
    assert paths.socket.parent == state_dir / "beam" and paths.socket.suffix == ".sock" and len(paths.socket.stem) == 16
    assert client.paths_for(str(alias), {"XDG_RUNTIME_DIR": str(state_dir)}) == paths
    assert paths.root == str(root)
    fallback = client.paths_for(str(root), {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": "relative"})
    assert fallback.socket.parent == tmp_path / ".cache" / "beam"
    paths.directory.mkdir(mode=0o755)
    client.ensure_private_dir(paths.directory)
    assert paths.directory.stat().st_mode & 0o777 == 0o700


def test_every_event_kind_round_trips_through_the_wire() -> None:
    events: list[BrokerEvent] = [
        PreparationEvent("lean_sync on A.lean: preparing", "A.lean", "preparing"),
        SetupEvent("Built Demo.Basic"),
        FileProgressEvent("A.lean", {"updates": 2, "done": True}),
        DiagnosticEvent({"path": "A.lean", "severity": "error", "message": "boom"}),
    ]
    for event in events:
        wire = json.loads(client.encode(client.event_wire(event)))
        assert client.event_from_wire(wire) == event
    assert [client.event_wire(e)["kind"] for e in events] == ["preparation", "setup", "fileProgress", "diagnostic"]
    assert client.event_from_wire({"kind": "future"}) is None
    assert client.event_from_wire({"kind": "setup", "bogus": 1}) is None


def test_protocol_lines_are_strict_json_objects() -> None:
    assert client.decode(b'{"op": "x"}\n') == {"op": "x"}
    for line in (b"[1]\n", b'{"a": 1, "a": 2}\n', b"\xff\n", b"nope\n"):
        with pytest.raises(ValueError):
            client.decode(line)


@pytest.mark.anyio
async def test_a_client_finds_no_daemon_without_a_socket_or_with_a_stale_one(tmp_path: Path, state_dir: Path) -> None:
    paths = client.paths_for(str(fake_project(tmp_path / "p")), {"XDG_RUNTIME_DIR": str(state_dir)})
    with pytest.raises(client.DaemonUnavailable):
        await client.request(paths, client.STATUS)
    client.ensure_private_dir(paths.directory)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(paths.socket))  # bound, never listening, then closed: what a dead daemon leaves
    with pytest.raises(client.DaemonUnavailable):
        await client.request(paths, client.STATUS)
    assert await client.status(paths) is None


@pytest.mark.anyio
async def test_a_daemon_that_hangs_up_without_an_answer_is_an_internal_error(tmp_path: Path, state_dir: Path) -> None:
    paths = client.paths_for(str(fake_project(tmp_path / "p")), {"XDG_RUNTIME_DIR": str(state_dir)})
    client.ensure_private_dir(paths.directory)
    seen: list[BrokerEvent] = []
    requests: list[dict[str, object]] = []

    async def answer(conn: SocketStream) -> None:
        async with conn:
            requests.append(client.decode(await conn.receive()))
            await conn.send(b'{"event": {"kind": "setup", "message": "hi"}}\n{"event": "odd"}\n{"other": 1}\n')

    listener = await anyio.create_unix_listener(paths.socket)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        with anyio.fail_after(10), pytest.raises(BrokerError) as info:
            await client.request(paths, "sync", {"path": "A.lean"}, seen.append)
        tg.cancel_scope.cancel()
    assert info.value.code == codes.INTERNAL_ERROR and "closed the connection without an answer" in info.value.message
    assert requests == [{"op": "sync", "arguments": {"path": "A.lean"}}]
    assert seen == [SetupEvent("hi")]


def test_spawning_reports_ready_exited_or_timeout(tmp_path: Path, state_dir: Path) -> None:
    paths = client.paths_for(str(fake_project(tmp_path / "p")), {"XDG_RUNTIME_DIR": str(state_dir)})
    ready = "import os, sys; os.write(int(sys.argv[-1]), b'ready\\n'); print('started')"
    outcome, pid = client.spawn(paths, [sys.executable, "-c", ready], timeout=30)
    wait_dead(pid)
    assert outcome == "ready" and "started" in client.log_tail(paths)
    outcome, pid = client.spawn(paths, [sys.executable, "-c", "print('no lock')"], timeout=30)
    wait_dead(pid)
    assert outcome == "exited" and client.log_tail(paths, lines=1) == "no lock"
    outcome, pid = client.spawn(paths, [sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5)
    wait_dead(pid)
    assert outcome == "timeout"
    paths.log.unlink()
    assert client.log_tail(paths) == ""
