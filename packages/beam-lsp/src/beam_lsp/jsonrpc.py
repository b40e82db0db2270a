"""A JSON-RPC 2.0 peer over framed LSP streams: correlation, cancellation both ways, strict JSON objects.

Owns message ids, the table of our pending requests and the table of the other side's requests we are
answering. Every incoming body must be one strict JSON object (`strict_json`: no repeated keys, no `NaN`);
one that is not is skipped and counted, since the framing around it is intact.

Rules:

- A message is classified by the presence of `method` (request or notification) before its id is looked at,
  because Lean's own server-to-client requests reuse the numbers of the client's ids. String and integer ids
  are distinct keys.
- Cancellation both ways: a request our caller abandons sends `$/cancelRequest` and its late answer is
  dropped; a `$/cancelRequest` from the other side cancels the handler answering that request, which is then
  answered with `RequestCancelled` (-32800).
- When the transport dies every pending request fails at once with the same error. A write to a broken or
  closed stream never leaks an anyio or OS error: the peer closes itself with the error its `on_lost`
  callback gives (by default a plain `ServerExited`) and raises that.
- A body handler (`on_body`) may take a notification before it is decoded (the client reads Lean's long progress
  reports that way, see `_progress`); what it takes is its to check.
- Text from the other side is redacted wherever it goes: error messages and data of its answers, and every log
  record (a skipped message, or a handler's failure with its traceback, which may quote the message).

It must not know about documents, Lean or processes (`client.py` does).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeGuard

import anyio
from anyio.abc import ByteSendStream

from . import _json
from ._framing import FrameReader, frame
from .errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    STREAM_ERRORS,
    BeamLspError,
    ResponseError,
    ServerExited,
    TransportError,
    response_error,
)
from .redaction import Redactor

__all__ = [
    "STREAM_ERRORS",
    "JsonRpcPeer",
    "BodyHandler",
    "LostHandler",
    "NotificationHandler",
    "RequestHandler",
    "decode_message",
    "encode_message",
]

log: logging.Logger = logging.getLogger("beam_lsp")

RequestHandler = Callable[[Any], Awaitable[Any]]
"""Answers one request from the other side: takes its params, returns the result or raises `ResponseError`."""
NotificationHandler = Callable[[str, Any], None]
"""Called synchronously with the method and params of every notification (except `$/cancelRequest`)."""
BodyHandler = Callable[[bytes], bool]
"""Sees every incoming body before it is decoded; returns True when it took the body (it is then not decoded)."""
LostHandler = Callable[[BaseException], Awaitable[BeamLspError]]
"""Turns the stream error of a failed write into the error that closes the peer."""


CANCEL_METHOD: Final = "$/cancelRequest"
_NOT_AN_OBJECT: Final = "message body is not a strict JSON object"
_CANCEL_GRACE: Final = 2.0

IdKey = tuple[type, int | str]


def encode_message(message: dict[str, Any]) -> bytes:
    """Frame one JSON-RPC message (compact UTF-8 JSON; `NaN` and infinities are refused with `ValueError`)."""
    return frame(_json.dumps(message))


def decode_message(body: bytes) -> dict[str, Any]:
    """Parse one message body strictly into a JSON object.

    Raises:
        TransportError: The body is not UTF-8, not valid strict JSON (repeated keys, `NaN`, too deep) or not an
            object.
    """
    try:
        return _json.loads_object(body)
    except ValueError as exc:
        raise TransportError(f"{_NOT_AN_OBJECT}: {exc}") from None


def _valid_id(rid: object) -> TypeGuard[int | str]:
    return isinstance(rid, (int, str)) and not isinstance(rid, bool)


def _key(rid: int | str) -> IdKey:
    return (type(rid), rid)


class _Pending:
    """One request of ours waiting for its answer (a plain slotted class: one is made per request)."""

    __slots__ = ("done", "error", "method", "result")

    def __init__(self, method: str, done: anyio.Event) -> None:
        self.method = method
        self.done = done
        self.result: Any = None
        self.error: BaseException | None = None


class JsonRpcPeer:
    """One JSON-RPC peer over a byte stream pair. Run `serve()` in a task group; then call `request()`.

    Counters (read them, never write them): `cancellations_sent` (our abandoned requests),
    `cancellations_received` (requests of the other side it cancelled while we answered),
    `late_answers_dropped` (answers to requests nobody waits for), `protocol_errors` (messages skipped),
    `messages_received` (bodies read, whatever became of them).
    """

    def __init__(
        self,
        send: ByteSendStream,
        reader: FrameReader,
        *,
        on_notification: NotificationHandler,
        redactor: Redactor,
        on_lost: LostHandler | None = None,
        on_body: BodyHandler | None = None,
    ) -> None:
        """Wrap the streams; nothing is read until `serve()` runs.

        Args:
            send: Where our messages go.
            reader: Where the other side's messages come from.
            on_notification: Receives every notification.
            redactor: Scrubs the other side's error messages and data.
            on_lost: Builds the error that closes the peer when a write fails (the caller usually knows more,
                e.g. the server's exit status); default: a `ServerExited` naming the stream error.
            on_body: Offered every body before it is decoded (see `BodyHandler`); an exception it raises counts
                as a protocol error, and the body is then decoded as usual.
        """
        self._send = send
        self._reader = reader
        self._on_notification = on_notification
        self._on_lost = on_lost or self._plain_lost
        self._on_body = on_body
        self._redactor = redactor
        self._handlers: dict[str, RequestHandler] = {}
        self._pending: dict[int, _Pending] = {}  # by id: ours are integers (an answer with a string id is no answer)
        self._answering: dict[IdKey, anyio.CancelScope] = {}
        self._next_id = 0
        self._write_lock = anyio.Lock(fast_acquire=True)  # a frame is one write: the lock only keeps order
        # The running backend's Event class, learnt from the first `anyio.Event()`: `anyio.Event()` asks which
        # event loop runs on every call, a third of a request's bookkeeping.
        self._new_event: Callable[[], anyio.Event] | None = None
        self._closed: BaseException | None = None
        self._answers: anyio.abc.TaskGroup | None = None  # where the other side's requests are answered (`serve`)
        self.cancellations_sent: int = 0
        self.cancellations_received: int = 0
        self.late_answers_dropped: int = 0
        self.protocol_errors: int = 0
        self.messages_received: int = 0

    async def _plain_lost(self, exc: BaseException) -> BeamLspError:
        return ServerExited(self._redactor.redact(f"the connection broke while writing ({type(exc).__name__}: {exc})"))

    def _failure(self, exc: BaseException) -> str:
        """An exception with its traceback, redacted (for a log record)."""
        return self._redactor.redact("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def set_handler(self, method: str, handler: RequestHandler) -> None:
        """Answer the other side's requests for `method` with `handler(params)`."""
        self._handlers[method] = handler

    @property
    def closed(self) -> BaseException | None:
        """The error that closed the peer, or None while it is open."""
        return self._closed

    @property
    def pending_count(self) -> int:
        """Our requests sent and not yet answered."""
        return len(self._pending)

    @property
    def last_request_id(self) -> int:
        """The id of our most recent request (0 before the first)."""
        return self._next_id

    async def _write(self, message: dict[str, Any]) -> None:
        if self._closed is not None:
            raise self._closed
        data = frame(_json.dumps(message))  # `encode_message`, one call less per message
        lock = self._write_lock
        try:
            # A fast-acquire lock that nobody holds is taken with a check for cancellation and no yield (a
            # cancelled caller still sends nothing); `async with` would add a coroutine to every write.
            await lock.acquire()
            try:
                await self._send.send(data)
            finally:
                lock.release()
        except STREAM_ERRORS as exc:
            error = await self._on_lost(exc)
            self.close(error)
            assert self._closed is not None
            raise self._closed from exc

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification.

        Raises:
            BeamLspError: The peer is closed, or the stream broke while writing (the error that closed it,
                `ServerExited` for a broken stream).
        """
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self._write(msg)

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result.

        If the calling scope is cancelled, `$/cancelRequest` is sent (shielded, bounded) and a late answer is
        dropped.

        Raises:
            ResponseError: The other side answered with an error (a subclass by code).
            BeamLspError: The peer closed before the answer (e.g. `ServerExited`).
        """
        if self._closed is not None:
            raise self._closed
        self._next_id += 1
        rid = self._next_id
        new_event = self._new_event
        if new_event is None:
            new_event = self._new_event = type(anyio.Event())
        pending = _Pending(method, new_event())
        self._pending[rid] = pending
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            await self._write(msg)
            await pending.done.wait()
        except BaseException:
            if self._pending.pop(rid, None) is not None and self._closed is None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_GRACE):
                    self.cancellations_sent += 1
                    try:
                        await self._write({"jsonrpc": "2.0", "method": CANCEL_METHOD, "params": {"id": rid}})
                    except BeamLspError:
                        pass  # the peer closed meanwhile; the caller's own exception says enough
            raise
        if pending.error is not None:
            raise pending.error
        return pending.result

    def close(self, error: BaseException) -> None:
        """Fail every pending request with `error` and refuse new ones (the first error wins)."""
        if self._closed is None:
            self._closed = error
        pending, self._pending = self._pending, {}
        for p in pending.values():
            p.error = self._closed
            p.done.set()

    async def serve(self) -> BaseException | None:
        """Read messages until the stream ends; dispatch responses, notifications and the other side's requests.

        Handlers of the other side's requests run in a task group of their own and are cancelled when reading
        stops: nobody could read their answers.

        Returns:
            None when the other side closed its output, else the error that stopped reading (`TransportError`
            for a fatal framing error, or a stream error).
        """
        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:
            try:
                failure = await self._read_all(tg)
            finally:
                tg.cancel_scope.cancel()
        return failure

    async def _read_all(self, tg: anyio.abc.TaskGroup) -> BaseException | None:
        self._answers = tg
        try:
            await self._reader.pump(self._dispatch)
        except anyio.EndOfStream:
            return None
        except (TransportError, *STREAM_ERRORS) as exc:
            return exc

    def _dispatch(self, body: bytes) -> None:
        """One incoming body, handled synchronously (the reader may call this from the event loop's read callback)."""
        self.messages_received += 1
        if self._on_body is not None:
            try:
                if self._on_body(body):
                    return
            except Exception as exc:  # a bad body handler must not kill the reader
                self.protocol_errors += 1
                log.error("error in the body handler: %s", self._failure(exc))
        try:
            msg = _json.loads_object(body)  # `decode_message`, one call less per message
        except ValueError as exc:
            self.protocol_errors += 1
            log.warning("dropping undecodable message: %s", self._redactor.redact(f"{_NOT_AN_OBJECT}: {exc}"))
            return
        method = msg.get("method")
        if isinstance(method, str):
            if "id" not in msg:
                self._notification(method, msg.get("params"))
            elif _valid_id(msg["id"]):
                assert self._answers is not None  # set before the first body is read
                self._answers.start_soon(self._answer, msg["id"], method, msg.get("params"))
            else:
                self.protocol_errors += 1
            return
        self._response(msg)

    def _notification(self, method: str, params: Any) -> None:
        if method == CANCEL_METHOD:
            rid = params.get("id") if isinstance(params, dict) else None
            scope = self._answering.get(_key(rid)) if _valid_id(rid) else None
            if scope is not None:
                self.cancellations_received += 1
                scope.cancel()
            return
        try:
            self._on_notification(method, params)
        except Exception as exc:  # a bad notification must not kill the reader
            self.protocol_errors += 1
            log.error("error handling notification %s: %s", self._redactor.redact(method), self._failure(exc))

    def _response(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        if type(rid) is not int:  # a string id answers none of ours (a bool is no id)
            if not _valid_id(rid):
                self.protocol_errors += 1
            else:
                self.late_answers_dropped += 1
            return
        pending = self._pending.pop(rid, None)
        if pending is None:
            self.late_answers_dropped += 1
            return
        err = msg.get("error")
        if isinstance(err, dict):
            code, message = err.get("code"), err.get("message")
            pending.error = response_error(
                code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                self._redactor.redact(message if isinstance(message, str) else ""),
                self._redactor.redact_json(err.get("data")),
            )
        else:
            pending.result = msg.get("result")
        pending.done.set()

    async def _answer(self, rid: int | str, method: str, params: Any) -> None:
        key = _key(rid)
        handler = self._handlers.get(method)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if handler is None:
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"unsupported request: {method}"}
        else:
            with anyio.CancelScope() as scope:
                self._answering[key] = scope
                try:
                    reply["result"] = await handler(params)
                except ResponseError as exc:
                    reply["error"] = {"code": exc.code, "message": exc.message}
                    if exc.data is not None:
                        reply["error"]["data"] = exc.data
                except BeamLspError as exc:
                    reply["error"] = {"code": INTERNAL_ERROR, "message": str(exc)}
                except Exception as exc:  # a bug in a handler must not stop the reader
                    log.error("error answering %s: %s", self._redactor.redact(method), self._failure(exc))
                    reply["error"] = {"code": INTERNAL_ERROR, "message": f"internal error answering {method}"}
                finally:
                    if self._answering.get(key) is scope:
                        del self._answering[key]
            if scope.cancelled_caught:
                reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": REQUEST_CANCELLED, "message": "cancelled"}}
        try:
            try:
                await self._write(reply)
            except (TypeError, ValueError) as exc:  # the handler's answer is not JSON: nothing was written yet
                log.error("answer to %s is not JSON: %s", self._redactor.redact(method), self._failure(exc))
                error = {"code": INTERNAL_ERROR, "message": f"internal error answering {method}"}
                await self._write({"jsonrpc": "2.0", "id": rid, "error": error})
        except BeamLspError:
            pass  # the peer is closed: nobody is left to read the answer
