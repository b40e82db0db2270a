"""The operator's side of the HTTP server: `/metrics`, `/readyz`, the status page `/`, `busy`, and draining.

Everything runs the real server and broker over the scripted fake Lean server; the status page is rendered by
headless Chromium (Debian's `chromium`), which writes a screenshot next to the test's output.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from beam_mcp._http import HttpConfig, serve_http
from beam_mcp._http.app import Endpoint
from beam_mcp.server import McpServer
from tests.support.fixtures import LeanGate, gated_cmd

from .http_support import TIMEOUT, Client, app_client, call, final, in_process, project, served, server_config

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition text, by name and sorted labels."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    response = await client.modern(call(next(client.ids), name, arguments))
    assert response.status_code == 200, response.text
    result: dict[str, Any] = final(response)["result"]
    return result


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll the server until `check()` holds (its state is only visible over HTTP), bounded by TIMEOUT."""
    with anyio.fail_after(TIMEOUT):
        while True:
            if await check():
                return
            await anyio.sleep(0.02)


async def ready(client: Client) -> None:
    """Wait until the broker has loaded (readiness turns 200)."""

    async def check() -> bool:
        return (await client.http.get("/readyz")).status_code == 200

    await until(check)


async def in_flight(http: httpx.AsyncClient, lane: str) -> None:
    """Wait until one call of `lane` is in flight (as `/metrics` says)."""

    async def check() -> bool:
        return samples((await http.get("/metrics")).text).get(("beam_calls_in_flight", (("lane", lane),))) == 1

    await until(check)


