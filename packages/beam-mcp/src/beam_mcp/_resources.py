"""Diagnostics as MCP resources: `lsp-diagnostics:` URIs, list pages, read payloads, subscribe and listen.

This module owns the resource surface over the broker's diagnostics cache: how a canonical path is spelled as
a URI and parsed back (empty authority, percent-encoding), the paging of `resources/list`, the template, the
JSON document a read returns, and the resource methods (`ResourceMethods`): who may subscribe, the limits, and
how long a `subscriptions/listen` stream lives. Delivery of updates is `_subscriptions`'. It never causes Lean
work: everything it reports comes from `broker.diagnostics`, which only reads the cache. It must not know
protocol families (the server routes methods here).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote_from_bytes, unquote_to_bytes

from beam_broker import errors as broker_errors

from . import _jsonrpc
from ._dispatch import Channel, Dispatcher, Outlet
from ._jsonrpc import Request, RequestId
from ._params import MRTR_REJECTED, ListenParams, ListParams, ReadParams, UriParams, parse
from ._protocol import modern_envelope
from ._subscriptions import Subscriber, UpdateHub
from .errors import INVALID_REQUEST, JsonRpcError, invalid_params

if TYPE_CHECKING:
    from beam_broker import Broker

SCHEME: Final = "lsp-diagnostics"
MIME_TYPE: Final = "application/json"
DESCRIPTION: Final = "Lean diagnostics for this file"
PAGE_SIZE: Final = 100
MAX_SUBSCRIPTIONS: Final = 1000
"""Subscriptions one legacy session may hold, and URIs one `subscriptions/listen` request may name."""
MAX_LISTENS: Final = 100
"""Concurrently open `subscriptions/listen` streams."""

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
            absolute path, valid percent escapes and no query, fragment or NUL: MCP's "resource not found", so a
            string URI is echoed as `data.uri` (the spec's SHOULD).
    """
    if not isinstance(uri, str):
        raise invalid_params("resource uri must be a string")
    scheme, colon, rest = uri.partition(":")
    if not colon or scheme.lower() != SCHEME:
        raise invalid_params(f"unsupported resource URI {uri!r}: {_FORM}", {"uri": uri})
    if not rest.startswith("//"):
        raise invalid_params(f"resource URI {uri!r} has no authority part: {_FORM}", {"uri": uri})
    authority, slash, path = rest[2:].partition("/")
    if authority:
        raise invalid_params(f"resource URI {uri!r} must have an empty authority: {_FORM}", {"uri": uri})
    if not slash:
        raise invalid_params(f"resource URI {uri!r} names no path: {_FORM}", {"uri": uri})
    if "?" in path or "#" in path:
        raise invalid_params(
            f"resource URI {uri!r} must not have a query or fragment (encode ? and # as %3F, %23)", {"uri": uri}
        )
    if _BAD_ESCAPE.search(path):
        raise invalid_params(f"resource URI {uri!r} has an invalid percent escape", {"uri": uri})
    raw = unquote_to_bytes("/" + path)
    if b"\0" in raw:
        raise invalid_params(f"resource URI {uri!r} names a path with a NUL byte", {"uri": uri})
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
        "open": bool(snapshot.get("open")),
        "elaboration": elaboration,
        "processing": list(snapshot.get("processing") or []),
        "indexing_in_progress": elaboration == "processing",
        "push_notifications_degraded": False,
        "truncated": int(snapshot.get("truncated") or 0),
    }


