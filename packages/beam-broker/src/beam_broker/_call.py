"""One call's context: its runtime and event sink, the event watch on a document, and update-and-sync.

Owns: forwarding Lean's progress, Lake setup lines and scoped diagnostics of the watched document as events
(subscribed before the document is opened or changed, so nothing is missed; a small, flat cost per Lean
notification), the interpreted barrier that `sync`, `refresh`, `save` and `close_save` share (upstream's
order: incomplete, stale dependencies, or the verdict), and which document a position request asks while Lean
elaborates the document again (the document itself, or a probe mirror, so a
position-scoped answer never waits behind the rest of the file).
Handler modules build on it; it never maps beam-lsp errors (the broker's boundary does) and never speaks MCP.
The Lean client stack is imported lazily, so the registry stays cheap to import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from beam_lsp import Elaboration, path_to_uri
from beam_lsp.errors import unwrap_group

from . import _mirrors as mirrors
from . import _probe_text as probe
from . import _verdict as verdict
from . import models as m
from .errors import SYNC_BARRIER_INCOMPLETE, BrokerError
from .events import BrokerEvent, CallContext, DiagnosticEvent, FileProgressEvent, SetupEvent
from .workspace import WorkspaceDescriptor, resolve_path

if TYPE_CHECKING:
    from beam_lsp import DiagnosticsEvent, LeanClient, LspEvent, Position, SyncResult

    from ._documents import DocState, FileKey
    from ._freshness import Stale
    from .runtime import WorkspaceRuntime


def settled(client: LeanClient, doc: DocState) -> bool:
    """Whether Lean's last progress says it finished (or failed) the document's current version."""
    report = client.cache.document_progress(doc.uri)
    return report.progress_version == doc.version and (report.done or report.fatal)


def reelaborating(client: LeanClient, doc: DocState) -> bool:
    """Whether Lean is elaborating the document again after a change (not the first elaboration after opening).

    Lean 4.35's file worker answers position requests late while it elaborates (its task queue is full of the
    file's declarations), so position requests then go to a probe mirror (`Call.position`).
    """
    return doc.version > 1 and not settled(client, doc)


@dataclasses.dataclass
class Watch:
    """What one call watches: a document URI and, once known, its version and last progress.

    It also keeps what it streamed of the document's diagnostics: the ones already seen (each is streamed
    once) and whether one of the version's diagnostics is completion-blocking (the `errors` scope then shows
    only those).
    """

    uri: str
    path: str
    version: int = 0
    progress: verdict.ProgressTracker = dataclasses.field(default_factory=verdict.ProgressTracker)
    seen: set[str] = dataclasses.field(default_factory=set)
    built_imports: bool = False
    """Lake's setup for the document built something (a setup line said `Built`)."""
    built_oleans: Mapping[str, FileKey | None] | None = None
    """The `.olean` files of the document's imports when the last `Built` line came (`on_disk`): what its worker
    loaded. Taken then, not at the barrier: a build in between is not what the worker loaded."""
    on_disk: Callable[[], Mapping[str, FileKey | None] | None] | None = None
    _blocking: bool = False

    def bind(
        self, doc: DocState, changed: bool, on_disk: Callable[[], Mapping[str, FileKey | None] | None] | None = None
    ) -> None:
        """Set the tracked version; an unchanged document continues from its last known progress.

        `on_disk` gives the `.olean` files of the document's imports as they are (`Freshness.on_disk`).
        """
        self.version = doc.version
        if not changed and self.progress.updates == 0:
            self.progress = doc.progress.copy()
        self.on_disk = on_disk
        if on_disk is not None and self.built_imports:  # a `Built` line came before the document was known
            self.built_oleans = on_disk()

    def note(self, event: DiagnosticsEvent, scope: str | None) -> list[BrokerEvent]:
        """Events for the diagnostics a publish added that were not seen before.

        Lake setup lines, and the items in `scope` (None: none). Costs what the publish added, not what is
        stored.
        """
        added = verdict.visible(event.added)
        full = len(event.added) == len(event.diagnostics)  # a whole publish (or the first of its version)
        blocking = any(verdict.is_completion_blocking(d) for d in added)
        self._blocking = blocking if full else self._blocking or blocking
        out: list[BrokerEvent] = []
        for d in added:
            key = json.dumps(d.wire(), sort_keys=True)
            if key in self.seen:
                continue
            self.seen.add(key)
            if verdict.is_setup_line(d):
                if " Built " in d.message:
                    self.built_imports = True
                    self.built_oleans = self.on_disk() if self.on_disk is not None else self.built_oleans
                out.append(SetupEvent(d.message.strip(), self.path))
            if scope is not None and verdict.scoped(d, scope, any_blocking=self._blocking):
                item = verdict.item(d, path=self.path, uri=self.uri, version=event.version)
                out.append(DiagnosticEvent(item.dump()))
        return out


