"""beam-broker: workspace runtimes for Lean 4 behind one operation registry.

The public API is what `__all__` lists; everything else is private. Each name loads its module on first use: the
registry (and pydantic) on first use of `OPERATIONS`, the broker and the Lean client stack on first use of
`Broker`. So the MCP server answers `tools/list` before any Lean work, and `lean-beam` answers through its daemon
without loading either (`_cli.args`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .__about__ import __version__

if TYPE_CHECKING:
    from .broker import Broker
    from .config import BrokerConfig
    from .errors import RUNTIME_SETUP, SERVER_STARTING, BrokerError
    from .events import BrokerEvent, CallContext, DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent
    from .operations import BY_NAME, BY_TOOL, OPERATIONS, OperationSpec, Progress
    from .workspace import WorkspaceDescriptor

_HOMES: dict[str, str] = {
    "Broker": "broker",
    "BrokerConfig": "config",
    "RUNTIME_SETUP": "errors",
    "SERVER_STARTING": "errors",
    "BrokerError": "errors",
    "BrokerEvent": "events",
    "CallContext": "events",
    "DiagnosticEvent": "events",
    "FileProgressEvent": "events",
    "PreparationEvent": "events",
    "SetupEvent": "events",
    "BY_NAME": "operations",
    "BY_TOOL": "operations",
    "OPERATIONS": "operations",
    "OperationSpec": "operations",
    "Progress": "operations",
    "WorkspaceDescriptor": "workspace",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


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
