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

from .__about__ import __version__
from ._http import HttpConfig, serve_http
from ._protocol import LEGACY_VERSION, MODERN_VERSION, SERVER_NAME
from ._stdio import serve as serve_stdio
from .errors import BeamMcpError, JsonRpcError, SelfCheckError
from .server import McpServer, ServerConfig

__all__ = [
    "__version__",
    # serving
    "ServerConfig",
    "McpServer",
    "serve_stdio",
    "HttpConfig",
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