@dataclasses.dataclass(frozen=True)
class Synced:
    """A document read from disk and taken through the diagnostics barrier."""

    client: LeanClient
    doc: DocState
    sync: m.SyncResult
    progress: verdict.ProgressTracker
    changed: bool


@dataclasses.dataclass
class Call:
    """The context of one workspace-scoped call: the runtime it runs on, where its events go, what it echoes.

    A call holds on to the Lean session it first used: if that server dies during the call, the call fails with
    `workerExited` (the next call restarts the server) instead of silently continuing on a new one. It also
    holds every document it reads until `release` (the open-document bound never closes a document a call is
    using); `path` is the file it names, reported to diagnostics readers if the Lean server fails to start.
    """

    runtime: WorkspaceRuntime
    ctx: CallContext
    workspace: WorkspaceDescriptor
    path: str | None = None
    _client: LeanClient | None = None
    _held: list[DocState] = dataclasses.field(default_factory=list)

    def emit(self, event: BrokerEvent) -> None:
        """Send one event to the caller."""
        self.ctx.emit(event)

    async def client(self) -> LeanClient:
        """The call's Lean client: the runtime's (started on first use), then the same one for the whole call.

        Raises:
            ServerExited: The server this call was using has exited (the boundary makes it `workerExited`).
            BrokerError: `runtimeSetup` when no server can be started.
        """
        if self._client is None:
            self._client = await self.runtime.client(wanted=self.path)
        elif self._client.exited is not None:
            raise self._client.exited
        return self._client

    async def update(self, rel: str | Path) -> tuple[LeanClient, DocState, bool]:
        """Read the file from disk into Lean (see `WorkspaceRuntime.update`; `rel` may be the resolved path)."""
        client = await self.client()
        doc, changed = await self.runtime.update(client, rel, hold=self._held)
        return client, doc, changed

    async def checked(self, pin: m.PinnedInput) -> tuple[LeanClient, DocState]:
        """`update`, insisting on the caller's document version or snapshot (see `WorkspaceRuntime.checked`)."""
        client = await self.client()
        return client, await self.runtime.checked(client, pin, hold=self._held)

    def release(self) -> None:
        """The call is over: let go of the documents it held."""
        self.runtime.release(self._held)

    async def close(self, rel: str) -> None:
        """Close the document in the call's server, or the running one; starts no server."""
        await self.runtime.close_doc(self._client or self.runtime.live_client(), rel)

    @contextlib.asynccontextmanager
    async def position(
        self, client: LeanClient, doc: DocState, pos: Position, mirror: mirrors.Mirror | None = None
    ) -> AsyncIterator[str]:
        """The URI to ask Lean about `pos` of the document's current version, soonest.

        The document itself when Lean finished its version or elaborates it for the first time; while Lean
        elaborates it again after a change, a probe mirror holding the text up to the end of the declaration
        around `pos` (`mirror`, or one checked out for the block), whose worker answers as soon as that
        declaration is elaborated. Positions are the same in both, and so are the answers. The position must
        have been validated against the document's text.
        """
        if not reelaborating(client, doc):
            yield doc.uri
            return
        text = probe.declaration_text(client.document(doc.uri), pos)
        async with contextlib.AsyncExitStack() as stack:
            if mirror is None:
                mirror = await stack.enter_async_context(self.runtime.pool(doc.uri).checkout(text))
            await mirrors.show(client, mirror, text, freshness=self.runtime.freshness)
            try:
                yield mirror.uri
            except Exception:
                mirror.text = None  # a request that failed (a crashed worker?): the next one sends the text again
                raise

    @contextlib.asynccontextmanager
    async def watch(self, client: LeanClient, watch: Watch, scope: str | None) -> AsyncIterator[Watch]:
        """Forward the document's progress, setup lines and (scoped, deduplicated) diagnostics as events.

        Subscribe *before* the document is opened or changed, so no early notification is missed. The cost
        per Lean notification is small and flat: a progress report is read from its summary (its ranges only
        for a report streamed as an event, see `ProgressTracker.track`), reports of other documents are not
        read at all, unread progress is coalesced, and a publish costs what it adds (only `added` is
        deduplicated).
        """
        from beam_lsp import DiagnosticsEvent, ProgressEvent

        def handle(event: LspEvent) -> None:
            if isinstance(event, ProgressEvent):
                report = event.report
                if report.uri != watch.uri or (report.version is not None and report.version < watch.version):
                    return
                if watch.progress.track(event):
                    self.emit(FileProgressEvent(watch.path, watch.progress.snapshot().dump()))
            elif isinstance(event, DiagnosticsEvent) and event.uri == watch.uri:
                if event.version is not None and event.version < watch.version:
                    return
                for out in watch.note(event, scope):
                    self.emit(out)

        async with client.subscribe(coalesce_progress=True) as events, anyio.create_task_group() as tg:

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

    async def update_and_sync(self, rel: str, scope: str, *, include_items: bool) -> Synced:
        """Read the file into the mirror and take the interpreted barrier, streaming events throughout.

        Raises:
            BrokerError: `syncBarrierIncomplete` (see `interpret`), or what reading the file raises.
        """
        rt = self.runtime
        path = resolve_path(rt.root, rel)
        client = await self.client()
        watch = Watch(path_to_uri(path), rt.display(path))
        with unwrap_group():
            async with self.watch(client, watch, scope):
                client, doc, changed = await self.update(path)
                watch.bind(doc, changed, lambda: rt.freshness.on_disk(doc.loaded))
                if changed:  # Lean elaborates the file meanwhile: ask Lake what Beam does not know yet
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(rt.freshness.learn, doc.imports, rt.documents.held())
                        result = await client.sync(doc.uri)
                else:
                    result = await client.sync(doc.uri)
        stale = await rt.freshness.stale(
            doc.imports, doc.loaded, rt.documents.held(), settle=True, rebuilt_at_setup=watch.built_oleans
        )
        await rt.tell_rebuilt()
        sync = self.interpret(result, watch.progress, scope, include_items=include_items, doc=doc, stale=stale)
        return Synced(client, doc, sync, watch.progress, changed)

    def interpret(
        self,
        result: SyncResult,
        progress: verdict.ProgressTracker,
        scope: str,
        *,
        include_items: bool,
        doc: DocState,
        stale: list[Stale],
    ) -> m.SyncResult:
        """Interpret a barrier result: incomplete, stale imports, or the verdict.

        Incomplete: Lean did not finish, or says imports are out of date. Stale imports (`_freshness`): an import
        whose artifacts are not made from its current source, or that were rebuilt after the document's worker
        loaded them.

        Raises:
            BrokerError: `syncBarrierIncomplete` with the stale imports and a recovery plan.
        """
        documents = self.runtime.documents
        if result.elaboration is Elaboration.COMPLETE and not progress.done:
            progress.done = True
            progress.range_start_line = None
        diags = verdict.visible(result.diagnostics)
        path = self.runtime.display(doc.path)
        incomplete = [d for d in diags if verdict.is_completion_blocking(d)]
        if result.elaboration is not Elaboration.COMPLETE or incomplete or stale:
            progress.done = False
            raise _incomplete(result, progress, doc, path, incomplete, stale)
        items = None
        if include_items:
            items = [
                verdict.item(d, path=path, uri=doc.uri, version=doc.version, save_blocking=d.is_error)
                for d in diags
                if verdict.scoped(d, scope, any_blocking=bool(incomplete))
            ]
        sync = m.SyncResult(
            path=path,
            version=doc.version,
            snapshot=doc.snapshot,
            diagnostics=m.Diagnostics(counts=verdict.counts(diags), items=items),
            readiness=verdict.readiness(diags, elaborated=True),
        )
        documents.record_sync(doc, progress)
        return sync


