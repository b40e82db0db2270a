"""`LeanClient`: one Lean language server process, its documents, the diagnostics barrier and requests.

Owns the server process (spawn, handshake, shutdown, kill), the document mirror for that process, Lean's
notifications (diagnostics, file progress, logs) and the typed request API. It must not know about
workspaces-as-descriptors, tools or MCP: those live in beam-broker and beam-mcp.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from lsprotocol import converters, types

from ._framing import DEFAULT_MAX_MESSAGE_BYTES, FrameReader
from ._process import StderrBuffer, descendants, kill_tree, spawn
from ._rpc import RpcEndpoint
from .diagnostics import Availability, DiagnosticsCache, Elaboration
from .documents import TextDocument, path_to_uri
from .errors import (
    BeamLspError,
    DocumentNotOpen,
    RpcNeedsReconnect,
    ServerExited,
    TransportError,
    WorkerCrashed,
)
from .lean import (
    LeanDiagnostic,
    LeanFileProgressParams,
    PlainGoal,
    PlainTermGoal,
    Position,
    PublishDiagnosticsParams,
    Range,
    RpcConnectResult,
)
from .redaction import Redactor

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

log = logging.getLogger("beam_lsp")
_conv = converters.get_converter()
T = TypeVar("T")

INITIALIZE_TIMEOUT = 120.0
SHUTDOWN_TIMEOUT = 5.0
EVENT_BUFFER = 1024


# ---- results and events -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SyncResult:
    """The outcome of `LeanClient.sync` for exactly one document version.

    Attributes:
        uri: The document.
        version: The version the barrier was taken for.
        elaboration: `complete` (every diagnostic of `version` is in `diagnostics`), `processing` (the deadline
            passed first; `processing` holds the ranges still elaborating) or `failed` (fatal error or crashed
            worker; `diagnostics` holds what was published before).
        diagnostics: Diagnostics Lean published for `version` (never a placeholder for "unknown").
        processing: Ranges Lean was still working on (or failed on) when the result was taken.
        availability: Whether the cache holds a publish for the file at all.
        diagnostics_version: The version of the last publish seen for this URI (equals `version` normally).
    """

    uri: str
    version: int
    elaboration: Elaboration
    diagnostics: tuple[LeanDiagnostic, ...]
    processing: tuple[Range, ...] = ()
    availability: Availability = Availability.PUBLISHED
    diagnostics_version: int | None = None

    @property
    def complete(self) -> bool:
        """Whether the barrier finished for this version."""
        return self.elaboration is Elaboration.COMPLETE

    @property
    def errors(self) -> tuple[LeanDiagnostic, ...]:
        """User-visible error diagnostics."""
        return tuple(d for d in self.diagnostics if d.is_error)


@dataclasses.dataclass(frozen=True)
class DiagnosticsEvent:
    """Lean published diagnostics for a document version."""

    uri: str
    version: int | None
    diagnostics: tuple[LeanDiagnostic, ...]


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """A `$/lean/fileProgress` update."""

    params: LeanFileProgressParams


@dataclasses.dataclass(frozen=True)
class ServerExitedEvent:
    """The server process is gone; `error` says why (with the redacted stderr tail)."""

    error: ServerExited


LspEvent = DiagnosticsEvent | ProgressEvent | ServerExitedEvent


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


@dataclasses.dataclass
class _DocState:
    """What Lean told us about one open document, and a broadcast event for waiters."""

    progress_version: int | None = None
    processing: tuple[Range, ...] = ()
    done: bool = False
    fatal: bool = False
    diagnostics_version: int | None = None
    diagnostics: tuple[LeanDiagnostic, ...] = ()
    barrier_version: int | None = None
    crashed: bool = False
    changed: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)

    def poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self.changed.wait()


def _client_capabilities() -> dict[str, Any]:
    return {
        "textDocument": {
            "publishDiagnostics": {"relatedInformation": True},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
            "codeAction": {
                "codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["", "quickfix", "refactor", "source"]}},
                "resolveSupport": {"properties": ["edit"]},
                "dataSupport": True,
            },
            "definition": {"linkSupport": True},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
        },
        "window": {"workDoneProgress": True},
        "workspace": {"configuration": True},
    }


class LeanClient:
    """An async client for one Lean language server process (`lake serve` or `lean --server`).

    Create it with `LeanClient.start(...)` as an async context manager; leaving the context shuts the server
    down (`shutdown`, `exit`, then the whole process tree is killed). Positions are LSP positions (0-based,
    UTF-16 code units) and are validated against the client's own copy of the document before sending.
    """

    def __init__(
        self,
        process: Process,
        endpoint: RpcEndpoint,
        stderr: StderrBuffer,
        cache: DiagnosticsCache,
        redactor: Redactor,
    ) -> None:
        """Internal: use `LeanClient.start`."""
        self._process = process
        self._rpc = endpoint
        self._stderr = stderr
        self.cache = cache
        self._redactor = redactor
        self._docs: dict[str, TextDocument] = {}
        self._state: dict[str, _DocState] = {}
        self._rpc_sessions: dict[str, int | str] = {}
        # Lean answers pending requests of a crashed worker with errors, then sends one fatal fileProgress.
        # When we learned of the crash from an error, that later notice may arrive after the document was
        # reopened or changed (same or new version) and must not mark the new worker as crashed.
        self._crash_notices: dict[str, tuple[_DocState, int]] = {}
        self._subscribers: list[MemoryObjectSendStream[LspEvent]] = []
        self._exited: ServerExited | None = None
        self._exit_event = anyio.Event()
        self._requests = 0
        self._worker_crashes = 0
        self._events_dropped = 0
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}

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
        initialization_options: Mapping[str, Any] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        initialize_timeout: float = INITIALIZE_TIMEOUT,
    ) -> AsyncIterator[LeanClient]:
        """Spawn the server in `cwd`, run the LSP handshake, and yield a ready client.

        Args:
            cmd: The server command, e.g. `["lake", "serve"]` or `["lean", "--server"]`.
            cwd: The absolute project root (Lean uses its working directory as the root).
            env: The child's environment (default: inherit).
            cache: A diagnostics cache to fill; pass the same one across restarts (it is reset here).
            redactor: Scrubs secrets from Lean text; defaults to one built from `env` and `cmd`.
            initialization_options: Lean's `initializationOptions` (e.g. `{"editDelay": 0}`).
            max_message_bytes: Largest message body accepted from the server.
            initialize_timeout: Seconds to wait for the `initialize` answer.

        Raises:
            ServerExited: The server could not be started or died during the handshake.
            OSError: The command could not be executed.
        """
        if redactor is None:
            redactor = Redactor.from_sources(env if env is not None else os.environ, cmd)
        cache = cache if cache is not None else DiagnosticsCache(redactor)
        cache.server_restarted()
        root_uri = path_to_uri(cwd)
        process = await spawn(cmd, cwd, env)
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        stderr = StderrBuffer()
        client: LeanClient | None = None

        def on_notification(method: str, params: Any) -> None:
            if client is not None:
                client._on_notification(method, params)

        endpoint = RpcEndpoint(
            process.stdin,
            FrameReader(process.stdout, max_message_bytes=max_message_bytes),
            on_notification=on_notification,
            redactor=redactor,
        )
        client = cls(process, endpoint, stderr, cache, redactor)
        client._install_handlers()
        try:
            with _unwrap_single_group():
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stderr.pump, process.stderr)
                    tg.start_soon(client._read_loop)
                    try:
                        await client._initialize(root_uri, initialization_options, initialize_timeout)
                        yield client
                    finally:
                        with anyio.CancelScope(shield=True):
                            await client._shutdown()
                        tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await client._reap()

    async def _initialize(self, root_uri: str, options: Mapping[str, Any] | None, timeout: float) -> None:
        params: dict[str, Any] = {
            "processId": os.getpid(),
            "clientInfo": {"name": "beam-lsp"},
            "rootUri": root_uri,
            "capabilities": _client_capabilities(),
        }
        if options:
            params["initializationOptions"] = dict(options)
        try:
            with anyio.fail_after(timeout):
                result = await self._rpc.request("initialize", params)
        except TimeoutError:
            raise ServerExited(
                f"the server did not answer initialize within {timeout:g} s",
                stderr_tail=self._stderr.tail(self._redactor),
            ) from None
        if isinstance(result, dict):
            self.capabilities = result.get("capabilities") or {}
            self.server_info = result.get("serverInfo") or {}
        await self._rpc.notify("initialized", {})

    async def _shutdown(self) -> None:
        if self._exited is None and self._rpc.closed is None:
            with anyio.move_on_after(SHUTDOWN_TIMEOUT):
                with contextlib.suppress(BeamLspError, OSError, anyio.BrokenResourceError):
                    await self._rpc.request("shutdown")
                    await self._rpc.notify("exit")
                with contextlib.suppress(Exception):
                    await self._process.wait()

    async def _reap(self) -> None:
        # Only a live (unreaped) server may be signalled: once reaped, its pid and process-group id can belong
        # to an unrelated new process.
        if self._process.returncode is None:
            kill_tree(self._process.pid, descendants(self._process.pid))
        with anyio.move_on_after(SHUTDOWN_TIMEOUT), contextlib.suppress(Exception):
            await self._process.wait()
        with contextlib.suppress(Exception):
            await self._process.aclose()
        if self._exited is None:
            self._mark_exited(ServerExited("the client shut the server down", returncode=self._process.returncode))
        for s in self._subscribers:
            s.close()

    async def _read_loop(self) -> None:
        failure = await self._rpc.serve()
        reason = "the server closed its output"
        if isinstance(failure, TransportError):
            reason = f"unrecoverable protocol error from the server: {failure}"
            kill_tree(self._process.pid, descendants(self._process.pid))
        elif failure is not None:
            reason = f"the server's output stream broke: {failure!r}"
        returncode: int | None = None
        with anyio.move_on_after(2):
            returncode = await self._process.wait()
        self._mark_exited(ServerExited(reason, returncode=returncode, stderr_tail=self._stderr.tail(self._redactor)))

    def _mark_exited(self, error: ServerExited) -> None:
        if self._exited is not None:
            return
        self._exited = error
        self._rpc.close(error)
        self._exit_event.set()
        for state in self._state.values():
            state.poke()
        self._emit(ServerExitedEvent(error))

    @property
    def exited(self) -> ServerExited | None:
        """Why the server is gone, or None while it runs. A caller restarts by starting a new client."""
        return self._exited

    async def wait_exited(self) -> ServerExited:
        """Wait until the server process is gone and return why."""
        await self._exit_event.wait()
        assert self._exited is not None
        return self._exited

    @property
    def pid(self) -> int:
        """The server process id."""
        return self._process.pid

    def stderr_tail(self, max_lines: int = 40) -> str:
        """The last lines the server wrote to stderr, redacted."""
        return self._stderr.tail(self._redactor, max_lines)

    def stats(self) -> ClientStats:
        """Counters for this client."""
        return ClientStats(
            requests=self._requests,
            pending=self._rpc.pending_count,
            cancellations_sent=self._rpc.cancellations_sent,
            late_answers_dropped=self._rpc.late_answers_dropped,
            protocol_errors=self._rpc.protocol_errors,
            worker_crashes=self._worker_crashes,
            open_documents=len(self._docs),
            events_dropped=self._events_dropped,
        )

    # ---- server-to-client traffic ---------------------------------------------------------------------
    def _install_handlers(self) -> None:
        async def null(_params: Any) -> None:
            return None

        async def configuration(params: Any) -> list[None]:
            items = params.get("items") if isinstance(params, dict) else None
            return [None] * (len(items) if isinstance(items, list) else 0)

        async def apply_edit(_params: Any) -> dict[str, Any]:
            return {"applied": False, "failureReason": "beam never edits sources"}

        for method in (
            "client/registerCapability",
            "client/unregisterCapability",
            "window/workDoneProgress/create",
            "workspace/inlayHint/refresh",
            "workspace/semanticTokens/refresh",
            "workspace/codeLens/refresh",
            "workspace/diagnostic/refresh",
            "window/showMessageRequest",
        ):
            self._rpc.set_handler(method, null)
        self._rpc.set_handler("workspace/configuration", configuration)
        self._rpc.set_handler("workspace/applyEdit", apply_edit)

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "textDocument/publishDiagnostics":
            pub = PublishDiagnosticsParams.model_validate(params)
            raw = params.get("diagnostics", []) if isinstance(params, dict) else []
            self.cache.publish(pub.uri, pub.version, raw)
            state = self._state.get(pub.uri)
            if state is not None and (
                state.diagnostics_version is None or pub.version is None or pub.version >= state.diagnostics_version
            ):
                # The cache holds the redacted, bounded copy: read it back rather than keep the raw one.
                state.diagnostics_version = pub.version
                state.diagnostics = self._slot_diagnostics(pub.uri)
                state.poke()
            self._emit(DiagnosticsEvent(pub.uri, pub.version, self._slot_diagnostics(pub.uri)))
        elif method == "$/lean/fileProgress":
            prog = LeanFileProgressParams.model_validate(params)
            self.cache.progress(prog)
            state = self._state.get(prog.textDocument.uri)
            version = prog.textDocument.version
            if prog.fatal and self._stale_crash_notice(prog.textDocument.uri, state):
                state = None
            if state is not None and (
                state.progress_version is None or version is None or version >= state.progress_version
            ):
                state.progress_version = version
                state.processing = tuple(p.range for p in prog.processing)
                state.done = not prog.processing
                state.fatal = prog.fatal
                # A fatal report for a version the client already replaced (e.g. the crash notice arriving
                # after `restart_document`) must not mark the new version as crashed.
                doc = self._docs.get(prog.textDocument.uri)
                if prog.fatal and (version is None or doc is None or version >= doc.version):
                    state.crashed = True
                state.poke()
            self._emit(ProgressEvent(prog))
        elif method in ("window/logMessage", "window/showMessage"):
            if isinstance(params, dict):
                kind = "log" if method == "window/logMessage" else "show"
                self.cache.log(kind, int(params.get("type", 4)), str(params.get("message", "")))

    def _stale_crash_notice(self, uri: str, state: _DocState | None) -> bool:
        expected = self._crash_notices.pop(uri, None)
        if expected is None:
            return False
        doc = self._docs.get(uri)
        return expected[0] is not state or doc is None or expected[1] != doc.version

    def _slot_diagnostics(self, uri: str) -> tuple[LeanDiagnostic, ...]:
        snap = self.cache.get(uri)
        return snap.diagnostics

    def _emit(self, event: LspEvent) -> None:
        for s in list(self._subscribers):
            try:
                s.send_nowait(event)
            except anyio.WouldBlock:
                self._events_dropped += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.remove(s)

    @contextlib.asynccontextmanager
    async def subscribe(self, buffer: int = EVENT_BUFFER) -> AsyncIterator[MemoryObjectReceiveStream[LspEvent]]:
        """Receive diagnostics, progress and exit events while the context is open.

        Events beyond `buffer` unread ones are dropped (counted in `stats().events_dropped`).
        """
        send, receive = anyio.create_memory_object_stream[LspEvent](buffer)
        self._subscribers.append(send)
        try:
            async with receive:
                yield receive
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
            send.close()

    # ---- documents ------------------------------------------------------------------------------------
    def document(self, uri: str) -> TextDocument:
        """The client's copy of an open document.

        Raises:
            DocumentNotOpen: The document is not open.
        """
        doc = self._docs.get(uri)
        if doc is None:
            raise DocumentNotOpen(uri)
        return doc

    def is_open(self, uri: str) -> bool:
        """Whether the document is open in this client."""
        return uri in self._docs

    @property
    def open_documents(self) -> list[str]:
        """URIs of the open documents."""
        return list(self._docs)

    def _check_alive(self) -> None:
        if self._exited is not None:
            raise self._exited

    async def open(self, uri: str, text: str, *, dependency_build_mode: str | None = None) -> int:
        """Open a document at version 1 (`textDocument/didOpen`); returns the version.

        Raises:
            ServerExited: The server is gone.
            ValueError: The document is already open.
        """
        self._check_alive()
        if uri in self._docs:
            raise ValueError(f"document is already open: {uri}")
        doc = TextDocument(uri, text, 1)
        state = _DocState()
        self._docs[uri] = doc
        self._state[uri] = state
        params: dict[str, Any] = {
            "textDocument": {"uri": uri, "languageId": doc.language_id, "version": 1, "text": text}
        }
        if dependency_build_mode is not None:
            params["dependencyBuildMode"] = dependency_build_mode
        async with state.lock:
            await self._rpc.notify("textDocument/didOpen", params)
        return 1

    async def change(self, uri: str, text: str, *, save: bool = True) -> int:
        """Replace the document's text (full-text `didChange`, then `didSave`); returns the new version.

        A change always bumps the version, which also restarts a crashed Lean worker for the document.

        Raises:
            DocumentNotOpen: The document is not open.
            ServerExited: The server is gone.
        """
        self._check_alive()
        doc = self.document(uri)
        state = self._state[uri]
        async with state.lock:
            version = doc.version + 1
            doc.replace(text, version)
            state.crashed = False
            await self._rpc.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
            )
            if save:
                await self._rpc.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        return version

    async def restart_document(self, uri: str) -> int:
        """Send the unchanged text as a new version, which restarts a crashed file worker."""
        return await self.change(uri, self.document(uri).text, save=False)

    async def close(self, uri: str) -> None:
        """Close a document (`textDocument/didClose`); closing an unknown document does nothing."""
        doc = self._docs.pop(uri, None)
        state = self._state.pop(uri, None)
        self._rpc_sessions.pop(uri, None)
        if doc is None or self._exited is not None:
            return
        state = state or _DocState()
        async with state.lock:
            await self._rpc.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        state.poke()

    # ---- barrier --------------------------------------------------------------------------------------
    async def sync(self, uri: str, *, timeout: float | None = None) -> SyncResult:
        """Wait until Lean has finished the document's current version and return its diagnostics.

        The barrier is `textDocument/waitForDiagnostics` for the version plus `$/lean/fileProgress` reaching
        `processing: []` for it. A repeated sync of an unchanged version answers from memory.

        Args:
            uri: An open document.
            timeout: Seconds to wait; when it passes the result says `processing` (never a false clean).

        Raises:
            DocumentNotOpen: The document is not open.
            ServerExited: The server died.
        """
        self._check_alive()
        doc = self.document(uri)
        version = doc.version
        state = self._state[uri]
        if state.barrier_version != version:
            with anyio.move_on_after(timeout):
                try:
                    if not state.crashed:
                        await self._rpc.request("textDocument/waitForDiagnostics", {"uri": uri, "version": version})
                        self._requests += 1
                except WorkerCrashed:
                    self._worker_crashes += 1
                    state.crashed = True
                    self._crash_notices[uri] = (state, doc.version)
                await state.wait_for(
                    lambda: (
                        self._exited is not None
                        or state.crashed
                        or uri not in self._docs
                        or (state.progress_version is not None and state.progress_version >= version and state.done)
                    )
                )
                if not state.crashed and state.done and state.progress_version == version:
                    state.barrier_version = version
        self._check_alive()
        if uri not in self._docs:
            raise DocumentNotOpen(uri)
        if state.crashed or (state.progress_version == version and state.fatal):
            elaboration = Elaboration.FAILED
        elif state.barrier_version == version:
            elaboration = Elaboration.COMPLETE
        else:
            elaboration = Elaboration.PROCESSING
        snap = self.cache.get(uri)
        diags = state.diagnostics if state.diagnostics_version == version else ()
        return SyncResult(
            uri=uri,
            version=version,
            elaboration=elaboration,
            diagnostics=diags,
            processing=state.processing if elaboration is not Elaboration.COMPLETE else (),
            availability=snap.availability,
            diagnostics_version=state.diagnostics_version,
        )

    # ---- requests -------------------------------------------------------------------------------------
    async def request(self, method: str, params: Any = None) -> Any:
        """Send any request and return its raw JSON result (for methods without a typed wrapper).

        Raises:
            ResponseError: Lean answered with an error (subclass by code: `ContentModified`, ...).
            ServerExited: The server died before answering.
        """
        self._check_alive()
        self._requests += 1
        try:
            return await self._rpc.request(method, params)
        except WorkerCrashed:
            self._worker_crashes += 1
            uri = _uri_of(params)
            if uri is not None and uri in self._state:
                self._state[uri].crashed = True
                self._state[uri].poke()
                self._crash_notices[uri] = (self._state[uri], self._docs[uri].version)
            raise

    async def _at(self, method: str, uri: str, position: Position, **extra: Any) -> Any:
        doc = self.document(uri)
        doc.validate(position)
        params = {"textDocument": {"uri": uri}, "position": position.model_dump(mode="json"), **extra}
        return await self.request(method, params)

    async def hover(self, uri: str, position: Position) -> types.Hover | None:
        """`textDocument/hover`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
            ResponseError: Lean answered with an error.
        """
        return _structure(await self._at("textDocument/hover", uri, position), types.Hover)

    async def plain_goal(self, uri: str, position: Position) -> PlainGoal | None:
        """`$/lean/plainGoal`: the tactic goals at a position (None outside tactic proofs)."""
        result = await self._at("$/lean/plainGoal", uri, position)
        return None if result is None else PlainGoal.model_validate(result)

    async def plain_term_goal(self, uri: str, position: Position) -> PlainTermGoal | None:
        """`$/lean/plainTermGoal`: the expected type at a term (None when there is none)."""
        result = await self._at("$/lean/plainTermGoal", uri, position)
        return None if result is None else PlainTermGoal.model_validate(result)

    async def signature_help(self, uri: str, position: Position) -> types.SignatureHelp | None:
        """`textDocument/signatureHelp`."""
        return _structure(await self._at("textDocument/signatureHelp", uri, position), types.SignatureHelp)

    async def definition(self, uri: str, position: Position) -> list[types.Location | types.LocationLink]:
        """`textDocument/definition`; Lean answers `Location[]` (ilean index) or `LocationLink[]` (worker)."""
        return _locations(await self._at("textDocument/definition", uri, position))

    async def declaration(self, uri: str, position: Position) -> list[types.Location | types.LocationLink]:
        """`textDocument/declaration` (same shapes as `definition`)."""
        return _locations(await self._at("textDocument/declaration", uri, position))

    async def references(
        self, uri: str, position: Position, *, include_declaration: bool = True
    ) -> list[types.Location]:
        """`textDocument/references` across the project (ilean data plus open files)."""
        result = await self._at(
            "textDocument/references", uri, position, context={"includeDeclaration": include_declaration}
        )
        return [_conv.structure(r, types.Location) for r in result or []]

    async def document_symbols(self, uri: str) -> list[types.DocumentSymbol | types.SymbolInformation]:
        """`textDocument/documentSymbol` (Lean waits for the whole file)."""
        self.document(uri)
        result = await self.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        out: list[types.DocumentSymbol | types.SymbolInformation] = []
        for item in result or []:
            if "location" in item:
                out.append(_conv.structure(item, types.SymbolInformation))
            else:
                out.append(_conv.structure(item, types.DocumentSymbol))
        return out

    async def workspace_symbols(self, query: str) -> list[types.SymbolInformation]:
        """`workspace/symbol` (fuzzy, at most 100 results from Lean; empty query gives none)."""
        result = await self.request("workspace/symbol", {"query": query})
        return [_conv.structure(r, types.SymbolInformation) for r in result or []]

    async def code_actions(
        self, uri: str, range_: Range, *, diagnostics: Sequence[LeanDiagnostic] = ()
    ) -> list[dict[str, Any]]:
        """`textDocument/codeAction`; actions are returned as raw JSON so their `data` round-trips exactly."""
        self.document(uri).validate_range(range_)
        result = await self.request(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": range_.model_dump(mode="json"),
                "context": {"diagnostics": [d.wire() for d in diagnostics]},
            },
        )
        return list(result or [])

    async def resolve_code_action(self, action: Mapping[str, Any]) -> dict[str, Any]:
        """`codeAction/resolve` for an action returned by `code_actions` (sent back verbatim)."""
        result = await self.request("codeAction/resolve", dict(action))
        return dict(result or {})

    # ---- Lean RPC -------------------------------------------------------------------------------------
    async def rpc_connect(self, uri: str) -> int | str:
        """`$/lean/rpc/connect`: open an RPC session for a document; returns the session id."""
        self.document(uri)
        result = await self.request("$/lean/rpc/connect", {"uri": uri})
        return RpcConnectResult.model_validate(result).sessionId

    async def rpc_call(self, uri: str, session_id: int | str, position: Position, method: str, params: Any) -> Any:
        """`$/lean/rpc/call`: call a Lean `@[server_rpc_method]` (e.g. `Lean.Widget.getInteractiveGoals`).

        Raises:
            RpcNeedsReconnect: The session expired; connect again.
        """
        self.document(uri).validate(position)
        return await self.request(
            "$/lean/rpc/call",
            {
                "textDocument": {"uri": uri},
                "position": position.model_dump(mode="json"),
                "sessionId": session_id,
                "method": method,
                "params": params,
            },
        )

    async def rpc_release(self, uri: str, session_id: int | str, refs: Sequence[Any]) -> None:
        """`$/lean/rpc/release`: free RPC references."""
        await self._rpc.notify("$/lean/rpc/release", {"uri": uri, "sessionId": session_id, "refs": list(refs)})

    async def rpc_keep_alive(self, uri: str, session_id: int | str) -> None:
        """`$/lean/rpc/keepAlive`: keep a session alive (Lean drops sessions idle for ~30 s)."""
        await self._rpc.notify("$/lean/rpc/keepAlive", {"uri": uri, "sessionId": session_id})

    async def interactive_goals(self, uri: str, position: Position) -> Any:
        """Structured goals at a position via `Lean.Widget.getInteractiveGoals` (raw JSON, None if none).

        The RPC session is opened once per document and reused; an expired session is reconnected once.
        """
        pos = position.model_dump(mode="json")
        params = {"textDocument": {"uri": uri}, "position": pos}
        for attempt in (0, 1):
            session = self._rpc_sessions.get(uri)
            if session is None:
                session = await self.rpc_connect(uri)
                self._rpc_sessions[uri] = session
            try:
                return await self.rpc_call(uri, session, position, "Lean.Widget.getInteractiveGoals", params)
            except RpcNeedsReconnect:
                self._rpc_sessions.pop(uri, None)
                if attempt:
                    raise
        return None  # unreachable: the loop returns or raises


@contextlib.contextmanager
def _unwrap_single_group() -> Iterator[None]:
    """Re-raise a lone exception out of a task group's exception group.

    The client's task group is an implementation detail: a caller's own exception raised inside
    `async with LeanClient.start(...)` (or a handshake failure) must reach it unwrapped.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from group.exceptions[0].__cause__
        raise


def _uri_of(params: Any) -> str | None:
    if isinstance(params, dict):
        td = params.get("textDocument")
        if isinstance(td, dict) and isinstance(td.get("uri"), str):
            return str(td["uri"])
    return None


def _structure(value: Any, kind: type[T]) -> T | None:
    return None if value is None else _conv.structure(value, kind)


def _locations(result: Any) -> list[types.Location | types.LocationLink]:
    out: list[types.Location | types.LocationLink] = []
    for item in result or []:
        if "targetUri" in item:
            out.append(_conv.structure(item, types.LocationLink))
        else:
            out.append(_conv.structure(item, types.Location))
    return out
