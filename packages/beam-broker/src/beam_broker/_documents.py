"""What Beam tracks about a workspace's documents beside beam-lsp's mirror, for one Lean session.

Owns: reading Lean sources from disk (regular files only, bounded in size: `read_source`, the one place Beam
reads a file a caller named or a workspace module's source), their text hash and header (imports), per-document
state (version, text hash, imports, what its worker loaded for them, progress, checkpoint, recency, users and
the probe modes Lean answered for the version), which documents exceed the open-document bound, and the
open-files report. It never talks to Lean: the runtime sends the messages and updates this state. Whether
imports are current is `_freshness`'s.
"""

from __future__ import annotations

import collections
import dataclasses
import errno
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from beam_lsp import path_to_uri

from ._lake import Layout
from ._verdict import ProgressTracker
from .config import DEFAULT_MAX_SOURCE_BYTES
from .errors import CONTENT_MODIFIED, BrokerError, invalid_params

if TYPE_CHECKING:
    from .models import PinnedInput


def text_hash(text: str) -> str:
    """16 hex digits identifying a text (CRLF normalized)."""
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()[:16]


_HEAD_CHUNK = 4096
"""Characters of a text `_header` looks at first (four times more each time the header goes on past them)."""


def _header(text: str) -> tuple[tuple[str, ...], int]:
    """The module names a Lean file's header imports, and the offset where its first command starts.

    Only the beginning of the text is split into lines, as far as the header goes: a probe's text is the whole
    document up to the probe, and this runs on every probe.
    """
    size = _HEAD_CHUNK
    while True:
        found = _scan(text[:size], complete=size >= len(text))
        if found is not None:
            return found
        size *= 4


def _scan(head: str, *, complete: bool) -> tuple[tuple[str, ...], int] | None:
    """`_header` of a text beginning `head` (all of it when `complete`); None when the header may go on past it."""
    out: list[str] = []
    depth = 0  # block comments open at the start of the line
    offset = 0
    awaiting = False  # the last `import` has no module name yet: Lean reads it on a later line (`import\n  A`)
    lines = head.splitlines(keepends=True)
    for i, raw in enumerate(lines):
        if not complete and i == len(lines) - 1:
            return None  # the last line may be cut short
        start, offset = offset, offset + len(raw)
        code, depth = _code(raw, depth)
        words = code.split()
        while not awaiting and words and words[0] in ("prelude", "module"):
            words = words[1:]
        if not words:
            continue
        # Lean 4's module system: `public`, `meta` (in that order) before `import`, `all` after it.
        lead = words[1:] if words[0] == "public" else words
        lead = lead[1:] if lead[:1] == ["meta"] else lead
        if not awaiting and lead[:1] != ["import"]:
            return tuple(out), start
        for word in words:
            if word == "import":
                awaiting = True
            elif word not in ("all", "public", "meta"):
                awaiting = False
                if word not in out:
                    out.append(word)
    return (tuple(out), len(head)) if complete else None


def _code(line: str, depth: int) -> tuple[str, int]:
    """A header line's text outside comments, and how many block comments are open after it (`depth` before).

    An import may follow a comment on its line (`/- why -/ import A`), and a comment an import (`import A -- why`).
    """
    if not depth and "-" not in line:
        return line, 0
    kept: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line.startswith("/-", i):
            depth, i = depth + 1, i + 2
            kept.append(" ")
        elif depth and line.startswith("-/", i):
            depth, i = depth - 1, i + 2
        elif depth:
            i += 1
        elif line.startswith("--", i):
            break
        else:
            kept.append(line[i])
            i += 1
    return "".join(kept), depth


def header_imports(text: str) -> tuple[str, ...]:
    """Module names a Lean file's header imports (deduplicated, in order)."""
    return _header(text)[0]


def header_text(text: str) -> str:
    """A Lean file's header: its text before the line where the first command starts (imports, comments)."""
    return text[: _header(text)[1]]


_CHUNK = 64 * 1024
"""Bytes per read: a source is read on the event loop in chunks of this size, with a checkpoint between them."""
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
"""O_NONBLOCK: opening a FIFO does not wait for a writer (nor a device for its carrier)."""
_KINDS = (
    (stat.S_ISDIR, "directory", "a directory"),
    (stat.S_ISFIFO, "fifo", "a FIFO (named pipe)"),
    (stat.S_ISCHR, "characterDevice", "a character device"),
    (stat.S_ISBLK, "blockDevice", "a block device"),
    (stat.S_ISSOCK, "socket", "a socket"),
)


