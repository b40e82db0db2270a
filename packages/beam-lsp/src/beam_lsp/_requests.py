"""The standard LSP requests of a Lean language server, typed: navigation, symbols, tokens, edits, completion.

`LspRequests` is mixed into `LeanClient`: each method checks what it can against the client's own document mirror
(an unknown document, a position outside the text) before sending, then returns lsprotocol types (`_convert`). It
owns no state and sends nothing itself: everything goes through the client's `_request` (deferred changes first,
crash bookkeeping, `ServerExited`). Lean's own extensions live in `_lean_requests.py`.

Each public method's docstring names the LSP method it sends and shows what Lean 4.35 answers, so the API
reference (docs/lsp-api.md) is generated from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import _convert
from ._convert import PositionLike, RangeLike, position_json, range_json
from .documents import TextDocument
from .lazy import lazy_module
from .lean import LeanDiagnostic, SemanticToken

if TYPE_CHECKING:
    from lsprotocol import types
else:
    types = lazy_module("lsprotocol.types")  # loaded by the first typed answer (see `lazy_module`)

__all__ = ["LspRequests", "PositionLike", "RangeLike"]


class RequestBase:
    """What the request mixins need from `LeanClient` (it provides every one of these)."""

    @property
    def capabilities(self) -> types.ServerCapabilities:
        """What the server announced in the handshake (see `LeanClient.capabilities`)."""
        raise NotImplementedError

    async def _request(self, method: str, params: Any = None) -> Any:
        raise NotImplementedError

    async def _notify(self, method: str, params: Any) -> None:
        raise NotImplementedError

    def document(self, uri: str) -> TextDocument:
        """The client's copy of an open document (see `LeanClient.document`)."""
        raise NotImplementedError

    def _at_params(self, uri: str, position: PositionLike, extra: dict[str, Any]) -> dict[str, Any]:
        """`TextDocumentPositionParams` (plus `extra` params) about an open document, the position checked."""
        self.document(uri).validate(position)
        return {"textDocument": {"uri": uri}, "position": position_json(position), **extra}

    async def _at(self, method: str, uri: str, position: PositionLike, /, **extra: Any) -> Any:
        """Send a `TextDocumentPositionParams` request (plus `extra` params) about an open document."""
        return await self._request(method, self._at_params(uri, position, extra))

    async def _on(self, method: str, uri: str, /, **extra: Any) -> Any:
        """Send a request naming only an open document (plus `extra` params)."""
        self.document(uri)
        return await self._request(method, {"textDocument": {"uri": uri}, **extra})


