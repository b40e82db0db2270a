"""Broker errors: one `BrokerError` type carrying a stable string code, and the one map from beam-lsp errors.

The codes are the wire contract (MCP tool errors and CLI output use them verbatim):

    BrokerError(code, message, data)
      invalidInput            bad descriptor, undeclared fields, wrong types, unknown operation (before Lean work)
      invalidParams           bad position/range, unknown/consumed handle, save with document errors, a source
                              path that names no Lean source (`data.reason = "notLeanSource"`, every tool; see
                              `workspace.check_lean_source`), a source file the path given cannot be read as
                              (`data.reason`: fileNotFound, notRegularFile, sourceTooLarge, notUtf8, badPath,
                              permissionDenied; `_documents.read_source`), ...
      contentModified         stale version (data.reason = "documentVersionMismatch"), stale handle, closed document
      requestCancelled        the caller cancelled (metrics only: cancellation itself propagates)
      workerExited            Lean died while the request was in flight (the next call restarts it)
      syncBarrierIncomplete   the diagnostics barrier could not complete (stale imports, fatal progress)
      saveTargetNotModule, saveTraceStale, saveUnsupportedSetup   save preflight failures
      internalError           unexpected I/O or Lean failure, or a bug (logged with its traceback)
      runtimeSetup            no Lean server could be started for the workspace (or no Lake for a save)
      serverStarting          the workspace's Lean server is still starting (reading cached diagnostics only;
                              MCP answers -32051 "server starting", as mcpls does)
      plus LSP names mapped from Lean's numeric error codes (methodNotFound, rpcNeedsReconnect, ...)

Where a `BrokerError` comes from: handlers raise them for the rules they check; every failure of the Lean stack
is translated in one place, `lean_errors()`, which `Broker.call` wraps around the handler (in the spirit of
httpx's `map_httpcore_exceptions`). The one translation elsewhere is deliberate: a server that cannot *start* is
reported by the runtime as `runtimeSetup` (nothing was in flight, so it is not `workerExited`). Reading a source
raises `invalidParams` for what the caller's path is at fault for and lets any other I/O error reach the
boundary.

Lean semantic failures (a probe that does not type-check, a file with errors) are *results*, not errors.

Secrets: `Broker.call` passes every error through the broker's redactor (`BrokerError.redacted`) before it
leaves, and `lean_errors(redactor)` logs an unexpected exception with its traceback redacted.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

from beam_lsp import errors as lsp
from beam_lsp.redaction import Redactor
from beam_lsp.strict_json import InvalidText

from ._outbound import log_failure

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

log = logging.getLogger("beam_broker")

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
SERVER_STARTING = "serverStarting"
METHOD_NOT_FOUND = "methodNotFound"
RPC_NEEDS_RECONNECT = "rpcNeedsReconnect"

_LSP_NAMES = {
    lsp.PARSE_ERROR: "parseError",
    lsp.INVALID_REQUEST: "invalidRequest",
    lsp.METHOD_NOT_FOUND: METHOD_NOT_FOUND,
    lsp.INVALID_PARAMS: INVALID_PARAMS,
    lsp.INTERNAL_ERROR: INTERNAL_ERROR,
    lsp.SERVER_NOT_INITIALIZED: "serverNotInitialized",
    lsp.UNKNOWN_ERROR_CODE: "unknownErrorCode",
    lsp.CONTENT_MODIFIED: CONTENT_MODIFIED,
    lsp.REQUEST_CANCELLED: REQUEST_CANCELLED,
    lsp.RPC_NEEDS_RECONNECT: RPC_NEEDS_RECONNECT,
    lsp.WORKER_EXITED: WORKER_EXITED,
    lsp.WORKER_CRASHED: WORKER_CRASHED,
}


class BrokerError(Exception):
    """A typed broker failure: `code` (stable string), `message`, and optional JSON `data`."""

    def __init__(self, code: str, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def redacted(self, redactor: Redactor) -> BrokerError:
        """This error with its message and data redacted (itself when nothing changes)."""
        message = redactor.redact(self.message)
        data = redactor.redact_json(self.data) if self.data is not None else None
        if message == self.message and data == self.data:
            return self
        return BrokerError(self.code, message, data)

    def wire(self) -> dict[str, Any]:
        """The JSON error object `{code, message, data?}`."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


