"""Proof handles: broker-side continuations of speculative runs, and the opaque objects clients pass back.

A handle is a chain `{workspace, session, uri, version, basis, texts}` kept here and replayed on a mirror; the
client only sees `{workspaceId, backend, epoch, session, raw}`. Handles of one session live in a `HandleStore`
and are invalidated by edits, close, restart and drop. No Lean I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import secrets
from typing import Any

from ._probe_text import Basis
from .errors import CONTENT_MODIFIED, BrokerError, invalid_params


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
        self._ids = itertools.count(1)

    def mint(self, token: str, uri: str, version: int, basis: Basis, texts: tuple[str, ...]) -> str:
        """Store a new handle and return its raw value."""
        doc_hash = hashlib.sha256(uri.encode()).hexdigest()[:12]
        raw = f"runAt:{doc_hash}:{token}:{next(self._ids)}-{secrets.token_hex(4)}"
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
