"""Proof-state operations: `goals` before/after a tactic, `todo` items in a range, and `code_action_resolve`.

Goals come from `Lean.Widget.getInteractiveGoals` (structured) with `$/lean/plainGoal` as the fallback, asked of
the document, or of a probe mirror while Lean elaborates the document again (`Call.position`); todo combines the
lexical `sorry` scan, Lean's diagnostics and code actions (`_verdict` holds the pure rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beam_broker import _verdict as verdict
from beam_broker import models as m
from beam_broker._call import Call, next_step, stale_imports
from beam_broker._ops.navigation import code_action, lsp_json
from beam_broker.errors import SYNC_BARRIER_INCOMPLETE, BrokerError, invalid_params
from beam_lsp import (
    ContentModified,
    Elaboration,
    Position,
    Range,
    RequestCancelled,
    ResponseError,
    WorkerCrashed,
)

if TYPE_CHECKING:
    from beam_broker._documents import DocState
    from beam_lsp import JsonValue, LeanClient, LeanDiagnostic


def document_range(start: tuple[int, int], end: tuple[int, int]) -> Range:
    """A `Range` from (line, character) pairs."""
    return Range(start=Position(line=start[0], character=start[1]), end=Position(line=end[0], character=end[1]))


async def goals_at(client: LeanClient, uri: str, pos: Position) -> m.ProofState | None:
    """The goals at a position: structured when Lean's RPC answers, else parsed from the plain goal text."""
    try:
        structured = await client.interactive_goals(uri, pos)
    except (ContentModified, RequestCancelled, WorkerCrashed):
        raise  # an answer about the document or its worker, not about RPC: the broker's boundary maps it
    except ResponseError:
        structured = None  # no RPC session (e.g. a file worker without widgets): fall back to plain goals
    state = verdict.goals_from_interactive(structured)
    if state is not None:
        return state
    plain = await client.plain_goal(uri, pos)
    return None if plain is None else verdict.goals_from_plain(plain)


GOALS_KEPT = 256
"""Positions whose goals a document keeps for its version (`kept`); beyond it the oldest is forgotten."""


async def kept(client: LeanClient, doc: DocState, pos: Position) -> m.ProofState | None:
    """The goals at a position of the document's version, asked of the document itself once per version.

    Lean's goals at a position of a version do not change, and agents ask again and again at one place (the goals
    before and after a line, the state a failed snippet reports). The answers are kept in `DocState.goals`, which a
    change or a reopen empties; an answer about a version a concurrent change replaced is not kept.
    """
    key = (pos.line, pos.character)
    if key in doc.goals:
        state: m.ProofState | None = doc.goals[key]
        return state
    version = doc.version
    state = await goals_at(client, doc.uri, pos)
    if doc.version == version:
        if len(doc.goals) >= GOALS_KEPT:
            del doc.goals[next(iter(doc.goals))]
        doc.goals[key] = state
    return state


async def goals(call: Call, inp: m.GoalsInput) -> m.GoalsResult:
    """Structured goals before or after the tactic at a position, or (`exact`) at the position itself."""
    client, doc = await call.checked(inp)
    pos = Position(line=inp.line, character=inp.character)
    text_doc = client.document(doc.uri)
    text_doc.validate(pos)
    if inp.exact:  # what Lean shows at the position itself (lean-lsp-mcp's `lean_goal` at a column)
        at = pos
    else:
        start, end = verdict.tactic_span(text_doc, pos)
        at = start if inp.mode == "before" else end
    async with call.position(client, doc, at) as uri:
        state = await (kept(client, doc, at) if uri == doc.uri else goals_at(client, uri, at))
    if state is None:
        raise await no_goals(call, doc, inp)
    return m.GoalsResult(workspace=call.workspace, goals=state.goals)


async def no_goals(call: Call, doc: DocState, inp: m.GoalsInput) -> BrokerError:
    """`invalidParams` for a position without goals; with stale imports, it names them rather than the position.

    Lean knows nothing past an import it could not load (never built, or built from another source): "try a
    position inside a tactic" would send the caller looking in the wrong place. The code stays upstream's.
    """
    runtime = call.runtime
    stale = await runtime.freshness.stale(doc.imports, doc.loaded, runtime.documents.held())
    await runtime.tell_rebuilt()
    if not stale:
        return invalid_params(verdict.NO_GOALS.format(line=inp.line, character=inp.character))
    path = runtime.display(doc.path)
    data = stale_imports(path, stale).data or {}
    names = ", ".join(s.module for s in stale)
    return invalid_params(
        f"position ({inp.line}, {inp.character}): Lean has no proof goals there, and the imports of {path} are out "
        f"of date ({names}), so Lean answers from their old build or none. {next_step(path, data['saveDeps'])}",
        {"reason": "staleImports", **data},
    )


