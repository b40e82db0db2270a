"""Speculative execution on the stock Lean server: probe mirrors, probe text, handles.

A probe never touches the source document. Each source document gets a small pool of private *mirror*
documents (URIs beside the source that are never written to disk) holding the source's text up to the
insertion point, the probe text, and nothing after it: truncation keeps a probe's cost proportional to the
enclosing declaration, and an unchanged prefix lets Lean reuse its snapshots. Handles are broker-side chains
`{workspace, session, uri, version, basis, texts}` replayed on a mirror.

Owns text surgery, mirror lifecycle and handle bookkeeping; it must not speak MCP.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
import secrets
import time
from pathlib import Path
from typing import Any

import anyio

from beam_lsp import LeanClient, LeanDiagnostic, Position, TextDocument, utf16_len

from .errors import CONTENT_MODIFIED, BrokerError, invalid_params

DEFAULT_MIRRORS_PER_DOCUMENT = 2
DEFAULT_MIRROR_IDLE_SECONDS = 120.0
_TRACE = re.compile(r"^\[[A-Za-z_][\w.]*\]")
_MIRROR = re.compile(r"_beamProbe\d+\.lean$")
_ids = itertools.count(1)


# ---- probe text ---------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Basis:
    """Where a probe runs in the source document.

    Attributes:
        mode: `proof` (tactics on the goals there) or `command` (a command after the enclosing command).
        prefix_end: String offset in the source text where the mirror's copy of the source ends.
        column: Column (in characters) the probe's lines are indented to (proof mode), else 0.
        inline: The probe continues the last source line (a tactic after `by` on the same line).
        goal_position: Where the source's goals describe the probe's starting state (proof mode).
    """

    mode: str
    prefix_end: int
    column: int
    inline: bool = False
    goal_position: Position | None = None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _line_end(doc: TextDocument, line: int) -> int:
    return doc.offset_at(Position(line=line, character=utf16_len(doc.line_text(line))))


def proof_basis(doc: TextDocument, pos: Position) -> Basis:
    """Insertion point for tactics: before the tactic at its first character, after it otherwise.

    Tactics are approximated by lines (one tactic per line, continuation lines indented deeper), which is
    how nearly all Lean proofs are laid out; a tactic after `by` on the declaration line is handled too.
    """
    line = doc.line_text(pos.line)
    stripped = line.strip()
    col = _indent(line)
    by_at = stripped.rfind(" by ")
    ends_with_by = stripped == "by" or stripped.endswith((" by", ":=by", "(by"))
    if ends_with_by:
        # Position on the `... := by` line: the probe is the first tactic of the block.
        nxt = next((i for i in range(pos.line + 1, doc.line_count) if doc.line_text(i).strip()), None)
        column = _indent(doc.line_text(nxt)) if nxt is not None and _indent(doc.line_text(nxt)) > col else col + 2
        return Basis("proof", _line_end(doc, pos.line), column, goal_position=pos)
    start_col = col
    if by_at >= 0:
        start_col = col + by_at + 4
    start_units = utf16_len(line[:start_col])
    if pos.character <= start_units:
        # Before the tactic: the mirror's copy stops at the tactic's first character.
        start = Position(line=pos.line, character=start_units)
        return Basis("proof", doc.offset_at(start), start_col, inline=True, goal_position=start)
    # After the tactic: keep its continuation lines (indented deeper), then continue at its column.
    end_line = pos.line
    for i in range(pos.line + 1, doc.line_count):
        text = doc.line_text(i)
        if text.strip() and _indent(text) <= col:
            break
        if text.strip():
            end_line = i
    tactic_end = Position(line=end_line, character=utf16_len(doc.line_text(end_line).rstrip()))
    return Basis("proof", _line_end(doc, end_line), start_col, goal_position=tactic_end)


def command_basis(doc: TextDocument, pos: Position) -> Basis:
    """Insertion point for a command: after the command containing the position.

    A command ends where the next non-blank line starts in column 0.
    """
    end_line = pos.line
    for i in range(pos.line + 1, doc.line_count):
        text = doc.line_text(i)
        if text.strip() and _indent(text) == 0:
            break
        if text.strip():
            end_line = i
    return Basis("command", _line_end(doc, end_line), 0)


@dataclasses.dataclass(frozen=True)
class ProbeText:
    """A mirror's full text and the span (UTF-16 positions) of the last probe text in it."""

    text: str
    span_start: Position
    span_end: Position


