"""beam-mcp: `lean-beam-mcp`, the Beam MCP server for Lean 4 (MCP 2026-07-28 and 2025-11-25).

The public API is what `__all__` lists; everything else is private. Importing it is cheap: the broker and
the Lean stack are imported when a server starts (`beam_lsp.lazy.lazy_exports`).

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

from typing import TYPE_CHECKING

from beam_lsp.lazy import lazy_exports

from .__about__ import __version__

if TYPE_CHECKING:
    from ._http import BearerToken as BearerToken
    from ._http import HttpConfig as HttpConfig
    from ._http import serve_http as serve_http
    from ._protocol import LEGACY_VERSION as LEGACY_VERSION
    from ._protocol import MODERN_VERSION as MODERN_VERSION
    from ._protocol import SERVER_NAME as SERVER_NAME
    from ._stdio import serve_stdio as serve_stdio
    from .errors import BeamMcpError as BeamMcpError
    from .errors import JsonRpcError as JsonRpcError
    from .errors import SelfCheckError as SelfCheckError
    from .server import McpServer as McpServer
    from .server import ServerConfig as ServerConfig

# Every name loads on first use: `lean-beam-mcp --version` and `--help` import nothing heavy.
_NAMES, __getattr__ = lazy_exports(
    __name__,
    {
        ".server": ("ServerConfig", "McpServer"),
        "._stdio": ("serve_stdio",),
        "._http": ("HttpConfig", "BearerToken", "serve_http"),
        "._protocol": ("MODERN_VERSION", "LEGACY_VERSION", "SERVER_NAME"),
        ".errors": ("BeamMcpError", "JsonRpcError", "SelfCheckError"),
    },
)
__all__ = ["__version__", *_NAMES]
