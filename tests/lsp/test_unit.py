"""Unit tests for beam-lsp pieces that need no server: framing, documents, redaction, the public API."""

from __future__ import annotations

import json

import anyio
import pytest

import beam_lsp
from beam_lsp import InvalidPosition, MessageTooLarge, Position, Range, Redactor, TextDocument, TransportError
from beam_lsp import _framing as framing
from beam_lsp.documents import path_to_uri, uri_to_path, utf16_len
from beam_lsp.redaction import is_secret_name

pytestmark = pytest.mark.anyio


def test_every_public_name_resolves() -> None:
    for name in beam_lsp.__all__:
        assert getattr(beam_lsp, name) is not None, name


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


async def _read_all(chunks: list[bytes], limit: int = framing.DEFAULT_MAX_MESSAGE_BYTES) -> list[bytes]:
    reader = framing.FrameReader(_ChunkStream(chunks), max_message_bytes=limit)
    out = []
    while True:
        try:
            out.append(await reader.receive())
        except anyio.EndOfStream:
            return out


async def test_frames_split_across_chunks_are_reassembled() -> None:
    a = framing.encode({"jsonrpc": "2.0", "id": 1, "result": "é𝔸"})
    b = framing.encode({"jsonrpc": "2.0", "method": "x"})
    data = a + b
    chunks = [data[i : i + 3] for i in range(0, len(data), 3)]
    bodies = await _read_all(chunks)
    assert [framing.decode(x) for x in bodies] == [
        {"jsonrpc": "2.0", "id": 1, "result": "é𝔸"},
        {"jsonrpc": "2.0", "method": "x"},
    ]


async def test_content_length_counts_utf8_bytes_not_characters() -> None:
    frame = framing.encode({"s": "𝔸"})
    header, body = frame.split(b"\r\n\r\n", 1)
    assert (
        int(header.split(b":")[1])
        == len(body)
        == len(json.dumps({"s": "𝔸"}, ensure_ascii=False, separators=(",", ":")).encode())
    )


async def test_header_without_content_length_is_a_transport_error() -> None:
    with pytest.raises(TransportError):
        await _read_all([b"Content-Type: x\r\n\r\n{}"])


async def test_declared_body_over_the_limit_is_rejected_before_reading_it() -> None:
    with pytest.raises(MessageTooLarge) as info:
        await _read_all([b"Content-Length: 1000\r\n\r\n"], limit=100)
    assert info.value.size == 1000 and info.value.limit == 100


async def test_endless_header_is_rejected() -> None:
    with pytest.raises(MessageTooLarge):
        await _read_all([b"X" * (framing.MAX_HEADER_BYTES + 10)])


def test_non_object_body_is_a_transport_error() -> None:
    with pytest.raises(TransportError):
        framing.decode(b"[1, 2]")
    with pytest.raises(TransportError):
        framing.decode(b"{not json")


# ---- documents ----------------------------------------------------------------------------------------
def test_utf16_positions_count_surrogate_pairs_as_two_units() -> None:
    doc = TextDocument("file:///x.lean", "ab\n/- 𝔸𝔹 é -/ x\n", 1)
    assert utf16_len("𝔸") == 2
    off = doc.offset_at(Position(line=1, character=13))
    assert doc.text[off] == "x"
    assert doc.position_at(off) == Position(line=1, character=13)
    assert doc.end == Position(line=2, character=0)


def test_position_inside_a_surrogate_pair_is_invalid() -> None:
    doc = TextDocument("file:///x.lean", "/- 𝔸 -/\n", 1)
    with pytest.raises(InvalidPosition, match="surrogate"):
        doc.validate(Position(line=0, character=4))


def test_positions_past_the_line_or_the_document_are_invalid() -> None:
    doc = TextDocument("file:///x.lean", "abc\nde", 1)
    doc.validate(Position(line=1, character=2))
    with pytest.raises(InvalidPosition, match="line 2"):
        doc.validate(Position(line=2, character=0))
    with pytest.raises(InvalidPosition, match="character 3"):
        doc.validate(Position(line=1, character=3))
    with pytest.raises(InvalidPosition, match="start is after"):
        doc.validate_range(Range(start=Position(line=1, character=1), end=Position(line=0, character=0)))


def test_file_uris_round_trip_with_percent_encoding() -> None:
    uri = path_to_uri("/tmp/a b/Ünï.lean")
    assert uri == "file:///tmp/a%20b/%C3%9Cn%C3%AF.lean"
    assert str(uri_to_path(uri)) == "/tmp/a b/Ünï.lean"
    with pytest.raises(ValueError, match="not absolute"):
        path_to_uri("rel/x.lean")


# ---- redaction ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True),
        ("api_key", True),
        ("apiKey", True),
        ("DB_PASSWORD", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("MY_CREDENTIALS", True),
        ("AUTHORIZATION", True),
        ("passWord", True),
        ("GIT_AUTHOR_NAME", False),
        ("SSH_AUTH_SOCK", False),
        ("KEYBOARD_LAYOUT", False),
        ("XAUTHORITY", False),
        ("HOME", False),
        ("TOKENIZERS_PARALLELISM", False),
    ],
)
def test_secret_names_follow_the_mcpls_rules(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_secret_values_are_replaced_with_named_markers_in_every_spelling() -> None:
    r = Redactor.from_sources({"GITHUB_TOKEN": 'ghp_abc"def\\ghi', "HOME": "/root/home/dir", "SHORT_KEY": "1234567"})
    text = 'raw ghp_abc"def\\ghi json ghp_abc\\"def\\\\ghi home /root/home/dir short 1234567'
    out = r.redact(text)
    assert "ghp_abc" not in out
    assert out.count("[redacted:GITHUB_TOKEN]") == 2
    assert "/root/home/dir" in out  # not secret-named
    assert "1234567" in out  # shorter than 8 bytes


def test_command_line_flags_are_secret_sources() -> None:
    r = Redactor.from_sources(
        {}, ["lake", "serve", "--auth-token=verysecret1", "--api-key", "verysecret2", "-Dmy.secret=verysecret3"]
    )
    out = r.redact("a verysecret1 b verysecret2 c verysecret3")
    assert out == "a [redacted:auth-token] b [redacted:api-key] c [redacted:my.secret]"


def test_longest_secret_wins_when_one_contains_another() -> None:
    r = Redactor({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefghijkl"})
    assert r.redact("abcdefghijkl") == "[redacted:B_TOKEN]"


def test_json_redaction_touches_values_not_keys() -> None:
    r = Redactor({"X_SECRET": "s3cr3tvalue"})
    assert r.redact_json({"s3cr3tvalue": ["s3cr3tvalue", 1]}) == {"s3cr3tvalue": ["[redacted:X_SECRET]", 1]}
