"""Serving Streamable HTTP (`beam_mcp._http.serve`): the bound port, hypercorn's framing, shutdown, the command.

Framing-level answers (malformed HTTP, an oversized or late request head, `Expect: 100-continue`, keep-alive,
HTTP/2) come from hypercorn; they are checked over raw loopback sockets where httpx cannot produce the request.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest

from beam_mcp import HttpConfig, serve_http
from beam_mcp._http import MAX_RECEIVING, MAX_REQUESTS, require_extra
from beam_mcp._http.serve import _serve_function
from beam_mcp.errors import INVALID_REQUEST

from .http_support import (
    ACCEPT,
    HOLD,
    POST_HEADERS,
    TIMEOUT,
    call,
    modern_headers,
    project,
    request,
    served,
    server_config,
)

pytestmark = pytest.mark.anyio

DISCOVER = json.dumps(request(1, "server/discover")).encode()
DISCOVER_HEAD = (
    "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
    f"accept: {ACCEPT}\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: server/discover\r\n"
)


async def exchange(port: int, data: bytes, *, then: bytes = b"") -> bytes:
    """Send `data` (and `then` once the server said something) on a new connection; all it answers, to EOF."""
    received = b""
    with anyio.fail_after(TIMEOUT):
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(data)
            if then:
                received = await stream.receive()
                await stream.send(then)
            while True:
                try:
                    received += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return received


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


# ---- serving ----------------------------------------------------------------------------------------------------
async def test_serve_http_reports_the_url_with_the_port_it_bound() -> None:
    async with served(server_config()) as client:
        assert client.url == f"http://127.0.0.1:{client.port}/mcp" and client.port > 0
        response = await client.post(DISCOVER, modern_headers(request(1, "server/discover")))
        assert response.status_code == 200 and response.json()["result"]["supportedVersions"] == ["2026-07-28"]


async def test_an_address_in_use_is_an_oserror() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        config = HttpConfig(host="127.0.0.1", port=taken.getsockname()[1])
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                with pytest.raises(OSError):
                    await tg.start(serve_http, server_config(), config)


async def test_cancelling_the_server_closes_its_connections_and_stops(tmp_path: Path) -> None:
    root = str(project(tmp_path / "proj"))
    serving = anyio.CancelScope()
    stopped = anyio.Event()

    async def serve(*, task_status: anyio.abc.TaskStatus[str]) -> None:
        with serving:
            await serve_http(server_config(HOLD), HttpConfig(), task_status=task_status)
        stopped.set()

    async with anyio.create_task_group() as tg, httpx.AsyncClient(timeout=TIMEOUT) as client:
        url = await tg.start(serve)
        warm = call(1, "lean_sync", {"workspace": {"root": root}, "path": "A.lean"})
        await client.post(
            url, content=json.dumps(warm).encode(), headers=[*POST_HEADERS.items(), *modern_headers(warm)]
        )
        held = call(2, "lean_workspace_symbols", {"workspace": {"root": root}, "query": "a"}, progressToken="t")
        headers = [*POST_HEADERS.items(), *modern_headers(held)]
        async with client.stream("POST", url, content=json.dumps(held).encode(), headers=headers) as response:
            chunks = response.aiter_raw()
            assert (await chunks.__anext__()).startswith(b"event: message\ndata: ")  # the call is in flight
            serving.cancel()
            with anyio.fail_after(TIMEOUT), pytest.raises(httpx.RemoteProtocolError):
                async for _ in chunks:  # the server cut the answer short and closed the connection
                    pass
        with anyio.fail_after(TIMEOUT):
            await stopped.wait()
    with pytest.raises(OSError):
        await anyio.connect_tcp("127.0.0.1", port_of(url))  # nothing listens any more


# ---- framing (hypercorn) ----------------------------------------------------------------------------------------
async def test_malformed_http_is_400_from_hypercorn_and_closes_the_connection() -> None:
    async with served(server_config()) as client:
        answer = await exchange(client.port, b"NOT HTTP\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400 ") and b"connection: close" in answer.lower()


@pytest.mark.parametrize(
    ("size", "body"),
    [(70 * 1024, b'"error"'), (200 * 1024, b"")],
    ids=["a head that arrived whole: the app's JSON-RPC error", "a head past the parser's limit: hypercorn's"],
)
async def test_a_head_over_64_kib_is_431(size: int, body: bytes) -> None:
    async with served(server_config()) as client:
        head = DISCOVER_HEAD.encode() + b"x-big: " + b"a" * size + b"\r\ncontent-length: 0\r\n\r\n"
        answer = await exchange(client.port, head)
        assert answer.startswith(b"HTTP/1.1 431 ") and body in answer


async def test_a_connection_without_a_complete_head_is_closed_quietly_after_the_header_timeout() -> None:
    async with served(server_config(), header_timeout=0.05) as client:
        assert await exchange(client.port, b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n") == b""
        assert await exchange(client.port, b"") == b""  # an idle connection too


async def test_a_body_behind_expect_100_continue_is_read_at_once() -> None:
    async with served(server_config()) as client:
        head = f"{DISCOVER_HEAD}expect: 100-continue\r\ncontent-length: {len(DISCOVER)}\r\nconnection: close\r\n\r\n"
        answer = await exchange(client.port, head.encode(), then=DISCOVER)
        assert answer.startswith(b"HTTP/1.1 100 ") and b"HTTP/1.1 200 " in answer and b'"supportedVersions"' in answer


async def test_one_connection_serves_requests_one_after_another() -> None:
    async with served(server_config()) as client:
        one = f"{DISCOVER_HEAD}content-length: {len(DISCOVER)}\r\n\r\n".encode() + DISCOVER
        last = f"{DISCOVER_HEAD}content-length: {len(DISCOVER)}\r\nconnection: close\r\n\r\n".encode() + DISCOVER
        answer = await exchange(client.port, one + one + last)
        assert answer.count(b"HTTP/1.1 200 ") == 3


async def test_a_body_declared_too_large_is_413_and_closes_the_connection() -> None:
    async with served(server_config()) as client:
        head = f"{DISCOVER_HEAD}content-length: {4 * 1024 * 1024 + 1}\r\n\r\n"
        answer = await exchange(client.port, head.encode())
        assert answer.startswith(b"HTTP/1.1 413 ") and b"connection: close" in answer.lower()
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["code"] == INVALID_REQUEST


async def test_http2_is_refused_with_505() -> None:
    async with served(server_config()) as client, httpx.AsyncClient(http1=False, http2=True) as h2:
        message = request(1, "server/discover")
        headers = [*POST_HEADERS.items(), *modern_headers(message)]
        response = await h2.post(client.url, content=json.dumps(message).encode(), headers=headers)
        assert response.http_version == "HTTP/2" and response.status_code == 505
        assert response.json()["error"]["code"] == INVALID_REQUEST


# ---- slow clients -------------------------------------------------------------------------------------------------
SLOW_HEAD = f"{DISCOVER_HEAD}content-length: {len(DISCOVER)}\r\n\r\n".encode() + DISCOVER[:1]
"""A discover request whose body stops after its first byte (the rest trickles in as spaces, then stops)."""


class Answers:
    """What trickling clients were answered; `enough` is set once `expected` answers arrived."""

    def __init__(self, expected: int) -> None:
        self.items: list[bytes] = []
        self.expected = expected
        self.enough = anyio.Event()

    def add(self, answer: bytes) -> None:
        self.items.append(answer)
        if len(self.items) >= self.expected:
            self.enough.set()


async def trickle(
    port: int,
    data: bytes,
    interval: float,
    answers: Answers | None = None,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> bytes:
    """Send `data`, then one more byte every `interval` s until the server closes; what it answered."""
    answer = b""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream, anyio.create_task_group() as tg:
        await stream.send(data)
        task_status.started()

        async def drip() -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                while True:
                    await anyio.sleep(interval)  # the client's pace, not synchronization
                    await stream.send(b" ")

        tg.start_soon(drip)
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            while True:
                answer += await stream.receive()
        tg.cancel_scope.cancel()
    if answers is not None:
        answers.add(answer)
    return answer


async def test_slow_bodies_from_one_peer_cannot_lock_out_a_client_that_sends_its_body_at_once() -> None:
    slow = MAX_REQUESTS + 8  # more trickling bodies than requests may be answered, all from 127.0.0.1
    async with served(server_config()) as client, anyio.create_task_group() as tg:
        answers = Answers(slow - MAX_RECEIVING)
        for _ in range(slow):
            await tg.start(trickle, client.port, SLOW_HEAD, 1.0, answers)
        with anyio.fail_after(TIMEOUT):
            await answers.enough.wait()  # every body beyond the intake's slots was evicted
        for _ in range(20):
            with anyio.fail_after(5):
                response = await client.post(DISCOVER, modern_headers(request(1, "server/discover")))
            assert response.status_code == 200 and response.json()["result"]["supportedVersions"]
        tg.cancel_scope.cancel()
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers.items)
    assert all(b"the request body was too slow" in answer for answer in answers.items)


async def test_a_body_trickled_past_its_deadline_is_408_and_closes_the_connection() -> None:
    async with served(server_config(), body_deadline=0.5) as client:
        with anyio.fail_after(TIMEOUT):
            answer = await trickle(client.port, SLOW_HEAD, 0.02)  # a byte every 20 ms: never a stall
    assert answer.startswith(b"HTTP/1.1 408 ") and b"connection: close" in answer.lower()
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert error == {"code": INVALID_REQUEST, "message": "the request body took longer than 0.5 s"}


async def test_a_head_that_trickles_in_is_closed_quietly_at_the_header_timeout() -> None:
    async with served(server_config(), header_timeout=0.5) as client:
        with anyio.fail_after(TIMEOUT):  # a byte every 20 ms for ever: hypercorn's timer does not restart
            assert await trickle(client.port, b"POST /mcp HTTP/1.1\r\nx-slow: ", 0.02) == b""


async def test_an_idle_kept_alive_connection_is_closed_at_the_header_timeout() -> None:
    async with served(server_config(), header_timeout=0.5) as client:
        one = f"{DISCOVER_HEAD}content-length: {len(DISCOVER)}\r\n\r\n".encode() + DISCOVER
        answer = await exchange(client.port, one)  # to EOF: the server closes the idle connection
        assert answer.startswith(b"HTTP/1.1 200 ") and b"connection: close" not in answer.lower()


# ---- the extra, the event loop ----------------------------------------------------------------------------------
async def test_serving_without_the_http_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hypercorn", None)
    with pytest.raises(ImportError, match=r"pip install 'beam-mcp\[http\]'"):
        require_extra()
    with pytest.raises(ImportError, match="hypercorn is not installed"):
        await serve_http(server_config())


async def test_hypercorn_runs_its_asyncio_worker_unless_trio_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from hypercorn.asyncio import serve as serve_asyncio

    class Lowlevel:
        @staticmethod
        def current_task() -> Any:
            raise RuntimeError("must be called from async context")

    class Trio:  # imported, but not the running event loop
        lowlevel = Lowlevel

    monkeypatch.setitem(sys.modules, "trio", Trio)
    assert _serve_function() is serve_asyncio


# ---- the command --------------------------------------------------------------------------------------------------
async def test_the_command_serves_http_on_a_free_port_and_stops_on_sigterm() -> None:
    proc = await anyio.open_process([sys.executable, "-m", "beam_mcp", "--http", "127.0.0.1:0"])
    async with proc:
        try:
            assert proc.stderr is not None
            line = b""
            with anyio.fail_after(60):
                while b"\n" not in line:
                    line += await proc.stderr.receive()
            text = line.decode()
            assert text.startswith("lean-beam-mcp: serving MCP over Streamable HTTP at http://127.0.0.1:")
            url = text.split(" at ", 1)[1].split()[0]
            assert url == f"http://127.0.0.1:{port_of(url)}/mcp"
            message = request(1, "server/discover")
            headers = [*POST_HEADERS.items(), *modern_headers(message)]
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                assert (
                    await client.post(url, content=json.dumps(message).encode(), headers=headers)
                ).status_code == 200
            proc.send_signal(signal.SIGTERM)
            with anyio.fail_after(60):
                assert await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()


def test_an_address_in_use_exits_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "beam_mcp", "--http", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert done.returncode == 1 and f"cannot serve HTTP on 127.0.0.1:{port}" in done.stderr


def test_http_without_the_extra_exits_1_saying_what_to_install() -> None:
    script = "import sys; sys.modules['starlette'] = None; from beam_mcp.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", script, "--http", "127.0.0.1:0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "--http: Streamable HTTP needs" in done.stderr and "pip install 'beam-mcp[http]'" in done.stderr
    assert "from a checkout: pip install -e 'packages/beam-mcp[http]'" in done.stderr  # not on PyPI yet
