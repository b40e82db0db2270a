"""One HTTP exchange over ASGI: the request body under its limits, the answer under a write deadline.

This module owns the byte-level side of a request our app answers: reading the body in a slot of the intake (413
beyond the limit; 408 when it stalls, outlives its deadline or is evicted; the client leaving), writing a complete
`application/json` answer or a `text/event-stream` (events, keepalive comments, a graceful end), bounding every
write by the write timeout, and noticing the client close its connection. An answer that cannot be finished (the
client left, a write stalled) raises `Closed`; the ASGI server then closes the connection. It must not know MCP.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import anyio
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .config import HttpConfig
from .intake import Intake
from .rules import Rejected

log = logging.getLogger("beam_mcp.http")

JSON: Final = "application/json"
SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
)
KEEPALIVE_COMMENT: Final = b": keepalive\n\n"


class Closed(Exception):
    """The answer cannot go on: the client left, or a write stalled past the write timeout."""


class Wire:
    """The request and response of one ASGI `http` exchange.

    Attributes:
        body_read: The request body was read to its end (the connection may serve another request).
        started: The response head was sent.
        done: The response was sent to its end.
        broken: A write failed or stalled: the response is cut short.
    """

    def __init__(self, scope: Scope, receive: Receive, send: Send, config: HttpConfig, intake: Intake) -> None:
        self.scope = scope
        self._receive = receive
        self._send = send
        self.config = config
        self.intake = intake
        self.body_read = False
        self.started = False
        self.done = False
        self.broken = False

    # -- reading
    def declared_too_large(self) -> bool:
        """Whether a `Content-Length` beyond the body limit was declared."""
        for name, value in self.scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.config.max_body:
                return True
        return False

    async def read_body(self) -> bytes:
        """The request body, received in a slot of the intake (see `intake.py`).

        Raises:
            Rejected: 413 beyond the body limit (declared or sent); 408 when it stalls, outlives its deadline or
                is evicted for a newer request (the connection closes).
            Closed: The client left.
        """
        if self.declared_too_large():
            raise Rejected(413, f"the request body is larger than {self.config.max_body} bytes", close=True)
        body = bytearray()
        with self.intake.slot() as slot:
            while not self.body_read:
                message: Message | None = None
                with anyio.move_on_after(self.config.body_timeout):
                    message = await self._receive()
                if message is None:
                    raise Rejected(408, "the request body stalled", close=True)
                if message["type"] == "http.disconnect":
                    raise Closed
                body += message.get("body", b"")
                if len(body) > self.config.max_body:
                    raise Rejected(413, f"the request body is larger than {self.config.max_body} bytes", close=True)
                self.body_read = not message.get("more_body", False)
        if slot.evicted:
            raise Rejected(
                408,
                f"the request body was too slow: at most {self.intake.limit} bodies may arrive at once, and the "
                "one arriving longest made way for a newer request",
                close=True,
            )
        if not self.body_read:
            raise Rejected(408, f"the request body took longer than {self.config.body_deadline:g} s", close=True)
        return bytes(body)

    async def discard_body(self) -> None:
        """Read and drop the body of a request answered from its head, so its connection stays usable.

        A body that is too large, stalls or never ends is left unread (the answer then closes the connection).
        """
        if self.declared_too_large():
            return
        try:
            await self.read_body()
        except Rejected:
            pass

    async def wait_gone(self) -> None:
        """Return when the client closes the connection (call once the body was read).

        Once the body is read, `http.disconnect` is the only message an ASGI server sends.
        """
        await self._receive()

    # -- writing
    async def send(self, message: Message) -> None:
        """Send one ASGI message, bounded by the write timeout.

        Raises:
            Closed: The write stalled or failed.
        """
        try:
            with anyio.fail_after(self.config.write_timeout):
                await self._send(message)
        except TimeoutError:
            self.broken = True
            log.info("abandoning a response whose client stopped reading")
            raise Closed from None
        except OSError:
            self.broken = True
            raise Closed from None
        except anyio.get_cancelled_exc_class():
            self.broken = True  # part of the message may be unwritten: the response cannot go on
            raise

    async def respond(
        self, status: int, body: bytes = b"", headers: Sequence[tuple[str, str]] = (), *, close: bool = False
    ) -> None:
        """A complete answer (`application/json` when there is a body).

        Raises:
            Closed: The write stalled or failed.
        """
        fields = dict(headers)
        if close or not self.body_read:
            fields["connection"] = "close"
        response = Response(body, status, fields, media_type=JSON if body else None)
        self.started = True
        await response(self.scope, self._receive, self.send)
        self.done = True

    async def reject(self, rejected: Rejected) -> None:
        """Answer with a rejection.

        Raises:
            Closed: The write stalled or failed.
        """
        await self.respond(rejected.status, rejected.body, rejected.headers, close=rejected.close)

    async def start_events(self) -> None:
        """Commit the answer to `text/event-stream` (200)."""
        self.started = True
        await self.send({"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)})

    async def event(self, data: bytes) -> None:
        """One SSE event carrying one JSON-RPC message (compact JSON never contains a line break)."""
        await self.send(
            {"type": "http.response.body", "body": b"event: message\ndata: " + data + b"\n\n", "more_body": True}
        )

    async def comment(self) -> None:
        """A keepalive comment."""
        await self.send({"type": "http.response.body", "body": KEEPALIVE_COMMENT, "more_body": True})

    async def end_events(self) -> None:
        """End the event stream gracefully (the connection stays usable)."""
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        self.done = True
