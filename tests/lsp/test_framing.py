"""beam_lsp._framing: Content-Length frames over byte streams, with size limits."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import NoReturn

import anyio
import pytest

from beam_lsp import MessageTooLarge, TransportError
from beam_lsp import _framing as framing

pytestmark = pytest.mark.anyio


class _ChunkStream(anyio.abc.ByteReceiveStream):
    """A byte stream that yields fixed chunks, then end of stream."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._chunks:
            raise anyio.EndOfStream
        return self._chunks.pop(0)

    async def aclose(self) -> None:
        self._chunks.clear()


class _PushStream(_ChunkStream):
    """The same chunks handed to a callback (`FrameReader.pump` cuts frames from them as they come)."""

    async def pump(self, on_chunk: Callable[[bytes], None]) -> NoReturn:
        while True:
            on_chunk(await self.receive())


async def _read(chunks: list[bytes], limit: int, *, push: bool) -> list[bytes]:
    stream = _PushStream(chunks) if push else _ChunkStream(chunks)
    reader = framing.FrameReader(stream, max_message_bytes=limit)
    out: list[bytes] = []
    try:
        if push:
            assert isinstance(stream, framing.ChunkPump)
            await reader.pump(out.append)
        while True:
            out.append(await reader.receive())
    except anyio.EndOfStream:
        return out


async def _read_all(chunks: list[bytes], limit: int = framing.DEFAULT_MAX_MESSAGE_BYTES) -> list[bytes]:
    """The bodies read one by one (`receive`), checked equal to those pushed (`pump`): same bodies, same error."""
    outcomes: list[list[bytes] | Exception] = []
    for push in (False, True):
        try:
            outcomes.append(await _read(chunks, limit, push=push))
        except Exception as exc:
            outcomes.append(exc)
    pulled, pushed = outcomes
    if isinstance(pulled, Exception):
        assert type(pushed) is type(pulled) and str(pushed) == str(pulled)
        raise pulled
    assert pushed == pulled
    return pulled


async def test_frames_split_across_chunks_are_reassembled() -> None:
    a = framing.frame('{"id":1,"result":"é𝔸"}'.encode())
    b = framing.frame(b'{"method":"x"}')
    data = a + b
    chunks = [data[i : i + 3] for i in range(0, len(data), 3)]
    assert await _read_all(chunks) == ['{"id":1,"result":"é𝔸"}'.encode(), b'{"method":"x"}']


async def test_content_length_counts_utf8_bytes_not_characters() -> None:
    body = json.dumps({"s": "𝔸"}, ensure_ascii=False).encode()
    header, framed = framing.frame(body).split(b"\r\n\r\n", 1)
    assert header == b"Content-Length: %d" % len(body) and framed == body and len(body) > len('{"s": "𝔸"}')


async def test_other_headers_and_header_case_are_accepted() -> None:
    frame = b"content-length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}"
    assert await _read_all([frame]) == [b"{}"]


async def test_header_without_content_length_is_a_transport_error() -> None:
    with pytest.raises(TransportError, match="no valid Content-Length"):
        await _read_all([b"Content-Type: x\r\n\r\n{}"])


@pytest.mark.parametrize("value", [b"abc", b"-1"])
async def test_an_invalid_content_length_is_a_transport_error(value: bytes) -> None:
    with pytest.raises(TransportError, match="Content-Length"):
        await _read_all([b"Content-Length: " + value + b"\r\n\r\n{}"])


async def test_a_header_line_without_a_colon_is_a_transport_error() -> None:
    with pytest.raises(TransportError, match="malformed header line"):
        await _read_all([b"\x00\xffgarbage\r\n\r\n{}"])


async def test_declared_body_over_the_limit_is_rejected_before_reading_it() -> None:
    with pytest.raises(MessageTooLarge) as info:
        await _read_all([b"Content-Length: 1000\r\n\r\n"], limit=100)
    assert info.value.size == 1000 and info.value.limit == 100


async def test_endless_header_is_rejected() -> None:
    with pytest.raises(MessageTooLarge):
        await _read_all([b"X" * (framing.MAX_HEADER_BYTES + 10)])


async def test_a_stream_ending_inside_a_body_is_end_of_stream() -> None:
    assert await _read_all([b"Content-Length: 10\r\n\r\n{}"]) == []