def invalid_input(message: str, data: dict[str, Any] | None = None) -> BrokerError:
    """An `invalidInput` error."""
    return BrokerError(INVALID_INPUT, message, data)


def invalid_params(message: str, data: dict[str, Any] | None = None) -> BrokerError:
    """An `invalidParams` error."""
    return BrokerError(INVALID_PARAMS, message, data)


def invalid_text(tool: str, bad: InvalidText) -> BrokerError:
    """The `invalidInput` error for an argument holding a NUL character or a lone surrogate (naming the field)."""
    return invalid_input(f"{tool}: {bad.path or 'arguments'} {bad.reason}", {"field": bad.path, "reason": bad.reason})


def from_response_error(exc: lsp.ResponseError) -> BrokerError:
    """Map a Lean JSON-RPC error reply to a broker error with the LSP code's name."""
    name = _LSP_NAMES.get(exc.code, "unknownErrorCode")
    data: dict[str, Any] = {"lspCode": exc.code}
    if exc.data is not None:
        data["lspData"] = exc.data
    return BrokerError(name, exc.message or name, data)


def translate(exc: Exception, redactor: Redactor | None = None) -> BrokerError:
    """The broker error for any exception a handler let escape (see `lean_errors`).

    An unexpected exception is logged with its traceback, redacted by `redactor`.
    """
    if isinstance(exc, BrokerError):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1 and isinstance(exc.exceptions[0], Exception):
        return translate(exc.exceptions[0], redactor)
    if isinstance(exc, lsp.ServerExited):
        return BrokerError(
            WORKER_EXITED,
            f"the Lean server exited while the request was in flight: {exc}",
            {"stderrTail": exc.stderr_tail},
        )
    if isinstance(exc, lsp.WorkerCrashed):
        return BrokerError(WORKER_EXITED, f"the Lean worker for the document exited: {exc.message}")
    if isinstance(exc, lsp.TransportError):
        # beam-lsp kills a server whose output it cannot decode: the request will never be answered.
        return BrokerError(WORKER_EXITED, f"the Lean server's output could not be read: {exc}")
    if isinstance(exc, lsp.STREAM_ERRORS):
        # The pipe to the Lean server is the only stream a handler writes to. beam-lsp promises `ServerExited` for
        # it; a dead server is `workerExited` even if a stream error slips through.
        return BrokerError(WORKER_EXITED, f"the connection to the Lean server broke ({type(exc).__name__})")
    if isinstance(exc, lsp.ResponseError):
        return from_response_error(exc)
    if isinstance(exc, lsp.InvalidPosition):
        return invalid_params(str(exc))
    if isinstance(exc, lsp.DocumentNotOpen):
        return BrokerError(CONTENT_MODIFIED, f"document was closed: {exc.uri}", {"reason": "documentClosed"})
    log_failure(log, redactor or Redactor(), exc, "unexpected failure in a broker operation")
    return BrokerError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")


@contextlib.contextmanager
def lean_errors(redactor: Redactor | None = None) -> Iterator[None]:
    """The broker's error boundary: inside it anything but cancellation leaves as a `BrokerError`.

    beam-lsp failures get their codes (a dead server or file worker is `workerExited` whatever the path);
    an unexpected exception is logged with its traceback and becomes `internalError`. Cancellation (a
    `BaseException`) passes through untouched.

    Args:
        redactor: Scrubs the traceback of an unexpected exception before it is logged.

    Raises:
        BrokerError: The translation of whatever the block raised.
    """
    try:
        yield
    except BrokerError:
        raise
    except Exception as exc:
        raise translate(exc, redactor) from exc
