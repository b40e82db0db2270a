"""The client's side of the LSP handshake: what we tell Lean we are, and the default answers to Lean's requests.

Owns the `initialize` params (our capabilities, among them Lean's `incrementalDiagnosticSupport`) and the
default handlers of the server-to-client requests Lean sends (capability registration, refreshes,
configuration, and a refusal of `workspace/applyEdit`). A caller replaces any of them
(`LeanClient.start(server_requests=...)`); the library never applies an edit on its own. It sends nothing
itself (`client.py` does).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ._model import JsonValue

__all__ = ["DEFAULT_SERVER_REQUESTS", "ServerRequestHandler", "default_handlers", "initialize_params"]

ServerRequestHandler = Callable[[JsonValue], Awaitable[JsonValue]]
"""Answers one request the server sends the client: takes its params, returns the result (or raises
`ResponseError` to answer with that error). Runs in the client's task group; a `$/cancelRequest` from the server
cancels it."""


def initialize_params(
    root_uri: str, options: Mapping[str, JsonValue] | None, extra: Mapping[str, JsonValue] | None = None
) -> dict[str, Any]:
    """The `initialize` params: our process, the root, our capabilities with `extra` merged in, Lean's options."""
    params: dict[str, Any] = {
        "processId": os.getpid(),
        "clientInfo": {"name": "beam-lsp"},
        "rootUri": root_uri,
        "capabilities": _merged(_client_capabilities(), extra or {}),
    }
    if options:
        params["initializationOptions"] = dict(options)
    return params


def _merged(base: dict[str, Any], extra: Mapping[str, JsonValue]) -> dict[str, Any]:
    """`base` with `extra` merged in: objects member by member, anything else replaced."""
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        out[key] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


def _client_capabilities() -> dict[str, Any]:
    return {
        "textDocument": {
            "publishDiagnostics": {"relatedInformation": True},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
            "codeAction": {
                "codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["", "quickfix", "refactor", "source"]}},
                "resolveSupport": {"properties": ["edit"]},
                "dataSupport": True,
            },
            "definition": {"linkSupport": True},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
        },
        "window": {"workDoneProgress": True},
        "workspace": {"configuration": True},
        # Lean 4.32+: publish only what a version adds (`isIncremental`) instead of re-sending the growing list.
        "lean": {"incrementalDiagnosticSupport": True},
    }


_ACKNOWLEDGED: Final = (
    "client/registerCapability",
    "client/unregisterCapability",
    "window/workDoneProgress/create",
    "workspace/inlayHint/refresh",
    "workspace/semanticTokens/refresh",
    "workspace/codeLens/refresh",
    "workspace/diagnostic/refresh",
    "window/showMessageRequest",
)


async def _acknowledge(_params: JsonValue) -> JsonValue:
    return None


async def _configuration(params: JsonValue) -> JsonValue:
    items = params.get("items") if isinstance(params, dict) else None
    return [None] * (len(items) if isinstance(items, list) else 0)


async def _refuse_edit(_params: JsonValue) -> JsonValue:
    return {"applied": False, "failureReason": "this client does not apply edits"}


def default_handlers() -> dict[str, ServerRequestHandler]:
    """The default answers to Lean's requests (a new dict each time: the caller's to change)."""
    handlers: dict[str, ServerRequestHandler] = dict.fromkeys(_ACKNOWLEDGED, _acknowledge)
    handlers["workspace/configuration"] = _configuration
    handlers["workspace/applyEdit"] = _refuse_edit
    return handlers


DEFAULT_SERVER_REQUESTS: Final[Mapping[str, ServerRequestHandler]] = default_handlers()
"""What the client answers when the caller registers no handler: `null` to capability registration, progress
creation and refresh requests, one `null` per item to `workspace/configuration`, and
`{"applied": false, ...}` to `workspace/applyEdit`. Any other request is answered `MethodNotFound`."""
