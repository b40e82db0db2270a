"""beam-mcp: `lean-beam-mcp`, the Beam MCP server for Lean 4 (MCP 2026-07-28 and 2025-11-25).

The public API is what `__all__` lists; everything else is private. Importing it is cheap: the broker and
the Lean stack are imported when a server starts.

Example:
    >>> import anyio
    >>> from beam_mcp import ServerConfig, serve_stdio
    >>> anyio.run(serve_stdio, ServerConfig())  # doctest: +SKIP

    Streamable HTTP on loopback (``url = await tg.start(serve_http, config, HttpConfig(port=8765))`` inside a
    task group reports the endpoint once it listens):

    >>> from beam_mcp import HttpConfig, serve_http
    >>> anyio.run(serve_http, ServerConfig(), HttpConfig(port=8765))  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .__about__ import __version__
from ._protocol import LEGACY_VERSION, MODERN_VERSION, SERVER_NAME
from .errors import BeamMcpError, JsonRpcError, SelfCheckError

if TYPE_CHECKING:
    from ._http import BearerToken, HttpConfig, serve_http
    from ._stdio import serve as serve_stdio
    from .server import McpServer, ServerConfig

# The server and the transports load on first use: `lean-beam-mcp --version` and `--help` import nothing heavy.
_LAZY = {
    "McpServer": ("server", "McpServer"),
    "ServerConfig": ("server", "ServerConfig"),
    "serve_stdio": ("_stdio", "serve"),
    "HttpConfig": ("_http", "HttpConfig"),
    "BearerToken": ("_http", "BearerToken"),
    "serve_http": ("_http", "serve_http"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{target[0]}", __name__), target[1])
    globals()[name] = value
    return value


__all__ = [
    "__version__",
    # serving
    "ServerConfig",
    "McpServer",
    "serve_stdio",
    "HttpConfig",
    "BearerToken",
    "serve_http",
    # protocol
    "MODERN_VERSION",
    "LEGACY_VERSION",
    "SERVER_NAME",
    # errors
    "BeamMcpError",
    "JsonRpcError",
    "SelfCheckError",
]
