"""Lean source files on disk: reading them (regular files only, bounded in size), their text hash and header.

The one place Beam reads a source a caller named or a workspace module's file: the broker's documents, the save's
before/after checks, the freshness of imports and the open-files report all use `read_source`. It never writes.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

import anyio
import anyio.lowlevel

from .config import DEFAULT_MAX_SOURCE_BYTES
from .errors import INTERNAL_ERROR, BrokerError, invalid_params


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
    in_comment = 0
    offset = 0
    lines = head.splitlines(keepends=True)
    for i, raw in enumerate(lines):
        if not complete and i == len(lines) - 1:
            return None  # the last line may be cut short
        start, offset = offset, offset + len(raw)
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
            return tuple(out), start
        for name in words[1:]:
            if name != "all" and name not in out:
                out.append(name)
    return (tuple(out), len(head)) if complete else None


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
        BrokerError: `invalidParams` with `data.reason`: `fileNotFound`, `notRegularFile` (`data.kind`),
            `sourceTooLarge` (`data.limitBytes`), `notUtf8`, `badPath` (a name too long, a file used as a
            directory, a symlink loop) or `permissionDenied`; `internalError` on other I/O errors.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise invalid_params(f"file not found: {path}", {"reason": "fileNotFound", "path": str(path)}) from None
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):  # a socket, or a device without a driver
            raise _not_regular(path, _mode(path)) from None
        reason = _PATH_ERRORS.get(exc.errno or 0)
        if reason is not None:  # the path the caller gave, not Beam or the disk, is at fault
            raise invalid_params(f"cannot read {path}: {exc.strerror}", {"reason": reason, "path": str(path)}) from None
        raise BrokerError(INTERNAL_ERROR, f"cannot read {path}: {exc.strerror}") from None
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
    except OSError as exc:
        raise BrokerError(INTERNAL_ERROR, f"cannot read {path}: {exc.strerror}") from None
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
