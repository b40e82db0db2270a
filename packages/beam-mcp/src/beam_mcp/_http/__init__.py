"""The Streamable HTTP transport: one MCP endpoint, `/mcp`, served by an ASGI application under hypercorn.

Modules: `config` (`HttpConfig` and the documented limits; stdlib only), `auth` (the bearer token: its sources, its
constant-time check; stdlib only), `rules` (admission and header rules as pure functions), `health` (what `GET
/healthz` answers), `outlet` (the queues between `McpServer` and an answer), `intake` (the bounded pool of request
bodies in flight), `wire` (one ASGI exchange: body, JSON or event-stream answer, deadlines), `sessions` (legacy
`2025-11-25` sessions), `app` (the starlette application: admission, routing to channels, answers, GET and DELETE,
the health route) and `serve` (`serve_http`: sockets, hypercorn inside our task group, shutdown). starlette and
hypercorn are the `beam-mcp[http]` extra: importing this package does not import them; `serve_http` does, and says
what to install when they are missing.
"""

from __future__ import annotations

from .auth import TOKEN_ENV, BearerToken, TokenError
from .config import (
    BODY_DEADLINE,
    BODY_TIMEOUT,
    ENDPOINT,
    HEADER_TIMEOUT,
    HEALTH,
    KEEPALIVE,
    MAX_BODY,
    MAX_HEAD,
    MAX_RECEIVING,
    MAX_REQUESTS,
    MAX_SESSIONS,
    SESSION_IDLE,
    STREAM_LEASE,
    WRITE_TIMEOUT,
    HttpConfig,
)
from .serve import require_extra, serve_http

__all__ = [
    "BODY_DEADLINE",
    "BODY_TIMEOUT",
    "ENDPOINT",
    "HEADER_TIMEOUT",
    "HEALTH",
    "KEEPALIVE",
    "MAX_BODY",
    "MAX_HEAD",
    "MAX_RECEIVING",
    "MAX_REQUESTS",
    "MAX_SESSIONS",
    "SESSION_IDLE",
    "STREAM_LEASE",
    "TOKEN_ENV",
    "WRITE_TIMEOUT",
    "BearerToken",
    "HttpConfig",
    "TokenError",
    "require_extra",
    "serve_http",
]