def _not_regular(path: Path, mode: int | None) -> BrokerError:
    kind, what = "other", "not a regular file"
    for test, name, text in _KINDS:
        if mode is not None and test(mode):
            kind, what = name, text
            break
    return invalid_params(
        f"not a regular file: {path} is {what}; Beam reads only regular Lean source files",
        {"reason": "notRegularFile", "kind": kind, "path": str(path)},
    )


def _too_large(path: Path, limit: int) -> BrokerError:
    if limit >= 2**20 and limit % 2**20 == 0:
        shown = f"{limit // 2**20} MiB ({limit} bytes; setting max_source_bytes)"
    else:
        shown = f"{limit} bytes (setting max_source_bytes)"
    return invalid_params(
        f"source file too large: {path} is over Beam's source size limit of {shown}",
        {"reason": "sourceTooLarge", "limitBytes": limit, "path": str(path)},
    )


_PATH_ERRORS = {
    errno.ENAMETOOLONG: "badPath",
    errno.ENOTDIR: "badPath",
    errno.ELOOP: "badPath",
    errno.EISDIR: "notRegularFile",
    errno.EACCES: "permissionDenied",
    errno.EPERM: "permissionDenied",
}
"""Errors opening a source file that come from the path given (`invalidParams` with this `data.reason`)."""


async def read_source(path: Path, *, limit: int = DEFAULT_MAX_SOURCE_BYTES) -> str:
    """Read a Lean source file from disk (UTF-8): a regular file of at most `limit` bytes.

    The file is opened without blocking (a FIFO's open does not wait for a writer) and checked with `fstat`
    before anything is read, so a FIFO, device, socket or directory is refused unread. A regular file is read
    on the event loop in chunks of 64 KiB with a checkpoint before each: the read is cancellable, needs no
    worker thread that could hang, and takes at most `limit / 64 KiB + 1` reads; a file that grows past
    `limit` while it is read is refused as well. (A worker thread cannot be interrupted once it is blocked;
    these reads never block on a pipe or device because nothing but a regular file is ever read.)

    Raises:
        BrokerError: `invalidParams` when the path given is at fault, with `data.reason` (see `errors`):
            `fileNotFound`, `notRegularFile` (`data.kind`), `sourceTooLarge` (`data.limitBytes`), `notUtf8`,
            `badPath` (a name too long, a file used as a directory, a symlink loop) or `permissionDenied`.
        OSError: Any other I/O failure (a failing disk): not the caller's fault, so it is left to the broker's
            error boundary (`internalError`, logged with its traceback).
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise invalid_params(f"file not found: {path}", {"reason": "fileNotFound", "path": str(path)}) from None
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):  # a socket, or a device without a driver
            raise _not_regular(path, _mode(path)) from None
        reason = _PATH_ERRORS.get(exc.errno or 0)
        if reason is None:
            raise  # Beam or the disk is at fault, not the path: the broker's error boundary says `internalError`
        raise invalid_params(f"cannot read {path}: {exc.strerror}", {"reason": reason, "path": str(path)}) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode)
        if info.st_size > limit:
            raise _too_large(path, limit)
        chunks: list[bytes] = []
        total = 0
        while True:
            await anyio.lowlevel.checkpoint()
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _too_large(path, limit)
    except BlockingIOError:  # a "regular" file that would block (some /proc files): nothing to wait for here
        raise _not_regular(path, None) from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise invalid_params(f"file is not UTF-8 text: {path}", {"reason": "notUtf8", "path": str(path)}) from None


def _mode(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode
    except OSError:
        return None


MAX_CLOSED = 10_000
"""Documents closed by Beam whose last state is kept (`ClosedStates`); beyond it the oldest are forgotten."""

UNKNOWN_STATE: tuple[int, str] = (0, "")
"""`ClosedStates.take`'s answer when the state may have been forgotten: no version names it."""

FileKey = tuple[int, int, int, int]
"""A file's state as `stat` shows it: (mtime ns, ctime ns, size, inode). Any write changes it (ctime cannot be
set back), so an unchanged key means an unchanged file unless the write fell within the timestamp granularity of
the moment the file was read (`RACY_NS`)."""


@dataclasses.dataclass
class Loaded:
    """The `.olean` files of a Lean document's workspace imports when its worker processed the header."""

    imports: tuple[str, ...]
    oleans: dict[str, FileKey | None]
    confirmed: bool = False
    """A barrier of the document has seen the same files (so its worker loaded these and no others)."""


