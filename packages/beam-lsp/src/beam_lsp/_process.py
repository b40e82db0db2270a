"""Spawning the language server in its own process group, capturing stderr, and killing the whole tree.

Lean's watchdog starts file workers with `setsid`, so they are not in the server's process group; teardown
therefore also collects descendants from /proc (where available) before killing.
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from .redaction import Redactor

STDERR_TAIL_BYTES = 64 * 1024


class StderrBuffer:
    """A bounded tail of a child's stderr (never inherited: it would corrupt stdio framing)."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        """Keep the last `limit` bytes."""
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Append bytes, dropping the oldest beyond the limit."""
        self._chunks.append(data)
        self._size += len(data)
        self.total += len(data)
        while self._size > self._limit and len(self._chunks) > 1:
            self._size -= len(self._chunks.popleft())

    def tail(self, redactor: Redactor, max_lines: int = 40) -> str:
        """The last lines, decoded and redacted."""
        text = b"".join(self._chunks)[-self._limit :].decode("utf-8", "replace")
        return redactor.redact("\n".join(text.splitlines()[-max_lines:]))

    async def pump(self, stream: ByteReceiveStream) -> None:
        """Read `stream` to its end into the buffer."""
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                self.feed(await stream.receive(65536))


async def spawn(cmd: Sequence[str], cwd: str | Path, env: Mapping[str, str] | None) -> Process:
    """Start `cmd` in `cwd` with piped stdio, in a new session (own process group)."""
    return await anyio.open_process(
        list(cmd), cwd=str(cwd), env=dict(env) if env is not None else None, start_new_session=True
    )


def descendants(pid: int) -> list[int]:
    """PIDs of all descendants of `pid` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
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
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(pid: int, pids: Sequence[int]) -> None:
    """SIGKILL the process group of `pid` and every pid in `pids` (errors ignored: they may be gone)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
