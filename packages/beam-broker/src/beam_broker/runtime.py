"""The broker: workspace runtimes keyed by canonical root, and the dispatch of registry operations.

Owns: lazy single-flight runtime creation, drop, the Lean session of each workspace (start, restart with an
epoch bump), the document state Beam keeps beside beam-lsp's mirror, stale-dependency bookkeeping, metrics,
and every operation's orchestration. It never writes `.lean` sources and never speaks MCP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import logging
import os
import shlex
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus
from lsprotocol import converters
from pydantic import BaseModel, ValidationError

from beam_lsp import (
    BeamLspError,
    DiagnosticsCache,
    DiagnosticsEvent,
    DocumentNotOpen,
    Elaboration,
    InvalidPosition,
    LeanClient,
    LspEvent,
    Position,
    ProgressEvent,
    Range,
    Redactor,
    ResponseError,
    ServerExited,
    SyncResult,
    TextDocument,
    WorkerCrashed,
    path_to_uri,
)

from . import _analysis, _save
from . import _speculation as spec
from . import _verdict as verdict
from . import models as m
from ._util import single_errors
from .errors import (
    CONTENT_MODIFIED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    REQUEST_CANCELLED,
    RUNTIME_SETUP,
    SYNC_BARRIER_INCOMPLETE,
    WORKER_EXITED,
    BrokerError,
    from_response_error,
    invalid_input,
    invalid_params,
)
from .events import CallContext, DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent
from .operations import BY_NAME, OperationSpec, implemented
from .workspace import WorkspaceDescriptor, cache_key, display_path, module_name, resolve, resolve_path

log = logging.getLogger("beam_broker")
_conv = converters.get_converter()
T = TypeVar("T")

REPORT_DELAY_ARG = "-Dserver.reportDelayMs=0"
SERVER_CMD_ENV = "BEAM_LEAN_SERVER_CMD"


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    """Process-wide broker settings.

    Attributes:
        lean_cmd: Server command for every workspace (overrides `BEAM_LEAN_SERVER_CMD` and `lake serve`).
        env: Environment for Lean processes (default: this process's).
        mirrors_per_document: Probe mirrors per source document (each is a Lean worker process).
        mirror_idle_seconds: Close a probe mirror unused for this long.
    """

    lean_cmd: Sequence[str] | None = None
    env: Mapping[str, str] | None = None
    mirrors_per_document: int = spec.DEFAULT_MIRRORS_PER_DOCUMENT
    mirror_idle_seconds: float = spec.DEFAULT_MIRROR_IDLE_SECONDS


def server_command(config: BrokerConfig, env: Mapping[str, str]) -> list[str]:
    """The Lean server command: `--lean-cmd`, then `$BEAM_LEAN_SERVER_CMD`, then `lake serve` on PATH.

    Raises:
        BrokerError: `runtimeSetup` when no command can be found.
    """
    if config.lean_cmd:
        return list(config.lean_cmd)
    from_env = env.get(SERVER_CMD_ENV)
    if from_env:
        return shlex.split(from_env)
    lake = shutil.which("lake", path=env.get("PATH"))
    if lake is None:
        raise BrokerError(
            RUNTIME_SETUP,
            "no Lean server command: install Lean with elan so `lake` is on PATH, set "
            f"{SERVER_CMD_ENV}, or pass --lean-cmd",
        )
    return [lake, "serve", "--", REPORT_DELAY_ARG]


# ---- metrics ------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _OpMetrics:
    count: int = 0
    successCount: int = 0
    errorCount: int = 0
    cancelledCount: int = 0
    workerExitedCount: int = 0
    invalidParamsCount: int = 0
    totalLatencyMs: float = 0.0
    maxLatencyMs: float = 0.0
    lastLatencyMs: float = 0.0

    def wire(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "totalLatencyMs"}
        out["avgLatencyMs"] = round(self.totalLatencyMs / self.count, 3) if self.count else 0.0
        return out


@dataclasses.dataclass
class _Metrics:
    sessionStarts: int = 0
    sessionRestarts: int = 0
    workerExits: int = 0
    ops: dict[str, _OpMetrics] = dataclasses.field(default_factory=dict)

    def record(self, key: str, outcome: str, latency_ms: float) -> None:
        op = self.ops.setdefault(key, _OpMetrics())
        op.count += 1
        op.totalLatencyMs += latency_ms
        op.lastLatencyMs = round(latency_ms, 3)
        op.maxLatencyMs = round(max(op.maxLatencyMs, latency_ms), 3)
        if outcome == "success":
            op.successCount += 1
        else:
            op.errorCount += 1
            if outcome == REQUEST_CANCELLED:
                op.cancelledCount += 1
            elif outcome == WORKER_EXITED:
                op.workerExitedCount += 1
            elif outcome == INVALID_PARAMS:
                op.invalidParamsCount += 1

    def wire(self) -> dict[str, Any]:
        totals = {
            "requestCount": sum(o.count for o in self.ops.values()),
            "successCount": sum(o.successCount for o in self.ops.values()),
            "errorCount": sum(o.errorCount for o in self.ops.values()),
            "cancelledCount": sum(o.cancelledCount for o in self.ops.values()),
            "workerExitedCount": sum(o.workerExitedCount for o in self.ops.values()),
            "invalidParamsCount": sum(o.invalidParamsCount for o in self.ops.values()),
        }
        return {
            "sessionStarts": self.sessionStarts,
            "sessionRestarts": self.sessionRestarts,
            "workerExits": self.workerExits,
            **totals,
            "ops": {k: v.wire() for k, v in sorted(self.ops.items())},
        }


# ---- documents and module history ---------------------------------------------------------------------
@dataclasses.dataclass
class DocState:
    """What Beam tracks for one open document, beside beam-lsp's mirror (per Lean session)."""

    path: Path
    uri: str
    module: str | None
    text_hash: str
    version: int
    progress: verdict.ProgressTracker = dataclasses.field(default_factory=verdict.ProgressTracker)
    last_sync_event_seq: int = 0
    checkpointed_version: int | None = None
    synced_version: int | None = None
    imports: tuple[str, ...] = ()
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)


