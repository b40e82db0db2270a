"""HAProxy in front of three `lean-beam-mcp --http` replicas (fake Lean), driven by the official MCP SDK client.

The shipped `deploy/haproxy/haproxy.cfg` routes by consistent hashing on `Mcp-Param-Workspace`, which the SDK
mirrors from `workspace.root` because every workspace-bound tool declares it with `x-mcp-header`. Placement is read
on the replicas themselves (`beam_stats`, bypassing HAProxy). Killing a replica mid-run must lose nothing and
answer nothing wrong: its in-flight calls fail at once (and are retried), its handles get the stale-session
`contentModified` error on the replica that takes its workspaces over, the next call works, and no other workspace
moves. A legacy session sticks to its replica by `Mcp-Session-Id`; a hung replica is taken out by health checks.

Skipped when `haproxy` is not installed, unless `BEAM_DEPLOY_REQUIRED=1` (`.ci/run`, where the `deploy` env can
install it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

from mcp import Client
from tests.mcp.http_support import project
from tests.support.fixtures import fake_cmd

from .cluster import MODERN, Cluster, cluster, haproxy_binary

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        haproxy_binary() is None and os.environ.get("BEAM_DEPLOY_REQUIRED") != "1",
        reason="haproxy is not installed: the deploy lane installs it (tox -e deploy; apt-get install -y haproxy)",
    ),
]

DEADLINE = 120
"""Seconds a whole scenario may take."""
SLOW_MS = 4000
"""`lean_workspace_symbols` answers after this long, so it is surely in flight when its replica is killed."""
WORKSPACES = 6


def source(index: int) -> str:
    """Workspace `index`'s file: its own theorem name, and `index % 3` errors (so answers cannot be mixed up)."""
    return f"theorem t{index} : True := trivial\n" + "example : True := ERROR_HERE\n" * (index % 3)


@dataclasses.dataclass
class Agent:
    """One MCP client working in one workspace, as an agent would, through HAProxy."""

    index: int
    root: str
    client: Client
    sent: list[tuple[str, str | None]]
    handle: dict[str, Any] | None = None

    @property
    def ws(self) -> dict[str, Any]:
        return {"workspace": {"root": self.root}}

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        """A tool call that must succeed; its structured result, checked to be about this workspace."""
        result = await self.client.call_tool(name, {**self.ws, **arguments})
        assert result.is_error is False, (name, result.structured_content)
        out = result.structured_content
        assert isinstance(out, dict) and out["workspace"] == {"root": self.root}, out
        return out

    async def round(self) -> None:
        """Sync, hover, a speculative run with a handle and its continuation; every answer is this file's."""
        synced = await self.tool("lean_sync", path="A.lean", diagnostics_in_result=True, diagnostic_scope="all")
        assert synced["diagnostics"]["counts"]["error"] == self.index % 3
        at = {"path": "A.lean", "version": synced["version"]}
        hover = await self.tool("lean_hover", **at, line=0, character=9)
        assert hover["contents"]["value"] == f"```lean\nt{self.index}\n```"
        ran = await self.tool("lean_run_at_handle", **at, line=0, character=0, text=f"def c{self.index} := 1")
        assert ran["success"] is True
        went_on = await self.tool(
            "lean_run_with", path="A.lean", handle=ran["next_handle"], text=f"#check c{self.index}"
        )
        self.handle = went_on["next_handle"] or ran["next_handle"]

    async def rounds(self, count: int) -> None:
        for _ in range(count):
            await self.round()


@contextlib.asynccontextmanager
async def sdk_client(url: str, sent: list[tuple[str, str | None]]) -> AsyncIterator[Client]:
    """The SDK's Streamable HTTP client (modern revision), its tool list fetched; `sent` records each tool call's
    `Mcp-Name` and `Mcp-Param-Workspace` as they leave the client."""

    async def record(request: httpx2.Request) -> None:
        if request.method == "POST" and request.headers.get("mcp-method") == "tools/call":
            sent.append((request.headers["mcp-name"], request.headers.get("mcp-param-workspace")))

    timeout = httpx2.Timeout(30, read=DEADLINE)
    async with (
        httpx2.AsyncClient(timeout=timeout, event_hooks={"request": [record]}) as http,
        Client(streamable_http_client(url, http_client=http), mode=MODERN) as client,
    ):
        await client.list_tools()  # the SDK mirrors x-mcp-header properties of the tools it has listed
        yield client