class LspRequests(RequestBase):
    """The standard LSP requests Lean answers (see the module docstring)."""

    # Each request loads lsprotocol (off the event loop) before it asks: its answer is read into lsprotocol's types.
    async def _lsp_at(self, method: str, uri: str, position: PositionLike, /, **extra: Any) -> Any:
        if not _convert.is_loaded():
            await _convert.loaded()
        return await self._request(method, self._at_params(uri, position, extra))

    async def _lsp_on(self, method: str, uri: str, /, **extra: Any) -> Any:
        if not _convert.is_loaded():
            await _convert.loaded()
        return await self._on(method, uri, **extra)

    async def _lsp_request(self, method: str, params: Any = None) -> Any:
        if not _convert.is_loaded():
            await _convert.loaded()
        return await self._request(method, params)

    # ---- at a position -------------------------------------------------------------------------------------------
    async def hover(self, uri: str, position: PositionLike) -> types.Hover | None:
        r"""`textDocument/hover`: the type and docstring of what is at `position` (None on whitespace).

        Example result (a constant of another module names it): `Hover(contents=MarkupContent(kind="markdown",
        value="```lean\nmyTrue : MyTrue\n```\n***\n*import Demo.Basic*"), range=3:27-3:33)`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
            ResponseError: Lean answered with an error.
        """
        return _convert.hover("textDocument/hover", await self._lsp_at("textDocument/hover", uri, position))

    async def signature_help(self, uri: str, position: PositionLike) -> types.SignatureHelp | None:
        """`textDocument/signatureHelp`: the signature of the function applied at `position`.

        Lean answers inside an application whose function it knows, None elsewhere. Example result (after
        `idNat ` in `idNat (idNat n)`): `SignatureHelp(signatures=[SignatureInformation(label="(n : MyNat) →
        MyNat")], active_signature=0)`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/signatureHelp", uri, position)
        return None if result is None else _convert.structure("textDocument/signatureHelp", result, types.SignatureHelp)

    async def definition(self, uri: str, position: PositionLike) -> list[types.Location | types.LocationLink]:
        """`textDocument/definition`: where the name at `position` is defined.

        Lean answers `Location[]` from its ilean index (closed modules) or `LocationLink[]` from the file worker.
        Example result: `[LocationLink(target_uri="file:///p/Demo/Basic.lean", target_range=12:8-12:14, ...)]`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/definition", uri, position)
        return _convert.locations("textDocument/definition", result)

    async def declaration(self, uri: str, position: PositionLike) -> list[types.Location | types.LocationLink]:
        """`textDocument/declaration`: the same shapes as `definition`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/declaration", uri, position)
        return _convert.locations("textDocument/declaration", result)

    async def type_definition(self, uri: str, position: PositionLike) -> list[types.Location | types.LocationLink]:
        """`textDocument/typeDefinition`: where the type of the term at `position` is defined (`LocationLink[]`).

        Example result: `[LocationLink(target_uri="file:///p/Demo/Basic.lean", target_range=3:10-3:15, ...)]` for
        a term of type `MyNat`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/typeDefinition", uri, position)
        return _convert.locations("textDocument/typeDefinition", result)

    async def references(
        self, uri: str, position: PositionLike, *, include_declaration: bool = True
    ) -> list[types.Location]:
        """`textDocument/references`: every use of the name at `position` across the project.

        Lean reads closed modules from their `.ilean` files and open files from their workers. Example result:
        `[Location(uri="file:///p/Demo/Basic.lean", range=12:8-12:14), Location(uri=..., range=3:27-3:33)]`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        context = {"includeDeclaration": include_declaration}
        result = await self._lsp_at("textDocument/references", uri, position, context=context)
        return _convert.plain_locations("textDocument/references", result)

    async def document_highlights(self, uri: str, position: PositionLike) -> list[types.DocumentHighlight]:
        """`textDocument/documentHighlight`: the uses of the name at `position` in this document.

        Example result: `[DocumentHighlight(range=3:4-3:9, kind=1), DocumentHighlight(range=5:33-5:38, kind=1)]`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/documentHighlight", uri, position)
        return _convert.structure_list("textDocument/documentHighlight", result, types.DocumentHighlight)

    async def completion(self, uri: str, position: PositionLike) -> types.CompletionList:
        """`textDocument/completion`: what may be written at `position` (after a `.`, the namespace's names).

        A bare item array (allowed by LSP) is returned as a complete list, a null answer as an empty one. Each
        item's opaque `data` is kept, so `resolve_completion` can send it back. Example result:
        `CompletionList(is_incomplete=False, items=[CompletionItem(label="succ", kind=4, data=[...])])`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/completion", uri, position)
        if result is None or isinstance(result, list):
            result = {"isIncomplete": False, "items": result or []}
        return _convert.structure("textDocument/completion", result, types.CompletionList)

    async def resolve_completion(self, item: types.CompletionItem) -> types.CompletionItem:
        """`completionItem/resolve`: an item `completion` returned, completed (Lean adds its type as `detail`).

        Example result: `CompletionItem(label="succ", kind=4, detail="MyNat → MyNat", ...)`.

        Raises:
            ResponseError: Lean answered with an error.
        """
        result = await self._lsp_request("completionItem/resolve", _convert.unstructure(item))
        return _convert.structure("completionItem/resolve", result, types.CompletionItem)

    # ---- call hierarchy and rename -------------------------------------------------------------------------------
    async def prepare_call_hierarchy(self, uri: str, position: PositionLike) -> list[types.CallHierarchyItem]:
        """`textDocument/prepareCallHierarchy`: the declaration at `position`, as call hierarchy items.

        Pass an item to `incoming_calls` and `outgoing_calls`.
        Example result: `[CallHierarchyItem(name="idNat", kind=14, uri=..., range=3:4-3:9, data={"module":
        "Demo.Cap", "name": "idNat"}, ...)]`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/prepareCallHierarchy", uri, position)
        return _convert.structure_list("textDocument/prepareCallHierarchy", result, types.CallHierarchyItem)

    async def incoming_calls(self, item: types.CallHierarchyItem) -> list[types.CallHierarchyIncomingCall]:
        """`callHierarchy/incomingCalls`: the declarations that use `item`, with the ranges of the uses.

        Example result: `[CallHierarchyIncomingCall(from_=CallHierarchyItem(name="useId", ...), from_ranges=[...])]`.

        Raises:
            ResponseError: Lean answered with an error.
        """
        result = await self._lsp_request("callHierarchy/incomingCalls", {"item": _convert.unstructure(item)})
        return _convert.structure_list("callHierarchy/incomingCalls", result, types.CallHierarchyIncomingCall)

    async def outgoing_calls(self, item: types.CallHierarchyItem) -> list[types.CallHierarchyOutgoingCall]:
        """`callHierarchy/outgoingCalls`: the declarations `item` uses, with the ranges of the uses.

        Example result: `[CallHierarchyOutgoingCall(to=CallHierarchyItem(name="MyNat", ...), from_ranges=[...])]`.

        Raises:
            ResponseError: Lean answered with an error.
        """
        result = await self._lsp_request("callHierarchy/outgoingCalls", {"item": _convert.unstructure(item)})
        return _convert.structure_list("callHierarchy/outgoingCalls", result, types.CallHierarchyOutgoingCall)

    async def prepare_rename(
        self, uri: str, position: PositionLike
    ) -> types.Range | types.PrepareRenamePlaceholder | types.PrepareRenameDefaultBehavior | None:
        """`textDocument/prepareRename`: the range of the name a rename at `position` would change (None: none).

        Lean answers the range (example result: `Range(3:4-3:9)`).

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        method = "textDocument/prepareRename"
        result = await self._lsp_at(method, uri, position)
        if result is None:
            return None
        if isinstance(result, dict) and "placeholder" in result:
            return _convert.structure(method, result, types.PrepareRenamePlaceholder)
        if isinstance(result, dict) and "defaultBehavior" in result:
            return _convert.structure(method, result, types.PrepareRenameDefaultBehavior)
        return _convert.structure(method, result, types.Range)

    async def rename(self, uri: str, position: PositionLike, new_name: str) -> types.WorkspaceEdit | None:
        """`textDocument/rename`: the edit that renames the name at `position` everywhere Lean knows it is used.

        Nothing is changed: apply the edit with `apply_edit` (open documents) or yourself. Example result:
        `WorkspaceEdit(changes={"file:///p/Demo/Cap.lean": [TextEdit(range=3:4-3:9, new_text="idNat2"), ...]})`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._lsp_at("textDocument/rename", uri, position, newName=new_name)
        return None if result is None else _convert.structure("textDocument/rename", result, types.WorkspaceEdit)

    # ---- about a whole document ----------------------------------------------------------------------------------
    async def document_symbols(self, uri: str) -> list[types.DocumentSymbol | types.SymbolInformation]:
        """`textDocument/documentSymbol`: the declarations, namespaces and sections of a document.

        Lean waits for the whole file to elaborate.
        Lean answers `DocumentSymbol`s: declarations have kind 6 (method), namespaces and sections kind 3 with
        `children`. Example result: `[DocumentSymbol(name="byTerm", kind=6, range=3:0-3:33, ...), ...]`.

        Raises:
            DocumentNotOpen: The document is not open.
        """
        answer = await self._lsp_on("textDocument/documentSymbol", uri)
        result = _convert.json_list("textDocument/documentSymbol", answer)
        kinds = {True: types.SymbolInformation, False: types.DocumentSymbol}
        return [
            _convert.structure(
                "textDocument/documentSymbol", item, kinds[isinstance(item, dict) and "location" in item]
            )
            for item in result
        ]

    async def workspace_symbols(self, query: str) -> list[types.SymbolInformation]:
        """`workspace/symbol`: declarations of the project and its dependencies whose names match `query` (fuzzy).

        At most 100 results; an empty query finds none. Example result: `[SymbolInformation(name="idProof",
        kind=14, location=Location(uri=..., range=5:8-5:15))]`.

        Raises:
            ResponseError: Lean answered with an error.
        """
        result = await self._lsp_request("workspace/symbol", {"query": query})
        return _convert.structure_list("workspace/symbol", result, types.SymbolInformation)

    async def folding_ranges(self, uri: str) -> list[types.FoldingRange]:
        """`textDocument/foldingRange`: the foldable line ranges (`imports`, `comment`, `region` kinds).

        Example result: `[FoldingRange(start_line=0, end_line=1, kind="imports"), FoldingRange(start_line=7,
        end_line=8, kind="region")]`.

        Raises:
            DocumentNotOpen: The document is not open.
        """
        result = await self._lsp_on("textDocument/foldingRange", uri)
        return _convert.structure_list("textDocument/foldingRange", result, types.FoldingRange)

    async def semantic_tokens(self, uri: str) -> types.SemanticTokens:
        """`textDocument/semanticTokens/full`: the semantic tokens of the part of the document Lean has processed.

        Lean answers for what it has elaborated so far (it then keeps asking the client to refresh): take a
        `sync` first for the whole file. Decode with `decode_semantic_tokens`. Example result:
        `SemanticTokens(data=[0, 0, 7, 0, 0, 1, 0, 6, 0, 0, ...])`.

        Raises:
            DocumentNotOpen: The document is not open.
        """
        result = await self._lsp_on("textDocument/semanticTokens/full", uri)
        return _convert.structure("textDocument/semanticTokens/full", result, types.SemanticTokens)

    async def semantic_tokens_range(self, uri: str, range_: RangeLike) -> types.SemanticTokens:
        """`textDocument/semanticTokens/range`: the semantic tokens of a range (Lean waits until it is processed).

        Example result for line 3 of `def idNat (n : MyNat) ...`: `SemanticTokens(data=[3, 0, 3, 0, 0, 0, 11, 1,
        1, 0, ...])`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The range is outside the text or reversed.
        """
        self.document(uri).validate_range(range_)
        result = await self._lsp_on("textDocument/semanticTokens/range", uri, range=range_json(range_))
        return _convert.structure("textDocument/semanticTokens/range", result, types.SemanticTokens)

    @property
    def semantic_tokens_legend(self) -> types.SemanticTokensLegend | None:
        """The names of the token types and modifiers the server announced (None when it has no semantic tokens)."""
        provider = self.capabilities.semantic_tokens_provider
        return None if provider is None else provider.legend

    def decode_semantic_tokens(self, tokens: types.SemanticTokens | Sequence[int]) -> list[SemanticToken]:
        """Absolute, named tokens from `semantic_tokens` or `semantic_tokens_range` (by the server's legend).

        Example: `[SemanticToken(line=0, character=0, length=7, type="keyword", modifiers=()), ...]`.
        """
        data = tokens.data if isinstance(tokens, types.SemanticTokens) else tokens
        return _convert.decode_semantic_tokens(data, self.semantic_tokens_legend)

    async def inlay_hints(self, uri: str, range_: RangeLike) -> list[types.InlayHint]:
        """`textDocument/inlayHint`: hints Lean shows inline in a range (e.g. auto-bound implicit parameters).

        Example result for `def implicitly (x : T) : T := x`: `[InlayHint(position=10:14, label=" {T}", kind=2,
        text_edits=[TextEdit(range=10:14-10:14, new_text=" {T}")], ...)]`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The range is outside the text or reversed.
        """
        self.document(uri).validate_range(range_)
        result = await self._lsp_on("textDocument/inlayHint", uri, range=range_json(range_))
        return _convert.structure_list("textDocument/inlayHint", result, types.InlayHint)

    # ---- code actions --------------------------------------------------------------------------------------------
    async def code_actions(
        self, uri: str, range_: RangeLike, *, diagnostics: Sequence[LeanDiagnostic] = ()
    ) -> list[types.CodeAction | types.Command]:
        """`textDocument/codeAction`: the fixes and refactorings Lean offers for a range.

        Pass the diagnostics of the range to get their quick fixes. Lean answers `CodeAction`s; one without an
        `edit` is completed by `resolve_code_action` (its opaque `data` is kept for that). Example result:
        `[CodeAction(title="Try this: _x", kind="quickfix", edit=WorkspaceEdit(...), data={...})]`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The range is outside the text or reversed.
        """
        self.document(uri).validate_range(range_)
        context = {"diagnostics": [d.wire() for d in diagnostics]}
        result = await self._lsp_on("textDocument/codeAction", uri, range=range_json(range_), context=context)
        actions: list[types.CodeAction | types.Command] = []
        for item in _convert.json_list("textDocument/codeAction", result):
            if isinstance(item, dict) and isinstance(item.get("command"), str):  # a bare `Command`
                actions.append(_convert.structure("textDocument/codeAction", item, types.Command))
            else:
                actions.append(_convert.structure("textDocument/codeAction", item, types.CodeAction))
        return actions

    async def resolve_code_action(self, action: types.CodeAction) -> types.CodeAction:
        """`codeAction/resolve`: an action `code_actions` returned, with its `edit` filled in.

        Nothing is changed: apply the edit with `apply_edit` (open documents) or `apply_text_edits`. Example
        result: `CodeAction(title="Try this: _x", edit=WorkspaceEdit(document_changes=[TextDocumentEdit(...)]))`.

        Raises:
            ResponseError: Lean answered with an error.
        """
        result = await self._lsp_request("codeAction/resolve", _convert.unstructure(action))
        return _convert.structure("codeAction/resolve", result, types.CodeAction)
