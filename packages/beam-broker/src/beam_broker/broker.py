"""The broker: workspace runtimes keyed by canonical root, and `call()`, the one entry point for operations.

`call()` = validate (the registry entry's `parse`) -> the preparation event -> the error boundary
(`errors.lean_errors`) around the entry's handler -> metrics; every error leaving it is redacted. Mirrors are
invisible (`_outbound`): every result, error and event of a call, and `stats`, `runtime_snapshot` and
`diagnostics`, pass that filter here, the one place answers leave the broker. The broker hosts
each runtime in a task of its own task group (the runtime owns its inner task group); it never reaches into a
runtime's session, and it never dispatches by operation name. It never writes `.lean` sources and never speaks MCP.

Sharing one broker among many agents and projects: every workspace-scoped call is admitted first (`_serve.admission`:
bounded slots per workspace and in all, cheap and heavy calls in separate lanes, `busy` past a short wait, and
`busy` at once while draining). A task measures each runtime's Lean tree (`_serve.memory`) on a timer and after every
open; over the memory budget it evicts what `_serve.governor.plan` picks (idle documents, then idle runtimes, least
recently used first), and it shuts down runtimes idle past the idle timeout. A runtime with a call in flight, and
a document a call holds, are never evicted; an evicted runtime starts again on its next call; every eviction is
logged, counted and kept for `status()`, and the files it held read `evicted` until they are opened again.

Diagnostics resources (`diagnostics(path)`) follow mcpls's cached-diagnostics rules: a file belongs to the
runtime that knows it, else to the workspace whose root contains it; while that workspace's Lean server starts
the read is `serverStarting`, after a failed start it is the start's `runtimeSetup` error, otherwise it is what
the cache holds (never triggering analysis).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

import anyio
from anyio.abc import TaskGroup, TaskStatus
from pydantic import BaseModel

from beam_lsp.errors import unwrap_group
from beam_lsp.strict_json import find_invalid_text

from . import _outbound as outbound
from ._call import Call
from ._documents import ClosedStates
from ._lake import Layout, read_layout
from ._metrics import SUCCESS
from ._serve.admission import LANES, Admission
from ._serve.governor import Governor
from .config import BrokerConfig
from .errors import INTERNAL_ERROR, REQUEST_CANCELLED, BrokerError, invalid_input, invalid_text, lean_errors
from .events import CallContext, PreparationEvent
from .models import HasWorkspace, PathInput
from .operations import REGISTRY, BrokerOperation, Operation, Registry, Scope, WorkspaceOperation
from .runtime import WorkspaceRuntime
from .workspace import WorkspaceDescriptor, cache_key, check_lean_source, resolve

log = logging.getLogger("beam_broker")

CallListener = Callable[[str, str, float], None]
"""`listener(tool, outcome, seconds)`: one finished call (`outcome`: `success` or the error code it ended with)."""
RECENT_ERRORS = 50


@dataclasses.dataclass
class _Hosted:
    """A runtime being opened or open in the broker's task group; `ready` is set once `runtime` exists."""

    ready: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    stop: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    runtime: WorkspaceRuntime | None = None


