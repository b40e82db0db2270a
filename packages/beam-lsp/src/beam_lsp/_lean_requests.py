"""Lean's own requests, typed: plain goals, the waits, the module hierarchy and Lean's RPC.

Lean's RPC gives interactive goals, interactive diagnostics and widgets.
`LeanExtensionRequests` is mixed into `LeanClient` beside `LspRequests`. Results are `lean` models. It owns the
RPC sessions it opens (one per document, reused, reconnected once when Lean says it expired) and nothing else;
it sends everything through the client's `_request` and `_notify`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from . import _convert
from ._convert import PositionLike, position_json
from ._model import JsonValue
from ._requests import RequestBase
from .documents import TextDocument
from .errors import RpcNeedsReconnect
from .lean import (
    InteractiveDiagnostic,
    InteractiveGoals,
    InteractiveTermGoal,
    LeanImport,
    LeanModule,
    PanelWidgetInstance,
    PlainGoal,
    PlainTermGoal,
    Position,
    RpcConnectResult,
    RpcRef,
    WidgetSource,
)

__all__ = ["LeanExtensionRequests"]


class LeanExtensionRequests(RequestBase):
    """Lean's extensions to LSP (see the module docstring)."""

    _rpc_sessions: dict[str, int | str]
    _rpc_connecting: dict[str, anyio.Lock]
    """One lock per document with RPC: its first caller connects the session, the others wait (`_rpc_session`)."""
    _docs: dict[str, TextDocument]

    # ---- goals ---------------------------------------------------------------------------------------------------
    async def plain_goal(self, uri: str, position: PositionLike) -> PlainGoal | None:
        r"""`$/lean/plainGoal`: the tactic goals at `position` (None outside tactic proofs; no goals: `goals == []`).

        Lean waits until the part of the file holding `position` is elaborated, not for the whole file. Example
        result: `PlainGoal(rendered="```lean\np : Prop\nhp : p\n⊢ p\n```", goals=("p : Prop\nhp : p\n⊢ p",))`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._at("$/lean/plainGoal", uri, position)
        return None if result is None else _convert.model("$/lean/plainGoal", result, PlainGoal)

    async def plain_term_goal(self, uri: str, position: PositionLike) -> PlainTermGoal | None:
        r"""`$/lean/plainTermGoal`: the expected type of the term at `position`, with the term's range.

        Example result: `PlainTermGoal(goal="p : Prop\nhp : p\n⊢ p", range=Range(start=(6, 2), end=(6, 4)))`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        result = await self._at("$/lean/plainTermGoal", uri, position)
        return None if result is None else _convert.model("$/lean/plainTermGoal", result, PlainTermGoal)

    # ---- waits ---------------------------------------------------------------------------------------------------
    async def wait_for_diagnostics(self, uri: str, version: int | None = None) -> None:
        """`textDocument/waitForDiagnostics`: return once Lean has published every diagnostic of `version`.

        `version` defaults to the client's current version of the document.

        Lean's own barrier; `sync` adds the file's progress, the diagnostics and a result that never reads clean
        too early, so prefer it. A version Lean never gets is never answered: bound the wait (`anyio.fail_after`).

        Raises:
            DocumentNotOpen: The document is not open.
            WorkerCrashed: The document's worker crashed.
        """
        doc = self.document(uri)
        version = doc.version if version is None else version
        await self._request("textDocument/waitForDiagnostics", {"uri": uri, "version": version})

    async def wait_for_ileans(self) -> None:
        """`$/lean/waitForILeans`: return once Lean has loaded the `.ilean` index of the project.

        The index is the data behind `references`, `workspace_symbols` and definitions in closed modules.

        Lean's watchdog blocks every other message while it answers, so ask once, before the first such query.

        Raises:
            ResponseError: Lean answered with an error.
        """
        await self._request("$/lean/waitForILeans", {})

    # ---- module hierarchy ----------------------------------------------------------------------------------------
    async def prepare_module_hierarchy(self, uri: str) -> LeanModule | None:
        """`$/lean/prepareModuleHierarchy`: the module an open document defines (None when it is no module).

        Lean knows a document's imports once it has processed its header: `sync` first, or `module_imports`
        may answer none.

        Example result: `LeanModule(name="Demo.Cap", uri="file:///p/Demo/Cap.lean")`.

        Raises:
            DocumentNotOpen: The document is not open.
            ResponseError: `METHOD_NOT_FOUND` on a Lean without a module hierarchy.
        """
        result = await self._on("$/lean/prepareModuleHierarchy", uri)
        return None if result is None else _convert.model("$/lean/prepareModuleHierarchy", result, LeanModule)

    async def module_imports(self, module: LeanModule) -> list[LeanImport]:
        """`$/lean/moduleHierarchy/imports`: the modules `module` imports, in order.

        Example result: `[LeanImport(module=LeanModule(name="Demo.Basic", uri=...), kind=LeanImportKind(
        isPrivate=False, isAll=False, metaKind="nonMeta"))]`.

        Raises:
            ResponseError: Lean answered with an error.
        """
        return await self._imports("$/lean/moduleHierarchy/imports", module)

    async def module_imported_by(self, module: LeanModule) -> list[LeanImport]:
        """`$/lean/moduleHierarchy/importedBy`: the modules of the project that import `module`.

        Example result: `[LeanImport(module=LeanModule(name="Demo.Proofs", uri=...), kind=...), ...]`.

        Raises:
            ResponseError: Lean answered with an error.
        """
        return await self._imports("$/lean/moduleHierarchy/importedBy", module)

    async def _imports(self, method: str, module: LeanModule) -> list[LeanImport]:
        result = _convert.json_list(method, await self._request(method, {"module": module.wire()}))
        return [_convert.model(method, item, LeanImport) for item in result]

    # ---- Lean RPC ------------------------------------------------------------------------------------------------
    async def rpc_connect(self, uri: str) -> int | str:
        """`$/lean/rpc/connect`: open an RPC session for a document; returns the session id.

        The typed RPC methods (`interactive_goals`, ...) open and reuse one session per document themselves.

        Raises:
            DocumentNotOpen: The document is not open.
        """
        self.document(uri)
        result = await self._request("$/lean/rpc/connect", {"uri": uri})
        return _convert.model("$/lean/rpc/connect", result, RpcConnectResult).sessionId

    async def rpc_call(
        self, uri: str, session_id: int | str, position: PositionLike, method: str, params: JsonValue
    ) -> JsonValue:
        """`$/lean/rpc/call`: call a Lean `@[server_rpc_method]` in a session, at a position; its raw JSON answer.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
            RpcNeedsReconnect: The session expired; connect again.
        """
        result: JsonValue = await self._at(
            "$/lean/rpc/call", uri, position, sessionId=session_id, method=method, params=params
        )
        return result

    async def rpc_release(self, uri: str, session_id: int | str, refs: Sequence[RpcRef]) -> None:
        """`$/lean/rpc/release`: free RPC references Lean holds for a session (those of interactive answers)."""
        await self._notify(
            "$/lean/rpc/release", {"uri": uri, "sessionId": session_id, "refs": [r.wire() for r in refs]}
        )

    async def rpc_keep_alive(self, uri: str, session_id: int | str) -> None:
        """`$/lean/rpc/keepAlive`: keep a session alive (Lean drops sessions idle for about 30 s)."""
        await self._notify("$/lean/rpc/keepAlive", {"uri": uri, "sessionId": session_id})

    async def rpc(self, uri: str, position: PositionLike, method: str, params: JsonValue) -> JsonValue:
        """Call a Lean RPC method in the document's session (opened on first use, reconnected once if expired).

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
            RpcNeedsReconnect: The new session expired at once too.
        """
        result: JsonValue = await self._rpc_call(uri, position, method, params)
        return result

    async def _rpc_call(self, uri: str, position: PositionLike, method: str, params: Any) -> Any:
        for attempt in (0, 1):
            session = self._rpc_sessions.get(uri)
            if session is None:
                session = await self._rpc_session(uri)
            try:
                return await self.rpc_call(uri, session, position, method, params)
            except RpcNeedsReconnect:
                if self._rpc_sessions.get(uri) == session:  # not a newer session another caller connected meanwhile
                    del self._rpc_sessions[uri]
                if attempt:
                    raise
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def _rpc_session(self, uri: str) -> int | str:
        """The document's RPC session, connected by the first caller while the others wait for it.

        Two sessions of one document would leave one never kept alive nor released. A failed connect is not kept
        (the next caller connects), and a session is kept only for the lifetime of the document it was opened for:
        a document closed (or reopened) meanwhile connects anew.
        """
        doc = self.document(uri)
        lock = self._rpc_connecting.get(uri)
        if lock is None:
            lock = self._rpc_connecting[uri] = anyio.Lock()
        async with lock:
            session = self._rpc_sessions.get(uri)
            if session is None:
                session = await self.rpc_connect(uri)
                if self._docs.get(uri) is doc:
                    self._rpc_sessions[uri] = session
            return session

    async def release_refs(self, uri: str, refs: Sequence[RpcRef]) -> None:
        """Free RPC references of an interactive answer about `uri` (nothing when its session is gone)."""
        session = self._rpc_sessions.get(uri)
        if session is not None and refs:
            await self.rpc_release(uri, session, refs)

    async def _rpc_at(self, uri: str, position: PositionLike, method: str) -> Any:
        params = {"textDocument": {"uri": uri}, "position": position_json(position)}
        return await self._rpc_call(uri, position, method, params)

    async def interactive_goals(self, uri: str, position: PositionLike) -> InteractiveGoals | None:
        """`Lean.Widget.getInteractiveGoals`: the goals at a tactic position, with structured hypotheses.

        Types are `CodeWithInfos` (`.plain` renders them); `goal.plain` renders a goal as `plain_goal` does. The RPC
        references in the answer stay valid until `release_refs` or the session ends. Example result:
        `InteractiveGoals(goals=(InteractiveGoal(hyps=(InteractiveHypothesisBundle(names=("p",), type=...), ...),
        type=..., goalPrefix="⊢ ", mvarId="_uniq.30.4"),))`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        method = "Lean.Widget.getInteractiveGoals"
        result = await self._rpc_at(uri, position, method)
        return None if result is None else _convert.model(method, result, InteractiveGoals)

    async def interactive_term_goal(self, uri: str, position: PositionLike) -> InteractiveTermGoal | None:
        """`Lean.Widget.getInteractiveTermGoal`: the expected type at a term, with hypotheses and the term's range.

        Example result: `InteractiveTermGoal(hyps=(...), type=CodeWithInfos(...), range=Range(...))`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        method = "Lean.Widget.getInteractiveTermGoal"
        result = await self._rpc_at(uri, position, method)
        return None if result is None else _convert.model(method, result, InteractiveTermGoal)

    async def interactive_diagnostics(
        self, uri: str, *, lines: tuple[int, int] | None = None
    ) -> list[InteractiveDiagnostic]:
        r"""`Lean.Widget.getInteractiveDiagnostics`: the document's diagnostics, messages as rich text.

        Messages embed expressions, goals, widgets and traces. With `lines` (`(start, end)`, 0-based, end exclusive)
        only the diagnostics starting on those lines.

        Example result: `[InteractiveDiagnostic(range=..., severity=1, message=InteractiveMessage(append=(
        InteractiveMessage(text="unsolved goals\np : "), ...)))]` (`message.plain` renders it).

        Raises:
            DocumentNotOpen: The document is not open.
        """
        method = "Lean.Widget.getInteractiveDiagnostics"
        params = {} if lines is None else {"lineRange": {"start": lines[0], "end": lines[1]}}
        result = await self._rpc_call(uri, _START, method, params)
        return [_convert.model(method, item, InteractiveDiagnostic) for item in _convert.json_list(method, result)]

    async def widgets(self, uri: str, position: PositionLike) -> list[PanelWidgetInstance]:
        """`Lean.Widget.getWidgets`: the user widgets (infoview panels) at a position.

        Files without `Init` have none (widgets are declared with `@[widget_module]`). Example result:
        `[PanelWidgetInstance(id="ProofWidgets.HtmlDisplay", javascriptHash=1234, props={...}, range=...)]`.

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
        """
        method = "Lean.Widget.getWidgets"
        result = await self._rpc_call(uri, position, method, position_json(position))
        widgets = result.get("widgets") if isinstance(result, dict) else None
        return [_convert.model(method, item, PanelWidgetInstance) for item in _convert.json_list(method, widgets)]

    async def widget_source(self, uri: str, position: PositionLike, javascript_hash: str) -> WidgetSource:
        """`Lean.Widget.getWidgetSource`: the JavaScript module of a widget (`PanelWidgetInstance.javascriptHash`).

        Raises:
            DocumentNotOpen: The document is not open.
            InvalidPosition: The position is outside the text.
            ResponseError: No widget module has that hash.
        """
        method = "Lean.Widget.getWidgetSource"
        params = {"pos": position_json(position), "hash": javascript_hash}
        return _convert.model(method, await self._rpc_call(uri, position, method, params), WidgetSource)


_START = Position(line=0, character=0)
