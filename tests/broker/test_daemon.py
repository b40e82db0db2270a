"""The `lean-beam` daemon server: its protocol in-process (fake Lean), and `daemon start|status|stop` as processes."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import BrokerConfig, DiagnosticEvent, FileProgressEvent, PreparationEvent
from beam_broker import errors as codes
from beam_broker._cli import daemon
from beam_broker._cli import daemon_client as client
from beam_broker.errors import BrokerError
from beam_broker.events import BrokerEvent
from tests.support.fixtures import fake_cmd
from tests.support.projects import fake_project

from .support import Cli, alive, cli_env, wait_dead


# ---- helpers ------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Served:
    paths: client.DaemonPaths
    done: anyio.Event
    reason: list[str]

    async def call(self, op: str, arguments: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[BrokerEvent]]:
        events: list[BrokerEvent] = []
        with anyio.fail_after(30):
            answer = await client.request(self.paths, op, arguments, events.append)
        return answer, events

    async def raw(self, line: bytes) -> list[dict[str, Any]]:
        """Send bytes as they are; every line of the answer until the daemon closes."""
        with anyio.fail_after(30):
            async with await anyio.connect_unix(self.paths.socket) as conn:
                await conn.send(line)
                data = b""
                try:
                    while True:
                        data += await conn.receive()
                except anyio.EndOfStream:
                    pass
        return [json.loads(x) for x in data.splitlines()]


@asynccontextmanager
async def served(
    root: Path, state: Path, config: dict[str, Any] | None = None, *, watch_interval: float = 5.0
) -> AsyncIterator[Served]:
    """A daemon served in this process (no lock, no signals) on the fake Lean; shut down on exit."""
    paths = client.paths_for(str(root), {"XDG_RUNTIME_DIR": str(state)})
    broker_config = BrokerConfig(lean_cmd=fake_cmd(config), env={"PATH": os.environ.get("PATH", "")})
    ready, done = anyio.Event(), anyio.Event()
    reason: list[str] = []

    async def run() -> None:
        try:
            reason.append(
                await daemon.serve(
                    paths, broker_config, info={"leanCmd": None}, watch_interval=watch_interval, on_ready=ready.set
                )
            )
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await ready.wait()
        try:
            yield Served(paths, done, reason)
        finally:
            with anyio.fail_after(30), anyio.CancelScope(shield=True):
                if not done.is_set():
                    await client.request(paths, client.SHUTDOWN, linger=True)
                await done.wait()


@contextmanager
def logged(message: str) -> Iterator[anyio.Event]:
    """An event set when the daemon logs a record whose text contains `message` (its log is its trace)."""
    seen = anyio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if message in record.getMessage():
                seen.set()

    logger = logging.getLogger("beam_broker.daemon")
    handler, level = Watch(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# ---- the protocol, in-process -------------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_call_streams_its_events_then_one_result(tmp_path: Path, state_dir: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "theorem x : True := ERROR_HERE\n"})
    async with served(root, state_dir) as d:
        args = {"workspace": {"root": str(root)}, "path": "A.lean", "diagnostic_scope": "all"}
        answer, events = await d.call("sync", args)
    assert answer["result"]["diagnostics"]["counts"]["error"] == 1
    assert isinstance(events[0], PreparationEvent) and events[0].message.startswith("lean_sync on A.lean")
    assert [e.item["message"] for e in events if isinstance(e, DiagnosticEvent)] == ["unknown identifier 'ERROR_HERE'"]
    assert any(isinstance(e, FileProgressEvent) and e.done for e in events)
    assert d.reason == ["shutdown requested"]


@pytest.mark.anyio
async def test_bad_requests_get_one_invalid_input_error_and_the_daemon_keeps_serving(
    tmp_path: Path, state_dir: Path
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with served(root, state_dir) as d:
        for line, fragment in [
            (b"not json\n", "malformed request"),
            (b"[1]\n", "malformed request"),
            (b'{"op": "sync", "op": "sync"}\n', "duplicate key"),
            (b'{"op": "sync", "extra": 1}\n', "unknown fields extra"),
            (b'{"op": "nope"}\n', "unknown operation 'nope'"),
            (b'{"op": 3}\n', "'op' must be a string"),
            (b'{"op": "sync", "arguments": []}\n', "'arguments' must be an object"),
        ]:
            [answer] = await d.raw(line)
            assert answer["error"]["code"] == codes.INVALID_INPUT and fragment in answer["error"]["message"]
        with anyio.fail_after(10):
            async with await anyio.connect_unix(d.paths.socket) as conn:
                await conn.send_eof()  # a client that hangs up before its request line is simply closed
                with pytest.raises(anyio.EndOfStream):
                    await conn.receive()
        answer, _ = await d.call("sync", {"workspace": {"root": "relative"}, "path": "A.lean"})
        assert answer["error"]["code"] == codes.INVALID_INPUT and "absolute" in answer["error"]["message"]
        ok, _ = await d.call("update", {"workspace": {"root": str(root)}, "path": "A.lean"})
        assert ok["result"]["version"] == 1


@pytest.mark.anyio
async def test_status_and_stats_describe_the_daemon_and_its_broker(tmp_path: Path, state_dir: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with served(root, state_dir) as d:
        await d.call("sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
        status, _ = await d.call(client.STATUS)
        stats, _ = await d.call(client.STATS)
        current = await client.status(d.paths)
        assert current is not None and current["pid"] == os.getpid()
    result = status["result"]
    assert result["running"] is True and result["pid"] == os.getpid() and result["root"] == str(root)
    assert result["socket"] == str(d.paths.socket) and result["uptimeMs"] >= 0 and result["leanCmd"] is None
    lean = stats["result"]["workspaces"][f"local:{root}"]["byBackend"]["lean"]
    assert lean["sessionStarts"] == 1 and lean["ops"]["sync_file"]["successCount"] == 1


@pytest.mark.anyio
async def test_closing_the_connection_cancels_the_call_and_the_runtime_stays_usable(
    tmp_path: Path, state_dir: Path
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "theorem x : True := trivial\n"})
    ws = {"workspace": {"root": str(root)}}
    async with served(root, state_dir, {"stall": ["textDocument/hover"]}) as d:
        await d.call("update", {**ws, "path": "A.lean"})
        started = anyio.Event()

        def on_event(event: BrokerEvent) -> None:
            if isinstance(event, PreparationEvent):
                started.set()

        with logged("hover: cancelled") as cancelled:
            async with anyio.create_task_group() as tg:

                async def hover() -> None:
                    args = {**ws, "path": "A.lean", "version": 1, "line": 0, "character": 8}
                    await client.request(d.paths, "hover", args, on_event)

                tg.start_soon(hover)
                with anyio.fail_after(10):
                    await started.wait()
                tg.cancel_scope.cancel()  # closes the connection
            with anyio.fail_after(10):
                await cancelled.wait()  # logged once the broker has counted the cancelled call
        stats, _ = await d.call(client.STATS)
        ops = stats["result"]["workspaces"][f"local:{root}"]["byBackend"]["lean"]["ops"]
        assert ops["hover"]["cancelledCount"] == 1
        again, _ = await d.call("update", {**ws, "path": "A.lean"})
        assert isinstance(again["result"].pop("snapshot"), str)
        assert again["result"] == {"workspace": {"root": str(root)}, "version": 1, "changed": False}


@pytest.mark.anyio
async def test_a_call_in_flight_when_the_daemon_stops_is_answered_cancelled_not_internal_error(
    tmp_path: Path, state_dir: Path
) -> None:
    # Finding: `lean-beam stop` during a call closed the call's connection without a word, and its client reported
    # `internalError` ("closed the connection without an answer, see the log"): an orderly stop read as a bug.
    root = fake_project(tmp_path / "p", {"A.lean": "theorem x : True := trivial\n"})
    ws = {"workspace": {"root": str(root)}}
    async with served(root, state_dir, {"stall": ["textDocument/hover"]}) as d:
        await d.call("update", {**ws, "path": "A.lean"})
        started = anyio.Event()
        answers: list[dict[str, Any]] = []

        def on_event(event: BrokerEvent) -> None:
            if isinstance(event, PreparationEvent):
                started.set()

        async def hover() -> None:
            args = {**ws, "path": "A.lean", "version": 1, "line": 0, "character": 8}
            try:
                answers.append(await client.request(d.paths, "hover", args, on_event))
            except BrokerError as exc:  # the client's word for a connection closed without an answer
                answers.append({"error": exc.wire()})

        async with anyio.create_task_group() as tg:
            tg.start_soon(hover)
            with anyio.fail_after(10):
                await started.wait()
                await client.request(d.paths, client.SHUTDOWN, linger=True)
                await d.done.wait()
    [answer] = answers
    assert answer["error"]["code"] == codes.REQUEST_CANCELLED, answer
    assert answer["error"]["data"] == {"reason": "daemonStopped", "stopReason": "shutdown requested"}
    assert "stopped (shutdown requested) while the call ran" in answer["error"]["message"]


@pytest.mark.anyio
async def test_shutdown_answers_and_closes_only_after_lean_has_stopped(tmp_path: Path, state_dir: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    async with served(root, state_dir) as d:
        await d.call("update", {"workspace": {"root": str(root)}, "path": "A.lean"})
        with anyio.fail_after(30):
            answer = await client.request(d.paths, client.SHUTDOWN, linger=True)
            assert answer["result"] == {"stopping": True, "pid": os.getpid()}
            await d.done.wait()
        assert not d.paths.socket.exists()
    assert d.reason == ["shutdown requested"]


@pytest.mark.anyio
async def test_the_daemon_stops_when_its_root_or_its_socket_file_disappears(tmp_path: Path, state_dir: Path) -> None:
    root = fake_project(tmp_path / "p")
    async with served(root, state_dir, watch_interval=0.05) as d:
        shutil.rmtree(root)
        with anyio.fail_after(10):
            await d.done.wait()
    assert d.reason == [f"the workspace root {root} was removed"]
    root = fake_project(tmp_path / "q")
    async with served(root, state_dir, watch_interval=0.05) as d:
        d.paths.socket.unlink()
        with anyio.fail_after(10):
            await d.done.wait()
    assert "was removed or replaced" in d.reason[0]


def test_a_second_daemon_for_a_root_does_not_serve(tmp_path: Path, state_dir: Path) -> None:
    from filelock import FileLock

    root = fake_project(tmp_path / "p")
    paths = client.paths_for(str(root), {"XDG_RUNTIME_DIR": str(state_dir)})
    client.ensure_private_dir(paths.directory)
    with FileLock(str(paths.lock)):
        assert daemon.run_foreground(paths, BrokerConfig(lean_cmd=fake_cmd())) is False


# ---- daemon start | status | stop, as processes ------------------------------------------------------
def test_start_status_stop_and_a_stale_socket_replaced_by_the_next_start(fake_cli: Cli) -> None:
    started = fake_cli("--compact", "daemon", "start")
    assert started.code == 0, started.stderr
    first = started.json
    assert first["started"] is True and first["root"] == str(fake_cli.cwd) and alive(first["pid"])
    assert Path(first["socket"]).parent.stat().st_mode & 0o777 == 0o700
    again = fake_cli("--compact", "daemon", "start")
    assert again.json == {**first, "started": False}

    synced = fake_cli("-v", "--compact", "sync", "A.lean")
    assert synced.code == 0 and "answered by the daemon" in synced.stderr

    os.killpg(first["pid"], signal.SIGKILL)
    wait_dead(first["pid"])
    stale = fake_cli("--compact", "daemon", "status")
    assert stale.code == 1 and stale.json["running"] is False and stale.json["staleSocket"] is True
    cold = fake_cli("-v", "--compact", "update", "A.lean")
    assert cold.code == 0 and cold.json["version"] == 1
    assert "no daemon answers" in cold.stderr and "running Lean in this process" in cold.stderr

    restarted = fake_cli("--compact", "daemon", "start")
    assert restarted.code == 0, restarted.stderr
    assert restarted.json["started"] is True and restarted.json["pid"] != first["pid"]
    status = fake_cli("--compact", "daemon", "status")
    assert status.code == 0 and status.json["pid"] == restarted.json["pid"] and status.json["running"] is True

    stopped = fake_cli("--compact", "daemon", "stop")
    assert stopped.code == 0 and stopped.json == {"stopped": True, "pid": restarted.json["pid"], "root": first["root"]}
    wait_dead(restarted.json["pid"])
    gone = fake_cli("--compact", "daemon", "status")
    assert gone.code == 1 and gone.json["staleSocket"] is False
    assert fake_cli("--compact", "daemon", "stop").json["reason"] == "notRunning"


def test_sigterm_stops_the_daemon_and_removes_its_socket(fake_cli: Cli) -> None:
    started = fake_cli("--compact", "daemon", "start")
    assert started.code == 0, started.stderr
    os.kill(started.json["pid"], signal.SIGTERM)
    wait_dead(started.json["pid"])
    assert not Path(started.json["socket"]).exists()
    assert "received SIGTERM" in Path(started.json["log"]).read_text()


def test_the_daemon_process_exits_when_its_root_is_deleted(fake_cli: Cli) -> None:
    started = fake_cli("--compact", "daemon", "start")
    assert started.code == 0, started.stderr
    assert fake_cli("-q", "update", "A.lean").code == 0  # a live Lean server too
    shutil.rmtree(fake_cli.cwd)
    wait_dead(started.json["pid"], timeout=20)
    assert not Path(started.json["socket"]).exists()
    assert "was removed" in Path(started.json["log"]).read_text()


def test_daemon_start_without_lean_exits_3(tmp_path: Path, state_dir: Path) -> None:
    root = fake_project(tmp_path / "p")
    result = Cli(cli_env({"PATH": ""}, state_dir), root)("daemon", "start")
    assert result.code == 3 and result.error["code"] == "runtimeSetup"
    assert not list(state_dir.glob("beam/*.sock"))


@pytest.mark.lean
def test_the_daemon_keeps_one_lean_server_and_its_handles_across_commands(lean_cli: Cli, demo_root: Path) -> None:
    started = lean_cli("--compact", "daemon", "start")
    assert started.code == 0, started.stderr
    pid = started.json["pid"]
    assert lean_cli("-q", "sync", "Demo/Proofs.lean").code == 0
    broken = lean_cli("--compact", "sync", "Demo/Broken.lean")
    assert broken.code == 1 and broken.json["diagnostics"]["counts"]["error"] == 1
    assert "Demo/Broken.lean:4:20: error: Type mismatch" in broken.stderr  # events cross the socket

    at = ("Demo/Proofs.lean", "--version", "1", "--line", "3", "--character", "0")
    minted = lean_cli("--compact", "run-at-handle", *at, "--text", "def a1 : MyNat := MyNat.one")
    assert minted.code == 0 and minted.json["success"] is True, minted.stderr
    handle = json.dumps(minted.json["next_handle"])
    used = lean_cli("--compact", "run-with", "Demo/Proofs.lean", "--handle", "-", "--text", "#check a1", input=handle)
    assert used.code == 0, used.stderr
    assert used.json["messages"] == [{"severity": "information", "text": "a1 : MyNat"}]

    stats = lean_cli("--compact", "stats")
    lean = stats.json["workspaces"][f"local:{demo_root}"]["byBackend"]["lean"]
    assert lean["sessionStarts"] == 1 and lean["sessionRestarts"] == 0 and lean["requestCount"] == 4
    status = lean_cli("--compact", "daemon", "status")
    assert status.code == 0 and status.json["pid"] == pid and status.json["root"] == str(demo_root)
    assert status.json["stats"]["workspaces"][f"local:{demo_root}"]["sessions"]["lean"]["active"] is True
    assert status.json["stats"]["workspaces"][f"local:{demo_root}"]["sessions"]["lean"]["openDocCount"] == 2

    stopped = lean_cli("--compact", "daemon", "stop")
    assert stopped.code == 0 and stopped.json["stopped"] is True
    wait_dead(pid)
    assert lean_cli("--compact", "daemon", "status").code == 1
