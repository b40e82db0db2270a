"""Content-Length framing for LSP over byte streams, with size limits.

Owns turning a byte stream into message bodies and a body into a frame. It knows nothing about JSON or
JSON-RPC (`jsonrpc.py` encodes and decodes bodies).
"""

from __future__ import annotations

from anyio.abc import ByteReceiveStream

from .errors import MessageTooLarge, TransportError
from .redaction import Redactor

MAX_HEADER_BYTES = 8 * 1024
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def frame(body: bytes) -> bytes:
    """Put a Content-Length header in front of one message body."""
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


class FrameReader:
    """Reads framed message bodies from a byte stream, buffering across chunk boundaries."""

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
        self._max = max_message_bytes
        self._redactor = redactor or Redactor()

    def _quote(self, raw: bytes, limit: int) -> str:
        return repr(self._redactor.redact(raw.decode("utf-8", "replace"))[:limit])

    async def _fill(self) -> None:
        chunk = await self._stream.receive(65536)
        self._buf += chunk

    async def receive(self) -> bytes:
        """Return the next message body.

        Raises:
            anyio.EndOfStream: The stream closed (between messages or inside one).
            TransportError: The header is malformed or lacks Content-Length.
            MessageTooLarge: The header or the declared body exceeds the limits.
        """
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buf) > MAX_HEADER_BYTES:
                raise MessageTooLarge("message header", len(self._buf), MAX_HEADER_BYTES)
            await self._fill()
        header = bytes(self._buf[:end])
        del self._buf[: end + 4]
        length: int | None = None
        if header.startswith(b"Content-Length: ") and header[16:].isdigit():  # Lean's only header
            length = int(header[16:])
        for line in header.split(b"\r\n") if length is None else ():
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
        while len(self._buf) < length:
            await self._fill()
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body
