"""Speculative execution on the stock Lean server: `run_at`, `run_at_handle`, `run_with`, `run_with_linear`, `release`.

A probe runs on a mirror of the source document checked out of its pool (`_mirrors`), with the text `_probe_text`
builds; its messages are the diagnostics inside the probe's span, its proof state the goals after it. Handles
(`_handles`) are chains replayed on a mirror. The source document is never touched. The other operations that run
text on mirrors build on the same steps: `proof_mode`, `run_probe`, `run_batch` and `mint` (`attempts`), `elaborate`
(`axioms`, `profile`, `scratch`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

from beam_broker import _handles as handles
from beam_broker import _mirrors as mirrors
from beam_broker import _probe_text as probe
from beam_broker import _verdict as verdict
from beam_broker import models as m
from beam_broker._call import Call, Watch, reelaborating, stale_imports
from beam_broker._documents import header_imports, header_text
from beam_broker._ops.goals import goals_at, kept
from beam_broker.errors import CONTENT_MODIFIED, BrokerError, invalid_params
from beam_lsp import Elaboration, Position
from beam_lsp.errors import unwrap_group

from . import models as pm

if TYPE_CHECKING:
    from beam_broker._documents import DocState
    from beam_broker._mirrors import Mirror
    from beam_lsp import LeanClient, LeanDiagnostic, SyncResult


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one probe chain did: the `RunResult` fields but the handle."""

    success: bool
    messages: list[pm.RunMessage]
    traces: list[str]
    proof_state: m.ProofState | None


async def run_at(call: Call, inp: pm.RunAtInput) -> pm.RunResult:
    """Run Lean text at a position of a document version; no handle is kept."""
    return await _run_at(call, inp, keep_handle=False)


async def run_at_handle(call: Call, inp: pm.RunAtInput) -> pm.RunResult:
    """Like `run_at`, and a successful run returns `next_handle`."""
    return await _run_at(call, inp, keep_handle=True)


async def run_with(call: Call, inp: pm.RunWithInput) -> pm.RunResult:
    """Continue from a handle without consuming it."""
    return await _run_with(call, inp, linear=False)


async def run_with_linear(call: Call, inp: pm.RunWithInput) -> pm.RunResult:
    """Continue from a handle and consume it (on success or failure)."""
    return await _run_with(call, inp, linear=True)


async def release(call: Call, inp: pm.ReleaseInput) -> m.NullResult:
    """Release a proof handle (a second release is `invalidParams`)."""
    _, _, record = await _resolve_handle(call, inp.handle, inp.path)
    call.runtime.handles.take(record.raw)
    return m.NullResult(workspace=call.workspace, result=None)


async def _run_at(call: Call, inp: pm.RunAtInput, *, keep_handle: bool) -> pm.RunResult:
    client, doc = await call.checked(inp)
    text_doc = client.document(doc.uri)
    pos = Position(line=inp.line, character=inp.character)
    text_doc.validate(pos)
    async with call.runtime.pool(doc.uri).checkout(probe.declaration_text(text_doc, pos)) as mirror:
        proof = await proof_mode(call, client, doc, pos, mirror)
        basis = probe.proof_basis(text_doc, pos) if proof else probe.command_basis(text_doc, pos)
        outcome = await run_probe(call, client, doc, mirror, text_doc.text, basis, [inp.text])
    handle = mint(call, doc, basis, (inp.text,)) if keep_handle and outcome.success else None
    return _result(call, outcome, handle)


async def proof_mode(call: Call, client: LeanClient, doc: DocState, pos: Position, mirror: Mirror) -> bool:
    """Whether Lean has tactic goals at the position (proof mode), asked once per document version.

    A command with no `by` in it has none (`probe.without_tactics`), so Lean is not asked. Otherwise, while Lean
    elaborates the document again after a change, the question goes to the probe's mirror holding the source
    up to the end of the declaration (`Call.position`), never to the busy main worker.
    """
    key = (pos.line, pos.character)
    proof = doc.goal_modes.get(key)
    if proof is None and probe.without_tactics(client.document(doc.uri), pos):
        proof = False
    if proof is None:
        version = doc.version
        async with call.position(client, doc, pos, mirror) as uri:
            proof = await client.plain_goal(uri, pos) is not None
        if doc.version == version:  # not an answer about a version that came meanwhile
            doc.goal_modes[key] = proof
    return proof


async def _run_with(call: Call, inp: pm.RunWithInput, *, linear: bool) -> pm.RunResult:
    client, doc, record = await _resolve_handle(call, inp.handle, inp.path)
    if linear:
        call.runtime.handles.take(record.raw)
    texts = (*record.texts, inp.text)
    source = client.document(doc.uri).text
    async with call.runtime.pool(doc.uri).checkout(source[: record.basis.prefix_end]) as mirror:
        outcome = await run_probe(call, client, doc, mirror, source, record.basis, list(texts))
    handle = mint(call, doc, record.basis, texts) if outcome.success else None
    return _result(call, outcome, handle)