@contextlib.asynccontextmanager
async def agents(c: Cluster, tmp_path: Path) -> AsyncIterator[list[Agent]]:
    async with contextlib.AsyncExitStack() as stack:
        made = []
        for i in range(WORKSPACES):
            root = str(project(tmp_path / f"ws{i}", {"A.lean": source(i)}))
            sent: list[tuple[str, str | None]] = []
            made.append(Agent(i, root, await stack.enter_async_context(sdk_client(c.url, sent)), sent))
        yield made


async def test_workspaces_stay_on_one_replica_and_a_dead_replicas_move_with_nothing_lost(tmp_path: Path) -> None:
    lean = fake_cmd({"delay_ms": {"workspace/symbol": SLOW_MS}})
    with anyio.fail_after(DEADLINE):
        async with cluster(3, lean) as c, agents(c, tmp_path) as team:
            async with anyio.create_task_group() as tg:
                for agent in team:
                    tg.start_soon(agent.rounds, 2)
            home = await c.placement()
            assert set(home) == {agent.root for agent in team}  # each on exactly one replica (placement checks)
            for agent in team:  # the SDK mirrored the root on every call
                assert agent.sent and all(header == agent.root for _, header in agent.sent), agent.sent

            victim = max(sorted(set(home.values())), key=list(home.values()).count)
            moved = [agent for agent in team if home[agent.root] == victim]
            stayed = [agent for agent in team if home[agent.root] != victim]
            stale = {agent.index: agent.handle for agent in moved}
            lost: dict[int, Any] = {}
            admitted = {agent.index: anyio.Event() for agent in moved}

            async def in_flight(agent: Agent) -> None:
                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    admitted[agent.index].set()

                try:
                    await agent.client.call_tool(
                        "lean_workspace_symbols", {**agent.ws, "query": "t"}, progress_callback=on_progress
                    )
                except MCPError as exc:
                    lost[agent.index] = exc.code

            async with anyio.create_task_group() as tg:
                for agent in stayed:  # the others keep working while the replica dies
                    tg.start_soon(agent.rounds, 2)
                for agent in moved:
                    tg.start_soon(in_flight, agent)
                for agent in moved:
                    await admitted[agent.index].wait()
                killed = await c.kill(victim)
            assert lost == {agent.index: CONNECTION_CLOSED for agent in moved}  # cut at once, not hung

            timeline: list[tuple[float, float]] = []

            async def recover(agent: Agent) -> None:
                handle = stale[agent.index]
                assert handle is not None
                arguments = {**agent.ws, "path": "A.lean", "handle": handle, "text": "#check c"}
                answer = await agent.client.call_tool("lean_run_with", arguments)
                stale_at = time.monotonic()
                assert answer.is_error is True and answer.structured_content is not None
                assert answer.structured_content["code"] == "contentModified"
                assert answer.structured_content["data"] == {"reason": "staleSession"}
                synced = await agent.tool("lean_sync", path="A.lean")
                timeline.append((stale_at - killed, time.monotonic() - killed))
                assert synced["version"] == 1  # a fresh runtime on the replica that took the workspace over
                symbols = await agent.tool("lean_workspace_symbols", query="t")  # the lost call, retried
                assert symbols["result"] == []
                await agent.rounds(1)

            async with anyio.create_task_group() as tg:
                for agent in moved:
                    tg.start_soon(recover, agent)

            after = await c.placement()
            assert set(after) == set(home) and victim not in after.values()
            assert all(after[agent.root] == home[agent.root] for agent in stayed)  # only the dead one's moved
            assert (await c.states())[victim].startswith("DOWN")
            for agent in team:
                assert all(header == agent.root for _, header in agent.sent)
            for stale_s, ok_s in timeline:
                print(
                    f"failover: kill -> stale-handle answer {stale_s * 1e3:.0f} ms, first success {ok_s * 1e3:.0f} ms"
                )