async def todo(call: Call, inp: m.TodoInput) -> m.TodoResult:
    """Actionable items in a range of a document version (after a complete barrier)."""
    client, doc = await call.checked(inp)
    text_doc = client.document(doc.uri)
    query = document_range((inp.start_line, inp.start_character), (inp.end_line, inp.end_character))
    text_doc.validate_range(query)
    result = await client.sync(doc.uri)
    if result.elaboration is not Elaboration.COMPLETE:
        raise BrokerError(
            SYNC_BARRIER_INCOMPLETE, f"Lean did not finish elaborating {doc.uri} at version {doc.version}"
        )
    diags = verdict.visible(result.diagnostics)
    qjson = query.wire()
    kinds = set(inp.kinds or verdict.KIND_ORDER)
    items: list[m.TodoItem] = []
    if "sorry" in kinds:
        for a, b in verdict.sorry_ranges(text_doc.text):
            start, end = text_doc.position_at(a), text_doc.position_at(b)
            rng = Range(start=start, end=end).wire()
            if verdict.matches(rng, qjson):
                items.append(
                    m.TodoItem(kind="sorry", range=rng, run_at_position=start.wire(), message="syntactic sorry")
                )
    for d in diags:
        rng = (d.fullRange or d.range).wire()
        if verdict.matches(rng, qjson):
            items.extend(await _diagnostic_items(client, doc.uri, d, rng, kinds, inp.suggest))
    if "code_action" in kinds:
        overlapping = [d for d in diags if verdict.matches((d.fullRange or d.range).wire(), qjson)]
        actions = [lsp_json(action) for action in await client.code_actions(doc.uri, query, diagnostics=overlapping)]
        items.extend(
            m.TodoItem(
                kind="code_action",
                range=verdict.action_range(action, qjson),
                message=str(action.get("title", "")),
                code_action=action,
            )
            for action in actions
        )
    return m.TodoResult(
        workspace=call.workspace, version=doc.version, snapshot=doc.snapshot, range=qjson, items=verdict.finish(items)
    )


async def _diagnostic_items(
    client: LeanClient, uri: str, d: LeanDiagnostic, rng: dict[str, JsonValue], kinds: set[str], suggest: str
) -> list[m.TodoItem]:
    items: list[m.TodoItem] = []
    if "hole" in kinds and verdict.is_hole(d):
        items.append(
            m.TodoItem(
                kind="hole",
                range=d.range.wire(),
                run_at_position=d.range.start.wire(),
                message="term hole",
            )
        )
    if "incomplete_proof" in kinds and verdict.is_unsolved_goals(d):
        end = (d.fullRange or d.range).end
        items.append(
            m.TodoItem(
                kind="incomplete_proof",
                range=rng,
                run_at_position=end.wire(),
                run_at_text="exact ?_" if suggest == "basic" else None,
                message="incomplete proof",
                proof_state=await goals_at(client, uri, end),
            )
        )
    if "diagnostic" in kinds:
        items.append(
            m.TodoItem(kind="diagnostic", range=rng, message=d.message, severity=d.severity, diagnostic=d.wire())
        )
    return items


async def code_action_resolve(call: Call, inp: m.CodeActionResolveInput) -> m.CodeActionResolveResult:
    """Resolve a code action `todo` returned, for the same document version."""
    data = inp.code_action.get("data")
    if not isinstance(data, dict):
        raise invalid_params("code_action_resolve requires codeAction.data (pass an action returned by lean_todo)")
    client, doc = await call.checked(inp)
    target = ((data.get("params") or {}).get("textDocument") or {}).get("uri")
    if target != doc.uri:
        raise invalid_params(f"codeAction.data targets {target}, not requested document {doc.uri}")
    resolved = await client.resolve_code_action(code_action(inp.code_action))
    return m.CodeActionResolveResult(
        workspace=call.workspace, version=doc.version, snapshot=doc.snapshot, code_action=lsp_json(resolved)
    )
