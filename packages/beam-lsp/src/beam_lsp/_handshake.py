"""The client's side of the LSP handshake: what we tell Lean we are, and how we answer Lean's own requests.

Owns the `initialize` params (our capabilities, among them Lean's `incrementalDiagnosticSupport`) and the
answers to the server-to-client requests Lean sends (capability registration, refreshes, configuration,
`applyEdit`, which Beam refuses: it never edits sources). It sends nothing itself (`client.py` does).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from .jsonrpc import JsonRpcPeer

__all__ = ["initialize_params", "install_handlers"]


def initialize_params(root_uri: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The `initialize` params: our process, the root, our capabilities and Lean's `initializationOptions`."""
    params: dict[str, Any] = {
        "processId": os.getpid(),
        "clientInfo": {"name": "beam-lsp"},
        "rootUri": root_uri,
        "capabilities": _client_capabilities(),
    }
    if options:
        params["initializationOptions"] = dict(options)
    return params


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


async def _acknowledge(_params: Any) -> None:
    return None


async def _configuration(params: Any) -> list[None]:
    items = params.get("items") if isinstance(params, dict) else None
    return [None] * (len(items) if isinstance(items, list) else 0)


async def _apply_edit(_params: Any) -> dict[str, Any]:
    return {"applied": False, "failureReason": "beam never edits sources"}


def install_handlers(peer: JsonRpcPeer) -> None:
    """Answer the requests Lean sends a client (acknowledgements, configuration, and no to `applyEdit`)."""
    for method in _ACKNOWLEDGED:
        peer.set_handler(method, _acknowledge)
    peer.set_handler("workspace/configuration", _configuration)
    peer.set_handler("workspace/applyEdit", _apply_edit)
