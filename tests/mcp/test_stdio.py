"""The stdio transport (`_stdio`): the reader and `serve` in-process over pipes, and `python -m beam_mcp` as a child.

The child runs the real broker; where Lean is needed it is the scripted fake Lean server.
"""

from __future__ import annotations

import errno
import json
import os
import select
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.abc import Process

from beam_mcp import ServerConfig
from beam_mcp._stdio import read_lines, serve_stdio
from tests.support.fixtures import fake_cmd

from .support import make_project, modern_meta

pytestmark = pytest.mark.anyio

SERVER = [sys.executable, "-m", "beam_mcp"]


class Child:
    def __init__(self, proc: Process) -> None:
        self.proc = proc
        self.buf = b""

    async def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        await self.proc.stdin.send(data)

    async def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with anyio.fail_after(60):
            while b"\n" not in self.buf:
                self.buf += await self.proc.stdout.receive()
        line, self.buf = self.buf.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    async def until(self, rid: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []
        while True:
            message = await self.recv()
            if "method" not in message and message.get("id") == rid:
                return message, seen
            seen.append(message)

    async def close_and_wait(self) -> tuple[int, bytes]:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        await self.proc.stdin.aclose()
        with anyio.fail_after(30):
            code = await self.proc.wait()
        stderr = b""
        async for chunk in self.proc.stderr:
            stderr += chunk
        return code, stderr


@asynccontextmanager
async def child(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Child]:
    proc = await anyio.open_process([*SERVER, *args], env=env)
    async with proc:
        try:
            yield Child(proc)
        finally:
            if proc.returncode is None:
                proc.kill()


def discover(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {"_meta": modern_meta()}}


async def test_stdio_answers_discovery_and_listing_and_exits_zero_quietly_on_eof() -> None:
    async with child() as c:
        await c.send(b"\r\n")  # blank line: parse error, reader continues
        parse_error = await c.recv()
        assert parse_error["id"] is None and parse_error["error"]["code"] == -32700
        await c.send(json.dumps(discover(1)).encode() + b"\r\n")
        response, _ = await c.until(1)
        assert response["result"]["supportedVersions"] == ["2026-07-28"]
        await c.send({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": modern_meta()}})
        listed, _ = await c.until("l")
        assert listed["result"]["tools"][0]["name"] == "beam_version", listed
        code, stderr = await c.close_and_wait()
        assert code == 0 and stderr == b""


async def test_stdio_legacy_session_with_a_fake_lean_sync(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    (root / "A.lean").write_text("theorem t : True := ERROR_HERE\n", encoding="utf-8")
    async with child("--lean-cmd", shlex.join(fake_cmd())) as c:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        await c.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        response, _ = await c.until(0)
        assert response["result"]["protocolVersion"] == "2025-11-25"
        await c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        args = {"workspace": {"root": str(root)}, "path": "A.lean", "diagnostics_in_result": True}
        params = {"name": "lean_sync", "arguments": args, "_meta": {"progressToken": "tok"}}
        await c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        response, notes = await c.until(1)
        result = response["result"]
        assert result["isError"] is False and "resultType" not in result
        out = result["structuredContent"]
        assert out["workspace"] == {"root": str(root)} and out["diagnostics"]["counts"]["error"] == 1
        assert out["document_progress"]["done"] is True
        updates = [n["params"]["message"] for n in notes if n["method"] == "notifications/progress"]
        assert updates[0] == "lean_sync on A.lean: preparing the Lean workspace"
        diagnostics = [n for n in notes if n.get("params", {}).get("logger") == "lean.diagnostic"]
        assert diagnostics and diagnostics[0]["params"]["level"] == "error"  # legacy starts at debug
        code, stderr = await c.close_and_wait()
        assert code == 0, stderr


async def test_stdio_modern_diagnostics_resources_with_a_fake_lean(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    source = root / "A.lean"
    source.write_text("theorem t : True := ERROR_HERE\n", encoding="utf-8")
    uri = f"lsp-diagnostics://{root}/A.lean"
    meta = {"_meta": modern_meta()}

    async def request(c: Child, rid: Any, method: str, **fields: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        await c.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": {**fields, **meta}})
        return await c.until(rid)

    async def read(c: Child, rid: Any) -> dict[str, Any]:
        response, _ = await request(c, rid, "resources/read", uri=uri)
        document: dict[str, Any] = json.loads(response["result"]["contents"][0]["text"])
        return document

    async with child("--lean-cmd", shlex.join(fake_cmd())) as c:
        empty, _ = await request(c, "l0", "resources/list")
        assert empty["result"]["resources"] == []
        sync = {"name": "lean_sync", "arguments": {"workspace": {"root": str(root)}, "path": "A.lean"}}
        await request(c, "s1", "tools/call", **sync)
        listed, _ = await request(c, "l1", "resources/list")
        assert [r["uri"] for r in listed["result"]["resources"]] == [uri]
        first = await read(c, "r1")
        assert (first["availability"], first["version"], first["elaboration"]) == ("published", 1, "complete")
        assert [d["message"] for d in first["diagnostics"]] == ["unknown identifier 'ERROR_HERE'"]
        listen = {"notifications": {"resourceSubscriptions": [uri]}, **meta}
        await c.send({"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": listen})
        ack, replay = await c.recv(), await c.recv()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert replay["params"] == {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": "L"}}
        source.write_text("theorem t : True := trivial\n", encoding="utf-8")
        _, seen = await request(c, "s2", "tools/call", **sync)
        with anyio.fail_after(30):
            while True:
                update = seen.pop(0) if seen else await c.recv()
                assert update["method"] == "notifications/resources/updated" and update["params"]["uri"] == uri
                document = await read(c, "r2")
                if document["version"] == 2 and document["elaboration"] == "complete":
                    break
        assert document["diagnostics"] == [] and document["availability"] == "published"
        await c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "L"}})
        code, _ = await c.close_and_wait()
        assert code == 0 and b'"id":"L"' not in c.buf


async def test_eof_with_a_call_in_flight_exits_zero_without_answering_it(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    (root / "A.lean").write_text("theorem t : True := trivial\n", encoding="utf-8")
    lean = shlex.join(fake_cmd({"elab_ms": 60000}))
    async with child("--lean-cmd", lean) as c:
        args = {"workspace": {"root": str(root)}, "path": "A.lean"}
        call = {"name": "lean_sync", "arguments": args, "_meta": modern_meta(progressToken=1)}
        await c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        first = await c.recv()
        assert first["method"] == "notifications/progress"  # the call is running
        code, _ = await c.close_and_wait()
        assert code == 0
        assert b'"id":1' not in c.buf


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_sigterm_and_sigint_are_eof_with_a_call_in_flight(tmp_path: Path, signum: signal.Signals) -> None:
    root = make_project(tmp_path / "proj", {"A.lean": "theorem t : True := trivial\n"})
    lean = shlex.join(fake_cmd({"stall": ["textDocument/waitForDiagnostics"]}))
    async with child("--lean-cmd", lean) as c:
        args = {"workspace": {"root": str(root)}, "path": "A.lean"}
        call = {"name": "lean_sync", "arguments": args, "_meta": modern_meta(progressToken=1)}
        await c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        while "processing" not in (await c.recv())["params"]["message"]:
            pass  # until Lean works on the file
        c.proc.send_signal(signum)
        with anyio.fail_after(30):
            code = await c.proc.wait()
        assert code == 0
        assert c.proc.stdout is not None
        rest = c.buf + b"".join([chunk async for chunk in c.proc.stdout])
        assert b'"id":1' not in rest


async def test_sigterm_while_lean_stops_after_eof_still_exits_zero_with_lean_gone(tmp_path: Path) -> None:
    """MCP clients close stdin, then send SIGTERM after a grace: it may land while the server is stopping Lean."""
    root = make_project(tmp_path / "proj", {"A.lean": "theorem t : True := trivial\n"})
    fifo = tmp_path / "lean-stopping"
    os.mkfifo(fifo)

    def read_pid() -> int:
        return int(fifo.read_text(encoding="ascii"))  # opening waits until the fake Lean got `shutdown`

    def release() -> None:
        fifo.open("wb").close()  # opening waits until the fake Lean holds its answer to `shutdown`

    async with child("--lean-cmd", shlex.join(fake_cmd({"shutdown_fifo": str(fifo)}))) as c:
        args = {"workspace": {"root": str(root)}, "path": "A.lean"}
        call = {"name": "lean_sync", "arguments": args, "_meta": modern_meta()}
        await c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        synced, _ = await c.until(1)
        assert synced["result"]["isError"] is False, synced
        assert c.proc.stdin is not None and c.proc.stderr is not None
        await c.proc.stdin.aclose()  # EOF: the server shuts down and stops Lean, which holds `shutdown`
        with anyio.fail_after(30):
            lean = await anyio.to_thread.run_sync(read_pid, abandon_on_cancel=True)
            c.proc.send_signal(signal.SIGTERM)  # the client's grace is over
            await anyio.to_thread.run_sync(release, abandon_on_cancel=True)
            code = await c.proc.wait()
        stderr = b"".join([chunk async for chunk in c.proc.stderr])
    assert code == 0, stderr
    assert b"Traceback" not in stderr, stderr
    assert not Path(f"/proc/{lean}").exists()  # Lean stopped, and the server reaped it


STARTING = """
import os, signal, sys
from beam_mcp import _stdio, cli
serve = _stdio.serve_stdio
async def starting(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # the server starts: its event loop does not handle signals yet
    await serve(*args, **kwargs)
_stdio.serve_stdio = starting
sys.exit(cli.main([]))
"""


def test_sigterm_while_the_server_starts_exits_zero_quietly() -> None:
    done = subprocess.run([sys.executable, "-c", STARTING], capture_output=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    assert b"Traceback" not in done.stderr, done.stderr


async def test_a_closed_stdout_is_survived_silently() -> None:
    proc = await anyio.open_process(SERVER)
    async with proc:
        assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
        await proc.stdout.aclose()
        for rid in range(3):
            await proc.stdin.send(json.dumps(discover(rid)).encode() + b"\n")
        await proc.stdin.aclose()
        with anyio.fail_after(30):
            code = await proc.wait()
        stderr = b"".join([chunk async for chunk in proc.stderr])
    assert code == 0 and stderr == b""


async def drain_stderr(stream: anyio.abc.ByteReceiveStream) -> None:
    async for _ in stream:
        pass


def fill(fd: int) -> bytes:
    """Write into the non-blocking pipe `fd` until it is full; what was written."""
    written = bytearray()
    for size in (4096, 1):  # pages, then the rest of the last one
        while True:
            try:
                written += b"x" * os.write(fd, b"x" * size)
            except BlockingIOError:
                break
    return bytes(written)


async def test_a_non_blocking_stdout_that_fills_loses_and_reorders_nothing() -> None:
    """Some clients hand their server a stdout whose file description is O_NONBLOCK (shared with them): a write
    into a full pipe then fails with EAGAIN instead of waiting, and must wait for the reader, not end all output."""
    out_read, out_write = os.pipe()
    os.set_blocking(out_write, False)  # on the file description, which the child shares
    filler = fill(out_write)
    trace = {**os.environ, "LEAN_BEAM_MCP_TRACE": "1"}
    proc = await anyio.open_process(SERVER, stdout=out_write, env=trace)
    os.close(out_write)
    listing = {"method": "tools/list", "params": {"_meta": modern_meta()}}
    ids = list(range(8))  # long answers (from a worker thread) and short ones (on the event loop), alternating
    lines = [{"jsonrpc": "2.0", "id": i, **listing} if i % 2 == 0 else discover(i) for i in ids]

    def read_all() -> bytes:
        with os.fdopen(out_read, "rb") as out:
            return out.read()

    async with proc:
        assert proc.stdin is not None and proc.stderr is not None
        await proc.stdin.send(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        await proc.stdin.aclose()
        stderr = b""
        with anyio.fail_after(30):
            # The server's first answer is long, so it is written from a worker thread, and finds the pipe full.
            while b"waiting until the client reads" not in stderr:
                try:
                    stderr += await proc.stderr.receive()
                except anyio.EndOfStream:
                    break  # it exited without waiting
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain_stderr, proc.stderr)  # the server logs on, and must not wait for us there
                output = await anyio.to_thread.run_sync(read_all)  # now the client reads
            code = await proc.wait()
    assert code == 0, stderr
    assert output.startswith(filler)
    answers = [json.loads(line) for line in output[len(filler) :].splitlines()]
    assert [a["id"] for a in answers] == ids, stderr
    assert all("result" in a for a in answers)
    assert len(answers[0]["result"]["tools"]) > 1 and len(json.dumps(answers[0])) > select.PIPE_BUF


def test_stdin_can_be_a_regular_file(tmp_path: Path) -> None:
    requests = tmp_path / "in.jsonl"
    requests.write_text(json.dumps(discover(1)) + "\n" + json.dumps(discover(2)), encoding="utf-8")  # no final \n
    with requests.open("rb") as stdin:
        done = subprocess.run(SERVER, stdin=stdin, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [1, 2]


# ---- in-process: the reader and serve over pipes -------------------------------------------------------------------
async def lines_of(chunks: list[bytes], *, max_line: int = 1 << 20) -> list[bytes | None]:
    read_fd, write_fd = os.pipe()
    out: list[bytes | None] = []
    async with anyio.create_task_group() as tg:

        async def writer() -> None:
            for chunk in chunks:
                await anyio.to_thread.run_sync(os.write, write_fd, chunk)
            os.close(write_fd)

        tg.start_soon(writer)
        with anyio.fail_after(10):
            out += [line async for line in read_lines(read_fd, max_line=max_line)]
    os.close(read_fd)
    return out


async def test_lines_keep_their_newline_and_the_last_one_may_lack_it() -> None:
    assert await lines_of([b"a\nb", b"c\r\n", b"\n", b"tail"]) == [b"a\n", b"bc\r\n", b"\n", b"tail"]


async def test_an_oversized_line_is_reported_once_and_skipped_up_to_its_newline() -> None:
    chunks = [b"ok\n", b"x" * 40, b"y" * 40, b"z\nnext\n", b"w" * 100]
    assert await lines_of(chunks, max_line=32) == [b"ok\n", None, b"next\n", None]


async def test_a_read_that_would_block_is_no_eof(monkeypatch: pytest.MonkeyPatch) -> None:
    # A non-blocking stdin whose data another reader of the shared description took between the poll and the read
    # fails with EAGAIN: that read ended the server as if stdin had closed.
    read = os.read
    raced: list[int] = []

    def racing_read(fd: int, n: int) -> bytes:
        if not raced:  # the first read, after the first poll said readable
            raced.append(fd)
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return read(fd, n)

    monkeypatch.setattr(os, "read", racing_read)
    assert await lines_of([b"one\n", b"two\n"]) == [b"one\n", b"two\n"]
    assert raced


async def test_a_regular_file_is_read_without_polling(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"one\ntwo")
    with source.open("rb") as f:
        lines = [line async for line in read_lines(f.fileno())]
    assert lines == [b"one\n", b"two"]


async def test_serve_answers_each_line_on_stdout_and_returns_at_eof() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.write(in_write, json.dumps(discover(1)).encode() + b"\n" + b"{bad\n" + json.dumps(discover(2)).encode())
    os.close(in_write)
    with anyio.fail_after(30):
        await serve_stdio(ServerConfig(lean_cmd=fake_cmd()), stdin=in_read, stdout=out_write)
    os.close(in_read)
    os.close(out_write)
    with os.fdopen(out_read, "rb") as out:
        answers = [json.loads(line) for line in out.read().splitlines()]
    assert [a["id"] for a in answers] == [1, None, 2]
    assert "result" in answers[0] and answers[1]["error"]["code"] == -32700


async def test_serve_with_signals_leaves_the_signal_handlers_it_found() -> None:
    """asyncio restores the default action when a signal receiver closes: a SIGTERM in the process's last moments
    would then end it with -15 instead of what the caller installed (the CLI: exit 0)."""

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.close(in_write)
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with anyio.fail_after(30):
            await serve_stdio(ServerConfig(lean_cmd=fake_cmd()), stdin=in_read, stdout=out_write, signals=True)
        assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
        for fd in (in_read, out_read, out_write):
            os.close(fd)


async def test_a_short_answer_is_written_on_the_loop_and_a_long_one_from_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from beam_mcp import _stdio

    writers: list[tuple[int, bool]] = []
    original = _stdio._write_some

    def recorded(fd: int, data: bytes | memoryview) -> int:
        writers.append((len(data), threading.current_thread() is threading.main_thread()))
        return original(fd, data)

    monkeypatch.setattr(_stdio, "_write_some", recorded)
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": modern_meta()}}
    os.write(in_write, b"{bad\n" + json.dumps(listing).encode() + b"\n")  # a parse error, a long answer
    os.close(in_write)
    received: list[bytes] = []

    def drain() -> None:  # the client reads while the server writes (a long answer fills the pipe)
        with os.fdopen(out_read, "rb") as out:
            received.append(out.read())

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, drain)
            await serve_stdio(ServerConfig(lean_cmd=fake_cmd()), stdin=in_read, stdout=out_write)
            os.close(out_write)
    os.close(in_read)
    answers = [json.loads(line) for line in received[0].splitlines()]
    assert [a["id"] for a in answers] == [None, 2] and "result" in answers[1]
    assert [on_loop for size, on_loop in writers] == [size <= select.PIPE_BUF for size, _ in writers]
    assert {on_loop for _, on_loop in writers} == {True, False}, "one of each"


async def test_a_modern_id_is_free_as_soon_as_its_response_is_on_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    # A modern client may reuse an id once it has read the response. On a socket (as Node-based clients give their
    # servers) every answer is written from a worker thread, and the writer task resumes only after the thread has
    # reported back; a client that reads the answer and sends its next request first must not find its id still
    # owned (the request would be ignored, and the client would wait for ever).
    import socket
    import threading

    from beam_mcp import _stdio

    original = _stdio._write_all
    written = anyio.Event()
    resume = threading.Event()

    def slow_to_report(fd: int, data: bytes) -> None:
        original(fd, data)  # the bytes are on the wire: the client may read them now
        if not resume.is_set():
            anyio.from_thread.run_sync(written.set)
            resume.wait(30)  # the worker thread is slow to report back (a busy machine)

    monkeypatch.setattr(_stdio, "_write_all", slow_to_report)
    in_read, in_write = os.pipe()
    ours, theirs = socket.socketpair()

    async def serve() -> None:
        await serve_stdio(ServerConfig(lean_cmd=fake_cmd()), stdin=in_read, stdout=ours.fileno())
        ours.shutdown(socket.SHUT_WR)  # the client reads to the end

    received = b""
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve)
                os.write(in_write, json.dumps(discover(1)).encode() + b"\n")
                await written.wait()
                received = theirs.recv(1 << 16)  # the first answer, already written
                # The client has its answer and reuses the id at once, then sends another request.
                os.write(in_write, json.dumps(discover(1)).encode() + b"\n" + json.dumps(discover(2)).encode() + b"\n")
                await anyio.wait_all_tasks_blocked()  # the reader has handled both lines
                resume.set()
                os.close(in_write)
                while chunk := await anyio.to_thread.run_sync(theirs.recv, 1 << 16, abandon_on_cancel=True):
                    received += chunk
    finally:
        resume.set()
        ours.close()
        theirs.close()
        os.close(in_read)
    answers = [json.loads(line) for line in received.splitlines()]
    assert [answer["id"] for answer in answers] == [1, 1, 2]
    assert all("result" in answer for answer in answers)
