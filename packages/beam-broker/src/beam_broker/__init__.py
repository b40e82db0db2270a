"""beam-broker: workspace runtimes for Lean 4 behind one operation registry.

The public API is what `__all__` lists; everything else is private.
"""

from __future__ import annotations

from .__about__ import __version__
from .errors import BrokerError
from .events import (
    BrokerEvent,
    CallContext,
    DiagnosticEvent,
    FileProgressEvent,
    PreparationEvent,
    SetupEvent,
)
from .operations import BY_NAME, BY_TOOL, OPERATIONS, OperationSpec, Progress
from .runtime import RUNTIME_SETUP, Broker, BrokerConfig
from .workspace import WorkspaceDescriptor

__all__ = [
    "__version__",
    "Broker",
    "BrokerConfig",
    "BrokerError",
    "RUNTIME_SETUP",
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
