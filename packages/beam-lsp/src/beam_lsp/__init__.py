"""beam-lsp: an async client for the Lean 4 language server.

The public API is what `__all__` lists, plus the public modules `jsonrpc` (the JSON-RPC peer), `strict_json`,
`project`, `redaction`, `lines`, `lazy` and `command_line` (what the Beam CLIs share); everything else is private.
Every name loads its module on first use (`lazy.lazy_exports`): `import beam_lsp.strict_json` (the MCP server's
first import) does not pay for the models, and `import beam_lsp` does not pay for lsprotocol (the client's, the
slowest import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .__about__ import __version__
from .lazy import lazy_exports

if TYPE_CHECKING:
    from ._barrier import SyncResult as SyncResult
    from ._convert import load_lsp_types as load_lsp_types
    from ._events import DiagnosticsEvent as DiagnosticsEvent
    from ._events import EventStream as EventStream
    from ._events import LspEvent as LspEvent
    from ._events import ProgressEvent as ProgressEvent
    from ._events import ServerExitedEvent as ServerExitedEvent
    from ._file import LeanFile as LeanFile
    from ._file import Point as Point
    from ._file import Point0 as Point0
    from ._file import Point1 as Point1
    from ._handshake import DEFAULT_SERVER_REQUESTS as DEFAULT_SERVER_REQUESTS
    from ._handshake import ServerRequestHandler as ServerRequestHandler
    from ._logs import LogBuffer as LogBuffer
    from ._logs import LogEntry as LogEntry
    from ._process import StderrBuffer as StderrBuffer
    from ._process import kill_tree as kill_tree
    from ._progress import FileProgress as FileProgress
    from ._sync import SyncEventStream as SyncEventStream
    from ._sync import SyncLeanClient as SyncLeanClient
    from ._sync import SyncLeanFile as SyncLeanFile
    from .client import ClientStats as ClientStats
    from .client import LeanClient as LeanClient
    from .diagnostics import Availability as Availability
    from .diagnostics import DiagnosticsCache as DiagnosticsCache
    from .diagnostics import DiagnosticsSnapshot as DiagnosticsSnapshot
    from .diagnostics import DocumentProgress as DocumentProgress
    from .diagnostics import Elaboration as Elaboration
    from .documents import PositionLike as PositionLike
    from .documents import RangeLike as RangeLike
    from .documents import TextDocument as TextDocument
    from .documents import TextEditLike as TextEditLike
    from .documents import apply_text_edits as apply_text_edits
    from .documents import common_prefix as common_prefix
    from .documents import path_to_uri as path_to_uri
    from .documents import uri_to_path as uri_to_path
    from .errors import BeamLspError as BeamLspError
    from .errors import ContentModified as ContentModified
    from .errors import DocumentError as DocumentError
    from .errors import DocumentNotOpen as DocumentNotOpen
    from .errors import InvalidPosition as InvalidPosition
    from .errors import InvalidResult as InvalidResult
    from .errors import MessageTooLarge as MessageTooLarge
    from .errors import RequestCancelled as RequestCancelled
    from .errors import ResponseError as ResponseError
    from .errors import RpcNeedsReconnect as RpcNeedsReconnect
    from .errors import ServerExited as ServerExited
    from .errors import TransportError as TransportError
    from .errors import WorkerCrashed as WorkerCrashed
    from .lean import CodeWithInfos as CodeWithInfos
    from .lean import DiagnosticRelatedInformation as DiagnosticRelatedInformation
    from .lean import DiagnosticSeverity as DiagnosticSeverity
    from .lean import InteractiveDiagnostic as InteractiveDiagnostic
    from .lean import InteractiveGoal as InteractiveGoal
    from .lean import InteractiveGoals as InteractiveGoals
    from .lean import InteractiveHypothesisBundle as InteractiveHypothesisBundle
    from .lean import InteractiveMessage as InteractiveMessage
    from .lean import InteractiveTermGoal as InteractiveTermGoal
    from .lean import JsonValue as JsonValue
    from .lean import LeanDiagnostic as LeanDiagnostic
    from .lean import LeanFileProgressKind as LeanFileProgressKind
    from .lean import LeanFileProgressParams as LeanFileProgressParams
    from .lean import LeanFileProgressProcessingInfo as LeanFileProgressProcessingInfo
    from .lean import LeanImport as LeanImport
    from .lean import LeanImportKind as LeanImportKind
    from .lean import LeanModule as LeanModule
    from .lean import LeanTag as LeanTag
    from .lean import Location as Location
    from .lean import Model as Model
    from .lean import ModelError as ModelError
    from .lean import MsgEmbed as MsgEmbed
    from .lean import PanelWidgetInstance as PanelWidgetInstance
    from .lean import PlainGoal as PlainGoal
    from .lean import PlainTermGoal as PlainTermGoal
    from .lean import Position as Position
    from .lean import Range as Range
    from .lean import RpcRef as RpcRef
    from .lean import SemanticToken as SemanticToken
    from .lean import SubexprInfo as SubexprInfo
    from .lean import VersionedTextDocumentIdentifier as VersionedTextDocumentIdentifier
    from .lean import WidgetEmbed as WidgetEmbed
    from .lean import WidgetSource as WidgetSource
    from .lean import severity_label as severity_label
    from .lines import utf16_len as utf16_len
    from .redaction import Redactor as Redactor
    from .redaction import is_secret_name as is_secret_name

__getattr__: Callable[[str], Any]  # loads a public name on first use
_NAMES, __getattr__ = lazy_exports(
    __name__,
    {
        ".client": ("LeanClient", "ClientStats"),
        "._barrier": ("SyncResult",),
        "._convert": ("load_lsp_types",),
        "._handshake": ("ServerRequestHandler", "DEFAULT_SERVER_REQUESTS"),
        "._sync": ("SyncLeanClient", "SyncLeanFile", "SyncEventStream"),
        "._file": (
            "LeanFile",
            "Point",
            "Point0",
            "Point1",
        ),
        "._events": (
            "EventStream",
            "LspEvent",
            "DiagnosticsEvent",
            "ProgressEvent",
            "ServerExitedEvent",
        ),
        "._progress": ("FileProgress",),
        ".documents": (
            "TextDocument",
            "PositionLike",
            "RangeLike",
            "TextEditLike",
            "apply_text_edits",
            "common_prefix",
            "path_to_uri",
            "uri_to_path",
        ),
        ".lines": ("utf16_len",),
        ".diagnostics": (
            "DiagnosticsCache",
            "DiagnosticsSnapshot",
            "DocumentProgress",
            "Availability",
            "Elaboration",
        ),
        "._logs": ("LogBuffer", "LogEntry"),
        "._process": ("kill_tree", "StderrBuffer"),
        ".lean": (
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
        ),
        ".redaction": ("Redactor", "is_secret_name"),
        ".errors": (
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
        ),
    },
)
__all__ = ["__version__", *_NAMES]