class Broker:
    """Process-wide registry of workspace runtimes and the entry point for operations."""

    def __init__(self, config: BrokerConfig, task_group: TaskGroup, registry: Registry = REGISTRY) -> None:
        """Internal: use `Broker.open`."""
        self.config = config
        self.registry = registry
        self.env: Mapping[str, str] = config.environment()
        self.redactor = config.redactor(self.env)
        self._tg = task_group
        self._runtimes: dict[str, _Hosted] = {}
        self._stopping: dict[str, _Hosted] = {}  # closed, their Lean not yet stopped: a new one for the root waits
        self._diagnostic_listeners: list[Callable[[str], None]] = []
        self._save_lock = anyio.Lock()
        self._closed = ClosedStates()  # outlives each runtime: a version pinned before one shut down stays checked
        self._started = time.monotonic()
        self.admission = Admission(config)
        self.governor = Governor(config, self.redactor, self._settled, self._close, self._diagnostics_changed)
        self.evictions = self.governor.evictions
        self.errors: collections.deque[dict[str, Any]] = collections.deque(maxlen=RECENT_ERRORS)
        """The latest calls that ended with an error (for people: the status page)."""
        self.retired_restarts = 0
        """Lean restarts of runtimes that were closed since (the live ones count their own)."""
        self._call_listeners: list[CallListener] = []

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, config: BrokerConfig | None = None, *, registry: Registry = REGISTRY) -> AsyncIterator[Broker]:
        """Create a broker serving `registry`'s operations; leaving the block shuts every Lean server down."""
        with unwrap_group():
            async with anyio.create_task_group() as tg:
                broker = cls(config or BrokerConfig(), tg, registry)
                tg.start_soon(broker.governor.run)
                try:
                    yield broker
                finally:
                    with anyio.CancelScope(shield=True):
                        for key in list(broker._runtimes):
                            await broker._close(key)
                    tg.cancel_scope.cancel()

    # ---- registry -----------------------------------------------------------------------------------
    def operations(self) -> tuple[Operation, ...]:
        """The operations this broker serves, in public tool order."""
        return self.registry.operations

    # ---- runtimes -----------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether any workspace runtime exists."""
        return bool(self._runtimes)

    @property
    def workspace_count(self) -> int:
        """How many workspace runtimes are open now (cheap: for health checks)."""
        return len(self._open())

    def cached(self, root: str) -> WorkspaceRuntime | None:
        """The open runtime of a canonical root, if one is cached."""
        hosted = self._runtimes.get(cache_key(root))
        return hosted.runtime if hosted is not None else None

    async def runtime(self, descriptor: WorkspaceDescriptor) -> WorkspaceRuntime:
        """The runtime of a resolved descriptor, opened on first use (one per root, even under concurrent calls)."""
        key = cache_key(descriptor.root)
        while key not in self._runtimes and key in self._stopping:
            await self._stopping[key].done.wait()  # one Lean server per root: the one closing stops first
        hosted = self._runtimes.get(key)
        if hosted is None:
            hosted = _Hosted()
            self._runtimes[key] = hosted  # before any await: concurrent callers wait for this one
            try:
                await self._tg.start(self._host, descriptor.root, hosted)
            finally:
                if hosted.runtime is None:  # cancelled or failed while opening: let the next caller retry
                    if self._runtimes.get(key) is hosted:
                        del self._runtimes[key]
                    hosted.ready.set()
        await hosted.ready.wait()
        if hosted.runtime is None:
            raise BrokerError(INTERNAL_ERROR, f"the runtime of {descriptor.root} could not be opened")
        return hosted.runtime

    async def prewarm(self, descriptor: WorkspaceDescriptor) -> None:
        """Start a workspace's Lean server before a call needs it (opens no document; a failure is `runtimeSetup`)."""
        await (await self.runtime(descriptor)).client()  # a failed start is kept as `start_failure`, as a call's

    async def _host(self, root: str, hosted: _Hosted, *, task_status: TaskStatus[None]) -> None:
        try:
            async with WorkspaceRuntime.open(
                root,
                self.config,
                env=self.env,
                redactor=self.redactor,
                save_lock=self._save_lock,
                on_diagnostics=self._diagnostics_changed,
            ) as runtime:
                runtime.documents.closed = self._closed  # before any document: the states outlive this runtime
                hosted.runtime = runtime
                hosted.ready.set()
                task_status.started()
                await hosted.stop.wait()
        finally:
            hosted.done.set()

    async def _close(self, key: str) -> WorkspaceRuntime | None:
        hosted = self._runtimes.pop(key, None)
        if hosted is None:
            return None
        if hosted.runtime is not None:  # when it leaves `status()`: the restarts counter never goes backwards
            self.retired_restarts += hosted.runtime.metrics.sessionRestarts
        self._stopping[key] = hosted
        hosted.stop.set()
        try:
            with anyio.CancelScope(shield=True):
                await hosted.done.wait()
        finally:
            if self._stopping.get(key) is hosted:
                del self._stopping[key]
        return hosted.runtime

    async def drop(self, descriptor: WorkspaceDescriptor) -> bool:
        """Evict one workspace runtime (its Lean server stops); False when none was cached (nor being shut down).

        Every file the runtime knew is reported to the diagnostics listeners afterwards (it is untracked now).
        """
        key = cache_key(descriptor.root)
        runtime = self.cached(descriptor.root)
        files = runtime.files() if runtime is not None else []
        closed = await self._close(key)
        stopping = self._stopping.get(key)
        if closed is None and stopping is not None:  # being shut down (an eviction): dropped all the same
            with anyio.CancelScope(shield=True):
                await stopping.done.wait()
            closed = stopping.runtime
        files += self.governor.forget_under(descriptor.root)  # dropped on purpose: untracked, not evicted
        for path in files:
            self._diagnostics_changed(path)
        return closed is not None

    def _settled(self) -> list[tuple[str, WorkspaceRuntime]]:
        """Open runtimes not starting a server and not chosen for eviction already (the governor's candidates)."""
        return [
            (key, h.runtime)
            for key, h in self._runtimes.items()
            if h.runtime is not None and not h.runtime.starting and not h.runtime.occupancy.evicting
        ]

    # ---- calls --------------------------------------------------------------------------------------
    async def call(
        self, name: str, arguments: Mapping[str, Any] | BaseModel, ctx: CallContext | None = None
    ) -> dict[str, Any]:
        """Validate `arguments` for operation `name`, run it, and return its JSON result.

        Args:
            name: An operation name (`OperationSpec.name`).
            arguments: The JSON arguments, or the operation's input model as `OperationSpec.parse` returned it.
            ctx: Where the call's events go.

        Raises:
            BrokerError: Every failure (`invalidInput` before any Lean work; see `errors`), redacted. Cancellation
                of the caller's scope propagates as such.
        """
        root: str | None = None
        spec = self.registry.by_name.get(name)
        started = time.perf_counter()
        outcome = SUCCESS
        try:
            if spec is None:
                raise invalid_input(f"unknown operation {name!r}")
            inp = _input(spec, arguments)
            root = cast(HasWorkspace, inp).workspace.root
            if spec.scope is not Scope.WORKSPACE:
                return await self._call(spec, inp, ctx or CallContext())
            async with self.admission.admit(cache_key(root), root, "heavy" if spec.heavy else "cheap"):
                return await self._call(spec, inp, ctx or CallContext())
        except BrokerError as exc:
            outcome = exc.code
            clean = _unseen(exc, None if root is None else _placed(self, root)).redacted(self.redactor)
            self.errors.append(
                {"at": round(time.time(), 3), "tool": spec.tool if spec else name, "code": exc.code, "root": root}
            )
            if clean is exc:
                raise
            raise clean from None
        except anyio.get_cancelled_exc_class():
            outcome = REQUEST_CANCELLED
            raise
        finally:
            seconds = time.perf_counter() - started
            for listener in list(self._call_listeners):
                listener(spec.tool if spec else name, outcome, seconds)

    def add_call_listener(self, listener: CallListener) -> Callable[[], None]:
        """Call `listener(tool, outcome, seconds)` after every call (refused ones included); returns its remover."""
        self._call_listeners.append(listener)

        def remove() -> None:
            if listener in self._call_listeners:
                self._call_listeners.remove(listener)

        return remove

    async def _call(self, spec: Operation, inp: BaseModel, ctx: CallContext) -> dict[str, Any]:
        """Run one validated call: everything it answers and emits passes `_outbound` (mirrors are invisible)."""
        workspace = cast(HasWorkspace, inp).workspace
        ctx = outbound.context(ctx, _placed(self, workspace.root))
        path = inp.path if isinstance(inp, PathInput) else None
        if path is not None:  # before anything runs: no event, no runtime, no Lean for a file that is no source
            check_lean_source(workspace.root, path)
        ctx.emit(PreparationEvent(spec.preparation(path), path, spec.preparing))
        if isinstance(spec, BrokerOperation):
            with lean_errors(self.redactor):
                result: BaseModel = await spec.run(self, inp)
        else:
            result = await self._on_runtime(spec, Call(await self._claim(workspace), ctx, workspace, path), inp)
        out: dict[str, Any] = outbound.scrub(result.model_dump(mode="json"), _placed(self, workspace.root))
        return out

    async def _on_runtime(
        self, spec: WorkspaceOperation[BaseModel, BaseModel], call: Call, inp: BaseModel
    ) -> BaseModel:
        """Run a workspace operation's handler on its claimed runtime; count it, and tell the governor what opened."""
        runtime = call.runtime
        before = set(runtime.documents.docs)
        started = time.perf_counter()
        outcome = SUCCESS
        try:
            with lean_errors(self.redactor):
                return await spec.run(call, inp)
        except BrokerError as exc:
            outcome = exc.code
            raise
        except anyio.get_cancelled_exc_class():
            outcome = REQUEST_CANCELLED
            raise
        finally:
            call.release()
            runtime.occupancy.in_flight -= 1
            runtime.occupancy.last_active = time.monotonic()
            opened = runtime.documents.docs.keys() - before
            if opened:
                self.governor.opened(opened)
            runtime.metrics.record(spec.key, outcome, (time.perf_counter() - started) * 1000)

    async def _claim(self, workspace: WorkspaceDescriptor) -> WorkspaceRuntime:
        """The workspace's runtime with this call counted in it (a runtime being evicted is replaced by a new one).

        No await separates the check from the count, so an eviction either saw the call or is seen by it.
        """
        while True:
            runtime = await self.runtime(workspace)
            if not runtime.occupancy.evicting:
                runtime.occupancy.in_flight += 1
                runtime.occupancy.last_active = time.monotonic()
                return runtime
            hosted = self._runtimes.get(cache_key(workspace.root))
            if hosted is not None and hosted.runtime is runtime:  # still closing: wait until it has gone
                with anyio.CancelScope(shield=True):
                    await hosted.done.wait()

    # ---- stats and reports --------------------------------------------------------------------------
    def _open(self) -> list[WorkspaceRuntime]:
        return [h.runtime for h in self._runtimes.values() if h.runtime is not None]

    def stats(self) -> dict[str, Any]:
        """`beam_stats`: uptime and every cached workspace's sessions and metrics."""
        runtimes = sorted(self._open(), key=lambda rt: rt.key)
        if not runtimes:
            return {"uptimeMs": 0, "workspaces": {}}
        stats = {
            "uptimeMs": int((time.monotonic() - self._started) * 1000),
            "workspaces": {rt.key: outbound.scrub(rt.stats(), rt.layout) for rt in runtimes},
        }
        redacted: dict[str, Any] = self.redactor.redact_json(stats)
        return redacted

    async def runtime_snapshot(self, root: str) -> dict[str, Any] | None:
        """Stats and open files of a cached workspace (for feedback reports), or None.

        Reading each open file's disk status is file I/O, so this is async (it never blocks the event loop).
        """
        rt = self.cached(root)
        if rt is None:
            return None
        snapshot = {"stats": rt.stats(), "open_files": await rt.open_files()}
        clean: dict[str, Any] = outbound.scrub(snapshot, rt.layout)
        return clean

    def drain(self) -> None:
        """Stop admitting: every new workspace call fails at once with `busy` (`data.reason = "draining"`).

        Calls already admitted go on; the caller decides how long to wait for them (`in_flight`).
        """
        self.admission.draining = True

    @property
    def in_flight(self) -> int:
        """Workspace calls admitted and running now."""
        return sum(counts.in_flight for counts in self.admission.lanes.values())

    def status(self) -> dict[str, Any]:
        """What an operator sees (metrics and the status page): memory, calls, evictions, errors, per workspace.

        Cheap: it reads what is in memory (the last measurement), never starts or asks Lean. Redacted.
        """
        now = time.monotonic()
        workspaces: list[dict[str, Any]] = []
        for rt in sorted(self._open(), key=lambda rt: rt.key):
            counts = self.admission.counts(rt.key)
            workspaces.append(
                {
                    "root": rt.root,
                    "toolchain": rt.toolchain.name if rt.toolchain is not None else None,
                    "residentBytes": rt.occupancy.usage.total,
                    "processes": rt.occupancy.usage.processes,
                    "openDocuments": len(rt.documents.docs),
                    "callsInFlight": counts.in_flight,
                    "callsWaiting": counts.waiting,
                    "idleSeconds": 0.0 if rt.occupancy.in_flight else round(now - rt.occupancy.last_active, 1),
                    "sessionStarts": rt.metrics.sessionStarts,
                    "sessionRestarts": rt.metrics.sessionRestarts,
                }
            )
        budget = self.config.memory_budget_mib
        out = {
            "uptimeMs": int((now - self._started) * 1000),
            "draining": self.admission.draining,
            "memoryBudgetBytes": budget * 1024 * 1024 if budget is not None else None,
            "idleTimeoutSeconds": self.config.idle_timeout,
            "residentBytes": sum(w["residentBytes"] for w in workspaces),
            "workspaces": workspaces,
            "lanes": {lane: dataclasses.asdict(self.admission.lanes[lane]) for lane in LANES},
            "rejections": dict(sorted(self.admission.rejected.items())),
            "evictions": [
                {"kind": kind, "reason": reason, "count": count}
                for (kind, reason), count in sorted(self.evictions.counts.items())
            ],
            "recentEvictions": [e.wire() for e in reversed(self.evictions.recent)],
            "recentErrors": list(reversed(self.errors)),
            "sessionRestarts": self.retired_restarts + sum(w["sessionRestarts"] for w in workspaces),
        }
        redacted: dict[str, Any] = self.redactor.redact_json(out)
        return redacted

    # ---- diagnostics resources ----------------------------------------------------------------------
    def open_documents(self) -> list[str]:
        """Canonical paths of the open source documents of every cached workspace, sorted (no probe mirrors)."""
        return sorted({path for rt in self._open() for path in rt.open_paths()})

    def diagnostics(self, path: str) -> dict[str, Any]:
        """What Beam knows about one file's diagnostics (mcpls resource fields; never triggers analysis).

        Returns `{path, tracked, availability, diagnostics, open?, version?, elaboration?, processing?}` from the
        cache of the workspace that has the file open or cached; `tracked: false` with an empty list when none
        does (a probe mirror's path is never tracked: mirrors are invisible). The file's workspace is the
        runtime that knows it, else the one whose root contains it (the deepest).

        Raises:
            BrokerError: `serverStarting` while the workspace's Lean server starts; the `runtimeSetup` error of
                its last start when that failed (until a start succeeds).
        """
        canonical = os.path.realpath(path)
        if outbound.names_mirror(canonical):  # a probe mirror is no file: nobody tracks it
            return _untracked(canonical)
        runtimes = self._open()
        owner = next((rt for rt in runtimes if rt.knows(canonical)), None)
        if owner is None:
            containing = [rt for rt in runtimes if rt.contains(canonical)]
            owner = max(containing, key=lambda rt: len(rt.root), default=None)
        if owner is not None:
            owner.check_started()
            snap = owner.diagnostics(canonical)
            if snap is not None and self.governor.evicted(canonical) and canonical not in owner.documents.docs:
                return evicted(canonical)  # closed to free memory: unknown, not clean
            if snap is not None:
                clean: dict[str, Any] = outbound.scrub(snap, owner.layout)
                return clean
        if self.governor.evicted(canonical):  # its workspace was shut down to free memory: unknown, not clean
            return evicted(canonical)
        return _untracked(canonical)

    def add_diagnostics_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(canonical_path)` whenever a source file's cached diagnostics change.

        Changes are publishes, progress, evictions, server restarts and drops, in every current and future
        workspace. Returns a function that removes the listener.
        """
        self._diagnostic_listeners.append(listener)

        def remove() -> None:
            if listener in self._diagnostic_listeners:
                self._diagnostic_listeners.remove(listener)

        return remove

    def _diagnostics_changed(self, path: str) -> None:
        for listener in list(self._diagnostic_listeners):
            listener(path)


def evicted(canonical: str) -> dict[str, Any]:
    """The diagnostics resource of a file evicted to free memory (closed, or its workspace shut down)."""
    return {"path": canonical, "tracked": True, "availability": "evicted", "diagnostics": [], "open": False}


def _input(spec: Operation, arguments: Mapping[str, Any] | BaseModel) -> BaseModel:
    """A call's arguments as the operation's input model: parsed, or a model built by hand checked as `parse` would."""
    if not isinstance(arguments, BaseModel):
        return spec.parse(arguments)
    if not isinstance(arguments, spec.input_model):
        raise invalid_input(f"{spec.tool} takes {spec.input_model.__name__}, not {type(arguments).__name__}")
    bad = find_invalid_text(arguments.model_dump(mode="python"))
    if bad is not None:  # a model built by hand skipped `parse`
        raise invalid_text(spec.tool, bad)
    # A model built by hand (not by `parse`) may carry a root that is not canonical: resolve it again.
    raw = cast(HasWorkspace, arguments).workspace
    descriptor = resolve(raw.model_dump(), allow_vanished=spec.scope is Scope.BROKER)
    return arguments if descriptor == raw else arguments.model_copy(update={"workspace": descriptor})


def _placed(broker: Broker, root: str) -> Callable[[], Layout]:
    """The layout `_outbound` places a root's `«external:…»` names with, looked up when a name needs it.

    Its runtime's (the lakefile read again only when it changes); read from the lakefile while none is open.
    """

    def layout() -> Layout:
        rt = broker.cached(root)
        return rt.layout() if rt is not None else read_layout(root)

    return layout


def _untracked(canonical: str) -> dict[str, Any]:
    """The diagnostics resource of a file no workspace tracks."""
    return {"path": canonical, "tracked": False, "availability": "pending", "diagnostics": []}


def _unseen(exc: BrokerError, root: outbound.Root) -> BrokerError:
    """The error with mirrors mapped in its message and data (`_outbound`); itself when neither names one."""
    message, data = outbound.text(exc.message, root), outbound.scrub(exc.data, root)
    if message == exc.message and data is exc.data:
        return exc
    return BrokerError(exc.code, message, data)
