"""Writing an evidence bundle atomically into an output directory shared with other writers.

This module owns the bundle layout on disk, ``manifest.json``, the temp-then-rename protocol, the
lock that serialises publishing, and the rule that a bundle never leaves its directory. It writes
exactly the bytes it is given: redaction and content are the caller's job.

Protocol: every file is written into a hidden temporary directory in the output directory (same
filesystem, so renames are atomic), ``manifest.json`` last; a zip, if asked for, is built from the
same bytes into a hidden temporary file. Then, holding the lock, the directory is renamed to its
final name, or, for a zip, the zip is renamed and the temporary directory removed (a zip bundle
leaves only the zip). The lock is an ``flock`` on the output directory itself, so there is no lock
file to leave behind (where the OS has no directory descriptors, ``.beam-feedback.lock`` in the
directory instead). A reader that takes the same lock (or simply ignores dot-names) never sees a
half-written bundle, and a failure removes every temporary it made.

Confinement: with a ``base`` (the workspace root, for the default ``<root>/.beam/feedback``), the
output directory is created one component at a time below ``base`` and each component is opened
without following symbolic links, so a ``.beam`` or ``feedback`` that is a symlink (to anywhere) is
refused. Every later operation (temporaries, files, the lock, the renames) is relative to that open
directory, never to its path, so swapping a component for a symlink afterwards cannot redirect
them; nothing is written through a symlink, and an existing entry with a bundle's name, symlinks
included, is never replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import time
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

import filelock

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the lock file in the directory instead
    fcntl = None  # type: ignore[assignment]

from beam_feedback.errors import BundleError

BUNDLE_SCHEMA: Final = "beam.feedback.bundle.v1"
LOCK_NAME: Final = ".beam-feedback.lock"
"""The lock file, only where a directory cannot be locked through its descriptor."""
_LOCK_POLL: Final = 0.05
"""Seconds between tries while another writer holds the lock (as `filelock` polls)."""
MANIFEST_NAME: Final = "manifest.json"
DEFAULT_LOCK_TIMEOUT: Final = 30.0

_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS: Final = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
_NEW_FILE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_FD_RELATIVE: Final = {os.open, os.mkdir, os.rename, os.rmdir, os.stat, os.unlink} <= os.supports_dir_fd
_PROC_FD: Final = Path("/proc/self/fd")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


class _Dir:
    """An open directory; every operation is relative to it (by descriptor where the OS allows)."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def open(cls, path: Path) -> _Dir:
        """Open an existing directory (following symlinks: the caller chose this path)."""
        return cls(path, os.open(path, _DIR_FLAGS) if _FD_RELATIVE else None)

    def at(self, name: str) -> tuple[str, int | None]:
        """``name`` as the OS call wants it: relative to the descriptor, or joined to the path."""
        if self.fd is not None:
            return name, self.fd
        return str(self.path / name), None  # pragma: no cover - only where dir_fd is unsupported (Windows)

    def lstat(self, name: str) -> os.stat_result:
        target, fd = self.at(name)
        return os.stat(target, dir_fd=fd, follow_symlinks=False)

    def mkdir(self, name: str) -> None:
        target, fd = self.at(name)
        os.mkdir(target, 0o777, dir_fd=fd)

    def subdir(self, name: str, *, create: bool) -> _Dir:
        """Open (and with ``create`` make) the child directory ``name``; a symlink there is refused."""
        target, fd = self.at(name)
        if create:
            with suppress(FileExistsError):
                self.mkdir(name)
        info = self.lstat(name)
        if stat.S_ISLNK(info.st_mode):
            raise _Refused(f"{self.path / name} is a symbolic link")
        if not stat.S_ISDIR(info.st_mode):
            raise _Refused(f"{self.path / name} is not a directory")
        try:
            child = os.open(target, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd) if self.fd is not None else None
        except OSError as exc:  # swapped for a symlink or a file since the check
            raise _Refused(f"{self.path / name} changed while it was opened: {_reason(exc)}") from exc
        return _Dir(self.path / name, child)

    def write_new(self, name: str, data: bytes) -> None:
        """Create the file ``name`` (it must not exist; a symlink is not followed) holding ``data``."""
        target, fd = self.at(name)
        handle = os.open(target, _NEW_FILE_FLAGS, 0o666, dir_fd=fd)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)

    def rename(self, old: str, new: str) -> None:
        (source, fd), (target, _) = self.at(old), self.at(new)
        os.rename(source, target, src_dir_fd=fd, dst_dir_fd=fd)

    def exists(self, name: str) -> bool:
        try:
            self.lstat(name)
        except FileNotFoundError:
            return False
        return True

    def remove_tree(self, name: str) -> None:
        """Best-effort removal of an entry this module created (never follows a symlink)."""
        with suppress(OSError):
            if stat.S_ISDIR(self.lstat(name).st_mode):
                child = self.subdir(name, create=False)
                try:
                    for entry in os.listdir(child.fd if child.fd is not None else child.path):
                        child.remove_tree(entry)
                finally:
                    child.close()
                target, fd = self.at(name)
                os.rmdir(target, dir_fd=fd)
            else:
                target, fd = self.at(name)
                os.unlink(target, dir_fd=fd)

    def lock_path(self) -> str:
        """The lock file's path; on Linux through the open descriptor, so it cannot be redirected either."""
        if self.fd is not None and _PROC_FD.is_dir():
            return str(_PROC_FD / str(self.fd) / LOCK_NAME)
        return str(self.path / LOCK_NAME)  # pragma: no cover - systems without /proc/self/fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@contextmanager