def _result(call: Call, outcome: Outcome, handle: dict[str, Any] | None) -> pm.RunResult:
    return pm.RunResult(
        workspace=call.workspace,
        success=outcome.success,
        messages=outcome.messages,
        traces=outcome.traces,
        proof_state=outcome.proof_state,
        next_handle=handle,
    )


def mint(call: Call, doc: DocState, basis: probe.Basis, texts: tuple[str, ...]) -> dict[str, Any]:
    """A fresh opaque handle for a successful probe chain at `basis` of the document's version."""
    rt = call.runtime
    token = rt.session_token() or ""
    raw = rt.handles.mint(token, doc.uri, doc.version, basis, texts)
    return handles.wrap(rt.key, rt.epoch or 0, token, raw)


async def _resolve_handle(
    call: Call, handle: dict[str, Any], path: str
) -> tuple[LeanClient, DocState, handles.HandleRecord]:
    """Resolve a client handle against the runtime (workspace, session, document and version)."""
    rt = call.runtime
    workspace, epoch, session, raw = handles.unwrap(handle)
    if workspace != rt.key:
        raise invalid_params(f"request workspace '{rt.key}' does not match handle workspace '{workspace}'")
    # Re-read the document first: an edit on disk invalidates the handles of the old version.
    client, doc, _ = await call.update(path)
    if epoch != rt.epoch or session != rt.session_token():
        raise BrokerError(
            CONTENT_MODIFIED,
            "handle belongs to a stale backend session (the Lean server was "
            "restarted, the workspace dropped, or the handle came from another process)",
            {"reason": "staleSession"},
        )
    record = rt.handles.get(raw, doc.uri)
    if record.version != doc.version:
        rt.handles.invalidate_document(doc.uri, keep_version=doc.version)
        raise BrokerError(CONTENT_MODIFIED, "handle is stale: its document changed", {"reason": "staleHandle"})
    return client, doc, record


async def fresh_basis(call: Call, client: LeanClient, mirror: Mirror, text: str, path: str) -> None:
    """Make sure a probe's answer will be about the imports as they are built from their sources now.

    A mirror whose worker loaded artifacts that were rebuilt since is restarted (it is Beam's own document); an
    import whose artifacts are not made from its current source (or Beam's text of it) fails the probe, since Lean
    would answer from the old build.

    Raises:
        BrokerError: `syncBarrierIncomplete` naming the stale imports and the recovery plan.
    """
    fresh = call.runtime.freshness
    header = header_text(text)
    imports = header_imports(header)
    same_header = mirror.opened and mirror.header == header
    if same_header and fresh.outdated(mirror.loaded, imports):
        await mirrors.restart(client, mirror)
        same_header = False
    loaded = mirror.loaded if same_header else await fresh.loading(imports)
    stale = await fresh.stale(imports, loaded, call.runtime.documents.held())
    await call.runtime.tell_rebuilt()
    if stale:
        raise stale_imports(path, stale)


async def elaborate(call: Call, client: LeanClient, mirror: Mirror, text: str, path: str) -> SyncResult:
    """Put `text` in a checked-out mirror and wait until Lean has elaborated it; its progress goes out as events.

    A change that keeps the mirror's header takes the reported barrier (no `waitForDiagnostics`, which Lean
    answers only after walking every declaration before the probe); a completion-blocking diagnostic (stale
    imports) falls back to the full barrier. `path` is what the events name.
    """
    await fresh_basis(call, client, mirror, text, path)
    watch = Watch(mirror.uri, path)
    with unwrap_group():
        async with call.watch(client, watch, None):
            watch.version, header_kept = await mirrors.write(client, mirror, text, freshness=call.runtime.freshness)
            result = await client.sync(mirror.uri, reported=header_kept)
            if header_kept and any(verdict.is_completion_blocking(d) for d in result.diagnostics):
                result = await client.sync(mirror.uri)
    return result


async def run_probe(
    call: Call,
    client: LeanClient,
    doc: DocState,
    mirror: Mirror,
    source: str,
    basis: probe.Basis,
    texts: list[str],
) -> Outcome:
    """Run the probe chain on a checked-out mirror of the document (`elaborate`) and read its outcome."""
    built = probe.build(source, basis, texts)
    result = await elaborate(call, client, mirror, built.text, call.runtime.display(doc.path))
    diags = verdict.visible(result.diagnostics)
    mine = [d for d in diags if probe.in_span(d, built.span_start)]
    messages, traces = _messages(mine)
    ok = result.elaboration is Elaboration.COMPLETE and not any(d.is_error for d in mine)
    if result.elaboration is not Elaboration.COMPLETE:
        messages.append(pm.RunMessage(severity="error", text="Lean did not finish elaborating the probe"))
    state = None
    if basis.mode == "proof":
        # The enclosing declaration's "unsolved goals" error is not a probe error: goals remain.
        unsolved = [d for d in diags if verdict.is_unsolved_goals(d) and d not in mine]
        state = (
            await _after(client, mirror, built.span_end, unsolved)
            if ok
            else await _before(call, client, doc, mirror, basis)
        )
    return Outcome(ok, messages, traces, state)


