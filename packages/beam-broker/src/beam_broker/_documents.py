"""What Beam tracks about a workspace's documents beside beam-lsp's mirror, for one Lean session.

Owns: per-document state (version, text hash, imports, progress, checkpoint), per-module event history for
stale-dependency detection (spec §3.7), reading sources from disk, and the open-files report. It never talks to
Lean: the runtime sends the messages and updates this state.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from beam_lsp import path_to_uri
from beam_lsp.project import module_name

from ._verdict import ProgressTracker
from .errors import INTERNAL_ERROR, BrokerError, invalid_params


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
            if name != "all" and name not in out:
                out.append(name)
    return tuple(out)


async def read_source(path: Path) -> str:
    """Read a Lean source from disk (UTF-8).

    Raises:
        BrokerError: `invalidParams` when the file cannot be read as text, `internalError` on other I/O errors.
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


@dataclasses.dataclass
class DocState:
    """One open document: what Beam knows beside beam-lsp's mirror."""

    path: Path
    uri: str
    module: str | None
    text_hash: str
    version: int
    progress: ProgressTracker = dataclasses.field(default_factory=ProgressTracker)
    last_sync_event_seq: int = 0
    checkpointed_version: int | None = None
    synced_version: int | None = None
    imports: tuple[str, ...] = ()
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)

    def opened(self, version: int, text: str) -> None:
        """The text was sent with didOpen at `version`."""
        self.version = version
        self.text_hash = text_hash(text)
        self.imports = header_imports(text)

    def changed(self, version: int, text: str) -> None:
        """The text was sent with didChange at `version`: checkpoint and progress start over."""
        self.opened(version, text)
        self.checkpointed_version = None
        self.progress = ProgressTracker()


@dataclasses.dataclass
class ModuleHistory:
    """Per-module event sequence numbers used to find stale direct dependencies (spec §3.7)."""

    path: str
    last_sync_event_seq: int = 0
    last_save_event_seq: int = 0
    last_text_change_event_seq: int = 0
    last_text_hash: str | None = None


class Documents:
    """The documents and module history of one workspace session (cleared when the session restarts)."""

    def __init__(self, root: str, display: Callable[[Path], str]) -> None:
        """Empty state for the workspace at `root`; `display` renders paths in results."""
        self.root = root
        self.display = display
        self.docs: dict[str, DocState] = {}
        self.modules: dict[str, ModuleHistory] = {}
        self._event_seq = 0

    def clear(self) -> None:
        """Forget every document and module (new session, or drop)."""
        self.docs.clear()
        self.modules.clear()

    def track(self, path: Path, text: str) -> DocState:
        """The state of `path`, created (not yet opened in Lean) on first use."""
        doc = self.docs.get(str(path))
        if doc is None:
            doc = DocState(path, path_to_uri(path), module_name(self.root, path), text_hash(text), 0)
            self.docs[str(path)] = doc
        return doc

    def is_current(self, doc: DocState) -> bool:
        """Whether `doc` is still the tracked state of its path (it was not closed meanwhile)."""
        return self.docs.get(str(doc.path)) is doc

    def pop(self, path: Path) -> DocState | None:
        """Stop tracking a document (close)."""
        return self.docs.pop(str(path), None)

    def next_event_seq(self) -> int:
        """A fresh, monotonically increasing event sequence number."""
        self._event_seq += 1
        return self._event_seq

    def stale_deps(self, doc: DocState) -> list[dict[str, Any]]:
        """Direct imports that changed or were saved after `doc` was last synced (`staleDirectDeps` items)."""
        out = []
        for name in doc.imports:
            hist = self.modules.get(name)
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

    def record_sync(self, doc: DocState, progress: ProgressTracker) -> None:
        """A complete barrier for the document's current version: its module's text is now known."""
        seq = self.next_event_seq()
        doc.last_sync_event_seq = seq
        doc.progress = progress
        doc.synced_version = doc.version
        if doc.module is None:
            return
        hist = self.modules.get(doc.module)
        if hist is None:
            hist = ModuleHistory(self.display(doc.path), last_text_hash=doc.text_hash)
            self.modules[doc.module] = hist
        elif hist.last_text_hash != doc.text_hash:
            hist.last_text_change_event_seq = seq
            hist.last_text_hash = doc.text_hash
        hist.last_sync_event_seq = seq

    def record_save(self, doc: DocState) -> None:
        """The document's current version was checkpointed with Lake."""
        doc.checkpointed_version = doc.version
        if doc.module is not None and doc.module in self.modules:
            self.modules[doc.module].last_save_event_seq = self.next_event_seq()

    async def open_files(self) -> list[dict[str, Any]]:
        """Open documents with their disk status (`open_docs` FileEntry shape); reads each file."""
        out = []
        for doc in list(self.docs.values()):
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
                    "path": self.display(doc.path),
                    "version": doc.version,
                    "diskStatus": status,
                    "checkpointed": status == "matchesTracked" and doc.checkpointed_version == doc.version,
                    "fileProgress": doc.progress.snapshot().dump(),
                }
            )
        return out
