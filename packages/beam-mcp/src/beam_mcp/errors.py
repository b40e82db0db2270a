"""Errors raised by beam-mcp, the JSON-RPC / MCP error codes it sends, and `to_wire`, the one exception boundary.

Hierarchy::

    BeamMcpError            root; everything beam-mcp raises on purpose
    ├── JsonRpcError        a request fails at the protocol level: answered with a JSON-RPC error object
    ├── ToolFailure         a process-level tool rejects its input: answered as a tool error result
    └── SelfCheckError      `lean-beam-mcp --self-check` found the server unusable

Tool-level failures (invalid tool input, Lean errors the broker reports, feedback input errors) are not
JSON-RPC errors: they are MCP tool results with `isError: true` carrying `{code, message, data?}`. `to_wire` says
which JSON-RPC error an exception is, `tool_failure` which tool error a failure inside a tool call is (or raises the
JSON-RPC error it is even there); nothing else in beam-mcp maps exceptions.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from beam_broker import errors as broker_errors
from beam_feedback.errors import FeedbackError

if TYPE_CHECKING:
    from pydantic import ValidationError

log = logging.getLogger("beam_mcp")

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
# mcpls: a read of cached diagnostics while the file's language server is still starting (broker `serverStarting`)
SERVER_STARTING = -32051

RUNTIME_SETUP_PREFIX: Final = "could not set up Lean Beam MCP runtime: "
"""Message prefix of the `-32600` error a broker `runtimeSetup` error becomes (even inside a tool call)."""


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


class ToolFailure(BeamMcpError):
    """A process-level tool rejects its call: answered as a tool error `{code, message, data?}`."""

    def __init__(self, code: str, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


def invalid_request(message: str) -> JsonRpcError:
    """A `-32600` error."""
    return JsonRpcError(INVALID_REQUEST, message)


def invalid_params(message: str, data: Any = None) -> JsonRpcError:
    """A `-32602` error."""
    return JsonRpcError(INVALID_PARAMS, message, data)


def method_not_found(method: str) -> JsonRpcError:
    """A `-32601` error naming the method."""
    return JsonRpcError(METHOD_NOT_FOUND, f"method not found: {method}")


def params_error(what: str, exc: ValidationError) -> JsonRpcError:
    """The one `-32602` formatter for invalid request params: `<what>: <field>: <problem>; ...`."""
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(part) for part in err["loc"])
        problems.append(f"{where}: {err['msg']}" if where else str(err["msg"]))
    return invalid_params(f"{what}: " + "; ".join(problems))


def to_wire(exc: Exception) -> JsonRpcError:
    """The JSON-RPC error an exception is answered with.

    - `JsonRpcError`: itself.
    - A broker error `runtimeSetup`: upstream Beam's `-32600` "could not set up Lean Beam MCP runtime: ..." error;
      `serverStarting` (a diagnostics read while Lean starts): `-32051`, as mcpls answers; any other broker error
      (outside a tool call) is `-32603` naming its code.
    - Anything else is a bug: logged with its traceback (on stderr) and answered `-32603 internal error`.
    """
    if isinstance(exc, JsonRpcError):
        return exc
    if isinstance(exc, broker_errors.BrokerError):
        if exc.code == broker_errors.RUNTIME_SETUP:
            text = exc.message if exc.message.startswith(RUNTIME_SETUP_PREFIX) else RUNTIME_SETUP_PREFIX + exc.message
            return JsonRpcError(INVALID_REQUEST, text, exc.data)
        if exc.code == broker_errors.SERVER_STARTING:
            return JsonRpcError(SERVER_STARTING, exc.message, exc.data)
        return JsonRpcError(INTERNAL_ERROR, f"{exc.code}: {exc.message}", exc.data)
    log.error("internal error", exc_info=exc)
    return JsonRpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}")


def tool_failure(exc: Exception) -> dict[str, Any]:
    """The tool error `{code, message, data?}` a failure inside a tool call is answered with (`isError: true`).

    A broker error (but `runtimeSetup` and `serverStarting`), a beam-feedback error and a process tool's
    `ToolFailure` are tool errors; every other failure is answered as a JSON-RPC error even inside a tool call.

    Raises:
        JsonRpcError: `to_wire(exc)`, for a failure that is not a tool error.
    """
    if isinstance(exc, ToolFailure):
        code, message, data = exc.code, exc.message, exc.data
    elif isinstance(exc, broker_errors.BrokerError) and exc.code not in (
        broker_errors.RUNTIME_SETUP,
        broker_errors.SERVER_STARTING,
    ):
        code, message, data = exc.code, exc.message, exc.data
    elif isinstance(exc, FeedbackError):
        code, message, data = exc.code, exc.message, None
    else:
        raise to_wire(exc) from None
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error
