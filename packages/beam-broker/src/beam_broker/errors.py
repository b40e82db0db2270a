"""Broker errors: one `BrokerError` type carrying a stable string code, a message and optional data.

The codes are the wire contract (MCP tool errors and CLI output use them verbatim):

    BrokerError(code, message, data)
      invalidInput            bad descriptor, undeclared fields, wrong types (before any Lean work)
      invalidParams           bad position/range, unknown/consumed handle, save with document errors, ...
      contentModified         stale version (data.reason = "documentVersionMismatch"), stale handle
      requestCancelled        the caller cancelled
      workerExited            Lean died while the request was in flight (the next call restarts it)
      syncBarrierIncomplete   the diagnostics barrier could not complete (stale imports, fatal progress)
      saveTargetNotModule, saveTraceStale, saveUnsupportedSetup   save preflight failures
      internalError           unexpected I/O or Lean failure
      runtimeSetup            no Lean server could be started for the workspace
      plus LSP names mapped from Lean's numeric error codes (methodNotFound, rpcNeedsReconnect, ...)

Lean semantic failures (a probe that does not type-check, a file with errors) are *results*, not errors.
"""

from __future__ import annotations

from typing import Any

from beam_lsp import errors as lsp_codes

INVALID_INPUT = "invalidInput"
INVALID_PARAMS = "invalidParams"
CONTENT_MODIFIED = "contentModified"
REQUEST_CANCELLED = "requestCancelled"
WORKER_EXITED = "workerExited"
WORKER_CRASHED = "workerCrashed"
SYNC_BARRIER_INCOMPLETE = "syncBarrierIncomplete"
SAVE_TARGET_NOT_MODULE = "saveTargetNotModule"
SAVE_TRACE_STALE = "saveTraceStale"
SAVE_UNSUPPORTED_SETUP = "saveUnsupportedSetup"
INTERNAL_ERROR = "internalError"
RUNTIME_SETUP = "runtimeSetup"
METHOD_NOT_FOUND = "methodNotFound"
RPC_NEEDS_RECONNECT = "rpcNeedsReconnect"

_LSP_NAMES = {
    lsp_codes.PARSE_ERROR: "parseError",
    lsp_codes.INVALID_REQUEST: "invalidRequest",
    lsp_codes.METHOD_NOT_FOUND: METHOD_NOT_FOUND,
    lsp_codes.INVALID_PARAMS: INVALID_PARAMS,
    lsp_codes.INTERNAL_ERROR: INTERNAL_ERROR,
    lsp_codes.SERVER_NOT_INITIALIZED: "serverNotInitialized",
    lsp_codes.UNKNOWN_ERROR_CODE: "unknownErrorCode",
    lsp_codes.CONTENT_MODIFIED: CONTENT_MODIFIED,
    lsp_codes.REQUEST_CANCELLED: REQUEST_CANCELLED,
    lsp_codes.RPC_NEEDS_RECONNECT: RPC_NEEDS_RECONNECT,
    lsp_codes.WORKER_EXITED: WORKER_EXITED,
    lsp_codes.WORKER_CRASHED: WORKER_CRASHED,
}


class BrokerError(Exception):
    """A typed broker failure: `code` (stable string), `message`, and optional JSON `data`."""

    def __init__(self, code: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def wire(self) -> dict[str, Any]:
        """The JSON error object `{code, message, data?}`."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def from_response_error(exc: lsp_codes.ResponseError) -> BrokerError:
    """Map a Lean JSON-RPC error reply to a broker error with the LSP code's name."""
    name = _LSP_NAMES.get(exc.code, "unknownErrorCode")
    data: dict[str, Any] = {"lspCode": exc.code}
    if exc.data is not None:
        data["lspData"] = exc.data
    return BrokerError(name, exc.message or name, data)


def invalid_input(message: str, data: dict[str, Any] | None = None) -> BrokerError:
    """An `invalidInput` error."""
    return BrokerError(INVALID_INPUT, message, data)


def invalid_params(message: str, data: dict[str, Any] | None = None) -> BrokerError:
    """An `invalidParams` error."""
    return BrokerError(INVALID_PARAMS, message, data)
