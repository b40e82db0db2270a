"""One workspace runtime: its Lean session (restarted on demand), documents, probe mirrors and proof handles.

`WorkspaceRuntime.open()` is an async context manager owning the runtime's task group: the Lean session task and
the idle-mirror reaper live there, and leaving the block stops them (the Lean process group is killed). The
runtime knows nothing of the broker that hosts it: settings, environment, redactor, the save lock and the
diagnostics listener are injected. It never writes `.lean` sources, never speaks MCP, and does not translate
beam-lsp errors (the broker's boundary does), except that a server that cannot start is `runtimeSetup`.

It also keeps the start-up state the diagnostics resources answer from (`starting`, `start_failure`: mcpls's
"server starting" and "failed to start"), and the bound on open documents (`BrokerConfig.max_open_documents`:
the least recently used documents no call holds are closed in Lean; their diagnostics stay readable with
`open: false`, and the next call on one reopens it), and what the broker's memory budget and idle timeout need of
it (`occupancy`: calls in flight, last use, the last measurement of its Lean tree). Its Lean command comes from the
project's toolchain when elan has it installed (`config.workspace_command`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shlex
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus

from beam_lsp import (
    BeamLspError,
    DiagnosticsCache,
    JsonValue,
    LeanClient,
    Redactor,
    ServerRequestHandler,
    path_to_uri,
)
from beam_lsp.errors import unwrap_group

from . import _lake as lake
from . import _mirrors as mirrors
from ._documents import DocState, Documents, check_pin, header_imports, header_text, read_source, text_hash
from ._freshness import Freshness, LakeCheck
from ._handles import HandleStore
from ._metrics import Metrics
from ._mirrors import MirrorPool, is_mirror_path
from ._outbound import log_failure
from ._serve import memory
from .config import BrokerConfig, Toolchain, lake_command, slow_reports, workspace_command
from .errors import CONTENT_MODIFIED, RUNTIME_SETUP, SERVER_STARTING, BrokerError
from .models import PinnedInput
from .workspace import cache_key, display_path, resolve_path

log = logging.getLogger("beam_broker")


async def _refuse_edit(_params: JsonValue) -> JsonValue:
    return {"applied": False, "failureReason": "Beam never edits sources"}


SERVER_REQUESTS: Final[Mapping[str, ServerRequestHandler]] = MappingProxyType({"workspace/applyEdit": _refuse_edit})
"""Beam's policy for Lean's requests to the client: an edit Lean asks for is refused (Beam never announces
`workspace.applyEdit`, so Lean puts a code action's edit in the action itself)."""


@dataclasses.dataclass
class _Session:
    client: LeanClient
    epoch: int
    token: str
    stop: anyio.Event
    done: anyio.Event


class WorkspaceRuntime:
    """One workspace: its Lean session, documents, freshness of imports, mirrors, handles and metrics."""

    def __init__(
        self,
        root: str,
        *,
        config: BrokerConfig,
        env: Mapping[str, str],
        redactor: Redactor,
        save_lock: anyio.Lock,
        task_group: TaskGroup,
    ) -> None:
        """Internal: use `WorkspaceRuntime.open`."""
        self.root = root
        self.key = cache_key(root)
        self.config = config
        self.env = env
        self.redactor = redactor
        self.save_lock = save_lock
        self.created = time.monotonic()
        self.metrics = Metrics()
        self.cache = DiagnosticsCache(redactor)
        self.layout = lake.Layouts(root).get  # where sources and artifacts are: the lakefile's srcDir, buildDir
        limit = config.max_source_bytes
        self.documents = Documents(root, self.display, max_source_bytes=limit, layout=self.layout)
        check = _lake_check(root, config, env, redactor)
        self.freshness = Freshness(root, self.display, check, max_source_bytes=limit, layout=self.layout)
        """What Beam knows of the workspace's build artifacts (it outlives sessions: it is about the disk)."""
        self.handles = HandleStore()
        self.pools: dict[str, MirrorPool] = {}
        self.closed = False
        self.starting = False
        """A Lean server is being started for this workspace (its diagnostics read as `serverStarting`)."""
        self.start_failure: BrokerError | None = None
        """The `runtimeSetup` error of the last start, until a start succeeds."""
        self.on_diagnostics: Callable[[str], None] | None = None
        self.occupancy = memory.Occupancy()  # for the memory budget and the idle timeout (the broker's governor)
        self.toolchain: Toolchain | None = None  # the project toolchain the server runs (None: configured command)
        self._tg = task_group
        self._session: _Session | None = None
        self._session_lock = anyio.Lock()
        self._next_epoch = 1
        self._reaping = False

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        root: str,
        config: BrokerConfig,
        *,
        env: Mapping[str, str],
        redactor: Redactor,
        save_lock: anyio.Lock,
        on_diagnostics: Callable[[str], None] | None = None,
    ) -> AsyncIterator[WorkspaceRuntime]:
        """A runtime for the canonical `root`; Lean starts on first use, and stops when the block is left.

        Args:
            root: The canonical workspace root.
            config: Broker settings (server command, mirror limits).
            env: Environment of the Lean and Lake processes.
            redactor: Scrubs secrets from Lean text and Lake output.
            save_lock: Serializes Lake builds (shared by every runtime of a broker).
            on_diagnostics: Called with the canonical path of each source file whose cached diagnostics change
                (probe mirrors are never reported).
        """
        with unwrap_group():
            async with anyio.create_task_group() as tg:
                runtime = cls(root, config=config, env=env, redactor=redactor, save_lock=save_lock, task_group=tg)
                if on_diagnostics is not None:
                    listener = on_diagnostics
                    runtime.on_diagnostics = listener
                    runtime.cache.add_listener(lambda path: None if is_mirror_path(path) else listener(path))
                try:
                    yield runtime
                finally:
                    with anyio.CancelScope(shield=True):
                        await runtime._shutdown()
                    tg.cancel_scope.cancel()

    @property
    def epoch(self) -> int | None:
        """The live session's epoch (bumped by every restart), or None without a session."""
        return self._session.epoch if self._session else None

    def session_token(self) -> str | None:
        """Identity of the live session (pid and start time), for handles."""
        return self._session.token if self._session else None

    def display(self, path: Path) -> str:
        """Root-relative path (or URI outside the root)."""
        return display_path(self.root, path)

    # ---- session lifecycle --------------------------------------------------------------------------
    async def client(self, *, wanted: str | None = None) -> LeanClient:
        """The live Lean client, starting or restarting the server as needed.

        While a server starts, `starting` is set. When a start fails, its error is kept as `start_failure` and
        every file this runtime knows, plus `wanted` (the tool path of the file the caller is about to use), is
        reported to the diagnostics listener, so that readers of those files see the failure.

        Raises:
            BrokerError: `runtimeSetup` when the server cannot be started; `contentModified` after a drop.
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
            self.starting = True
            try:
                client = await self._start_session()
            except BrokerError as exc:
                self.starting = False
                self.start_failure = exc.redacted(self.redactor)
                named = [str(resolve_path(self.root, wanted))] if wanted is not None else []
                self._report([*self.files(), *named])
                raise _copy(self.start_failure) from None
            finally:
                self.starting = False
            self.start_failure = None
            return client

    def check_started(self) -> None:
        """Raise unless the workspace's Lean server is usable as far as cached diagnostics go.

        Raises:
            BrokerError: `serverStarting` while a server starts; the last start's `runtimeSetup` error when it
                failed (until a start succeeds).
        """
        if self.starting:
            raise BrokerError(
                SERVER_STARTING,
                f"the Lean server of {self.root} is starting; its diagnostics are not known yet",
                {"root": self.root},
            )
        if self.start_failure is not None:
            raise _copy(self.start_failure)

    def _report(self, paths: list[str]) -> None:
        if self.on_diagnostics is not None:
            for path in sorted(set(paths)):
                self.on_diagnostics(path)

    async def _start_session(self) -> LeanClient:
        cmd, self.toolchain = workspace_command(self.config, self.env, self.root)
        slow = slow_reports(cmd)
        if slow is not None and self._next_epoch == 1:  # once per runtime, not on every restart
            log.info("%s: %s", self.root, slow)  # info: doctor and lean-beam-mcp's start-up say it louder
        epoch = self._next_epoch
        self._next_epoch += 1
        try:
            session: _Session = await self._tg.start(self._run_session, cmd, epoch)
        except (OSError, ValueError, BeamLspError) as exc:  # ValueError: a NUL in the command or environment
            message = f"could not start the Lean server `{shlex.join(cmd)}` in {self.root}: {exc}"
            raise BrokerError(RUNTIME_SETUP, self.redactor.redact(message)) from None
        self._session = session
        self.documents.clear()
        self.handles.clear()
        self.pools.clear()
        self.metrics.sessionStarts += 1
        return session.client

    async def _run_session(self, cmd: list[str], epoch: int, *, task_status: TaskStatus[_Session]) -> None:
        stop, done = anyio.Event(), anyio.Event()
        started = False
        try:
            start = functools.partial(LeanClient.start, cwd=self.root, env=dict(self.env), cache=self.cache)
            async with start(cmd, redactor=self.redactor, server_requests=SERVER_REQUESTS) as client:
                token = f"{client.pid}-{time.monotonic_ns()}"
                task_status.started(_Session(client, epoch, token, stop, done))
                started = True
                await stop.wait()
        except Exception as exc:
            if not started:
                raise  # the caller of `start` gets it
            log_failure(log, self.redactor, exc, "the Lean session %d of %s ended with an error", epoch, self.root)
        finally:
            done.set()

    async def _stop_session(self, session: _Session) -> None:
        session.stop.set()
        with anyio.CancelScope(shield=True):
            await session.done.wait()

    async def _shutdown(self) -> None:
        self.closed = True
        async with self._session_lock:
            if self._session is not None:
                await self._stop_session(self._session)
                self._session = None
            self.documents.clear()
            self.handles.clear()
            self.pools.clear()

    async def tell_rebuilt(self) -> None:
        """Tell the running Lean which modules were seen rebuilt (their `.ilean` files: Lean's reference index)."""
        client = self.live_client()
        rebuilt = self.freshness.take_rebuilt()
        if client is not None and rebuilt:
            await client.files_changed([path_to_uri(Path(p)) for p in rebuilt])

    # ---- documents ----------------------------------------------------------------------------------
    def live_client(self) -> LeanClient | None:
        """The client of the running session, if it is alive (never starts one)."""
        session = self._session
        return session.client if session is not None and session.client.exited is None else None

    async def update(
        self, client: LeanClient, rel: str | Path, *, hold: list[DocState] | None = None
    ) -> tuple[DocState, bool]:
        """Read the file from disk into `client`'s mirror: didOpen, or didChange+didSave when its text changed.

        A didOpen may close the least recently used documents beyond `config.max_open_documents`.

        Args:
            client: The call's Lean client.
            rel: The tool path, or the file's path as `resolve_path` gave it.
            hold: The caller's held documents: the document is held (never closed by the bound) from the moment
                it is tracked until the caller passes the list to `release`.

        Returns:
            The document, and whether this call sent didOpen/didChange.
        """
        path = rel if isinstance(rel, Path) else resolve_path(self.root, rel)
        text = await read_source(path, limit=self.config.max_source_bytes)
        doc = self.documents.track(path, text)
        if hold is not None:
            doc.users += 1
            hold.append(doc)
        async with doc.lock:
            if not self.documents.is_current(doc):  # closed while we waited: start over
                return await self.update(client, path, hold=hold)
            opened = not client.is_open(doc.uri)
            if opened:
                doc.reopened_over = self.documents.reopening(path)
                doc.loaded = await self.freshness.loading(header_imports(text))
                doc.opened(await client.open(doc.uri, text), text, self.documents.next_snapshot())
                scratch = path_to_uri(Path(self.root) / mirrors.SCRATCH)
                if self.config.warm_scratch and scratch not in self.pools:  # the first document: see `mirrors.warm`
                    warm = self.pool(scratch)
                    self._tg.start_soon(mirrors.warm, client, warm, header_text(text), self.freshness, self.redactor)
            elif doc.text_hash == text_hash(text):
                return doc, False
            else:
                imports = header_imports(text)
                if imports != doc.imports:  # Lean restarts the worker, which loads the imports again
                    doc.loaded = await self.freshness.loading(imports)
                before = client.document(doc.uri).text
                version = await client.change(doc.uri, text, defer=self.config.change_delay)
                self.handles.invalidate_document(doc.uri, keep_version=version)
                doc.changed(version, text, self.documents.next_snapshot())
                pool = self.pools.get(doc.uri)
                if pool is not None and pool.mirrors:
                    self._tg.start_soon(self._follow, client, pool, before, text)
        if opened:
            for old in self.documents.beyond(self.config.max_open_documents, keep=doc):
                await self.close_doc(client, str(old.path), idle_only=True)
        return doc, True

    def release(self, held: list[DocState]) -> None:
        """A call is done with the documents it held (see `update`): each was used until now."""
        for doc in held:
            doc.users -= 1
            self.documents.touch(doc)  # the bound's and the budget's order: a long call's document is not the oldest
        held.clear()

    async def checked(self, client: LeanClient, pin: PinnedInput, *, hold: list[DocState] | None = None) -> DocState:
        """`update`, then insist the caller's version (or snapshot) is the current one.

        Raises:
            BrokerError: `contentModified` with `data.reason = "documentVersionMismatch"`, or for a snapshot
                `"snapshotMismatch"` (upstream Beam's error data: `expectedSnapshot`, `currentSnapshot`, `uri`).
        """
        doc, changed = await self.update(client, pin.path, hold=hold)
        check_pin(doc, pin, reopened=changed)
        return doc

    async def close_doc(self, client: LeanClient | None, rel: str, *, idle_only: bool = False) -> None:
        """Forget a document, its mirrors and its handles, and close it in `client` when that is alive.

        No error when it is not open. Under the document's lock (messages of an update in flight go out first; an
        update waiting for it starts over and reopens the document) it stays current until its didClose is out: a
        call coming for it meanwhile waits, rather than open it anew for this close to end (a sync got "file worker
        terminated"). With `idle_only` (the open-document bound, the memory budget) one a call started to hold stays.
        """
        path = resolve_path(self.root, rel)
        doc = self.documents.docs.get(str(path))
        if doc is None:
            return
        async with doc.lock:
            if not self.documents.is_current(doc) or (idle_only and doc.users):
                return
            try:
                if client is not None and client.exited is None:
                    self.handles.invalidate_document(doc.uri)
                    pool = self.pools.pop(doc.uri, None)
                    if pool is not None:
                        await pool.close_all(client)
                    await client.close(doc.uri)
            finally:
                if self.documents.docs.get(str(path)) is doc:
                    if idle_only:  # Beam's own close: a caller may still hold a version of this open
                        self.documents.evict(path)
                    else:
                        self.documents.pop(path)

    # ---- probe mirrors ------------------------------------------------------------------------------
    def pool(self, uri: str) -> MirrorPool:
        """The probe-mirror pool of a source document (created on first use; starts the idle reaper)."""
        pool = self.pools.get(uri)
        if pool is None:
            pool = MirrorPool(uri, self.config.mirrors_per_document)
            self.pools[uri] = pool
        if not self._reaping:
            self._reaping = True
            self._tg.start_soon(self._reap_mirrors)
        return pool

    async def _reap_mirrors(self) -> None:
        idle = self.config.mirror_idle_seconds
        while True:
            await anyio.sleep(max(idle / 2, 0.05))
            session = self._session
            client = session.client if session is not None else None
            for pool in list(self.pools.values()):
                try:
                    await pool.close_idle(client, idle)
                except Exception as exc:  # a background task must not take the runtime (and its Lean) down
                    log_failure(log, self.redactor, exc, "closing idle probe mirrors of %s failed", self.root)

    async def _follow(self, client: LeanClient, pool: MirrorPool, old: str, new: str) -> None:
        try:
            await mirrors.follow(client, pool, old, new, delay=mirrors.FOLLOW_DELAY)
        except Exception as exc:  # a background task must not take the runtime (and its Lean) down
            log_failure(log, self.redactor, exc, "applying an edit to the probe mirrors of %s failed", pool.source_uri)

    # ---- reports ------------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """This workspace's entry in `Broker.stats()`."""
        session = self._session
        if session is not None and session.client.exited is None:
            sess: dict[str, Any] = {
                "active": True,
                "workspaceId": self.key,
                "root": self.root,
                "epoch": session.epoch,
                "openDocCount": len(self.documents.docs),
                "client": dataclasses.asdict(session.client.stats()),
            }
        else:
            sess = {"active": False}
        return {
            "id": self.key,
            "root": self.root,
            "uptimeMs": int((time.monotonic() - self.created) * 1000),
            "sessions": {"lean": sess},
            "byBackend": {"lean": self.metrics.wire()},
        }

    async def open_files(self) -> list[dict[str, Any]]:
        """Open documents with their disk status (reads each file)."""
        return await self.documents.open_files()

    def open_paths(self) -> list[str]:
        """Canonical paths of the open source documents (no probe mirrors)."""
        return [str(doc.path) for doc in self.documents.docs.values()]

    def knows(self, canonical: str) -> bool:
        """Whether this runtime has the file open or cached."""
        return canonical in self.documents.docs or self.cache.get(canonical).tracked

    def contains(self, canonical: str) -> bool:
        """Whether a canonical path lies under this workspace's root."""
        return canonical == self.root or canonical.startswith(self.root.rstrip(os.sep) + os.sep)

    def diagnostics(self, canonical: str) -> dict[str, Any] | None:
        """The cached diagnostics of a file this runtime has open or cached (mcpls fields), else None."""
        snap = self.cache.get(canonical)
        if not (snap.tracked or canonical in self.documents.docs):
            return None
        out = snap.wire()
        out["tracked"] = True
        out["path"] = canonical
        return out

    def files(self) -> list[str]:
        """Every source file this runtime knows (open or cached), canonical paths, sorted."""
        known = {p for p in self.cache.files() if not is_mirror_path(p)} | set(self.open_paths())
        return sorted(os.path.realpath(p) for p in known)


def _lake_check(root: str, config: BrokerConfig, env: Mapping[str, str], redactor: Redactor) -> LakeCheck:
    """How the workspace's freshness asks Lake whether modules are built (`_lake.check_built`)."""

    def command() -> str | None:
        try:
            return lake_command(config, env, root)
        except BrokerError:  # no Lake to ask
            return None

    return functools.partial(lake.check_built, root, command, env, redactor)


def _copy(error: BrokerError) -> BrokerError:
    """A fresh instance of a kept error (raising one instance again and again would grow its traceback)."""
    return BrokerError(error.code, error.message, error.data)
