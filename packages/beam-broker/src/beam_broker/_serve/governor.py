"""The memory budget and the idle timeout: measuring Lean trees, choosing what to evict, evicting, keeping count.

Owns the eviction policy as a pure function (`plan`): when the Lean trees together are over the budget, the least
recently used idle documents go first (each frees what its file worker and its probe mirrors' workers hold), then
the least recently used idle workspaces (each frees its whole tree), until what they free covers the excess. Idle
means: no call holds the document (`DocState.users`); no call is in flight in the workspace
(`Occupancy.in_flight`). `Governor` runs it: it measures every runtime's tree (`memory`) on a timer and
soon after each open, shuts down runtimes idle past the idle timeout, keeps to the budget, and records every
eviction (`Evictions`: counts by kind and reason, the latest few for people; a log line each). An evicted
document, and every file of a shut-down runtime, reads `evicted` (unknown, never clean) until a call opens it
again. The broker hosts it and lends it its runtimes
and the way to close one; it never reaches into a Lean session.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Literal

import anyio

from beam_broker._outbound import log_failure
from beam_broker.config import BrokerConfig
from beam_lsp import Redactor

from . import memory

if TYPE_CHECKING:
    from beam_broker.runtime import WorkspaceRuntime

log = logging.getLogger("beam_broker")
MAX_EVICTED_FILES = 10_000
"""Files of shut-down runtimes remembered as `evicted` (beyond it the oldest read as untracked, never as clean)."""

Kind = Literal["document", "workspace"]
Reason = Literal["memory", "idle"]
RECENT = 50
"""Evictions kept for the status page (the counters keep every one)."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """Something the budget may evict: an idle document (`path`) or an idle workspace (`path` None)."""

    key: str
    root: str
    path: str | None
    used_at: float
    """`time.monotonic()` of its last use: the least recent goes first."""
    bytes: int
    """What evicting it frees, as measured."""

    @property
    def kind(self) -> Kind:
        return "workspace" if self.path is None else "document"


def plan(total: int, budget: int, documents: list[Candidate], workspaces: list[Candidate]) -> list[Candidate]:
    """What to evict so that `total` bytes come down to `budget`: idle documents first, then idle workspaces.

    A document whose eviction frees nothing measurable (a Lean that runs no worker per document), and a workspace
    whose tree measures nothing (no Lean running), are skipped. A workspace chosen makes its documents chosen before
    redundant (they go with it), and counts what it frees beyond them. When everything idle together frees less than
    the excess, all of it is returned.
    """
    excess = total - budget
    chosen: list[Candidate] = []
    if excess <= 0:
        return chosen
    freed = 0
    for doc in sorted(documents, key=lambda c: c.used_at):
        if freed >= excess:
            return chosen
        if doc.bytes > 0:
            chosen.append(doc)
            freed += doc.bytes
    for ws in sorted(workspaces, key=lambda c: c.used_at):
        if freed >= excess:
            break
        if ws.bytes <= 0:
            continue  # no Lean running (not started, or its start failed): shutting it down frees nothing
        inside = [c for c in chosen if c.key == ws.key]
        chosen = [c for c in chosen if c.key != ws.key]
        chosen.append(ws)
        freed += ws.bytes - sum(c.bytes for c in inside)
    return chosen


@dataclasses.dataclass(frozen=True)
class Eviction:
    """One eviction: what, why, when (`time.time()`), and the resident bytes it was measured to hold."""

    kind: Kind
    reason: Reason
    root: str
    path: str | None
    bytes: int
    at: float

    def wire(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "kind": self.kind,
            "reason": self.reason,
            "root": self.root,
            "path": self.path,
            "bytes": self.bytes,
            "at": round(self.at, 3),
        }


class Evictions:
    """Every eviction counted by kind and reason; the latest `RECENT` kept."""

    def __init__(self) -> None:
        """No evictions yet."""
        self.counts: dict[tuple[Kind, Reason], int] = {}
        self.recent: collections.deque[Eviction] = collections.deque(maxlen=RECENT)

    def add(self, kind: Kind, reason: Reason, root: str, path: str | None, freed: int) -> Eviction:
        """Record one eviction."""
        eviction = Eviction(kind, reason, root, path, freed, time.time())
        self.counts[(kind, reason)] = self.counts.get((kind, reason), 0) + 1
        self.recent.append(eviction)
        return eviction

    def total(self) -> int:
        """How many evictions there were."""
        return sum(self.counts.values())


class Governor:
    """Measures the Lean trees of a broker's runtimes and evicts for the memory budget and the idle timeout.

    Args:
        config: The budget (`memory_budget_mib`), the idle timeout and the measuring interval.
        redactor: Scrubs a failure's traceback before it is logged.
        runtimes: The broker's open runtimes that are neither starting nor being evicted, by key.
        close: Closes the runtime of a key (the broker's; it waits until its Lean tree is stopped).
        changed: Tells the broker's diagnostics listeners that a file's diagnostics changed.
    """

    def __init__(
        self,
        config: BrokerConfig,
        redactor: Redactor,
        runtimes: Callable[[], list[tuple[str, WorkspaceRuntime]]],
        close: Callable[[str], Awaitable[object]],
        changed: Callable[[str], None],
    ) -> None:
        self.config = config
        self.evictions = Evictions()
        self._redactor = redactor
        self._runtimes = runtimes
        self._close = close
        self._changed = changed
        self._files: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._measure = anyio.Event()
        self._round = anyio.Lock()  # one round at a time: a round plans from its own fresh measurement
        self.meter: Callable[[int | None], memory.TreeUsage] = memory.measure
        """Measures the tree under a server's process id (tests give a broker another)."""

    def measure_soon(self) -> None:
        """Measure now rather than at the next tick (a document was just opened)."""
        self._measure.set()

    def evicted(self, path: str) -> bool:
        """Whether a file was evicted (closed, or its workspace shut down) and no call has opened it since."""
        return path in self._files

    def opened(self, paths: Iterable[str]) -> None:
        """Documents a call opened: they are no longer evicted; measure soon (a new file worker grows)."""
        for path in paths:
            if path in self._files:
                del self._files[path]
                self._changed(path)
        self._measure.set()

    def _remember(self, paths: Iterable[str]) -> None:
        for path in paths:
            self._files.pop(path, None)
            self._files[path] = None
        while len(self._files) > MAX_EVICTED_FILES:
            self._files.popitem(last=False)

    def forget_under(self, root: str) -> list[str]:
        """Stop calling the files under `root` evicted (the workspace was dropped on purpose); returns them."""
        prefix = root.rstrip(os.sep) + os.sep
        gone = [p for p in self._files if p == root or p.startswith(prefix)]
        for path in gone:
            del self._files[path]
        return gone

    async def run(self) -> None:
        """Measure on a timer and after opens, evicting as needed, until cancelled."""
        interval = self.config.measure_interval
        if self.config.idle_timeout is not None:
            interval = min(interval, max(self.config.idle_timeout / 2, 0.05))
        while True:
            with anyio.move_on_after(interval):
                await self._measure.wait()
            self._measure = anyio.Event()
            try:
                await self.govern()
            except Exception as exc:  # a background task must not take the broker (and every Lean) down
                log_failure(log, self._redactor, exc, "measuring or evicting Lean runtimes failed")

    async def govern(self) -> None:
        """One round: measure every runtime, shut down the idle ones past the timeout, then keep to the budget."""
        async with self._round:
            await self._govern()

    async def _govern(self) -> None:
        for _, rt in self._runtimes():
            client = rt.live_client()
            rt.occupancy.usage = self.meter(client.pid if client is not None else None)
        timeout = self.config.idle_timeout
        if timeout is not None:
            now = time.monotonic()
            for key, rt in self._runtimes():
                if rt.occupancy.in_flight == 0 and now - rt.occupancy.last_active >= timeout:
                    await self._evict_runtime(key, rt, "idle")
        budget = self.config.memory_budget_mib
        if budget is None:
            return
        settled = self._runtimes()
        total = sum(rt.occupancy.usage.total for _, rt in settled)
        documents: list[Candidate] = []
        workspaces: list[Candidate] = []
        # The most recently used runtime (in use or not) is never shut down for memory: it is the one agents work
        # in, and a budget below what it alone holds would restart its Lean on every call. Its documents may close.
        latest = max(settled, key=lambda item: item[1].occupancy.last_active)[0] if settled else None
        for key, rt in settled:
            use = rt.occupancy
            if use.in_flight == 0 and key != latest:
                workspaces.append(Candidate(key, rt.root, None, use.last_active, use.usage.total))
            for doc in rt.documents.docs.values():
                if doc.users == 0 and not doc.lock.locked():
                    pool = rt.pools.get(doc.uri)
                    uris = [doc.uri, *(m.uri for m in pool.mirrors)] if pool is not None else [doc.uri]
                    held = sum(use.usage.documents.get(uri, 0) for uri in uris)
                    documents.append(Candidate(key, rt.root, str(doc.path), doc.used_at, held))
        for each in plan(total, budget * 1024 * 1024, documents, workspaces):
            target = dict(self._runtimes()).get(each.key)
            if target is None:
                continue
            if each.path is None:
                if target.occupancy.last_active != each.used_at:
                    continue  # used while the round awaited an earlier eviction: the plan no longer holds for it
                await self._evict_runtime(each.key, target, "memory")  # not when a call started meanwhile
            else:
                await self._evict_document(target, each.path, each.bytes, each.used_at)

    async def _evict_document(self, runtime: WorkspaceRuntime, path: str, freed: int, used_at: float) -> None:
        """Close an idle document (its probe mirrors and handles go with it); not when a call holds it by now.

        Nor when a call used it since the round planned (`used_at`): it is no longer the least recently used.
        """
        doc = runtime.documents.docs.get(path)
        if doc is None or doc.users or doc.lock.locked() or doc.used_at != used_at:
            return
        await runtime.close_doc(runtime.live_client(), path, idle_only=True)
        if path in runtime.documents.docs:
            return  # a call took it while its messages went out
        self._remember([path])
        self._record("document", "memory", runtime.root, path, freed)
        self._changed(path)

    async def _evict_runtime(self, key: str, runtime: WorkspaceRuntime, reason: Reason) -> None:
        """Shut an idle runtime down (its next call opens a new one); its files read `evicted` meanwhile."""
        if runtime.occupancy.in_flight or runtime.occupancy.evicting:
            return
        if dict(self._runtimes()).get(key) is not runtime:
            return  # dropped while the round awaited: `close(key)` would shut down whoever holds the root now
        runtime.occupancy.evicting = True  # from here a call that finds it opens a new runtime (no await before)
        files = runtime.files()
        freed = runtime.occupancy.usage.total
        # Remembered before the close's await: what comes while it runs then clears them after (a drop waiting for
        # this close forgets them, a call that opens one anew un-evicts it), whichever task resumes first.
        self._remember(files)
        await self._close(key)
        self._record("workspace", reason, runtime.root, None, freed)
        for path in files:
            self._changed(path)

    def _record(self, kind: Kind, reason: Reason, root: str, path: str | None, freed: int) -> None:
        self.evictions.add(kind, reason, root, path, freed)
        what = f"document {path} of {root}" if path is not None else f"workspace {root}"
        why = "the memory budget was exceeded" if reason == "memory" else "it was idle past the idle timeout"
        log.warning("evicted %s (%.0f MiB resident): %s", what, freed / 2**20, why)
