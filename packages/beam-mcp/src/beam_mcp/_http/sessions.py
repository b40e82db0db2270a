"""Legacy MCP `2025-11-25` sessions of the HTTP transport: creation, lookup, idle expiry and their end.

This module owns the session table: ids (32 random bytes, URL-safe base64: bearer tokens, logged only by a short
hash), the cap on open sessions, the idle clock (a session with no request in flight and no open GET stream
expires after `session_idle`), and ending a session (its channel closed on the server, so its calls are cancelled
and its subscriptions end; its mailbox closed, so its GET stream ends). It must not speak HTTP.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets

import anyio

from beam_mcp.server import Channel, McpServer

from .config import HttpConfig
from .outlet import Reply

log = logging.getLogger("beam_mcp.http")


def short(session_id: str) -> str:
    """A session's name in logs (session ids are bearer tokens)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:8]


@dataclasses.dataclass(eq=False)
class Session:
    """A legacy session: its channel, and the mailbox its GET stream drains.

    Attributes:
        id: The `Mcp-Session-Id`.
        mailbox: Notifications that belong to no request (`resources/updated`), kept for the GET stream.
        channel: The session's protocol state on the server.
        last_seen: When it was last used (`anyio.current_time`).
        active: Requests of the session in flight.
        streaming: Whether its GET stream is open.
    """

    id: str
    mailbox: Reply
    channel: Channel
    last_seen: float = 0.0
    active: int = 0
    streaming: bool = False

    def idle_since(self, now: float) -> float:
        """Seconds it has been idle at `now` (0 while busy)."""
        return 0.0 if self.active or self.streaming else now - self.last_seen

    def touch(self) -> None:
        """Mark it used now."""
        self.last_seen = anyio.current_time()


class Sessions:
    """The open legacy sessions of one endpoint."""

    def __init__(self, server: McpServer, config: HttpConfig) -> None:
        self.server = server
        self.config = config
        self._open: dict[str, Session] = {}

    def full(self) -> bool:
        """Whether another session would exceed the cap (after expiring idle ones)."""
        self.expire()
        return len(self._open) >= self.config.max_sessions

    def new(self) -> Session:
        """A session that is not registered yet (`add` it once its `initialize` succeeded)."""
        mailbox = Reply()
        return Session(secrets.token_urlsafe(32), mailbox, self.server.channel(notify=mailbox.message))

    def add(self, session: Session) -> None:
        """Register a session whose `initialize` succeeded."""
        session.touch()
        self._open[session.id] = session
        log.info("MCP session %s opened", short(session.id))

    def discard(self, session: Session) -> None:
        """Release a session that was never registered (its `initialize` failed)."""
        self.server.close_channel(session.channel)
        session.mailbox.close()

    def get(self, sid: str) -> Session | None:
        """The open session with this id (None when unknown, expired or ended)."""
        self.expire()
        session = self._open.get(sid)
        if session is None or session.channel.closed:
            return None
        return session

    def end(self, session: Session, why: str) -> None:
        """End a session: its calls are cancelled, its subscriptions and GET stream end."""
        self._open.pop(session.id, None)
        self.server.close_channel(session.channel)
        session.mailbox.close()
        log.info("MCP session %s %s", short(session.id), why)

    def end_all(self, why: str) -> None:
        """End every session."""
        for session in list(self._open.values()):
            self.end(session, why)

    def expire(self) -> None:
        """End the sessions idle for longer than `session_idle`."""
        now = anyio.current_time()
        for session in list(self._open.values()):
            if session.idle_since(now) >= self.config.session_idle:
                self.end(session, "expired")

    async def sweep(self) -> None:
        """Expire idle sessions periodically, so an idle session's subscriptions end (runs until cancelled)."""
        period = min(max(self.config.session_idle / 4, 0.01), 30.0)
        while True:
            await anyio.sleep(period)
            self.expire()
