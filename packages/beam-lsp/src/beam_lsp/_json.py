r"""The JSON of the LSP wire: `strict_json`'s rules at C speed.

Owns encoding our outgoing messages and decoding the server's bodies. The rules are `strict_json`'s (one JSON
object, no repeated key at any depth, no `NaN`/`Infinity`, UTF-8, nesting at most `MAX_DEPTH`) and outgoing
messages never hold `NaN`; the work is done by orjson when it is installed (the `orjson` dependency, left out on
platforms without a wheel), by the standard library otherwise.

orjson keeps the last of two equal keys, so its answer is used only once it is proven to be `strict_json`'s:

- every member of every object is still there: the number of `:` outside strings in the body (each separates a
  key from its value) equals that number in orjson's re-encoding of what it decoded (a repeated key leaves one
  member, so one `:` fewer; a key spelled with escapes, `"\\u0061"` and `"a"`, counts as the same key). When the
  body has no `\\u` escape (Lean's answers, nearly always), every `:` inside a decoded string was a `:` in the body
  and orjson writes it back as one, so the `:` of the whole body and of the whole re-encoding are counted instead
  (no pass to cut the strings out): a lost member takes at least its own `:` with it and nothing can make up for
  it, since only a `\\u003a` escape turns into a `:` that the body does not count;
- no nesting deeper than `MAX_DEPTH` (counted outside strings only when the body has that many brackets at all);
- no integer beyond 64 bits, which orjson turns into a float (a run of 19 digits anywhere in the body takes the
  slow path).

Strings are found by splitting on `"` once escaped backslashes and escaped quotes are removed: in valid JSON a
backslash occurs only inside strings, and the lexer pairs a run of them from the left, as `bytes.replace` does.
Anything the fast path cannot prove (or orjson refuses) is decoded by `strict_json`, whose answer, value or
error, is the answer: results and errors are the same with or without orjson, only the time differs.

Encoding likewise: orjson's bytes are used unless it refused the value (a lone surrogate, a non-string key, an
integer beyond 64 bits, a type `json` would refuse) or wrote `null` anywhere (orjson writes `NaN` as `null`); the
standard library then encodes the message, raising `ValueError` for `NaN` as before.
"""

from __future__ import annotations

import itertools
import json
import operator
from typing import Any, Final

from . import strict_json
from .strict_json import MAX_DEPTH

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - the standard library does the same work, slower
    _orjson = None  # type: ignore[assignment]

__all__ = ["ACCELERATED", "dumps", "loads_object"]

ACCELERATED: Final = _orjson is not None
"""Whether orjson does the work."""

_DIGITS: Final = bytes.maketrans(b"0123456789", b"9999999999")
_WIDE: Final = b"9" * 19
"""19 digits in a row (after `_DIGITS`): an integer that may not fit 64 bits (or a long run inside a string)."""
_LEVELS: Final = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS: Final = bytes(c for c in range(256) if c not in b"[]{}")
# What orjson must not turn into something `json` would not: these go to `default`, which is absent, so orjson
# raises and the standard library gives its own answer.
_OPTIONS: Final = (
    (_orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME | _orjson.OPT_PASSTHROUGH_SUBCLASS)
    if _orjson is not None
    else 0
)


def _outside_strings(raw: bytes) -> bytes:
    """The bytes of valid JSON that are not inside a string literal."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(raw.split(b'"')[::2])


def _depth(structure: bytes) -> int:
    """The deepest nesting of brackets in `structure` (bytes outside strings)."""
    levels = structure.translate(_LEVELS, _NOT_BRACKETS)
    return max(map(operator.sub, itertools.accumulate(levels), itertools.count(1)), default=0)


def loads_object(body: bytes) -> dict[str, Any]:
    """Decode one message body as `strict_json.loads_object` does (same values, same errors).

    Raises:
        ValueError: Not one strict JSON object (`strict_json.DuplicateKeyError` for a repeated key).
    """
    if _orjson is not None and _WIDE not in body.translate(_DIGITS):
        try:
            value = _orjson.loads(body)
        except _orjson.JSONDecodeError:
            pass  # the reference decoder names the error (or accepts what orjson does not, e.g. "\ud800")
        else:
            if type(value) is dict and _proven(body, value):
                return value
    return strict_json.loads_object(body)


def _proven(body: bytes, value: dict[str, Any]) -> bool:
    """Whether orjson's `value` is what `strict_json` decodes `body` to (see the module docstring)."""
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _depth(_outside_strings(body)) > MAX_DEPTH:
        return False
    try:
        again = _orjson.dumps(value)
    except TypeError:  # orjson encodes less deep than it decodes ("Recursion limit reached")
        return False
    if b"\\u" not in body:  # no escape spells a `:`: every `:` of `again` has its own in the body (docstring)
        return body.count(b":") == again.count(b":")
    return _outside_strings(body).count(b":") == _outside_strings(again).count(b":")


def dumps(message: Any) -> bytes:
    """Encode a message as compact UTF-8 JSON.

    Raises:
        ValueError: The message holds `NaN` or an infinity.
        TypeError: The message holds something JSON cannot represent.
        UnicodeEncodeError: A string holds a lone surrogate.
    """
    if _orjson is not None:
        try:
            data: bytes = _orjson.dumps(message, option=_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: let the standard library give its answer
            pass
        else:
            if b"null" not in data:
                return data
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
