"""Writing an evidence bundle atomically into an output directory shared with other writers.

This module owns the bundle layout on disk, ``manifest.json``, the temp-then-rename protocol and
the ``filelock`` that serialises publishing. It writes exactly the bytes it is given: redaction
and content are the caller's job.

Protocol: every file is written into a hidden temporary directory in the output directory (same
filesystem, so renames are atomic), ``manifest.json`` last; a zip, if asked for, is built from
that directory into a hidden temporary file. Then, holding ``.beam-feedback.lock`` in the output
directory, the zip and the directory are renamed to their final names. A reader that takes the
same lock (or simply ignores dot-names) never sees a half-written bundle, and a failure removes
every temporary it made.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import zipfile
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Final

import filelock

from beam_feedback.errors import BundleError

BUNDLE_SCHEMA: Final = "beam.feedback.bundle.v1"
LOCK_NAME: Final = ".beam-feedback.lock"
MANIFEST_NAME: Final = "manifest.json"
DEFAULT_LOCK_TIMEOUT: Final = 30.0


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _manifest(name: str, written: Mapping[str, bytes]) -> bytes:
    files = [
        {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for path, data in sorted(written.items())
    ]
    document = {"schema": BUNDLE_SCHEMA, "name": name, "files": files}
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _write_tree(directory: Path, files: Mapping[str, bytes]) -> None:
    for relative, data in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("xb") as handle:
            handle.write(data)


def _zip_tree(directory: Path, name: str, paths: list[str], target: Path) -> None:
    with zipfile.ZipFile(target, "x", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative in paths:
            archive.write(directory / relative, arcname=f"{name}/{relative}")


def write_bundle(
    out_dir: Path,
    name: str,
    files: Mapping[str, bytes],
    *,
    make_zip: bool,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> tuple[Path, Path | None]:
    """Publish ``files`` as ``out_dir/name/`` (and ``out_dir/name.zip`` with ``make_zip``).

    ``files`` maps relative POSIX paths to bytes; ``manifest.json`` is added, listing every other
    file with its size and sha256.

    Returns:
        The bundle directory and the zip path (None without ``make_zip``).

    Raises:
        BundleError: The output directory cannot be created or written, the lock was not obtained
            within ``lock_timeout`` seconds, or a bundle of that name already exists. Nothing
            partial is left behind.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create bundle output directory {out_dir}: {_reason(exc)}") from exc
    final_dir = out_dir / name
    final_zip = out_dir / f"{name}.zip" if make_zip else None
    staging: Path | None = None
    staging_zip: Path | None = None
    try:
        # Not tempfile.mkdtemp: its 0700 mode would survive the rename, and a bundle should get
        # the same permissions as any directory the user creates.
        candidate = out_dir / f".{name}.{secrets.token_hex(4)}.tmp"
        candidate.mkdir()
        staging = candidate
        contents = {**files, MANIFEST_NAME: _manifest(name, files)}
        _write_tree(staging, contents)
        if final_zip is not None:
            staging_zip = out_dir / f".{name}.{secrets.token_hex(4)}.zip.tmp"
            _zip_tree(staging, name, sorted(contents), staging_zip)
        with filelock.FileLock(str(out_dir / LOCK_NAME), timeout=lock_timeout):
            if final_dir.exists() or (final_zip is not None and final_zip.exists()):
                raise BundleError(f"a bundle named {name} already exists in {out_dir}")
            if final_zip is not None and staging_zip is not None:
                os.replace(staging_zip, final_zip)
                staging_zip = None
            try:
                os.rename(staging, final_dir)
            except OSError:
                if final_zip is not None:
                    with suppress(OSError):
                        final_zip.unlink()
                raise
            staging = None
    except filelock.Timeout as exc:
        raise BundleError(f"timed out after {lock_timeout:g}s waiting for the bundle lock in {out_dir}") from exc
    except OSError as exc:
        raise BundleError(f"cannot write bundle in {out_dir}: {_reason(exc)}") from exc
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        if staging_zip is not None:
            with suppress(OSError):
                staging_zip.unlink()
    return final_dir, final_zip
