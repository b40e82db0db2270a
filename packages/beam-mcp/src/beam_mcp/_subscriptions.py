"""Subscriptions to diagnostics resources: who is subscribed to what, and coalesced, throttled delivery.

This module owns the delivery of `notifications/resources/updated` to subscribers (the legacy session and each
`subscriptions/listen` stream): record before check, replay, at most one queued update per file and subscriber,
and throttled updates while Lean is still elaborating. It reads each file's resource document through the
function it is given and never causes Lean work; it must not know URIs' syntax, protocol families or request-id
ownership (`_resources` decides who may subscribe and when a stream ends).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

import anyio

from . import _jsonrpc
from ._jsonrpc import RequestId
from ._protocol import META_SUBSCRIPTION_ID

log = logging.getLogger("beam_mcp")

UPDATE_INTERVAL: Final = 1.0
"""Seconds between two updates of one file for one subscriber while Lean is still elaborating it."""
UPDATED: Final = "notifications/resources/updated"


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
        document: The resource document (read payload) of a canonical path; must not block.
        interval: Seconds between two processing-phase updates of one file for one subscriber.
    """

    def __init__(self, document: Callable[[str], dict[str, Any]], interval: float = UPDATE_INTERVAL):
        """A hub with no subscribers."""
        self._document = document
        self.interval = interval
        self._subscribers: dict[Subscriber, None] = {}
        self._by_path: dict[str, dict[Subscriber, None]] = {}
        self._pending: dict[tuple[Subscriber, str], None] = {}
        self._timers: dict[tuple[Subscriber, str], float] = {}
        # Subscriptions whose last read failed (Lean starting, or its start failed): re-read on every change report,
        # because a failed start reports only the files its workspace knew, not every file a client subscribed to.
        self._unreadable: dict[tuple[Subscriber, str], None] = {}
        self._bell = anyio.Event()
        self._closed = False

    # -- reads
    def document(self, path: str) -> dict[str, Any]:
        """The read payload of a canonical path."""
        return self._document(path)

    # -- change reports
    def changed(self, path: str) -> None:
        """Broker listener: the cached diagnostics of `path` (canonical) changed. Never blocks."""
        subscribers = self._by_path.get(path)
        if not (subscribers or self._unreadable) or self._closed:
            return
        for subscriber in subscribers or ():
            self._mark(subscriber, path)
        for key in self._unreadable:
            self._mark(*key)
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
        read = self._read(path)
        if first:
            watch.fingerprint = read[0]
            self._note_readable(subscriber, path, read)
        return read[2]

    def _note_readable(self, subscriber: Subscriber, path: str, read: tuple[bytes, bool, bool, bool]) -> None:
        if read[3]:
            self._unreadable[(subscriber, path)] = None
        else:
            self._unreadable.pop((subscriber, path), None)

    def _read(self, path: str) -> tuple[bytes, bool, bool, bool]:
        """(fingerprint, still elaborating, has a snapshot, failed) of a file's resource.

        A read that fails (the workspace's Lean is starting, or failed to start) has a fingerprint of its own: a
        change between failing and answering is an update, so a subscriber re-reads into the error (mcpls sends
        one update when a start fails).
        """
        try:
            document = self.document(path)
        except Exception as exc:
            return (
                hashlib.blake2b(f"unreadable:{exc}".encode("utf-8", "replace"), digest_size=16).digest(),
                False,
                False,
                True,
            )
        return _fingerprint(document), document["elaboration"] == "processing", has_snapshot(document), False

    def replay(self, subscriber: Subscriber, path: str, uri: str) -> None:
        """Send the one update a new subscription gets when the file already has a snapshot."""
        watch = subscriber.watches.get(path)
        if watch is not None and not subscriber.closed and not self._closed:
            self._emit(subscriber, path, watch, [uri])

    def unsubscribe(self, subscriber: Subscriber, uri: str, path: Callable[[], str]) -> None:
        """Drop a subscription by the spelling the client used, else every subscription of the file it names.

        `path()` gives the canonical path `uri` names now (called only when the spelling is not subscribed; it
        may raise for a malformed URI).
        """
        if uri in subscriber.aliases:
            self._forget_alias(subscriber, uri)
            return
        canonical = path()
        watch = subscriber.watches.get(canonical)
        if watch is not None:
            for alias in watch.uris:
                subscriber.aliases.pop(alias, None)
            self._drop(subscriber, canonical)

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
        self._unreadable.pop((subscriber, path), None)

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

        def live(uri: str) -> bool:
            # Per spelling: unsubscribing one spelling of a file drops its unwritten update, not the others'.
            return not subscriber.closed and subscriber.watches.get(path) is watch and uri in watch.uris

        for uri in uris:
            watch.in_flight += 1
            subscriber.send(subscriber.notification(uri), flushed, functools.partial(live, uri))

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
        documents: dict[str, tuple[bytes, bool, bool, bool]] = {}
        for subscriber, path in pending:
            watch = subscriber.watches.get(path)
            if watch is None or subscriber.closed or watch.in_flight:
                continue  # an update still queued absorbs this change; `_flushed` looks again
            if path not in documents:
                documents[path] = self._read(path)
            fingerprint, processing, _, _ = documents[path]
            self._note_readable(subscriber, path, documents[path])
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
