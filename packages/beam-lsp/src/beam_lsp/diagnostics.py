"""The diagnostics cache (mcpls semantics, extended for Lean) and the server log buffers (`_logs`).

Owns what Lean has published: per canonical file path, the last diagnostics of every URI spelling that names
the file, with an availability that never lets an empty list be mistaken for "clean":

- `published`: Lean reported on the file since the server (re)started; an empty list means clean;
- `pending`: nothing published since the server (re)started; unknown;
- `evicted`: dropped to bound memory; unknown.

It is also the only owner of what Lean reported about each URI spelling during the current document lifetime:
the last `$/lean/fileProgress` (version, ranges still processing, done, fatal) and the version of the last
publish. A snapshot takes its elaboration state (`complete`, `processing` with ranges, or `failed`) from there,
and the client's sync barrier reads the same record (`document_progress`). Files a client has open are pinned:
they are never evicted, so a barrier never loses the progress it waits for. Text from Lean is redacted on the
way in. It must not know about documents' text, workspaces or MCP, and it never talks to Lean.

Closed documents (never a false clean): Lean clears a file's diagnostics when the client closes it (one empty
publish, and one for every open file at `shutdown`). That says nothing about the file, so once a URI is closed
the cache ignores Lean's reports for it and keeps what Lean said while it was open (diagnostics, version,
elaboration state); the snapshot says `open: false`. Versions restart when a document is reopened, so reports
of the old lifetime that arrive after the reopen (up to and including the clearing publish Lean owes) are
ignored too; the reopened URI itself starts fresh (its kept publish and progress are dropped).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from ._logs import LogBuffer, LogEntry
from ._progress import FileProgress
from .documents import uri_to_path
from .lean import JsonValue, LeanDiagnostic, LeanFileProgressParams, Range
from .redaction import Redactor

MAX_FILES = 1000
MAX_SPELLINGS_PER_FILE = 8
MAX_MESSAGE_BYTES = 256 * 1024
MAX_FILE_BYTES = 1024 * 1024
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_REMEMBERED_EVICTIONS = 1000
MAX_REMEMBERED_CLOSED = 4096
LOG_CAPACITY = 100
SHOW_MESSAGE_CAPACITY = 50
_CANONICAL_MEMO = 4096
_TRUNCATED = "\n… [truncated by beam: message over 256 KiB]"


class Availability(str, enum.Enum):
    """Whether a file's diagnostics are known (see the module docstring)."""

    PUBLISHED = "published"
    PENDING = "pending"
    EVICTED = "evicted"


class Elaboration(str, enum.Enum):
    """Lean's elaboration state for one document version."""

    COMPLETE = "complete"
    PROCESSING = "processing"
    FAILED = "failed"


@dataclasses.dataclass(frozen=True)
class DiagnosticsSnapshot:
    """What the cache knows about one file, taken atomically.

    Attributes:
        path: The canonical path the snapshot is keyed by.
        tracked: False (always with an empty list) when nothing is known about the file.
        availability: See `Availability`.
        uri: The URI spelling of the newest publish, when any.
        version: The document version the diagnostics were computed against, when known.
        diagnostics: The union over spellings, exact duplicates removed.
        elaboration: Elaboration state of `progress_version` from `$/lean/fileProgress`, when seen.
        progress_version: The version the elaboration state belongs to.
        processing: Ranges Lean is still elaborating (or failed on).
        truncated: How many diagnostics were dropped to respect the per-file bound.
        open: Whether a client has the file open. When it is closed, everything above is what Lean said while
            it was open (its last publish, version and elaboration state), frozen at the close.
    """

    path: str
    tracked: bool
    availability: Availability
    uri: str | None = None
    version: int | None = None
    diagnostics: tuple[LeanDiagnostic, ...] = ()
    elaboration: Elaboration | None = None
    progress_version: int | None = None
    processing: tuple[Range, ...] = ()
    truncated: int = 0
    open: bool = False

    def wire(self) -> dict[str, JsonValue]:
        """JSON form (mcpls resource fields, LSP casing for diagnostics, plus `open`)."""
        out: dict[str, Any] = {
            "path": self.path,
            "tracked": self.tracked,
            "availability": self.availability.value,
            "diagnostics": [d.wire() for d in self.diagnostics],
            "open": self.open,
        }
        if self.version is not None:
            out["version"] = self.version
        if self.elaboration is not None:
            out["elaboration"] = self.elaboration.value
            out["processing"] = [r.wire() for r in self.processing]
        if self.truncated:
            out["truncated"] = self.truncated
        return out


