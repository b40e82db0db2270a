"""The language server's process: spawn in its own process group, stderr tail, the account of its exit, kill.

Lean's watchdog starts file workers with `setsid`, so they are not in the server's process group; teardown
therefore also collects descendants from /proc (where available) before killing. `ServerProcess` decides once
why the server is gone (`ServerExited`, with exit status and redacted stderr tail) however that was noticed:
its output ended or broke, our writes failed, or the client shut it down. Every account it gives is redacted
(the reason may quote the server's output), and so is a failure to spawn (the error names the command). It
knows nothing about JSON-RPC messages or documents.
"""

from __future__ import annotations

import asyncio  # noqa: TID251 (PipeReader.pump: asyncio's read callback, no task; see its docstring)
import collections
import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, NoReturn

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from .errors import ServerExited, TransportError
from .redaction import Redactor

STDERR_TAIL_BYTES: Final = 64 * 1024
EXIT_WAIT: Final = 2.0
"""Seconds to wait for the exit status once the server's output ended."""
STDERR_GRACE: Final = 0.5
"""Seconds to wait for the rest of stderr after the exit (Lean's workers may keep it open)."""
LOST_GRACE: Final = 5.0
"""Seconds a failed write waits for the reader's account of the exit before declaring the server lost."""


class StderrBuffer:
    """A bounded tail of a child's stderr (never inherited: it would corrupt stdio framing)."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        """Keep the last `limit` bytes."""
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self.total: int = 0
        self._at_line_start = True  # whether the oldest byte kept starts a line
        self.eof: anyio.Event = anyio.Event()
        """Set once `pump` has read the stream to its end (or the stream broke)."""

    def feed(self, data: bytes) -> None:
        """Append bytes, dropping the oldest beyond the limit."""
        self._chunks.append(data)
        self._size += len(data)
        self.total += len(data)
        while self._size > self._limit and len(self._chunks) > 1:
            dropped = self._chunks.popleft()
            self._size -= len(dropped)
            self._at_line_start = dropped.endswith(b"\n")

    def tail(self, redactor: Redactor, max_lines: int = 40) -> str:
        """The last lines, decoded and redacted.

        A line whose start was dropped to respect the limit is left out: a secret cut in two would no longer
        be recognised.
        """
        data = b"".join(self._chunks)
        at_line_start = self._at_line_start
        if len(data) > self._limit:
            at_line_start = data[-self._limit - 1 : -self._limit] == b"\n"
            data = data[-self._limit :]
        lines = data.decode("utf-8", "replace").splitlines()
        if not at_line_start:
            lines = lines[1:]
        return redactor.redact("\n".join(lines[-max_lines:]))

    async def pump(self, stream: ByteReceiveStream) -> None:
        """Read `stream` to its end into the buffer, then set `eof`."""
        try:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                while True:
                    self.feed(await stream.receive(65536))
        finally:
            self.eof.set()


async def spawn(
    cmd: Sequence[str],
    cwd: str | Path,
    env: Mapping[str, str] | None,
    redactor: Redactor | None = None,
    *,
    stdin: int = subprocess.PIPE,
    stdout: int = subprocess.PIPE,
) -> Process:
    """Start `cmd` in `cwd` with piped stdio (or `stdin`/`stdout` file descriptors), in a new session.

    The child gets its own process group.

    Raises:
        OSError: The command could not be executed; the same `OSError` subclass and errno, with the message and
            file names redacted (the original is not chained: its text is not).
    """
    try:
        return await anyio.open_process(
            list(cmd),
            cwd=str(cwd),
            env=dict(env) if env is not None else None,
            start_new_session=True,
            stdin=stdin,
            stdout=stdout,
        )
    except OSError as exc:
        raise _redacted_os_error(exc, redactor or Redactor()) from None


def _close_fd(fd: int) -> int:
    """Close a pipe end a task may wait on (it then raises `ClosedResourceError`); returns -1, the closed mark."""
    if fd >= 0:
        anyio.notify_closing(fd)
        os.close(fd)
    return -1


class PipeWriter(ByteSendStream):
    """The write end of the server's stdin pipe, owned by the client: `send` writes at once, without a checkpoint.

    anyio's process stdin stream yields to the event loop after every write (a shielded checkpoint), which cost
    each request a whole extra event-loop iteration: a quarter of the client's work for a hover. Here a write that
    the pipe takes at once returns at once; a full pipe waits with `anyio.wait_writable` (every backend). Writes
    are not atomic for frames larger than the pipe buffer, so callers keep one writer at a time (the JSON-RPC
    peer's write lock does).
    """

    def __init__(self, fd: int) -> None:
        """Write to `fd` (made non-blocking here)."""
        os.set_blocking(fd, False)
        self._fd = fd

    async def send(self, item: bytes) -> None:
        """Write all of `item`; once part of it is written the rest is written even if the caller is cancelled.

        A frame cut in the middle would make every later message unreadable for the server.

        Raises:
            anyio.ClosedResourceError: The writer was closed.
            BrokenPipeError: The server closed its stdin (it exited).
        """
        view = memoryview(item)
        while view:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                if len(view) == len(item):
                    await anyio.wait_writable(self._fd)  # nothing written yet: the caller may still give up
                else:
                    with anyio.CancelScope(shield=True):
                        await anyio.wait_writable(self._fd)

    def close(self) -> None:
        """Close the pipe (the server reads end of input); a waiting `send` raises `ClosedResourceError`."""
        self._fd = _close_fd(self._fd)

    async def aclose(self) -> None:
        """Same as `close`."""
        self.close()

    async def send_eof(self) -> None:
        """Same as `close`: a pipe has no half-close."""
        self.close()


class PipeReader(ByteReceiveStream):
    """The read end of the server's stdout pipe, owned by the client.

    `receive` reads what the pipe holds, waiting with `anyio.wait_readable` when it is empty (every backend).
    `pump` hands every chunk to a callback as it arrives: on asyncio from the event loop's own read callback (a
    protocol on `loop.connect_read_pipe`). A message from Lean then reaches the task waiting for it in one
    event-loop iteration, where asyncio's subprocess streams take three (the read callback, the subprocess
    protocol's relay through `call_soon`, the reader task's turn): a hover cost 279k instructions with anyio's
    process stream and 225k with this (callgrind, docs/benchmarks.md). This is the one use of asyncio in beam-lsp:
    the transport lives inside `pump`'s scope (closed when it returns or is cancelled), and the only tasks started
    from its callback are the JSON-RPC peer's answers to server requests, in the peer's task group.
    """

    def __init__(self, fd: int, *, push: bool = True) -> None:
        """Read `fd` (made non-blocking here); `push=False` makes `pump` a loop over `receive` on every backend."""
        os.set_blocking(fd, False)
        self._fd = fd
        self._push = push
        self._transport: asyncio.ReadTransport | None = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """The next bytes the server wrote (at most `max_bytes`).

        Raises:
            anyio.EndOfStream: The server closed its output.
            anyio.ClosedResourceError: The reader was closed.
            anyio.BrokenResourceError: The read failed (the `OSError` is its cause).
        """
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            except OSError as exc:  # as anyio's streams say it (the peer's account of a broken output)
                raise anyio.BrokenResourceError(f"reading the server's output failed: {exc}") from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def pump(self, on_chunk: Callable[[bytes], None]) -> NoReturn:
        """Call `on_chunk` with every chunk read, in order, until the output ends; what it raises stops reading.

        Raises:
            anyio.EndOfStream: The server closed its output.
            anyio.ClosedResourceError: The reader was closed.
            anyio.BrokenResourceError: The read failed (the `OSError` is its cause).
            Exception: What `on_chunk` raised.
        """
        if self._push and self._fd >= 0 and _running_asyncio_loop() is not None:
            await self._pump_asyncio(on_chunk)
        while True:
            on_chunk(await self.receive())

    async def _pump_asyncio(self, on_chunk: Callable[[bytes], None]) -> NoReturn:
        loop = asyncio.get_running_loop()
        protocol = _PumpProtocol(on_chunk, anyio.Event())
        pipe = open(self._fd, "rb", buffering=0, closefd=False)  # noqa: ASYNC230 (wraps the descriptor: no I/O)
        transport, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
        self._transport = transport
        try:
            await protocol.finished.wait()
        finally:
            self._transport = None
            transport.close()
        if protocol.error is not None:
            raise protocol.error
        if self._fd < 0:
            raise anyio.ClosedResourceError
        raise anyio.EndOfStream

    def close(self) -> None:
        """Close the pipe; a waiting `receive` or `pump` raises `ClosedResourceError`."""
        if self._transport is not None:
            self._transport.close()  # unregistered from the event loop before the descriptor can be reused
            self._transport = None
        self._fd = _close_fd(self._fd)

    async def aclose(self) -> None:
        """Same as `close`."""
        self.close()


class _PumpProtocol(asyncio.Protocol):
    """Hands the pipe's chunks to the pump's callback from the event loop's read callback."""

    def __init__(self, on_chunk: Callable[[bytes], None], finished: anyio.Event) -> None:
        self.on_chunk = on_chunk
        self.finished = finished
        self.error: BaseException | None = None

    def data_received(self, data: bytes) -> None:
        if self.error is None:
            try:
                self.on_chunk(data)
            except Exception as exc:  # it ends the pump, which raises it in its task
                self.error = exc
                self.finished.set()

    def eof_received(self) -> None:
        self.finished.set()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self.error is None:  # a failed read (the transport's own errors are OSErrors)
            self.error = anyio.BrokenResourceError(f"reading the server's output failed: {exc}")
            self.error.__cause__ = exc
        self.finished.set()


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # another backend (trio)
        return None


