"""The `lean-beam` daemon server: one broker per workspace root, served on a unix domain socket.

Owns: serving the protocol (`daemon_client` defines it), one task per connection, cancelling a call when its
client hangs up, status/stats/shutdown, and stopping when the root or the socket file disappears or a signal
arrives (`serve`, `run_foreground`). Errors reach clients as the broker raised them (`Broker.call` is the one
error boundary, and redacts them); the status (which shows the Lean command) and the log lines it writes are
redacted with the broker's redactor too. It never parses command lines or prints results.
"""

from __future__ import annotations

import datetime
import logging
import math
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from beam_broker.__about__ import __version__
from beam_broker._outbound import log_failure
from beam_broker.errors import REQUEST_CANCELLED, BrokerError, invalid_input
from beam_broker.events import CallContext
from beam_broker.operations import BY_NAME

from .daemon_client import (
    MAX_LINE,
    SHUTDOWN,
    STATS,
    STATUS,
    DaemonPaths,
    decode,
    encode,
    ensure_private_dir,
    event_wire,
)

if TYPE_CHECKING:
    from beam_broker.broker import Broker
    from beam_broker.config import BrokerConfig

log = logging.getLogger("beam_broker.daemon")

REQUEST_TIMEOUT: Final = 60.0
"""A connection that has not sent its request line after this many seconds is closed."""
ROOT_CHECK_SECONDS: Final = 2.0
"""How often the daemon checks that its root directory (and its socket file) still exist."""


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
        status = {
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
        redacted: dict[str, Any] = self.broker.redactor.redact_json(status)
        return redacted

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
        except Exception as exc:  # one broken connection must not take the daemon (and its Lean servers) down
            log_failure(log, self.broker.redactor, exc, "connection failed")
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

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_hangup)
                with call_scope:
                    async with anyio.create_task_group() as writing:
                        writing.start_soon(write)
                        with send:
                            started = time.perf_counter()
                            try:
                                final = await self._run(op, args, put)
                            except anyio.get_cancelled_exc_class():
                                log.info("%s: cancelled after %.0f ms", op, (time.perf_counter() - started) * 1000)
                                raise
                            elapsed = (time.perf_counter() - started) * 1000
                            if "error" in final:  # already redacted by the broker
                                error = final["error"]
                                log.info("%s: %s in %.0f ms: %s", op, error["code"], elapsed, error["message"])
                            else:
                                log.info("%s: ok in %.0f ms", op, elapsed)
                            put(final)
                finished.set()
                # A client closes once it has the final line. Waiting for that EOF, rather than cancelling the
                # pending read, sidesteps a race in anyio's asyncio socket streams (a read cancelled as data
                # arrives raises InvalidStateError in an event-loop callback).
                with anyio.move_on_after(REQUEST_TIMEOUT):
                    await hung_up.wait()
                tg.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            if self.stop.is_set() and not finished.is_set():  # (a client that hung up misses nothing)
                # The daemon stops with the call in flight (`stop`, a signal): say so rather than close the
                # connection without an answer, which its client can only report as an internal error.
                stopped = BrokerError(
                    REQUEST_CANCELLED,
                    f"the daemon for {self.paths.root} stopped ({self.reason}) while the call ran; run it again",
                    {"reason": "daemonStopped", "stopReason": self.reason},
                )
                with anyio.CancelScope(shield=True), anyio.move_on_after(REQUEST_TIMEOUT):
                    await _send_quietly(conn, {"error": stopped.redacted(self.broker.redactor).wire()})
            raise

    async def _run(self, op: str, args: dict[str, Any], put: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        ctx = CallContext(emit=lambda event: put({"event": event_wire(event)}))
        try:
            return {"result": await self.broker.call(op, args, ctx)}
        except BrokerError as exc:  # the only error `Broker.call` raises (bugs included, as internalError)
            return {"error": exc.wire()}

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
    from beam_broker.broker import Broker

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
        # Under the lock no daemon serves this root: whatever is at the socket path was left by one that died (a
        # socket is replaced when bound; a file or a link there would make binding fail with EADDRINUSE).
        if not paths.socket.is_socket() and (paths.socket.is_file() or paths.socket.is_symlink()):
            log.warning("removing %s, left at the socket path (not a socket)", paths.socket)
            paths.socket.unlink(missing_ok=True)
        paths.pid.write_text(f"{os.getpid()}\n", encoding="utf-8")  # who holds the lock, should it stop answering
        reason = anyio.run(
            lambda: serve(paths, config, info=info, watch_interval=watch_interval, handle_signals=True, on_ready=ready)
        )
    finally:
        paths.pid.unlink(missing_ok=True)
        lock.release()
    log.info("stopped: %s", reason)
    return True
