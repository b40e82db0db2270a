"""Errors raised by beam-lsp, and the JSON-RPC / LSP / Lean error codes they carry.

Hierarchy::

    BeamLspError                      root; everything beam-lsp raises on purpose
    ├── TransportError                the byte stream to the server is unusable (bad framing, bad JSON)
    │   └── MessageTooLarge           a header or body over the configured limit
    ├── ServerExited                  the language server process is gone; carries exit code and stderr tail
    ├── ResponseError                 the server answered a request with an error object (code, message, data)
    │   ├── ContentModified           -32801: the document changed, or the request hit a closed file
    │   ├── RequestCancelled          -32800: cancelled (by us or by the server)
    │   ├── WorkerCrashed             -32901/-32902: the file worker died; the next change restarts it
    │   └── RpcNeedsReconnect         -32900: the Lean RPC session expired
    ├── InvalidResult                 the server answered with a result of the wrong shape (the session goes on)
    └── DocumentError                 a request about our own document mirror that cannot be sent
        ├── DocumentNotOpen           unknown or closed document
        └── InvalidPosition           a position or range outside the document text

Every error message that can contain text from Lean or the environment is redacted before it is raised.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, Final

import anyio

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

# JSON-RPC 2.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# LSP
SERVER_NOT_INITIALIZED = -32002
UNKNOWN_ERROR_CODE = -32001
REQUEST_FAILED = -32803
SERVER_CANCELLED = -32802
CONTENT_MODIFIED = -32801
REQUEST_CANCELLED = -32800
# Lean
RPC_NEEDS_RECONNECT = -32900
WORKER_EXITED = -32901
WORKER_CRASHED = -32902

STREAM_ERRORS: Final = (anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError)
"""What a byte stream raises when the other side is gone (a broken pipe is a `ConnectionError`). The JSON-RPC peer
turns it into `ServerExited`; the broker's error boundary makes it `workerExited`, while any other `OSError` (a
disk that fails) is not."""


class BeamLspError(Exception):
    """Root of every error beam-lsp raises."""


class TransportError(BeamLspError):
    """The byte stream from the server cannot be decoded (framing or JSON)."""


class MessageTooLarge(TransportError):
    """A message header or body exceeds the configured size limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class ServerExited(BeamLspError):
    """The language server process exited or its stdout closed.

    Attributes:
        returncode: The exit status when known (negative: killed by that signal).
        stderr_tail: The last lines the server wrote to stderr, redacted.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stderr_tail: str = "") -> None:
        detail = f"{message} (exit status {returncode})" if returncode is not None else message
        if stderr_tail:
            detail = f"{detail}; stderr tail:\n{stderr_tail}"
        super().__init__(detail)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class ResponseError(BeamLspError):
    """The server answered a request with a JSON-RPC error.

    Attributes:
        code: The JSON-RPC error code (see the constants in this module).
        message: The server's message, redacted.
        data: The optional `data` member, redacted.
    """

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(f"[{code}] {message}" if message else f"[{code}]")
        self.code = code
        self.message = message
        self.data = data


class ContentModified(ResponseError):
    """-32801: the document changed under the request, or the request targeted a closed file."""


class RequestCancelled(ResponseError):
    """-32800: the request was cancelled."""


class WorkerCrashed(ResponseError):
    """-32901/-32902: Lean's file worker for the document died; a new change restarts it."""


class RpcNeedsReconnect(ResponseError):
    """-32900: the Lean RPC session is gone; connect again."""


class InvalidResult(BeamLspError):
    """The server answered a request with a result that does not have the request's result type.

    Only that request failed; the session goes on.

    Attributes:
        method: The request's method.
    """

    def __init__(self, method: str, message: str) -> None:
        super().__init__(message)
        self.method = method


class DocumentError(BeamLspError):
    """A document request cannot be sent because of the client's own document state."""


class DocumentNotOpen(DocumentError):
    """The document is not open in this client."""

    def __init__(self, uri: str) -> None:
        super().__init__(f"document is not open: {uri}")
        self.uri = uri


class InvalidPosition(DocumentError):
    """A position or range lies outside the document text (UTF-16 code units, 0-based)."""


_BY_CODE: dict[int, type[ResponseError]] = {
    CONTENT_MODIFIED: ContentModified,
    REQUEST_CANCELLED: RequestCancelled,
    WORKER_EXITED: WorkerCrashed,
    WORKER_CRASHED: WorkerCrashed,
    RPC_NEEDS_RECONNECT: RpcNeedsReconnect,
}


@contextlib.contextmanager
def unwrap_group() -> Iterator[None]:
    """Re-raise a lone exception out of a task group's exception group.

    Task groups inside Beam are implementation details: a caller's own exception raised in their block (or one
    failure of their work) must reach the caller unwrapped. Groups of several exceptions are left as they are.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from group.exceptions[0].__cause__
        raise


def response_error(code: int, message: str, data: Any = None) -> ResponseError:
    """Build the most specific `ResponseError` subclass for a JSON-RPC error code."""
    return _BY_CODE.get(code, ResponseError)(code, message, data)
