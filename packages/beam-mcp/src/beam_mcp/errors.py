"""Errors raised by beam-mcp and the JSON-RPC / MCP error codes it sends.

Hierarchy::

    BeamMcpError            root; everything beam-mcp raises on purpose
    ├── JsonRpcError        a request fails at the protocol level: answered with a JSON-RPC error object
    └── SelfCheckError      `lean-beam-mcp --self-check` found the server unusable

Tool-level failures (invalid tool input, Lean errors the broker reports) are not exceptions here: they are
MCP tool results with `isError: true` carrying the broker's `{code, message, data?}`.
"""

from __future__ import annotations

from typing import Any

# JSON-RPC 2.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP 2026-07-28 reserved range
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

RUNTIME_SETUP_PREFIX = "could not set up Lean Beam MCP runtime: "
"""Message prefix of the `-32600` error sent when a workspace's Lean runtime cannot be set up."""


class BeamMcpError(Exception):
    """Root of every error beam-mcp raises on purpose."""


class JsonRpcError(BeamMcpError):
    """A JSON-RPC error answer: `code`, `message` and optional `data`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def wire(self) -> dict[str, Any]:
        """The JSON-RPC error object."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


class SelfCheckError(BeamMcpError):
    """`--self-check` failed; the message says which phase and why."""


def invalid_request(message: str) -> JsonRpcError:
    """A `-32600` error."""
    return JsonRpcError(INVALID_REQUEST, message)


def invalid_params(message: str, data: Any = None) -> JsonRpcError:
    """A `-32602` error."""
    return JsonRpcError(INVALID_PARAMS, message, data)


def method_not_found(method: str) -> JsonRpcError:
    """A `-32601` error naming the method."""
    return JsonRpcError(METHOD_NOT_FOUND, f"method not found: {method}")
