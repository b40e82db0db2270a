"""Document operations: `update`, `sync`, `refresh`, `close` (reading disk into Lean and taking the barrier).

Each handler takes the call's context and its validated input, and returns its output model. Beam never writes
sources: these only read the file on disk.
"""

from __future__ import annotations

from . import models as m
from ._call import Call


async def update(call: Call, inp: m.FileInput) -> m.UpdateResult:
    """Read the file into Lean's mirror: its version and whether didOpen/didChange was sent."""
    _, doc, changed = await call.update(inp.path)
    return m.UpdateResult(workspace=call.workspace, version=doc.version, changed=changed)


async def sync(call: Call, inp: m.SyncInput) -> m.SyncReply:
    """`update`, then the interpreted diagnostics barrier for that version."""
    synced = await call.update_and_sync(inp.path, inp.diagnostic_scope, include_items=inp.diagnostics_in_result)
    return m.SyncReply(
        workspace=call.workspace,
        **dict(synced.sync),
        document_progress=synced.progress.snapshot(),
    )


async def refresh(call: Call, inp: m.SyncInput) -> m.SyncReply:
    """Close the document, then sync it from version 1 (after upstream modules changed)."""
    await call.client()  # one server for the whole refresh: if it dies after the close, the refresh fails
    await call.close(inp.path)
    return await sync(call, inp)


async def close(call: Call, inp: m.FileInput) -> m.CloseResult:
    """Close the document in Lean (also when it is not open)."""
    await call.close(inp.path)
    return m.CloseResult(workspace=call.workspace, closed=True)