def build(source: str, basis: Basis, texts: list[str]) -> ProbeText:
    """The mirror text: the source up to the basis, then each probe text in order, then nothing."""
    out = source[: basis.prefix_end]
    pad = " " * basis.column
    start_offset = len(out)
    for i, raw in enumerate(texts):
        body = raw.strip("\n")
        lines = body.split("\n")
        if basis.mode == "proof":
            if i == 0 and basis.inline and not out.endswith("\n"):
                sep = ""
                first_pad = ""
            else:
                sep = "" if out.endswith("\n") else "\n"
                first_pad = pad
            block = first_pad + lines[0] + "".join("\n" + pad + ln if ln.strip() else "\n" for ln in lines[1:])
        else:
            sep = "\n\n" if not out.endswith("\n") else "\n"
            first_pad = ""
            block = body
        start_offset = len(out) + len(sep) + (len(first_pad) if basis.mode == "proof" else 0)
        out = out + sep + block
    out += "\n"
    doc = TextDocument("mirror", out, 0)
    return ProbeText(out, doc.position_at(start_offset), doc.position_at(len(out) - 1))


def in_span(d: LeanDiagnostic, start: Position, end: Position) -> bool:
    """Whether a diagnostic starts inside the probe's span (end included)."""
    s = (d.range.start.line, d.range.start.character)
    return (start.line, start.character) <= s <= (end.line, end.character)


def severity_name(d: LeanDiagnostic) -> str:
    """Run-message severity (`hint` folds into `information`)."""
    return {1: "error", 2: "warning"}.get(d.severity or 3, "information")


def is_trace(d: LeanDiagnostic) -> bool:
    """An information message rendered from a trace node (`[Class.name] ...`)."""
    return (d.severity or 3) >= 3 and bool(_TRACE.match(d.message))


def is_mirror_path(path: str) -> bool:
    """Whether a path or URI names a private probe mirror (never a user document)."""
    return bool(_MIRROR.search(path))


# ---- mirrors ------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Mirror:
    """One private mirror document (a Lean file worker of its own)."""

    uri: str
    lock: anyio.Lock = dataclasses.field(default_factory=anyio.Lock)
    opened: bool = False
    last_used: float = dataclasses.field(default_factory=time.monotonic)
    waiting: int = 0


@dataclasses.dataclass
class MirrorPool:
    """The mirrors of one source document: at most `limit`, probes on one mirror serialized."""

    source_uri: str
    limit: int
    mirrors: list[Mirror] = dataclasses.field(default_factory=list)

    def mirror_uri(self, k: int) -> str:
        """A private URI beside the source: `<Stem>_beamProbe<k>.lean` (a valid module name, never on disk)."""
        path = Path(self.source_uri.removeprefix("file://"))
        stem = path.stem.replace(".", "_")
        return f"file://{path.parent.as_posix()}/{stem}_beamProbe{k}.lean"

    def acquire_slot(self) -> Mirror:
        """An idle mirror, a new one (under the limit), or the least contended one to wait for."""
        for mirror in self.mirrors:
            if not mirror.lock.locked():
                return mirror
        if len(self.mirrors) < self.limit:
            mirror = Mirror(self.mirror_uri(len(self.mirrors) + 1))
            self.mirrors.append(mirror)
            return mirror
        return min(self.mirrors, key=lambda m: m.waiting)

    async def close_all(self, client: LeanClient | None) -> None:
        """Close every open mirror in Lean and forget them."""
        mirrors, self.mirrors = self.mirrors, []
        for mirror in mirrors:
            if mirror.opened and client is not None and client.exited is None:
                await client.close(mirror.uri)
                client.cache.forget(mirror.uri)

    async def close_idle(self, client: LeanClient | None, idle_seconds: float) -> None:
        """Close mirrors unused for `idle_seconds` (each holds a Lean worker process)."""
        now = time.monotonic()
        keep = []
        for mirror in self.mirrors:
            if not mirror.lock.locked() and mirror.waiting == 0 and now - mirror.last_used >= idle_seconds:
                if mirror.opened and client is not None and client.exited is None:
                    await client.close(mirror.uri)
                    client.cache.forget(mirror.uri)
            else:
                keep.append(mirror)
        self.mirrors = keep


