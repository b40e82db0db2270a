"""MCP protocol constants, log levels and request-metadata decoding for both supported revisions.

This module owns the values both families share (revisions, server info, capabilities, cache hints) and the
validation of modern per-request metadata. It must not keep state: the family state machine is the
server's, and modern metadata is decoded per request and never retained.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final, Literal, get_args

from . import _jsonrpc
from .__about__ import __version__
from .errors import UNSUPPORTED_PROTOCOL_VERSION, JsonRpcError, invalid_params

SERVER_NAME: Final = "lean-beam-mcp"
MODERN_VERSION: Final = "2026-07-28"
"""The preferred, stateless revision (per-request `_meta`)."""
LEGACY_VERSION: Final = "2025-11-25"
"""The initialize-based revision kept while clients migrate."""
SUPPORTED_MODERN_VERSIONS: Final = (MODERN_VERSION,)

PUBLIC_CACHE_TTL_MS: Final = 3_600_000
RESOURCE_LIST_TTL_MS: Final = 1_000
"""`resources/list` is private to this process's state and changes only when a client syncs or closes files."""
RESOURCE_READ_TTL_MS: Final = 0
"""`resources/read` is never reused: Lean rewrites a file's diagnostics while it elaborates (subscribe instead)."""
INSTRUCTIONS: Final = "Use an explicit local workspace descriptor on every workspace-bound Beam tool call."

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
MODERN_META_KEYS: Final = (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL)

MISSING_MODERN_META: Final = (
    f"modern MCP requests require _meta.{META_PROTOCOL_VERSION} and _meta.{META_CLIENT_CAPABILITIES}"
)

LogLevel = Literal["emergency", "alert", "critical", "error", "warning", "notice", "info", "debug"]
"""The RFC 5424 severities MCP logging uses, most severe first (the type of `logging/setLevel`'s `level`)."""
LOG_LEVELS: Final[tuple[LogLevel, ...]] = get_args(LogLevel)
# An event passes when its rank is <= the minimum's rank.
_RANK: Final[dict[str, int]] = {name: rank for rank, name in enumerate(LOG_LEVELS)}


def server_info() -> dict[str, str]:
    """`{name, version}` of this server."""
    return {"name": SERVER_NAME, "version": __version__}


def capabilities() -> dict[str, Any]:
    """Server capabilities (the same for both families).

    `resources.subscribe` covers legacy `resources/subscribe` and the `resourceSubscriptions` of a modern
    `subscriptions/listen`; neither list ever announces changes (`listChanged: false`).
    """
    return {
        "logging": {},
        "resources": {"subscribe": True, "listChanged": False},
        "tools": {"listChanged": False},
    }


def admits(minimum: str | None, level: str) -> bool:
    """Whether a log event at `level` passes the active minimum (`None`: no logs at all)."""
    return minimum is not None and _RANK[level] <= _RANK[minimum]


def check_level(value: Any) -> str:
    """A valid log level name.

    Raises:
        JsonRpcError: `-32602` for anything else.
    """
    if not isinstance(value, str) or value not in _RANK:
        raise invalid_params(f"invalid log level {value!r}: expected one of {', '.join(LOG_LEVELS)}")
    return value


def has_modern_meta(params: Any) -> bool:
    """Whether `params._meta` carries any reserved modern MCP key (modern evidence)."""
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and any(key in meta for key in MODERN_META_KEYS)


@dataclasses.dataclass(frozen=True)
class ModernContext:
    """Decoded per-request metadata of one modern request (never retained past it)."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None


def decode_modern(params: Any) -> ModernContext:
    """Validate the per-request metadata of a modern request.

    Raises:
        JsonRpcError: `-32602` for missing or malformed metadata, `-32022` for an unsupported revision.
    """
    if not isinstance(params, dict) or not isinstance(params.get("_meta"), dict):
        raise invalid_params(MISSING_MODERN_META)
    meta: dict[str, Any] = params["_meta"]
    if META_PROTOCOL_VERSION not in meta or META_CLIENT_CAPABILITIES not in meta:
        raise invalid_params(MISSING_MODERN_META)
    version = meta[META_PROTOCOL_VERSION]
    if not isinstance(version, str):
        raise invalid_params(f"_meta.{META_PROTOCOL_VERSION} must be a string")
    if version not in SUPPORTED_MODERN_VERSIONS:
        raise JsonRpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(SUPPORTED_MODERN_VERSIONS), "requested": version},
        )
    caps = meta[META_CLIENT_CAPABILITIES]
    if not isinstance(caps, dict):
        raise invalid_params(f"_meta.{META_CLIENT_CAPABILITIES} must be an object")
    info = meta.get(META_CLIENT_INFO)
    if META_CLIENT_INFO in meta and not (
        isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)
    ):
        raise invalid_params(f"_meta.{META_CLIENT_INFO} must be an object with string name and version")
    level = check_level(meta[META_LOG_LEVEL]) if META_LOG_LEVEL in meta else None
    return ModernContext(version, caps, info, level)


def modern_envelope(result: dict[str, Any]) -> dict[str, Any]:
    """A modern result: `resultType: "complete"` and the server identity in `_meta` (other `_meta` kept)."""
    meta = dict(result.get("_meta") or {})
    meta[META_SERVER_INFO] = server_info()
    return {**result, "resultType": "complete", "_meta": meta}


def check_closed(params: Any, allowed: frozenset[str], what: str, *, required: bool = False) -> dict[str, Any]:
    """`params` as an object whose members are all in `allowed` (absent params are `{}` unless required).

    Raises:
        JsonRpcError: `-32602` naming the problem.
    """
    if params is None and not required:
        return {}
    if not isinstance(params, dict):
        raise invalid_params(f"{what} params must be an object")
    extra = sorted(k for k in params if k not in allowed)
    if extra:
        raise invalid_params(f"{what} params accept no undeclared fields: {', '.join(extra)}")
    if "_meta" in params and not isinstance(params["_meta"], dict):
        raise invalid_params(f"{what} params._meta must be an object")
    return params


def tool_result(structured: Any, *, is_error: bool = False) -> dict[str, Any]:
    """A `CallToolResult`: `structuredContent` plus the same JSON in `content[0].text` (both families)."""
    if not isinstance(structured, dict):
        structured = {"result": structured}
    return {
        "content": [{"type": "text", "text": _jsonrpc.dumps(structured)}],
        "structuredContent": structured,
        "isError": is_error,
    }
