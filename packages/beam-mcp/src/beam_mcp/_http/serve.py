"""Serving the endpoint: the bound sockets, hypercorn inside our task group, and a clean stop.

This module owns the listening sockets (bound here by anyio, so a bind error is ours and port 0 reports the port
bound; handed to hypercorn as `fd://N` binds), hypercorn's settings (its idle timer bounds a connection without a
complete request head, its head parser the head size; its logs go to the `beam_mcp.http.hypercorn` logger),
running hypercorn's asyncio or trio worker for the running anyio backend, the session sweeper, draining (when the
`drain` event is set: the endpoint drains, then the server stops as below and `serve_http` returns), and shutdown:
when `serve_http` is cancelled the endpoint cuts every answer short, hypercorn closes its connections through
`shutdown_trigger` (given a trigger, it installs no signal handlers), and `McpServer.open` then shuts down like
stdio's EOF. It must not contain HTTP rules (`app.py`), and imports starlette and hypercorn only when serving, so
`beam_mcp` imports without the `http` extra.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.abc
from anyio.abc import SocketAttribute
from anyio.streams.stapled import MultiListener

from beam_mcp.server import McpServer, ServerConfig

from .config import SHUTDOWN_TIMEOUT, HttpConfig

if TYPE_CHECKING:
    from hypercorn.config import Config

    from .app import Endpoint

log = logging.getLogger("beam_mcp.http")

EXTRA: Final = "beam-mcp[http]"
"""The extra that installs the HTTP transport's dependencies."""

_Serve = Callable[..., Awaitable[None]]


def require_extra() -> None:
    """Check that the `http` extra (starlette, hypercorn) is installed.

    Raises:
        ImportError: One of them is missing; the message says what to install.
    """
    try:
        import hypercorn  # noqa: F401
        import starlette  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"Streamable HTTP needs the optional dependencies of {EXTRA} ({exc.name} is not installed): "
            f"pip install '{EXTRA}' (from a checkout: pip install -e 'packages/{EXTRA}')",
            name=exc.name,
        ) from exc


async def serve_http(
    config: ServerConfig,
    http_config: HttpConfig | None = None,
    *,
    drain: anyio.Event | None = None,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP over Streamable HTTP until cancelled, then shut down like stdio's EOF.

    Use `url = await tg.start(serve_http, config, http_config)`: the endpoint URL (with the port actually bound)
    is reported once the socket listens. On cancellation open connections are closed, in-flight calls cancelled,
    an admitted drop completes and Lean stops. Needs the `beam-mcp[http]` extra.

    Setting `drain` drains first: readiness turns false, new requests are refused (503, retryable), the answers
    in progress get up to `http_config.drain_deadline` seconds to finish; then the server stops as on cancellation
    and `serve_http` returns.

    Args:
        config: Server settings (shared by every request and session).
        http_config: Transport settings; None: loopback on a free port with the documented limits.
        drain: Set it to drain and stop (a rolling restart's SIGTERM).
        task_status: Receives the endpoint URL.

    Raises:
        ImportError: The `http` extra is not installed.
        OSError: The address cannot be bound.
    """
    http_config = http_config or HttpConfig()
    require_extra()
    listener = await anyio.create_tcp_listener(local_host=http_config.host, local_port=http_config.port)
    stop = anyio.Event()
    async with listener, anyio.create_task_group() as tg:
        url = await tg.start(_serve, config, http_config, listener, stop, drain)
        log.info("serving MCP over Streamable HTTP at %s", url)
        task_status.started(url)
        try:
            await stop.wait()  # set once a drain has finished; otherwise this waits until cancelled
        finally:
            stop.set()


async def _serve(
    config: ServerConfig,
    http_config: HttpConfig,
    listener: MultiListener[anyio.abc.SocketStream],
    stop: anyio.Event,
    drain: anyio.Event | None,
    *,
    task_status: anyio.abc.TaskStatus[str],
) -> None:
    """The server's life, shielded: cancelling `serve_http` sets `stop`, and this stops in order.

    In order: every answer is cut short and new requests are refused, hypercorn closes its connections, then
    `McpServer.open` ends (calls cancelled, an admitted drop completes, Lean stops), as at stdio's EOF.
    """
    from .app import Endpoint, build_app

    with anyio.CancelScope(shield=True):
        async with McpServer.open(config) as server:
            endpoint = Endpoint(server, http_config, listener.extra(SocketAttribute.local_port))
            stopped = anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(_run_hypercorn, build_app(endpoint), http_config, listener, stop, stopped)
                tg.start_soon(endpoint.sessions.sweep)
                if drain is not None:
                    tg.start_soon(_drain_when, drain, endpoint, http_config.drain_deadline, stop)
                task_status.started(endpoint.url)
                await stop.wait()
                endpoint.close()
                with anyio.move_on_after(2 * SHUTDOWN_TIMEOUT):
                    await stopped.wait()
                tg.cancel_scope.cancel()


async def _drain_when(drain: anyio.Event, endpoint: Endpoint, deadline: float, stop: anyio.Event) -> None:
    await drain.wait()
    log.warning("draining: no new calls; waiting up to %g s for the calls in flight", deadline)
    await endpoint.drain_calls(deadline)
    stop.set()


async def _run_hypercorn(
    app: Any,
    config: HttpConfig,
    listener: MultiListener[anyio.abc.SocketStream],
    stop: anyio.Event,
    stopped: anyio.Event,
) -> None:
    # hypercorn takes the listening sockets over (`fd://N`, duplicates of ours, which close here).
    binds = [f"fd://{os.dup(sock.extra(SocketAttribute.raw_socket).fileno())}" for sock in listener.listeners]
    await listener.aclose()
    try:
        await _serve_function()(app, _hypercorn(config, binds), shutdown_trigger=stop.wait)
    finally:
        stopped.set()
    if not stop.is_set():
        raise RuntimeError("the HTTP server stopped on its own")


def _hypercorn(config: HttpConfig, binds: list[str]) -> Config:
    from hypercorn.config import Config

    hypercorn = Config()
    hypercorn.bind = binds
    # hypercorn closes a connection that has no complete request head this long after it opened or after its
    # previous response (its idle timer keeps running while a head trickles in).
    hypercorn.keep_alive_timeout = config.header_timeout
    hypercorn.h11_max_incomplete_size = config.max_head
    hypercorn.h2_max_header_list_size = config.max_head
    hypercorn.graceful_timeout = SHUTDOWN_TIMEOUT
    hypercorn.include_server_header = False
    hypercorn.accesslog = None
    hypercorn.errorlog = logging.getLogger("beam_mcp.http.hypercorn")
    return hypercorn


def _serve_function() -> _Serve:
    """The `serve` of hypercorn for the running event loop: its trio worker under trio, else its asyncio worker."""
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            pass
        else:
            from hypercorn.trio import serve as serve_trio

            return serve_trio
    from hypercorn.asyncio import serve as serve_asyncio

    return serve_asyncio