def stale_imports(path: str, stale: list[Stale]) -> BrokerError:
    """`syncBarrierIncomplete` for a probe whose document imports modules that are not built from their sources."""
    save_deps, plan = recovery(path, stale)
    names = ", ".join(s.module for s in stale)
    return BrokerError(
        SYNC_BARRIER_INCOMPLETE,
        f"imports of {path} are out of date ({names}): Lean would answer from their old build, so the probe did not "
        f"run. {next_step(path, save_deps)}",
        {"targetPath": path, "staleDirectDeps": [s.wire() for s in stale], "saveDeps": save_deps, "recoveryPlan": plan},
    )


def next_step(path: str, save_deps: list[str]) -> str:
    """What to do about stale imports, in one sentence of an error message."""
    if save_deps:
        return f"Save them in this order: {', '.join(save_deps)}; then retry."
    return f"Refresh {path}: its Lean worker loaded their old build."  # saved since the worker loaded them


def recovery(path: str, stale: list[Stale]) -> tuple[list[str], list[str]]:
    """The imports to save (in the order to save them) and the recovery plan for a document with stale imports.

    Upstream's order: save each import that needs it (imports first), refresh the document, `lake build`.
    """
    save_deps = [s.path for s in stale if s.needs_save]
    plan = [f'lean-beam save "{p}"' for p in save_deps] + [f'lean-beam refresh "{path}"', "lake build"]
    return save_deps, plan


