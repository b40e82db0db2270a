"""Building a feedback report: input decoding, evidence, collection, rendering and bundles.

This module owns the order of operations and the confidential and redaction rules: what a
confidential report drops, that everything returned or written passes through the redactor, and
where bundles go. It also owns what path evidence may be: a regular file inside the workspace
root (no FIFO, device or directory; never reached through a symlink that leaves the root), read up
to a size cap. It must never upload anything, start Lean, or write anywhere except the bundle
output directory (by default ``<root>/.beam/feedback``, never through a symlink).
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Final, Literal, TextIO, TypeVar

from pydantic import JsonValue, ValidationError

from beam_feedback._bundle import DEFAULT_LOCK_TIMEOUT, write_bundle
from beam_feedback._markdown import EvidenceText, render_markdown
from beam_feedback.collect import DEFAULT_COMMAND_TIMEOUT, collect_context
from beam_feedback.errors import FeedbackError, InvalidReportError
from beam_feedback.models import FeedbackReport, FeedbackResult, ReportMetadata, WorkspaceRef
from beam_lsp import strict_json
from beam_lsp.redaction import Redactor

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["DEFAULT_BUNDLE_SUBDIR", "build_report", "load_report", "parse_report", "read_input"]

DEFAULT_BUNDLE_SUBDIR: Final = Path(".beam") / "feedback"
"""Where bundles go, relative to the workspace root, when no output directory is given."""

_MAX_EVIDENCE_BYTES: Final = 1024 * 1024
_EVIDENCE_FLAGS: Final = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
)
_PROC_FD: Final = Path("/proc/self/fd")
_FILE_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
J = TypeVar("J")
_SLUG_UNSAFE: Final = re.compile(r"[^a-z0-9]+")
_MAX_SLUG: Final = 60


# --- decoding -------------------------------------------------------------------------------


def _where(location: tuple[int | str, ...]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error: ValidationError) -> str:
    undeclared: list[str] = []
    messages: list[str] = []
    for detail in error.errors(include_url=False):
        location = tuple(detail["loc"])
        kind = detail["type"]
        if kind == "extra_forbidden":
            if len(location) == 1:
                undeclared.append(str(location[0]))
            else:
                messages.append(f"{_where(location[:-1])} accepts no undeclared fields: {location[-1]}")
        elif kind == "missing":
            field = location[-1]
            if len(location) == 1:
                messages.append(f"missing required string field '{field}'")
            else:
                messages.append(f"{_where(location[:-1])}: missing required field '{field}'")
        elif kind in ("model_type", "model_attributes_type", "dict_type") and not location:
            messages.append("feedback input must be a JSON object")
        elif kind == "value_error":
            reason = str(detail.get("ctx", {}).get("error", detail["msg"]))
            # Top-level validators already name their field; nested ones need the location.
            messages.append(f"{_where(location)}: {reason}" if len(location) > 1 else reason)
        else:
            messages.append(f"{_where(location)}: {detail['msg']}" if location else detail["msg"])
    if undeclared:
        messages.insert(0, "feedback input accepts no undeclared fields: " + ", ".join(undeclared))
    return "; ".join(messages)


def _sniff(text: str) -> Literal["json", "toml"]:
    """JSON if the text starts like JSON (``{``, or a ``[`` that is not a TOML table), else TOML."""
    start = text.lstrip()
    if start.startswith("{"):
        return "json"
    if start.startswith("["):
        try:
            json.loads(start)
        except ValueError:
            return "toml"
        return "json"
    return "toml"


def _finite(text: str) -> float:
    """A TOML float, but not ``nan`` or ``inf``: the report is JSON (it rendered ``NaN`` in a JSON block)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"feedback input holds {text}: JSON has no NaN or Infinity")
    return value


def _decode_input(text: str, format: Literal["json", "toml"]) -> dict[str, object]:
    """Decode report input text into a plain dict without validating its fields.

    Raises:
        InvalidReportError: The text is not valid JSON/TOML, repeats a JSON key, or is not an
            object.
    """
    decoded: object
    if format == "toml":
        try:
            decoded = tomllib.loads(text, parse_float=_finite)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidReportError(f"feedback input is not valid TOML: {exc}") from exc
        except ValueError as exc:  # from _finite
            raise InvalidReportError(str(exc)) from exc
    else:
        try:
            decoded = strict_json.loads(text)
        except strict_json.DuplicateKeyError as exc:
            raise InvalidReportError(f"feedback input repeats the key {exc.key!r}") from exc
        except ValueError as exc:
            reason = str(exc).removeprefix("not valid JSON: ")
            raise InvalidReportError(f"feedback input is not valid JSON: {reason}") from exc
    if not isinstance(decoded, dict):
        raise InvalidReportError("feedback input must be a JSON object")
    return decoded


def read_input(
    source: str | os.PathLike[str] | TextIO, *, format: Literal["auto", "json", "toml"] = "auto"
) -> dict[str, object]:
    """Read report input (a file, or an open text stream such as standard input) without validating it.

    The result is the decoded object, e.g. for a caller that merges its own fields over it before
    :func:`parse_report` (the ``beam-feedback`` command merges its flags this way).

    Args:
        source: A file path, or a text stream to read to its end.
        format: ``auto`` picks TOML for a ``.toml`` suffix, JSON for ``.json``, and otherwise
            looks at the text (an object starting with ``{`` is JSON).

    Returns:
        The decoded object (a plain dict; JSON text must not repeat a key).

    Raises:
        InvalidReportError: The input cannot be read, does not decode, or is not an object.
    """
    path = Path(source) if isinstance(source, (str, os.PathLike)) else None
    try:
        text = Path(source).read_text(encoding="utf-8") if isinstance(source, (str, os.PathLike)) else source.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = f" {path}" if path is not None else ""
        raise InvalidReportError(f"cannot read feedback input{where}: {reason}") from exc
    text = text.removeprefix("\ufeff")  # a byte order mark (Windows editors write one) is no JSON or TOML
    if format == "auto":
        suffix = path.suffix.lower() if path is not None else ""
        format = "toml" if suffix == ".toml" else "json" if suffix == ".json" else _sniff(text)
    return _decode_input(text, format)


def parse_report(
    data: Mapping[str, object] | str | bytes, *, format: Literal["auto", "json", "toml"] = "auto"
) -> FeedbackReport:
    """Validate report input: a mapping (e.g. MCP tool arguments) or JSON/TOML text.

    JSON text must not repeat a key (pydantic would silently keep the last one).

    Args:
        data: The input object, or its JSON or TOML text.
        format: How to decode ``data`` when it is text; ``auto`` treats text starting with ``{``
            as JSON and anything else as TOML.

    Returns:
        The validated report.

    Raises:
        InvalidReportError: The text does not decode, or the object is not a valid report; the
            message names every problem (e.g. ``missing required string field 'title'``).
    """
    if isinstance(data, (str, bytes)):
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        data = _decode_input(text, _sniff(text) if format == "auto" else format)
    if not isinstance(data, Mapping):
        raise InvalidReportError("feedback input must be a JSON object")
    try:
        return FeedbackReport.model_validate(dict(data))
    except ValidationError as exc:
        raise InvalidReportError(_describe(exc)) from exc


def load_report(path: str | os.PathLike[str], *, format: Literal["auto", "json", "toml"] = "auto") -> FeedbackReport:
    """Read and validate a report input file (JSON, or TOML with the same fields).

    Args:
        path: The file to read.
        format: ``auto`` picks TOML for ``.toml``, JSON for ``.json``, and otherwise looks at the
            text.

    Returns:
        The validated report.

    Raises:
        InvalidReportError: The file cannot be read or does not hold a valid report.
    """
    return parse_report(read_input(path, format=format))


# --- building -------------------------------------------------------------------------------


def _workspace_root(report: FeedbackReport) -> Path | None:
    if report.workspace is None:
        return None
    root = Path(report.workspace.root).expanduser()
    if not root.is_absolute():
        raise InvalidReportError(f"workspace root must be an absolute path: {report.workspace.root}")
    try:
        root = root.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop is a RuntimeError before Python 3.13
        raise InvalidReportError(f"workspace root cannot be resolved: {report.workspace.root}: {exc}") from exc
    if not report.confidential and not root.is_dir():
        raise InvalidReportError(f"workspace root is not an existing directory: {root}")
    return root


def _opened_path(fd: int, candidate: Path) -> Path:
    """Where the open file really is (Linux knows; elsewhere the path it was opened by, if unchanged)."""
    if _PROC_FD.is_dir():
        return Path(os.readlink(_PROC_FD / str(fd)))
    opened, now = os.fstat(fd), os.stat(candidate)  # pragma: no cover - systems without /proc/self/fd
    same = (opened.st_dev, opened.st_ino) == (now.st_dev, now.st_ino)  # pragma: no cover
    return candidate.resolve() if same else Path("/")  # pragma: no cover


def _read_evidence(name: str, raw_path: str, root: Path | None) -> tuple[str, str, bool]:
    """Read path evidence: a regular file inside ``root``, at most ``_MAX_EVIDENCE_BYTES`` (+1 to tell)."""
    if root is None:
        raise InvalidReportError(f"evidence {name!r}: path evidence needs a workspace root")
    candidate = Path(raw_path).expanduser()
    try:
        candidate = (candidate if candidate.is_absolute() else root / candidate).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop is a RuntimeError before Python 3.13
        raise InvalidReportError(f"evidence {name!r}: cannot read {raw_path}: {exc}") from exc
    if not candidate.is_relative_to(root):
        raise InvalidReportError(f"evidence {name!r}: path must be inside the workspace root: {raw_path}")
    try:
        # Never blocks (a FIFO opens at once) and never follows a symlink put in place since the resolve.
        fd = os.open(candidate, _EVIDENCE_FLAGS)
    except OSError as exc:
        raise InvalidReportError(f"evidence {name!r}: cannot read {raw_path}: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((label for test, label in _FILE_KINDS if test(mode)), "not a regular file")
            raise InvalidReportError(f"evidence {name!r}: {raw_path} is {kind}, not a regular file")
        if not _opened_path(fd, candidate).is_relative_to(root):
            raise InvalidReportError(f"evidence {name!r}: path must be inside the workspace root: {raw_path}")
        chunks: list[bytes] = []
        size = 0
        while size <= _MAX_EVIDENCE_BYTES:
            chunk = os.read(fd, _MAX_EVIDENCE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InvalidReportError(f"evidence {name!r}: cannot read {raw_path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    truncated = len(data) > _MAX_EVIDENCE_BYTES
    return str(candidate), data[:_MAX_EVIDENCE_BYTES].decode("utf-8", errors="replace"), truncated


def _evidence(report: FeedbackReport, root: Path | None, warnings: list[str]) -> list[EvidenceText]:
    entries: list[EvidenceText] = []
    for entry in report.evidence:
        if entry.path is not None:
            source, text, truncated = _read_evidence(entry.name, entry.path, root)
            if truncated:
                warnings.append(f"evidence {entry.name!r} was cut to its first {_MAX_EVIDENCE_BYTES} bytes")
            entries.append(EvidenceText(entry.name, text, "text", source))
        elif isinstance(entry.content, str):
            entries.append(EvidenceText(entry.name, entry.content, "text", None))
        else:
            pretty = json.dumps(entry.content, indent=2, ensure_ascii=False)
            entries.append(EvidenceText(entry.name, pretty, "json", None))
    return entries


def _slug(title: str) -> str:
    slug = _SLUG_UNSAFE.sub("-", title.lower()).strip("-")[:_MAX_SLUG].strip("-")
    return slug or "feedback"


def _json_bytes(value: JsonValue) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


@dataclass(frozen=True)
class _Chain:
    """Two redactors in turn (the default redactor of a home directory reached through a symbolic link)."""

    first: Redactor
    then: Redactor

    def redact(self, text: str) -> str:
        return self.then.redact(self.first.redact(text))

    def redact_json(self, value: J) -> J:
        return self.then.redact_json(self.first.redact_json(value))


def _redact_tree(redactor: Redactor | _Chain, value: JsonValue) -> JsonValue:
    """``redact_json`` that redacts object keys too: caller data may be keyed by path or secret (stats by root)."""
    if isinstance(value, dict):
        return {redactor.redact(key): _redact_tree(redactor, item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_tree(redactor, item) for item in value]
    return redactor.redact_json(value)


def _default_redactor(environ: Mapping[str, str], argv: Sequence[str]) -> Redactor | _Chain:
    """The environment's and ``argv``'s secrets, and the home directory as given and as resolved.

    Workspace roots are resolved (the MCP server passes canonical ones), so under a home reached through a
    symbolic link (``/home -> /var/home``, automounts) every path is spelled under the real directory.
    """
    redactor = Redactor.from_sources(environ, argv, home=True)
    home = environ.get("HOME") or environ.get("USERPROFILE") or ""
    real = os.path.realpath(home) if home else home
    if real.rstrip(os.sep) == home.rstrip(os.sep):
        return redactor
    # The resolved spelling first: the literal home would match inside it (/var/home/ada holds /home/ada).
    return _Chain(Redactor.from_sources({**environ, "HOME": real}, argv, home=True), redactor)


def build_report(
    report: FeedbackReport | Mapping[str, object],
    *,
    runtime_stats: object = None,
    open_files: object = None,
    identity: Mapping[str, JsonValue] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    redactor: Redactor | None = None,
    env: Mapping[str, str] | None = None,
    argv: Sequence[str] | None = None,
    now: datetime | None = None,
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> FeedbackResult:
    """Validate, collect, render and (optionally) write a bundle for one feedback report.

    This is the single entry point for the CLI and the MCP ``beam_feedback_report`` tool: pass the
    tool arguments (including ``workspace``) as ``report`` and the cached runtime's stats and open
    files, then return ``result.to_json()`` as ``structuredContent``. It is synchronous and keeps
    no state between calls; it blocks on file I/O and on short commands (each bounded by
    ``command_timeout``), so async callers should run it in a worker thread
    (``anyio.to_thread.run_sync``). Nothing is uploaded.

    Confidential reports collect no project context, ignore ``runtime_stats``/``open_files``,
    drop ``request``, ``response``, ``evidence`` and ``client_request_id``, and do not echo the
    workspace. With ``redact`` (the default, forced by ``confidential``) every string in the
    result and in the bundle passes through the redactor.

    Args:
        report: A validated report or the raw input mapping.
        runtime_stats: The caller's cached runtime statistics for this workspace, if any.
        open_files: The caller's open files for this workspace, if any.
        identity: Members merged over ``collected.identity`` (e.g. the MCP server's name,
            version and ``mcp_protocol``).
        out_dir: Parent directory for bundles; default ``<workspace root>/.beam/feedback``.
        redactor: The redactor to use when ``redact`` is on; default
            ``Redactor.from_sources(env, argv, home=True)``, which also replaces the home
            directory's resolved path when the home is reached through a symbolic link.
        env: Environment for the default redactor and the commands; default ``os.environ``.
        argv: The command line whose secret flags the default redactor hides; default
            ``sys.argv`` (the MCP server adds its Lean server command, as its own redactor does).
        now: The report time (tests pin it); default the current time.
        command_timeout: Seconds each external command (``git``, ``elan``, ``lake``) may take.
        lock_timeout: Seconds to wait for the bundle lock.

    Returns:
        The result; ``to_json()`` gives the ``structuredContent`` shape.

    Raises:
        InvalidReportError: The input or its evidence is invalid, the workspace root is not an
            existing absolute directory, or a bundle was asked for with nowhere to put it.
        BundleError: The bundle could not be written.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    default_argv = sys.argv if argv is None else argv
    if not isinstance(report, FeedbackReport):
        try:
            report = parse_report(report)
        except InvalidReportError as exc:  # the model quotes bad input (an evidence name): redact as by default
            fallback = redactor if redactor is not None else _default_redactor(environ, default_argv)
            message = fallback.redact(exc.message)
            if message == exc.message:
                raise
            raise InvalidReportError(message) from exc
    if not report.redact:
        redactor = Redactor()
    chosen = redactor if redactor is not None else _default_redactor(environ, default_argv)
    try:
        return _build(
            report,
            redactor=chosen,
            environ=environ,
            runtime_stats=runtime_stats,
            open_files=open_files,
            identity=identity,
            out_dir=out_dir,
            now=now,
            command_timeout=command_timeout,
            lock_timeout=lock_timeout,
        )
    except FeedbackError as exc:
        # Error messages quote paths and evidence names: they leave this function too.
        message = chosen.redact(exc.message)
        if message == exc.message:
            raise
        raise type(exc)(message) from exc


def _build(
    report: FeedbackReport,
    *,
    redactor: Redactor | _Chain,
    environ: Mapping[str, str],
    runtime_stats: object,
    open_files: object,
    identity: Mapping[str, JsonValue] | None,
    out_dir: str | os.PathLike[str] | None,
    now: datetime | None,
    command_timeout: float,
    lock_timeout: float,
) -> FeedbackResult:
    root = _workspace_root(report)
    if report.confidential:
        report = report.model_copy(
            update={"request": None, "response": None, "evidence": [], "client_request_id": None}
        )
    bundle_parent: Path | None = None
    bundle_base: Path | None = None  # the default parent stays inside the root, never through a symlink
    if report.bundle != "none":
        if out_dir is not None:
            bundle_parent = Path(out_dir).absolute()
        elif root is not None:
            bundle_parent, bundle_base = root / DEFAULT_BUNDLE_SUBDIR, root
        else:
            raise InvalidReportError("a bundle needs an output directory or a workspace root")

    warnings: list[str] = []
    evidence = _evidence(report, root, warnings)
    context = collect_context(
        None if report.confidential else root,
        confidential=report.confidential,
        runtime_stats=runtime_stats,
        open_files=open_files,
        identity=identity,
        env=environ,
        command_timeout=command_timeout,
    )
    warnings[:0] = context.warnings
    generated = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    metadata = ReportMetadata(
        title=report.title,
        kind=report.kind,
        severity=report.severity,
        generated_at=generated.strftime("%Y-%m-%dT%H:%M:%SZ"),
        active_root=None if report.confidential or root is None else str(root),
        tags=report.tags,
        bundle=report.bundle,
        redacted=report.redact,
        confidential=report.confidential,
        client_request_id=report.client_request_id,
    )
    markdown = render_markdown(
        report,
        metadata,
        collected=context.data,
        warnings=warnings,
        evidence=evidence,
        include_collected=report.include_collected,
    )
    # Redact once, at the edge: everything below is what leaves this function or hits the disk.
    markdown = redactor.redact(markdown)
    metadata = ReportMetadata.model_validate(redactor.redact_json(metadata.to_json()))
    collected = {key: _redact_tree(redactor, value) for key, value in context.data.items()}
    warnings = [redactor.redact(warning) for warning in warnings]
    # The name too: it becomes a file name in the bundle, its manifest and its zip.
    evidence = [
        EvidenceText(redactor.redact(entry.name), redactor.redact(entry.text), entry.language, entry.source)
        for entry in evidence
    ]
    workspace = None if report.confidential or root is None else WorkspaceRef(root=str(root))
    result = FeedbackResult(
        markdown=markdown,
        metadata=metadata,
        collection_warnings=warnings,
        collected=collected if report.include_collected else None,
        workspace=workspace,
    )
    if bundle_parent is None:
        return result

    name = f"{generated.strftime('%Y%m%d-%H%M%S')}-{_slug(metadata.title)}-{secrets.token_hex(4)}"
    bundle_dir = bundle_parent / name
    zip_path = bundle_dir.with_name(f"{name}.zip") if report.bundle == "zip" else None
    result = result.model_copy(
        update={  # a zip bundle is the zip alone: no directory is left beside it
            "bundle_dir": redactor.redact(str(bundle_dir)) if zip_path is None else None,
            "zip_path": None if zip_path is None else redactor.redact(str(zip_path)),
        }
    )
    full = result.model_copy(update={"collected": collected}).to_json()
    if report.confidential:
        full.pop("bundle_dir", None)
        full.pop("zip_path", None)
    files = {
        "card.md": markdown.encode("utf-8"),
        "metadata.json": _json_bytes(metadata.to_json()),
        "collected.json": _json_bytes(collected),
        "report.json": _json_bytes(redactor.redact_json(full)),
    }
    for entry in evidence:
        files[f"evidence/{entry.name}"] = entry.text.encode("utf-8")
    write_bundle(bundle_parent, name, files, make_zip=zip_path is not None, lock_timeout=lock_timeout, base=bundle_base)
    return result
