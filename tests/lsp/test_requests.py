"""beam_lsp._requests: every standard LSP request Lean answers, typed, against real Lean 4.35 (prelude fixtures).

What Lean answers empty here, and why: nothing in this module. (Lean's own extensions: test_lean_requests.py.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from lsprotocol import types

from beam_lsp import (
    DocumentNotOpen,
    InvalidPosition,
    LeanClient,
    Position,
    Range,
    SemanticToken,
    apply_text_edits,
    path_to_uri,
)
from tests.support.toolchain import Toolchain

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

CALLS = """prelude
import Demo.Basic

def idNat (n : MyNat) : MyNat := n

def useId (n : MyNat) : MyNat := idNat (idNat n)

theorem idProof (p : Prop) (hp : p) : p :=
  hp

def implicitly (x : α) : α := x

/-- doc -/
def withDoc := idNat MyNat.zero
"""
"""A module with calls to follow, a term proof, an auto-bound implicit (an inlay hint) and a docstring."""


def P(line: int, character: int) -> Position:
    return Position(line=line, character=character)


def R(l0: int, c0: int, l1: int, c1: int) -> types.Range:
    return types.Range(start=types.Position(line=l0, character=c0), end=types.Position(line=l1, character=c1))


@pytest.fixture
async def client(lean_toolchain: Toolchain, demo_root: Path) -> AsyncIterator[LeanClient]:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as c:
        yield c


async def opened(client: LeanClient, root: Path, rel: str = "Demo/Calls.lean", text: str = CALLS) -> str:
    path = root / rel
    path.write_text(text, encoding="utf-8")
    uri = path_to_uri(path)
    await client.open(uri, text)
    with anyio.fail_after(60):
        await client.sync(uri)
    return uri


async def test_real_positions_answer_hover_signature_definitions_highlights_and_references(
    client: LeanClient, demo_root: Path
) -> None:
    uri = await opened(client, demo_root)
    basic = path_to_uri(demo_root / "Demo/Basic.lean")
    with anyio.fail_after(60):
        hover = await client.hover(uri, P(5, 35))
        signature = await client.signature_help(uri, P(5, 39))
        definition = await client.definition(uri, P(5, 35))
        declaration = await client.declaration(uri, P(5, 35))
        type_definition = await client.type_definition(uri, P(5, 34))
        highlights = await client.document_highlights(uri, P(3, 5))
        references = await client.references(uri, P(3, 5), include_declaration=False)
        everywhere = await client.references(uri, P(3, 5))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.contents.value.startswith("```lean\nidNat (n : MyNat) : MyNat\n```") and hover.range == R(5, 33, 5, 38)
    assert signature is not None and [s.label for s in signature.signatures] == ["(n : MyNat) → MyNat"]
    for found in (definition, declaration):
        [target] = found
        assert isinstance(target, types.LocationLink) and target.target_uri == uri
        assert target.target_selection_range == R(3, 4, 3, 9)
    [type_target] = type_definition
    assert isinstance(type_target, types.LocationLink) and type_target.target_uri == basic
    assert [h.range for h in highlights] == [R(3, 4, 3, 9), R(5, 33, 5, 38), R(5, 40, 5, 45), R(13, 15, 13, 20)]
    assert {(r.uri, r.range.start.line) for r in references} == {(uri, 5), (uri, 13)}
    assert {(r.uri, r.range.start.line) for r in everywhere} == {(uri, 3), (uri, 5), (uri, 13)}


async def test_real_whole_document_requests_answer_symbols_folding_tokens_and_inlay_hints(
    client: LeanClient, demo_root: Path
) -> None:
    uri = await opened(client, demo_root)
    with anyio.fail_after(60):
        symbols = await client.document_symbols(uri)
        workspace = await client.workspace_symbols("useI")
        folding = await client.folding_ranges(uri)
        full = await client.semantic_tokens(uri)
        line = await client.semantic_tokens_range(uri, Range(start=P(3, 0), end=P(4, 0)))
        hints = await client.inlay_hints(uri, R(0, 0, 14, 0))
        with pytest.raises(InvalidPosition):
            await client.inlay_hints(uri, R(3, 0, 99, 0))
    assert [s.name for s in symbols] == ["idNat", "useId", "idProof", "implicitly", "withDoc"]
    assert all(isinstance(s, types.DocumentSymbol) and s.kind == types.SymbolKind.Method for s in symbols)
    assert [(s.name, s.location.uri) for s in workspace] == [("useId", uri)]
    assert [(f.start_line, f.end_line, f.kind) for f in folding] == [(0, 1, "imports"), (7, 8, "region")]
    tokens = client.decode_semantic_tokens(full)
    assert tokens[0] == SemanticToken(0, 0, 7, "keyword", ())  # prelude
    assert SemanticToken(3, 0, 3, "keyword", ()) in tokens  # def
    assert client.decode_semantic_tokens(line) == [t for t in tokens if t.line == 3]
    assert client.semantic_tokens_legend is not None and "keyword" in client.semantic_tokens_legend.token_types
    [hint] = hints
    assert hint.label == " {α}" and hint.position == types.Position(line=10, character=14)
    assert hint.text_edits is not None
    with_hint = apply_text_edits(client.document(uri), hint.text_edits)
    assert with_hint.splitlines()[10] == "def implicitly {α} (x : α) : α := x"


async def test_real_call_hierarchy_follows_uses_both_ways(client: LeanClient, demo_root: Path) -> None:
    uri = await opened(client, demo_root)
    with anyio.fail_after(60):
        [item] = await client.prepare_call_hierarchy(uri, P(3, 5))
        incoming = await client.incoming_calls(item)
        [use] = await client.prepare_call_hierarchy(uri, P(5, 5))
        outgoing = await client.outgoing_calls(use)
    assert (item.name, item.uri, item.data) == ("idNat", uri, {"module": "Demo.Calls", "name": "idNat"})
    assert {(call.from_.name, len(call.from_ranges)) for call in incoming} == {("useId", 2), ("withDoc", 1)}
    assert {call.to.name for call in outgoing} == {"MyNat", "idNat"}


async def test_real_rename_gives_an_edit_that_apply_edit_makes(client: LeanClient, demo_root: Path) -> None:
    uri = await opened(client, demo_root)
    with anyio.fail_after(60):
        prepared = await client.prepare_rename(uri, P(3, 5))
        edit = await client.rename(uri, P(3, 5), "idNat2")
        assert edit is not None
        versions = await client.apply_edit(edit)
        result = await client.sync(uri)
    assert prepared == R(3, 4, 3, 9)
    assert versions == {uri: 2} and client.document(uri).text == CALLS.replace("idNat", "idNat2")
    assert result.complete and [d.message for d in result.errors] == ["Unknown constant `lcAny`"]


async def test_real_completion_items_resolve_with_their_type(client: LeanClient, demo_root: Path) -> None:
    uri = await opened(client, demo_root, "Demo/Complete.lean", "prelude\nimport Demo.Basic\n\ndef probe := MyNat.\n")
    with anyio.fail_after(60):
        listed = await client.completion(uri, P(3, 19))
        by_label = {item.label: item for item in listed.items}
        resolved = await client.resolve_completion(by_label["succ"])
    assert {"zero", "succ", "one"} <= set(by_label)
    assert by_label["succ"].kind == types.CompletionItemKind.Constructor
    assert resolved.detail == "MyNat → MyNat"


async def test_real_code_actions_resolve_to_an_edit_of_the_text(client: LeanClient, demo_root: Path) -> None:
    path = demo_root / "Demo/Warn.lean"
    uri = path_to_uri(path)
    await client.open(uri, path.read_text(encoding="utf-8"))
    with anyio.fail_after(60):
        [warning] = (await client.sync(uri)).diagnostics
        [action] = await client.code_actions(uri, Range(start=P(4, 8), end=P(4, 9)), diagnostics=[warning])
        assert isinstance(action, types.CodeAction)
        resolved = await client.resolve_code_action(action)
    assert resolved.title == "Try this: _x" and resolved.edit is not None
    [change] = resolved.edit.document_changes or []
    assert isinstance(change, types.TextDocumentEdit)
    fixed = apply_text_edits(client.document(uri), [e for e in change.edits if isinstance(e, types.TextEdit)])
    assert fixed.splitlines()[4] == "  (fun (_x : p) => myTrue) hp"


async def test_real_requests_about_a_document_that_is_not_open_are_refused_before_sending(
    client: LeanClient, demo_root: Path
) -> None:
    nope = path_to_uri(demo_root / "Nope.lean")
    sent = client.stats().requests
    for call in (client.folding_ranges, client.semantic_tokens, client.document_symbols):
        with pytest.raises(DocumentNotOpen):
            await call(nope)
    with pytest.raises(DocumentNotOpen):
        await client.type_definition(nope, P(0, 0))
    assert client.stats().requests == sent