def _incomplete(
    result: SyncResult,
    progress: verdict.ProgressTracker,
    doc: DocState,
    path: str,
    incomplete: list[Any],
    stale: list[Stale],
) -> BrokerError:
    fp = progress.snapshot().model_dump_json(exclude_none=True)
    save_deps, plan = recovery(path, stale)
    # The message is all a person reads (`lean-beam` prints it alone): name what to do when Beam knows it.
    names = ", ".join(s.module for s in stale)
    if save_deps:
        order = ", ".join(save_deps)
        advice = f"Its imports are out of date ({names}): save them in this order: {order}; then refresh {path}."
    elif stale:
        advice = f"Its imports ({names}) were rebuilt after Lean loaded them: refresh {path}."
    else:
        advice = (
            "An imported target may be stale or broken, or the Lean worker may have exited. Run `lake build` or fix "
            "the upstream module first."
        )
    return BrokerError(
        SYNC_BARRIER_INCOMPLETE,
        f"Lean diagnostics barrier did not complete for {doc.uri} at version {doc.version}; fileProgress={fp}. "
        + advice,
        {
            "targetPath": path,
            "elaboration": result.elaboration.value,
            "staleDirectDeps": [s.wire() for s in stale],
            "saveDeps": save_deps,
            "completionBlockingDiagnostics": [
                {
                    "range": (d.fullRange or d.range).wire(),
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
