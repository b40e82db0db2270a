"""Navigation operations: hover, signature help, definition, references, document and workspace symbols.

Each answers for the caller's document version (workspace symbols excepted) with Lean's own LSP JSON; the
request is sent right after the ordered change, so it never waits behind a whole-file barrier (a position-scoped answer
comes as soon as Lean elaborated the declaration there).
Positions are validated against Beam's copy of the text before anything is sent. Hover and signature help,
which Lean answers from the declaration at the position alone, go to a probe mirror while Lean elaborates the
document again after a change (`Call.position`); definition, references and symbols always ask the document
(the watchdog's index and whole-file answers would differ for a mirror). lsprotocol is imported lazily, so
the registry stays cheap to import.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from beam_broker import models as m
from beam_broker._call import Call
from beam_broker.errors import invalid_params
from beam_lsp import Model, Position

if TYPE_CHECKING:
    from cattrs import Converter
    from lsprotocol.types import CodeAction

    from beam_broker._documents import DocState
    from beam_lsp import LeanClient


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@functools.cache
def _converter() -> Converter:
    # lsprotocol builds a new converter (and registers hundreds of hooks) on every get_converter() call: one
    # per process, made on first use so the registry does not import lsprotocol. beam-lsp's is made first, by one
    # thread: lsprotocol's first get_converter() resolves its types in place, which two threads cannot do at once.
    from lsprotocol import converters

    from beam_lsp import load_lsp_types

    load_lsp_types()
    return converters.get_converter()


def code_action(raw: dict[str, Any]) -> CodeAction:
    """A code action a caller passed back (as `todo` gave it) as lsprotocol's type, for `resolve_code_action`.

    Raises:
        BrokerError: `invalidParams` when it is not a code action.
    """
    from lsprotocol import types

    try:
        action: CodeAction = _converter().structure(raw, types.CodeAction)
    except Exception as exc:  # cattrs raises several unrelated types
        raise invalid_params("codeAction is not an LSP CodeAction (pass an action returned by lean_todo)") from exc
    return action


def lsp_json(value: Any) -> Any:
    """Plain LSP JSON of lsprotocol values or beam-lsp models."""
    if value is None:
        return None
    if isinstance(value, list):
        return [lsp_json(v) for v in value]
    if isinstance(value, Model):
        return value.wire()
    return _plain(_converter().unstructure(value))


PositionRequest = Callable[["LeanClient", str, Position], Awaitable[Any]]
"""One of `LeanClient`'s position requests (hover, signature help), on a document or mirror URI."""


async def _at(call: Call, inp: m.PositionInput) -> tuple[LeanClient, DocState, Position]:
    client, doc = await call.checked(inp)
    pos = Position(line=inp.line, character=inp.character)
    client.document(doc.uri).validate(pos)
    return client, doc, pos


async def _answered(call: Call, inp: m.PositionInput, ask: PositionRequest) -> Any:
    """Lean's answer at a position as LSP JSON, from a mirror while the document re-elaborates (`Call.position`)."""
    client, doc, pos = await _at(call, inp)
    async with call.position(client, doc, pos) as uri:
        return lsp_json(await ask(client, uri, pos))


async def hover(call: Call, inp: m.PositionInput) -> m.HoverResult:
    """Lean's hover at a position: `{contents, range}`, or `{"result": null}`."""
    found = await _answered(call, inp, lambda client, uri, pos: client.hover(uri, pos))
    if found is None:
        return m.HoverResult(m.NullResult(workspace=call.workspace, result=None))
    return m.HoverResult(m.Hover(workspace=call.workspace, **found))


async def signature_help(call: Call, inp: m.PositionInput) -> m.SignatureHelpResult:
    """Lean's signature help at a position, or `{"result": null}`."""
    found = await _answered(call, inp, lambda client, uri, pos: client.signature_help(uri, pos))
    if found is None:
        return m.SignatureHelpResult(m.NullResult(workspace=call.workspace, result=None))
    return m.SignatureHelpResult(m.SignatureHelp(workspace=call.workspace, **found))


async def definition(call: Call, inp: m.PositionInput) -> m.LspList:
    """Definition locations (`Location[]` or `LocationLink[]`)."""
    client, doc, pos = await _at(call, inp)
    return m.LspList(workspace=call.workspace, result=lsp_json(await client.definition(doc.uri, pos)))


async def references(call: Call, inp: m.ReferencesInput) -> m.LspList:
    """References across the project (`Location[]`)."""
    client, doc, pos = await _at(call, inp)
    refs = await client.references(doc.uri, pos, include_declaration=inp.include_declaration)
    return m.LspList(workspace=call.workspace, result=lsp_json(refs))


async def document_symbols(call: Call, inp: m.DocumentInput) -> m.LspList:
    """Declarations and sections of the document version."""
    client, doc = await call.checked(inp)
    return m.LspList(workspace=call.workspace, result=lsp_json(await client.document_symbols(doc.uri)))


async def workspace_symbols(call: Call, inp: m.WorkspaceSymbolsInput) -> m.LspList:
    """Fuzzy declaration search across the workspace (no document version)."""
    client = await call.client()
    return m.LspList(workspace=call.workspace, result=lsp_json(await client.workspace_symbols(inp.query)))
