"""What Beam tracks about a workspace's documents beside beam-lsp's mirror, for one Lean session.

Owns: per-document state (version, text hash, imports, what its worker loaded for them, progress, checkpoint,
recency, users and the probe modes Lean answered for the version), which documents exceed the open-document
bound, and the open-files report (sources are read by `_sources`). It never talks to Lean: the runtime sends the
messages and updates this state. Whether imports are current is `_freshness`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from beam_lsp import path_to_uri
from beam_lsp.project import module_name

from ._sources import header_imports, read_source, text_hash
from ._verdict import ProgressTracker
from .config import DEFAULT_MAX_SOURCE_BYTES
from .errors import BrokerError

if TYPE_CHECKING:
    from ._freshness import Loaded


@dataclasses.dataclass
class DocState:
    """One open document: what Beam knows beside beam-lsp's mirror."""

    path: Path
    uri: str
    module: str | None
    text_hash: str
    version: int
    progress: ProgressTracker = dataclasses.field(default_factory=ProgressTracker)
    checkpointed_version: int | None = None
    synced_version: int | None = None
    imports: tuple[str, ...] = ()
    loaded: Loaded | None = None
    """What the document's worker loaded for its imports (taken when it was opened or its header changed)."""
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)
    last_used: int = 0
    """When a call last read the document (a sequence number): the open-document bound closes the oldest."""
    users: int = 0
    """Calls in flight that hold the document (see `_call.Call`); a document in use is never closed by the bound."""
    goal_modes: dict[tuple[int, int], bool] = dataclasses.field(default_factory=dict)
    """Whether Lean has tactic goals at a position of this version (a probe's mode), as Lean answered."""

    def opened(self, version: int, text: str) -> None:
        """The text was sent with didOpen at `version`."""
        self.version = version
        self.text_hash = text_hash(text)
        self.imports = header_imports(text)
        self.goal_modes = {}

    def changed(self, version: int, text: str) -> None:
        """The text was sent with didChange at `version`: checkpoint and progress start over."""
        self.opened(version, text)
        self.checkpointed_version = None
        self.progress = ProgressTracker()


class Documents:
    """The documents of one workspace session (cleared when the session restarts)."""

    def __init__(
        self, root: str, display: Callable[[Path], str], *, max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES
    ) -> None:
        """Empty state for the workspace at `root`; `display` renders paths in results."""
        self.root = root
        self.display = display
        self.max_source_bytes = max_source_bytes
        self.docs: dict[str, DocState] = {}
        self._use_seq = 0

    def clear(self) -> None:
        """Forget every document (new session, or drop)."""
        self.docs.clear()

    def track(self, path: Path, text: str) -> DocState:
        """The state of `path`, created (not yet opened in Lean) on first use, and marked as used now."""
        doc = self.docs.get(str(path))
        if doc is None:
            doc = DocState(path, path_to_uri(path), module_name(self.root, path), text_hash(text), 0)
            self.docs[str(path)] = doc
        self._use_seq += 1
        doc.last_used = self._use_seq
        return doc

    def beyond(self, limit: int, keep: DocState) -> list[DocState]:
        """Documents to close so that at most `limit` stay open: the least recently used first.

        Never `keep`, a document a call in flight holds (`users`), or one whose messages are being sent (its
        lock is held); when those alone exceed `limit`, fewer are returned (the bound yields to calls in flight).
        """
        excess = len(self.docs) - limit
        if excess <= 0:
            return []
        idle = [d for d in self.docs.values() if d is not keep and d.users == 0 and not d.lock.locked()]
        return sorted(idle, key=lambda d: d.last_used)[:excess]

    def is_current(self, doc: DocState) -> bool:
        """Whether `doc` is still the tracked state of its path (it was not closed meanwhile)."""
        return self.docs.get(str(doc.path)) is doc

    def pop(self, path: Path) -> DocState | None:
        """Stop tracking a document (close)."""
        return self.docs.pop(str(path), None)

    def held(self) -> dict[str, str]:
        """The text hash Beam holds for each open document that is a module of the workspace, by module name."""
        return {doc.module: doc.text_hash for doc in self.docs.values() if doc.module is not None}

    def record_sync(self, doc: DocState, progress: ProgressTracker) -> None:
        """A complete barrier for the document's current version."""
        doc.progress = progress
        doc.synced_version = doc.version

    def record_save(self, doc: DocState) -> None:
        """The document's current version was checkpointed with Lake."""
        doc.checkpointed_version = doc.version

    async def open_files(self) -> list[dict[str, Any]]:
        """Open documents with their disk status (`open_docs` FileEntry shape); reads each file."""
        out = []
        for doc in list(self.docs.values()):
            try:
                disk = text_hash(await read_source(doc.path, limit=self.max_source_bytes))
                status = "matchesTracked" if disk == doc.text_hash else "differsFromTracked"
            except BrokerError as exc:  # gone, or no longer a readable regular source file
                missing = exc.data is not None and exc.data.get("reason") == "fileNotFound"
                status = "missing" if missing else "unknown"
            out.append(
                {
                    "uri": doc.uri,
                    "path": self.display(doc.path),
                    "version": doc.version,
                    "diskStatus": status,
                    "checkpointed": status == "matchesTracked" and doc.checkpointed_version == doc.version,
                    "fileProgress": doc.progress.snapshot().dump(),
                }
            )
        return out
