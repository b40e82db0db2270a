"""Save checkpoints: build exactly one module with Lake after a clean barrier on the current disk text.

The stock Lean server cannot serialize a worker's environment, so Beam runs `lake build <Module>` (which keeps
Lake's own trace semantics: a later `lake build` replays the module and rebuilds importers). Before building,
upstream modules the target imports must be up to date (`lake build --no-build`), or the save is refused with
`saveTraceStale`. The source on disk must still be the synced text before and after the build.

Owns the `save` and `close_save` handlers and running Lake; Lake's output is redacted and its lines stream as
setup events. It never writes sources.

Lake runs in a process group of its own, and that whole group (Lake and the compilers it started) is killed when
the save is cancelled or fails while Lake runs. Module names reach Lake's command line only after
`beam_lsp.project.is_module_name` accepted them: Lake has no end-of-options marker for `lake build` (its `--`
hands every later word to the subcommand as extra arguments and builds the default targets instead), so a file
named `--help.lean` is refused (`saveTargetNotModule`) and an import that is not a module name is not checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beam_broker import _lake as lake
from beam_broker import _verdict as verdict
from beam_broker import models as m
from beam_broker._call import Call, Synced
from beam_broker._documents import read_source, text_hash
from beam_broker.config import lake_command
from beam_broker.errors import (
    CONTENT_MODIFIED,
    INTERNAL_ERROR,
    SAVE_TARGET_NOT_MODULE,
    SAVE_TRACE_STALE,
    BrokerError,
    invalid_params,
)
from beam_broker.events import SetupEvent
from beam_lsp.project import is_module_name

if TYPE_CHECKING:
    from beam_broker._documents import DocState
    from beam_broker.runtime import WorkspaceRuntime


async def save(call: Call, inp: m.SaveInput) -> m.SaveReply:
    """Sync the current disk text, then checkpoint its module with Lake."""
    saved, synced = await _save(call, inp)
    return m.SaveReply(workspace=call.workspace, **dict(saved), document_progress=synced.progress.snapshot())


async def close_save(call: Call, inp: m.SaveInput) -> m.CloseSaveResult:
    """`save`, then close the document."""
    saved, synced = await _save(call, inp)
    await call.close(inp.path)
    return m.CloseSaveResult(
        workspace=call.workspace, closed=True, saved=saved, document_progress=synced.progress.snapshot()
    )


async def _save(call: Call, inp: m.SaveInput) -> tuple[m.SaveResult, Synced]:
    return await save_module(call, inp.path, inp.diagnostic_scope)


async def save_module(call: Call, rel: str, scope: str, *, include_items: bool = False) -> tuple[m.SaveResult, Synced]:
    """Sync the file at `rel` and checkpoint its module (see `checkpoint`); one Lake build at a time.

    Raises:
        BrokerError: What the sync and `checkpoint` raise; with `include_items`, the `invalidParams` of a
            document with errors carries the diagnostics as `data.sync.diagnostics.items`.
    """
    rt = call.runtime
    async with rt.save_lock:
        synced = await call.update_and_sync(rel, scope, include_items=include_items)
        saved = await checkpoint(rt, synced.doc, synced.sync, call)
    rt.documents.record_save(synced.doc)
    return saved, synced


async def _run(rt: WorkspaceRuntime, args: list[str], call: Call | None, path: str) -> tuple[int, list[str]]:
    """Run Lake for the workspace; its stdout lines stream as the call's setup events."""
    on_line = None if call is None else (lambda line: call.emit(SetupEvent(line, path)))
    return await lake.run(args, cwd=rt.root, env=rt.env, redactor=rt.redactor, on_line=on_line)


async def checkpoint(rt: WorkspaceRuntime, doc: DocState, sync: m.SyncResult, call: Call) -> m.SaveResult:
    """Build the document's module after a complete, save-ready barrier.

    Raises:
        BrokerError: `saveTargetNotModule`, `invalidParams` (document errors, with `data.sync`),
            `saveTraceStale`, `contentModified` (the file changed), `internalError` (the build failed).
    """
    path = rt.display(doc.path)
    if doc.module is None:
        raise BrokerError(
            SAVE_TARGET_NOT_MODULE,
            f"could not resolve a Lake module for {path}. lean-beam save only works for synced files that belong "
            "to the current Lake workspace package graph.",
        )
    if not is_module_name(doc.module):
        raise BrokerError(
            SAVE_TARGET_NOT_MODULE,
            f"{path} does not name a Lean module: {doc.module!r} is not a dot-separated sequence of Lean "
            "identifiers, so Lake cannot build it (and would read a name starting with '-' as an option). "
            "Rename the file to a valid module name to save it.",
            {"module": doc.module},
        )
    if not sync.readiness.save_ready:
        source = (await call.client()).document(doc.uri)
        raise invalid_params(verdict.save_blocked_message(sync.readiness, source), {"sync": sync.dump()})
    lake_cmd = lake_command(rt.config, rt.env, rt.root)
    layout = rt.layout()
    deps = [name for name in doc.imports if layout.module_file(name) is not None]
    if deps:
        code, out = await _run(rt, [lake_cmd, "build", "--no-build", *deps], None, path)
        if code != 0:
            raise BrokerError(
                SAVE_TRACE_STALE,
                f"Lake save trace is stale for {path}. A dependency or build input would need to rebuild before Beam "
                "can save this module safely. Save stale direct dependencies with lean-beam save, or run lake build "
                "and retry.",
                {"dependencies": deps, "lakeOutput": out},
            )

    async def on_disk() -> str:
        return text_hash(await read_source(doc.path, limit=rt.config.max_source_bytes))

    if await on_disk() != doc.text_hash:
        raise BrokerError(
            CONTENT_MODIFIED,
            f"{path} changed on disk after it was synced; sync it again before saving",
            {"reason": "sourceChanged"},
        )
    before = await rt.freshness.before_build(doc.module)
    code, out = await _run(rt, [lake_cmd, "build", doc.module], call, path)
    if code != 0:
        text = "\n".join(out)
        if "unknown target" in text or "unknown module" in text or "unknown package" in text:
            raise BrokerError(
                SAVE_TARGET_NOT_MODULE,
                f"could not resolve a Lake module for {path}: Lake does not know module {doc.module}.",
                {"lakeOutput": out},
            )
        raise BrokerError(INTERNAL_ERROR, f"lake build {doc.module} failed (exit {code})", {"lakeOutput": out})
    if await on_disk() != doc.text_hash:
        raise BrokerError(
            CONTENT_MODIFIED,
            f"{path} changed on disk during the save; the artifacts may not match it",
            {"reason": "sourceChanged"},
        )
    await rt.freshness.built(before)
    await rt.tell_rebuilt()
    arts = rt.layout().artifact_paths(doc.module)
    missing = [k for k in ("olean", "ilean", "c", "trace") if k not in arts]
    if missing:
        raise BrokerError(
            INTERNAL_ERROR, f"lake build {doc.module} did not produce: {', '.join(missing)}", {"lakeOutput": out}
        )
    return m.SaveResult(
        path=path,
        module=doc.module,
        version=doc.version,
        snapshot=doc.snapshot,
        source_hash=doc.text_hash,
        sync=sync,
        olean=arts["olean"],
        ilean=arts["ilean"],
        c=arts["c"],
        trace=arts["trace"],
        olean_server=arts.get("olean_server"),
        olean_private=arts.get("olean_private"),
        ir=arts.get("ir"),
        bc=arts.get("bc"),
    )
