"""Diagnostics as MCP resources: `lsp-diagnostics:` URIs, list pages, read payloads, coalesced updates.

This module owns the resource surface over the broker's diagnostics cache: how a canonical path is spelled as
a URI and parsed back (empty authority, percent-encoding), the paging of `resources/list`, the JSON document
a read returns, and the delivery of `notifications/resources/updated` to subscribers (the legacy session and
each `subscriptions/listen` stream): record before check, replay, at most one queued update per file and
subscriber, and throttled updates while Lean is still elaborating. It must not know protocol families or
request-id ownership (the server decides who may subscribe and when a stream ends), and it never causes Lean
work: everything it reports comes from `broker.diagnostics`, which only reads the cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote_from_bytes, unquote_to_bytes

import anyio

from . import _jsonrpc
from ._jsonrpc import RequestId
from ._protocol import META_SUBSCRIPTION_ID
from .errors import invalid_params

log = logging.getLogger("beam_mcp")

SCHEME: Final = "lsp-diagnostics"
MIME_TYPE: Final = "application/json"
DESCRIPTION: Final = "Lean diagnostics for this file"
PAGE_SIZE: Final = 100
MAX_SUBSCRIPTIONS: Final = 1000
"""Subscriptions one legacy session may hold, and URIs one `subscriptions/listen` request may name."""
MAX_LISTENS: Final = 100
"""Concurrently open `subscriptions/listen` streams."""
UPDATE_INTERVAL: Final = 1.0
"""Seconds between two updates of one file for one subscriber while Lean is still elaborating it."""
UPDATED: Final = "notifications/resources/updated"

# Characters a path keeps as is: RFC 3986 `pchar` and `/` (`quote` always keeps the unreserved ones). Everything
# else is percent-encoded: what a `file:` URL encodes (space, `"#%<>?` and backtick, `{}`, controls,
# non-ASCII) and also `[ ] ^ |` and backslash.
_SAFE: Final = "/!$&'()*+,;=:@"
_BAD_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CURSOR: Final = re.compile(r"[0-9]+")
_FORM: Final = f"expected {SCHEME}:///absolute/path"


# ---- URIs ---------------------------------------------------------------------------------------------------------
def path_to_uri(path: str) -> str:
    """`lsp-diagnostics:///abs/path` for an absolute path (percent-encoded, empty authority)."""
    return f"{SCHEME}://" + quote_from_bytes(os.fsencode(path), safe=_SAFE)


def uri_to_path(uri: Any) -> str:
    """The absolute path an `lsp-diagnostics:` URI names (decoded, not yet canonical).

    Raises:
        JsonRpcError: `-32602` for anything but a string `lsp-diagnostics://` URI with an empty authority, an
            absolute path, valid percent escapes and no query, fragment or NUL.
    """
    if not isinstance(uri, str):
        raise invalid_params("resource uri must be a string")
    scheme, colon, rest = uri.partition(":")
    if not colon or scheme.lower() != SCHEME:
        raise invalid_params(f"unsupported resource URI {uri!r}: {_FORM}")
    if not rest.startswith("//"):
        raise invalid_params(f"resource URI {uri!r} has no authority part: {_FORM}")
    authority, slash, path = rest[2:].partition("/")
    if authority:
        raise invalid_params(f"resource URI {uri!r} must have an empty authority: {_FORM}")
    if not slash:
        raise invalid_params(f"resource URI {uri!r} names no path: {_FORM}")
    if "?" in path or "#" in path:
        raise invalid_params(f"resource URI {uri!r} must not have a query or fragment (encode ? and # as %3F, %23)")
    if _BAD_ESCAPE.search(path):
        raise invalid_params(f"resource URI {uri!r} has an invalid percent escape")
    raw = unquote_to_bytes("/" + path)
    if b"\0" in raw:
        raise invalid_params(f"resource URI {uri!r} names a path with a NUL byte")
    return os.fsdecode(raw)


def canonical(path: str) -> str:
    """The canonical path (symlinks resolved) the broker keys diagnostics by."""
    return os.path.realpath(path)


def _text(value: str) -> str:
    # A path that is not UTF-8 decodes with surrogate escapes, which JSON text cannot carry.
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# ---- list and read ------------------------------------------------------------------------------------------------
def describe(path: str) -> dict[str, Any]:
    """The `Resource` entry of one open document."""
    return {
        "uri": path_to_uri(path),
        "name": _text(os.path.basename(path)),
        "mimeType": MIME_TYPE,
        "description": DESCRIPTION,
    }


def list_page(paths: Sequence[str], params: Mapping[str, Any]) -> dict[str, Any]:
    """One `resources/list` page: 100 entries from the decimal start index in `cursor`.

    Raises:
        JsonRpcError: `-32602` for a cursor that is not a string of decimal digits.
    """
    start = 0
    if "cursor" in params:
        cursor = params["cursor"]
        if not isinstance(cursor, str) or not _CURSOR.fullmatch(cursor):
            raise invalid_params(f"invalid resources/list cursor {cursor!r}: expected a nextCursor from this server")
        digits = cursor.lstrip("0")
        start = int(digits) if len(digits) <= 18 else len(paths)  # past any list: an empty final page
    page = paths[start : start + PAGE_SIZE]
    out: dict[str, Any] = {"resources": [describe(p) for p in page]}
    if start + PAGE_SIZE < len(paths):
        out["nextCursor"] = str(start + PAGE_SIZE)
    return out


def untracked(path: str) -> dict[str, Any]:
    """The broker's answer for a file no workspace knows (used while no broker exists yet)."""
    return {"path": path, "tracked": False, "availability": "pending", "diagnostics": []}


