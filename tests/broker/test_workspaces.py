"""Broker-scoped operations: `drop_workspace` on the broker's table of runtimes."""

from __future__ import annotations

import pytest

from beam_broker import models as m
from beam_broker._ops.workspaces import drop_workspace
from beam_broker.workspace import WorkspaceDescriptor

pytestmark = pytest.mark.anyio
WS = WorkspaceDescriptor(root="/r")


class Table:
    """A table of runtimes holding the roots in `cached`."""

    def __init__(self, *cached: str) -> None:
        self.cached = set(cached)

    async def drop(self, descriptor: WorkspaceDescriptor) -> bool:
        if descriptor.root in self.cached:
            self.cached.remove(descriptor.root)
            return True
        return False


async def test_dropping_a_cached_runtime_invalidates_its_handles_and_a_second_drop_finds_nothing() -> None:
    table = Table("/r")
    first = await drop_workspace(table, m.WorkspaceInput(workspace=WS))
    second = await drop_workspace(table, m.WorkspaceInput(workspace=WS))
    assert first.dump() == {"workspace": {"root": "/r"}, "dropped": True, "invalidated_handles": True}
    assert second.dump() == {
        "workspace": {"root": "/r"},
        "dropped": False,
        "invalidated_handles": False,
        "reason": "notFound",
    }
