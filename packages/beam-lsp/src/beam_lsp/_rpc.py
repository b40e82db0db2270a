"""JSON-RPC 2.0 over framed LSP streams: request correlation, cancellation, server-to-client requests.

Owns message ids and the pending-request table. String and integer ids are distinct keys. A message is
classified by the presence of `method` (request or notification) before its id is looked at, because Lean's
own server-to-client requests reuse the numbers of the client's ids. An abandoned request sends
`$/cancelRequest` and its late answer is dropped. When the transport dies every pending request fails at once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import ByteSendStream

from ._framing import FrameReader, decode, encode
from .errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    BeamLspError,
    ResponseError,
    TransportError,
    response_error,
)
from .redaction import Redactor

log = logging.getLogger("beam_lsp")

RequestHandler = Callable[[Any], Awaitable[Any]]
NotificationHandler = Callable[[str, Any], None]
IdKey = tuple[type, int | str]


@dataclasses.dataclass
class _Pending:
    method: str
    done: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None


class RpcEndpoint:
    """One JSON-RPC peer over a byte stream pair. Run `serve()` in a task group; then call `request()`."""

    def __init__(
        self,
        send: ByteSendStream,
        reader: FrameReader,
        *,
        on_notification: NotificationHandler,
        redactor: Redactor,
    ) -> None:
        """Wrap the streams; nothing is read until `serve()` runs."""
        self._send = send
        self._reader = reader
        self._on_notification = on_notification
        self._redactor = redactor
        self._handlers: dict[str, RequestHandler] = {}
        self._pending: dict[IdKey, _Pending] = {}
        self._next_id = 0
        self._write_lock = anyio.Lock()
        self._closed: BaseException | None = None
        self.cancellations_sent = 0
        self.late_answers_dropped = 0
        self.protocol_errors = 0

    def set_handler(self, method: str, handler: RequestHandler) -> None:
        """Answer server-to-client requests for `method` with `handler(params)`."""
        self._handlers[method] = handler

    @property
    def closed(self) -> BaseException | None:
        """The error that closed the endpoint, or None while it is open."""
        return self._closed

    @property
    def pending_count(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._pending)

    async def _write(self, message: dict[str, Any]) -> None:
        data = encode(message)
        async with self._write_lock:
            await self._send.send(data)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification.

        Raises:
            BeamLspError: The endpoint is closed (the error that closed it).
        """
        if self._closed is not None:
            raise self._closed
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self._write(msg)

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its result.

        If the calling scope is cancelled, `$/cancelRequest` is sent (shielded) and a late answer is dropped.

        Raises:
            ResponseError: The server answered with an error (a subclass by code).
            BeamLspError: The endpoint closed before the answer (e.g. `ServerExited`).
        """
        if self._closed is not None:
            raise self._closed
        self._next_id += 1
        rid = self._next_id
        key: IdKey = (int, rid)
        pending = _Pending(method)
        self._pending[key] = pending
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            await self._write(msg)
            await pending.done.wait()
        except BaseException:
            if self._pending.pop(key, None) is not None and self._closed is None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(2):
                    self.cancellations_sent += 1
                    try:
                        await self._write({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}})
                    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass
            raise
        if pending.error is not None:
            raise pending.error
        return pending.result

    def close(self, error: BaseException) -> None:
        """Fail every pending request with `error` and refuse new ones."""
        if self._closed is None:
            self._closed = error
        pending, self._pending = self._pending, {}
        for p in pending.values():
            p.error = error
            p.done.set()

    async def serve(self) -> BaseException | None:
        """Read messages until the stream ends; dispatch responses, notifications and server requests.

        Returns:
            None when the server closed its output cleanly, else the error that stopped reading
            (`TransportError` for a fatal framing error, or a broken-stream error).
        """
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    body = await self._reader.receive()
                except anyio.EndOfStream:
                    return None
                except (TransportError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    return exc
                try:
                    msg = decode(body)
                except TransportError as exc:
                    # Framing is intact (we consumed exactly Content-Length bytes): skip the message.
                    self.protocol_errors += 1
                    log.warning("dropping undecodable message from the server: %s", exc)
                    continue
                method = msg.get("method")
                if isinstance(method, str):
                    if "id" in msg:
                        tg.start_soon(self._answer, msg["id"], method, msg.get("params"))
                    else:
                        try:
                            self._on_notification(method, msg.get("params"))
                        except Exception:  # a bad notification must not kill the reader
                            self.protocol_errors += 1
                            log.exception("error handling notification %s", method)
                    continue
                rid = msg.get("id")
                if not isinstance(rid, (int, str)) or isinstance(rid, bool):
                    self.protocol_errors += 1
                    continue
                pending = self._pending.pop((type(rid), rid), None)
                if pending is None:
                    self.late_answers_dropped += 1
                    continue
                err = msg.get("error")
                if isinstance(err, dict):
                    code = err.get("code")
                    message = err.get("message")
                    pending.error = response_error(
                        code if isinstance(code, int) else INTERNAL_ERROR,
                        self._redactor.redact(message if isinstance(message, str) else ""),
                        self._redactor.redact_json(err.get("data")),
                    )
                else:
                    pending.result = msg.get("result")
                pending.done.set()
        return None  # unreachable: the loop only returns; mypy cannot see through the task group

    async def _answer(self, rid: int | str, method: str, params: Any) -> None:
        handler = self._handlers.get(method)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if handler is None:
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"unsupported request: {method}"}
        else:
            try:
                reply["result"] = await handler(params)
            except ResponseError as exc:
                reply["error"] = {"code": exc.code, "message": exc.message}
            except BeamLspError as exc:
                reply["error"] = {"code": INTERNAL_ERROR, "message": str(exc)}
        if self._closed is None:
            try:
                await self._write(reply)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
