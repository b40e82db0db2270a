"""The per-document sync barrier and the crash notices of one `LeanClient`.

Owns what only the client knows about an open document: the version a barrier completed for, whether its
file worker crashed (learned from a -32901/-32902 answer or a fatal `$/lean/fileProgress`), the lock that keeps
one document's notifications in order, and the crash notices Lean still owes. What Lean reported (progress,
publish versions, diagnostics) is read from the `DiagnosticsCache`, its only owner; the barrier feeds Lean's
progress into it, except a stale crash notice.

Rules the barrier keeps:

- never a false complete: `complete` needs a final progress (`processing: []`) for exactly the version, and no
  crash since that version was sent;
- a crashed worker ends the wait at once with `failed` (the next change restarts the worker);
- Lean answers the pending requests of a crashed worker with errors, then sends one fatal progress. When the
  crash was learned from an error, that later notice may arrive after the document was changed or reopened,
  and must not mark the new worker as crashed.

It sends nothing itself (the client passes the `waitForDiagnostics` request in) and must not know about
processes or JSON-RPC.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import anyio

from ._progress import FileProgress
from .diagnostics import Availability, DiagnosticsCache, Elaboration
from .errors import ContentModified, DocumentNotOpen, WorkerCrashed
from .lean import LeanDiagnostic, LeanFileProgressParams, Range


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


WaitRequest = Callable[[str, int], Awaitable[None]]
"""Sends `textDocument/waitForDiagnostics` for (uri, version) and returns when Lean answers."""


@dataclasses.dataclass(eq=False)
class _Document:
    """The barrier's state for one open document (a new one per `open`)."""

    barrier_version: int | None = None
    reported_version: int | None = None  # the version a reported barrier (no waitForDiagnostics) completed for
    crashed: bool = False
    changed: anyio.Event | None = None  # made by a waiter, set (and dropped) by the next report: no event per report
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)

    def poke(self) -> None:
        if self.changed is not None:
            self.changed.set()
            self.changed = None

    async def wait_changed(self) -> None:
        if self.changed is None:
            self.changed = anyio.Event()
        await self.changed.wait()