@dataclasses.dataclass(frozen=True)
class DocumentProgress:
    """What Lean reported about one URI spelling since the client opened it (or since the server started).

    Attributes:
        progress_version: The version of the last `$/lean/fileProgress`, None before the first.
        done: Whether that progress said elaboration finished (`processing: []`).
        fatal: Whether that progress reported a fatal error (a crashed worker or a failed header).
        diagnostics_version: The version of the last `publishDiagnostics` for the URI, None before the first.
        report: That progress itself (its ranges are decoded when `processing` is first read).
    """

    progress_version: int | None = None
    done: bool = False
    fatal: bool = False
    diagnostics_version: int | None = None
    report: FileProgress | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def processing(self) -> tuple[Range, ...]:
        """The ranges the last progress reported as still elaborating (or failed, when `fatal`)."""
        return self.report.processing if self.report is not None else ()

    @property
    def elaboration(self) -> Elaboration | None:
        """The elaboration state of `progress_version`, None before any progress."""
        if self.progress_version is None:
            return None
        return Elaboration.FAILED if self.fatal else Elaboration.COMPLETE if self.done else Elaboration.PROCESSING


@dataclasses.dataclass
class _Slot:
    uri: str
    version: int | None
    diagnostics: tuple[LeanDiagnostic, ...]
    size: int
    truncated: int
    added: int = 0  # diagnostics[added:] are what the last publish added (all of them unless it appended)


@dataclasses.dataclass
class _Entry:
    slots: dict[str, _Slot] = dataclasses.field(default_factory=dict)
    # Per URI spelling, most recently updated last: the snapshot shows the newest progress of the file.
    reports: dict[str, DocumentProgress] = dataclasses.field(default_factory=dict)
    merged: tuple[LeanDiagnostic, ...] | None = None  # the union over the slots, until they change

    @property
    def progress(self) -> DocumentProgress:
        for report in reversed(self.reports.values()):
            if report.progress_version is not None:
                return report
        return DocumentProgress()

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slots.values())

    @property
    def empty(self) -> bool:
        return all(not s.diagnostics for s in self.slots.values())


def _remember(ring: collections.OrderedDict[str, Any], key: str, value: Any) -> None:
    """Set `ring[key]` as its newest item, forgetting the oldest beyond `MAX_REMEMBERED_CLOSED`."""
    ring.pop(key, None)
    ring[key] = value
    if len(ring) > MAX_REMEMBERED_CLOSED:
        ring.popitem(last=False)


def _truncate_message(text: str) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= MAX_MESSAGE_BYTES:
        return text
    return raw[: MAX_MESSAGE_BYTES - len(_TRUNCATED.encode())].decode("utf-8", "ignore") + _TRUNCATED


def _size(diagnostic: LeanDiagnostic) -> int:
    return len(json.dumps(diagnostic.wire(), ensure_ascii=False))


def _bound(items: list[LeanDiagnostic], sizes: list[int]) -> tuple[tuple[LeanDiagnostic, ...], int, int]:
    """Keep the most severe first, in publish order within a severity, until `MAX_FILE_BYTES`."""
    total = sum(sizes)
    if total <= MAX_FILE_BYTES:
        return tuple(items), total, 0
    order = sorted(range(len(items)), key=lambda i: (items[i].severity or 3, i))
    keep: set[int] = set()
    acc = 0
    for i in order:
        if acc + sizes[i] > MAX_FILE_BYTES:
            break
        keep.add(i)
        acc += sizes[i]
    kept = tuple(items[i] for i in range(len(items)) if i in keep)
    return kept, acc, len(items) - len(kept)


def _slot(uri: str, version: int | None, items: list[LeanDiagnostic], base: _Slot | None) -> _Slot:
    """A URI's slot after a publish: `items` alone, or appended to `base` (measuring only the new items)."""
    sizes = [_size(d) for d in items]
    if base is not None and not base.truncated and base.size + sum(sizes) <= MAX_FILE_BYTES:
        return _Slot(uri, version, base.diagnostics + tuple(items), base.size + sum(sizes), 0, len(base.diagnostics))
    truncated = 0
    if base is not None:  # over the bound: choose again among what was kept and the new items
        items = [*base.diagnostics, *items]
        sizes = [_size(d) for d in base.diagnostics] + sizes
        truncated = base.truncated
    kept, size, dropped = _bound(items, sizes)
    return _Slot(uri, version, kept, size, truncated + dropped)


