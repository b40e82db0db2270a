"""Content-Length framing for LSP over byte streams, with size limits.

Owns turning a byte stream into message bodies and a body into a frame. It knows nothing about JSON or
JSON-RPC (`jsonrpc.py` encodes and decodes bodies).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, Protocol, runtime_checkable

from anyio.abc import ByteReceiveStream

from .errors import MessageTooLarge, TransportError
from .redaction import Redactor

MAX_HEADER_BYTES = 8 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def frame(body: bytes) -> bytes:
    """Put a Content-Length header in front of one message body."""
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


class FrameReader:
    """Reads framed message bodies from a byte stream, buffering across chunk boundaries.

    `receive` returns one body at a time; `pump` hands every body to a callback as its bytes arrive, which, over a
    stream that can push its chunks (beam-lsp's pipe from the server), dispatches a message from the event loop's
    own read callback, with no task to wake.
    """

    def __init__(
        self,
        stream: ByteReceiveStream,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        redactor: Redactor | None = None,
    ):
        """Read from `stream`; `redactor` scrubs the server's bytes quoted in errors (before they are cut)."""
        self._stream = stream
        self._buf = bytearray()
        self._length: int | None = None  # the body length of a header read whose body is not all here yet
        self._max = max_message_bytes
        self._redactor = redactor or Redactor()

    def _quote(self, raw: bytes, limit: int) -> str:
        return repr(self._redactor.redact(raw.decode("utf-8", "replace"))[:limit])

    def _next(self) -> bytes | None:
        """The next whole body in the buffer, taken out of it; None until its last byte has arrived.

        Raises:
            TransportError: The header is malformed or lacks Content-Length.
            MessageTooLarge: The header or the declared body exceeds the limits.
        """
        buf = self._buf
        length = self._length
        if length is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    raise MessageTooLarge("message header", len(buf), MAX_HEADER_BYTES)
                return None
            if buf.startswith(b"Content-Length: ") and buf[16:end].isdigit():  # Lean's only header, read here
                length = int(buf[16:end])
                if length > self._max:
                    raise MessageTooLarge("message body", length, self._max)
            else:
                length = self._content_length(bytes(buf[:end]))
            self._length = length
            del buf[: end + 4]
        if len(buf) < length:
            return None
        self._length = None
        body = bytes(buf[:length])
        del buf[:length]
        return body

    def _content_length(self, header: bytes) -> int:
        length: int | None = None
        for line in header.split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if not sep:
                raise TransportError(f"malformed header line: {self._quote(line, 80)}")
            if name.strip().lower() == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise TransportError(f"invalid Content-Length: {self._quote(value, 40)}") from None
        if length is None or length < 0:
            raise TransportError("message header has no valid Content-Length")
        if length > self._max:
            raise MessageTooLarge("message body", length, self._max)
        return length

    async def receive(self) -> bytes:
        """Return the next message body.

        Raises:
            anyio.EndOfStream: The stream closed (between messages or inside one).
            TransportError: The header is malformed or lacks Content-Length.
            MessageTooLarge: The header or the declared body exceeds the limits.
        """
        while (body := self._next()) is None:
            self._buf += await self._stream.receive(65536)
        return body

    async def pump(self, on_body: Callable[[bytes], None]) -> NoReturn:
        """Hand every message body to `on_body`, in order, until the stream ends or fails.

        Over a stream with a `pump(on_chunk)` of its own (see `ChunkPump`) the bodies are cut from its chunks as
        they arrive; over any other stream this is a loop over `receive`. What `on_body` raises stops reading and
        is raised here.

        Raises:
            anyio.EndOfStream: The stream closed (between messages or inside one).
            TransportError: The header is malformed or lacks Content-Length.
            MessageTooLarge: The header or the declared body exceeds the limits.
        """
        while (body := self._next()) is not None:  # what the buffer holds already
            on_body(body)
        if isinstance(self._stream, ChunkPump):

            def feed(chunk: bytes) -> None:
                self._buf += chunk
                while (body := self._next()) is not None:
                    on_body(body)

            await self._stream.pump(feed)
        while True:
            on_body(await self.receive())


@runtime_checkable
class ChunkPump(Protocol):
    """A byte stream that can hand its chunks to a callback as they arrive (`_process.PipeReader`)."""

    async def pump(self, on_chunk: Callable[[bytes], None]) -> NoReturn:
        """Call `on_chunk` with every chunk read, in order; raise `anyio.EndOfStream` at the end."""
        ...
