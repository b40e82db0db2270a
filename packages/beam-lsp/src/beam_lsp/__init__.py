"""beam-lsp: an async client for the Lean 4 language server.

The public API is what `__all__` lists, plus the public modules `jsonrpc` (the JSON-RPC peer), `strict_json`,
`project` and `redaction`; everything else is private. The client (and with it lsprotocol, the slowest import)
loads on first use, so `import beam_lsp` stays cheap for callers that need only the models or the redactor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .__about__ import __version__

if TYPE_CHECKING:
    from ._barrier import SyncResult
    from ._events import DiagnosticsEvent, LspEvent, ProgressEvent, ServerExitedEvent
    from ._logs import LogEntry
    from .client import ClientStats, LeanClient
    from .diagnostics import Availability, DiagnosticsCache, DiagnosticsSnapshot, Elaboration
    from .documents import TextDocument, common_prefix, path_to_uri, uri_to_path, utf16_len
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
        severity_label,
    )
    from .redaction import Redactor, is_secret_name

# Every name loads its module on first use: `import beam_lsp.strict_json` (the MCP server's first import) must
# not pay for pydantic models, and `import beam_lsp` must not pay for lsprotocol.
_LAZY = {
    **dict.fromkeys(("ClientStats", "LeanClient"), "client"),
    "SyncResult": "_barrier",
    **dict.fromkeys(("DiagnosticsEvent", "LspEvent", "ProgressEvent", "ServerExitedEvent"), "_events"),
    **dict.fromkeys(("Availability", "DiagnosticsCache", "DiagnosticsSnapshot", "Elaboration"), "diagnostics"),
    "LogEntry": "_logs",
    **dict.fromkeys(("TextDocument", "common_prefix", "path_to_uri", "uri_to_path", "utf16_len"), "documents"),
    **dict.fromkeys(
        (
            "BeamLspError",
            "ContentModified",
            "DocumentError",
            "DocumentNotOpen",
            "InvalidPosition",
            "MessageTooLarge",
            "RequestCancelled",
            "ResponseError",
            "RpcNeedsReconnect",
            "ServerExited",
            "TransportError",
            "WorkerCrashed",
        ),
        "errors",
    ),
    **dict.fromkeys(
        (
            "DiagnosticSeverity",
            "LeanDiagnostic",
            "LeanFileProgressKind",
            "LeanFileProgressParams",
            "LeanTag",
            "PlainGoal",
            "PlainTermGoal",
            "Position",
            "Range",
            "severity_label",
        ),
        "lean",
    ),
    **dict.fromkeys(("Redactor", "is_secret_name"), "redaction"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


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
    "common_prefix",
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
    "severity_label",
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
