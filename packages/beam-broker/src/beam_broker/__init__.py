"""beam-broker: workspace runtimes for Lean 4 behind one operation registry.

The public API is what `__all__` lists; everything else is private. The broker (and with it the Lean client
stack) loads on first use of `Broker`, so the registry is cheap to import (the MCP server answers `tools/list`
from it before any Lean work).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .__about__ import __version__
from .config import BrokerConfig
from .errors import RUNTIME_SETUP, SERVER_STARTING, BrokerError
from .events import (
    BrokerEvent,
    CallContext,
    DiagnosticEvent,
    FileProgressEvent,
    PreparationEvent,
    SetupEvent,
)
from .operations import BY_NAME, BY_TOOL, OPERATIONS, OperationSpec, Progress
from .workspace import WorkspaceDescriptor

if TYPE_CHECKING:
    from .broker import Broker


def __getattr__(name: str) -> Any:
    if name != "Broker":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .broker import Broker

    globals()[name] = Broker
    return Broker


__all__ = [
    "__version__",
    "Broker",
    "BrokerConfig",
    "BrokerError",
    "RUNTIME_SETUP",
    "SERVER_STARTING",
    "CallContext",
    "BrokerEvent",
    "PreparationEvent",
    "SetupEvent",
    "FileProgressEvent",
    "DiagnosticEvent",
    "OPERATIONS",
    "BY_NAME",
    "BY_TOOL",
    "OperationSpec",
    "Progress",
    "WorkspaceDescriptor",
]