async def test_a_legacy_session_sticks_to_the_replica_that_opened_it(tmp_path: Path) -> None:
    roots = [str(project(tmp_path / f"ws{i}")) for i in range(3)]
    with anyio.fail_after(DEADLINE):
        async with cluster(3, fake_cmd()) as c, Client(c.url, mode="legacy") as client:
            for _ in range(2):
                for root in roots:
                    result = await client.call_tool("lean_update", {"workspace": {"root": root}, "path": "A.lean"})
                    assert result.is_error is False, result.structured_content
            placement = await c.placement()
            assert set(placement) == set(roots) and len(set(placement.values())) == 1


async def test_a_replica_that_stops_answering_health_checks_is_taken_out(tmp_path: Path) -> None:
    root = str(project(tmp_path / "ws", {"A.lean": source(1)}))
    with anyio.fail_after(DEADLINE):
        async with cluster(3, fake_cmd()) as c, sdk_client(c.url, []) as client:
            ws = {"workspace": {"root": root}, "path": "A.lean"}
            assert (await client.call_tool("lean_sync", ws)).is_error is False
            home = (await c.placement())[root]
            stopped = time.monotonic()
            c.replica(home).child.process.send_signal(signal.SIGSTOP)  # connections accepted, nothing answered
            try:
                await c.wait_states({home: "DOWN"})  # two health checks timed out
                print(f"health checks: hung -> taken out {(time.monotonic() - stopped) * 1e3:.0f} ms")
                assert (await client.call_tool("lean_sync", ws)).is_error is False
            finally:
                await c.kill(home)
            placement = await c.placement()
            assert placement[root] != home  # its workspace moved to a healthy replica


async def test_a_rolling_restart_fails_no_call(tmp_path: Path) -> None:
    """Every replica drained (SIGTERM) and started again in turn while agents call: no call fails or errs.

    A draining replica answers new requests 503 until HAProxy's readiness checks take it out, HAProxy retries those
    on another replica (it holds each request whole: `option http-buffer-request`), and the replica closes its
    socket only once requests have stopped coming (the drain's linger), so no connection is reset unanswered.
    """
    roots = [str(project(tmp_path / f"ws{i}", {"A.lean": source(i)})) for i in range(WORKSPACES)]
    answered: list[tuple[str, bool]] = []
    finished = anyio.Event()

    async def agent(client: Client, index: int) -> None:
        while not finished.is_set():
            root = roots[index % WORKSPACES]
            index += 1
            ws = {"workspace": {"root": root}, "path": "A.lean"}
            try:
                synced = await client.call_tool("lean_sync", ws)
                content = synced.structured_content or {}
                answered.append(
                    (f"lean_sync {content}", not synced.is_error and content["workspace"] == {"root": root})
                )
                at = {**ws, "version": content.get("version", 1), "line": 0, "character": 9}
                hover = await client.call_tool("lean_hover", at)
                answered.append((f"lean_hover {hover.structured_content}", hover.is_error is False))
            except MCPError as exc:  # a 503 or a reset connection that reached the client
                answered.append((f"{exc!r}", False))

    with anyio.fail_after(DEADLINE):
        async with cluster(2, fake_cmd(), extra_args=["--drain-timeout", "10"]) as c:
            async with contextlib.AsyncExitStack() as stack:
                clients = [await stack.enter_async_context(sdk_client(c.url, [])) for _ in range(WORKSPACES)]
                async with anyio.create_task_group() as tg:
                    for i, client in enumerate(clients):
                        tg.start_soon(agent, client, i)
                    codes = [await c.drain_restart(replica.name) for replica in list(c.replicas)]
                    finished.set()
            assert codes == [0, 0]  # each drained and exited 0
    failed = [what for what, ok in answered if not ok]
    print(f"rolling restart of 2 replicas: {len(answered)} calls, {len(failed)} failed")
    assert answered and failed == [], failed[:5]