@dataclasses.dataclass
class ModuleHistory:
    """Per-module event sequence numbers used to find stale direct dependencies (spec §3.7)."""

    path: str
    last_sync_event_seq: int = 0
    last_save_event_seq: int = 0
    last_text_change_event_seq: int = 0
    last_text_hash: str | None = None


def text_hash(text: str) -> str:
    """16 hex digits identifying a text (CRLF normalized)."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()[:16]


def header_imports(text: str) -> tuple[str, ...]:
    """Module names a Lean file's header imports (deduplicated, in order)."""
    out: list[str] = []
    in_comment = 0
    for raw in text.splitlines():
        line = raw.strip()
        if in_comment:
            if "-/" in line:
                in_comment -= 1
            continue
        if not line or line.startswith("--"):
            continue
        if line.startswith("/-"):
            if "-/" not in line:
                in_comment += 1
            continue
        words = line.split()
        if words[0] in ("prelude", "module"):
            continue
        if words[0] == "public" and words[1:2] == ["import"]:
            words = words[1:]
        if words[0] != "import":
            break
        for name in words[1:]:
            if name not in ("all",) and name not in out:
                out.append(name)
    return tuple(out)


# ---- sessions -----------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Session:
    client: LeanClient
    epoch: int
    token: str
    stop: anyio.Event
    done: anyio.Event


class WorkspaceRuntime:
    """One workspace: its Lean session (restarted on demand), documents, module history and metrics."""

    def __init__(self, broker: Broker, root: str) -> None:
        """Internal: created by `Broker`."""
        self.broker = broker
        self.root = root
        self.key = cache_key(root)
        self.created = time.monotonic()
        self.metrics = _Metrics()
        self.cache = DiagnosticsCache(broker.redactor)
        self.cache.add_listener(broker._diagnostics_changed)
        self._session: _Session | None = None
        self._session_lock = anyio.Lock()
        self._next_epoch = 1
        self.docs: dict[str, DocState] = {}
        self.modules: dict[str, ModuleHistory] = {}
        self.handles = spec.HandleStore()
        self.pools: dict[str, spec.MirrorPool] = {}
        self._reaper: anyio.CancelScope | None = None
        self._event_seq = 0
        self.closed = False

    @property
    def descriptor(self) -> dict[str, str]:
        """The canonical descriptor this runtime echoes."""
        return {"root": self.root}

    @property
    def epoch(self) -> int | None:
        """The live session's epoch (bumped by every restart), or None without a session."""
        return self._session.epoch if self._session else None

    def next_event_seq(self) -> int:
        """A fresh, monotonically increasing event sequence number."""
        self._event_seq += 1
        return self._event_seq

    # -- session lifecycle
    async def client(self) -> LeanClient:
        """The live Lean client, starting or restarting the server as needed.

        Raises:
            BrokerError: `runtimeSetup` when the server cannot be started.
        """
        session = self._session
        if session is not None and session.client.exited is None:
            return session.client
        async with self._session_lock:
            session = self._session
            if session is not None and session.client.exited is None:
                return session.client
            if self.closed:
                raise BrokerError(CONTENT_MODIFIED, f"workspace runtime {self.root} was dropped")
            if session is not None:
                await self._stop_session(session)
                self.metrics.sessionRestarts += 1
            return await self._start_session()

    async def _start_session(self) -> LeanClient:
        env = dict(self.broker.env)
        cmd = server_command(self.broker.config, env)
        epoch = self._next_epoch
        self._next_epoch += 1
        try:
            session: _Session = await self.broker.task_group.start(self._run_session, cmd, env, epoch)
        except (OSError, BeamLspError) as exc:
            raise BrokerError(RUNTIME_SETUP, f"could not start the Lean server {cmd!r} in {self.root}: {exc}") from exc
        self._session = session
        self.docs.clear()
        self.modules.clear()
        self.handles.clear()
        self.pools.clear()
        self.metrics.sessionStarts += 1
        return session.client

    async def _run_session(
        self, cmd: list[str], env: dict[str, str], epoch: int, *, task_status: TaskStatus[_Session]
    ) -> None:
        stop, done = anyio.Event(), anyio.Event()
        try:
            async with LeanClient.start(cmd, cwd=self.root, env=env, cache=self.cache) as client:
                token = f"{client.pid}-{time.monotonic_ns()}"
                task_status.started(_Session(client, epoch, token, stop, done))
                await stop.wait()
        finally:
            done.set()

    async def _stop_session(self, session: _Session) -> None:
        session.stop.set()
        with anyio.CancelScope(shield=True):
            await session.done.wait()

    async def shutdown(self) -> None:
        """Stop the Lean server and forget all state (drop)."""
        self.closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        async with self._session_lock:
            if self._session is not None:
                await self._stop_session(self._session)
                self._session = None
            self.docs.clear()
            self.modules.clear()
            self.handles.clear()
            self.pools.clear()

    def session_token(self) -> str | None:
        """Identity of the live session (pid and start time), for handles."""
        return self._session.token if self._session else None

    def worker_died(self) -> None:
        """Count a Lean process or file worker exit."""
        self.metrics.workerExits += 1

    # -- documents
    async def read_source(self, path: Path) -> str:
        """Read a Lean source from disk (UTF-8).

        Raises:
            BrokerError: `invalidParams` when the file cannot be read.
        """
        try:
            data = await anyio.Path(path).read_bytes()
        except FileNotFoundError:
            raise invalid_params(f"file not found: {path}") from None
        except IsADirectoryError:
            raise invalid_params(f"not a file: {path}") from None
        except OSError as exc:
            raise BrokerError(INTERNAL_ERROR, f"cannot read {path}: {exc.strerror}") from exc
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid_params(f"file is not UTF-8 text: {path}") from None

    async def update(self, rel: str) -> tuple[LeanClient, DocState, bool]:
        """Read the file from disk into the mirror: didOpen, or didChange+didSave when its text changed."""
        path = resolve_path(self.root, rel)
        text = await self.read_source(path)
        client = await self.client()
        key = str(path)
        h = text_hash(text)
        doc = self.docs.get(key)
        if doc is None:
            doc = DocState(path, path_to_uri(path), module_name(self.root, path), h, 0)
            self.docs[key] = doc
        async with doc.lock:
            if self.docs.get(key) is not doc:  # closed while we waited: start over
                return await self.update(rel)
            if not client.is_open(doc.uri):
                doc.version = await client.open(doc.uri, text)
                doc.text_hash = h
                doc.imports = header_imports(text)
                return client, doc, True
            if doc.text_hash == h:
                return client, doc, False
            doc.version = await client.change(doc.uri, text)
            self.handles.invalidate_document(doc.uri, keep_version=doc.version)
            doc.text_hash = h
            doc.imports = header_imports(text)
            doc.checkpointed_version = None
            doc.progress = verdict.ProgressTracker()
            return client, doc, True

    async def checked(self, rel: str, version: int) -> tuple[LeanClient, DocState]:
        """`update`, then insist the caller's version is the current one.

        Raises:
            BrokerError: `contentModified` with `data.reason = "documentVersionMismatch"`.
        """
        client, doc, _ = await self.update(rel)
        if doc.version != version:
            raise BrokerError(
                CONTENT_MODIFIED,
                f"document version mismatch for {doc.uri}: expected document version {version}, got {doc.version}",
                {
                    "reason": "documentVersionMismatch",
                    "expectedVersion": version,
                    "acceptedVersion": doc.version,
                    "currentVersion": doc.version,
                    "uri": doc.uri,
                },
            )
        return client, doc

    async def close_doc(self, rel: str) -> None:
        """Close a document (no error when it is not open)."""
        path = resolve_path(self.root, rel)
        doc = self.docs.pop(str(path), None)
        session = self._session
        if doc is None or session is None or session.client.exited is not None:
            return
        self.handles.invalidate_document(doc.uri)
        pool = self.pools.pop(doc.uri, None)
        if pool is not None:
            await pool.close_all(session.client)
        async with doc.lock:
            await session.client.close(doc.uri)

    def display(self, path: Path) -> str:
        """Root-relative path (or URI outside the root)."""
        return display_path(self.root, path)

    def pool(self, uri: str) -> spec.MirrorPool:
        """The probe-mirror pool of a source document (created on first use; starts the idle reaper)."""
        pool = self.pools.get(uri)
        if pool is None:
            pool = spec.MirrorPool(uri, self.broker.config.mirrors_per_document)
            self.pools[uri] = pool
        if self._reaper is None:
            self._reaper = anyio.CancelScope()
            self.broker.task_group.start_soon(self._reap_mirrors, self._reaper)
        return pool

    async def _reap_mirrors(self, scope: anyio.CancelScope) -> None:
        idle = self.broker.config.mirror_idle_seconds
        with scope:
            while not self.closed:
                await anyio.sleep(max(idle / 2, 0.05))
                session = self._session
                client = session.client if session is not None else None
                for pool in list(self.pools.values()):
                    await pool.close_idle(client, idle)


