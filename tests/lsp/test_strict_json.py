"""beam_lsp.strict_json: the one strict JSON parser (duplicate keys, constants, UTF-8, depth), and the one rule
for text that cannot cross the wire (NUL characters and lone surrogates: found by path, or encoded safely)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_lsp import strict_json
from beam_lsp.strict_json import MAX_DEPTH, DuplicateKeyError, InvalidText, find_invalid_text, loads, loads_object
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


# ---- text that cannot cross the wire ------------------------------------------------------------------------
_any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=8)  # NUL and lone surrogates too
_clean_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)


def _values(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
        max_leaves=20,
    )


@settings(max_examples=300)
@given(_values(_any_text), st.sampled_from([None, 2]), st.booleans(), st.booleans())
def test_dumps_encodes_any_json_value_to_utf8_and_it_decodes_back(
    value: Any, indent: int | None, sort_keys: bool, compact: bool
) -> None:
    text = strict_json.dumps(value, indent=indent, sort_keys=sort_keys, compact=compact)
    assert _same(loads(text.encode("utf-8")), value)


def test_dumps_escapes_only_lone_surrogates_and_refuses_non_finite_numbers() -> None:
    assert strict_json.dumps({"id": "\ud800é𝔸", "k\udfff": [1]}, compact=True) == '{"id":"\\ud800é𝔸","k\\udfff":[1]}'
    assert strict_json.dumps({"a": 1}) == '{"a": 1}'
    with pytest.raises(ValueError):
        strict_json.dumps([math.nan])


@settings(max_examples=300)
@given(_values(_clean_text))
def test_text_utf8_can_carry_is_never_reported(value: Any) -> None:
    assert find_invalid_text(value) is None


Step = str | int


def _plant(value: Any, steps: list[int], bad: str, as_key: bool) -> tuple[Any, list[Step]]:
    """Put `bad` (as a string value, or as the key of a new member) somewhere in `value`; returns where."""
    if steps and isinstance(value, dict) and value:
        key = list(value)[steps[0] % len(value)]
        child, where = _plant(value[key], steps[1:], bad, as_key)
        return {**value, key: child}, [key, *where]
    if steps and isinstance(value, list) and value:
        index = steps[0] % len(value)
        child, where = _plant(value[index], steps[1:], bad, as_key)
        return [*value[:index], child, *value[index + 1 :]], [index, *where]
    return ({bad: 0}, [bad]) if as_key else (bad, [])


def _parse_path(path: str) -> list[Step]:
    """Read a reported path back into keys and indexes (independently of how the module writes it)."""
    steps: list[Step] = []
    rest = path
    while rest:
        if rest.startswith('["'):
            key, end = json.JSONDecoder().raw_decode(rest, 1)
            assert rest[end] == "]"
            steps.append(key)
            rest = rest[end + 1 :]
        elif rest.startswith("["):
            end = rest.index("]")
            steps.append(int(rest[1:end]))
            rest = rest[end + 1 :]
        else:
            rest = rest.removeprefix(".")
            name = rest[: min([i for i in (rest.find("."), rest.find("[")) if i >= 0], default=len(rest))]
            steps.append(name)
            rest = rest[len(name) :]
    return steps


@settings(max_examples=300)
@given(
    _values(_clean_text),
    st.lists(st.integers(min_value=0, max_value=5), max_size=5),
    _clean_text,
    st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"]),
    _clean_text,
    st.booleans(),
)
def test_a_nul_or_lone_surrogate_is_found_where_it_is_and_named_by_its_path(
    value: Any, steps: list[int], before: str, bad: str, after: str, as_key: bool
) -> None:
    planted, where = _plant(value, steps, before + bad + after, as_key)
    found = find_invalid_text(planted)
    assert found is not None and _parse_path(found.path) == where
    what = "a NUL character" if bad == "\x00" else f"a lone surrogate (U+{ord(bad):04X})"
    assert found.reason == ("object key " if as_key else "") + f"contains {what}"
    json.dumps(found.path, ensure_ascii=False).encode("utf-8")  # the path itself can always be sent


def test_the_first_bad_string_in_document_order_is_reported_with_a_readable_path() -> None:
    evidence = {"title": "ok", "evidence": [{"name": "a"}, {"name": "b"}, {"name": "c\x00", "path": "\ud800"}]}
    assert find_invalid_text(evidence) == InvalidText("evidence[2].name", "contains a NUL character")
    assert find_invalid_text({"path": "\ud800", "z": "\x00"}) == ("path", "contains a lone surrogate (U+D800)")
    assert find_invalid_text({"k\x00": "\ud800"}) == ('["k\\u0000"]', "object key contains a NUL character")
    assert find_invalid_text({"_meta": {"io.example/key": ["\x00"]}}).path == '_meta["io.example/key"][0]'  # type: ignore[union-attr]
    assert find_invalid_text("\x00") == ("", "contains a NUL character")
    assert find_invalid_text(loads('["\\ud83d\\ude00", "\\u00e9"]')) is None  # an escaped pair is one character


def test_very_deep_values_are_searched_without_recursion() -> None:
    deep: Any = "\x00"
    for _ in range(10_000):
        deep = [deep]
    assert find_invalid_text(deep) == InvalidText("[0]" * 10_000, "contains a NUL character")


def test_a_large_body_with_escaped_quotes_is_measured_exactly() -> None:
    # Brackets inside strings never count; escaped quotes send the check down its slow exact path.
    shallow = json.dumps([{"m": 'say "[[[" and "{{{"'} for _ in range(300)])
    assert loads(shallow)[0]["m"] == 'say "[[[" and "{{{"'
    deep = "[" * (MAX_DEPTH + 1) + json.dumps('a "quoted" text') + "]" * (MAX_DEPTH + 1)
    with pytest.raises(ValueError, match=f"deeper than {MAX_DEPTH}"):
        loads(deep)
    unescaped = json.dumps(["[[[[" * 200] + [[1]] * 300)  # brackets in strings, no escaped quote: the fast path
    assert len(loads(unescaped.encode())) == 301
