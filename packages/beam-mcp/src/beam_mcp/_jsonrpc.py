"""JSON-RPC 2.0 messages on the MCP stream: strict decoding, envelope classification, ids, compact encoding.

This module owns what a line of client input *is* (request, notification, or an invalid message with the id
to answer), and how our messages are written. It must not know MCP methods or protocol families.

Decoding is `beam_lsp.strict_json` (duplicate object keys, non-finite numbers and invalid UTF-8 are errors).
Numbers with a fraction or exponent decode to `RawFloat`, which remembers its source spelling so that a
request id like `7.0` or a progress token like `1.5` is echoed exactly as the client wrote it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from typing import Any, Final

from beam_lsp import strict_json

from .errors import INVALID_REQUEST, PARSE_ERROR, JsonRpcError

REQUEST_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})
NOTIFICATION_MEMBERS: Final = frozenset({"jsonrpc", "method", "params"})


class RawFloat(float):
    """A JSON number written with a fraction or exponent; `raw` is its source text."""

    raw: str

    def __new__(cls, raw: str) -> RawFloat:
        value = super().__new__(cls, raw)
        value.raw = raw
        return value


def loads(text: str | bytes) -> Any:
    """Decode one JSON value strictly (duplicate keys, NaN/Infinity, invalid UTF-8, deep nesting are errors).

    Raises:
        ValueError: The text is not one valid JSON value (`DuplicateKeyError` for repeated keys).
    """
    return strict_json.loads(text, parse_float=RawFloat)


# ---- ids ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RequestId:
    """A request id: string and numeric ids are distinct; numbers compare by integer value.

    Attributes:
        key: Identity used for ownership and cancellation (`("s", text)` or `("n", int)`).
        value: The id as decoded, echoed back verbatim.
    """

    key: tuple[str, str | int]
    value: Any

    def __str__(self) -> str:
        return dumps(self.value)


def decode_id(value: Any) -> RequestId | None:
    """The id if `value` is a valid request id (string, or number with an integral value), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return RequestId(("s", value), value)
    if isinstance(value, int):
        return RequestId(("n", value), value)
    if isinstance(value, float) and value.is_integer():
        return RequestId(("n", int(value)), value)
    return None


# ---- envelopes ----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Request:
    """A well-formed request envelope (params not yet checked)."""

    id: RequestId
    method: str
    params: Any
    has_params: bool


@dataclasses.dataclass(frozen=True)
class Notification:
    """A well-formed notification envelope."""

    method: str
    params: Any
    has_params: bool


@dataclasses.dataclass(frozen=True)
class Invalid:
    """A message to answer with an error (`id` is None when no valid id can be recovered)."""

    error: JsonRpcError
    id: RequestId | None


Message = Request | Notification | Invalid


def strip_line(line: bytes) -> bytes:
    """Remove one trailing newline and then one trailing carriage return (interior ones are kept)."""
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line


def classify(obj: Any) -> Message:
    """Classify a decoded JSON value as a request, a notification, or an invalid message."""
    if not isinstance(obj, dict):
        return Invalid(JsonRpcError(INVALID_REQUEST, "JSON-RPC message must be an object"), None)
    rid = decode_id(obj.get("id")) if "id" in obj else None
    if obj.get("jsonrpc") != "2.0":
        return Invalid(JsonRpcError(INVALID_REQUEST, 'JSON-RPC message must have "jsonrpc": "2.0"'), rid)
    if "method" not in obj:
        return Invalid(JsonRpcError(INVALID_REQUEST, "client message must be a JSON-RPC request or notification"), rid)
    method = obj["method"]
    if not isinstance(method, str):
        return Invalid(JsonRpcError(INVALID_REQUEST, "JSON-RPC method must be a string"), rid)
    is_request = "id" in obj
    allowed = REQUEST_MEMBERS if is_request else NOTIFICATION_MEMBERS
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        kind = "request" if is_request else "notification"
        return Invalid(
            JsonRpcError(INVALID_REQUEST, f"JSON-RPC {kind} has undeclared members: {', '.join(extra)}"), rid
        )
    if is_request:
        if rid is None:
            return Invalid(
                JsonRpcError(INVALID_REQUEST, "request id must be a string or an integer-valued number"), None
            )
        return Request(rid, method, obj.get("params"), "params" in obj)
    return Notification(method, obj.get("params"), "params" in obj)


def decode(data: str | bytes) -> Any:
    """One client message's JSON value, strictly decoded (see `loads`): what every transport reads.

    Raises:
        JsonRpcError: `-32700` "parse error: ..." naming the problem (the one mapping of a decoding failure).
    """
    try:
        return loads(data)
    except ValueError as exc:
        raise JsonRpcError(PARSE_ERROR, f"parse error: {exc}") from None


def parse_line(line: bytes) -> Message:
    """Decode and classify one input line (already stripped of its line ending)."""
    try:
        obj = decode(line)
    except JsonRpcError as exc:
        return Invalid(exc, None)
    return classify(obj)


# ---- encoding -----------------------------------------------------------------------------------------
# A per-process nonce keeps client strings from ever looking like a marker.
_NONCE: Final = secrets.token_hex(8)
_RAW_MARK: Final = f"\x00raw{_NONCE}:"
_RAW_PATTERN: Final = re.compile(r'"\\u0000raw' + _NONCE + r':([-+.0-9eE]*)"')


def _mark_raw(value: Any) -> Any:
    if isinstance(value, RawFloat):
        return _RAW_MARK + value.raw
    if isinstance(value, dict):
        return {k: _mark_raw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_raw(v) for v in value]
    return value


def _has_raw(value: Any) -> bool:
    if isinstance(value, RawFloat):
        return True
    if isinstance(value, dict):
        return any(_has_raw(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_raw(v) for v in value)
    return False


def dumps(value: Any) -> str:
    """Compact JSON (no spaces, non-ASCII kept), numbers echoed in their source spelling."""
    if not _has_raw(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = json.dumps(_mark_raw(value), ensure_ascii=False, separators=(",", ":"))
    return _RAW_PATTERN.sub(lambda m: m.group(1), text)


def encode(value: Any) -> bytes:
    r"""One message as UTF-8 JSON, whatever strings it holds.

    A string with a lone surrogate (an id or a name a client sent as `\ud800`) is written as a `\udXXX` escape,
    so no message a client can provoke fails to encode.
    """
    text = dumps(value)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return strict_json.escape_surrogates(text).encode()


def response(rid: RequestId | None, result: Any) -> bytes:
    """A success response line (without the newline)."""
    return encode({"jsonrpc": "2.0", "id": None if rid is None else rid.value, "result": result})


def error_response(rid: RequestId | None, error: JsonRpcError) -> bytes:
    """An error response line (without the newline)."""
    return encode({"jsonrpc": "2.0", "id": None if rid is None else rid.value, "error": error.wire()})


def notification(method: str, params: Any) -> bytes:
    """A notification line (without the newline)."""
    return encode({"jsonrpc": "2.0", "method": method, "params": params})
