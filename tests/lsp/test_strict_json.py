"""beam_lsp.strict_json: the one strict JSON parser (duplicate keys, constants, UTF-8, depth)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_lsp import strict_json
from beam_lsp.strict_json import MAX_DEPTH, DuplicateKeyError, loads, loads_object
from tests.lsp.helpers import stdlib_only

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


def _same(a: Any, b: Any) -> bool:
    """Equality that also tells 0.0 from -0.0 (json keeps the sign)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@given(json_values, st.booleans(), st.sampled_from([None, 2]), st.booleans())
def test_anything_json_dumps_produces_round_trips(value: Any, ascii_only: bool, indent: int | None, raw: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert _same(loads(text.encode("utf-8") if raw else text), value)


def _dump_with_duplicate(value: Any, path: list[int], key: str) -> str:
    """Serialize `value` but give the object reached by `path` (or a new one there) a repeated `key`."""
    if not path:
        members = [*([json.dumps(k), json.dumps(v)] for k, v in (value.items() if isinstance(value, dict) else ()))]
        members += [[json.dumps(key), "1"], [json.dumps(key), "2"]]
        return "{" + ",".join(f"{k}:{v}" for k, v in members) + "}"
    step, rest = path[0], path[1:]
    if isinstance(value, dict) and value:
        keys = list(value)
        chosen = keys[step % len(keys)]
        parts = [f"{json.dumps(k)}:{_dump_with_duplicate(v, rest, key) if k == chosen else json.dumps(v)}"
                 for k, v in value.items()]  # fmt: skip
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list) and value:
        index = step % len(value)
        items = [_dump_with_duplicate(v, rest, key) if i == index else json.dumps(v) for i, v in enumerate(value)]
        return "[" + ",".join(items) + "]"
    return "[" + _dump_with_duplicate(None, rest, key) + "]"


@given(json_values, st.lists(st.integers(min_value=0, max_value=10), max_size=6), st.text(max_size=5))
def test_a_repeated_key_is_rejected_at_any_depth(value: Any, path: list[int], key: str) -> None:
    text = _dump_with_duplicate(value, path, key)
    with pytest.raises(DuplicateKeyError) as info:
        loads(text)
    assert info.value.key == key and str(info.value) == f"duplicate key {key!r}"


@settings(max_examples=300)
@given(st.one_of(st.text(), st.binary(), st.text(alphabet='[]{}":,0123456789.eE+-\\ntrufalsNIiy ', max_size=60)))
def test_any_input_either_decodes_or_raises_value_error(data: str | bytes) -> None:
    try:
        loads(data)
    except ValueError:
        pass


@given(json_values)
def test_loads_object_accepts_only_objects(value: Any) -> None:
    text = json.dumps(value)
    if isinstance(value, dict):
        assert _same(loads_object(text), value)
    else:
        with pytest.raises(ValueError, match="expected a JSON object, got "):
            loads_object(text)


@pytest.mark.parametrize(
    ("text", "kind"),
    [("null", "null"), ("true", "a boolean"), ("3", "a number"), ("1.5", "a number"), ('"x"', "a string"),
     ("[]", "an array")],
)  # fmt: skip
def test_loads_object_names_what_it_got_instead(text: str, kind: str) -> None:
    with pytest.raises(ValueError, match=f"^expected a JSON object, got {kind}$"):
        loads_object(text)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}'])
def test_non_finite_constants_are_not_json(text: str) -> None:
    with pytest.raises(ValueError, match="is not valid JSON") as info:
        loads(text)
    assert not isinstance(info.value, DuplicateKeyError)


def test_invalid_utf8_is_a_value_error_naming_the_byte() -> None:
    with pytest.raises(ValueError, match=r"not UTF-8: .* at byte 2"):
        loads(b'"a\xff"')


def test_bytearray_input_is_accepted_like_bytes() -> None:
    assert loads(bytearray(b'{"a": [1]}')) == {"a": [1]}


def test_a_byte_order_mark_is_not_json() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        loads(b"\xef\xbb\xbf{}")


def test_nesting_up_to_the_limit_decodes_and_one_more_level_is_rejected() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    deep = "{" + '"a":{' * MAX_DEPTH + "}" * (MAX_DEPTH + 1)
    with pytest.raises(ValueError, match=f"deeper than {MAX_DEPTH}"):
        loads(deep)


def test_very_deep_nesting_is_a_value_error_never_a_recursion_error() -> None:
    with pytest.raises(ValueError, match="deeper than"):
        loads("[" * 100_000)
    with pytest.raises(ValueError, match="deeper than"):
        loads(b"[" * 100_000 + b"]" * 100_000)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps(["[{" * 2000, '\\"[[[' * 300])
    assert loads(text) == ["[{" * 2000, '\\"[[[' * 300]


def test_parse_float_sees_the_source_text_of_fractional_numbers() -> None:
    assert loads('{"x": 0.1, "n": 3}', parse_float=Decimal) == {"x": Decimal("0.1"), "n": 3}


def test_syntax_errors_say_not_valid_json() -> None:
    with pytest.raises(ValueError, match=r"^not valid JSON: "):
        loads('{"a": }')
    with pytest.raises(ValueError, match=r"^not valid JSON: "):
        loads("{} {}")


def test_the_module_imports_only_the_standard_library() -> None:
    assert stdlib_only(strict_json)
