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

import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from beam_lsp.project import is_module_name

from . import _verdict as verdict
from . import models as m
from ._call import Call, Synced
from ._documents import read_source, text_hash
from .config import lake_command
from .errors import (
    CONTENT_MODIFIED,
    INTERNAL_ERROR,
    SAVE_TARGET_NOT_MODULE,
    SAVE_TRACE_STALE,
    BrokerError,
    invalid_params,
)
from .events import SetupEvent

if TYPE_CHECKING:
    from ._documents import DocState
    from .runtime import WorkspaceRuntime

OUTPUT_TAIL_LINES = 40


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
    rt = call.runtime
    async with rt.save_lock:
        synced = await call.update_and_sync(inp.path, inp.diagnostic_scope, include_items=False)
        saved = await checkpoint(rt, synced.doc, synced.sync, call)
    rt.documents.record_save(synced.doc)
    return saved, synced


async def _run(rt: WorkspaceRuntime, args: list[str], call: Call | None, path: str) -> tuple[int, list[str]]:
    """Run Lake in a new process group; unless it exits by itself, the whole group is killed (a cancel too)."""
    lines: list[str] = []
    redactor = rt.redactor
    proc = await anyio.open_process(args, cwd=rt.root, env=dict(rt.env), stdin=None, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        buf = b""

        async def drain_stderr() -> None:
            assert proc.stderr is not None
            async for chunk in proc.stderr:
                lines.extend(redactor.redact(chunk.decode("utf-8", "replace")).splitlines())

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain_stderr)
            async for chunk in proc.stdout:
                buf += chunk
                *complete, buf = buf.split(b"\n")
                for raw in complete:
                    line = redactor.redact(raw.decode("utf-8", "replace")).rstrip()
                    lines.append(line)
                    if call is not None and line.strip():
                        call.emit(SetupEvent(line.strip(), path))
            if buf:
                lines.append(redactor.redact(buf.decode("utf-8", "replace")))
        code = await proc.wait()
    finally:
        if proc.returncode is None:  # cancelled or failed while Lake runs; not yet reaped, so the group is ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True):
            await proc.aclose()
    return code, lines[-OUTPUT_TAIL_LINES:]


def _local_modules(rt: WorkspaceRuntime, names: tuple[str, ...]) -> list[str]:
    """The imports that are modules of this workspace (never a word Lake could read as an option)."""
    return [n for n in names if is_module_name(n) and Path(rt.root, *n.split(".")).with_suffix(".lean").is_file()]


def artifact_paths(root: str, module: str) -> dict[str, str]:
    """The build artifacts Lake wrote for a module (only paths that exist)."""
    rel = Path(*module.split("."))
    lib = Path(root, ".lake", "build", "lib", "lean")
    ir = Path(root, ".lake", "build", "ir")
    candidates: dict[str, list[Path]] = {
        "olean": [lib / rel.with_suffix(".olean")],
        "ilean": [lib / rel.with_suffix(".ilean")],
        "c": [ir / rel.with_suffix(".c")],
        "trace": [lib / rel.with_suffix(".trace"), lib / rel.with_suffix(".olean.trace")],
        "olean_server": [lib / rel.with_suffix(".olean.server")],
        "olean_private": [lib / rel.with_suffix(".olean.private")],
        "ir": [lib / rel.with_suffix(".ir"), ir / rel.with_suffix(".ir")],
        "bc": [ir / rel.with_suffix(".bc")],
    }
    out = {}
    for key, paths in candidates.items():
        for p in paths:
            if p.is_file():
                out[key] = str(p)
                break
    return out


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
        raise invalid_params(verdict.save_blocked_message(sync.readiness), {"sync": sync.dump()})
    lake = lake_command(rt.config, rt.env)
    deps = _local_modules(rt, doc.imports)
    if deps:
        code, out = await _run(rt, [lake, "build", "--no-build", *deps], None, path)
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
    code, out = await _run(rt, [lake, "build", doc.module], call, path)
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
    arts = artifact_paths(rt.root, doc.module)
    missing = [k for k in ("olean", "ilean", "c", "trace") if k not in arts]
    if missing:
        raise BrokerError(
            INTERNAL_ERROR, f"lake build {doc.module} did not produce: {', '.join(missing)}", {"lakeOutput": out}
        )
    return m.SaveResult(
        path=path,
        module=doc.module,
        version=doc.version,
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