def contents(uri: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """A `ReadResourceResult` with the document as one JSON text content."""
    return {"contents": [{"uri": uri, "mimeType": MIME_TYPE, "text": _jsonrpc.dumps(document)}]}


def templates() -> list[dict[str, Any]]:
    """`resources/templates/list`: the one template, a file's diagnostics by absolute path."""
    return [
        {
            "uriTemplate": f"{SCHEME}:///{{+path}}",
            "name": "diagnostics",
            "description": "Lean diagnostics of the file at this absolute path (percent-encoded)",
            "mimeType": MIME_TYPE,
        }
    ]


def _path_of(uri: str) -> str:
    return canonical(uri_to_path(uri))


# ---- methods -------------------------------------------------------------------------------------------------------
class ResourceMethods:
    """The resource methods of one server, over one update hub.

    Args:
        hub: Delivers updates to subscribers.
        broker: The open broker (None while it loads; raises `JsonRpcError` when it could not be opened).
    """

    def __init__(self, hub: UpdateHub, broker: Callable[[], Broker | None]) -> None:
        self._hub = hub
        self._broker = broker
        self._listens: dict[Subscriber, tuple[Channel, RequestId, Outlet]] = {}

    def list(self, params: ListParams) -> dict[str, Any]:
        """`resources/list`: the open documents of every workspace, 100 per page."""
        broker = self._broker()
        paths = broker.open_documents() if broker is not None else []
        return list_page(paths, {"cursor": params.cursor} if params.cursor is not None else {})

    def read(self, params: ReadParams) -> dict[str, Any]:
        """`resources/read` of one file's diagnostics (never triggers Lean work)."""
        if params.continuation():
            raise invalid_params(MRTR_REJECTED.format(method="resources/read"))
        path = _path_of(params.uri)
        broker = self._broker()
        snapshot = broker.diagnostics(path) if broker is not None else untracked(path)
        return contents(params.uri, payload(snapshot))

    def subscribe(self, channel: Channel, req: Request, params: Any, outlet: Outlet) -> None:
        """`resources/subscribe` (legacy): acknowledge, then replay the file's snapshot if it has one."""
        uri = parse(UriParams, params, "resources/subscribe").uri
        path = _path_of(uri)
        self._broker()  # a broken broker is an error here too
        subscriber = channel.session_subscriber
        if subscriber is None:
            subscriber = channel.session_subscriber = Subscriber(channel.notify)
        if uri not in subscriber.aliases and subscriber.count >= MAX_SUBSCRIPTIONS:
            raise JsonRpcError(
                INVALID_REQUEST,
                f"resources/subscribe: a session holds at most {MAX_SUBSCRIPTIONS} subscriptions",
                {"limit": MAX_SUBSCRIPTIONS},
            )
        held = subscriber.aliases.get(uri) == path  # a repeat: a failure below must not end what the session holds
        # Record, then check: a change after this point is reported; one before it is in the replay.
        replay = self._hub.subscribe(subscriber, path, uri)
        broker = self._broker()
        try:
            if broker is not None:
                broker.diagnostics(path)
        except Exception as exc:
            # A Lean server that is still starting: the subscription stands (a failed start sends an update); one
            # that failed to start: roll back and answer its error (mcpls).
            if not (isinstance(exc, broker_errors.BrokerError) and exc.code == broker_errors.SERVER_STARTING):
                if not held:
                    self._hub.unsubscribe(subscriber, uri, lambda: path)
                raise
        Dispatcher.respond(channel, outlet, req.id, {})
        if replay:
            self._hub.replay(subscriber, path, uri)

    def unsubscribe(self, channel: Channel, params: Any) -> None:
        """`resources/unsubscribe` (legacy): by the client's spelling, else every spelling of the file."""
        uri = parse(UriParams, params, "resources/unsubscribe").uri
        subscriber = channel.session_subscriber
        if subscriber is None:
            uri_to_path(uri)  # only malformed URIs are errors
        else:
            self._hub.unsubscribe(subscriber, uri, lambda: _path_of(uri))

    def listen(self, channel: Channel, req: Request, params: ListenParams, outlet: Outlet) -> None:
        """Open a `subscriptions/listen` stream: acknowledge, replay, then updates until it is cancelled.

        Only `resourceSubscriptions` is honoured (the tool and resource lists never change). A stream that
        honours nothing is closed gracefully at once: its final result follows the acknowledgement.
        """
        uris = list(dict.fromkeys(params.notifications.resourceSubscriptions))
        if len(uris) > MAX_SUBSCRIPTIONS:
            raise invalid_params(
                f"subscriptions/listen names at most {MAX_SUBSCRIPTIONS} resources", {"limit": MAX_SUBSCRIPTIONS}
            )
        targets = [(_path_of(uri), uri) for uri in uris]
        self._broker()
        if targets and len(self._listens) >= MAX_LISTENS:
            raise JsonRpcError(
                INVALID_REQUEST,
                f"subscriptions/listen: at most {MAX_LISTENS} streams may be open; cancel one first",
                {"limit": MAX_LISTENS},
            )
        subscriber = Subscriber(outlet.message, req.id)
        replays = [(path, uri) for path, uri in targets if self._hub.subscribe(subscriber, path, uri)]
        honoured: dict[str, Any] = {"resourceSubscriptions": uris} if uris else {}
        ack = {"notifications": honoured, "_meta": subscriber.meta()}
        outlet.message(_jsonrpc.notification("notifications/subscriptions/acknowledged", ack), live=subscriber.live)
        if not targets:
            Dispatcher.respond(channel, outlet, req.id, modern_envelope({"_meta": subscriber.meta()}))
            return
        channel.listens[req.id.key] = (subscriber, outlet)
        self._listens[subscriber] = (channel, req.id, outlet)
        for path, uri in replays:
            self._hub.replay(subscriber, path, uri)

    def end_listen(self, channel: Channel, rid: RequestId) -> None:
        """The client ended a listen stream: nothing more is sent for it (not even a result); the id is free."""
        listen = channel.listens.pop(rid.key, None)
        if listen is None:
            return
        subscriber, outlet = listen
        self._hub.close(subscriber)
        self._listens.pop(subscriber, None)
        channel.release(rid)
        outlet.abandon()

    def close_channel(self, channel: Channel) -> None:
        """A channel ended: its listen streams and its session subscriptions end too."""
        for subscriber, _ in list(channel.listens.values()):
            assert subscriber.subscription_id is not None
            self.end_listen(channel, subscriber.subscription_id)
        if channel.session_subscriber is not None:
            self._hub.close(channel.session_subscriber)
            channel.session_subscriber = None

    def close_all(self) -> None:
        """EOF: every subscriber ends; open listen streams end without a result (an abrupt end)."""
        self._hub.close_all()
        for channel, rid, outlet in list(self._listens.values()):
            channel.listens.pop(rid.key, None)
            channel.release(rid)
            outlet.abandon()
        self._listens.clear()
