"""`LeanClient`: the facade for one Lean language server process, its documents and its typed requests.

Owns the server's lifecycle (spawn, handshake, shutdown, kill), the document mirror for that process, the
dispatch of Lean's notifications (to the diagnostics cache, the sync barrier and event subscribers) and the typed
request API. The JSON-RPC peer (`jsonrpc.py`), the barrier and crash notices (`_barrier.py`), the diagnostics
cache (`diagnostics.py`) and the process helpers (`_process.py`) do the work. Every public method raises
`ServerExited` once the server is gone, never an anyio or OS stream error. Events follow the cache: what it
ignores (Lean's reports about a closed document, or about the closed lifetime of a reopened one) reaches no
subscriber either. It must not know about
workspaces-as-descriptors, tools or MCP: those live in beam-broker and beam-mcp.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process, TaskGroup

from . import _convert
from ._barrier import Barrier, SyncResult
from ._doc_sync import DocumentSync, _Deferred, _uri_of
from ._events import Broadcast, DiagnosticsEvent, EventStream, LspEvent, ProgressEvent, ServerExitedEvent
from ._file import LeanFile
from ._framing import DEFAULT_MAX_MESSAGE_BYTES, FrameReader
from ._handshake import ServerRequestHandler, default_handlers, initialize_params
from ._lean_requests import LeanExtensionRequests
from ._model import JsonValue
from ._process import ServerProcess, spawn_server
from ._progress import FileProgress, compact_report
from ._requests import LspRequests
from .diagnostics import DiagnosticsCache
from .documents import TextDocument, apply_text_edits, path_to_uri
from .errors import BeamLspError, DocumentError, DocumentNotOpen, ServerExited, WorkerCrashed, unwrap_group
from .jsonrpc import JsonRpcPeer
from .lean import (
    publish_params,
)
from .redaction import Redactor

if TYPE_CHECKING:
    from lsprotocol import types

__all__ = [
    "ClientStats",
    "DiagnosticsEvent",
    "EventStream",
    "LeanClient",
    "LspEvent",
    "ProgressEvent",
    "ServerExitedEvent",
    "ServerRequestHandler",
    "SyncResult",
]

log: logging.Logger = logging.getLogger("beam_lsp")


INITIALIZE_TIMEOUT: Final = 120.0
SHUTDOWN_TIMEOUT: Final = 5.0
EVENT_BUFFER: Final = 1024


# ---- counters ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ClientStats:
    """Counters for one client (one server process)."""

    requests: int
    pending: int
    cancellations_sent: int
    late_answers_dropped: int
    protocol_errors: int
    worker_crashes: int
    open_documents: int
    events_dropped: int


class LeanClient(DocumentSync, LspRequests, LeanExtensionRequests):
    """An async client for one Lean language server process (`lake serve` or `lean --server`).

    Use `LeanClient.start(...)` as an async context manager; leaving it shuts the server down (`shutdown`, `exit`, then
    the process tree is killed; at once when cancelled). Positions are LSP positions (0-based, UTF-16), checked against
    the client's copy of the document; `client.file(path)` gives a handle that takes project-relative paths and
    code-point columns instead. Once the server is gone every call but `close` raises `ServerExited`.
    """

    def __init__(
        self,
        process: Process,
        stdin: ByteSendStream,
        stdout: ByteReceiveStream,
        cache: DiagnosticsCache,
        redactor: Redactor,
        max_message_bytes: int,
        root: Path,
        handlers: Mapping[str, ServerRequestHandler],
    ) -> None:
        """Internal: use `LeanClient.start`."""
        self.cache = cache
        self.root = root
        """The project root the server runs in (absolute)."""
        self._server = ServerProcess(process, redactor, self._server_exited, (stdin, stdout))
        reader = FrameReader(stdout, max_message_bytes=max_message_bytes, redactor=redactor)
        notify, lost = self._on_notification, self._server.input_broke
        self._rpc = JsonRpcPeer(
            stdin, reader, on_notification=notify, redactor=redactor, on_lost=lost, on_body=self._on_body
        )
        for method, handler in handlers.items():
            self._rpc.set_handler(method, handler)
        self._barrier = Barrier(cache)
        self._events = Broadcast()
        self._docs: dict[str, TextDocument] = {}
        self._deferred: dict[str, _Deferred] = {}
        self._tg: TaskGroup | None = None
        self._rpc_sessions: dict[str, int | str] = {}
        self._rpc_connecting: dict[str, anyio.Lock] = {}
        self._requests = 0
        self._initialized: dict[str, Any] = {}
        """The server's `initialize` answer, read into lsprotocol's types when first asked (`capabilities`)."""
        self._capabilities: types.ServerCapabilities | None = None

    # ---- lifecycle ------------------------------------------------------------------------------------
    @classmethod
    @contextlib.asynccontextmanager
    async def start(
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
    ) -> AsyncIterator[LeanClient]:
        """Spawn the server in `cwd`, run the LSP handshake, and yield a ready client.

        Args:
            cmd: The server command, e.g. `["lake", "serve"]` or `["lean", "--server"]`.
            cwd: The absolute project root (Lean uses its working directory as the root).
            env: The child's environment (default: inherit).
            cache: A diagnostics cache to fill; pass the same one across restarts (it is reset here).
            redactor: Scrubs secrets from Lean text, errors and logs; defaults to one built from `env` and `cmd`.
            initialization_options: Lean's `initializationOptions` (e.g. `{"editDelay": 0}`).
            max_message_bytes: Largest message body accepted from the server.
            initialize_timeout: Seconds to wait for the `initialize` answer.
            server_requests: Handlers for requests the server sends the client, by method, replacing the defaults
                (see `DEFAULT_SERVER_REQUESTS`): each takes the params and returns the result, or raises
                `ResponseError` to answer with an error. Without a handler for `workspace/applyEdit` the client
                refuses edits.
            client_capabilities: LSP client capabilities to announce besides beam-lsp's own, merged into them
                (e.g. `{"workspace": {"applyEdit": True}}` with an `applyEdit` handler, so Lean sends edits as
                requests instead of inside code actions).

        Raises:
            ServerExited: The server could not be started or died during the handshake.
            OSError: The command could not be executed (nothing was started); its message is redacted.
        """
        if redactor is None:
            redactor = Redactor.from_sources(env if env is not None else os.environ, cmd)
        cache = cache if cache is not None else DiagnosticsCache(redactor)
        cache.server_restarted()
        root_uri = path_to_uri(cwd)
        handlers = {**default_handlers(), **(server_requests or {})}
        process, stdin, stdout = await spawn_server(cmd, cwd, env, redactor)
        assert process.stderr is not None
        client = cls(process, stdin, stdout, cache, redactor, max_message_bytes, Path(cwd), handlers)
        try:
            with unwrap_group():
                async with anyio.create_task_group() as tg:
                    client._tg = tg
                    tg.start_soon(client._server.stderr.pump, process.stderr)
                    tg.start_soon(client._server.watch, client._rpc.serve)
                    try:
                        params = initialize_params(root_uri, initialization_options, client_capabilities)
                        await client._initialize(params, initialize_timeout)
                        yield client
                    finally:
                        graceful = anyio.current_effective_deadline() != -math.inf  # cancelled: no reader left
                        with anyio.CancelScope(shield=True):
                            await client._shutdown(graceful=graceful)
                        tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await client._server.reap(SHUTDOWN_TIMEOUT)
                client._events.close()

    async def _initialize(self, params: dict[str, Any], timeout: float) -> None:
        try:
            with anyio.fail_after(timeout):
                result = await self._rpc.request("initialize", params)
        except TimeoutError:
            reason = f"the server did not answer initialize within {timeout:g} s"
            # Declared gone, so leaving the context skips the shutdown handshake and kills it at once.
            raise self._server.mark_exited(self._server.error(reason)) from None
        if isinstance(result, dict):
            self._read_initialize_result(result)
        await self._rpc.notify("initialized", {})

    def _read_initialize_result(self, result: dict[str, Any]) -> None:
        # Kept as JSON: reading it into lsprotocol's types loads lsprotocol (about 1 s), which a session that only
        # syncs and asks Lean's own requests never needs; `capabilities` reads it when first asked.
        self._initialized = result

    @property
    def capabilities(self) -> types.ServerCapabilities:
        """What the server announced in the handshake (lsprotocol's `ServerCapabilities`; empty before it).

        Read into lsprotocol's type when first asked (the first read loads lsprotocol). Capabilities that do not
        parse are logged and none are assumed: a server's odd capability must not stop the session.
        """
        if self._capabilities is not None:
            return self._capabilities
        from lsprotocol import types

        raw = self._initialized.get("capabilities") or {}
        try:
            found: types.ServerCapabilities = _convert.converter().structure(raw, types.ServerCapabilities)
        except Exception as exc:  # cattrs' errors
            log.warning("the server's capabilities do not parse, none are assumed: %s", type(exc).__name__)
            found = types.ServerCapabilities()
        if self._initialized:  # asked before the handshake: read the answer when it comes
            self._capabilities = found
        return found

    @property
    def server_info(self) -> types.ServerInfo | None:
        """The server's name and version from the handshake (`ServerInfo(name="Lean 4 Server", version="0.3.0")`)."""
        from lsprotocol import types

        info = self._initialized.get("serverInfo")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            version = info.get("version")
            return types.ServerInfo(name=info["name"], version=version if isinstance(version, str) else None)
        return None

    async def _shutdown(self, *, graceful: bool) -> None:
        self._barrier.stop()  # first: Lean's `shutdown` publishes [] for every open file, which is no clean bill
        if graceful and self.exited is None:
            with anyio.move_on_after(SHUTDOWN_TIMEOUT), contextlib.suppress(BeamLspError):
                await self._rpc.request("shutdown")
                await self._rpc.notify("exit")
                await self._server.process.wait()

    def _server_exited(self, error: ServerExited) -> None:
        self._rpc.close(error)
        self._barrier.stop()
        self._events.close(ServerExitedEvent(error))  # nothing comes after it: subscribers' loops end

    @property
    def exited(self) -> ServerExited | None:
        """Why the server is gone, or None while it runs. A caller restarts by starting a new client."""
        return self._server.exited

    async def wait_exited(self) -> ServerExited:
        """Wait until the server process is gone and return why."""
        return await self._server.wait_exited()

    @property
    def pid(self) -> int:
        """The server process id."""
        return self._server.process.pid

    def stderr_tail(self, max_lines: int = 40) -> str:
        """The last lines the server wrote to stderr, redacted."""
        return self._server.stderr_tail(max_lines)

    def stats(self) -> ClientStats:
        """Counters for this client."""
        return ClientStats(
            requests=self._requests,
            pending=self._rpc.pending_count,
            cancellations_sent=self._rpc.cancellations_sent,
            late_answers_dropped=self._rpc.late_answers_dropped,
            protocol_errors=self._rpc.protocol_errors,
            worker_crashes=self._barrier.worker_crashes,
            open_documents=len(self._docs),
            events_dropped=self._events.dropped,
        )

    # ---- server-to-client traffic ---------------------------------------------------------------------
    def _on_body(self, body: bytes) -> bool:
        report = compact_report(body)  # Lean's long "still elaborating" reports: not decoded unless read
        if report is None:
            return False
        self._progress(report)
        return True

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "textDocument/publishDiagnostics":
            uri, version, diagnostics, incremental = publish_params(params)
            stored = self.cache.publish(uri, version, diagnostics, incremental=incremental)
            if stored and (diagnostics or not incremental):  # an empty incremental publish changes nothing
                self._barrier.published(uri)
                # The cache holds the redacted, bounded copy: hand that out, never the raw one.
                kept, added = self.cache.published(uri)
                self._events.send(DiagnosticsEvent(uri, version, kept, added))
        elif method == "$/lean/fileProgress":
            self._progress(FileProgress.from_params(params))
        elif method in ("window/logMessage", "window/showMessage") and isinstance(params, dict):
            kind = "log" if method == "window/logMessage" else "show"
            self.cache.log(kind, int(params.get("type", 4)), str(params.get("message", "")))

    def _progress(self, report: FileProgress) -> None:
        doc = self._docs.get(report.uri)
        if self._barrier.progress(report, doc.version if doc is not None else None):
            self._events.send(ProgressEvent(report))

    def subscribe(
        self, buffer: int = EVENT_BUFFER, *, coalesce_progress: bool = False
    ) -> contextlib.AbstractAsyncContextManager[EventStream]:
        """Receive diagnostics, progress and exit events while the context is open (`async with`).

        Events beyond `buffer` unread ones are dropped (counted in `stats().events_dropped`). With
        `coalesce_progress`, an unread progress event of a document is replaced by a newer one for it instead of
        queueing both (for consumers that only need Lean's latest report).
        """
        return self._events.subscribe(buffer, coalesce_progress=coalesce_progress)

    # ---- documents ------------------------------------------------------------------------------------
    def file(self, path: str | Path) -> LeanFile:
        """A handle on the document at `path` (relative to the project root, or absolute).

        Its methods take code-point positions (`Point0`, `Point1`) and need no URI. Nothing is opened or read here.
        Example: `goals = await client.file("Demo/Goals.lean").plain_goal(Point1(5, 3))`.
        """
        return LeanFile(self, self.root / path)

    def _check_alive(self) -> None:
        if self._server.exited is not None:
            raise self._server.exited

    # ---- barrier --------------------------------------------------------------------------------------
    async def sync(self, uri: str, *, timeout: float | None = None, reported: bool = False) -> SyncResult:
        """Wait until Lean has finished the document's current version and return its diagnostics.

        The barrier is `textDocument/waitForDiagnostics` for the version plus `$/lean/fileProgress` reaching
        `processing: []` for it. A repeated sync of an unchanged version answers from memory.

        With `reported`, no `waitForDiagnostics` is sent: the version is complete once its final progress
        arrived and a publish of that version is stored. Lean's reporter publishes when it first waits for a
        snapshot, before the final progress (and then every new diagnostic as it finds it), or, when it never
        waited, once right after the final progress; either way every diagnostic of the version is then known.
        Lean 4.35 answers `waitForDiagnostics` only after walking every command snapshot of the file (about
        0.25 ms per command: 0.37 s for 1500 declarations when only the last one changed), so this is for
        callers that change the tail of a long document again and again (Beam's probe mirrors). Use it only
        for a change that keeps the document's header (imports): processing a header publishes Lake's setup
        lines before the reporter starts, which the rule would take for the reporter's publish.

        Args:
            uri: An open document.
            timeout: Seconds to wait; when it passes the result says `processing` (never a false clean).
            reported: Take the reported barrier (above) instead of `waitForDiagnostics`.

        Raises:
            DocumentNotOpen: The document is not open (or was closed meanwhile).
            ServerExited: The server died.
        """
        self._check_alive()
        await self._send_deferred(uri)
        version = self.document(uri).version
        request = None if reported else self._wait_for_diagnostics
        result = await self._barrier.sync(uri, version, timeout=timeout, request=request)
        self._check_alive()
        return result

    async def _wait_for_diagnostics(self, uri: str, version: int) -> None:
        await self._rpc.request("textDocument/waitForDiagnostics", {"uri": uri, "version": version})
        self._requests += 1

    # ---- requests -------------------------------------------------------------------------------------
    async def request(self, method: str, params: JsonValue = None) -> JsonValue:
        """Send any request and return its raw JSON result (for methods without a typed wrapper).

        Changes deferred for the document the params name (`textDocument.uri` or `uri`) are sent first, all of them
        when the params name none.

        Raises:
            ResponseError: Lean answered with an error (subclass by code: `ContentModified`, ...).
            ServerExited: The server died before answering.
        """
        result: JsonValue = await self._request(method, params)
        return result

    async def _request(self, method: str, params: Any = None) -> Any:
        self._check_alive()
        if self._deferred:
            await self._before(params)
        self._requests += 1
        try:
            return await self._rpc.request(method, params)
        except WorkerCrashed:
            doc = self._docs.get(_uri_of(params) or "")
            self._barrier.worker_crashed(doc.uri if doc else None, doc.version if doc else None)
            raise

    async def _notify(self, method: str, params: Any) -> None:
        await self._before(params)
        await self._rpc.notify(method, params)

    async def apply_edit(self, edit: types.WorkspaceEdit, *, save: bool = True) -> dict[str, int]:
        """Apply a workspace edit (from `rename` or a resolved code action) to the open documents it names.

        Each document changes once (`change`), with every edit to it applied to the client's text; files are not
        written. All of them change together: a change made to one of them while the edit waits for another is
        kept (the edit applies on top of it, or is refused when it names the version it was computed for). Returns
        the new version of each changed document.

        Raises:
            DocumentNotOpen: The edit names a document that is not open (nothing is changed then).
            DocumentError: The edit was computed for another version of a document than the client's (Lean's
                code actions state theirs; nothing is changed then).
            InvalidPosition: An edit's range is outside its document's text (nothing is changed then).
            ValueError: The edit creates, renames or deletes files (not supported).
        """
        self._check_alive()
        versions, edits = _convert.edit_versions(edit), _convert.text_edits(edit)
        docs = {uri: self.document(uri) for uri in sorted(versions.keys() | edits.keys())}
        async with contextlib.AsyncExitStack() as locks:
            # Every document's lock, in one order for every caller (two edits never wait for each other), and only
            # then its text read: a change made to a document while the edit waited is not lost, and nothing changes
            # them between the checks below and the new texts.
            for uri, doc in docs.items():
                if self._docs.get(uri) is not doc:  # closed (or reopened) while we waited for another's lock
                    raise DocumentNotOpen(uri)
                await locks.enter_async_context(self._barrier.lock(uri))
            for uri, doc in docs.items():
                if self._docs.get(uri) is not doc:
                    raise DocumentNotOpen(uri)
                version = versions.get(uri, doc.version)
                if doc.version != version:  # its ranges point into a text that is gone
                    raise DocumentError(f"the edit is for version {version} of {uri}, not {doc.version}")
            texts = {uri: apply_text_edits(docs[uri], changes) for uri, changes in edits.items()}
            with anyio.CancelScope(shield=True):  # every document or none: the copies change as they are sent
                changed = {
                    uri: await self._change_locked(docs[uri], text, save=save, defer=0) for uri, text in texts.items()
                }
        return changed
