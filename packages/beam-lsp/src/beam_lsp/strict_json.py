"""Strict JSON decoding: the one parser every Beam package uses for input it did not write.

Python's `json` keeps the last of two equal object keys, accepts `NaN` and `Infinity`, and raises
`RecursionError` on deep nesting. Here a repeated key is `DuplicateKeyError`, the non-finite constants and
invalid UTF-8 are `ValueError`, and nesting deeper than `MAX_DEPTH` is a `ValueError` too, so a caller catches
exactly one exception type. This module imports only the standard library (beam-feedback and the CLIs use it
without the LSP stack).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

MAX_DEPTH: Final = 512
"""Deepest accepted nesting of arrays and objects (Python's decoder would hit its recursion limit first)."""


class DuplicateKeyError(ValueError):
    """A JSON object repeats a key.

    Attributes:
        key: The repeated key.
    """

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _too_deep(text: str) -> bool:
    """Whether brackets outside strings nest deeper than `MAX_DEPTH` (checked before decoding)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
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