async def spawn_server(
    cmd: Sequence[str], cwd: str | Path, env: Mapping[str, str] | None, redactor: Redactor | None = None
) -> tuple[Process, PipeWriter, PipeReader]:
    """`spawn`, with the child's stdin and stdout pipes the caller owns (`process.stdin`/`stdout` are None).

    Raises:
        OSError: The command could not be executed (redacted, see `spawn`).
    """
    stdin_read, stdin_write = os.pipe()
    try:
        stdout_read, stdout_write = os.pipe()
    except BaseException:
        os.close(stdin_read)
        os.close(stdin_write)
        raise
    try:
        process = await spawn(cmd, cwd, env, redactor, stdin=stdin_read, stdout=stdout_write)
    except BaseException:
        os.close(stdin_write)
        os.close(stdout_read)
        raise
    finally:  # the child has its copies; ours would keep the pipes open after the child's ends close
        os.close(stdin_read)
        os.close(stdout_write)
    return process, PipeWriter(stdin_write), PipeReader(stdout_read)


def _redacted_os_error(exc: OSError, redactor: Redactor) -> OSError:
    def scrub(value: object) -> object:
        return redactor.redact(os.fsdecode(value)) if isinstance(value, (str, bytes)) else value

    if exc.errno is None:
        return type(exc)(redactor.redact(str(exc)))
    args = [exc.errno, redactor.redact(exc.strerror or "")]
    if exc.filename is not None or exc.filename2 is not None:
        args += [scrub(exc.filename), None, scrub(exc.filename2)]
    return type(exc)(*args)


