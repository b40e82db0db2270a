"""Legacy sessions of the HTTP transport (`beam_mcp._http.sessions`): registration, lookup, expiry, the sweeper."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import anyio
import pytest

from beam_mcp import HttpConfig, McpServer
from beam_mcp._http.sessions import Sessions, short

from .http_support import TIMEOUT, server_config

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server() -> AsyncIterator[McpServer]:
    async with McpServer.open(server_config()) as opened:
        yield opened


async def test_a_session_is_found_only_once_registered_and_until_it_ends(server: McpServer) -> None:
    sessions = Sessions(server, HttpConfig())
    session = sessions.new()
    assert sessions.get(session.id) is None
    sessions.add(session)
    assert sessions.get(session.id) is session
    sessions.end(session, "deleted")
    assert sessions.get(session.id) is None and session.channel.closed


async def test_a_discarded_session_releases_its_channel(server: McpServer) -> None:
    sessions = Sessions(server, HttpConfig())
    session = sessions.new()
    sessions.discard(session)
    assert session.channel.closed and sessions.get(session.id) is None


async def test_the_cap_counts_open_sessions_after_expiring_idle_ones(server: McpServer) -> None:
    sessions = Sessions(server, HttpConfig(max_sessions=1, session_idle=0.05))
    assert not sessions.full()
    sessions.add(sessions.new())
    assert sessions.full()
    await anyio.sleep(0.1)  # the idle time passes: time itself is what is tested
    assert not sessions.full()


async def test_a_busy_session_does_not_expire(server: McpServer) -> None:
    sessions = Sessions(server, HttpConfig(session_idle=0.01))
    session = sessions.new()
    sessions.add(session)
    session.streaming = True
    await anyio.sleep(0.05)
    assert sessions.get(session.id) is session
    sessions.end_all("closed at shutdown")
    assert sessions.get(session.id) is None


async def test_the_sweeper_ends_idle_sessions_without_a_request(server: McpServer) -> None:
    sessions = Sessions(server, HttpConfig(session_idle=0.02))
    session = sessions.new()
    sessions.add(session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sessions.sweep)
        with anyio.fail_after(TIMEOUT), pytest.raises(anyio.EndOfStream):
            await session.mailbox.next(math.inf)  # until the session ends
        tg.cancel_scope.cancel()
    assert session.channel.closed


def test_logs_name_a_session_by_a_short_hash() -> None:
    assert short("secret") == short("secret") != short("other") and len(short("secret")) == 8
