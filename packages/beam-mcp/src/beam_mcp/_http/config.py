"""Settings of the Streamable HTTP transport: `HttpConfig` and the documented limits.

This module owns the transport's knobs and their defaults (the limits table of docs/mcp-http.md), the bearer
token included. It imports nothing beyond the standard library (and `auth`, which does not either), so
`beam_mcp` can export `HttpConfig` to users who did not install the `http` extra; it must not hold behaviour.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from .auth import BearerToken

ENDPOINT: Final = "/mcp"
"""The one MCP endpoint path; every other path but the health endpoint's is 404."""
HEALTH: Final = "/healthz"
"""The health endpoint path (`GET`): liveness, a tiny JSON status for load balancers; it never starts Lean."""
READY: Final = "/readyz"
"""The readiness path (`GET`): 200 while the replica takes calls, 503 while it starts, drains or stops."""
METRICS: Final = "/metrics"
"""Prometheus metrics (`GET`, behind the bearer token when one is set)."""
STATUS: Final = "/"
"""The status page for people (`GET`, HTML without JavaScript, behind the bearer token when one is set)."""
DRAIN_DEADLINE: Final = 30.0
"""Seconds a drain (SIGTERM) lets calls in flight finish before it cancels what is left."""
DRAIN_LINGER: Final = 1.0
"""Seconds without a new request that a drain waits for, once the calls in flight finished, before the socket
closes: until then new requests keep getting the retryable 503. A balancer that has not yet seen readiness turn
false (HAProxy: two failed checks, 0.5-1.5 s) keeps sending for a moment; a connection it opened just as the socket
closed would be reset unanswered, a 502 it may not retry (the call might have run). Measured behind HAProxy
without it: 1 such 502 in 4 rolling restarts of 6 busy clients. Bounded by the drain deadline."""
MAX_BODY: Final = 4 * 1024 * 1024
"""Largest accepted request body (bytes): 413 beyond it."""
MAX_HEAD: Final = 64 * 1024
"""Largest accepted request line plus headers (bytes): 431 beyond it."""
HEADER_TIMEOUT: Final = 30.0
"""Seconds a connection may stay without a complete request head (after it opens, or after the previous
response), however its bytes trickle in: hypercorn then closes it quietly. This bounds idle connections too."""
BODY_TIMEOUT: Final = 30.0
"""Seconds a request body may stall without a byte (408 after it)."""
BODY_DEADLINE: Final = 60.0
"""Seconds a request body may take in all, from its head to its last byte (408 after it)."""
MAX_RECEIVING: Final = 64
"""Requests whose body is still arriving; one more evicts the one that has been arriving longest (408)."""
WRITE_TIMEOUT: Final = 30.0
"""Seconds one write may stall (the client stopped reading): the response is abandoned and its request
cancelled (a 2025-11-25 session's request runs on: that revision does not take a lost connection for a cancel)."""
MAX_REQUESTS: Final = 512
"""HTTP requests being answered at once (their body read; open streams included); one more is answered 503."""
MAX_SESSIONS: Final = 100
"""Legacy `2025-11-25` sessions; one more `initialize` is answered 429."""
SESSION_IDLE: Final = 300.0
"""Seconds a legacy session lives without a request in flight or an open GET stream."""
STREAM_LEASE: Final = (900.0, 1800.0)
"""A listen or GET stream ends, without a final result, after a uniformly random lifetime in this range (s)."""
KEEPALIVE: Final = 15.0
"""Seconds of silence on a response before an SSE comment keeps it alive (and commits a silent call to SSE)."""
SHUTDOWN_TIMEOUT: Final = 5.0
"""Seconds the HTTP server gets to close its connections once the transport stopped every response."""


@dataclasses.dataclass(frozen=True)
class HttpConfig:
    """Settings of the Streamable HTTP transport (the defaults are the documented limits).

    Attributes:
        host: Address to bind. Keep it on loopback unless a token (or a proxy in front) authenticates clients.
        port: Port to bind; 0 picks a free one.
        allowed_hosts: More `Host` header names to accept (`name` for any port, `name:port` for one), beside
            the loopback names and the bound address.
        allowed_origins: More `Origin` values to accept (`scheme://host:port`), beside the loopback origins on
            the bound port.
        max_body: Largest request body in bytes (413).
        max_head: Largest request head in bytes (431).
        header_timeout: Seconds a connection may wait for a complete request head (then it is closed).
        body_timeout: Seconds a request body may stall (408).
        body_deadline: Seconds a request body may take from its head to its end (408).
        max_receiving: Requests whose body is still arriving; one more evicts the oldest of them (408).
        write_timeout: Seconds one response write may stall before the response is abandoned.
        max_requests: Requests answered at once, once their body is read, streams included (503 beyond).
        max_sessions: Legacy sessions (429 beyond).
        session_idle: Seconds an idle legacy session lives.
        stream_lease: Bounds of the random lifetime of a listen or GET stream (seconds).
        keepalive: Seconds of silence before an SSE keepalive comment.
        drain_deadline: Seconds a drain lets the calls in flight finish before it cancels the rest.
        drain_linger: Seconds without a new request a drain waits for before it stops (`DRAIN_LINGER`).
        token: The bearer token every request to the MCP endpoint must carry (`Authorization: Bearer <token>`,
            else 401); None: no authentication. The health endpoint stays open. Never shown (`repr` included).
    """

    host: str = "127.0.0.1"
    port: int = 0
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body: int = MAX_BODY
    max_head: int = MAX_HEAD
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    body_deadline: float = BODY_DEADLINE
    max_receiving: int = MAX_RECEIVING
    write_timeout: float = WRITE_TIMEOUT
    max_requests: int = MAX_REQUESTS
    max_sessions: int = MAX_SESSIONS
    session_idle: float = SESSION_IDLE
    stream_lease: tuple[float, float] = STREAM_LEASE
    keepalive: float = KEEPALIVE
    drain_deadline: float = DRAIN_DEADLINE
    drain_linger: float = DRAIN_LINGER
    token: BearerToken | None = dataclasses.field(default=None, repr=False)