def _merge(slots: Iterable[_Slot]) -> tuple[LeanDiagnostic, ...]:
    """The union of the slots' diagnostics, exact duplicates removed (sorted by range across spellings)."""
    seen: set[str] = set()
    merged: list[LeanDiagnostic] = []
    count = 0
    for slot in slots:
        count += 1
        for d in slot.diagnostics:
            key = json.dumps(d.wire(), sort_keys=True)
            if key not in seen:
                seen.add(key)
                merged.append(d)
    if count > 1:
        merged.sort(
            key=lambda d: (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
        )
    return tuple(merged)


def redact_diagnostic(raw: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """Redact a raw diagnostic: message, source, string code, related messages and string data values.

    URIs and the keys of `data` are left as they are (they are identifiers, not prose).
    """
    out = dict(raw)
    if isinstance(out.get("message"), str):
        out["message"] = _truncate_message(redactor.redact(out["message"]))
    if isinstance(out.get("source"), str):
        out["source"] = redactor.redact(out["source"])
    if isinstance(out.get("code"), str):
        out["code"] = redactor.redact(out["code"])
    related = out.get("relatedInformation")
    if isinstance(related, list):
        out["relatedInformation"] = [
            {**r, "message": redactor.redact(r["message"])}
            if isinstance(r, dict) and isinstance(r.get("message"), str)
            else r
            for r in related
        ]
    if "data" in out:
        out["data"] = redactor.redact_json(out["data"])
    return out


class DiagnosticsCache:
    """Bounded per-file store of Lean's published diagnostics and file progress.

    One cache usually outlives several server processes: call `server_restarted` when a new process starts
    (every file returns to `pending`). Listeners registered with `add_listener` are called synchronously with
    the canonical path of every file whose snapshot changed (publish, progress, eviction, restart).
    """

    def __init__(self, redactor: Redactor | None = None, *, max_files: int = MAX_FILES) -> None:
        """Create an empty cache; `redactor` scrubs Lean text on ingestion."""
        self._redactor = redactor or Redactor()
        self._max_files = max_files
        self._entries: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._evicted: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._canonical: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._open: dict[str, str] = {}  # URI of an open document -> its canonical path (pinned)
        self._closed: collections.OrderedDict[str, None] = collections.OrderedDict()  # closed, not reopened
        self._owed: collections.OrderedDict[str, int] = collections.OrderedDict()  # URI -> clearing publishes owed
        self._total = 0
        self._listeners: list[Callable[[str], None]] = []
        self.epoch: int = 0
        self.logs: LogBuffer = LogBuffer(LOG_CAPACITY)
        self.messages: LogBuffer = LogBuffer(SHOW_MESSAGE_CAPACITY)

    # ---- keys ---------------------------------------------------------------------------------------
    def canonical(self, uri_or_path: str) -> str:
        """Canonical path for a `file:` URI or a path (symlinks resolved, memoized)."""
        hit = self._canonical.get(uri_or_path)
        if hit is not None:
            return hit
        raw = str(uri_to_path(uri_or_path)) if uri_or_path.startswith("file:") else uri_or_path
        path = os.path.realpath(raw)
        self._canonical[uri_or_path] = path
        if len(self._canonical) > _CANONICAL_MEMO:
            self._canonical.popitem(last=False)
        return path

    def add_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Call `listener(path)` on every change; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self, paths: Iterable[str]) -> None:
        for path in paths:
            for listener in list(self._listeners):
                listener(path)

    # ---- document lifetimes -------------------------------------------------------------------------
    def document_opened(self, uri: str) -> None:
        """Start a new lifetime for `uri` (its versions restart) and pin its file until `document_closed`.

        The lifetime starts fresh: what Lean reported for `uri` before (its publish, version and progress) is
        dropped, so the file reads `pending` until Lean publishes for the new lifetime (other URI spellings of
        the file keep theirs). Reports of the previous lifetime still in flight are ignored (see
        `document_closed`).
        """
        path = self.canonical(uri)
        self._open[uri] = path
        self._closed.pop(uri, None)
        entry = self._entries.get(path)
        if entry is None:
            return
        changed = entry.reports.pop(uri, None) is not None
        slot = entry.slots.pop(uri, None)
        if slot is not None:
            self._total -= slot.size
            entry.merged = None
            changed = True
        if changed:
            self._notify([path])

    def document_closed(self, uri: str, *, server_clears: bool = False) -> None:
        """End `uri`'s lifetime: keep what Lean said while it was open, ignore what it says from now on.

        The file is unpinned (it may be evicted again) and its snapshot says `open: false`. Until `uri` is
        reopened, every publish and progress for it is ignored: Lean's empty publish on `didClose` (or at
        `shutdown`) clears an editor's view, it does not mean the file is clean.

        Args:
            uri: A document opened with `document_opened` (anything else is ignored).
            server_clears: The server was sent `didClose` and will answer with one empty publish. Until that
                publish arrives, reports for `uri` belong to the closed lifetime and are ignored even after a
                reopen (whose versions start again at 1).
        """
        path = self._open.pop(uri, None)
        if path is None:
            return
        _remember(self._closed, uri, None)
        if server_clears:
            _remember(self._owed, uri, self._owed.get(uri, 0) + 1)
        if path in self._entries:
            self._notify([path])

    def _accepts(self, uri: str, *, clearing: bool) -> bool:
        """Whether a report for `uri` belongs to its current lifetime (a clearing publish pays one owed)."""
        owed = self._owed.get(uri)
        if owed is not None:
            if clearing:
                if owed > 1:
                    self._owed[uri] = owed - 1
                else:
                    del self._owed[uri]
            return False
        return uri not in self._closed

    def document_progress(self, uri: str) -> DocumentProgress:
        """What Lean reported about `uri` in the current lifetime (empty when nothing)."""
        entry = self._entries.get(self.canonical(uri))
        report = entry.reports.get(uri) if entry is not None else None
        return report or DocumentProgress()

    # ---- writes -------------------------------------------------------------------------------------
    def publish(
        self, uri: str, version: int | None, diagnostics: list[dict[str, JsonValue]], *, incremental: bool = False
    ) -> bool:
        """Store one `publishDiagnostics` for that URI spelling, redacted and bounded.

        A full publish replaces the URI's diagnostics. An incremental one (Lean's `isIncremental: true`, sent
        when the client advertises `incrementalDiagnosticSupport`) appends to those of the same version, so
        its cost follows what it adds, not what Lean reported before (with no diagnostics of that version
        stored, it is taken as the whole set). A publish for an older version than the last one of the same
        URI in this lifetime is ignored, and so is one for a closed URI (see `document_closed`).

        Returns:
            Whether the publish was stored.
        """
        if not self._accepts(uri, clearing=not diagnostics and not incremental):
            return False
        path = self.canonical(uri)
        entry = self._entries.get(path)
        report = entry.reports.get(uri) if entry is not None else None
        last = report.diagnostics_version if report is not None else None
        if last is not None and version is not None and version < last:
            return False
        old = entry.slots.get(uri) if entry is not None else None
        base = old if incremental and old is not None and old.version == version else None
        if base is not None and not diagnostics:
            return True  # Lean adds nothing (one such publish per declaration): nothing changes
        items = [LeanDiagnostic.from_json(redact_diagnostic(d, self._redactor)) for d in diagnostics]
        changed = [path]
        if entry is None:
            changed += self._make_room()
            entry = _Entry()
            self._entries[path] = entry
            self._evicted.pop(path, None)
        else:
            self._entries.move_to_end(path)
        if report is None or report.diagnostics_version != version:
            entry.reports[uri] = dataclasses.replace(report or DocumentProgress(), diagnostics_version=version)
        if old is None and len(entry.slots) >= MAX_SPELLINGS_PER_FILE:
            oldest = next(iter(entry.slots))
            self._total -= entry.slots.pop(oldest).size
        if old is not None:
            self._total -= old.size
            del entry.slots[uri]
        slot = _slot(uri, version, items, base)
        entry.slots[uri] = slot
        entry.merged = None
        self._total += slot.size
        while self._total > MAX_TOTAL_BYTES:
            evicted = self._evict_one(exclude=path)
            if not evicted:
                break
            changed += evicted
        self._notify(changed)
        return True

    def published(self, uri: str) -> tuple[tuple[LeanDiagnostic, ...], tuple[LeanDiagnostic, ...]]:
        """The diagnostics stored for one URI spelling, and those its last publish added (both empty if none)."""
        entry = self._entries.get(self.canonical(uri))
        slot = entry.slots.get(uri) if entry is not None else None
        if slot is None:
            return (), ()
        return slot.diagnostics, slot.diagnostics[slot.added :]

    def _make_room(self) -> list[str]:
        changed: list[str] = []
        while len(self._entries) >= self._max_files:
            evicted = self._evict_one(exclude=None)
            if not evicted:
                break  # every file is pinned: go over the bound rather than lose an open document
            changed += evicted
        return changed

    def _evict_one(self, exclude: str | None) -> list[str]:
        pinned = set(self._open.values())
        candidates = [p for p in self._entries if p != exclude and p not in pinned]
        victim = next((p for p in candidates if self._entries[p].empty), None)
        if victim is None:
            victim = next(iter(candidates), None)
        if victim is None:
            return []
        entry = self._entries.pop(victim)
        self._total -= entry.size
        self._evicted[victim] = None
        if len(self._evicted) > MAX_REMEMBERED_EVICTIONS:
            self._evicted.popitem(last=False)
        return [victim]

    def progress(self, report: FileProgress | LeanFileProgressParams) -> bool:
        """Record a `$/lean/fileProgress` notification for its URI (its ranges stay undecoded until read).

        An older version than the last one of the URI is ignored, and so is progress for a closed URI.

        Returns:
            Whether the progress was recorded.
        """
        if isinstance(report, LeanFileProgressParams):
            report = FileProgress.from_model(report)
        uri = report.uri
        if not self._accepts(uri, clearing=False):
            return False
        path = self.canonical(uri)
        entry = self._entries.get(path)
        if entry is None:
            self._notify(self._make_room())
            entry = _Entry()
            self._entries[path] = entry
        previous = entry.reports.get(uri) or DocumentProgress()
        version = report.version
        last = previous.progress_version
        if last is not None and version is not None and version < last:
            return False
        entry.reports.pop(uri, None)  # re-inserted last: the newest progress of the file
        entry.reports[uri] = DocumentProgress(
            progress_version=version,
            done=report.done,
            fatal=report.fatal,
            diagnostics_version=previous.diagnostics_version,
            report=report,
        )
        self._notify([path])
        return True

    def server_restarted(self) -> list[str]:
        """Forget everything published by the previous server: every file returns to `pending`, none is open."""
        cleared = list(self._entries)
        self._entries.clear()
        self._evicted.clear()
        self._open.clear()
        self._closed.clear()
        self._owed.clear()
        self._total = 0
        self.epoch += 1
        self._notify(cleared)
        return cleared

    def forget(self, uri_or_path: str) -> None:
        """Drop one file (e.g. a private probe document) without marking it evicted."""
        path = self.canonical(uri_or_path)
        entry = self._entries.pop(path, None)
        if entry is not None:
            self._total -= entry.size
            self._notify([path])

    def log(self, kind: str, type_: int, message: str) -> None:
        """Record a `window/logMessage` (`kind="log"`) or `window/showMessage` (`kind="show"`)."""
        entry = LogEntry(type_, _truncate_message(self._redactor.redact(message)), time.time())
        (self.logs if kind == "log" else self.messages).append(entry)

    # ---- reads --------------------------------------------------------------------------------------
    def get(self, uri_or_path: str) -> DiagnosticsSnapshot:
        """Snapshot of one file (never triggers analysis)."""
        path = self.canonical(uri_or_path)
        is_open = path in self._open.values()
        entry = self._entries.get(path)
        if entry is None:
            avail = Availability.EVICTED if path in self._evicted else Availability.PENDING
            return DiagnosticsSnapshot(
                path=path, tracked=avail is Availability.EVICTED, availability=avail, open=is_open
            )
        progress = entry.progress
        if not entry.slots:
            return DiagnosticsSnapshot(
                path=path,
                tracked=True,
                availability=Availability.PENDING,
                elaboration=progress.elaboration,
                progress_version=progress.progress_version,
                processing=progress.processing,
                open=is_open,
            )
        newest = next(reversed(entry.slots.values()))
        if entry.merged is None:
            entry.merged = _merge(entry.slots.values())
        return DiagnosticsSnapshot(
            path=path,
            tracked=True,
            availability=Availability.PUBLISHED,
            uri=newest.uri,
            version=newest.version,
            diagnostics=entry.merged,
            elaboration=progress.elaboration,
            progress_version=progress.progress_version,
            processing=progress.processing,
            truncated=sum(s.truncated for s in entry.slots.values()),
            open=is_open,
        )

    def files(self) -> list[str]:
        """Canonical paths with an entry, least recently written first."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
