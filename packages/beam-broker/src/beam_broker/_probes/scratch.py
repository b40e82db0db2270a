"""The `run_code` operation: a standalone Lean text checked in a workspace, in a private document never on disk.

Owns: the scratch document of a workspace (`_beamScratch.lean` under its root, which never exists: its text lives
only in Lean, as probe mirrors of that name, `_mirrors`), the size bound on the text (the workspace's source size
limit), and the answer: every message Lean reports for the text, with its range in the text, in the text's
order. The text brings its own header, so the workspace's modules and dependencies are importable; a mirror that
keeps its header between runs keeps its imports loaded. Mirrors are closed when idle, like every probe mirror,
and never reach the diagnostics listeners. Nothing is written to the project.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, cast

from beam_broker import _probe_text as probe
from beam_broker import _verdict as verdict
from beam_broker._call import Call
from beam_broker._mirrors import SCRATCH
from beam_broker.errors import invalid_params
from beam_lsp import Elaboration, path_to_uri

from . import models as pm
from .run import elaborate

SHOWN: Final = "(scratch)"
"""How progress events name the scratch document."""
INCOMPLETE: Final = "Lean did not finish elaborating the text"
"""The message `run_code` adds (an error at 0:0) when Lean stopped before the text's end."""


async def run_code(call: Call, inp: pm.RunCodeInput) -> pm.RunCodeResult:
    """Elaborate `inp.text` as a file of the workspace, on a scratch mirror, and return what Lean says of it."""
    runtime = call.runtime
    limit = runtime.config.max_source_bytes
    size = len(inp.text.encode("utf-8"))
    if size > limit:
        raise invalid_params(
            f"lean_run_code: the text is {size} bytes, over Beam's source size limit of {limit} bytes "
            "(setting max_source_bytes)",
            {"reason": "sourceTooLarge", "limitBytes": limit},
        )
    client = await call.client()
    text = inp.text if inp.text.endswith("\n") else inp.text + "\n"
    uri = path_to_uri(Path(runtime.root) / SCRATCH)
    async with runtime.pool(uri).checkout(text) as mirror:
        result = await elaborate(call, client, mirror, text, SHOWN)
    # Lean's reports follow its snapshot tree, not always the text's order (a header's last command may come last)
    diags = sorted(verdict.visible(result.diagnostics), key=lambda d: (d.range.start.line, d.range.start.character))
    messages = [
        pm.CodeMessage(
            severity=cast(Any, "error" if verdict.is_completion_blocking(d) else probe.run_severity(d)),
            text=d.message,
            range=(d.fullRange or d.range).wire(),
            code=verdict.lean_name(d),
        )
        for d in diags
    ]
    complete = result.elaboration is Elaboration.COMPLETE
    if not complete:
        start = {"line": 0, "character": 0}
        messages.append(pm.CodeMessage(severity="error", text=INCOMPLETE, range={"start": start, "end": start}))
    success = complete and not any(message.severity == "error" for message in messages)
    return pm.RunCodeResult(workspace=call.workspace, success=success, messages=messages)
