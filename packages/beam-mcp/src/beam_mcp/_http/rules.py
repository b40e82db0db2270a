"""The endpoint's admission and header rules, as pure functions of a request head and its JSON-RPC message.

This module owns the rules docs/mcp-http.md lists, in their order: the Host and Origin allow-lists (DNS rebinding
and cross-site protection), the path, the bearer token (when one is configured), the method, `Content-Type`,
`Accept`, the head size, and the MCP `2026-07-28` header mirror rules (`MCP-Protocol-Version`, `Mcp-Method`,
`Mcp-Name`, and the `Mcp-Param-*` headers a tool declares with `x-mcp-header`), plus the HTTP status of a JSON-RPC
error and which requests start no work (a drain still takes those). A broken rule is a `Rejected`. It must not do
I/O, hold state or know sessions.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from starlette.datastructures import Headers

from beam_mcp import _jsonrpc
from beam_mcp._jsonrpc import Notification, Request
from beam_mcp._protocol import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, MISSING_MODERN_META
from beam_mcp._tools import ParamHeader
from beam_mcp.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonRpcError,
    invalid_params,
)

from .auth import BearerToken
from .config import ENDPOINT

LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "[::1]")
NAME_BEARING: Final = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
"""Methods whose `Mcp-Name` header mirrors a params field."""
ROUTING_HEADERS: Final = ("mcp-protocol-version", "mcp-method", "mcp-name")
METHODS: Final = ("POST", "GET", "DELETE")
ALLOW: Final = "GET, POST, DELETE"
"""The `Allow` header of a 405."""
CHALLENGE: Final = 'Bearer realm="lean-beam-mcp"'
"""The `WWW-Authenticate` challenge of a 401 (RFC 6750)."""
_B64_PREFIX: Final = "=?base64?"
_B64_SUFFIX: Final = "?="
_FIELD_VALUE: Final = re.compile(r"[\x20-\x7e\t]*")
"""What a mirror header may carry as it is (RFC 9110 visible ASCII, space, tab); anything else is base64."""
_INTEGER: Final = re.compile(r"-?[0-9]+(\.0+)?")


class Rejected(Exception):
    """A request answered with an HTTP error status and a JSON-RPC error body (`id` when it could be read).

    Attributes:
        status: The HTTP status.
        body: The `application/json` body: a JSON-RPC error response.
        headers: Extra response headers (`Allow` of a 405).
        close: The connection closes after the answer (the request was not, or not wholly, read).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int = INVALID_REQUEST,
        rid: Any = None,
        headers: Sequence[tuple[str, str]] = (),
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = error_body(JsonRpcError(code, message), rid)
        self.headers = list(headers)
        self.close = close

    @classmethod
    def of(cls, error: JsonRpcError, rid: Any = None) -> Rejected:
        """A JSON-RPC error with the status of its code (`status_of`), its `data` kept."""
        rejected = cls(status_of(error.code), error.message, code=error.code, rid=rid)
        rejected.body = error_body(error, rid)
        return rejected


def error_body(error: JsonRpcError, rid: Any = None) -> bytes:
    r"""A JSON-RPC error response as UTF-8 JSON, whatever the id holds (a lone surrogate is written `\udXXX`)."""
    return _jsonrpc.encode({"jsonrpc": "2.0", "id": rid, "error": error.wire()})


def status_of(error_code: int) -> int:
    """The HTTP status of a JSON-RPC error in the modern family (and of transport rejections)."""
    if error_code == METHOD_NOT_FOUND:
        return 404
    if error_code == INTERNAL_ERROR:
        return 500
    return 400


def url_host(host: str) -> str:
    """`host` as written in a URL or a `Host` header (IPv6 literals in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def split_host(value: str) -> tuple[str, str | None]:
    """A `Host` header (or allow-list entry) as (lowercased name, port or None); IPv6 names keep their brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        name, rest = value[: end + 1], value[end + 1 :]
        return name, rest[1:] if rest.startswith(":") else None
    name, colon, port = value.rpartition(":")
    if not colon or ":" in name:
        return value, None
    return name, port


