"""The typed requests of a Lean language server: LSP navigation, code actions, completion and Lean's RPC.

`LeanRequests` is mixed into `LeanClient`: each method validates what it can against the client's own document
mirror (unknown documents, positions outside the text) before sending, then turns Lean's JSON into lsprotocol or
Beam types. It owns no state but the RPC sessions it opens (one per document), and it sends nothing itself:
everything goes through the client's `request` (crash bookkeeping, `ServerExited`) and `_notify`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .documents import TextDocument
from .errors import RpcNeedsReconnect
from .lean import LeanDiagnostic, PlainGoal, PlainTermGoal, Position, Range, RpcConnectResult

if TYPE_CHECKING:
    from cattrs import Converter
    from lsprotocol import types

__all__ = ["LeanRequests"]

T = TypeVar("T")


@functools.cache
def _converter() -> Converter:
    """The lsprotocol converter, made by the first answer that needs it (one per process).

    lsprotocol is the slowest import of the Lean stack (its types module builds hundreds of attrs classes: about
    half of what opening a broker costs), so it is imported only where an answer becomes an lsprotocol value (each
    such method imports `lsprotocol.types` itself); a client that never asks for hover, signature help,
    definitions, references or symbols never loads it. `beam_mcp` loads it in the background once its broker is
    open.
    """
    from lsprotocol import converters

    return converters.get_converter()


class LeanRequests:
    """Typed requests over a client's `request`, `_notify` and `document` (provided by `LeanClient`)."""

    _rpc_sessions: dict[str, int | str]

    async def request(self, method: str, params: Any = None) -> Any:
        """Send any request and return its raw JSON result (see `LeanClient.request`)."""
        raise NotImplementedError

    async def _notify(self, method: str, params: Any) -> None:
        raise NotImplementedError

    def document(self, uri: str) -> TextDocument:
        """The client's copy of an open document (see `LeanClient.document`)."""
        raise NotImplementedError

    async def _at(self, lsp_method: str, uri: str, position: Position, /, **extra: Any) -> Any:
        self.document(uri).validate(position)
        params = {"textDocument": {"uri": uri}, "position": position.model_dump(mode="json"), **extra}
        return await self.request(lsp_method, params)

    async def hover(self, uri: str, position: Position) -> types.Hover | None:
        """`textDocument/hover`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
            ResponseError: Lean answered with an error.
        """
        from lsprotocol import types

        return _structure(await self._at("textDocument/hover", uri, position), types.Hover)

    async def plain_goal(self, uri: str, position: Position) -> PlainGoal | None:
        """`$/lean/plainGoal`: the tactic goals at a position (None outside tactic proofs)."""
        result = await self._at("$/lean/plainGoal", uri, position)
        return None if result is None else PlainGoal.model_validate(result)

    async def plain_term_goal(self, uri: str, position: Position) -> PlainTermGoal | None:
        """`$/lean/plainTermGoal`: the expected type at a term (None when there is none)."""
        result = await self._at("$/lean/plainTermGoal", uri, position)
        return None if result is None else PlainTermGoal.model_validate(result)

    async def signature_help(self, uri: str, position: Position) -> types.SignatureHelp | None:
        """`textDocument/signatureHelp`."""
        from lsprotocol import types

        return _structure(await self._at("textDocument/signatureHelp", uri, position), types.SignatureHelp)

    async def definition(self, uri: str, position: Position) -> list[types.Location | types.LocationLink]:
        """`textDocument/definition`; Lean answers `Location[]` (ilean index) or `LocationLink[]` (worker)."""
        return _locations(await self._at("textDocument/definition", uri, position))

    async def declaration(self, uri: str, position: Position) -> list[types.Location | types.LocationLink]:
        """`textDocument/declaration` (same shapes as `definition`)."""
        return _locations(await self._at("textDocument/declaration", uri, position))

    async def references(
        self, uri: str, position: Position, *, include_declaration: bool = True
    ) -> list[types.Location]:
        """`textDocument/references` across the project (ilean data plus open files)."""
        context = {"includeDeclaration": include_declaration}
        result = await self._at("textDocument/references", uri, position, context=context)
        from lsprotocol import types

        converter = _converter()
        return [converter.structure(r, types.Location) for r in result or []]

    async def document_symbols(self, uri: str) -> list[types.DocumentSymbol | types.SymbolInformation]:
        """`textDocument/documentSymbol` (Lean waits for the whole file)."""
        self.document(uri)
        result = await self.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
        return [_symbol(item) for item in result or []]

    async def workspace_symbols(self, query: str) -> list[types.SymbolInformation]:
        """`workspace/symbol` (fuzzy, at most 100 results from Lean; empty query gives none)."""
        result = await self.request("workspace/symbol", {"query": query})
        from lsprotocol import types

        converter = _converter()
        return [converter.structure(r, types.SymbolInformation) for r in result or []]

    async def code_actions(
        self, uri: str, range_: Range, *, diagnostics: Sequence[LeanDiagnostic] = ()
    ) -> list[dict[str, Any]]:
        """`textDocument/codeAction`; actions are returned as raw JSON so their `data` round-trips exactly."""
        self.document(uri).validate_range(range_)
        context = {"diagnostics": [d.wire() for d in diagnostics]}
        params = {"textDocument": {"uri": uri}, "range": range_.model_dump(mode="json"), "context": context}
        return list(await self.request("textDocument/codeAction", params) or [])

    async def resolve_code_action(self, action: Mapping[str, Any]) -> dict[str, Any]:
        """`codeAction/resolve` for an action returned by `code_actions` (sent back verbatim)."""
        return dict(await self.request("codeAction/resolve", dict(action)) or {})

    async def completion(self, uri: str, position: Position) -> dict[str, Any]:
        """`textDocument/completion` as a raw `CompletionList` (`{isIncomplete, items}`).

        Items are raw JSON so their opaque `data` round-trips to `resolve_completion` exactly; a bare item array
        (allowed by LSP) is returned as a complete list, and a null answer as an empty one.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._at("textDocument/completion", uri, position)
        if isinstance(result, list):
            return {"isIncomplete": False, "items": result}
        return dict(result or {"isIncomplete": False, "items": []})

    async def resolve_completion(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """`completionItem/resolve` for an item `completion` returned (sent back verbatim; Lean adds `detail`)."""
        return dict(await self.request("completionItem/resolve", dict(item)) or {})

    # ---- Lean RPC -------------------------------------------------------------------------------------
    async def rpc_connect(self, uri: str) -> int | str:
        """`$/lean/rpc/connect`: open an RPC session for a document; returns the session id."""
        self.document(uri)
        result = await self.request("$/lean/rpc/connect", {"uri": uri})
        return RpcConnectResult.model_validate(result).sessionId

    async def rpc_call(self, uri: str, session_id: int | str, position: Position, method: str, params: Any) -> Any:
        """`$/lean/rpc/call`: call a Lean `@[server_rpc_method]` (e.g. `Lean.Widget.getInteractiveGoals`).

        Raises:
            RpcNeedsReconnect: The session expired; connect again.
        """
        return await self._at("$/lean/rpc/call", uri, position, sessionId=session_id, method=method, params=params)

    async def rpc_release(self, uri: str, session_id: int | str, refs: Sequence[Any]) -> None:
        """`$/lean/rpc/release`: free RPC references."""
        await self._notify("$/lean/rpc/release", {"uri": uri, "sessionId": session_id, "refs": list(refs)})

    async def rpc_keep_alive(self, uri: str, session_id: int | str) -> None:
        """`$/lean/rpc/keepAlive`: keep a session alive (Lean drops sessions idle for ~30 s)."""
        await self._notify("$/lean/rpc/keepAlive", {"uri": uri, "sessionId": session_id})

    async def interactive_goals(self, uri: str, position: Position) -> Any:
        """Structured goals at a position via `Lean.Widget.getInteractiveGoals` (raw JSON, None if none).

        The RPC session is opened once per document and reused; an expired session is reconnected once.
        """
        params = {"textDocument": {"uri": uri}, "position": position.model_dump(mode="json")}
        for attempt in (0, 1):
            session = self._rpc_sessions.get(uri)
            if session is None:
                session = self._rpc_sessions[uri] = await self.rpc_connect(uri)
            try:
                return await self.rpc_call(uri, session, position, "Lean.Widget.getInteractiveGoals", params)
            except RpcNeedsReconnect:
                self._rpc_sessions.pop(uri, None)
                if attempt:
                    raise
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


def _structure(value: Any, kind: type[T]) -> T | None:
    return None if value is None else _converter().structure(value, kind)


def _locations(result: Any) -> list[types.Location | types.LocationLink]:
    return [_location(item) for item in result or []]


def _location(item: Any) -> types.Location | types.LocationLink:
    from lsprotocol import types

    converter = _converter()
    if "targetUri" in item:
        return converter.structure(item, types.LocationLink)
    return converter.structure(item, types.Location)


def _symbol(item: Any) -> types.DocumentSymbol | types.SymbolInformation:
    from lsprotocol import types

    converter = _converter()
    if "location" in item:
        return converter.structure(item, types.SymbolInformation)
    return converter.structure(item, types.DocumentSymbol)
