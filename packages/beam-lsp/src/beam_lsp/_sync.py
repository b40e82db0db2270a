"""The synchronous facade: `SyncLeanClient`, `SyncLeanFile` and `SyncEventStream`, for scripts and notebooks.

Owns one background event loop per client (anyio's blocking portal, a thread) on which the async `LeanClient` runs,
as httpx's `Client` stands beside `AsyncClient`. Every method is the async method of the same name (the wrappers
are generated into `_sync_methods.py`), so the guarantees are the async client's: a call that is interrupted
(`KeyboardInterrupt`, the facade's `timeout`) cancels its task on the loop, which sends `$/cancelRequest`; the
server's death is `ServerExited`; leaving the `with` block shuts the server down. Nothing here talks to Lean.

The loop's thread is a daemon, so the interpreter never waits for it: a client entered by hand and never left is
shut down when it is garbage collected or at interpreter exit (`weakref.finalize`, which runs among the `atexit`
callbacks, while daemon threads still run), bounded by `LeanClient`'s own shutdown timeouts.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from ._events import EventStream, LspEvent
from ._file import LeanFile
from ._framing import DEFAULT_MAX_MESSAGE_BYTES
from ._handshake import ServerRequestHandler
from ._model import JsonValue
from ._sync_methods import SyncClientMethods, SyncFileMethods
from .client import EVENT_BUFFER, INITIALIZE_TIMEOUT, LeanClient
from .diagnostics import DiagnosticsCache, DiagnosticsSnapshot
from .redaction import Redactor

__all__ = ["SyncEventStream", "SyncLeanClient", "SyncLeanFile"]

T = TypeVar("T")

log: logging.Logger = logging.getLogger("beam_lsp")

LOOP_JOIN_TIMEOUT: Final = 5.0
"""Seconds to wait for the loop's thread once the client is shut down (it is a daemon: nothing waits longer)."""


async def _within(timeout: float | None, func: Callable[[], Any]) -> Any:
    with anyio.fail_after(timeout):
        result = func()
        if inspect.isawaitable(result):
            result = await result
        return result