def decode_header_value(value: str) -> str | None:
    """An MCP mirror header: plain printable ASCII, or `=?base64?<UTF-8 in base64>?=` (None when malformed)."""
    if value.startswith(_B64_PREFIX) and value.endswith(_B64_SUFFIX) and len(value) >= len(_B64_PREFIX + _B64_SUFFIX):
        payload = value[len(_B64_PREFIX) : -len(_B64_SUFFIX)]
        try:
            return base64.b64decode(payload, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def accepts(values: Sequence[str], media: str) -> bool:
    """Whether `Accept` header values admit `media` (`*/*` and `type/*` count; `q=0` excludes).

    The most specific range that names `media` decides (RFC 9110 12.5.1): `application/json;q=0, */*` refuses
    JSON. Among ranges equally specific, any positive weight admits.
    """
    kind = media.split("/", 1)[0]
    specificity = {media: 3, f"{kind}/*": 2, "*/*": 1}
    best, admitted = 0, False
    for part in ",".join(values).split(","):
        fields = part.split(";")
        media_range = fields[0].strip().lower()
        weight = 1.0
        for field in fields[1:]:
            key, _, number = field.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(number)
                except ValueError:
                    weight = 0.0
        rank = specificity.get(media_range, 0)
        if rank > best:
            best, admitted = rank, weight > 0
        elif rank == best and rank:
            admitted = admitted or weight > 0
    return admitted


def head_size(path: bytes, query: bytes, headers: Iterable[tuple[bytes, bytes]]) -> int:
    """The size of a request head as the rule counts it: target plus each header line."""
    return len(path) + len(query) + sum(len(name) + len(value) + 4 for name, value in headers)


class Admission:
    """The head rules of one bound endpoint: Host and Origin allow-lists, the bearer token, method and media types."""

    def __init__(
        self,
        host: str,
        port: int,
        allowed_hosts: Iterable[str],
        allowed_origins: Iterable[str],
        token: BearerToken | None = None,
    ) -> None:
        bound = url_host(host).lower()
        self.hosts = {split_host(entry) for entry in (*LOOPBACK_NAMES, bound, *allowed_hosts)}
        origins = {_origin(f"http://{name}:{port}") for name in (*LOOPBACK_NAMES, bound)}
        self.origins = origins | {_origin(origin) for origin in allowed_origins}
        self.token = token

    def check_token(self, headers: Headers) -> None:
        """Rule 3a: with a token configured, the request carries it (`Authorization: Bearer <token>`, one header).

        The answer never echoes what was sent. Without credentials the challenge is plain; with wrong ones it says
        `error="invalid_token"` (RFC 6750).

        Raises:
            Rejected: 401 with `WWW-Authenticate: Bearer realm="lean-beam-mcp"`.
        """
        if self.token is None:
            return
        sent = headers.getlist("authorization")
        if self.token.admits(sent):
            return
        if not sent:
            message, challenge = "unauthorized: this MCP endpoint requires Authorization: Bearer <token>", CHALLENGE
        else:
            message, challenge = "unauthorized: the bearer token is not valid", f'{CHALLENGE}, error="invalid_token"'
        raise Rejected(401, message, headers=[("www-authenticate", challenge)])

    def check_origin(self, headers: Headers) -> None:
        """Rules 1 and 2: the `Host` name is allowed, and an `Origin`, when sent, is one allowed value.

        Raises:
            Rejected: 403.
        """
        host = headers.get("host")
        name, port = split_host(host or "")
        if (name, port) not in self.hosts and (name, None) not in self.hosts:
            raise Rejected(403, f"Host {host!r} is not allowed (DNS rebinding protection; see --allowed-host)")
        origins = headers.getlist("origin")
        if origins and (len(origins) > 1 or _origin(origins[0]) not in self.origins):
            raise Rejected(403, f"Origin {', '.join(origins)!r} is not allowed (see --allowed-origin)")

    @staticmethod
    def check_request(method: str, headers: Headers) -> None:
        """Rules 4 to 6: the method, then (POST) `Content-Type` and `Accept` (GET: `Accept`).

        Rule 3, the path, is routing's (`not_found`).

        Raises:
            Rejected: 405, 415 or 406.
        """
        if method not in METHODS:
            raise Rejected(405, f"method {method} is not allowed", headers=[("allow", ALLOW)])
        accept = headers.getlist("accept")
        if method == "POST":
            ctype = headers.get("content-type") or ""
            media, *params = (field.strip().lower() for field in ctype.split(";"))
            charset = next((p.partition("=")[2].strip('"') for p in params if p.startswith("charset=")), "utf-8")
            if media != "application/json" or charset not in ("utf-8", "utf8"):
                raise Rejected(415, f"Content-Type must be application/json (got {ctype!r})")
            if not (accepts(accept, "application/json") and accepts(accept, "text/event-stream")):
                raise Rejected(406, "Accept must list both application/json and text/event-stream")
        elif method == "GET" and not accepts(accept, "text/event-stream"):
            raise Rejected(406, "Accept must list text/event-stream")


def not_found(path: str) -> Rejected:
    """Rule 3: a path other than the endpoint's."""
    return Rejected(404, f"no MCP endpoint at {path!r}: use {ENDPOINT}")


_DEFAULT_PORTS: Final = {"http": ":80", "https": ":443"}


def _origin(value: str) -> str:
    """An origin as compared: lowercase, no trailing `/`, no default port (browsers send `http://localhost`)."""
    origin = value.strip().lower().rstrip("/")
    default = _DEFAULT_PORTS.get(origin.partition("://")[0])
    return origin.removesuffix(default) if default is not None else origin


def modern_header_error(headers: Headers, message: Request) -> JsonRpcError | None:
    """The first broken MCP `2026-07-28` header rule of a request, or None.

    In order: a routing header sent twice (`-32020`); required `_meta` missing (`-32602`); `MCP-Protocol-Version`
    missing or unlike the body's `_meta` revision, `Mcp-Method` missing or unlike the method, `Mcp-Name` missing
    or unlike the params field it mirrors (`-32020`). An unsupported revision is then the server's `-32022`.
    """
    for name in ROUTING_HEADERS:
        if len(headers.getlist(name)) > 1:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: {name} appears more than once")
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_PROTOCOL_VERSION not in meta or META_CLIENT_CAPABILITIES not in meta:
        return invalid_params(MISSING_MODERN_META)
    version = headers.get("mcp-protocol-version")
    if version is None:
        return JsonRpcError(HEADER_MISMATCH, "header mismatch: MCP-Protocol-Version header is required")
    if version != meta[META_PROTOCOL_VERSION]:
        return JsonRpcError(
            HEADER_MISMATCH,
            f"header mismatch: MCP-Protocol-Version {version!r} is not the body's {meta[META_PROTOCOL_VERSION]!r}",
        )
    method = headers.get("mcp-method")
    if method is None:
        return JsonRpcError(HEADER_MISMATCH, "header mismatch: Mcp-Method header is required")
    if method != message.method:
        return JsonRpcError(HEADER_MISMATCH, f"header mismatch: Mcp-Method {method!r} is not {message.method!r}")
    field = NAME_BEARING.get(message.method)
    if field is not None and isinstance(params.get(field), str):
        raw = headers.get("mcp-name")
        if raw is None:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: Mcp-Name header is required for {message.method}")
        if decode_header_value(raw) != params[field]:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: Mcp-Name {raw!r} is not params.{field}")
    return None


def param_header_error(headers: Headers, declared: Iterable[ParamHeader], arguments: object) -> JsonRpcError | None:
    """The first broken `Mcp-Param-*` rule of a `tools/call` whose tool declares `declared`, or None (`-32020`).

    For each declared header: it appears at most once; when the argument at its path has a value, the header is
    present, carries only visible ASCII, space and tab (else the base64 form, which must decode), and equals the
    value (integers compare numerically); when the argument is absent or null, so is the header (a proxy must not
    route on a value the body does not carry). An argument of a type no header can carry is left to the tool's
    own input check. Headers no tool declares are ignored.
    """
    for param in declared:
        values = headers.getlist(param.header)
        if len(values) > 1:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: {param.header} appears more than once")
        raw = values[0] if values else None
        where = ".".join(("arguments", *param.path))
        value = _value_at(arguments, param.path)
        rendered = _rendered(value)
        if rendered is None:
            if raw is not None:
                missing = "is absent" if value is None else "is of a type no header carries"
                return JsonRpcError(HEADER_MISMATCH, f"header mismatch: {param.header} is sent, but {where} {missing}")
            continue
        if raw is None:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: {param.header} header is required for {where}")
        if not _FIELD_VALUE.fullmatch(raw):
            return JsonRpcError(
                HEADER_MISMATCH, f"header mismatch: {param.header} has invalid characters (use the base64 form)"
            )
        decoded = decode_header_value(raw)
        if decoded is None:
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: {param.header} is malformed base64")
        if not _same(param.type, value, rendered, decoded):
            return JsonRpcError(HEADER_MISMATCH, f"header mismatch: {param.header} {raw!r} is not {where}")
    return None


def _value_at(arguments: object, path: Sequence[str]) -> object:
    node = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _rendered(value: object) -> str | None:
    """A value as a client mirrors it: strings as they are, booleans `true`/`false`, integers in decimal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value)
    return None


def _same(kind: str, value: object, rendered: str, decoded: str) -> bool:
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool) and _INTEGER.fullmatch(decoded):
        return int(decoded.partition(".")[0]) == value
    return decoded == rendered


def starts_work(method: str, body: bytes) -> bool:
    """Whether a request to the endpoint may start work: all but a DELETE and a POST of one notification.

    Only a drain needs to know (it takes those): the body is decoded only then, and again when it is routed.
    """
    if method == "GET":
        return True
    if method == "DELETE":
        return False
    try:
        decoded = _jsonrpc.decode(body)
    except JsonRpcError:
        return True  # refused like any request; another replica answers the error
    return isinstance(decoded, list) or not isinstance(_jsonrpc.classify(decoded), Notification)