async def _after(client: LeanClient, mirror: Mirror, end: Position, unsolved: list[LeanDiagnostic]) -> m.ProofState:
    """The goals after a successful proof-mode probe ending at `end` (none when nothing is left unsolved)."""
    state = None
    if unsolved:
        state = await goals_at(client, mirror.uri, end)
        state = state or verdict.goals_from_unsolved(unsolved[-1])
    return state or m.ProofState(goals=[])


async def _before(
    call: Call, client: LeanClient, doc: DocState, mirror: Mirror, basis: probe.Basis
) -> m.ProofState | None:
    """The goals at the basis, for a failed proof-mode probe.

    The mirror holds the source's text up to there (the document is busy when Lean elaborates it again); the
    document itself answers once per version (`kept`).
    """
    position = basis.goal_position
    if position is None:
        return None
    if reelaborating(client, doc):
        return await goals_at(client, mirror.uri, position)
    return await kept(client, doc, position)


async def run_batch(
    call: Call,
    client: LeanClient,
    doc: DocState,
    mirror: Mirror,
    source: str,
    basis: probe.Basis,
    texts: list[str],
    declaration_start: int,
) -> list[Outcome] | None:
    """Run alternatives that can share a version (`probe.shareable`) as one mirror version (`probe.shared`).

    Each alternative's outcome is what `run_probe` would give it alone: the messages inside its span (a renamed
    copy's names mapped back), and in proof mode the goals after it (or at the basis when it failed). None when
    the answer cannot be split that way: a parse error (after which Lean resumes at the next command and a
    message may land in the next alternative's span), a message about a name that copies declare under fresh
    names (already declared, say: the copies would not hear it), a fresh name Lean already has (an imported
    module declares it), or Lean did not finish. The caller then runs
    them one by one.
    """
    built = probe.shared(source, basis, texts, declaration_start)
    result = await elaborate(call, client, mirror, built.text, call.runtime.display(doc.path))
    diags = verdict.visible(result.diagnostics)
    first = built.alternatives[0]
    if result.elaboration is not Elaboration.COMPLETE or probe.batch_parse_error(diags, first.start):
        return None
    for index, name in built.kept:
        alternative = built.alternatives[index]
        if any(
            probe.in_message(d.message, name) for d in diags if probe.in_span(d, alternative.copy, alternative.stop)
        ):
            return None
    for alternative in built.alternatives:
        # A fresh name is checked against the texts only: an imported module may declare it too (Lean then skips
        # the copy, and its answer would be about nothing).
        if alternative.rename is not None and any(
            probe.declared_again(d.message, alternative.rename.fresh)
            for d in diags
            if probe.in_span(d, alternative.copy, alternative.stop)
        ):
            return None
    before: list[m.ProofState | None] = []  # the goals at the basis, asked once for every failed alternative
    outcomes: list[Outcome] = []
    for alternative in built.alternatives:
        mine = [d for d in diags if probe.in_span(d, alternative.start, alternative.stop)]
        messages, traces = _messages(mine, alternative.rename)
        ok = not any(d.is_error for d in mine)
        state = None
        if basis.mode == "proof" and ok:
            # What `run_probe` reads as the enclosing declaration's: this copy's, and the source's before it.
            unsolved = [
                d
                for d in diags
                if verdict.is_unsolved_goals(d)
                and d not in mine
                and (not probe.in_span(d, first.copy) or probe.in_span(d, alternative.copy, alternative.stop))
            ]
            state = await _after(client, mirror, alternative.end, unsolved)
        elif basis.mode == "proof":
            if not before:
                before.append(await _before(call, client, doc, mirror, basis))
            state = before[0]
        outcomes.append(Outcome(ok, messages, traces, state))
    return outcomes


def _messages(mine: list[LeanDiagnostic], rename: probe.Rename | None = None) -> tuple[list[pm.RunMessage], list[str]]:
    """A probe's messages (traces apart) and its traces, in Lean's order; a renamed copy's name mapped back."""

    def text(d: LeanDiagnostic) -> str:
        return d.message if rename is None else rename.back(d.message)

    messages = [
        pm.RunMessage(severity=cast(Any, probe.run_severity(d)), text=text(d), code=verdict.lean_name(d))
        for d in mine
        if not probe.is_trace(d)
    ]
    return messages, [text(d) for d in mine if probe.is_trace(d)]