async def test_metrics_count_what_was_done_and_need_the_token(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    ws = {"workspace": {"root": str(root)}}
    async with in_process(server_config(), token=_token()) as client:
        client.http.headers.update(AUTH)
        for _ in range(3):
            synced = await tool(client, "lean_sync", **ws, path="A.lean")
            assert synced["isError"] is False
        version = synced["structuredContent"]["version"]
        assert (await tool(client, "lean_hover", **ws, path="A.lean", version=version, line=0, character=8))[
            "isError"
        ] is False
        stale = await tool(client, "lean_hover", **ws, path="A.lean", version=version + 5, line=0, character=8)
        assert stale["isError"] is True and stale["structuredContent"]["code"] == "contentModified"
        response = await client.http.get("/metrics")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
        got = samples(response.text)
        denied = await client.http.get("/metrics", headers={"authorization": "Bearer wrong"})
        assert denied.status_code == 401
    assert got[("beam_calls_total", (("outcome", "success"), ("tool", "lean_sync")))] == 3
    assert got[("beam_calls_total", (("outcome", "success"), ("tool", "lean_hover")))] == 1
    assert got[("beam_calls_total", (("outcome", "contentModified"), ("tool", "lean_hover")))] == 1
    assert got[("beam_call_duration_seconds_count", (("tool", "lean_sync"),))] == 3
    assert got[("beam_call_duration_seconds_count", (("tool", "lean_hover"),))] == 2
    assert got[("beam_workspaces", ())] == 1
    assert got[("beam_open_documents", (("workspace", str(root)),))] == 1
    assert got[("beam_calls_in_flight", (("lane", "heavy"),))] == 0
    assert got[("beam_ready", ())] == 1 and got[("beam_draining", ())] == 0
    assert got[("beam_memory_budget_bytes", ())] == 0
    assert got[("beam_lean_resident_bytes", (("toolchain", ""), ("workspace", str(root))))] > 0  # the fake server


def _token() -> Any:
    from beam_mcp._http import BearerToken

    return BearerToken(TOKEN)


async def test_a_call_past_the_admission_limit_is_a_busy_tool_error_with_a_retry_hint(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    ws = {"workspace": {"root": str(root)}}
    config = server_config(
        {"stall": ["textDocument/waitForDiagnostics"]},
        broker={"max_workspace_heavy_calls": 1, "admission_wait": 0.1},
    )
    async with served(config) as client, anyio.create_task_group() as tg:
        tg.start_soon(lambda: tool(client, "lean_sync", **ws, path="A.lean"))
        await in_flight(client.http, "heavy")
        busy = await tool(client, "lean_sync", **ws, path="A.lean")
        got = samples((await client.http.get("/metrics")).text)
        tg.cancel_scope.cancel()
    assert busy["isError"] is True
    error = busy["structuredContent"]
    assert error["code"] == "busy" and error["data"]["retryAfterMs"] >= 100 and error["data"]["scope"] == "workspace"
    assert got[("beam_calls_total", (("outcome", "busy"), ("tool", "lean_sync")))] == 1
    assert got[("beam_calls_rejected_total", (("reason", "busy"),))] == 1


async def test_a_drain_turns_readiness_off_refuses_new_calls_and_lets_calls_in_flight_finish(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    ws = {"workspace": {"root": str(root)}}
    drain = anyio.Event()
    done: list[dict[str, Any]] = []
    config = server_config()
    config = dataclasses.replace(config, lean_cmd=gated_cmd(list(config.lean_cmd or [])))
    async with LeanGate.install(root) as gate, anyio.create_task_group() as tg:
        with anyio.fail_after(TIMEOUT):
            url = await tg.start(_serve, config, HttpConfig(host="127.0.0.1", port=0, drain_deadline=60), drain)
        async with httpx.AsyncClient(base_url=url.rsplit("/", 1)[0], timeout=TIMEOUT) as http:
            client = Client(http, url, 0)
            await ready(client)
            assert (await http.get("/readyz")).json() == {"status": "ready"}

            answered = anyio.Event()

            async def held_hover() -> None:
                done.append(await tool(client, "lean_hover", **ws, path="A.lean", version=1, line=0, character=8))
                answered.set()

            tg.start_soon(held_hover)
            with anyio.fail_after(TIMEOUT):
                await gate.reached()  # the hover is in flight, held by "Lean"
            drain.set()

            async def not_ready() -> bool:
                return (await http.get("/readyz")).status_code == 503

            await until(not_ready)
            assert (await http.get("/readyz")).json() == {"status": "draining"}
            health = await http.get("/healthz")
            assert health.status_code == 200 and health.json()["status"] == "draining"
            refused = await client.modern(call(99, "lean_sync", {**ws, "path": "A.lean"}))
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            gate.open()
            with anyio.fail_after(TIMEOUT):
                await answered.wait()
    assert done and done[0]["isError"] is False  # the call in flight finished; then the server stopped by itself


async def test_a_drain_keeps_refusing_while_requests_come_then_stops_by_itself(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    linger = 3.0
    drain, stopped = anyio.Event(), anyio.Event()
    http_config = HttpConfig(host="127.0.0.1", port=0, drain_deadline=60, drain_linger=linger)

    async def serve(*, task_status: Any) -> None:
        await serve_http(server_config(), http_config, drain=drain, task_status=task_status)
        stopped.set()

    async with anyio.create_task_group() as tg:
        with anyio.fail_after(TIMEOUT):
            url = await tg.start(serve)
        async with httpx.AsyncClient(base_url=url.rsplit("/", 1)[0], timeout=TIMEOUT) as http:
            client = Client(http, url, 0)
            await ready(client)
            drain.set()

            async def not_ready() -> bool:
                return (await http.get("/readyz")).status_code == 503

            await until(not_ready)
            # Nothing is in flight, yet a balancer that has not seen readiness turn false still sends: the server
            # keeps answering those requests with the retryable 503 instead of closing its socket under them.
            for i in range(5):
                refused = await client.modern(call(100 + i, "lean_sync", {"workspace": {"root": str(root)}}))
                assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
                assert not stopped.is_set()
                await anyio.sleep(linger / 10)  # the pace of a client, well within the linger
        with anyio.fail_after(TIMEOUT):
            await stopped.wait()  # once requests stop coming, the drain ends and the server stops by itself


async def test_a_drain_refuses_at_the_broker_only_once_the_requests_admitted_before_it_are_answered(
    tmp_path: Path,
) -> None:
    """The endpoint drains the server with `refuse=False` first: a request HTTP admitted before the drain must run
    (the broker's `busy` is a tool result that no balancer retries); only at the end does the broker refuse."""
    ws = {"workspace": {"root": str(project(tmp_path / "p"))}, "path": "A.lean"}
    async with McpServer.open(server_config()) as server:
        endpoint = Endpoint(server, HttpConfig(), 8765)
        async with app_client(endpoint) as client:
            await ready(client)
            server.drain(refuse=False)
            assert server.draining and not server.ready
            assert (await client.http.get("/readyz")).status_code == 503
            assert (await tool(client, "lean_sync", **ws))["isError"] is False  # admitted by HTTP: it runs
            server.drain()
            refused = (await tool(client, "lean_sync", **ws))["structuredContent"]
            assert refused["code"] == "busy" and refused["data"]["reason"] == "draining"
        endpoint.close()


async def _serve(config: Any, http: HttpConfig, drain: anyio.Event, *, task_status: Any) -> None:
    await serve_http(config, http, drain=drain, task_status=task_status)


async def test_a_drain_cancels_what_is_still_running_at_its_deadline(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    drain = anyio.Event()
    config = server_config({"stall": ["textDocument/waitForDiagnostics"]})
    outcome: list[str] = []
    ended = anyio.Event()
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(TIMEOUT):
            url = await tg.start(_serve, config, HttpConfig(host="127.0.0.1", port=0, drain_deadline=0.2), drain)
        async with httpx.AsyncClient(base_url=url.rsplit("/", 1)[0], timeout=TIMEOUT) as http:
            client = Client(http, url, 0)
            await ready(client)

            async def stuck() -> None:
                try:
                    await tool(client, "lean_sync", workspace={"root": str(root)}, path="A.lean")
                    outcome.append("answered")
                except (httpx.HTTPError, AssertionError, KeyError):
                    outcome.append("cut")
                ended.set()

            tg.start_soon(stuck)
            await in_flight(http, "heavy")
            drain.set()
            with anyio.fail_after(TIMEOUT):
                await ended.wait()
    assert outcome == ["cut"]


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


async def headless(browser: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """One headless Chromium run with a fresh profile of its own (two runs must not share one)."""
    profile = tempfile.mkdtemp(prefix="beam-chromium-")
    try:
        with anyio.fail_after(TIMEOUT * 3):
            return await anyio.run_process(
                [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], check=True, stderr=subprocess.DEVNULL
            )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    chromium() is None and os.environ.get("BEAM_CHROMIUM_REQUIRED") != "1",
    reason="chromium is not installed: the status page is not rendered (apt-get install -y chromium; CI installs it)",
)
async def test_the_status_page_renders_in_headless_chromium_without_javascript_and_shows_the_metrics(
    tmp_path: Path,
) -> None:
    browser = chromium()
    assert browser is not None, "BEAM_CHROMIUM_REQUIRED=1 but chromium is not installed"
    root = project(tmp_path / "p", {"A.lean": "theorem a : True := trivial\n", "B.lean": "example : True := ERR\n"})
    ws = {"workspace": {"root": str(root)}}
    async with served(server_config()) as client:
        await ready(client)
        await tool(client, "lean_sync", **ws, path="A.lean")
        await tool(client, "lean_sync", **ws, path="B.lean")
        await tool(client, "lean_hover", **ws, path="A.lean", version=99, line=0, character=0)  # an error
        got = samples((await client.http.get("/metrics")).text)
        page_url = f"http://127.0.0.1:{client.port}/"
        shot = Path(os.environ.get("BEAM_TEST_OUTPUT", tmp_path)) / "status-page.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        dom = await headless(browser, "--dump-dom", page_url)
        await headless(browser, f"--screenshot={shot}", "--window-size=1200,900", page_url)
    text = dom.stdout.decode()
    print(f"status page screenshot: {shot}")
    assert shot.stat().st_size > 0
    assert "<script" not in text
    assert str(root) in text
    resident = got[("beam_lean_resident_bytes_all", ())]
    assert f'<span id="resident">{resident / 2**20:.0f} MiB</span>' in text
    calls = got[("beam_calls_total", (("outcome", "success"), ("tool", "lean_sync")))]
    assert re.search(rf"<td>lean_sync</td><td>success</td><td class=\"n\">{int(calls)}</td>", text)
    assert re.search(r"<td>lean_hover</td><td>contentModified</td><td class=\"n\">1</td>", text)
    assert re.search(r"<td class=\"n\">2</td><td class=\"n\">0</td><td class=\"n\">0</td>", text)  # 2 documents
    assert "contentModified" in text.split("Recent errors", 1)[1]
