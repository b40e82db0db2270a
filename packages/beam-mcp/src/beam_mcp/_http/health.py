"""What `GET /healthz` answers: a tiny JSON status for load balancers and orchestrators.

This module owns the health body: `status` (`ok`, or `stopping` once shutdown began: answered 503 so a balancer
takes the replica out before it goes), the server's `name` and `version`, `uptimeMs` since the endpoint started
serving, and `workspaces`, the number of workspace runtimes this replica holds. Computing it is cheap by
construction: it reads what is already in memory, never starts the broker or Lean, and never waits (not behind
calls, the drop fence or the broker loading). It must not do I/O or know HTTP beyond the status code.

It also owns what `GET /readyz` answers: `{"status": "ready"}` (200) while the replica takes calls, else 503 with
`starting` (the broker is still loading), `draining` or `stopping`: a balancer sends calls only to ready replicas.
"""

from __future__ import annotations

import json
import time

from beam_mcp.__about__ import __version__
from beam_mcp._protocol import SERVER_NAME
from beam_mcp.server import McpServer


def health(server: McpServer, started: float, *, stopping: bool, draining: bool = False) -> tuple[int, bytes]:
    """The status code and JSON body of a health check (`started`: `time.monotonic()` when serving began).

    A draining replica is alive (200, `"status": "draining"`): an orchestrator must not kill it for draining.
    """
    body = {
        "status": "stopping" if stopping else "draining" if draining else "ok",
        "name": SERVER_NAME,
        "version": __version__,
        "uptimeMs": int((time.monotonic() - started) * 1000),
        "workspaces": server.workspace_count(),
    }
    return (503 if stopping else 200), json.dumps(body, separators=(",", ":")).encode()


def readiness(state: str) -> tuple[int, bytes]:
    """The status code and JSON body of a readiness check (`state`: ready, starting, draining or stopping)."""
    return (200 if state == "ready" else 503), json.dumps({"status": state}, separators=(",", ":")).encode()
