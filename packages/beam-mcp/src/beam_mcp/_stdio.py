"""The stdio transport: newline-delimited JSON-RPC on fds 0 and 1.

One permanent reader waits for stdin to become readable on the event loop (no thread) and hands each line
to the server in order; the server's single writer task is the only code that touches stdout. Logs never go
to stdout. EOF on stdin is shutdown, and so are SIGTERM and SIGINT when `serve_stdio` handles signals.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import stat
from collections.abc import AsyncIterator
from typing import Final

import anyio
import anyio.abc

from .server import McpServer, ServerConfig

log = logging.getLogger("beam_mcp")

MAX_LINE: Final = 64 * 1024 * 1024
"""Longest accepted input line (bytes); a longer one is discarded and answered with a parse error."""
_CHUNK: Final = 1 << 16


async def read_lines(fd: int, *, max_line: int = MAX_LINE) -> AsyncIterator[bytes | None]:
    """Lines from `fd` (each with its newline, the last one possibly without); None for an oversized line."""
    buf = bytearray()
    discarding = False
    pollable = True
    while True:
        if pollable:
            try:
                await anyio.wait_readable(fd)
            except (OSError, ValueError):
                # Regular files cannot be polled (and never block): read them directly.
                pollable = False
        try:
            chunk = os.read(fd, _CHUNK) if pollable else await anyio.to_thread.run_sync(os.read, fd, _CHUNK)
        except BlockingIOError:
            # A non-blocking stdin (its file description is shared with the client) whose data another reader of
            # it took between the poll and the read: nothing to read yet, which is not EOF.
            continue
        except OSError:
            break  # a closed or unreadable stdin is EOF
        if not chunk:
            break
        buf += chunk
        while True:
            end = buf.find(b"\n")
            if end < 0:
                break
            line = bytes(buf[: end + 1])
            del buf[: end + 1]
            if discarding:
                discarding = False
                continue
            yield line
        if len(buf) > max_line:
            buf.clear()
            if not discarding:
                discarding = True
                yield None
    if buf and not discarding:
        yield bytes(buf)


def _write_some(fd: int, data: bytes | memoryview) -> int:
    """One write: how many bytes went out, 0 when `fd` is non-blocking and full (then nothing was written)."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


def _write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of `data` from a worker thread, waiting here whenever a non-blocking `fd` is full.

    The file description of stdout is shared with the client, and some leave it O_NONBLOCK (Node-based clients,
    some shells): a write into a full pipe or socket then fails with EAGAIN instead of waiting for the reader.

    Raises:
        OSError: A real write error (EPIPE: the reader went away).
    """
    view = memoryview(data)
    said = False
    while view:
        written = _write_some(fd, view)
        if not written:
            if not said:
                log.debug("stdout is full and non-blocking: waiting until the client reads")
                said = True
            poll = select.poll()
            poll.register(fd, select.POLLOUT)
            poll.poll()  # also returns when the reader is gone: the next write then fails with EPIPE
        view = view[written:]


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


async def serve_stdio(config: ServerConfig, *, stdin: int = 0, stdout: int = 1, signals: bool = False) -> None:
    """Serve MCP on stdio until EOF on stdin, then shut down (in-flight calls cancelled, Lean stopped).

    With `signals`, SIGTERM and SIGINT are EOF too (only in the main thread), at any moment until the server has
    stopped (one during the shutdown changes nothing): the process stops within the shutdown grace whatever is
    pending, and no Lean process outlives it.
    """
    pipe = _is_pipe(stdout)

    async def write(data: bytes) -> None:
        # A blocking pipe write must not stall the event loop when the client is slow to read. Once a pipe is
        # writable it takes PIPE_BUF bytes at once without blocking, so a short message (most answers) is written
        # on the loop, without a thread round trip per message (0.2-0.6 ms of CPU per call, measured).
        if pipe and len(data) <= select.PIPE_BUF:
            await anyio.wait_writable(stdout)
            written = _write_some(stdout, data)  # a pipe takes PIPE_BUF bytes whole or not at all
            if written == len(data):
                return
            # Non-blocking, and another writer of the pipe took the room first: wait on a thread as for long answers.
            data = data[written:]
        await anyio.to_thread.run_sync(_write_all, stdout, data)

    reading = anyio.CancelScope()  # a signal ends the reading (even before it begins): that is EOF
    async with anyio.create_task_group() as tg:
        if signals:
            # Handled from before the server starts until it has stopped: a signal during the shutdown that follows
            # EOF (clients close stdin, then send SIGTERM after a grace) must not kill the process by the default
            # action while Lean is being stopped.
            await tg.start(_stop_on_signal, reading)
        async with McpServer.open(config, write) as server:
            with reading:
                async for line in read_lines(stdin):
                    if line is None:
                        server.receive_oversized()
                    else:
                        await server.receive(line)
        tg.cancel_scope.cancel()


async def _stop_on_signal(reading: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """End `reading` on SIGTERM or SIGINT; until cancelled, later signals change nothing (the shutdown goes on)."""
    watched = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.getsignal(signum) for signum in watched}
    try:
        with anyio.open_signal_receiver(*watched) as received:
            task_status.started()
            async for signum in received:
                log.info("received %s: shutting down", signal.Signals(signum).name)
                reading.cancel()
    finally:
        # Closing the receiver leaves the default action (asyncio does not restore what was there): put back the
        # handlers found, so that a signal in the last moments of the process is handled as the caller chose.
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)
