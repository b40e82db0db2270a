"""The `lean-beam` daemon protocol and its client side: where a root's daemon lives, the wire, and requests.

Owns: the socket, lock and log paths of a root; the wire format (newline-delimited JSON, one request per
connection); `request`, `status` and `spawn` (starting a detached daemon process). The server (`daemon`) uses
the paths and the wire from here. It never parses command lines, prints results or imports the Lean stack.

Protocol: the client sends `{"op": <operation or __status__/__stats__/__shutdown__>, "arguments": {...}}` and
keeps its side open; the daemon answers with zero or more `{"event": {...}}` lines and then one
`{"result": {...}}` or `{"error": {code, message, data?}}` line. Closing the connection cancels the call. A
`__shutdown__` connection stays open until the daemon process has stopped every Lean server and is about to exit.

Exactly one daemon serves a root: it holds `<hash>.lock` (an OS file lock, released when the process dies)
for its whole life, so a socket file whose lock is free belongs to a dead daemon and is replaced.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import select
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from beam_broker.errors import INTERNAL_ERROR, BrokerError
from beam_broker.events import BrokerEvent, DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent
from beam_lsp import kill_tree
from beam_lsp.strict_json import dumps, loads_object

SHUTDOWN: Final = "__shutdown__"
STATUS: Final = "__status__"
STATS: Final = "__stats__"
MAX_LINE: Final = 64 * 1024 * 1024
"""Longest accepted protocol line (bytes), in either direction."""


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (no socket file, or a stale one)."""


# ---- paths --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DaemonPaths:
    """Where the daemon of one canonical root keeps its socket, lock and log."""

    root: str
    socket: Path
    lock: Path
    log: Path

    @property
    def directory(self) -> Path:
        """The private (0700) directory holding the files."""
        return self.socket.parent

    @property
    def pid(self) -> Path:
        """The pid of the daemon holding the lock, written once it holds it (for `recover --force`)."""
        return self.lock.with_suffix(".pid")


def state_dir(env: Mapping[str, str]) -> Path:
    """`$XDG_RUNTIME_DIR/beam` when that is an absolute directory, else `~/.cache/beam`."""
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and os.path.isdir(runtime):
        return Path(runtime) / "beam"
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".cache" / "beam"


def paths_for(root: str, env: Mapping[str, str] | None = None) -> DaemonPaths:
    """The daemon files of a workspace root (canonicalized: aliases of one root share a daemon)."""
    canonical = os.path.realpath(root)
    stem = hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    base = state_dir(os.environ if env is None else env)
    return DaemonPaths(canonical, base / f"{stem}.sock", base / f"{stem}.lock", base / f"{stem}.log")


