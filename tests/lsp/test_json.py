"""beam_lsp._json: the wire's JSON gives `strict_json`'s answers (values and errors) with or without orjson."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from beam_lsp import _json, strict_json
from beam_lsp.strict_json import MAX_DEPTH, DuplicateKeyError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def reference(body: bytes) -> object:
    """`strict_json`'s answer: the value, or the type and message of its error."""
    try:
        return strict_json.loads_object(body)
    except ValueError as exc:
        return (type(exc), str(exc))


def fast(body: bytes) -> object:
    try:
        return _json.loads_object(body)
    except ValueError as exc:
        return (type(exc), str(exc))


def test_orjson_does_the_work_here() -> None:
    assert _json.ACCELERATED  # the test lane installs beam-lsp with its dependencies


@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5), spaced=st.booleans())
@example(value={"a": 'x": 1, "a": 2'}, spaced=False)  # a colon and a quoted key inside a string
@example(value={"k\\": ["\\\\", '\\"', ':"']}, spaced=True)  # backslashes before quotes
@example(value={"big": 2**64, "small": -(2**63) - 1, "u64": 2**64 - 1}, spaced=False)
def test_every_object_decodes_to_the_same_value(value: dict[str, Any], spaced: bool) -> None:
    body = json.dumps(value, ensure_ascii=spaced, separators=(", ", ": ") if spaced else (",", ":")).encode()
    assert fast(body) == reference(body) == value


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":1,"a":2}',
        b'{"a":{"b":1,"b":1}}',
        b'{"a":[{"x":":","x":2}]}',
        b'{"a":1,"\\u0061":2}',  # the same key spelled with an escape
        b'{"a\\"":1,"a\\"":2}',
        b'{"k":"\\\\","k":1}',
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'{"a":1e400}',
        b"[1,2]",
        b'"text"',
        b"\xef\xbb\xbf{}",
        b'{"a":"\xff"}',
        b'{"a":1',
        b'{"a":"\\ud800"}',  # a lone surrogate: valid JSON, orjson refuses it, strict_json accepts it
        b'{"n":123456789012345678901234567890}',
        b'{"n":-9223372036854775809}',
        b'{"a":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}",  # as deep as allowed
        b'{"a":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}",  # one level too deep
        b'{"a":"[\\"' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}",  # too deep after an escaped quote
        b'{"s":"' + b"[" * (MAX_DEPTH + 5) + b'"}',  # brackets inside a string are not nesting
    ],
)
def test_odd_bodies_get_strict_json_s_answer(body: bytes) -> None:
    assert fast(body) == reference(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":1,"a":2,"b":"\\u003a"}',  # the lost member's `:` made up by an escaped one in a string
        b'{"a":{"b":1,"b":2},"c":"\\u003A"}',
    ],
)
def test_an_escaped_colon_cannot_hide_a_repeated_key(body: bytes) -> None:
    # Whole-body `:` counts are equal here (3 and 3): the count must then be taken outside strings.
    assert body.count(b":") == orjson.dumps(orjson.loads(body)).count(b":")
    with pytest.raises(DuplicateKeyError):
        _json.loads_object(body)


def test_a_repeated_key_is_named_like_strict_json_names_it() -> None:
    with pytest.raises(DuplicateKeyError) as info:
        _json.loads_object(b'{"id":1,"result":{"x":1,"y":{"z":2,"z":3}}}')
    assert info.value.key == "z"


@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_encoding_round_trips_and_matches_the_standard_library(value: dict[str, Any]) -> None:
    data = _json.dumps(value)
    assert json.loads(data) == value
    assert data == json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode() or (
        json.loads(data) == value
    )


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"x": math.nan}, ValueError),
        ({"x": [math.inf]}, ValueError),
        ({"x": "\ud800"}, UnicodeEncodeError),
        ({"x": object()}, TypeError),
    ],
)
def test_encoding_refuses_what_json_cannot_carry(value: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        _json.dumps(value)


def test_without_orjson_the_standard_library_gives_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = [b'{"a":[1,{"b":"c"}]}', b'{"a":1,"a":2}', b'{"a":NaN}', b"[]"]
    with_orjson = [fast(body) for body in bodies]
    monkeypatch.setattr(_json, "_orjson", None)
    assert [fast(body) for body in bodies] == with_orjson
    assert _json.dumps({"x": [1, "é", None]}) == '{"x":[1,"é",null]}'.encode()
    with pytest.raises(ValueError):
        _json.dumps({"x": math.nan})