class Barrier:
    """Sync barriers for the open documents of one client; see the module docstring."""

    def __init__(self, cache: DiagnosticsCache) -> None:
        """Read Lean's reports from `cache` (and record its progress there)."""
        self._cache = cache
        self._docs: dict[str, _Document] = {}
        self._crash_notices: dict[str, tuple[_Document, int]] = {}
        # The lock of a document whose `didClose` is still queued: a reopen takes it over, so that its `didOpen`
        # goes out after that `didClose` (a fresh lock would let it overtake, and Lean would close the new one).
        self._closing: dict[str, anyio.Lock] = {}
        self._stopped = False
        self.worker_crashes = 0

    # ---- document lifetimes -----------------------------------------------------------------------------
    def open(self, uri: str) -> anyio.Lock:
        """Start tracking a newly opened document; returns its notification lock."""
        closing = self._closing.pop(uri, None)
        doc = _Document() if closing is None else _Document(lock=closing)
        self._docs[uri] = doc
        self._cache.document_opened(uri)
        return doc.lock

    def lock(self, uri: str) -> anyio.Lock:
        """The lock that keeps one document's notifications in order."""
        return self._docs[uri].lock

    def changed(self, uri: str) -> None:
        """A new version is being sent: it runs in a fresh worker, so the crash flag is cleared."""
        doc = self._docs.get(uri)
        if doc is not None:
            doc.crashed = False

    def close(self, uri: str, *, server_clears: bool = False) -> anyio.Lock:
        """Stop tracking a document; its waiters wake up and see it closed. Returns its notification lock.

        The cache keeps what Lean said while the document was open (`server_clears`: `didClose` is being sent,
        so Lean owes one clearing publish; see `DiagnosticsCache.document_closed`). A crash notice Lean still
        owes for the closed document stays expected, so that it is recognised as stale if it arrives after the
        document was reopened.
        """
        doc = self._docs.pop(uri, None) or _Document()
        self._cache.document_closed(uri, server_clears=server_clears)
        doc.poke()
        if server_clears:
            self._closing[uri] = doc.lock
        return doc.lock

    def close_sent(self, uri: str, lock: anyio.Lock) -> None:
        """The `didClose` that `close` returned `lock` for is out (or will never be): a reopen needs no wait.

        Called with `lock` held. Kept while another task waits for it (the `didClose` of a later lifetime).
        """
        if self._closing.get(uri) is lock and not lock.statistics().tasks_waiting:
            del self._closing[uri]

    def stop(self) -> None:
        """The server is gone (or being shut down): wake every waiter and close the documents in the cache.

        The cache keeps what Lean said while they were open; no clearing publish is owed (Lean publishes `[]`
        for every open file on `shutdown`, which the closed documents ignore).
        """
        self._stopped = True
        for uri, doc in self._docs.items():
            self._cache.document_closed(uri)
            doc.poke()

    # ---- what Lean says ---------------------------------------------------------------------------------
    def worker_crashed(self, uri: str | None, version: int | None) -> None:
        """A request failed because a file worker crashed: the worker of open document `uri`, at `version`."""
        self.worker_crashes += 1
        doc = self._docs.get(uri) if uri is not None else None
        if uri is not None and doc is not None and version is not None:
            doc.crashed = True
            self._crash_notices[uri] = (doc, version)
            doc.poke()

    def published(self, uri: str) -> None:
        """The cache holds a new publish for `uri`: re-check its waiters."""
        doc = self._docs.get(uri)
        if doc is not None:
            doc.poke()

    def progress(self, report: FileProgress | LeanFileProgressParams, current_version: int | None) -> bool:
        """Record a `$/lean/fileProgress` in the cache and wake waiters.

        A stale crash notice, and progress the cache ignores (a closed document, or its previous lifetime), is
        dropped.

        Args:
            report: The notification (its ranges are not read here).
            current_version: The version the client last sent for the document, None when it is not open.

        Returns:
            Whether the progress was recorded.
        """
        if isinstance(report, LeanFileProgressParams):
            report = FileProgress.from_model(report)
        uri = report.uri
        if report.fatal and self._stale_crash_notice(uri, current_version):
            return False
        if not self._cache.progress(report):
            return False
        doc = self._docs.get(uri)
        if doc is None:
            return True
        version = report.version
        # A fatal report for a version already replaced (the crash notice arriving after `restart_document`)
        # must not mark the new version as crashed.
        if report.fatal and (version is None or current_version is None or version >= current_version):
            doc.crashed = True
        doc.poke()
        return True

    def _stale_crash_notice(self, uri: str, current_version: int | None) -> bool:
        expected = self._crash_notices.pop(uri, None)
        if expected is None:
            return False
        doc, version = expected
        return doc is not self._docs.get(uri) or version != current_version

    # ---- the barrier ------------------------------------------------------------------------------------
    async def sync(self, uri: str, version: int, *, timeout: float | None, request: WaitRequest | None) -> SyncResult:
        """Wait until Lean finished `version` of `uri` (or the deadline passed) and describe the outcome.

        With `request` None (the reported barrier, see `LeanClient.sync`), no `waitForDiagnostics` is sent:
        the version is complete once its final progress arrived and a publish of it is stored.

        Raises:
            DocumentNotOpen: The document is not open, or was closed during the wait.
        """
        doc = self._docs.get(uri)
        if doc is None:
            raise DocumentNotOpen(uri)
        if version not in (doc.barrier_version, doc.reported_version if request is None else None):
            with anyio.move_on_after(timeout):
                try:
                    if not doc.crashed and request is not None:
                        await request(uri, version)
                except WorkerCrashed:
                    self.worker_crashed(uri, version)
                except ContentModified:  # Lean's answer to the wait of a document closed meanwhile
                    if self._docs.get(uri) is not doc:
                        raise DocumentNotOpen(uri) from None
                    raise
                await self._wait(uri, doc, version, published=request is None)
                report = self._cache.document_progress(uri)
                if not doc.crashed and report.done and report.progress_version == version:
                    if request is not None:
                        doc.barrier_version = version
                    elif report.diagnostics_version == version:
                        doc.reported_version = version
        if self._docs.get(uri) is not doc:
            raise DocumentNotOpen(uri)
        return self._result(uri, doc, version)

    async def _wait(self, uri: str, doc: _Document, version: int, *, published: bool = False) -> None:
        while not (self._stopped or doc.crashed or self._docs.get(uri) is not doc):
            report = self._cache.document_progress(uri)
            if report.progress_version is not None and report.progress_version >= version and report.done:
                if not published or (report.diagnostics_version is not None and report.diagnostics_version >= version):
                    return
            await doc.wait_changed()

    def _result(self, uri: str, doc: _Document, version: int) -> SyncResult:
        report = self._cache.document_progress(uri)
        if doc.crashed or (report.progress_version == version and report.fatal):
            elaboration = Elaboration.FAILED
        elif version in (doc.barrier_version, doc.reported_version):
            elaboration = Elaboration.COMPLETE
        else:
            elaboration = Elaboration.PROCESSING
        snap = self._cache.get(uri)
        return SyncResult(
            uri=uri,
            version=version,
            elaboration=elaboration,
            diagnostics=snap.diagnostics if report.diagnostics_version == version else (),
            processing=report.processing if elaboration is not Elaboration.COMPLETE else (),
            availability=snap.availability,
            diagnostics_version=report.diagnostics_version,
        )
