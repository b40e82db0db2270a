"""Property-based fuzzing of the JSON-RPC envelope decoder and of the server's answer to any input line.

Counts (also in docs/mcp.md): 2000 byte strings and 1500 JSON values through the decoder and the encoder, and
400 lines through a live server, per CI run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_mcp import _jsonrpc
from beam_mcp._jsonrpc import Invalid, Notification, Request
from tests.reliability.support import LiveServer, assert_well_formed, live_server

SURROGATES = st.sampled_from(["\ud800", "\udfff", "\udc00x", "a\ud83d"])
TEXT = st.one_of(st.text(max_size=12), SURROGATES, st.sampled_from(["\x00", "tools/call", "initialize", "2.0"]))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12
)
METHODS = st.sampled_from(
    [
        "tools/call",
        "tools/list",
        "initialize",
        "ping",
        "server/discover",
        "resources/read",
        "subscriptions/listen",
        "notifications/cancelled",
        "notifications/initialized",
        "logging/setLevel",
        "\ud800",
        "",
        "x" * 300,
    ]
)


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    """Mostly envelope-shaped objects with something wrong (or right) about them."""
    obj: dict[str, Any] = {}
    if draw(st.booleans()):
        obj["jsonrpc"] = draw(st.sampled_from(["2.0", "1.0", 2.0, None]))
    if draw(st.booleans()):
        obj["id"] = draw(st.one_of(st.integers(), TEXT, st.floats(allow_nan=False), st.none(), st.booleans()))
    if draw(st.booleans()):
        obj["method"] = draw(METHODS)
    if draw(st.booleans()):
        obj["params"] = draw(JSON)
    if draw(st.integers(0, 5)) == 0:
        obj[draw(TEXT)] = draw(JSON)
    return obj


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True).encode()  # ASCII escapes carry lone surrogates as \udXXX


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_a_message_and_every_answer_encodes(line: bytes) -> None:
    message = _jsonrpc.parse_line(_jsonrpc.strip_line(line))
    assert isinstance(message, Request | Notification | Invalid)
    answer = _jsonrpc.error_response(message.id, message.error) if isinstance(message, Invalid) else None
    if isinstance(message, Request):
        answer = _jsonrpc.response(message.id, {"echo": message.method, "params": message.params})
    if answer is not None:
        assert json.loads(answer.decode("utf-8"))["jsonrpc"] == "2.0"


@settings(max_examples=1500, deadline=None)
@given(st.one_of(envelopes(), JSON))
def test_any_json_value_is_classified_and_answered_with_its_id_echoed(value: Any) -> None:
    message = _jsonrpc.parse_line(_encode(value))
    assert isinstance(message, Request | Notification | Invalid)
    if isinstance(message, Request | Invalid) and message.id is not None:
        answer = json.loads(_jsonrpc.response(message.id, None))
        assert answer["id"] == message.id.value  # echoed exactly, lone surrogates included


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("fuzz-envelopes")) as live:
        yield live


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(envelopes().map(_encode), st.binary(max_size=120), JSON.map(_encode)))
def test_no_line_makes_the_server_crash_or_answer_internal_error(server: LiveServer, line: bytes) -> None:
    line = line.replace(b"\n", b" ")
    written = server.exchange(line)  # the sentinel after it is answered: the server is alive
    assert_well_formed(written)


def test_the_fuzzed_server_still_serves_tools_afterwards(server: LiveServer, tmp_path: Path) -> None:
    response = server.call("lean_sync", {"workspace": {"root": str(server.root)}, "path": "B.lean"})
    structured = response["result"]["structuredContent"]
    assert response["result"]["isError"] is False and structured["diagnostics"]["counts"]["error"] == 1
