r"""Strict JSON: the one parser for input Beam did not write, and the one rule for text that cannot go on.

Python's `json` keeps the last of two equal object keys, accepts `NaN` and `Infinity`, and raises
`RecursionError` on deep nesting. Here a repeated key is `DuplicateKeyError`, the non-finite constants and
invalid UTF-8 are `ValueError`, and nesting deeper than `MAX_DEPTH` is a `ValueError` too, so a caller catches
exactly one exception type.

Valid JSON can still carry text that cannot go on: `"\ud800"` decodes to a lone UTF-16 surrogate, which UTF-8
cannot encode, and `"\u0000"` to a NUL character, which no path, command line or Lean source may hold.
`find_invalid_text` names the first such string (value or object key) by its path, so a caller can refuse the
input naming the field; `dumps` encodes any JSON value, lone surrogates included, as text that always encodes
to UTF-8 (for answers that must echo such input, e.g. a request id).

This module imports only the standard library (beam-feedback and the CLIs use it without the LSP stack).
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections.abc import Callable
from typing import Any, Final, NamedTuple

MAX_DEPTH: Final = 512
"""Deepest accepted nesting of arrays and objects (Python's decoder would hit its recursion limit first)."""

_INVALID_TEXT: Final = re.compile("[\x00\ud800-\udfff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Bracket levels for `_too_deep`: an opening bracket counts 2, a closing one 0, everything else is deleted.
_LEVELS: Final = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS: Final = bytes(c for c in range(256) if c not in b"[]{}")


class DuplicateKeyError(ValueError):
    """A JSON object repeats a key.

    Attributes:
        key: The repeated key.
    """

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # in C; only a repeated key makes it shorter, and then the first repeated one is named
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:  # pragma: no branch - some key repeats
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _too_deep(text: str) -> bool:
    """Whether brackets outside strings nest deeper than `MAX_DEPTH` (checked before decoding).

    Linear and mostly in C: when no quote is escaped, every `"` delimits a string, so the text between the even
    quotes is all there is outside strings; its brackets become levels whose running sum is the depth.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    if '\\"' in text:  # an escaped quote inside some string: walk the text (rare in large messages)
        return _too_deep_walk(text)
    raw = text.encode("utf-8", "surrogatepass")
    levels = b"".join(raw.split(b'"')[::2]).translate(_LEVELS, _NOT_BRACKETS)
    return max(map(operator.sub, itertools.accumulate(levels), itertools.count(1)), default=0) > MAX_DEPTH


def _too_deep_walk(text: str) -> bool:
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def loads(data: str | bytes | bytearray, *, parse_float: Callable[[str], Any] | None = None) -> Any:
    """Decode one JSON value strictly.

    Args:
        data: JSON text, or UTF-8 bytes (a byte order mark is not JSON).
        parse_float: Called with the source text of every number that has a fraction or exponent.

    Raises:
        DuplicateKeyError: An object repeats a key.
        ValueError: Anything else that is not exactly one JSON value (invalid UTF-8, syntax, `NaN`, too deep).
    """
    if isinstance(data, (bytes, bytearray)):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    if _too_deep(data):
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data, object_pairs_hook=_object, parse_float=parse_float, parse_constant=_constant)
    except DuplicateKeyError:
        raise
    except RecursionError:  # pragma: no cover - `_too_deep` rejects such input first
        raise ValueError(f"nesting deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None


def loads_object(data: str | bytes | bytearray) -> dict[str, Any]:
    """Decode a JSON object strictly (see `loads`).

    Raises:
        ValueError: Not one JSON object (`DuplicateKeyError` for a repeated key).
    """
    value = loads(data)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"


# ---- text that cannot cross the wire ----------------------------------------------------------------------------
class InvalidText(NamedTuple):
    """Where a JSON value holds text that cannot go on, and why.

    Attributes:
        path: The string's location: object members as `.name` (a top-level member without the dot), array
            items as `[index]`, and members whose name is not a plain identifier as `["name"]` (JSON-escaped,
            ASCII), e.g. `evidence[2].name`, `path`, `_meta["io.example/key"]`; empty for the value itself.
            For an object key, the path of the member it names.
        reason: `contains a NUL character` or `contains a lone surrogate (U+D800)`, prefixed by `object key `
            for a key.
    """

    path: str
    reason: str


def _problem(text: str) -> str | None:
    match = _INVALID_TEXT.search(text)
    if match is None:
        return None
    char = match.group()
    return "contains a NUL character" if char == "\x00" else f"contains a lone surrogate (U+{ord(char):04X})"


def _member(path: str, key: str) -> str:
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def find_invalid_text(value: Any) -> InvalidText | None:
    """Find the first string in a decoded JSON value that holds a NUL character or a lone UTF-16 surrogate.

    Strings are visited in document order (an object key before its value); nesting depth is not limited (no
    recursion). Surrogate pairs written as two escapes decode to one character and are fine.

    Args:
        value: A value as `loads` returns it (dicts, lists, strings, numbers, booleans, None).

    Returns:
        The location and reason, or None when every string is fine.
    """
    stack: list[tuple[str, Any, bool]] = [("", value, False)]  # (path, item, whether item is an object key)
    while stack:
        path, item, is_key = stack.pop()
        if isinstance(item, str):
            reason = _problem(item)
            if reason is not None:
                return InvalidText(path, f"object key {reason}" if is_key else reason)
        elif isinstance(item, dict):
            members: list[tuple[str, Any, bool]] = []
            for key, child in item.items():
                where = _member(path, str(key))
                members += [(where, key, True), (where, child, False)]
            stack.extend(reversed(members))
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{path}[{index}]", child, False) for index, child in reversed(list(enumerate(item))))
    return None


def dumps(value: Any, *, indent: int | None = None, sort_keys: bool = False, compact: bool = False) -> str:
    r"""Encode a JSON value as text that always encodes to UTF-8.

    Non-ASCII text stays as it is, except lone surrogates, which are written as `\udXXX` escapes (valid JSON
    that decodes back to the same string): `json.dumps(..., ensure_ascii=False).encode()` would raise
    `UnicodeEncodeError` instead.

    Args:
        value: The value (dicts, lists, strings, numbers, booleans, None).
        indent: As for `json.dumps`.
        sort_keys: As for `json.dumps`.
        compact: No spaces after `,` and `:`.

    Raises:
        ValueError: The value holds `NaN` or an infinity (not JSON).
        TypeError: The value holds something JSON cannot represent.
    """
    separators = (",", ":") if compact else None
    text = json.dumps(
        value, ensure_ascii=False, allow_nan=False, indent=indent, sort_keys=sort_keys, separators=separators
    )
    return escape_surrogates(text)


def escape_surrogates(text: str) -> str:
    r"""JSON text (as `json.dumps(..., ensure_ascii=False)` writes it) with lone surrogates as `\udXXX` escapes.

    Outside string literals the encoder writes ASCII only, so every surrogate is inside a string, where the
    escape is valid JSON and decodes back to the same string.
    """
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