def ensure_private_dir(path: Path) -> None:
    """Create the state directory with mode 0700 (and tighten it if it exists)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


# ---- wire ---------------------------------------------------------------------------------------------
def event_wire(event: BrokerEvent) -> dict[str, Any]:
    """A broker event as protocol JSON (`kind` plus the event's fields)."""
    kinds = {PreparationEvent: "preparation", SetupEvent: "setup", FileProgressEvent: "fileProgress"}
    kind = kinds.get(type(event), "diagnostic")
    return {"kind": kind, **dataclasses.asdict(event)}


def event_from_wire(data: Mapping[str, Any]) -> BrokerEvent | None:
    """The broker event of a protocol event, or None for a malformed or unknown one (newer daemon)."""
    fields = {k: v for k, v in data.items() if k != "kind"}
    kind = data.get("kind")
    try:
        if kind == "preparation":
            return PreparationEvent(**fields)
        if kind == "setup":
            return SetupEvent(**fields)
        if kind == "fileProgress":
            return FileProgressEvent(**fields)
        if kind == "diagnostic":
            return DiagnosticEvent(**fields)
    except TypeError:
        return None
    return None


def encode(message: Mapping[str, Any]) -> bytes:
    """One protocol line (always encodable: a lone surrogate in a string is written as its escape)."""
    return dumps(dict(message), compact=True).encode("utf-8") + b"\n"


def command_digest(cmd: Sequence[str] | None) -> str | None:
    """A digest identifying a Lean command (`__status__` shows the command redacted; clients compare this)."""
    if cmd is None:
        return None
    return hashlib.sha256(json.dumps(list(cmd), ensure_ascii=True).encode("ascii")).hexdigest()


def decode(line: bytes) -> dict[str, Any]:
    """Parse one protocol line into an object (duplicate keys rejected).

    Raises:
        ValueError: Not UTF-8, not JSON, duplicate keys, or not an object.
    """
    return loads_object(line)


# ---- client -------------------------------------------------------------------------------------------
async def _connect(paths: DaemonPaths) -> SocketStream:
    try:
        return await anyio.connect_unix(paths.socket)
    except FileNotFoundError:
        raise DaemonUnavailable(f"no daemon socket at {paths.socket}") from None
    except OSError as exc:  # ECONNREFUSED: a stale socket file of a dead daemon
        raise DaemonUnavailable(f"no daemon answers on {paths.socket} ({exc.strerror or exc})") from None


async def request(
    paths: DaemonPaths,
    op: str,
    arguments: Mapping[str, Any] | None = None,
    on_event: Callable[[BrokerEvent], None] | None = None,
    *,
    linger: bool = False,
) -> dict[str, Any]:
    """Send one request and return the final `{"result": ...}` or `{"error": ...}` message.

    Cancelling this call closes the connection, which cancels the call in the daemon.

    Args:
        paths: The root's files.
        op: An operation name or `__status__` / `__stats__` / `__shutdown__`.
        arguments: The operation's arguments.
        on_event: Receives the events the daemon streams.
        linger: After the final message, also wait for the daemon to close the connection.

    Raises:
        DaemonUnavailable: Nothing answers on the socket (nothing was sent).
        BrokerError: `internalError` when the daemon closed the connection without a final message.
    """
    conn = await _connect(paths)
    async with conn:
        payload: dict[str, Any] = {"op": op}
        if arguments is not None:
            payload["arguments"] = dict(arguments)
        reader = BufferedByteReceiveStream(conn)
        try:
            await conn.send(encode(payload))
            while True:
                message = decode(await reader.receive_until(b"\n", MAX_LINE))
                if "event" in message:
                    event = event_from_wire(message["event"]) if isinstance(message["event"], dict) else None
                    if event is not None and on_event is not None:
                        on_event(event)
                    continue
                if "result" in message or "error" in message:
                    break
        except (anyio.IncompleteRead, anyio.BrokenResourceError, anyio.EndOfStream, ValueError) as exc:
            raise BrokerError(
                INTERNAL_ERROR,
                f"the daemon for {paths.root} closed the connection without an answer (see {paths.log})",
                {"daemonLog": str(paths.log), "detail": type(exc).__name__},
            ) from None
        if linger:
            try:
                while True:
                    await conn.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        return message


async def status(paths: DaemonPaths) -> dict[str, Any] | None:
    """The daemon's `__status__` result, or None when none answers."""
    try:
        with anyio.fail_after(10):
            answer = await request(paths, STATUS)
    except (DaemonUnavailable, BrokerError, TimeoutError):
        return None
    result = answer.get("result")
    return result if isinstance(result, dict) else None


def spawn(
    paths: DaemonPaths, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> tuple[str, int]:
    """Start `argv` (a `daemon serve` command that takes `--ready-fd N` last) detached; wait until it is ready.

    The child gets its own session, no stdin, and the root's log file for stdout and stderr; `argv[0]` must be
    an executable path. Readiness is a line on a pipe, so nothing polls: EOF without it means the child exited
    (e.g. another daemon won the lock). A child that is not ready within `timeout` seconds is terminated.

    Returns:
        `(outcome, pid)` with outcome `"ready"`, `"exited"` or `"timeout"`.
    """
    ensure_private_dir(paths.directory)
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        log_fd = os.open(paths.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            # posix_spawn rather than subprocess: the daemon outlives this process, so nothing here ever waits
            # for it (a Popen object would warn about that), and it is not killed when this process exits.
            pid = os.posix_spawn(
                argv[0],
                [*argv, "--ready-fd", str(write_end)],
                dict(os.environ if env is None else env),
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, log_fd, 1),
                    (os.POSIX_SPAWN_DUP2, log_fd, 2),
                ],
                setsid=True,
            )
        finally:
            os.close(log_fd)
        os.close(write_end)
        write_end = -1
        readable, _, _ = select.select([read_end], [], [], timeout)
        line = os.read(read_end, 64) if readable else None
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if line is None:  # never reaped here (it is detached), so its pid is still its own
        kill_tree(pid, sig=signal.SIGTERM)  # it stops what it started
        return "timeout", pid
    return ("ready" if line.startswith(b"ready") else "exited"), pid


def log_tail(paths: DaemonPaths, lines: int = 20) -> str:
    """The end of the daemon log (for error messages)."""
    try:
        text = paths.log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
