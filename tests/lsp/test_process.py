"""beam_lsp._process: the server process, its stderr tail, the account of its exit, and killing its tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from beam_lsp import LeanClient, Position, Redactor, ServerExited, TransportError, kill_tree, path_to_uri
from beam_lsp._process import (
    PipeReader,
    ServerProcess,
    StderrBuffer,
    _redacted_os_error,
    descendants,
    reap,
    spawn,
    spawn_server,
)
from tests.support.fixtures import fake_cmd

pytestmark = pytest.mark.anyio


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# ---- the stderr tail ----------------------------------------------------------------------------------
def test_the_stderr_tail_keeps_the_newest_bytes_and_lines_redacted() -> None:
    buffer = StderrBuffer(limit=30)
    for i in range(10):
        buffer.feed(f"line {i} tok-123456789\n".encode())
    assert buffer.total == 10 * len(b"line 0 tok-123456789\n")
    tail = buffer.tail(Redactor({"A_TOKEN": "tok-123456789"}), max_lines=1)
    assert tail == "line 9 [redacted:A_TOKEN]"


def test_a_line_cut_by_the_bound_is_left_out_of_the_tail() -> None:
    for limit, expected in ((10, ""), (12, "secret-line")):
        buffer = StderrBuffer(limit=limit)
        buffer.feed(b"line one\nsecret-line\n")  # one chunk over the bound: cut inside it, or at a line start
        assert buffer.tail(Redactor()) == expected


def test_a_spawn_error_keeps_its_type_and_errno_but_not_a_secret() -> None:
    redactor = Redactor({"T": "secret-value-123"})
    plain = _redacted_os_error(OSError("no secret-value-123 here"), redactor)
    assert type(plain) is OSError and str(plain) == "no [redacted:T] here"
    denied = PermissionError(13, "denied secret-value-123", b"/x/secret-value-123", None, "/y/secret-value-123")
    redacted = _redacted_os_error(denied, redactor)
    assert type(redacted) is PermissionError and redacted.errno == 13
    assert (redacted.filename, redacted.filename2) == ("/x/[redacted:T]", "/y/[redacted:T]")
    assert "secret" not in str(redacted) and _redacted_os_error(OSError(2, "gone"), redactor).filename is None


def test_invalid_utf8_on_stderr_is_replaced_not_fatal() -> None:
    buffer = StderrBuffer()
    buffer.feed(b"bad \xff byte\n")
    assert buffer.tail(Redactor()) == "bad \ufffd byte"


async def test_pumping_stderr_reads_to_the_end_and_says_so(tmp_path: Path) -> None:
    process = await spawn(_python("import sys; sys.stderr.write('one\\ntwo\\n')"), tmp_path, None)
    assert process.stderr is not None
    buffer = StderrBuffer()
    with anyio.fail_after(30):
        await buffer.pump(process.stderr)
        await process.wait()
    await reap(process, 5)
    assert buffer.eof.is_set() and buffer.tail(Redactor()) == "one\ntwo"


# ---- the process tree ---------------------------------------------------------------------------------
async def test_reaping_kills_the_server_and_every_descendant(tmp_path: Path) -> None:
    code = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); print('ready', flush=True); time.sleep(60)"
    process = await spawn(_python(code), tmp_path, None)
    assert process.stdout is not None
    with anyio.fail_after(30):
        assert (await process.stdout.receive()).startswith(b"ready")
    children = descendants(process.pid)
    assert children and all(_alive(pid) for pid in children)
    try:
        handles = [os.pidfd_open(pid) for pid in children]  # readable once that process has terminated
    except OSError:  # pragma: no cover - kernels without pidfd
        pytest.skip("pidfd_open is not available")
    try:
        with anyio.fail_after(30):
            await reap(process, 5)
            for handle in handles:
                await anyio.wait_readable(handle)
    finally:
        for handle in handles:
            os.close(handle)
    assert process.returncode is not None and process.returncode < 0


async def test_killing_a_tree_reaches_what_it_started_in_sessions_of_its_own(tmp_path: Path) -> None:
    # Lean's file workers (and an MCP server's Lean servers) are not in their parent's process group.
    code = (
        "import signal, subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'],"
        " start_new_session=True); print('ready', flush=True); signal.pause()"
    )
    process = await spawn(_python(code), tmp_path, None)
    assert process.stdout is not None
    with anyio.fail_after(30):
        assert (await process.stdout.receive()).startswith(b"ready")
    [worker] = descendants(process.pid)
    handle = os.pidfd_open(worker)
    try:
        kill_tree(process.pid)  # the descendants are collected before anything is signalled
        with anyio.fail_after(30):
            await anyio.wait_readable(handle)
            await process.wait()
    finally:
        os.close(handle)
        await process.aclose()
    assert process.returncode == -9


async def test_reaping_a_process_that_already_exited_signals_nothing(tmp_path: Path) -> None:
    process = await spawn(_python("pass"), tmp_path, None)
    with anyio.fail_after(30):
        await process.wait()
        await reap(process, 5)
    assert process.returncode == 0


def test_descendants_of_a_childless_or_unknown_process_are_none() -> None:
    assert descendants(2**22 + 12345) == []


# ---- the account of the exit --------------------------------------------------------------------------
async def _watched(tmp_path: Path, code: str) -> tuple[ServerProcess, list[ServerExited]]:
    accounts: list[ServerExited] = []
    process = await spawn(_python(code), tmp_path, None)
    return ServerProcess(process, Redactor({"A_TOKEN": "tok-123456789"}), accounts.append), accounts


async def test_an_ended_output_is_accounted_with_exit_status_and_the_whole_stderr_tail(tmp_path: Path) -> None:
    server, accounts = await _watched(tmp_path, "import sys; sys.stderr.write('PANIC tok-123456789'); sys.exit(3)")
    assert server.process.stderr is not None

    async def read() -> None:
        assert server.process.stdout is not None
        async for _ in server.process.stdout:
            pass

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.stderr.pump, server.process.stderr)
            await server.watch(read)
    await server.reap(5)
    [account] = accounts
    assert account is server.exited and account.returncode == 3
    assert account.stderr_tail == "PANIC [redacted:A_TOKEN]" and "closed its output" in str(account)


async def test_a_framing_error_kills_the_server_before_accounting(tmp_path: Path) -> None:
    server, accounts = await _watched(tmp_path, "import time; time.sleep(60)")

    async def read() -> BaseException:
        return TransportError("bad frame")

    with anyio.fail_after(30):
        await server.watch(read)
    await server.reap(5)
    assert accounts[0].returncode is not None and accounts[0].returncode < 0
    assert "unrecoverable protocol error from the server: bad frame" in str(accounts[0])


async def test_a_failed_write_prefers_the_readers_account(tmp_path: Path) -> None:
    server, accounts = await _watched(tmp_path, "pass")
    earlier = ServerExited("the reader saw it first", returncode=0)
    server.mark_exited(earlier)
    server.mark_exited(ServerExited("later accounts are ignored"))
    with anyio.fail_after(30):
        assert await server.input_broke(BrokenPipeError()) is earlier
        assert await server.wait_exited() is earlier
    await server.reap(5)
    assert accounts == [earlier]


async def test_a_failed_write_without_an_account_kills_and_gives_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from beam_lsp import _process

    monkeypatch.setattr(_process, "LOST_GRACE", 0.01)  # nobody else will account for this exit
    server, accounts = await _watched(tmp_path, "import time; time.sleep(60)")
    with anyio.fail_after(30):
        error = await server.input_broke(BrokenPipeError())
        await server.reap(5)
    assert accounts == [error] and "stopped reading its input (BrokenPipeError)" in str(error)
    assert server.process.returncode is not None and server.process.returncode < 0


# ---- through the client and the fake Lean server ------------------------------------------------------
async def test_a_server_crash_mid_request_fails_it_at_once_with_the_stderr_tail(tmp_path: Path) -> None:
    config: dict[str, object] = {
        "crash_on": {"method": "textDocument/hover", "exit_code": 3, "stderr": "PANIC at Lean.Server"}
    }
    async with LeanClient.start(fake_cmd(config), cwd=tmp_path) as client:
        uri = path_to_uri(tmp_path / "A.lean")
        await client.open(uri, "theorem x : True := trivial\n")
        with anyio.fail_after(10), pytest.raises(ServerExited) as info:
            await client.hover(uri, Position(line=0, character=8))
        assert info.value.returncode == 3
        assert "PANIC at Lean.Server" in info.value.stderr_tail
        assert client.exited is info.value
        assert "PANIC at Lean.Server" in client.stderr_tail()
        with pytest.raises(ServerExited):
            await client.sync(uri)


async def test_shutdown_is_clean_and_leaves_no_process(tmp_path: Path) -> None:
    async with LeanClient.start(fake_cmd(), cwd=tmp_path) as client:
        pid = client.pid
    exited = client.exited
    assert exited is not None and exited.returncode == 0
    assert not _alive(pid)


async def test_a_command_that_cannot_start_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        async with LeanClient.start([str(tmp_path / "no-such-lean"), "--server"], cwd=tmp_path):
            pass


async def test_a_server_that_exits_during_the_handshake_is_server_exited(tmp_path: Path) -> None:
    with pytest.raises(ServerExited) as info:
        async with LeanClient.start(_python("import sys; sys.stderr.write('boom'); sys.exit(2)"), cwd=tmp_path):
            pass
    assert info.value.returncode == 2 and "boom" in info.value.stderr_tail


async def test_a_server_that_never_answers_initialize_is_server_exited_after_the_deadline(tmp_path: Path) -> None:
    code = "import sys, time; sys.stderr.write('stuck'); sys.stderr.flush(); time.sleep(60)"
    with anyio.fail_after(30), pytest.raises(ServerExited, match=r"did not answer initialize within 0\.5 s"):
        async with LeanClient.start(_python(code), cwd=tmp_path, initialize_timeout=0.5):
            pass


# ---- the stdin pipe the client owns ---------------------------------------------------------------------
async def test_the_pipes_carry_more_than_a_pipe_holds_and_end_of_input_both_ways(tmp_path: Path) -> None:
    code = "import sys, time; time.sleep(0.2); data = sys.stdin.buffer.read(); print(len(data), flush=True)"
    process, stdin, stdout = await spawn_server(_python(code), tmp_path, None)
    assert process.stdin is None and process.stdout is None  # both pipes are the caller's
    payload = bytes(range(256)) * 4096  # 1 MiB: the pipe (64 KiB) fills, the writer waits for the reader
    with anyio.fail_after(30):
        await stdin.send(payload)
        await stdin.aclose()  # end of input
        answer = b""
        with pytest.raises(anyio.EndOfStream):  # the output ends when the child exits
            while True:
                answer += await stdout.receive()
        await process.wait()
    assert answer.strip() == str(len(payload)).encode()
    with pytest.raises(anyio.ClosedResourceError):
        await stdin.send(b"x")
    await stdout.aclose()
    with pytest.raises(anyio.ClosedResourceError):
        await stdout.receive()
    await reap(process, 5)


async def test_writing_to_a_server_that_exited_is_a_broken_pipe(tmp_path: Path) -> None:
    process, stdin, stdout = await spawn_server(_python("pass"), tmp_path, None)
    with anyio.fail_after(30):
        await process.wait()
        with pytest.raises(BrokenPipeError):
            await stdin.send(b"x" * 100_000)
    stdin.close()
    stdin.close()  # closing twice is fine
    await stdout.aclose()
    await reap(process, 5)


async def test_a_command_that_cannot_run_leaks_no_pipe(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        await spawn_server([str(tmp_path / "no-such-program")], tmp_path, None)
    assert len(os.listdir("/proc/self/fd")) == before


async def test_a_frame_once_begun_is_written_whole_even_when_its_caller_gives_up(tmp_path: Path) -> None:
    code = "import sys, time; time.sleep(0.5); print(len(sys.stdin.buffer.read()), flush=True)"
    process, stdin, stdout = await spawn_server(_python(code), tmp_path, None)
    payload = b"x" * (1 << 20)  # more than the pipe holds: the first write is partial
    with anyio.fail_after(30):
        with anyio.move_on_after(0.05) as scope:
            await stdin.send(payload)
        await stdin.aclose()
        answer = b""
        with pytest.raises(anyio.EndOfStream):
            while True:
                answer += await stdout.receive()
    assert not scope.cancelled_caught  # the deadline passed during the write, which went on to its end
    assert answer.strip() == str(len(payload)).encode()  # never a cut frame
    await stdout.aclose()
    await reap(process, 5)


# ---- the stdout pipe the client owns --------------------------------------------------------------------
_CHUNKS = "\n".join(
    [
        "import sys, time",
        "for i in range(5):",
        "    sys.stdout.buffer.write(b'chunk%d;' % i); sys.stdout.flush(); time.sleep(0.02)",
    ]
)


@pytest.mark.parametrize("push", [True, False], ids=["asyncio-read-callback", "any-backend"])
async def test_the_output_pipe_hands_every_chunk_in_order_then_ends(tmp_path: Path, push: bool) -> None:
    process, stdin, stdout = await spawn_server(_python(_CHUNKS), tmp_path, None)
    stdout = _reader(stdout, push)
    got = bytearray()
    with anyio.fail_after(30), pytest.raises(anyio.EndOfStream):
        await stdout.pump(got.extend)
    assert bytes(got) == b"chunk0;chunk1;chunk2;chunk3;chunk4;"
    await stdin.aclose()
    await stdout.aclose()
    await reap(process, 5)


@pytest.mark.parametrize("push", [True, False], ids=["asyncio-read-callback", "any-backend"])
async def test_what_the_chunk_handler_raises_stops_the_pump_and_the_rest_stays_readable(
    tmp_path: Path, push: bool
) -> None:
    process, stdin, stdout = await spawn_server(_python(_CHUNKS), tmp_path, None)
    stdout = _reader(stdout, push)

    def refuse(chunk: bytes) -> None:
        raise TransportError(f"refused {chunk[:6]!r}")

    with anyio.fail_after(30):
        with pytest.raises(TransportError, match="refused b'chunk0'"):
            await stdout.pump(refuse)
        rest = b""  # nothing was lost after the refusal: the pipe is read again on demand
        with pytest.raises(anyio.EndOfStream):
            while True:
                rest += await stdout.receive()
    assert rest.endswith(b"chunk4;") and b"chunk0" not in rest
    await stdin.aclose()
    await stdout.aclose()
    await reap(process, 5)


@pytest.mark.parametrize("push", [True, False], ids=["asyncio-read-callback", "any-backend"])
async def test_closing_the_output_pipe_ends_a_waiting_pump(tmp_path: Path, push: bool) -> None:
    process, stdin, stdout = await spawn_server(_python("import time; time.sleep(30)"), tmp_path, None)
    stdout = _reader(stdout, push)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def pump() -> None:
                with pytest.raises(anyio.ClosedResourceError):
                    await stdout.pump(lambda chunk: None)

            tg.start_soon(pump)
            await anyio.sleep(0.1)
            await stdout.aclose()
    with pytest.raises(anyio.ClosedResourceError):
        await stdout.receive()
    await stdin.aclose()
    await reap(process, 5)


def _reader(stdout: PipeReader, push: bool) -> PipeReader:
    """The output pipe; without `push` it takes the path of every backend (trio's), here on asyncio."""
    stdout._push = push
    return stdout


async def test_a_failed_read_of_the_output_pipe_is_a_broken_resource_not_an_os_error() -> None:
    # The JSON-RPC peer takes a broken stream for the server's exit; a raw OSError would escape it and take the
    # client's task group down (anyio's process stream said BrokenResourceError; the client's own pipe says so too).
    read_end, write_end = os.pipe()
    reader = PipeReader(read_end, push=False)
    os.close(read_end)  # behind the reader's back: its next read fails with EBADF
    try:
        with pytest.raises(anyio.BrokenResourceError) as info:
            await reader.receive()
        assert isinstance(info.value.__cause__, OSError)
    finally:
        reader._fd = -1  # already closed
        os.close(write_end)
