"""The health endpoint (`GET /healthz`, `beam_mcp._http.health`): cheap, exempt from the request cap, behind Host.

The real server and broker run over the fake Lean server; answers are read in-process (httpx's ASGI transport), and
once on a loopback server with the HTTP/1.0 request a load balancer's health check sends.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from beam_mcp import HttpConfig, McpServer
from beam_mcp.__about__ import __version__
from beam_mcp._http.app import Endpoint
from beam_mcp._http.health import health
from beam_mcp.errors import INVALID_REQUEST

from .http_support import TIMEOUT, app_client, call, error_code, final, in_process, project, served, server_config

pytestmark = pytest.mark.anyio


async def test_health_answers_a_tiny_json_status_without_starting_lean() -> None:
    async with in_process() as client:
        response = await client.http.get("/healthz")
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        assert response.headers["cache-control"] == "no-store"
        body = response.json()
        assert set(body) == {"status", "name", "version", "uptimeMs", "workspaces"}
        assert (body["status"], body["name"], body["version"], body["workspaces"]) == (
            "ok",
            "lean-beam-mcp",
            __version__,
            0,
        )
        assert isinstance(body["uptimeMs"], int) and body["uptimeMs"] >= 0
        stats = await client.modern(call(1, "beam_stats"))
        assert final(stats)["result"]["structuredContent"]["workspaces"] == {}


async def test_health_counts_the_workspaces_this_replica_holds(tmp_path: Path) -> None:
    async with in_process() as client:
        for name in ("one", "two"):
            root = str(project(tmp_path / name))
            synced = await client.modern(call(name, "lean_sync", {"workspace": {"root": root}, "path": "A.lean"}))
            assert final(synced)["result"]["isError"] is False
        assert (await client.http.get("/healthz")).json()["workspaces"] == 2


async def test_health_is_behind_the_host_and_origin_checks_and_answers_only_get() -> None:
    async with in_process() as client:
        foreign = await client.http.get("/healthz", headers={"host": "evil.example"})
        assert foreign.status_code == 403 and error_code(foreign) == INVALID_REQUEST
        cross_site = await client.http.get("/healthz", headers={"origin": "http://evil.example"})
        assert cross_site.status_code == 403
        posted = await client.http.post("/healthz", content=b"{}")
        assert posted.status_code == 405 and posted.headers["allow"] == "GET"
        assert error_code(posted) == INVALID_REQUEST
        assert (await client.http.get("/healthz/")).status_code == 404


async def test_health_is_exempt_from_the_request_cap() -> None:
    async with in_process(max_requests=0) as client:  # every MCP request is over the cap
        assert (await client.call_modern("tools/list")).status_code == 503
        assert (await client.http.get("/healthz")).status_code == 200


async def test_a_stopping_replica_answers_503_so_balancers_take_it_out() -> None:
    async with McpServer.open(server_config()) as server:
        endpoint = Endpoint(server, HttpConfig(), 8765)
        async with app_client(endpoint) as client:
            endpoint.close()
            response = await client.http.get("/healthz")
            assert response.status_code == 503 and response.json()["status"] == "stopping"


async def test_uptime_counts_from_when_the_endpoint_started_serving() -> None:
    async with McpServer.open(server_config()) as server:
        status, body = health(server, time.monotonic() - 2.5, stopping=False)
        assert status == 200 and b'"uptimeMs":25' in body


async def test_a_load_balancers_http_1_0_check_is_answered_on_a_real_socket() -> None:
    async with served() as client:
        with anyio.fail_after(TIMEOUT):
            stream = await anyio.connect_tcp("127.0.0.1", client.port)
            async with stream:
                await stream.send(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")
                answer = b""
                try:
                    while True:
                        answer += await stream.receive()
                except anyio.EndOfStream:
                    pass
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200") or head.startswith(b"HTTP/1.1 200"), head
        assert b'"status":"ok"' in body