def _locked(directory: _Dir, timeout: float) -> Iterator[None]:
    """Hold the bundle lock of ``directory``: an ``flock`` on its descriptor (nothing on disk to leave behind).

    Raises:
        filelock.Timeout: Another writer held it for ``timeout`` seconds.
    """
    if directory.fd is None or fcntl is None:  # pragma: no cover - no directory descriptors
        with filelock.FileLock(directory.lock_path(), timeout=timeout):
            yield
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(directory.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise filelock.Timeout(str(directory.path)) from None
            time.sleep(_LOCK_POLL)
    try:
        yield
    finally:
        fcntl.flock(directory.fd, fcntl.LOCK_UN)


class _Refused(Exception):
    """A path component that a confined bundle must not use."""


@contextmanager
def _output_dir(out_dir: Path, base: Path | None) -> Iterator[_Dir]:
    """Open ``out_dir`` (creating it), confined below ``base`` when one is given."""
    opened: _Dir | None = None
    try:
        if base is None:
            out_dir.mkdir(parents=True, exist_ok=True)
            opened = _Dir.open(out_dir)
        else:
            try:
                parts = out_dir.relative_to(base).parts
            except ValueError:
                raise _Refused(f"{out_dir} is not inside {base}") from None
            if ".." in parts:
                raise _Refused(f"{out_dir} is not a plain path below {base}")
            opened = _Dir.open(base)
            for part in parts:
                child = opened.subdir(part, create=True)
                opened.close()
                opened = child
    except _Refused as exc:
        if opened is not None:
            opened.close()
        raise BundleError(
            f"refusing to write a bundle: {exc} (bundles are written only inside {out_dir}, never through a symlink)"
        ) from None
    except OSError as exc:
        if opened is not None:
            opened.close()
        raise BundleError(f"cannot create bundle output directory {out_dir}: {_reason(exc)}") from exc
    try:
        yield opened
    finally:
        opened.close()


def _manifest(name: str, written: Mapping[str, bytes]) -> bytes:
    files = [
        {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for path, data in sorted(written.items())
    ]
    document = {"schema": BUNDLE_SCHEMA, "name": name, "files": files}
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _write_tree(directory: _Dir, files: Mapping[str, bytes]) -> None:
    for relative, data in files.items():
        *folders, file_name = relative.split("/")
        parent = directory
        opened: list[_Dir] = []
        try:
            for folder in folders:
                parent = parent.subdir(folder, create=True)
                opened.append(parent)
            parent.write_new(file_name, data)
        finally:
            for folder_dir in opened:
                folder_dir.close()


def _zip_tree(directory: _Dir, target: str, name: str, files: Mapping[str, bytes]) -> None:
    stamp = time.localtime()[:6]
    handle, fd = directory.at(target)
    with (
        os.fdopen(os.open(handle, _NEW_FILE_FLAGS, 0o666, dir_fd=fd), "wb") as stream,
        zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as archive,
    ):
        for relative in sorted(files):
            info = zipfile.ZipInfo(f"{name}/{relative}", date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[relative])


def write_bundle(
    out_dir: Path,
    name: str,
    files: Mapping[str, bytes],
    *,
    make_zip: bool,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    base: Path | None = None,
) -> tuple[Path | None, Path | None]:
    """Publish ``files`` as ``out_dir/name/``, or with ``make_zip`` as ``out_dir/name.zip`` alone.

    ``files`` maps relative POSIX paths to bytes; ``manifest.json`` is added, listing every other
    file with its size and sha256.

    Args:
        out_dir: The output directory (created if missing).
        name: The bundle name (a plain file name).
        files: Relative POSIX path -> content.
        make_zip: Write ``name.zip`` (holding ``name/...``) instead of the directory.
        lock_timeout: Seconds to wait for the bundle lock.
        base: A resolved directory that ``out_dir`` must stay inside: every component from ``base``
            down to ``out_dir`` must be a real directory, never a symbolic link. Without it,
            ``out_dir`` is used as given (symlinks in it are the caller's choice).

    Returns:
        The bundle directory (None with ``make_zip``) and the zip path (None without it).

    Raises:
        BundleError: The output directory cannot be created or written, leaves ``base`` (a
            component is a symlink or not a directory), the lock was not obtained within
            ``lock_timeout`` seconds, or an entry of the bundle's name already exists. Nothing
            partial is left behind.
    """
    final_zip_name = f"{name}.zip" if make_zip else None
    with _output_dir(out_dir, base) as directory:
        staging: str | None = None
        staging_zip: str | None = None
        try:
            contents = {**files, MANIFEST_NAME: _manifest(name, files)}
            # Made with os.mkdir, not tempfile.mkdtemp: its 0700 mode would survive the rename, and a
            # bundle should get the same permissions as any directory the user creates.
            candidate = f".{name}.{secrets.token_hex(4)}.tmp"
            directory.mkdir(candidate)
            staging = candidate
            tree = directory.subdir(staging, create=False)
            try:
                _write_tree(tree, contents)
            finally:
                tree.close()
            if final_zip_name is not None:
                candidate_zip = f".{name}.{secrets.token_hex(4)}.zip.tmp"
                staging_zip = candidate_zip
                _zip_tree(directory, candidate_zip, name, contents)
            with _locked(directory, lock_timeout):
                if directory.exists(name) or (final_zip_name is not None and directory.exists(final_zip_name)):
                    raise BundleError(f"a bundle named {name} already exists in {out_dir}")
                if final_zip_name is not None and staging_zip is not None:
                    directory.rename(staging_zip, final_zip_name)
                    staging_zip = None  # the zip is the bundle: its temporary directory goes (below)
                else:
                    directory.rename(staging, name)
                    staging = None
        except _Refused as exc:
            raise BundleError(f"refusing to write a bundle in {out_dir}: {exc}") from None
        except filelock.Timeout as exc:
            raise BundleError(f"timed out after {lock_timeout:g}s waiting for the bundle lock in {out_dir}") from exc
        except OSError as exc:
            raise BundleError(f"cannot write bundle in {out_dir}: {_reason(exc)}") from exc
        finally:
            if staging is not None:
                directory.remove_tree(staging)
            if staging_zip is not None:
                directory.remove_tree(staging_zip)
    if final_zip_name is not None:
        return None, out_dir / final_zip_name
    return out_dir / name, None