def children_map() -> dict[int, list[int]]:
    """Parent PID -> child PIDs of every process (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses: the ppid follows the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            children[int(fields[1])].append(int(name))
    return children


def descendants(pid: int) -> list[int]:
    """PIDs of all descendants of `pid` (Linux /proc; empty elsewhere)."""
    children = children_map()
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


async def reap(process: Process, timeout: float) -> None:
    """Kill a live process with its whole tree, wait (at most `timeout` seconds) for it and close its pipes.

    Only a live (unreaped) process is signalled: once reaped, its pid and process-group id can belong to an
    unrelated new process. Never raises for a process that is already gone.
    """
    if process.returncode is None:
        kill_tree(process.pid, descendants(process.pid))
    with anyio.move_on_after(timeout), contextlib.suppress(Exception):
        await process.wait()
    with anyio.move_on_after(timeout), contextlib.suppress(Exception):
        await process.aclose()
    with anyio.move_on_after(timeout), contextlib.suppress(Exception):
        await _stdin_closed(process)


async def _stdin_closed(process: Process) -> None:
    """Wait for the stdin pipe's close, which consumes the error of a pipe the server broke.

    On CPython 3.10 asyncio keeps that error in a future nobody reads, and the event loop then reports "Future
    exception was never retrieved" for every server that died while we were writing to it (fixed in 3.11).
    """
    writer = getattr(process.stdin, "_stream", None)  # anyio's wrapper around asyncio's StreamWriter
    wait_closed = getattr(writer, "wait_closed", None)
    if wait_closed is not None:
        await wait_closed()


def kill_tree(pid: int, pids: Sequence[int] | None = None, *, sig: int = signal.SIGKILL, group: bool = True) -> None:
    """Signal (SIGKILL unless `sig`) the process group of a child started in a session of its own, and its tree.

    What the child started in sessions of their own is not in its group (Lean's file workers; the Lean servers of
    an MCP server or a daemon), so every descendant is signalled too: `pids`, collected before the child was
    signalled (once it dies they are re-parented and cannot be found), or None to collect them now (Linux /proc).
    Call it only for a child not yet reaped: once reaped, its pid and process-group id may name another process.
    With `group=False` the process itself is signalled instead of its group (one that may share its group with
    programs that are not its own, e.g. a command in a shell's pipeline). Errors are ignored (a process may be gone
    already).
    """
    if pids is None:
        pids = descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)


class ServerProcess:
    """One spawned server process and the single account of why it is gone.

    `on_exit` is called once, synchronously, with the `ServerExited` that every later call should raise.
    """

    def __init__(
        self,
        process: Process,
        redactor: Redactor,
        on_exit: Callable[[ServerExited], None],
        pipes: Sequence[ByteSendStream | ByteReceiveStream] = (),
    ) -> None:
        """Watch `process` (spawned by `spawn`, or by `spawn_server`: its `pipes` are closed at `reap`)."""
        self.process = process
        self.pipes = pipes
        self.stderr = StderrBuffer()
        self._redactor = redactor
        self._on_exit = on_exit
        self.exited: ServerExited | None = None
        self._exit_event = anyio.Event()

    def stderr_tail(self, max_lines: int = 40) -> str:
        """The last lines the server wrote to stderr, redacted."""
        return self.stderr.tail(self._redactor, max_lines)

    def error(self, reason: str, returncode: int | None = None, *, tail: bool = True) -> ServerExited:
        """A `ServerExited` with a redacted `reason`, the exit status and (with `tail`) the stderr tail."""
        stderr_tail = self.stderr_tail() if tail else ""
        return ServerExited(self._redactor.redact(reason), returncode=returncode, stderr_tail=stderr_tail)

    def mark_exited(self, error: ServerExited) -> ServerExited:
        """Record why the server is gone (the first account wins), tell `on_exit`, and return the account."""
        if self.exited is None:
            self.exited = error
            self._exit_event.set()
            self._on_exit(error)
        return self.exited

    async def wait_exited(self) -> ServerExited:
        """Wait for the account of the exit."""
        await self._exit_event.wait()
        assert self.exited is not None
        return self.exited

    def kill(self) -> None:
        """SIGKILL the server and its whole tree, unless it was already collected (its pid may be reused)."""
        if self.process.returncode is None:
            kill_tree(self.process.pid, descendants(self.process.pid))

    async def watch(self, read: Callable[[], Awaitable[BaseException | None]]) -> None:
        """Run `read` (the reader of the server's output) to its end, then account for the exit.

        `read` returns None when the output ended, else the error that stopped it. A framing error
        (`TransportError`) leaves the stream unusable, so the server is killed first.
        """
        failure = await read()
        reason = "the server closed its output"
        if isinstance(failure, TransportError):
            reason = f"unrecoverable protocol error from the server: {failure}"
            self.kill()
        elif failure is not None:
            reason = f"the server's output stream broke: {failure!r}"
        returncode: int | None = None
        with anyio.move_on_after(EXIT_WAIT):
            returncode = await self.process.wait()
        with anyio.move_on_after(STDERR_GRACE):
            await self.stderr.eof.wait()
        self.mark_exited(self.error(reason, returncode))

    async def input_broke(self, exc: BaseException) -> ServerExited:
        """A write to the server failed: prefer the reader's account of the exit, else kill and give our own."""
        with anyio.move_on_after(LOST_GRACE):
            await self._exit_event.wait()
        if self.exited is not None:
            return self.exited
        self.kill()
        reason = f"the server stopped reading its input ({type(exc).__name__})"
        return self.mark_exited(self.error(reason, self.process.returncode))

    async def reap(self, timeout: float) -> None:
        """Kill what is left of the server, collect it and account for the exit if nobody did before."""
        for pipe in self.pipes:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await pipe.aclose()
        await reap(self.process, timeout)
        self.mark_exited(self.error("the client shut the server down", self.process.returncode, tail=False))