@dataclasses.dataclass
class DocState:
    """One open document: what Beam knows beside beam-lsp's mirror."""

    path: Path
    uri: str
    module: str | None
    text_hash: str
    version: int
    snapshot: str = ""
    """The opaque token of the document's current state (`Documents.next_snapshot`); empty until it is opened."""
    progress: ProgressTracker = dataclasses.field(default_factory=ProgressTracker)
    checkpointed_version: int | None = None
    synced_version: int | None = None
    imports: tuple[str, ...] = ()
    loaded: Loaded | None = None
    """What the document's worker loaded for its imports (taken when it was opened or its header changed)."""
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)
    last_used: int = 0
    """When a call last read the document or ended holding it (a sequence number): the open-document bound closes
    the oldest."""
    users: int = 0
    """Calls in flight that hold the document (see `_call.Call`); a document in use is never closed by the bound."""
    used_at: float = 0.0
    """`time.monotonic()` of the last call that read it, at that call's start and again at its end: the memory
    budget closes the least recent first."""
    goal_modes: dict[tuple[int, int], bool] = dataclasses.field(default_factory=dict)
    """Whether Lean has tactic goals at a position of this version (a probe's mode), as Lean answered."""
    goals: dict[tuple[int, int], Any] = dataclasses.field(default_factory=dict)
    """The goals Lean showed at positions of this version, asked of the document itself (`_ops.goals.kept`)."""
    outline: Any = None
    """The outline of this version (`_ops.outline`), once computed: Lean's answers for a version do not change."""
    reopened_over: tuple[int, str] | None = None
    """(version, text hash) the document had when Beam closed it on its own (the open-document bound, the memory
    budget, a new Lean session, a runtime shut down: `ClosedStates`), if this open followed such a close: version 1
    then names a new state."""

    def opened(self, version: int, text: str, snapshot: str) -> None:
        """The text was sent with didOpen at `version`; `snapshot` is the token of this state."""
        self.version = version
        self.snapshot = snapshot
        self.text_hash = text_hash(text)
        self.imports = header_imports(text)
        self.goal_modes = {}
        self.goals = {}
        self.outline = None

    def changed(self, version: int, text: str, snapshot: str) -> None:
        """The text was sent with didChange at `version`: checkpoint and progress start over."""
        self.opened(version, text, snapshot)
        self.checkpointed_version = None
        self.progress = ProgressTracker()


class ClosedStates:
    """(version, text hash) of each document Beam closed on its own, until it is opened again (`reopened_over`).

    A caller may still hold a version of such a document, and the next open is version 1 again whatever its text.
    The broker keeps one for all its workspaces, so it outlives a runtime: a runtime shut down whole (the memory
    budget, the idle timeout, a drop) closes its documents as a new Lean session does, and the next runtime of the
    root must still refuse a version 1 that named the old text. Bounded (`MAX_CLOSED`, the least recent go first);
    once a state was forgotten, an open that finds none cannot tell a first open from a reopen, so it answers
    `UNKNOWN_STATE` (its version pin is refused once: refusing is safe, trusting is not).
    """

    def __init__(self, limit: int = MAX_CLOSED) -> None:
        """No state kept yet; at most `limit`."""
        self._limit = limit
        self._states: collections.OrderedDict[tuple[str, str], tuple[int, str]] = collections.OrderedDict()
        self._forgot = False

    def note(self, root: str, path: str, version: int, digest: str) -> None:
        """Beam closed `path` of the workspace at `root` on its own at `version` of the text hashed `digest`."""
        key = (root, path)
        self._states.pop(key, None)
        self._states[key] = (version, digest)
        while len(self._states) > self._limit:
            self._states.popitem(last=False)
            self._forgot = True

    def take(self, root: str, path: str) -> tuple[int, str] | None:
        """The state `path` was closed in (forgotten now: it is being opened), None when it was not closed by Beam.

        `UNKNOWN_STATE` when no state is kept but one may have been forgotten to keep the bound.
        """
        state = self._states.pop((root, path), None)
        if state is None and self._forgot:
            return UNKNOWN_STATE
        return state


