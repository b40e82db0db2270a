"""The bearer token (`beam_mcp._http.auth`, rule 3a): its sources, the constant-time check, the 401, and secrecy.

The token as a value (what is valid, files, the environment, never shown), the endpoint in-process (httpx's ASGI
transport) and on a real loopback server (httpx and the official MCP SDK client), and the `lean-beam-mcp` command
with `--http-token-file` and `LEAN_BEAM_MCP_TOKEN` (the token in no log line, error or `--help`).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup
from mcp.shared.exceptions import MCPError
from starlette.datastructures import Headers

from beam_mcp import HttpConfig, cli
from beam_mcp._http import TOKEN_ENV, BearerToken, TokenError
from beam_mcp._http.auth import readable_by_others
from beam_mcp._http.rules import CHALLENGE, Admission, Rejected
from beam_mcp.errors import INVALID_REQUEST
from mcp import Client

from .http_support import (
    INIT,
    POST_HEADERS,
    TIMEOUT,
    call,
    final,
    in_process,
    modern_headers,
    project,
    request,
    served,
    structured,
)

pytestmark = pytest.mark.anyio
TOKEN = "tok-3f9a_Zq.~+/x=="
BEARER = {"authorization": f"Bearer {TOKEN}"}


# ---- the token as a value ------------------------------------------------------------------------------------
def test_a_token_never_shows_its_value() -> None:
    token = BearerToken(TOKEN)
    assert repr(token) == str(token) == "BearerToken(<redacted>)"
    config = HttpConfig(token=token)
    assert TOKEN not in repr(config) and "token" not in repr(config)
    assert token == BearerToken(TOKEN) and token != BearerToken("y" + TOKEN) and token != TOKEN
    assert hash(token) == hash(BearerToken("other")), "the hash says nothing about the value"


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "empty"),
        ("has space", "only letters"),
        ("tök", "only letters"),
        ("=abc", "only letters"),
        ("a" * 4097, "longer than 4096"),
    ],
)
def test_tokens_that_cannot_travel_in_a_header_are_refused_without_echoing_them(value: str, fragment: str) -> None:
    with pytest.raises(TokenError) as refused:
        BearerToken(value)
    assert fragment in str(refused.value)
    if value:
        assert value not in str(refused.value)


@pytest.mark.parametrize(
    ("sent", "admitted"),
    [
        ([f"Bearer {TOKEN}"], True),
        ([f"bearer {TOKEN}"], True),
        ([f"BEARER   {TOKEN} "], True),
        ([f"Bearer {TOKEN}x"], False),
        ([f"Bearer {TOKEN[:-1]}"], False),
        ([TOKEN], False),
        ([f"Basic {TOKEN}"], False),
        (["Bearer"], False),
        (["Bearer "], False),
        ([f"Bearer {TOKEN}", f"Bearer {TOKEN}"], False),
        ([], False),
        ([f"Bearer {TOKEN}\u00e9"], False),
    ],
)
def test_only_one_authorization_header_carrying_the_token_is_admitted(sent: list[str], admitted: bool) -> None:
    assert BearerToken(TOKEN).admits(sent) is admitted


def test_credentials_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def compare_digest(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", compare_digest)  # what `BearerToken.admits` calls
    assert BearerToken(TOKEN).admits([f"Bearer {TOKEN}"]) is True
    assert BearerToken(TOKEN).admits(["Bearer wrong"]) is False
    assert compared == [(TOKEN.encode(), TOKEN.encode()), (b"wrong", TOKEN.encode())]


def test_a_token_file_holds_the_token_and_its_surrounding_whitespace_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n", encoding="utf-8")
    assert BearerToken.from_file(path) == BearerToken(TOKEN)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(TokenError, match="not UTF-8"):
        BearerToken.from_file(path)
    path.write_text("two words\n", encoding="utf-8")
    with pytest.raises(TokenError) as bad:
        BearerToken.from_file(path)
    assert str(path) in str(bad.value) and "two words" not in str(bad.value)
    with pytest.raises(TokenError, match="cannot read the token file"):
        BearerToken.from_file(tmp_path / "missing")
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(TokenError, match="empty"):
        BearerToken.from_file(path)


def test_the_environment_variable_holds_the_token_when_set() -> None:
    assert TOKEN_ENV == cli.TOKEN_ENV == "LEAN_BEAM_MCP_TOKEN"
    assert BearerToken.from_env({TOKEN_ENV: f"{TOKEN}\n"}) == BearerToken(TOKEN)
    assert BearerToken.from_env({}) is None and BearerToken.from_env({TOKEN_ENV: "  "}) is None
    with pytest.raises(TokenError) as bad:
        BearerToken.from_env({TOKEN_ENV: "not a token"})
    assert str(bad.value).startswith(f"{TOKEN_ENV}: ") and "not a token" not in str(bad.value)


def test_a_token_file_others_can_read_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN, encoding="utf-8")
    path.chmod(0o600)
    assert readable_by_others(path) is False
    path.chmod(0o644)
    assert readable_by_others(path) is True
    assert readable_by_others(tmp_path / "missing") is False


# ---- rule 3a -------------------------------------------------------------------------------------------------------
def test_the_rule_answers_401_with_a_bearer_challenge_and_never_echoes_the_credentials() -> None:
    admission = Admission("127.0.0.1", 8765, (), (), BearerToken(TOKEN))
    admission.check_token(Headers({"authorization": f"Bearer {TOKEN}"}))
    with pytest.raises(Rejected) as missing:
        admission.check_token(Headers({}))
    with pytest.raises(Rejected) as wrong:
        admission.check_token(Headers({"authorization": "Bearer guess-123"}))
    assert (missing.value.status, wrong.value.status) == (401, 401)
    assert (
        missing.value.headers
        == [("www-authenticate", CHALLENGE)]
        == [("www-authenticate", 'Bearer realm="lean-beam-mcp"')]
    )
    assert wrong.value.headers == [("www-authenticate", f'{CHALLENGE}, error="invalid_token"')]
    body = json.loads(wrong.value.body)
    assert body["id"] is None and body["error"]["code"] == INVALID_REQUEST
    assert body["error"]["message"] == "unauthorized: the bearer token is not valid"
    assert b"guess-123" not in wrong.value.body and TOKEN.encode() not in missing.value.body
    Admission("127.0.0.1", 8765, (), ()).check_token(Headers({}))  # no token: no rule


# ---- the endpoint in-process ---------------------------------------------------------------------------------------
async def test_without_the_token_every_mcp_request_is_401_and_with_it_the_request_is_served(tmp_path: Path) -> None:
    root = project(tmp_path / "proj")
    message = call(1, "lean_sync", {"workspace": {"root": str(root)}, "path": "A.lean"})
    async with in_process(token=BearerToken(TOKEN)) as client:
        refused = await client.post(message, modern_headers(message))
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == CHALLENGE
        assert refused.headers["content-type"] == "application/json"
        assert refused.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": INVALID_REQUEST,
                "message": "unauthorized: this MCP endpoint requires Authorization: Bearer <token>",
            },
        }
        wrong = await client.post(message, [*modern_headers(message), ("authorization", "Bearer nope")])
        assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
        for method, headers in (
            ("GET", {"accept": "text/event-stream", "mcp-session-id": "x"}),
            ("DELETE", {}),
            ("PUT", {}),
        ):
            other = await client.http.request(method, "/mcp", headers=headers)
            assert other.status_code == 401, method  # before the method and media-type rules: nothing is revealed
        legacy = await client.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
        assert legacy.status_code == 401 and "mcp-session-id" not in legacy.headers
        health = await client.http.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok", "health checks stay open"
        assert (await client.http.get("/elsewhere")).status_code == 404
        served_call = await client.post(message, [*modern_headers(message), *BEARER.items()])
        assert served_call.status_code == 200 and structured(final(served_call))["version"] == 1
        assert (await client.http.get("/healthz")).json()["workspaces"] == 1, "only the authorized call reached Lean"


async def test_a_refused_request_leaves_the_connection_usable_and_starts_no_session() -> None:
    async with in_process(token=BearerToken(TOKEN)) as client:
        for _ in range(3):
            assert (
                await client.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
            ).status_code == 401
        response = await client.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}, BEARER)
        assert response.status_code == 200 and "mcp-session-id" in response.headers


async def test_host_and_origin_are_checked_before_the_token() -> None:
    async with in_process(token=BearerToken(TOKEN)) as client:
        message = request(1, "server/discover")
        foreign = await client.post(message, [*modern_headers(message), ("origin", "http://evil.example")])
        assert foreign.status_code == 403


# ---- a real loopback server: httpx and the official SDK -------------------------------------------------------------
def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside nested single-exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def test_over_loopback_the_token_guards_the_endpoint_and_the_sdk_sends_it(tmp_path: Path) -> None:
    root = str(project(tmp_path / "proj"))
    async with served(token=BearerToken(TOKEN)) as client:
        message = request(1, "server/discover")
        refused = await client.post(message, modern_headers(message))
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == CHALLENGE
        assert (await client.http.get("/healthz")).status_code == 200
        with pytest.raises(Exception) as unauthorized:  # the SDK raises it out of its task groups
            async with Client(client.url, mode="2026-07-28") as anonymous:
                await anonymous.list_tools()
        error = _leaf(unauthorized.value)
        assert isinstance(error, MCPError)
        assert error.error.message == "unauthorized: this MCP endpoint requires Authorization: Bearer <token>"
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with http, Client(streamable_http_client(client.url, http_client=http), mode="auto") as sdk:
            assert any(tool.name == "lean_sync" for tool in (await sdk.list_tools()).tools)
            with anyio.fail_after(TIMEOUT):
                synced = await sdk.call_tool("lean_sync", {"workspace": {"root": root}, "path": "A.lean"})
            assert synced.is_error is False and isinstance(synced.structured_content, dict)
            assert synced.structured_content["version"] == 1


# ---- the command ----------------------------------------------------------------------------------------------------
def test_an_unreadable_token_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--http", "127.0.0.1:0", "--http-token-file", "/nonexistent/token"])
    assert exited.value.code == 2
    assert "--http-token-file: cannot read the token file '/nonexistent/token'" in capsys.readouterr().err


def test_a_bad_token_file_or_variable_is_a_usage_error_that_does_not_show_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "token"
    path.write_text("secret with spaces\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        cli.main(["--http", "127.0.0.1:0", "--http-token-file", str(path)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and f"--http-token-file: the token file {str(path)!r}" in err
    assert "secret with spaces" not in err
    monkeypatch.setenv(TOKEN_ENV, "secret with spaces")
    with pytest.raises(SystemExit) as from_env:
        cli.main(["--http", "127.0.0.1:0"])
    err = capsys.readouterr().err
    assert from_env.value.code == 2 and f"{TOKEN_ENV}: the bearer token may hold only" in err
    assert "secret with spaces" not in err


@pytest.mark.parametrize("source", ["file", "env", "both"])
def test_the_token_reaches_the_server_from_the_file_or_else_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    import anyio as anyio_module

    recorded: list[tuple[Any, ...]] = []
    monkeypatch.setattr(anyio_module, "run", lambda func, *args, **kw: recorded.append(args))
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    path = tmp_path / "token"
    path.write_text(TOKEN, encoding="utf-8")
    path.chmod(0o600)
    argv = ["--http", "127.0.0.1:0", "--tools", "beam"]
    if source in ("file", "both"):
        argv += ["--http-token-file", str(path)]
    if source in ("env", "both"):
        monkeypatch.setenv(TOKEN_ENV, "from-the-environment" if source == "both" else TOKEN)
    assert cli.main(argv) == 0
    [(config, http_config)] = recorded
    assert http_config.token == BearerToken(TOKEN), "the file wins over the variable"
    assert config.tools == "beam"


def test_the_stdio_server_ignores_the_variable_and_http_without_a_token_has_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import anyio as anyio_module

    recorded: list[tuple[Any, ...]] = []
    monkeypatch.setattr(anyio_module, "run", lambda func, *args, **kw: recorded.append(args))
    monkeypatch.setenv(TOKEN_ENV, "not a valid token, but unused")
    assert cli.main([]) == 0
    monkeypatch.delenv(TOKEN_ENV)
    assert cli.main(["--http", "127.0.0.1:0"]) == 0
    assert recorded[-1][1].token is None


@pytest.mark.parametrize(
    ("host", "token", "mode", "fragment"),
    [
        ("0.0.0.0", None, None, "has no authentication"),
        ("0.0.0.0", BearerToken(TOKEN), None, "clear text"),
        ("127.0.0.1", BearerToken(TOKEN), 0o644, "can be read by other users"),
        ("127.0.0.1", BearerToken(TOKEN), 0o600, None),
        ("127.0.0.1", None, None, None),
    ],
)
def test_exposure_warnings_never_name_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, host: str, token: Any, mode: int | None, fragment: str | None
) -> None:
    path = None
    if mode is not None:
        path = tmp_path / "token"
        path.write_text(TOKEN, encoding="utf-8")
        path.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="beam_mcp"):
        cli._warn_exposure(host, token, str(path) if path else None)
    text = caplog.text
    assert (fragment in text) if fragment else text == ""
    assert TOKEN not in text


def test_help_never_shows_the_token_even_when_it_is_set() -> None:
    env = {**os.environ, TOKEN_ENV: TOKEN}
    helped = subprocess.run(
        [sys.executable, "-m", "beam_mcp", "--help"], capture_output=True, text=True, timeout=60, env=env, check=True
    )
    assert "--http-token-file" in helped.stdout and TOKEN_ENV in helped.stdout and "--tools" in helped.stdout
    assert TOKEN not in helped.stdout + helped.stderr


async def test_the_command_requires_the_token_and_never_logs_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    path.chmod(0o600)
    env = {**os.environ, "LEAN_BEAM_MCP_TRACE": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "beam_mcp", "--http", "127.0.0.1:0", "--http-token-file", str(path)]
    proc = await anyio.open_process(command, env=env)
    async with proc:
        try:
            assert proc.stderr is not None
            logged = b""
            with anyio.fail_after(60):
                while b"serving MCP over Streamable HTTP at" not in logged:
                    logged += await proc.stderr.receive()
            url = logged.decode().split("Streamable HTTP at ", 1)[1].split()[0]
            message = request(1, "server/discover")
            body = json.dumps(message).encode()
            headers = [*POST_HEADERS.items(), *modern_headers(message)]
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                refused = await client.post(
                    url, content=body, headers=[*headers, ("authorization", "Bearer wrong-guess")]
                )
                served_call = await client.post(url, content=body, headers=[*headers, *BEARER.items()])
            assert refused.status_code == 401 and served_call.status_code == 200
            proc.terminate()
            with anyio.fail_after(60):
                assert await proc.wait() == 0
            async for chunk in proc.stderr:
                logged += chunk
        finally:
            if proc.returncode is None:
                proc.kill()
    assert b"DEBUG" in logged, "debug logs were on"
    assert TOKEN.encode() not in logged and b"wrong-guess" not in logged
