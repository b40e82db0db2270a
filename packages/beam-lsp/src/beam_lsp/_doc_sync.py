"""The document mirror of `LeanClient`: open, change (sent at once or deferred), close, and what Lean is told of it.

`DocumentSync` is mixed into `LeanClient`. It owns the client's copy of every open document and the rule that Lean
always hears of a change the copy holds: `didOpen`/`didChange`/`didSave`/`didClose` are shielded once the copy has
changed, and a deferred change (`change(defer=...)`) goes out before anything that concerns its document. The
barrier (`_barrier.py`) and the JSON-RPC peer do the waiting and the sending.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ._barrier import Barrier
from .documents import TextDocument
from .errors import BeamLspError, DocumentNotOpen, ServerExited
from .jsonrpc import JsonRpcPeer

__all__ = ["DocumentSync"]


class DocumentSync:
    """The open documents of one client and their traffic to Lean (see the module docstring)."""

    # Provided by `LeanClient`.
    _docs: dict[str, TextDocument]
    _deferred: dict[str, _Deferred]
    _barrier: Barrier
    _rpc: JsonRpcPeer
    _rpc_sessions: dict[str, int | str]
    _rpc_connecting: dict[str, anyio.Lock]
    _tg: TaskGroup | None

    @property
    def exited(self) -> ServerExited | None:
        """Why the server is gone, or None while it runs (see `LeanClient.exited`)."""
        raise NotImplementedError

    def _check_alive(self) -> None:
        raise NotImplementedError

    def document(self, uri: str) -> TextDocument:
        """The client's copy of an open document.

        Raises:
            DocumentNotOpen: The document is not open.
        """
        doc = self._docs.get(uri)
        if doc is None:
            raise DocumentNotOpen(uri)
        return doc

    def is_open(self, uri: str) -> bool:
        """Whether the document is open in this client."""
        return uri in self._docs

    @property
    def open_documents(self) -> list[str]:
        """URIs of the open documents."""
        return list(self._docs)

    async def open(self, uri: str, text: str, *, dependency_build_mode: str | None = None) -> int:
        """Open a document at version 1 (`textDocument/didOpen`); returns the version.

        Raises:
            ServerExited: The server is gone.
            ValueError: The document is already open.
        """
        self._check_alive()
        if uri in self._docs:
            raise ValueError(f"document is already open: {uri}")
        doc = self._docs[uri] = TextDocument(uri, text, 1)
        item = {"uri": uri, "languageId": doc.language_id, "version": 1, "text": text}
        params: dict[str, Any] = {"textDocument": item}
        if dependency_build_mode is not None:
            params["dependencyBuildMode"] = dependency_build_mode
        with anyio.CancelScope(shield=True):  # the client's copy is open: Lean must hear of it (see `_send_change`)
            async with self._barrier.open(uri):
                await self._rpc.notify("textDocument/didOpen", params)
        return 1

    async def change(self, uri: str, text: str, *, save: bool = True, defer: float = 0) -> int:
        """Replace the document's text (`didChange` of what differs, then `didSave`); returns the new version.

        A change always bumps the version, which also restarts a crashed Lean worker for the document.

        With `defer` (seconds), a changed text is not sent yet: the client's copy and version change at once,
        and Lean gets the change when the time is up or as soon as anything else concerns the document (a
        request about it, `sync`, `close`, a request that names no document, `files_changed`), whichever comes
        first. Changes made meanwhile reach Lean as one. Lean then elaborates nothing for this document while
        requests about other documents (probe mirrors) run alone on the CPU, and nothing that asks about this
        document ever sees Lean's older text.

        Raises:
            DocumentNotOpen: The document is not open.
            ServerExited: The server is gone.
        """
        self._check_alive()
        doc = self.document(uri)
        async with self._barrier.lock(uri):
            if self._docs.get(uri) is not doc:  # closed (or reopened) while we waited for the lock
                raise DocumentNotOpen(uri)
            return await self._change_locked(doc, text, save=save, defer=defer)

    async def _change_locked(self, doc: TextDocument, text: str, *, save: bool, defer: float) -> int:
        """`change` of an open document whose lock the caller holds; returns the new version.

        The copy changes before the first await, so a caller that read the text under the same lock changes the
        text it read.
        """
        uri = doc.uri
        version = doc.version + 1
        deferred = self._deferred.pop(uri, None)
        if defer > 0 and text != doc.text and self._tg is not None:
            if deferred is None:
                deferred = _Deferred(doc.text)
                self._tg.start_soon(self._send_later, uri, deferred, defer)
            deferred.save = deferred.save or save
            self._deferred[uri] = deferred
            doc.replace(text, version)
            return version
        held = doc if deferred is None else TextDocument(uri, deferred.sent, 0)  # what Lean has
        content = held.change_to(text)
        doc.replace(text, version)
        await self._send_change(uri, version, content, save or (deferred is not None and deferred.save))
        return version

    async def _send_change(self, uri: str, version: int, content: dict[str, Any], save: bool) -> None:
        """Send a change the client's copy already holds.

        Shielded: a caller cancelled while the notification waits for the write lock (another task writing to
        Lean) would otherwise leave the copy a version ahead of Lean, and the next change, a range edit computed
        against that copy, would be spliced into Lean's older text. The cancellation lands right after.
        """
        self._barrier.changed(uri)
        changes = {"textDocument": {"uri": uri, "version": version}, "contentChanges": [content]}
        with anyio.CancelScope(shield=True):
            await self._rpc.notify("textDocument/didChange", changes)
            if save:
                await self._rpc.notify("textDocument/didSave", {"textDocument": {"uri": uri}})

    async def _send_deferred(self, uri: str, only: _Deferred | None = None) -> None:
        """Send the document's deferred change now (nothing when there is none, or it is not `only`)."""
        if uri not in self._deferred or uri not in self._docs:
            return
        async with self._barrier.lock(uri):  # after a change in flight; a request waits until this is out
            deferred = self._deferred.get(uri)
            doc = self._docs.get(uri)
            if deferred is None or doc is None or (only is not None and deferred is not only):
                return
            del self._deferred[uri]
            content = TextDocument(uri, deferred.sent, 0).change_to(doc.text)
            await self._send_change(uri, doc.version, content, deferred.save)

    async def _send_later(self, uri: str, deferred: _Deferred, delay: float) -> None:
        await anyio.sleep(delay)
        with contextlib.suppress(BeamLspError):  # the server is gone: nothing is owed to it
            await self._send_deferred(uri, deferred)  # unless it went out already and a newer one waits

    async def _before(self, params: Any) -> None:
        """Send the deferred changes a message with `params` depends on: its document's, or all of them."""
        if not self._deferred:
            return
        uri = _uri_of(params)
        for pending in [uri] if uri is not None else list(self._deferred):
            await self._send_deferred(pending)

    async def restart_document(self, uri: str) -> int:
        """Send the unchanged text as a new version, which restarts a crashed file worker."""
        return await self.change(uri, self.document(uri).text, save=False)

    async def close(self, uri: str) -> None:
        """Close a document (`textDocument/didClose`); the cache keeps what Lean said while it was open.

        Closing an unknown document, or any once the server is gone, only forgets it: this never raises.
        """
        with contextlib.suppress(BeamLspError):
            await self._send_deferred(uri)  # the wire carries what it would have without deferring
        doc = self._docs.pop(uri, None)
        self._rpc_sessions.pop(uri, None)
        self._rpc_connecting.pop(uri, None)  # a connect in flight is for the closed lifetime: not kept
        sending = doc is not None and self.exited is None
        lock = self._barrier.close(uri, server_clears=sending)
        if not sending:
            return
        with anyio.CancelScope(shield=True):  # the copy is gone: Lean must close it too (see `_send_change`)
            async with lock:
                try:
                    with contextlib.suppress(ServerExited):
                        await self._rpc.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                finally:
                    self._barrier.close_sent(uri, lock)

    async def files_changed(self, uris: Sequence[str]) -> None:
        """Tell Lean that files changed on disk (`workspace/didChangeWatchedFiles`, each as `Changed`).

        Lean registers a watcher for `**/*.lean` and `**/*.ilean` at start-up: a changed `.ilean` refreshes its
        reference index (references, definitions and workspace symbols of modules no worker has open), a changed
        `.lean` marks the open files importing it as stale. Every deferred change of every document is sent first,
        so Lean restarts a worker on the text the client holds. Nothing is sent for an empty list or a dead server.
        """
        if not uris or self.exited is not None:
            return
        with contextlib.suppress(ServerExited):
            changes = [{"uri": uri, "type": 2} for uri in uris]
            params = {"changes": changes}
            await self._before(params)  # names no document: all of them, as a request naming none does
            await self._rpc.notify("workspace/didChangeWatchedFiles", params)


def _uri_of(params: Any) -> str | None:
    if isinstance(params, dict):
        td = params.get("textDocument")
        if isinstance(td, dict) and isinstance(td.get("uri"), str):
            return str(td["uri"])
        if isinstance(params.get("uri"), str):  # Lean's `$/lean/rpc/*` and `waitForDiagnostics`
            return str(params["uri"])
    return None


@dataclasses.dataclass
class _Deferred:
    """A document change not sent yet (`LeanClient.change(defer=...)`): the text Lean has, and whether to save."""

    sent: str
    save: bool = False