class _Loop:
    """The facade's event loop: a daemon thread running a blocking portal, and the async client's context on it.

    Written out instead of anyio's `start_blocking_portal`, whose thread (a non-daemon executor thread in earlier
    anyio 4 releases) the interpreter would join at exit before any `atexit` callback could stop it.
    `close` leaves the async client's context (Lean is shut down) and stops the loop, once, whoever calls it first.
    """

    def __init__(self, backend: str) -> None:
        """Start the loop's thread and wait for its portal."""
        found: Future[BlockingPortal] = Future()

        async def serve() -> None:
            async with BlockingPortal() as portal:
                found.set_result(portal)
                await portal.sleep_until_stopped()

        def run() -> None:
            try:
                anyio.run(serve, backend=backend)
            except BaseException as exc:  # handed to the thread that waits for the portal
                if not found.done():
                    found.set_exception(exc)

        self._thread = threading.Thread(target=run, name=f"beam-lsp-{backend}-loop", daemon=True)
        self._thread.start()
        self.portal: BlockingPortal = found.result()
        self._context: contextlib.AbstractContextManager[LeanClient] | None = None
        self._closing = threading.Lock()
        self._closed = False

    def enter(self, started: contextlib.AbstractAsyncContextManager[LeanClient]) -> LeanClient:
        """Enter the async client's context on the loop (the loop is stopped when that fails)."""
        self._context = self.portal.wrap_async_context_manager(started)
        try:
            return self._context.__enter__()
        except BaseException:
            self._context = None
            self.close()
            raise

    def close(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        """Leave the client's context (shutting Lean down) and stop the loop; later calls do nothing."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
        if threading.current_thread() is self._thread:  # collected on its own loop: it cannot wait for itself
            log.warning("a SyncLeanClient was collected on its event loop; its server is left to the OS")
            return
        try:
            if self._context is not None:
                self._context.__exit__(exc_type, exc, tb)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone already
                self.portal.call(self.portal.stop, True)
            self._thread.join(LOOP_JOIN_TIMEOUT)


class _Runner:
    """Runs calls on the portal's loop, each within the timeout, cancelling the task when the caller gives up."""

    def __init__(self, portal: BlockingPortal, timeout: float | None, client: LeanClient | None = None) -> None:
        self._portal = portal
        self._timeout = timeout
        self._client = client

    def run(self, func: Callable[[], Any]) -> Any:
        """`func()` on the loop (awaited when awaitable), within the timeout; the caller's interruption cancels it.

        Raises:
            ServerExited: The client's block was left (its loop is gone), as the async client raises then.
        """
        try:
            future: Future[Any] = self._portal.start_task_soon(_within, self._timeout, func)
        except RuntimeError:  # the portal is not running; its loop is gone, so `exited` is safe to read here
            exited = self._client.exited if self._client is not None else None
            if exited is None:
                raise
            raise exited from None
        try:
            return future.result()
        except BaseException:
            future.cancel()  # the task's scope is cancelled: an unanswered request sends $/cancelRequest
            raise


class SyncLeanClient(SyncClientMethods):
    """A blocking client for one Lean language server, for scripts and notebooks.

    Every method of `LeanClient` is here with the same parameters and results, blocking until it is done; the async
    client runs on a background event loop owned by this object. Start it with `SyncLeanClient.start(...)` as a
    context manager (the arguments of `LeanClient.start`, plus `timeout` and `backend`); leaving it shuts the
    server down. A client entered by hand and never left is shut down when it is garbage collected or at interpreter
    exit (bounded by the async client's shutdown timeouts).

    Example::

        with SyncLeanClient.start(["lake", "serve"], cwd=root) as client:
            doc = client.file("Demo/Goals.lean")
            doc.open()
            print(doc.sync().diagnostics)
    """

    def __init__(self, client: LeanClient, portal: BlockingPortal, timeout: float | None) -> None:
        """Internal: use `SyncLeanClient.start`."""
        self._client = client
        self._runner = _Runner(portal, timeout, client)

    def _await(self, func: Callable[[], Awaitable[T]]) -> T:
        result: T = self._runner.run(func)
        return result

    def _get(self, func: Callable[[], T]) -> T:
        result: T = self._runner.run(func)
        return result

    @classmethod
    def start(
        cls,
        cmd: Sequence[str],
        *,
        cwd: str | Path,
        env: Mapping[str, str] | None = None,
        cache: DiagnosticsCache | None = None,
        redactor: Redactor | None = None,
        initialization_options: Mapping[str, JsonValue] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        initialize_timeout: float = INITIALIZE_TIMEOUT,
        server_requests: Mapping[str, ServerRequestHandler] | None = None,
        client_capabilities: Mapping[str, JsonValue] | None = None,
        timeout: float | None = None,
        backend: str = "asyncio",
    ) -> contextlib.AbstractContextManager[SyncLeanClient]:
        """Start the server on a background event loop and yield a blocking client (see `LeanClient.start`).

        Args:
            cmd: The server command, e.g. `["lake", "serve"]`.
            cwd: The absolute project root.
            env: The child's environment (default: inherit).
            cache: A diagnostics cache to fill.
            redactor: Scrubs secrets from Lean text, errors and logs.
            initialization_options: Lean's `initializationOptions`.
            max_message_bytes: Largest message body accepted from the server.
            initialize_timeout: Seconds to wait for the `initialize` answer.
            server_requests: Handlers (async functions, run on the event loop) for the server's requests.
            client_capabilities: LSP client capabilities to announce besides beam-lsp's own.
            timeout: Seconds each call may take before it is cancelled and raises `TimeoutError` (default: none).
            backend: The anyio backend of the event loop (`"asyncio"` or `"trio"`).

        Raises:
            ServerExited: The server could not be started or died during the handshake.
            OSError: The command could not be executed.
        """
        started = LeanClient.start(
            cmd,
            cwd=cwd,
            env=env,
            cache=cache,
            redactor=redactor,
            initialization_options=initialization_options,
            max_message_bytes=max_message_bytes,
            initialize_timeout=initialize_timeout,
            server_requests=server_requests,
            client_capabilities=client_capabilities,
        )
        return _Started(cls, started, timeout, backend)

    @property
    def client(self) -> LeanClient:
        """The async client; touch it only on its loop (`call`)."""
        return self._client

    def call(self, func: Callable[[], Awaitable[T]] | Callable[[], T]) -> T:
        """Run `func()` on the client's event loop and return its result (awaited when it is awaitable).

        Example: `client.call(lambda: client.client.cache.get(uri))`.
        """
        result: T = self._runner.run(func)
        return result

    @property
    def root(self) -> Path:
        """The project root the server runs in."""
        return self._client.root

    def diagnostics(self, uri_or_path: str) -> DiagnosticsSnapshot:
        """What the diagnostics cache holds for a file (`DiagnosticsCache.get`), read on the loop."""
        return self._get(lambda: self._client.cache.get(uri_or_path))

    def file(self, path: str | Path) -> SyncLeanFile:
        """A blocking handle on the document at `path` (see `LeanClient.file`)."""
        return SyncLeanFile(self._client.file(path), self._runner._portal, self._runner._timeout, self)

    @contextlib.contextmanager
    def subscribe(self, buffer: int = EVENT_BUFFER, *, coalesce_progress: bool = False) -> Iterator[SyncEventStream]:
        """Receive diagnostics, progress and exit events while the block runs (see `LeanClient.subscribe`)."""
        portal = self._runner._portal
        with portal.wrap_async_context_manager(
            self._client.subscribe(buffer, coalesce_progress=coalesce_progress)
        ) as stream:
            yield SyncEventStream(stream, portal, self)


class _Started(contextlib.AbstractContextManager[SyncLeanClient]):
    """What `SyncLeanClient.start` returns: entering starts the loop and the client, leaving shuts them down.

    Not a generator-based context manager: one collected with its block never left (a client entered by hand, the
    context manager dropped) must not shut its client down. The client then lives until it is collected itself or
    the interpreter exits (its finalizer, which holds the loop, not the client).
    """

    def __init__(
        self,
        cls: type[SyncLeanClient],
        started: contextlib.AbstractAsyncContextManager[LeanClient],
        timeout: float | None,
        backend: str,
    ) -> None:
        self._cls, self._started, self._timeout, self._backend = cls, started, timeout, backend
        self._loop: _Loop | None = None

    def __enter__(self) -> SyncLeanClient:
        loop = _Loop(self._backend)
        client = self._cls(loop.enter(self._started), loop.portal, self._timeout)
        weakref.finalize(client, loop.close)
        self._loop = loop
        return client

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._loop is not None:
            self._loop.close(exc_type, exc, tb)  # the finalizer then finds it closed


class SyncLeanFile(SyncFileMethods):
    """A blocking handle on one document (see `LeanFile`): every method of `LeanFile`, blocking."""

    def __init__(self, file: LeanFile, portal: BlockingPortal, timeout: float | None, owner: SyncLeanClient) -> None:
        """Internal: use `SyncLeanClient.file`."""
        self._owner = owner  # keeps the client (and its server) alive while a handle on its documents is
        self._file = file
        self._runner = _Runner(portal, timeout, file.client)
        self.path: Path = file.path
        """The absolute path."""
        self.uri: str = file.uri
        """The document's `file:` URI."""

    def __repr__(self) -> str:
        return f"SyncLeanFile({str(self.path)!r})"

    def _await(self, func: Callable[[], Awaitable[T]]) -> T:
        result: T = self._runner.run(func)
        return result

    def _get(self, func: Callable[[], T]) -> T:
        result: T = self._runner.run(func)
        return result


class SyncEventStream:
    """One subscriber's events, blocking: `receive(timeout)`, iteration, `pending` (see `EventStream`)."""

    def __init__(self, stream: EventStream, portal: BlockingPortal, owner: SyncLeanClient) -> None:
        """Internal: use `SyncLeanClient.subscribe`."""
        self._owner = owner  # keeps the client alive while its events are read
        self._stream = stream
        self._runner = _Runner(portal, None)

    def receive(self, timeout: float | None = None) -> LspEvent:
        """The next event, waiting at most `timeout` seconds.

        Raises:
            TimeoutError: No event came in time.
            anyio.EndOfStream: The client is gone and every event was read.
        """
        stream = self._stream

        async def receive() -> LspEvent:
            with anyio.fail_after(timeout):
                return await stream.receive()

        result: LspEvent = self._runner.run(receive)
        return result

    @property
    def pending(self) -> int:
        """Events queued and not read yet."""
        pending: int = self._runner.run(lambda: self._stream.pending)
        return pending

    def __iter__(self) -> Iterator[LspEvent]:
        """Every event until the client is gone."""
        while True:
            try:
                yield self.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
