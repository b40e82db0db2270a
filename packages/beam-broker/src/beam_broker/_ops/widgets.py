"""Lean's term goal and widget RPC: `term_goal`, `widgets`, `widget_source`, `interactive_diagnostics`.

Owns asking beam-lsp's typed requests for Lean's `$/lean/plainTermGoal` and three of its RPC methods
(`Lean.Widget.getWidgets`, `Lean.Widget.getWidgetSource`, `Lean.Widget.getInteractiveDiagnostics`) about the
caller's document version, and passing Lean's answers on as Lean sent them (`Model.wire`). Position answers (term
goal, widgets) come from a probe mirror while Lean elaborates the document again, as hover's do
(`Call.position`); interactive diagnostics wait for the version's complete barrier first, so they are never a
partial list presented as the whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beam_broker import models as m
from beam_broker._call import Call
from beam_broker._ops import models as om
from beam_broker.errors import SYNC_BARRIER_INCOMPLETE, BrokerError
from beam_lsp import Elaboration, Position

if TYPE_CHECKING:
    from beam_broker._documents import DocState
    from beam_lsp import LeanClient


async def _at(call: Call, pin: m.PinnedInput, line: int, character: int) -> tuple[LeanClient, DocState, Position]:
    client, doc = await call.checked(pin)
    pos = Position(line=line, character=character)
    client.document(doc.uri).validate(pos)
    return client, doc, pos


async def term_goal(call: Call, inp: m.PositionInput) -> om.TermGoalResult:
    """The expected type of the term at a position (`$/lean/plainTermGoal`), or nulls when there is no term."""
    client, doc, pos = await _at(call, inp, inp.line, inp.character)
    async with call.position(client, doc, pos) as uri:
        found = await client.plain_term_goal(uri, pos)
    if found is None:
        return om.TermGoalResult(workspace=call.workspace, version=doc.version, goal=None, range=None)
    return om.TermGoalResult(workspace=call.workspace, version=doc.version, goal=found.goal, range=found.range.wire())


async def widgets(call: Call, inp: m.PositionInput) -> om.WidgetsResult:
    """The panel widgets Lean shows at a position (`Lean.Widget.getWidgets`)."""
    client, doc, pos = await _at(call, inp, inp.line, inp.character)
    async with call.position(client, doc, pos) as uri:
        found = await client.widgets(uri, pos)
    return om.WidgetsResult(workspace=call.workspace, version=doc.version, widgets=[w.wire() for w in found])


async def widget_source(call: Call, inp: om.WidgetSourceInput) -> om.WidgetSourceResult:
    """The JavaScript module of a widget by its hash (`Lean.Widget.getWidgetSource`, asked at the file's start).

    Raises:
        BrokerError: `invalidParams` (Lean's answer) when Lean knows no widget module with that hash.
    """
    client, doc, pos = await _at(call, inp, 0, 0)
    found = await client.widget_source(doc.uri, pos, inp.javascript_hash)
    return om.WidgetSourceResult(workspace=call.workspace, version=doc.version, source=found.wire())


async def interactive_diagnostics(call: Call, inp: om.InteractiveDiagnosticsInput) -> om.InteractiveDiagnosticsResult:
    """Lean's interactive diagnostics of a complete version, optionally of a line range.

    Raises:
        BrokerError: `syncBarrierIncomplete` when Lean did not finish elaborating the version.
    """
    client, doc = await call.checked(inp)
    result = await client.sync(doc.uri)
    if result.elaboration is not Elaboration.COMPLETE:
        raise BrokerError(
            SYNC_BARRIER_INCOMPLETE, f"Lean did not finish elaborating {doc.uri} at version {doc.version}"
        )
    lines = None
    if inp.start_line is not None or inp.end_line is not None:
        lines = (inp.start_line or 0, inp.end_line if inp.end_line is not None else 2**30)
    found = await client.interactive_diagnostics(doc.uri, lines=lines)
    return om.InteractiveDiagnosticsResult(
        workspace=call.workspace, version=doc.version, diagnostics=[d.wire() for d in found]
    )
