"""Reliability-suite support: a live in-process server a synchronous hypothesis test can drive.

Hypothesis drives synchronous test functions; the server is asynchronous. `LiveServer` runs one `McpServer`
(the real broker over the fake Lean server) in a blocking portal for a whole module, so every example talks to
the same process, as a long-lived client would, and state left behind by one example must not break the next.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from tests.mcp.support import Harness, harness, make_project, modern_meta

INTERNAL_ERROR = -32603
SENTINEL_PREFIX = "sentinel-"


class LiveServer:
    """One server in a portal: send a line, get every message it wrote up to a sentinel's answer."""

    def __init__(self, portal: BlockingPortal, h: Harness, root: Path) -> None:
        self.portal = portal
        self.h = h
        self.root = root
        self._ids = itertools.count()

    def exchange(self, line: bytes) -> list[dict[str, Any]]:
        """Send `line`, then a sentinel request; return what the server wrote before the sentinel's answer.

        The sentinel (`tools/call beam_version` with modern metadata on a fresh id) is always answered, whatever
        family earlier lines selected, so its answer proves the server is alive and marks the end of the output
        the line caused (answers of calls still in flight may come later: they are not asserted here).
        """
        return self.portal.call(self._exchange, line)

    async def _exchange(self, line: bytes) -> list[dict[str, Any]]:
        await self.h.send(line if line.endswith(b"\n") else line + b"\n")
        rid = f"{SENTINEL_PREFIX}{next(self._ids)}"
        params = {"name": "beam_version", "arguments": {}, "_meta": modern_meta()}
        sentinel = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        await self.h.send(json.dumps(sentinel).encode())
        with anyio.fail_after(30):
            _, before = await self.h.until(rid)
        return before

    def call(self, name: str, arguments: Any, **meta: Any) -> dict[str, Any]:
        """One tool call's response (bounded)."""
        return self.portal.call(self._call, name, arguments, meta)

    async def _call(self, name: str, arguments: Any, meta: dict[str, Any]) -> dict[str, Any]:
        with anyio.fail_after(30):
            response, _ = await self.h.call(name, arguments, **meta)
        return response


@contextlib.contextmanager
def live_server(tmp: Path, lean: dict[str, Any] | None = None, **config: Any) -> Iterator[LiveServer]:
    """A `LiveServer` on a fresh fake-lane project under `tmp` (files `A.lean` clean, `B.lean` with an error)."""
    root = make_project(
        tmp / "proj", {"A.lean": "theorem a : True := by\n  trivial\n", "B.lean": "def b := ERROR_HERE\n"}
    )
    with start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(harness(lean, **config)) as h:
        yield LiveServer(portal, h, root)


def assert_well_formed(messages: list[dict[str, Any]]) -> None:
    """What every output message must be: JSON-RPC 2.0, and never an internal error."""
    for message in messages:
        assert message.get("jsonrpc") == "2.0", message
        error = message.get("error")
        if isinstance(error, dict):
            assert error.get("code") != INTERNAL_ERROR, message
