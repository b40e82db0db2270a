"""The outlets between the server and an HTTP answer (`beam_mcp._http.outlet`): order, end, and flush callbacks."""

from __future__ import annotations

import anyio
import pytest

from beam_mcp._http.outlet import Discard, Reply

pytestmark = pytest.mark.anyio


async def test_a_reply_hands_out_its_messages_in_order_and_ends_after_the_response() -> None:
    reply = Reply()
    flushed: list[str] = []
    reply.message(b"note", lambda: flushed.append("note"))
    reply.respond(b"answer", lambda: flushed.append("answer"))
    note, answer = await reply.next(1), await reply.next(1)
    assert note is not None and answer is not None
    assert (note.data, note.final, answer.data, answer.final) == (b"note", False, b"answer", True)
    with pytest.raises(anyio.EndOfStream):
        await reply.next(1)
    assert flushed == []  # the answer's writer reports them
    note.flushed()
    answer.flushed()
    assert flushed == ["note", "answer"]
    reply.close()


async def test_a_silent_reply_yields_none_after_the_timeout() -> None:
    reply = Reply()
    assert await reply.next(0.01) is None
    reply.close()


async def test_closing_a_reply_flushes_what_is_queued_and_what_comes_later() -> None:
    reply = Reply()
    flushed: list[str] = []
    reply.message(b"queued", lambda: flushed.append("queued"), live=lambda: False)
    reply.close()
    reply.message(b"late", lambda: flushed.append("late"))
    assert flushed == ["queued", "late"]
    assert reply.take() is None
    with pytest.raises(anyio.EndOfStream):
        await reply.next(1)


def test_a_message_is_wanted_until_its_live_check_says_otherwise() -> None:
    reply = Reply()
    reply.message(b"stale", live=lambda: False)
    reply.message(b"fresh")
    stale, fresh = reply.take(), reply.take()
    assert stale is not None and fresh is not None
    assert (stale.wanted, fresh.wanted) == (False, True)
    reply.close()


def test_the_outlet_of_a_notification_discards_and_reports_each_message_flushed() -> None:
    flushed: list[str] = []
    discard = Discard()
    discard.message(b"x", lambda: flushed.append("message"))
    discard.respond(b"y", lambda: flushed.append("response"))
    discard.message(b"z")
    discard.abandon()
    assert flushed == ["message", "response"]
