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
    from ._events import DiagnosticsEvent, EventStream, LspEvent, ProgressEvent, ServerExitedEvent
    from ._file import LeanFile, Point, Point0, Point1
    from ._handshake import DEFAULT_SERVER_REQUESTS, ServerRequestHandler
    from ._logs import LogBuffer, LogEntry
    from ._progress import FileProgress
    from ._sync import SyncEventStream, SyncLeanClient, SyncLeanFile
    from .client import ClientStats, LeanClient
    from .diagnostics import Availability, DiagnosticsCache, DiagnosticsSnapshot, DocumentProgress, Elaboration
    from .documents import (
        PositionLike,
        RangeLike,
        TextDocument,
        TextEditLike,
        apply_text_edits,
        common_prefix,
        path_to_uri,
        uri_to_path,
        utf16_len,
    )
    from .errors import (
        BeamLspError,
        ContentModified,
        DocumentError,
        DocumentNotOpen,
        InvalidPosition,
        InvalidResult,
        MessageTooLarge,
        RequestCancelled,
        ResponseError,
        RpcNeedsReconnect,
        ServerExited,
        TransportError,
        WorkerCrashed,
    )
    from .lean import (
        CodeWithInfos,
        DiagnosticRelatedInformation,
        DiagnosticSeverity,
        InteractiveDiagnostic,
        InteractiveGoal,
        InteractiveGoals,
        InteractiveHypothesisBundle,
        InteractiveMessage,
        InteractiveTermGoal,
        JsonValue,
        LeanDiagnostic,
        LeanFileProgressKind,
        LeanFileProgressParams,
        LeanFileProgressProcessingInfo,
        LeanImport,
        LeanImportKind,
        LeanModule,
        LeanTag,
        Location,
        Model,
        ModelError,
        MsgEmbed,
        PanelWidgetInstance,
        PlainGoal,
        PlainTermGoal,
        Position,
        Range,
        RpcRef,
        SemanticToken,
        SubexprInfo,
        VersionedTextDocumentIdentifier,
        WidgetEmbed,
        WidgetSource,
        severity_label,
    )
    from .redaction import Redactor, is_secret_name

_LEAN_MODELS = (
    "CodeWithInfos",
    "DiagnosticRelatedInformation",
    "DiagnosticSeverity",
    "InteractiveDiagnostic",
    "InteractiveGoal",
    "InteractiveGoals",
    "InteractiveHypothesisBundle",
    "InteractiveTermGoal",
    "JsonValue",
    "LeanDiagnostic",
    "LeanFileProgressKind",
    "LeanFileProgressParams",
    "LeanFileProgressProcessingInfo",
    "LeanImport",
    "LeanImportKind",
    "LeanModule",
    "LeanTag",
    "Location",
    "Model",
    "ModelError",
    "MsgEmbed",
    "PanelWidgetInstance",
    "PlainGoal",
    "PlainTermGoal",
    "Position",
    "Range",
    "RpcRef",
    "SemanticToken",
    "SubexprInfo",
    "VersionedTextDocumentIdentifier",
    "InteractiveMessage",
    "WidgetEmbed",
    "WidgetSource",
    "severity_label",
)
_ERRORS = (
    "BeamLspError",
    "ContentModified",
    "DocumentError",
    "DocumentNotOpen",
    "InvalidPosition",
    "InvalidResult",
    "MessageTooLarge",
    "RequestCancelled",
    "ResponseError",
    "RpcNeedsReconnect",
    "ServerExited",
    "TransportError",
    "WorkerCrashed",
)
_DOCUMENTS = (
    "PositionLike",
    "RangeLike",
    "TextDocument",
    "TextEditLike",
    "apply_text_edits",
    "common_prefix",
    "path_to_uri",
    "uri_to_path",
    "utf16_len",
)

# Every name loads its module on first use: `import beam_lsp.strict_json` (the MCP server's first import) must
# not pay for the models, and `import beam_lsp` must not pay for lsprotocol.
_LAZY = {
    **dict.fromkeys(("ClientStats", "LeanClient"), "client"),
    "SyncResult": "_barrier",
    **dict.fromkeys(("DiagnosticsEvent", "EventStream", "LspEvent", "ProgressEvent", "ServerExitedEvent"), "_events"),
    **dict.fromkeys(("DEFAULT_SERVER_REQUESTS", "ServerRequestHandler"), "_handshake"),
    "FileProgress": "_progress",
    **dict.fromkeys(("LeanFile", "Point", "Point0", "Point1"), "_file"),
    **dict.fromkeys(("SyncEventStream", "SyncLeanClient", "SyncLeanFile"), "_sync"),
    **dict.fromkeys(
        ("Availability", "DiagnosticsCache", "DiagnosticsSnapshot", "DocumentProgress", "Elaboration"), "diagnostics"
    ),
    **dict.fromkeys(("LogBuffer", "LogEntry"), "_logs"),
    **dict.fromkeys(_DOCUMENTS, "documents"),
    **dict.fromkeys(_ERRORS, "errors"),
    **dict.fromkeys(_LEAN_MODELS, "lean"),
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
    "ServerRequestHandler",
    "DEFAULT_SERVER_REQUESTS",
    # the blocking twin
    "SyncLeanClient",
    "SyncLeanFile",
    "SyncEventStream",
    # a document by path, positions in code points
    "LeanFile",
    "Point",
    "Point0",
    "Point1",
    # events
    "EventStream",
    "LspEvent",
    "DiagnosticsEvent",
    "ProgressEvent",
    "ServerExitedEvent",
    "FileProgress",
    # documents
    "TextDocument",
    "PositionLike",
    "RangeLike",
    "TextEditLike",
    "apply_text_edits",
    "common_prefix",
    "path_to_uri",
    "uri_to_path",
    "utf16_len",
    # diagnostics
    "DiagnosticsCache",
    "DiagnosticsSnapshot",
    "DocumentProgress",
    "Availability",
    "Elaboration",
    "LogBuffer",
    "LogEntry",
    # Lean models
    "Position",
    "Range",
    "Location",
    "JsonValue",
    "Model",
    "ModelError",
    "LeanDiagnostic",
    "DiagnosticRelatedInformation",
    "DiagnosticSeverity",
    "LeanTag",
    "LeanFileProgressKind",
    "LeanFileProgressParams",
    "LeanFileProgressProcessingInfo",
    "VersionedTextDocumentIdentifier",
    "PlainGoal",
    "PlainTermGoal",
    "LeanModule",
    "LeanImport",
    "LeanImportKind",
    "SemanticToken",
    "RpcRef",
    "SubexprInfo",
    "InteractiveMessage",
    "CodeWithInfos",
    "InteractiveGoals",
    "InteractiveGoal",
    "InteractiveHypothesisBundle",
    "InteractiveTermGoal",
    "InteractiveDiagnostic",
    "MsgEmbed",
    "WidgetEmbed",
    "PanelWidgetInstance",
    "WidgetSource",
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
    "InvalidResult",
    "DocumentError",
    "DocumentNotOpen",
    "InvalidPosition",
]