class Documents:
    """The documents of one workspace session (cleared when the session restarts)."""

    def __init__(
        self,
        root: str,
        display: Callable[[Path], str],
        *,
        max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
        closed: ClosedStates | None = None,
        layout: Callable[[], Layout] | None = None,
    ) -> None:
        """Empty state for the workspace at `root`; `display` renders paths in results.

        `closed` keeps the states of documents Beam closed on its own (the broker's, outliving this runtime);
        `layout` gives where the modules' sources are (the lakefile's; Lake's defaults without it).
        """
        self.root = root
        self.display = display
        self.max_source_bytes = max_source_bytes
        self.docs: dict[str, DocState] = {}
        self._use_seq = 0
        self._session = secrets.token_hex(6)
        self._revision = 0
        self.closed = closed if closed is not None else ClosedStates()
        """Where the states of documents Beam closed on its own go (a broker sets its own, shared by its runtimes)."""
        self._layout = layout if layout is not None else (lambda: Layout.default(root))

    def next_snapshot(self) -> str:
        """A token for a document state no other token of this runtime names: `<session>/<revision>`.

        Upstream Beam's shape (its tokens are opaque all the same). The revision counts over every document of
        the workspace and never restarts (a cleared session keeps counting), so a token names one file in one
        state: a token of another file, of an earlier text, or of a document closed since is never current, even
        for identical text. The session part is random per runtime, so a workspace dropped and created again
        never repeats a token either.
        """
        self._revision += 1
        return f"{self._session}/{self._revision}"

    def clear(self) -> None:
        """Forget every document (new session, runtime shut down); each is noted as closed by Beam (`evict`)."""
        for path in list(self.docs):
            self.evict(Path(path))

    def evict(self, path: Path) -> None:
        """Stop tracking a document Beam closed on its own, noting the state a caller may still hold a version of."""
        doc = self.docs.pop(str(path), None)
        if doc is not None and doc.version:
            self.closed.note(self.root, str(path), doc.version, doc.text_hash)

    def reopening(self, path: Path) -> tuple[int, str] | None:
        """The state `path` had when Beam closed it on its own, as it is opened again (`DocState.reopened_over`)."""
        return self.closed.take(self.root, str(path))

    def track(self, path: Path, text: str) -> DocState:
        """The state of `path`, created (not yet opened in Lean) on first use, and marked as used now."""
        doc = self.docs.get(str(path))
        if doc is None:
            doc = DocState(path, path_to_uri(path), self._layout().module_of(path), text_hash(text), 0)
            self.docs[str(path)] = doc
        self.touch(doc)
        return doc

    def touch(self, doc: DocState) -> None:
        """Mark `doc` as used now (a call read it, or a call that held it ended)."""
        self._use_seq += 1
        doc.last_used = self._use_seq
        doc.used_at = time.monotonic()

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
            except OSError:  # a report says what it could not learn instead of failing
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


def check_pin(doc: DocState, pin: PinnedInput, *, reopened: bool = False) -> None:
    """Insist the caller's version (or snapshot) names the document's current state.

    With `reopened` (this call opened the document again after Beam closed it on its own), a version 1 names the
    new open only when the closed one was version 1 of the same text: the caller learnt its version before.

    Raises:
        BrokerError: `contentModified` with `data.reason = "documentVersionMismatch"`, or for a snapshot
            `"snapshotMismatch"` (upstream Beam's error data: `expectedSnapshot`, `currentSnapshot`, `uri`).
    """
    if pin.snapshot is not None:
        if doc.snapshot != pin.snapshot:
            raise BrokerError(
                CONTENT_MODIFIED,
                f"source snapshot changed for {doc.uri}; read the source and resolve the intended target again "
                "before retrying",
                {
                    "reason": "snapshotMismatch",
                    "expectedSnapshot": pin.snapshot,
                    "currentSnapshot": doc.snapshot,
                    "uri": doc.uri,
                },
            )
        return
    version = pin.version
    over = doc.reopened_over if reopened and doc.version == 1 else None
    if over is not None and over != (1, doc.text_hash):
        closed = (
            "Beam may have closed it on its own (its state there was not kept)"
            if over == UNKNOWN_STATE
            else f"Beam closed it at version {over[0]} (the open-document bound, the memory budget, the idle "
            "timeout, a new Lean session or a dropped workspace)"
        )
        raise BrokerError(
            CONTENT_MODIFIED,
            f"document version mismatch for {doc.uri}: {closed} and it changed since; version {doc.version} now "
            "names its new text: sync it again",
            {
                "reason": "documentVersionMismatch",
                "expectedVersion": version,
                "acceptedVersion": doc.version,
                "currentVersion": doc.version,
                "uri": doc.uri,
            },
        )
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
