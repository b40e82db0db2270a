"""The `lean-beam` daemon: one broker per workspace root, served on a unix domain socket.

Owns: the socket, lock and log paths of a root; the wire protocol; the server (`serve`, `run_foreground`)
and the client side (`request`, `shutdown`, `spawn`). It never parses command lines or prints results.

Protocol: newline-delimited JSON, one request per connection. The client sends
`{"op": <operation or __status__/__stats__/__shutdown__>, "arguments": {...}}` and keeps its side open;
the daemon answers with zero or more `{"event": {...}}` lines and then one `{"result": {...}}` or
`{"error": {code, message, data?}}` line. Closing the connection cancels the call. A `__shutdown__`
connection stays open until the daemon process has stopped every Lean server and is about to exit.

Exactly one daemon serves a root: it holds `<hash>.lock` (an OS file lock, released when the process dies)
for its whole life, so a socket file whose lock is free belongs to a dead daemon and is replaced.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import json
import logging
import math
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from .__about__ import __version__
from ._util import loads_object
from .errors import INTERNAL_ERROR, BrokerError, invalid_input
from .events import BrokerEvent, CallContext, DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent
from .operations import BY_NAME

if TYPE_CHECKING:
    from .runtime import Broker, BrokerConfig

log = logging.getLogger("beam_broker.daemon")

SHUTDOWN: Final = "__shutdown__"
STATUS: Final = "__status__"
STATS: Final = "__stats__"
MAX_LINE: Final = 64 * 1024 * 1024
"""Longest accepted protocol line (bytes), in either direction."""
REQUEST_TIMEOUT: Final = 60.0
"""A connection that has not sent its request line after this many seconds is closed."""
ROOT_CHECK_SECONDS: Final = 2.0
"""How often the daemon checks that its root directory (and its socket file) still exist."""


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
    """One protocol line."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """Parse one protocol line into an object (duplicate keys rejected).

    Raises:
        ValueError: Not UTF-8, not JSON, duplicate keys, or not an object.
    """
    return loads_object(line.decode("utf-8"))


# ---- server -------------------------------------------------------------------------------------------
class _Server:
    """Connection handling for one daemon; lives exactly as long as `serve`."""

    def __init__(self, paths: DaemonPaths, broker: Broker, info: Mapping[str, Any]) -> None:
        self.paths = paths
        self.broker = broker
        self.info = dict(info)
        self.started = time.monotonic()
        self.started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.stop = anyio.Event()
        self.reason = ""
        self.lingering: list[SocketStream] = []
        self.socket_ino: int | None = None

    def request_stop(self, reason: str) -> None:
        if not self.stop.is_set():
            self.reason = reason
            log.info("stopping: %s", reason)
            self.stop.set()

    def status(self) -> dict[str, Any]:
        return {
            "running": True,
            "pid": os.getpid(),
            "root": self.paths.root,
            "socket": str(self.paths.socket),
            "log": str(self.paths.log),
            "version": __version__,
            **self.info,
            "startedAt": self.started_at,
            "uptimeMs": int((time.monotonic() - self.started) * 1000),
            "stats": self.broker.stats(),
        }

    async def handle(self, conn: SocketStream) -> None:
        """Serve one connection: one request, its events, one final answer."""
        keep_open = False
        try:
            reader = BufferedByteReceiveStream(conn)
            try:
                with anyio.fail_after(REQUEST_TIMEOUT):
                    line = await reader.receive_until(b"\n", MAX_LINE)
            except (TimeoutError, anyio.IncompleteRead, anyio.DelimiterNotFound, anyio.BrokenResourceError):
                return
            try:
                request = decode(line)
                op, arguments = _parse_request(request)
            except (ValueError, BrokerError) as exc:
                error = exc if isinstance(exc, BrokerError) else invalid_input(f"malformed request: {exc}")
                await _send_quietly(conn, {"error": error.wire()})
                return
            if op == SHUTDOWN:
                await _send_quietly(conn, {"result": {"stopping": True, "pid": os.getpid()}})
                self.lingering.append(conn)  # closed after every Lean server has stopped
                keep_open = True
                self.request_stop("shutdown requested")
            elif op == STATUS:
                await _send_quietly(conn, {"result": self.status()})
            elif op == STATS:
                await _send_quietly(conn, {"result": self.broker.stats()})
            else:
                await self._call(conn, reader, op, arguments)
        except Exception:  # one broken connection must not take the daemon (and its Lean servers) down
            log.exception("connection failed")
        finally:
            if not keep_open:
                with anyio.CancelScope(shield=True):
                    await conn.aclose()

    async def _call(self, conn: SocketStream, reader: BufferedByteReceiveStream, op: str, args: dict[str, Any]) -> None:
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        finished, hung_up = anyio.Event(), anyio.Event()
        call_scope = anyio.CancelScope()

        def put(message: dict[str, Any]) -> None:
            try:
                send.send_nowait(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the client is gone; the call is being cancelled

        async def write() -> None:
            try:
                async with receive:
                    async for message in receive:
                        await conn.send(encode(message))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the client is gone: the hang-up watcher cancels the call

        async def watch_hangup() -> None:
            try:
                while True:
                    await reader.receive()  # nothing more is expected; EOF means "cancel"
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                hung_up.set()
            if not finished.is_set():
                log.info("%s: the client closed the connection; cancelling", op)
                call_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_hangup)
            with call_scope:
                async with anyio.create_task_group() as writing:
                    writing.start_soon(write)
                    with send:
                        started = time.perf_counter()
                        final = await self._run(op, args, put)
                        outcome = final["error"]["code"] if "error" in final else "ok"
                        log.info("%s: %s in %.0f ms", op, outcome, (time.perf_counter() - started) * 1000)
                        put(final)
            finished.set()
            # A client closes once it has the final line. Waiting for that EOF, rather than cancelling the
            # pending read, sidesteps a race in anyio's asyncio socket streams (a read cancelled as data
            # arrives raises InvalidStateError in an event-loop callback).
            with anyio.move_on_after(REQUEST_TIMEOUT):
                await hung_up.wait()
            tg.cancel_scope.cancel()

    async def _run(self, op: str, args: dict[str, Any], put: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        ctx = CallContext(emit=lambda event: put({"event": event_wire(event)}))
        try:
            return {"result": await self.broker.call(op, args, ctx)}
        except BrokerError as exc:
            return {"error": exc.wire()}
        except Exception as exc:  # the daemon outlives any single call's bug
            log.exception("%s failed", op)
            return {"error": {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}"}}

    async def watch_paths(self, interval: float) -> None:
        while True:
            await anyio.sleep(interval)
            if not _is_dir(self.paths.root):
                self.request_stop(f"the workspace root {self.paths.root} was removed")
                return
            if _inode(self.paths.socket) != self.socket_ino:
                self.request_stop(f"the socket {self.paths.socket} was removed or replaced")
                return

    async def watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                self.request_stop(f"received {signal.Signals(signum).name}")
                return


def _parse_request(request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    extra = sorted(k for k in request if k not in ("op", "arguments"))
    if extra:
        raise invalid_input(f"malformed request: unknown fields {', '.join(extra)}")
    op = request.get("op")
    arguments = request.get("arguments", {})
    if not isinstance(op, str):
        raise invalid_input("malformed request: 'op' must be a string")
    if not isinstance(arguments, dict):
        raise invalid_input("malformed request: 'arguments' must be an object")
    if op not in (SHUTDOWN, STATUS, STATS) and op not in BY_NAME:
        raise invalid_input(f"unknown operation {op!r}")
    return op, arguments


async def _send_quietly(conn: SocketStream, message: dict[str, Any]) -> None:
    try:
        await conn.send(encode(message))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


def _is_dir(path: str) -> bool:
    return os.path.isdir(path)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


async def serve(
    paths: DaemonPaths,
    config: BrokerConfig,
    *,
    info: Mapping[str, Any] | None = None,
    watch_interval: float = ROOT_CHECK_SECONDS,
    handle_signals: bool = False,
    on_ready: Callable[[], None] | None = None,
) -> str:
    """Serve the protocol on `paths.socket` until shutdown, SIGTERM or the root's removal.

    The caller must hold `paths.lock` (see `run_foreground`): binding replaces any socket file there.

    Args:
        paths: The root's files.
        config: The broker configuration.
        info: Extra fields for `__status__` (e.g. `leanCmd`).
        watch_interval: Seconds between checks that the root and the socket file still exist.
        handle_signals: Stop on SIGTERM, SIGINT and SIGHUP (only in a process of its own).
        on_ready: Called once the socket accepts connections.

    Returns:
        Why the daemon stopped.
    """
    from .runtime import Broker  # the Lean stack loads only where a broker runs, not in clients

    ensure_private_dir(paths.directory)
    async with Broker.open(config) as broker:
        server = _Server(paths, broker, info or {})
        listener = await anyio.create_unix_listener(paths.socket, mode=0o600)
        server.socket_ino = _inode(paths.socket)
        try:
            async with listener, anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, server.handle)
                tg.start_soon(server.watch_paths, watch_interval)
                if handle_signals:
                    tg.start_soon(server.watch_signals)
                log.info("serving %s on %s (pid %d)", paths.root, paths.socket, os.getpid())
                if on_ready is not None:
                    on_ready()
                await server.stop.wait()
                tg.cancel_scope.cancel()
        finally:
            if _inode(paths.socket) == server.socket_ino:
                paths.socket.unlink(missing_ok=True)
    # Every Lean server has stopped: release the clients waiting for the shutdown to finish.
    with anyio.CancelScope(shield=True):
        for conn in server.lingering:
            await conn.aclose()
    return server.reason


def run_foreground(
    paths: DaemonPaths,
    config: BrokerConfig,
    *,
    info: Mapping[str, Any] | None = None,
    ready_fd: int | None = None,
    watch_interval: float = ROOT_CHECK_SECONDS,
) -> bool:
    """Take the root's lock and serve until stopped (the `daemon serve` process).

    Args:
        paths: The root's files.
        config: The broker configuration.
        info: Extra fields for `__status__`.
        ready_fd: A pipe to write `ready` to (and close) once the socket accepts connections.
        watch_interval: Seconds between root checks.

    Returns:
        False when another daemon already holds the lock (nothing was served).
    """
    from filelock import FileLock, Timeout

    ensure_private_dir(paths.directory)
    lock = FileLock(str(paths.lock), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        log.error("another daemon already serves %s (lock %s)", paths.root, paths.lock)
        return False

    def ready() -> None:
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)

    try:
        reason = anyio.run(
            lambda: serve(paths, config, info=info, watch_interval=watch_interval, handle_signals=True, on_ready=ready)
        )
    finally:
        lock.release()
    log.info("stopped: %s", reason)
    return True


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

    The child gets its own session, no stdin, and the root's log file for stdout and stderr. Readiness is a
    line on a pipe, so nothing polls: EOF without it means the child exited (e.g. another daemon won the lock).
    A child that is not ready within `timeout` seconds is terminated.

    Returns:
        `(outcome, pid)` with outcome `"ready"`, `"exited"` or `"timeout"`.
    """
    ensure_private_dir(paths.directory)
    read_end, write_end = os.pipe()
    try:
        with open(paths.log, "ab") as log_file:
            # Not waited for on purpose: the daemon outlives this process (Python may warn under -X dev).
            proc = subprocess.Popen(
                [*argv, "--ready-fd", str(write_end)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(write_end,),
                cwd=paths.root if os.path.isdir(paths.root) else None,
                env=None if env is None else dict(env),
            )
        os.close(write_end)
        write_end = -1
        readable, _, _ = select.select([read_end], [], [], timeout)
        line = os.read(read_end, 64) if readable else None
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if line is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGTERM)
        return "timeout", proc.pid
    return ("ready" if line.startswith(b"ready") else "exited"), proc.pid


def log_tail(paths: DaemonPaths, lines: int = 20) -> str:
    """The end of the daemon log (for error messages)."""
    try:
        text = paths.log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