# ---- the broker ---------------------------------------------------------------------------------------
class Broker:
    """Process-wide registry of workspace runtimes and the entry point for operations."""

    def __init__(self, config: BrokerConfig, task_group: TaskGroup) -> None:
        """Internal: use `Broker.open`."""
        self.config = config
        self.task_group = task_group
        self.env: Mapping[str, str] = dict(config.env if config.env is not None else os.environ)
        self.redactor = Redactor.from_sources(self.env, list(config.lean_cmd or ()))
        self._runtimes: dict[str, WorkspaceRuntime] = {}
        self._diagnostic_listeners: list[Callable[[str], None]] = []
        self.save_lock = anyio.Lock()
        self._started = time.monotonic()

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, config: BrokerConfig | None = None) -> AsyncIterator[Broker]:
        """Create a broker; leaving the block shuts every Lean server down."""
        with single_errors():
            async with anyio.create_task_group() as tg:
                broker = cls(config or BrokerConfig(), tg)
                try:
                    yield broker
                finally:
                    with anyio.CancelScope(shield=True):
                        for runtime in list(broker._runtimes.values()):
                            await runtime.shutdown()
                        broker._runtimes.clear()
                    tg.cancel_scope.cancel()

    # -- registry
    def operations(self) -> tuple[OperationSpec, ...]:
        """The implemented operations, in public tool order."""
        return implemented()

    @property
    def active(self) -> bool:
        """Whether any workspace runtime exists."""
        return bool(self._runtimes)

    def runtime_for(self, descriptor: WorkspaceDescriptor) -> WorkspaceRuntime:
        """The runtime for a resolved descriptor, created lazily (synchronously: single-flight by construction)."""
        key = cache_key(descriptor.root)
        runtime = self._runtimes.get(key)
        if runtime is None:
            runtime = WorkspaceRuntime(self, descriptor.root)
            self._runtimes[key] = runtime
        return runtime

    def cached(self, root: str) -> WorkspaceRuntime | None:
        """The runtime of a canonical root, if one is cached."""
        return self._runtimes.get(cache_key(root))

    async def drop(self, descriptor: WorkspaceDescriptor) -> m.DropResult:
        """Evict one workspace runtime; idempotent."""
        runtime = self._runtimes.pop(cache_key(descriptor.root), None)
        if runtime is None:
            return m.DropResult(dropped=False, invalidated_handles=False, reason="notFound")
        with anyio.CancelScope(shield=True):
            await runtime.shutdown()
        return m.DropResult(dropped=True, invalidated_handles=True)

    # -- stats
    def stats(self) -> dict[str, Any]:
        """`beam_stats`: uptime and every cached workspace's sessions and metrics."""
        if not self._runtimes:
            return {"uptimeMs": 0, "workspaces": {}}
        return {
            "uptimeMs": int((time.monotonic() - self._started) * 1000),
            "workspaces": {key: self.workspace_stats(rt) for key, rt in sorted(self._runtimes.items())},
        }

    def workspace_stats(self, rt: WorkspaceRuntime) -> dict[str, Any]:
        """Stats of one workspace."""
        session = rt._session
        if session is not None and session.client.exited is None:
            client_stats = dataclasses.asdict(session.client.stats())
            sess: dict[str, Any] = {
                "active": True,
                "workspaceId": rt.key,
                "root": rt.root,
                "epoch": session.epoch,
                "openDocCount": len(rt.docs),
                "client": client_stats,
            }
        else:
            sess = {"active": False}
        return {
            "id": rt.key,
            "root": rt.root,
            "uptimeMs": int((time.monotonic() - rt.created) * 1000),
            "sessions": {"lean": sess},
            "byBackend": {"lean": rt.metrics.wire()},
        }

    async def open_files(self, rt: WorkspaceRuntime) -> list[dict[str, Any]]:
        """Open documents of a workspace with their disk status (`open_docs` FileEntry shape)."""
        out = []
        for doc in list(rt.docs.values()):
            try:
                disk = text_hash(await anyio.Path(doc.path).read_text(encoding="utf-8"))
                status = "matchesTracked" if disk == doc.text_hash else "differsFromTracked"
            except FileNotFoundError:
                status = "missing"
            except (OSError, UnicodeDecodeError):
                status = "unknown"
            out.append(
                {
                    "uri": doc.uri,
                    "path": rt.display(doc.path),
                    "version": doc.version,
                    "diskStatus": status,
                    "checkpointed": status == "matchesTracked" and doc.checkpointed_version == doc.version,
                    "fileProgress": doc.progress.snapshot().dump(),
                }
            )
        return out

    async def runtime_snapshot(self, root: str) -> dict[str, Any] | None:
        """Stats and open files of a cached workspace (for feedback reports), or None.

        Reading each open file's disk status is file I/O, so this is async (it never blocks the event loop).
        """
        rt = self.cached(root)
        if rt is None:
            return None
        return {"stats": self.workspace_stats(rt), "open_files": await self.open_files(rt)}

    # -- diagnostics resources
    def open_documents(self) -> list[str]:
        """Canonical paths of the open source documents of every cached workspace, sorted (no probe mirrors)."""
        return sorted({str(doc.path) for rt in self._runtimes.values() for doc in rt.docs.values()})

    def diagnostics(self, path: str) -> dict[str, Any]:
        """What Beam knows about one file's diagnostics (mcpls resource fields; never triggers analysis).

        Returns `{tracked, availability, diagnostics, version?, elaboration?, processing?}` from the cache of the
        workspace that has the file open or cached; `tracked: false` with an empty list when none does.
        """
        canonical = os.path.realpath(path)
        for rt in self._runtimes.values():
            snap = rt.cache.get(canonical)
            if snap.tracked or canonical in rt.docs:
                out = snap.wire()
                out["tracked"] = True
                out["path"] = canonical
                return out
        return {"path": canonical, "tracked": False, "availability": "pending", "diagnostics": []}

    def add_diagnostics_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(canonical_path)` whenever a source file's cached diagnostics change.

        Changes are publishes, progress, evictions and server restarts, in every current and future workspace.
        Returns a function that removes the listener.
        """
        self._diagnostic_listeners.append(listener)

        def remove() -> None:
            if listener in self._diagnostic_listeners:
                self._diagnostic_listeners.remove(listener)

        return remove

    def _diagnostics_changed(self, path: str) -> None:
        if spec.is_mirror_path(path):
            return
        for listener in list(self._diagnostic_listeners):
            listener(path)

    # -- dispatch
    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext | None = None) -> dict[str, Any]:
        """Validate `arguments` for operation `name`, run it, and return its JSON result.

        Raises:
            BrokerError: A typed failure (`invalidInput` before any Lean work; see `errors`).
            KeyError: `name` is not an operation.
        """
        spec = BY_NAME[name]
        ctx = ctx or CallContext()
        if not isinstance(arguments, Mapping):
            raise invalid_input(f"{spec.tool} arguments must be an object")
        fields = spec.input_model.model_fields
        extra = sorted(k for k in arguments if k not in fields)
        if extra:
            raise invalid_input(
                f"{spec.tool} accepts no undeclared input fields: {', '.join(extra)}", {"fields": extra}
            )
        descriptor = resolve(arguments.get("workspace"), for_drop=spec.name == "drop_workspace")
        inp = _validate(spec, {**arguments, "workspace": descriptor.model_dump()})
        if spec.name == "drop_workspace":
            ctx.emit(PreparationEvent("lean_drop_workspace: preparing workspace eviction"))
            result = await self.drop(descriptor)
            return {"workspace": descriptor.model_dump(), **result.dump()}
        runtime = self.runtime_for(descriptor)
        started = time.perf_counter()
        outcome = "success"
        try:
            ops = _Ops(runtime, ctx, spec)
            handler: Callable[..., Any] = getattr(ops, f"op_{spec.method}")
            out: dict[str, Any] = await handler(inp, **dict(spec.options))
        except BrokerError as exc:
            outcome = exc.code
            raise
        except anyio.get_cancelled_exc_class():
            outcome = REQUEST_CANCELLED
            raise
        except Exception:
            outcome = INTERNAL_ERROR
            raise
        finally:
            runtime.metrics.record(spec.key, outcome, (time.perf_counter() - started) * 1000)
        return {"workspace": runtime.descriptor, **out}


def _validate(spec: OperationSpec, arguments: dict[str, Any]) -> Any:
    try:
        return spec.input_model.model_validate(arguments)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()]
        raise invalid_input(f"{spec.tool}: " + "; ".join(problems), {"errors": problems}) from None


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _lsp_json(value: Any) -> Any:
    """Lsprotocol / pydantic values as plain LSP JSON."""
    if value is None:
        return None
    if isinstance(value, list):
        return [_lsp_json(v) for v in value]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    return _plain(_conv.unstructure(value))


@dataclasses.dataclass
class _Watch:
    """What one call watches: a document URI and, once known, its version and last progress."""

    uri: str
    path: str
    version: int = 0
    progress: verdict.ProgressTracker = dataclasses.field(default_factory=verdict.ProgressTracker)
    seen: set[str] = dataclasses.field(default_factory=set)

    def bind(self, doc: DocState, changed: bool) -> None:
        """Set the tracked version; an unchanged document continues from its last known progress."""
        self.version = doc.version
        if not changed and self.progress.updates == 0:
            self.progress = doc.progress.copy()


class _Ops:
    """Operation implementations for one call (runtime + context + spec)."""

    def __init__(self, rt: WorkspaceRuntime, ctx: CallContext, spec: OperationSpec) -> None:
        self.rt = rt
        self.ctx = ctx
        self.spec = spec

    # -- shared plumbing
    def _prepare(self, path: str | None) -> None:
        where = f" on {path}" if path else ""
        self.ctx.emit(PreparationEvent(f"{self.spec.tool}{where}: preparing the Lean workspace", path))

    async def _lean(self, fn: Callable[[], Any]) -> Any:
        """Run a Lean request, mapping beam-lsp failures to broker errors."""
        try:
            return await fn()
        except InvalidPosition as exc:
            raise invalid_params(str(exc)) from None
        except DocumentNotOpen as exc:
            raise BrokerError(
                CONTENT_MODIFIED, f"document was closed: {exc.uri}", {"reason": "documentClosed"}
            ) from None
        except WorkerCrashed as exc:
            self.rt.worker_died()
            raise BrokerError(WORKER_EXITED, f"the Lean worker for the document exited: {exc.message}") from None
        except ServerExited as exc:
            self.rt.worker_died()
            raise BrokerError(
                WORKER_EXITED,
                f"the Lean server exited while the request was in flight: {exc}",
                {"stderrTail": exc.stderr_tail},
            ) from None
        except ResponseError as exc:
            raise from_response_error(exc) from None

    @contextlib.asynccontextmanager
    async def _watch(self, client: LeanClient, watch: _Watch, scope: str | None) -> AsyncIterator[_Watch]:
        """Forward the document's progress, setup lines and (scoped, deduplicated) diagnostics as events.

        Subscribe *before* the document is opened or changed, so no early notification is missed.
        """
        async with client.subscribe() as events, anyio.create_task_group() as tg:

            def handle(event: LspEvent) -> None:
                if isinstance(event, ProgressEvent) and event.params.textDocument.uri == watch.uri:
                    v = event.params.textDocument.version
                    if v is None or v >= watch.version:
                        watch.progress.feed(event.params)
                        self.ctx.emit(FileProgressEvent(watch.path, watch.progress.snapshot().dump()))
                elif isinstance(event, DiagnosticsEvent) and event.uri == watch.uri:
                    if event.version is not None and event.version < watch.version:
                        return
                    diags = verdict.visible(event.diagnostics)
                    for d in diags:
                        key = d.model_dump_json()
                        if key in watch.seen:
                            continue
                        watch.seen.add(key)
                        if verdict.is_setup_line(d):
                            self.ctx.emit(SetupEvent(d.message.strip(), watch.path))
                        if scope is not None and verdict.in_scope(d, scope, diags):
                            item = verdict.item(d, path=watch.path, uri=watch.uri, version=event.version)
                            self.ctx.emit(DiagnosticEvent(item.dump()))

            async def pump() -> None:
                async for event in events:
                    handle(event)

            tg.start_soon(pump)
            try:
                yield watch
            finally:
                tg.cancel_scope.cancel()
                # Notifications that preceded the barrier's answer are already buffered: deliver them too.
                while True:
                    try:
                        handle(events.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                        break

    async def _update_and_sync(
        self, rel: str, scope: str, *, include_items: bool
    ) -> tuple[LeanClient, DocState, m.SyncResult, verdict.ProgressTracker, bool]:
        """Read the file into the mirror and take the interpreted barrier, streaming events throughout."""
        path = resolve_path(self.rt.root, rel)
        client = await self.rt.client()
        watch = _Watch(path_to_uri(path), self.rt.display(path))
        with single_errors():
            async with self._watch(client, watch, scope):
                client, doc, changed = await self.rt.update(rel)
                watch.bind(doc, changed)
                result = await self._lean(lambda: client.sync(doc.uri))
        sync = self._verdict(result, watch.progress, scope, include_items=include_items, changed=changed, doc=doc)
        return client, doc, sync, watch.progress, changed

    def _verdict(
        self,
        result: SyncResult,
        progress: verdict.ProgressTracker,
        scope: str,
        *,
        include_items: bool,
        changed: bool,
        doc: DocState,
    ) -> m.SyncResult:
        """Interpret a barrier result (spec §3.7): incomplete, stale dependencies, or the verdict."""
        if result.elaboration is Elaboration.COMPLETE and not progress.done:
            progress.done = True
            progress.range_start_line = None
        diags = verdict.visible(result.diagnostics)
        path = self.rt.display(doc.path)
        incomplete = [d for d in diags if verdict.is_completion_blocking(d)]
        stale = self._stale_deps(doc)
        blocking_hints = bool(stale) and (not changed or any(s["needsSave"] for s in stale))
        if result.elaboration is not Elaboration.COMPLETE or incomplete or blocking_hints:
            progress.done = False
            fp = progress.snapshot().model_dump_json(exclude_none=True)
            save_deps = [s["path"] for s in stale if s["needsSave"]]
            plan = [f'lean-beam save "{p}"' for p in save_deps] + [f'lean-beam refresh "{path}"', "lake build"]
            raise BrokerError(
                SYNC_BARRIER_INCOMPLETE,
                f"Lean diagnostics barrier did not complete for {doc.uri} at version {doc.version}; "
                f"fileProgress={fp}. An imported target may be stale or broken, or the Lean worker may have "
                "exited. Run `lake build` or fix the upstream module first.",
                {
                    "targetPath": path,
                    "elaboration": result.elaboration.value,
                    "staleDirectDeps": stale,
                    "saveDeps": save_deps,
                    "completionBlockingDiagnostics": [
                        {
                            "range": (d.fullRange or d.range).model_dump(mode="json"),
                            "severity": verdict.effective_severity(d),
                            "message": d.message,
                            "saveBlocking": False,
                            "completionBlocking": True,
                        }
                        for d in incomplete
                    ],
                    "recoveryPlan": plan,
                },
            )
        ready = verdict.readiness(diags, elaborated=True)
        items = None
        if include_items:
            items = [
                verdict.item(d, path=path, uri=doc.uri, version=doc.version, save_blocking=d.is_error)
                for d in diags
                if verdict.in_scope(d, scope, diags)
            ]
        sync = m.SyncResult(
            path=path,
            version=doc.version,
            diagnostics=m.Diagnostics(counts=verdict.counts(diags), items=items),
            readiness=ready,
        )
        self._record_sync(doc)
        doc.progress = progress
        doc.synced_version = doc.version
        return sync

    def _stale_deps(self, doc: DocState) -> list[dict[str, Any]]:
        out = []
        for name in doc.imports:
            hist = self.rt.modules.get(name)
            if hist is None:
                continue
            if (
                hist.last_text_change_event_seq > doc.last_sync_event_seq
                or hist.last_save_event_seq > doc.last_sync_event_seq
            ):
                out.append(
                    {
                        "module": name,
                        "path": hist.path,
                        "needsSave": hist.last_save_event_seq < hist.last_text_change_event_seq,
                    }
                )
        return out

    def _record_sync(self, doc: DocState) -> None:
        seq = self.rt.next_event_seq()
        doc.last_sync_event_seq = seq
        if doc.module is None:
            return
        hist = self.rt.modules.get(doc.module)
        if hist is None:
            hist = ModuleHistory(self.rt.display(doc.path), last_text_hash=doc.text_hash)
            self.rt.modules[doc.module] = hist
        elif hist.last_text_hash != doc.text_hash:
            hist.last_text_change_event_seq = seq
            hist.last_text_hash = doc.text_hash
        hist.last_sync_event_seq = seq

    # -- operations
    async def op_update(self, inp: m.FileInput) -> dict[str, Any]:
        self._prepare(inp.path)
        _, doc, changed = await self.rt.update(inp.path)
        return m.UpdateResult(version=doc.version, changed=changed).dump()

    async def op_sync(self, inp: m.SyncInput) -> dict[str, Any]:
        self._prepare(inp.path)
        _, _, sync, progress, _ = await self._update_and_sync(
            inp.path, inp.diagnostic_scope, include_items=inp.diagnostics_in_result
        )
        return {**sync.dump(), "document_progress": progress.snapshot().dump()}

    async def op_refresh(self, inp: m.SyncInput) -> dict[str, Any]:
        await self.rt.close_doc(inp.path)
        return await self.op_sync(inp)

    async def op_close(self, inp: m.FileInput) -> dict[str, Any]:
        self._prepare(inp.path)
        await self.rt.close_doc(inp.path)
        return {"closed": True}

    async def _position(
        self, path: str, version: int, line: int, character: int
    ) -> tuple[LeanClient, DocState, Position]:
        self._prepare(path)
        client, doc = await self.rt.checked(path, version)
        pos = Position(line=line, character=character)
        return client, doc, pos

    async def op_hover(self, inp: m.PositionInput) -> dict[str, Any]:
        client, doc, pos = await self._position(inp.path, inp.version, inp.line, inp.character)
        return _result_object(_lsp_json(await self._lean(lambda: client.hover(doc.uri, pos))))

    async def op_signature_help(self, inp: m.PositionInput) -> dict[str, Any]:
        client, doc, pos = await self._position(inp.path, inp.version, inp.line, inp.character)
        return _result_object(_lsp_json(await self._lean(lambda: client.signature_help(doc.uri, pos))))

    async def op_definition(self, inp: m.PositionInput) -> dict[str, Any]:
        client, doc, pos = await self._position(inp.path, inp.version, inp.line, inp.character)
        return {"result": _lsp_json(await self._lean(lambda: client.definition(doc.uri, pos)))}

    async def op_references(self, inp: m.ReferencesInput) -> dict[str, Any]:
        client, doc, pos = await self._position(inp.path, inp.version, inp.line, inp.character)
        refs = await self._lean(lambda: client.references(doc.uri, pos, include_declaration=inp.include_declaration))
        return {"result": _lsp_json(refs)}

    async def op_document_symbols(self, inp: m.DocumentInput) -> dict[str, Any]:
        self._prepare(inp.path)
        client, doc = await self.rt.checked(inp.path, inp.version)
        return {"result": _lsp_json(await self._lean(lambda: client.document_symbols(doc.uri)))}

    async def op_workspace_symbols(self, inp: m.WorkspaceSymbolsInput) -> dict[str, Any]:
        self._prepare(None)
        client = await self.rt.client()
        return {"result": _lsp_json(await self._lean(lambda: client.workspace_symbols(inp.query)))}

    async def op_goals(self, inp: m.GoalsInput) -> dict[str, Any]:
        client, doc, pos = await self._position(inp.path, inp.version, inp.line, inp.character)
        text_doc = await self._lean(lambda: _document(client, doc.uri))
        await self._lean(lambda: _validate_position(text_doc, pos))
        start, end = _analysis.tactic_span(text_doc, pos)
        at = start if inp.mode == "before" else end
        state = await self._goals_at(client, doc.uri, at)
        if state is None:
            raise invalid_params(_analysis.NO_GOALS.format(line=inp.line, character=inp.character))
        return state.dump()

    async def _goals_at(self, client: LeanClient, uri: str, pos: Position) -> m.ProofState | None:
        try:
            structured = await client.interactive_goals(uri, pos)
        except ResponseError:
            structured = None
        except (ServerExited, InvalidPosition, DocumentNotOpen):
            structured = None
        state = _analysis.goals_from_interactive(structured)
        if state is not None:
            return state
        plain = await self._lean(lambda: client.plain_goal(uri, pos))
        return None if plain is None else _analysis.goals_from_plain(plain)

    async def op_todo(self, inp: m.TodoInput) -> dict[str, Any]:
        self._prepare(inp.path)
        client, doc = await self.rt.checked(inp.path, inp.version)
        text_doc = await self._lean(lambda: _document(client, doc.uri))
        query = document_range((inp.start_line, inp.start_character), (inp.end_line, inp.end_character))
        await self._lean(lambda: _validate_range(text_doc, query))
        result = await self._lean(lambda: client.sync(doc.uri))
        if result.elaboration is not Elaboration.COMPLETE:
            raise BrokerError(
                SYNC_BARRIER_INCOMPLETE, f"Lean did not finish elaborating {doc.uri} at version {doc.version}"
            )
        diags = verdict.visible(result.diagnostics)
        qjson = query.model_dump(mode="json")
        kinds = set(inp.kinds or _analysis._KIND_ORDER)
        items: list[m.TodoItem] = []
        if "sorry" in kinds:
            for a, b in _analysis.sorry_ranges(text_doc.text):
                rng = document_range(_pair(text_doc.position_at(a)), _pair(text_doc.position_at(b))).model_dump(
                    mode="json"
                )
                if _analysis.matches(rng, qjson):
                    items.append(
                        m.TodoItem(kind="sorry", range=rng, run_at_position=rng["start"], message="syntactic sorry")
                    )
        for d in diags:
            rng = (d.fullRange or d.range).model_dump(mode="json")
            if not _analysis.matches(rng, qjson):
                continue
            if "hole" in kinds and _analysis.is_hole(d):
                items.append(
                    m.TodoItem(
                        kind="hole",
                        range=d.range.model_dump(mode="json"),
                        run_at_position=d.range.start.model_dump(mode="json"),
                        message="term hole",
                    )
                )
            if "incomplete_proof" in kinds and _analysis.is_unsolved_goals(d):
                end = (d.fullRange or d.range).end
                state = await self._goals_at(client, doc.uri, end)
                items.append(
                    m.TodoItem(
                        kind="incomplete_proof",
                        range=rng,
                        run_at_position=end.model_dump(mode="json"),
                        run_at_text="exact ?_" if inp.suggest == "basic" else None,
                        message="incomplete proof",
                        proof_state=state,
                    )
                )
            if "diagnostic" in kinds:
                items.append(
                    m.TodoItem(
                        kind="diagnostic", range=rng, message=d.message, severity=d.severity, diagnostic=d.wire()
                    )
                )
        if "code_action" in kinds:
            overlapping = [
                d for d in diags if _analysis.matches((d.fullRange or d.range).model_dump(mode="json"), qjson)
            ]
            actions = await self._lean(lambda: client.code_actions(doc.uri, query, diagnostics=overlapping))
            for action in actions:
                rng = qjson
                adiags = action.get("diagnostics") or []
                if adiags and isinstance(adiags[0], dict) and "range" in adiags[0]:
                    rng = adiags[0]["range"]
                else:
                    for change in (action.get("edit") or {}).get("documentChanges") or []:
                        edits = change.get("edits") or []
                        if edits:
                            rng = edits[0]["range"]
                            break
                items.append(
                    m.TodoItem(kind="code_action", range=rng, message=str(action.get("title", "")), code_action=action)
                )
        return m.TodoResult(version=doc.version, range=qjson, items=_analysis.finish(items)).dump()

    async def op_code_action_resolve(self, inp: m.CodeActionResolveInput) -> dict[str, Any]:
        self._prepare(inp.path)
        data = inp.code_action.get("data")
        if not isinstance(data, dict):
            raise invalid_params("code_action_resolve requires codeAction.data (pass an action returned by lean_todo)")
        client, doc = await self.rt.checked(inp.path, inp.version)
        target = ((data.get("params") or {}).get("textDocument") or {}).get("uri")
        if target != doc.uri:
            raise invalid_params(f"codeAction.data targets {target}, not requested document {doc.uri}")
        resolved = await self._lean(lambda: client.resolve_code_action(inp.code_action))
        return m.CodeActionResolveResult(version=doc.version, code_action=resolved).dump()

    async def op_save(self, inp: m.SaveInput) -> dict[str, Any]:
        self._prepare(inp.path)
        saved, progress = await self._save(inp.path, inp.diagnostic_scope)
        return {**saved.dump(), "document_progress": progress.snapshot().dump()}

    async def op_close_save(self, inp: m.SaveInput) -> dict[str, Any]:
        self._prepare(inp.path)
        saved, progress = await self._save(inp.path, inp.diagnostic_scope)
        await self.rt.close_doc(inp.path)
        return {"closed": True, "saved": saved.dump(), "document_progress": progress.snapshot().dump()}

    async def _save(self, rel: str, scope: str) -> tuple[m.SaveResult, verdict.ProgressTracker]:
        async with self.rt.broker.save_lock:
            _, doc, sync, progress, _ = await self._update_and_sync(rel, scope, include_items=False)
            saved = await _save.checkpoint(self.rt, doc, sync, self.ctx)
        doc.checkpointed_version = doc.version
        if doc.module is not None and doc.module in self.rt.modules:
            self.rt.modules[doc.module].last_save_event_seq = self.rt.next_event_seq()
        return saved, progress

    # -- speculation
    async def op_run_at(self, inp: m.RunAtInput, *, store_handle: bool = False) -> dict[str, Any]:
        self._prepare(inp.path)
        client, doc = await self.rt.checked(inp.path, inp.version)
        text_doc = await self._lean(lambda: _document(client, doc.uri))
        pos = Position(line=inp.line, character=inp.character)
        await self._lean(lambda: _validate_position(text_doc, pos))
        goal = await self._lean(lambda: client.plain_goal(doc.uri, pos))
        basis = spec.proof_basis(text_doc, pos) if goal is not None else spec.command_basis(text_doc, pos)
        result, ok = await self._probe(client, doc, text_doc.text, basis, [inp.text])
        handle = None
        if store_handle and ok:
            handle = self._mint(doc, basis, (inp.text,))
        return m.RunResult(**result, next_handle=handle).dump()

    async def op_run_with(self, inp: m.RunWithInput, *, linear: bool = False) -> dict[str, Any]:
        self._prepare(inp.path)
        client, doc, record = await self._handle(inp.handle, inp.path)
        if linear:
            self.rt.handles.take(record.raw)
        text = client.document(doc.uri).text
        texts = (*record.texts, inp.text)
        result, ok = await self._probe(client, doc, text, record.basis, list(texts))
        handle = self._mint(doc, record.basis, texts) if ok else None
        return m.RunResult(**result, next_handle=handle).dump()

    async def op_release(self, inp: m.ReleaseInput) -> dict[str, Any]:
        self._prepare(inp.path)
        _, _, record = await self._handle(inp.handle, inp.path)
        self.rt.handles.take(record.raw)
        return {"result": None}

    def _mint(self, doc: DocState, basis: spec.Basis, texts: tuple[str, ...]) -> dict[str, Any]:
        token = self.rt.session_token() or ""
        raw = self.rt.handles.mint(token, doc.uri, doc.version, basis, texts)
        return spec.wrap(self.rt.key, self.rt.epoch or 0, token, raw)

    async def _handle(self, handle: dict[str, Any], path: str) -> tuple[LeanClient, DocState, spec.HandleRecord]:
        """Resolve a client handle against this runtime (workspace, session, document and version)."""
        workspace, epoch, session, raw = spec.unwrap(handle)
        if workspace != self.rt.key:
            raise invalid_params(f"request workspace '{self.rt.key}' does not match handle workspace '{workspace}'")
        # Re-read the document first: an edit on disk invalidates the handles of the old version.
        client, doc, _ = await self.rt.update(path)
        if epoch != self.rt.epoch or session != self.rt.session_token():
            raise BrokerError(
                CONTENT_MODIFIED,
                "handle belongs to a stale backend session (the Lean server was "
                "restarted, the workspace dropped, or the handle came from another process)",
                {"reason": "staleSession"},
            )
        record = self.rt.handles.get(raw, doc.uri)
        if record.version != doc.version:
            self.rt.handles.invalidate_document(doc.uri, keep_version=doc.version)
            raise BrokerError(CONTENT_MODIFIED, "handle is stale: its document changed", {"reason": "staleHandle"})
        return client, doc, record

    async def _probe(
        self, client: LeanClient, doc: DocState, source: str, basis: spec.Basis, texts: list[str]
    ) -> tuple[dict[str, Any], bool]:
        """Run the probe chain on a mirror of the document; returns the run result fields and success."""
        probe = spec.build(source, basis, texts)
        pool = self.rt.pool(doc.uri)
        mirror = pool.acquire_slot()
        mirror.waiting += 1
        try:
            await mirror.lock.acquire()
        finally:
            mirror.waiting -= 1
        try:
            watch = _Watch(mirror.uri, self.rt.display(doc.path))
            with single_errors():
                async with self._watch(client, watch, None):
                    if not mirror.opened:
                        version = await self._lean(lambda: client.open(mirror.uri, probe.text))
                        mirror.opened = True
                    else:
                        version = await self._lean(lambda: client.change(mirror.uri, probe.text, save=False))
                    watch.version = version
                    result = await self._lean(lambda: client.sync(mirror.uri))
            diags = verdict.visible(result.diagnostics)
            mine = [d for d in diags if spec.in_span(d, probe.span_start, probe.span_end)]
            messages = [
                m.RunMessage(severity=spec.severity_name(d), text=d.message)  # type: ignore[arg-type]
                for d in mine
                if not spec.is_trace(d)
            ]
            traces = [d.message for d in mine if spec.is_trace(d)]
            ok = result.elaboration is Elaboration.COMPLETE and not any(d.is_error for d in mine)
            if result.elaboration is not Elaboration.COMPLETE:
                messages.append(m.RunMessage(severity="error", text="Lean did not finish elaborating the probe"))
            state: m.ProofState | None = None
            if basis.mode == "proof" and ok:
                # The enclosing declaration's "unsolved goals" error is not a probe error: goals remain.
                unsolved = [d for d in diags if _analysis.is_unsolved_goals(d) and d not in mine]
                if unsolved:
                    state = await self._goals_at(client, mirror.uri, probe.span_end)
                    state = state or _analysis.goals_from_unsolved(unsolved[-1])
                state = state or m.ProofState(goals=[])
        finally:
            mirror.last_used = time.monotonic()
            mirror.lock.release()
        if basis.mode == "proof" and not ok and basis.goal_position is not None:
            state = await self._goals_at(client, doc.uri, basis.goal_position)
        return {"success": ok, "messages": messages, "traces": traces, "proof_state": state}, ok


def _result_object(value: Any) -> dict[str, Any]:
    """LSP passthrough: an object result is the structured content itself; anything else is wrapped."""
    if isinstance(value, dict):
        return value
    return {"result": value}


def _pair(p: Position) -> tuple[int, int]:
    return (p.line, p.character)


async def _document(client: LeanClient, uri: str) -> TextDocument:
    return client.document(uri)


async def _validate_position(doc: TextDocument, pos: Position) -> None:
    doc.validate(pos)


async def _validate_range(doc: TextDocument, rng: Range) -> None:
    doc.validate_range(rng)


def document_range(start: tuple[int, int], end: tuple[int, int]) -> Range:
    """A `Range` from (line, character) pairs."""
    return Range(start=Position(line=start[0], character=start[1]), end=Position(line=end[0], character=end[1]))
