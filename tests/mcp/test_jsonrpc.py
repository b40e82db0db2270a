from __future__ import annotations

import pytest

from beam_mcp import _jsonrpc
from beam_mcp._jsonrpc import Invalid, Notification, Request
from beam_mcp.errors import INVALID_REQUEST, PARSE_ERROR


@pytest.mark.parametrize("line", [b"", b"   ", b"{", b"nope", b'{"a": NaN}', b'{"jsonrpc":"2.0","jsonrpc":"2.0"}'])
def test_unparseable_lines_and_duplicate_keys_are_parse_errors_without_an_id(line: bytes) -> None:
    message = _jsonrpc.parse_line(line)
    assert isinstance(message, Invalid)
    assert message.error.code == PARSE_ERROR
    assert message.id is None


@pytest.mark.parametrize(
    ("raw", "key", "echo"),
    [
        ('"7"', ("s", "7"), '"7"'),
        ("7", ("n", 7), "7"),
        ("7.0", ("n", 7), "7.0"),
        ("1e1", ("n", 10), "1e1"),
        ("-3", ("n", -3), "-3"),
    ],
)
def test_ids_are_strings_or_integral_numbers_and_echo_their_spelling(
    raw: str, key: tuple[str, object], echo: str
) -> None:
    message = _jsonrpc.parse_line(f'{{"jsonrpc":"2.0","id":{raw},"method":"m"}}'.encode())
    assert isinstance(message, Request)
    assert message.id.key == key
    assert _jsonrpc.response(message.id, {}).decode() == f'{{"jsonrpc":"2.0","id":{echo},"result":{{}}}}'


@pytest.mark.parametrize("raw", ["1.5", "true", "null", "[1]", "{}"])
def test_invalid_ids_are_rejected_with_a_null_id(raw: str) -> None:
    message = _jsonrpc.parse_line(f'{{"jsonrpc":"2.0","id":{raw},"method":"m"}}'.encode())
    assert isinstance(message, Invalid)
    assert message.error.code == INVALID_REQUEST
    assert message.id is None


@pytest.mark.parametrize(
    ("obj", "rid"),
    [
        ('{"jsonrpc":"2.0","id":5,"result":{}}', 5),
        ('{"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}', "x"),
        ('{"jsonrpc":"2.0","id":5,"method":"m","result":{}}', 5),
        ('{"jsonrpc":"2.0","id":5,"method":"m","extra":1}', 5),
        ('{"jsonrpc":"1.0","id":5,"method":"m"}', 5),
        ('{"jsonrpc":"2.0","method":"m","extra":1}', None),
        ('{"jsonrpc":"2.0","method":7}', None),
        ("[1,2]", None),
    ],
)
def test_client_responses_and_mixed_or_undeclared_members_are_invalid_requests(obj: str, rid: object) -> None:
    message = _jsonrpc.parse_line(obj.encode())
    assert isinstance(message, Invalid)
    assert message.error.code == INVALID_REQUEST
    assert (message.id.value if message.id else None) == rid


def test_a_message_without_id_is_a_notification() -> None:
    message = _jsonrpc.parse_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(message, Notification)
    assert not message.has_params


def test_line_endings_strip_one_newline_then_one_carriage_return() -> None:
    assert _jsonrpc.strip_line(b"a\r\n") == b"a"
    assert _jsonrpc.strip_line(b"a\r\r\n") == b"a\r"
    assert _jsonrpc.strip_line(b"a\rb\n") == b"a\rb"


def test_raw_numbers_are_echoed_but_client_strings_cannot_inject_raw_json() -> None:
    value = _jsonrpc.loads('{"t": 1.50, "s": "\\u0000raw:1"}')
    assert _jsonrpc.dumps(value) == '{"t":1.50,"s":"\\u0000raw:1"}'
    assert _jsonrpc.dumps({"x": "é"}) == '{"x":"é"}'
