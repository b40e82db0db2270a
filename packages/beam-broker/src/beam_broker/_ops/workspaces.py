"""Broker-scoped operations: they act on the broker's table of workspace runtimes, not inside one runtime.

Today that is `drop_workspace`. Its handler receives the table (the `Runtimes` protocol `Broker` implements), so
neither this module nor the registry imports the broker or the Lean stack.
"""

from __future__ import annotations

from typing import Protocol

from beam_broker import models as m
from beam_broker.workspace import WorkspaceDescriptor


class Runtimes(Protocol):
    """What a broker-scoped operation may do with the broker's runtimes."""

    async def drop(self, descriptor: WorkspaceDescriptor) -> bool:
        """Evict the runtime of a canonical root (its Lean server stops); False when none was cached."""
        ...


async def drop_workspace(runtimes: Runtimes, inp: m.WorkspaceInput) -> m.DropResult:
    """`lean_drop_workspace`: evict the runtime; idempotent (`dropped: false, reason: notFound`)."""
    if await runtimes.drop(inp.workspace):
        return m.DropResult(workspace=inp.workspace, dropped=True, invalidated_handles=True)
    return m.DropResult(workspace=inp.workspace, dropped=False, invalidated_handles=False, reason="notFound")
