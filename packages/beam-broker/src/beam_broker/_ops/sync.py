"""Document operations: `update`, `sync`, `refresh`, `close` (reading disk into Lean and taking the barrier).

Each handler takes the call's context and its validated input, and returns its output model. Beam never writes
sources: these only read the file on disk.
"""

from __future__ import annotations

from typing import Any

from beam_broker import models as m
from beam_broker._call import Call
from beam_broker.errors import SYNC_BARRIER_INCOMPLETE, BrokerError
from beam_broker.events import SetupEvent
from beam_broker.workspace import resolve_path

from .save import save_module


async def update(call: Call, inp: m.FileInput) -> m.UpdateResult:
    """Read the file into Lean's mirror: its version and whether didOpen/didChange was sent."""
    _, doc, changed = await call.update(inp.path)
    return m.UpdateResult(workspace=call.workspace, version=doc.version, snapshot=doc.snapshot, changed=changed)


async def sync(call: Call, inp: m.SyncInput) -> m.SyncReply:
    """`update`, then the interpreted diagnostics barrier for that version.

    With `rebuild_imports`, stale imports are saved first (imports first) and the document's worker restarted,
    so that the answer is about them as they are now.
    """
    rebuilt = None
    try:
        synced = await call.update_and_sync(inp.path, inp.diagnostic_scope, include_items=inp.diagnostics_in_result)
    except BrokerError as exc:
        stale = exc.data if exc.code == SYNC_BARRIER_INCOMPLETE else None
        if not (inp.rebuild_imports and stale and stale.get("staleDirectDeps")):
            raise
        rebuilt = await _rebuild(call, stale)
        await call.close(inp.path)  # its worker loaded the old imports: start it again
        synced = await call.update_and_sync(inp.path, inp.diagnostic_scope, include_items=inp.diagnostics_in_result)
    return m.SyncReply(
        workspace=call.workspace,
        **dict(synced.sync),
        document_progress=synced.progress.snapshot(),
        rebuilt_imports=rebuilt,
    )


async def _rebuild(call: Call, stale: dict[str, Any]) -> list[str]:
    """Save the stale imports of a `syncBarrierIncomplete` in order (the save path, progress per module).

    Raises:
        BrokerError: `syncBarrierIncomplete` for the document when an import cannot be saved; for an import with
            errors, `data.rebuild.sync` holds its verdict with its diagnostics.
    """
    rt = call.runtime
    target = str(stale.get("targetPath", ""))
    deps = [str(p) for p in stale.get("saveDeps", [])]
    for i, dep in enumerate(deps, 1):
        call.emit(SetupEvent(f"saving stale import {dep} ({i}/{len(deps)}) for {target}", dep))
        held = rt.documents.docs.get(str(resolve_path(rt.root, dep)))
        if held is not None and rt.freshness.outdated(held.loaded, held.imports):
            await call.close(dep)  # its worker loaded imports saved since: the save opens it again
        try:
            await save_module(call, dep, "errors", include_items=True)
        except BrokerError as failed:
            sync = (failed.data or {}).get("sync")
            because = f"it has errors: {failed.message}" if sync is not None else failed.message
            raise BrokerError(
                SYNC_BARRIER_INCOMPLETE,
                f"imports of {target} are stale and {dep} could not be saved, so {target} was not checked; {because}",
                {**stale, "rebuild": {"path": dep, "code": failed.code, "message": failed.message, "sync": sync}},
            ) from None
    return deps


async def refresh(call: Call, inp: m.SyncInput) -> m.SyncReply:
    """Close the document, then sync it from version 1 (after upstream modules changed)."""
    await call.client()  # one server for the whole refresh: if it dies after the close, the refresh fails
    await call.close(inp.path)
    return await sync(call, inp)


async def close(call: Call, inp: m.FileInput) -> m.CloseResult:
    """Close the document in Lean (also when it is not open)."""
    await call.close(inp.path)
    return m.CloseResult(workspace=call.workspace, closed=True)
