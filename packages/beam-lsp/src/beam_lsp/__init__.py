"""beam-lsp: an async client for the Lean 4 language server.

The public API is what `__all__` lists; everything else is private.
"""

from __future__ import annotations

from .__about__ import __version__
from .client import (
    ClientStats,
    DiagnosticsEvent,
    LeanClient,
    LspEvent,
    ProgressEvent,
    ServerExitedEvent,
    SyncResult,
)
from .diagnostics import Availability, DiagnosticsCache, DiagnosticsSnapshot, Elaboration, LogEntry
from .documents import TextDocument, path_to_uri, uri_to_path, utf16_len
from .errors import (
    BeamLspError,
    ContentModified,
    DocumentError,
    DocumentNotOpen,
    InvalidPosition,
    MessageTooLarge,
    RequestCancelled,
    ResponseError,
    RpcNeedsReconnect,
    ServerExited,
    TransportError,
    WorkerCrashed,
)
from .lean import (
    DiagnosticSeverity,
    LeanDiagnostic,
    LeanFileProgressKind,
    LeanFileProgressParams,
    LeanTag,
    PlainGoal,
    PlainTermGoal,
    Position,
    Range,
)
from .redaction import Redactor, is_secret_name

__all__ = [
    "__version__",
    # client
    "LeanClient",
    "SyncResult",
    "ClientStats",
    "LspEvent",
    "DiagnosticsEvent",
    "ProgressEvent",
    "ServerExitedEvent",
    # documents
    "TextDocument",
    "path_to_uri",
    "uri_to_path",
    "utf16_len",
    # diagnostics
    "DiagnosticsCache",
    "DiagnosticsSnapshot",
    "Availability",
    "Elaboration",
    "LogEntry",
    # Lean models
    "Position",
    "Range",
    "LeanDiagnostic",
    "DiagnosticSeverity",
    "LeanTag",
    "LeanFileProgressKind",
    "LeanFileProgressParams",
    "PlainGoal",
    "PlainTermGoal",
    # redaction
    "Redactor",
    "is_secret_name",
    # errors
    "BeamLspError",
    "TransportError",
    "MessageTooLarge",
    "ServerExited",
    "ResponseError",
    "ContentModified",
    "RequestCancelled",
    "WorkerCrashed",
    "RpcNeedsReconnect",
    "DocumentError",
    "DocumentNotOpen",
    "InvalidPosition",
]