def payload(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON a read returns, from `broker.diagnostics` (fixed key set; the text is already redacted)."""
    tracked = bool(snapshot.get("tracked"))
    elaboration = snapshot.get("elaboration")
    return {
        "path": _text(str(snapshot.get("path", ""))),
        "tracked": tracked,
        "version": snapshot.get("version"),
        "diagnostics": list(snapshot.get("diagnostics") or []) if tracked else [],
        "availability": snapshot.get("availability", "pending"),
        "elaboration": elaboration,
        "processing": list(snapshot.get("processing") or []),
        "indexing_in_progress": elaboration == "processing",
        "push_notifications_degraded": False,
        "truncated": int(snapshot.get("truncated") or 0),
    }


def contents(uri: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """A `ReadResourceResult` with the document as one JSON text content."""
    return {"contents": [{"uri": uri, "mimeType": MIME_TYPE, "text": _jsonrpc.dumps(document)}]}


def has_snapshot(document: Mapping[str, Any]) -> bool:
    """Whether Lean has said anything about the file (a subscription then replays one update)."""
    return document["availability"] != "pending" or document["elaboration"] is not None


def _fingerprint(document: Mapping[str, Any]) -> bytes:
    text = _jsonrpc.dumps(document).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).digest()


# ---- subscriptions ------------------------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class _Watch:
    """One subscribed file of one subscriber: the client's spellings and the delivery state."""

    uris: list[str]
    fingerprint: bytes | None = None
    sent_at: float = -math.inf
    in_flight: int = 0
    dirty: bool = False


Send = Callable[[bytes, Callable[[], None], Callable[[], bool]], None]
"""Enqueue one message on a subscriber's stream: `(data, on_flushed, live)`; a message whose `live()` is false at
write time is skipped (`on_flushed` still runs)."""


class Subscriber:
    """A receiver of updates: the legacy session (no id) or one `subscriptions/listen` stream (its request id).

    Subscriptions are keyed by canonical path; each keeps the raw URIs the client used, so updates use the
    client's spelling and unsubscribing by that spelling works after a symlink changed or the file vanished.

    Args:
        send: Where its updates go (the stdio writer, a legacy HTTP session's GET stream, a listen's response).
        subscription_id: The listen request's id; None for a legacy session.
    """

    def __init__(self, send: Send, subscription_id: RequestId | None = None) -> None:
        """A subscriber with no subscriptions yet."""
        self.send = send
        self.subscription_id = subscription_id
        self.watches: dict[str, _Watch] = {}
        self.aliases: dict[str, str] = {}
        self.closed = False

    def live(self) -> bool:
        """Whether messages for this subscriber may still be written."""
        return not self.closed

    @property
    def count(self) -> int:
        """Subscriptions held (one per raw URI)."""
        return len(self.aliases)

    def meta(self) -> dict[str, Any]:
        """`_meta` tagging this stream's messages (empty for the legacy session)."""
        if self.subscription_id is None:
            return {}
        return {META_SUBSCRIPTION_ID: self.subscription_id.value}

    def notification(self, uri: str) -> bytes:
        """`notifications/resources/updated` for one of its URIs."""
        params: dict[str, Any] = {"uri": uri}
        if self.subscription_id is not None:
            params["_meta"] = self.meta()
        return _jsonrpc.notification(UPDATED, params)


class UpdateHub:
    """Routes the broker's change reports to subscribers as coalesced, throttled `resources/updated`.

    `changed` is the broker listener: it only marks work and rings a bell (it runs synchronously inside the
    broker's cache writes). `run` is the delivery task: for each marked (subscriber, file) it reads the
    snapshot once and sends one update per raw URI when the resource changed since the last update; while
    Lean is elaborating the file (`elaboration: processing`) it waits until `interval` passed since the
    previous update, and an update still waiting to be written absorbs later changes until it is flushed.

    Args:
        snapshot: `broker.diagnostics` (or a stand-in while no broker exists); must not block.
        interval: Seconds between two processing-phase updates of one file for one subscriber.
    """

    def __init__(self, snapshot: Callable[[str], dict[str, Any]], interval: float = UPDATE_INTERVAL):
        """A hub with no subscribers."""
        self._snapshot = snapshot
        self.interval = interval
        self._subscribers: dict[Subscriber, None] = {}
        self._by_path: dict[str, dict[Subscriber, None]] = {}
        self._pending: dict[tuple[Subscriber, str], None] = {}
        self._timers: dict[tuple[Subscriber, str], float] = {}
        self._bell = anyio.Event()
        self._closed = False

    # -- reads
    def document(self, path: str) -> dict[str, Any]:
        """The read payload of a canonical path."""
        return payload(self._snapshot(path))

    # -- change reports
    def changed(self, path: str) -> None:
        """Broker listener: the cached diagnostics of `path` (canonical) changed. Never blocks."""
        subscribers = self._by_path.get(path)
        if not subscribers or self._closed:
            return
        for subscriber in subscribers:
            self._mark(subscriber, path)
        self._bell.set()

    def recheck(self) -> None:
        """Re-examine every subscribed file (after a change the broker does not report, like a dropped workspace)."""
        if self._closed:
            return
        for path, subscribers in self._by_path.items():
            for subscriber in subscribers:
                self._mark(subscriber, path)
        self._bell.set()

    def _mark(self, subscriber: Subscriber, path: str) -> None:
        watch = subscriber.watches.get(path)
        if watch is not None:
            watch.dirty = True
            self._pending[(subscriber, path)] = None

    # -- subscriptions
    def subscribe(self, subscriber: Subscriber, path: str, uri: str) -> bool:
        """Record `uri` (naming canonical `path`) for `subscriber`, then check the cache.

        Recording comes first, so a change reported afterwards is never lost. Returns whether the file already
        has a snapshot, in which case the caller sends `replay` once the subscription is acknowledged.
        """
        old = subscriber.aliases.get(uri)
        if old is not None and old != path:  # the same spelling now resolves elsewhere (a retargeted symlink)
            self._forget_alias(subscriber, uri)
        self._subscribers[subscriber] = None
        watch = subscriber.watches.get(path)
        first = watch is None
        if watch is None:
            watch = subscriber.watches[path] = _Watch([])
            self._by_path.setdefault(path, {})[subscriber] = None
        if uri not in subscriber.aliases:
            subscriber.aliases[uri] = path
            watch.uris.append(uri)
        document = self.document(path)
        if first:
            watch.fingerprint = _fingerprint(document)
        return has_snapshot(document)

    def replay(self, subscriber: Subscriber, path: str, uri: str) -> None:
        """Send the one update a new subscription gets when the file already has a snapshot."""
        watch = subscriber.watches.get(path)
        if watch is not None and not subscriber.closed and not self._closed:
            self._emit(subscriber, path, watch, [uri])

    def unsubscribe(self, subscriber: Subscriber, uri: str) -> None:
        """Drop a subscription by the spelling the client used, else every subscription of the file it names.

        Raises:
            JsonRpcError: `-32602` for a malformed URI (unknown but well-formed ones are a no-op).
        """
        if uri in subscriber.aliases:
            self._forget_alias(subscriber, uri)
            return
        watch = subscriber.watches.get(path := canonical(uri_to_path(uri)))
        if watch is not None:
            for alias in watch.uris:
                subscriber.aliases.pop(alias, None)
            self._drop(subscriber, path)

    def _forget_alias(self, subscriber: Subscriber, uri: str) -> None:
        path = subscriber.aliases.pop(uri)
        watch = subscriber.watches[path]
        watch.uris.remove(uri)
        if not watch.uris:
            self._drop(subscriber, path)

    def _drop(self, subscriber: Subscriber, path: str) -> None:
        del subscriber.watches[path]
        subscribers = self._by_path.get(path, {})
        subscribers.pop(subscriber, None)
        if not subscribers:
            self._by_path.pop(path, None)
        self._pending.pop((subscriber, path), None)
        self._timers.pop((subscriber, path), None)

    def close(self, subscriber: Subscriber) -> None:
        """End a subscriber: nothing more is sent for it, including updates already queued but not written."""
        subscriber.closed = True
        for path in list(subscriber.watches):
            self._drop(subscriber, path)
        subscriber.aliases.clear()
        self._subscribers.pop(subscriber, None)

    def close_all(self) -> None:
        """EOF: end every subscriber and the delivery task."""
        for subscriber in list(self._subscribers):
            self.close(subscriber)
        self._closed = True
        self._bell.set()

    # -- delivery
    def _emit(self, subscriber: Subscriber, path: str, watch: _Watch, uris: list[str]) -> None:
        watch.sent_at = anyio.current_time()
        self._timers.pop((subscriber, path), None)
        flushed = functools.partial(self._flushed, subscriber, path, watch)

        def live() -> bool:
            return not subscriber.closed and subscriber.watches.get(path) is watch

        for uri in uris:
            watch.in_flight += 1
            subscriber.send(subscriber.notification(uri), flushed, live)

    def _flushed(self, subscriber: Subscriber, path: str, watch: _Watch) -> None:
        watch.in_flight -= 1
        if watch.in_flight == 0 and watch.dirty and subscriber.watches.get(path) is watch and not self._closed:
            self._pending[(subscriber, path)] = None
            self._bell.set()

    async def run(self) -> None:
        """The delivery task (returns after `close_all`)."""
        while not self._closed:
            if not self._pending:
                wake = min(self._timers.values(), default=math.inf)
                delay = None if wake == math.inf else max(0.0, wake - anyio.current_time())
                with anyio.move_on_after(delay):
                    await self._bell.wait()
            self._bell = anyio.Event()
            if not self._closed:
                self._deliver()

    def _deliver(self) -> None:
        now = anyio.current_time()
        for key, due in list(self._timers.items()):
            if due <= now:
                del self._timers[key]
                self._mark(*key)
        pending, self._pending = self._pending, {}
        documents: dict[str, tuple[bytes, bool] | None] = {}
        for subscriber, path in pending:
            watch = subscriber.watches.get(path)
            if watch is None or subscriber.closed or watch.in_flight:
                continue  # an update still queued absorbs this change; `_flushed` looks again
            if path not in documents:
                try:
                    document = self.document(path)
                except Exception:
                    log.exception("could not read the diagnostics of %s", path)
                    documents[path] = None
                else:
                    documents[path] = (_fingerprint(document), document["elaboration"] == "processing")
            seen = documents[path]
            if seen is None:
                continue
            fingerprint, processing = seen
            watch.dirty = False
            if fingerprint == watch.fingerprint:
                self._timers.pop((subscriber, path), None)
                continue
            due = watch.sent_at + self.interval
            if processing and now < due:
                self._timers[(subscriber, path)] = due
                continue
            watch.fingerprint = fingerprint
            self._emit(subscriber, path, watch, list(watch.uris))
