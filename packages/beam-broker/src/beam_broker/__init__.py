"""beam-broker: workspace runtimes for Lean 4 behind one operation registry.

The public API is what `__all__` lists; everything else is private. Each name loads its module on first use
(`beam_lsp.lazy.lazy_exports`): the registry (and pydantic) on first use of `OPERATIONS`, the broker and the Lean
client stack on first use of `Broker`. So the MCP server answers `tools/list` before any Lean work, and
`lean-beam` answers through its daemon without loading either (`_cli.args`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beam_lsp.lazy import lazy_exports

from .__about__ import __version__

if TYPE_CHECKING:
    from ._outbound import redact_log_text as redact_log_text
    from .broker import Broker as Broker
    from .config import BrokerConfig as BrokerConfig
    from .errors import RUNTIME_SETUP as RUNTIME_SETUP
    from .errors import SERVER_STARTING as SERVER_STARTING
    from .errors import BrokerError as BrokerError
    from .events import BrokerEvent as BrokerEvent
    from .events import CallContext as CallContext
    from .events import DiagnosticEvent as DiagnosticEvent
    from .events import FileProgressEvent as FileProgressEvent
    from .events import PreparationEvent as PreparationEvent
    from .events import Progress as Progress
    from .events import SetupEvent as SetupEvent
    from .operations import BY_NAME as BY_NAME
    from .operations import BY_TOOL as BY_TOOL
    from .operations import OPERATIONS as OPERATIONS
    from .operations import OperationSpec as OperationSpec
    from .workspace import WorkspaceDescriptor as WorkspaceDescriptor

_NAMES, __getattr__ = lazy_exports(
    __name__,
    {
        "._outbound": ("redact_log_text",),
        ".broker": ("Broker",),
        ".config": ("BrokerConfig",),
        ".errors": ("BrokerError", "RUNTIME_SETUP", "SERVER_STARTING"),
        ".events": (
            "CallContext",
            "BrokerEvent",
            "PreparationEvent",
            "SetupEvent",
            "FileProgressEvent",
            "DiagnosticEvent",
            "Progress",
        ),
        ".operations": ("OPERATIONS", "BY_NAME", "BY_TOOL", "OperationSpec"),
        ".workspace": ("WorkspaceDescriptor",),
    },
)
__all__ = ["__version__", *_NAMES]