# ---- handles ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class HandleRecord:
    """A broker-side continuation: replaying `texts` at `basis` on the document version gives its state."""

    raw: str
    uri: str
    version: int
    basis: Basis
    texts: tuple[str, ...]


class HandleStore:
    """Handles of one workspace session; invalidated by edits, close, restart and drop."""

    def __init__(self) -> None:
        """Empty store."""
        self._live: dict[str, HandleRecord] = {}
        self._stale: set[str] = set()

    def mint(self, token: str, uri: str, version: int, basis: Basis, texts: tuple[str, ...]) -> str:
        """Store a new handle and return its raw value."""
        doc_hash = hashlib.sha256(uri.encode()).hexdigest()[:12]
        raw = f"runAt:{doc_hash}:{token}:{next(_ids)}-{secrets.token_hex(4)}"
        self._live[raw] = HandleRecord(raw, uri, version, basis, texts)
        return raw

    def get(self, raw: str, uri: str) -> HandleRecord:
        """The live record of a handle for document `uri`.

        Raises:
            BrokerError: `contentModified` for a stale handle, `invalidParams` for an unknown handle or one
                that belongs to another document.
        """
        if raw in self._stale:
            raise BrokerError(
                CONTENT_MODIFIED, "handle is stale: its document changed or was closed", {"reason": "staleHandle"}
            )
        record = self._live.get(raw)
        if record is None:
            raise invalid_params("unknown handle (released, consumed by a linear run, or never issued)")
        if record.uri != uri:
            raise invalid_params(f"handle does not belong to this document: it was issued for {record.uri}")
        return record

    def take(self, raw: str) -> None:
        """Remove a handle (release, linear use)."""
        self._live.pop(raw, None)

    def invalidate_document(self, uri: str, keep_version: int | None = None) -> None:
        """Mark the document's handles stale (all, or those not of `keep_version`)."""
        for raw, record in list(self._live.items()):
            if record.uri == uri and record.version != keep_version:
                del self._live[raw]
                self._stale.add(raw)

    def clear(self) -> None:
        """Forget everything (session restart or drop)."""
        self._live.clear()
        self._stale.clear()

    def __len__(self) -> int:
        return len(self._live)


def wrap(workspace_key: str, epoch: int, session: str, raw: str) -> dict[str, Any]:
    """The opaque handle clients pass back."""
    return {"workspaceId": workspace_key, "backend": "lean", "epoch": epoch, "session": session, "raw": {"value": raw}}


def unwrap(handle: dict[str, Any]) -> tuple[str, int, str, str]:
    """Parse a client handle into (workspaceId, epoch, session, raw).

    Raises:
        BrokerError: `invalidParams` "malformed handle".
    """
    try:
        workspace, epoch, session, raw = (
            handle["workspaceId"],
            handle["epoch"],
            handle["session"],
            handle["raw"]["value"],
        )
    except (KeyError, TypeError):
        raise invalid_params("malformed handle: pass back the next_handle object unchanged") from None
    if handle.get("backend") != "lean" or not all(isinstance(x, str) for x in (workspace, session, raw)):
        raise invalid_params("malformed handle: pass back the next_handle object unchanged")
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise invalid_params("malformed handle: pass back the next_handle object unchanged")
    return workspace, epoch, session, raw
