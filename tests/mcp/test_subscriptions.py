"""Delivery of resource updates (`_subscriptions`): record before check, replay, coalescing and throttling.

The hub is driven directly with a table of resource documents, so the exact number and timing of updates can be
asserted; `test_resources` runs the same rules end to end through the broker.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from beam_mcp._jsonrpc import RequestId
from beam_mcp._subscriptions import Subscriber, UpdateHub

pytestmark = pytest.mark.anyio

A, B = "/w/A.lean", "/w/B.lean"
UA, UB = "lsp-diagnostics:///w/A.lean", "lsp-diagnostics:///w/B.lean"


def document(version: int | None = 1, elaboration: str | None = "complete", *messages: str) -> dict[str, Any]:
    return {
        "path": "",
        "tracked": version is not None,
        "version": version,
        "diagnostics": [{"message": m} for m in messages],
        "availability": "published" if version is not None else "pending",
        "elaboration": elaboration,
        "processing": [],
        "indexing_in_progress": elaboration == "processing",
        "push_notifications_degraded": False,
        "truncated": 0,
    }


PENDING = document(None, None)


class Stream:
    """A subscriber's stream: keeps its updates; with `hold`, they stay unwritten until `flush`."""

    def __init__(self, *, hold: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.hold = hold
        self.unflushed: list[tuple[bytes, Callable[[], None], Callable[[], bool]]] = []
        self.arrived = anyio.Event()

    def __call__(self, data: bytes, on_flushed: Callable[[], None], live: Callable[[], bool]) -> None:
        self.arrived.set()
        if self.hold:
            self.unflushed.append((data, on_flushed, live))
            return
        if live():
            self.sent.append(json.loads(data))
        on_flushed()

    def flush(self) -> None:
        queued, self.unflushed = self.unflushed, []
        for data, on_flushed, live in queued:
            if live():
                self.sent.append(json.loads(data))
            on_flushed()

    def uris(self) -> list[str]:
        out = [m["params"]["uri"] for m in self.sent]
        self.sent.clear()
        return out


class Cache:
    """The documents the hub reads, and the listener calls the broker would make."""

    def __init__(self, hub_interval: float = 60.0) -> None:
        self.documents: dict[str, dict[str, Any]] = {}
        self.failing = False
        self.hub = UpdateHub(self.read, hub_interval)

    def read(self, path: str) -> dict[str, Any]:
        if self.failing:
            raise OSError("the cache is unreadable")
        return self.documents.get(path, PENDING)

    def publish(self, path: str, doc: dict[str, Any]) -> None:
        self.documents[path] = doc
        self.hub.changed(path)


@asynccontextmanager
async def running(interval: float = 60.0) -> AsyncIterator[Cache]:
    cache = Cache(interval)
    async with anyio.create_task_group() as tg:
        tg.start_soon(cache.hub.run)
        yield cache
        cache.hub.close_all()


async def settle() -> None:
    await anyio.wait_all_tasks_blocked()


async def test_subscribing_records_first_then_reports_whether_there_is_something_to_replay() -> None:
    async with running() as cache:
        cache.documents[A] = document(1, "complete", "e")
        stream = Stream()
        subscriber = Subscriber(stream)
        assert cache.hub.subscribe(subscriber, A, UA) is True
        assert cache.hub.subscribe(subscriber, B, UB) is False  # nothing known: no replay
        cache.hub.replay(subscriber, A, UA)
        assert stream.uris() == [UA]
        cache.publish(B, document(1))  # a change after subscribing is never lost
        await settle()
        assert stream.uris() == [UB]


async def test_updates_are_tagged_with_the_listen_stream_id() -> None:
    async with running() as cache:
        stream = Stream()
        subscriber = Subscriber(stream, RequestId(("s", "l"), "l"))
        cache.hub.subscribe(subscriber, A, UA)
        cache.publish(A, document(1))
        await settle()
        assert stream.sent == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": UA, "_meta": {"io.modelcontextprotocol/subscriptionId": "l"}},
            }
        ]
        assert subscriber.meta() == {"io.modelcontextprotocol/subscriptionId": "l"}
        assert Subscriber(stream).meta() == {}


async def test_updates_follow_changes_and_skip_identical_republishes() -> None:
    async with running() as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, UA)
        cache.publish(B, document(1))  # not subscribed
        await settle()
        assert stream.uris() == []
        cache.publish(A, document(1, "complete", "e"))
        await settle()
        assert stream.uris() == [UA]
        cache.publish(A, document(1, "complete", "e"))  # the same document again
        await settle()
        assert stream.uris() == []
        cache.publish(A, document(1, "complete", "e", "f"))
        cache.publish(A, document(None, None))  # evicted or restarted: unknown again
        await settle()
        assert stream.uris() == [UA]


async def test_processing_updates_are_throttled_and_completion_is_immediate() -> None:
    async with running(60.0) as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        cache.documents[A] = document(1)
        cache.hub.subscribe(subscriber, A, UA)
        cache.hub.replay(subscriber, A, UA)  # the replay counts as the last update
        assert stream.uris() == [UA]
        for line in range(40):
            cache.publish(A, document(2, "processing", *(f"e{i}" for i in range(line // 10))))
            await settle()
        assert stream.uris() == []
        cache.publish(A, document(2, "failed", "fatal"))
        await settle()
        assert stream.uris() == [UA]


async def test_the_first_processing_update_is_not_delayed_and_a_deferred_one_arrives_when_the_interval_ends() -> None:
    interval = 0.3
    async with running(interval) as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, UA)
        started = anyio.current_time()
        cache.publish(A, document(1, "processing"))
        await settle()
        assert stream.uris() == [UA]
        stream.arrived = anyio.Event()
        for n in range(20):
            cache.publish(A, document(1, "processing", f"e{n}"))
        await settle()
        assert stream.uris() == []
        with anyio.fail_after(5):
            await stream.arrived.wait()  # the hub's own timer delivers it
        assert anyio.current_time() - started >= interval * 0.9
        assert stream.uris() == [UA]  # one deferred update for the whole burst


async def test_an_unwritten_update_absorbs_later_changes() -> None:
    async with running(0) as cache:
        stream = Stream(hold=True)  # a client that is not reading
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, UA)
        for n in range(10):
            cache.publish(A, document(1, "complete", f"e{n}"))
            await settle()
        assert len(stream.unflushed) == 1
        stream.flush()
        await settle()
        stream.flush()
        assert stream.uris() == [UA, UA]  # the one in flight, then the latest state once


async def test_each_spelling_of_a_file_gets_its_update() -> None:
    async with running() as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        spellings = [UA, "lsp-diagnostics:///link/A.lean", "lsp-diagnostics:///w/./A.lean"]
        for spelling in spellings:
            cache.hub.subscribe(subscriber, A, spelling)
        cache.hub.subscribe(subscriber, A, UA)  # again: still one subscription
        assert subscriber.count == 3
        cache.publish(A, document(1))
        await settle()
        assert stream.uris() == spellings


async def test_unsubscribing_by_spelling_or_by_file() -> None:
    async with running() as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, UA)
        cache.hub.subscribe(subscriber, A, "lsp-diagnostics:///link/A.lean")
        cache.hub.subscribe(subscriber, B, UB)
        cache.hub.unsubscribe(subscriber, UA, lambda: pytest.fail("not needed for a subscribed spelling"))
        cache.publish(A, document(1))
        await settle()
        assert stream.uris() == ["lsp-diagnostics:///link/A.lean"]
        cache.hub.unsubscribe(subscriber, "lsp-diagnostics:///other/spelling/of/B.lean", lambda: B)
        cache.hub.unsubscribe(subscriber, "lsp-diagnostics:///w/C.lean", lambda: "/w/C.lean")  # unknown: a no-op
        cache.publish(B, document(1))
        await settle()
        assert stream.uris() == [] and subscriber.count == 1


async def test_a_spelling_that_now_names_another_file_moves_there() -> None:
    async with running() as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, "lsp-diagnostics:///link/X.lean")
        cache.hub.subscribe(subscriber, B, "lsp-diagnostics:///link/X.lean")  # the symlink was retargeted
        cache.publish(A, document(1))
        cache.publish(B, document(1))
        await settle()
        assert stream.uris() == ["lsp-diagnostics:///link/X.lean"] and subscriber.count == 1


async def test_closing_a_subscriber_drops_even_its_queued_updates() -> None:
    async with running(0) as cache:
        stream = Stream(hold=True)
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, UA)
        cache.publish(A, document(1))
        await settle()
        cache.hub.close(subscriber)
        stream.flush()
        cache.publish(A, document(2))
        await settle()
        assert stream.uris() == [] and stream.unflushed == [] and not subscriber.live()


async def test_recheck_reports_files_whose_documents_changed_silently() -> None:
    async with running() as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        cache.documents[A] = document(1)
        cache.hub.subscribe(subscriber, A, UA)
        cache.hub.subscribe(subscriber, B, UB)
        del cache.documents[A]  # a dropped workspace: the cache is gone and nobody said so
        cache.hub.recheck()
        await settle()
        assert stream.uris() == [UA]


async def test_a_document_that_becomes_unreadable_is_one_update_and_so_is_its_recovery() -> None:
    # mcpls: a subscriber gets one resources/updated when its file's server fails to start (and re-reads the error).
    async with running() as cache:
        stream = Stream()
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, UA)
        cache.failing = True
        cache.publish(A, document(1))
        await settle()
        assert stream.uris() == [UA]
        cache.publish(A, document(2))  # still failing the same way: nothing new to read
        await settle()
        assert stream.uris() == []
        cache.failing = False
        cache.publish(A, document(3))
        await settle()
        assert stream.uris() == [UA]


async def test_after_close_all_nothing_is_delivered_and_the_task_ends() -> None:
    cache = Cache()
    stream = Stream()
    subscriber = Subscriber(stream)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cache.hub.run)
            cache.hub.subscribe(subscriber, A, UA)
            cache.hub.close_all()
            cache.publish(A, document(1))
            cache.hub.recheck()
            cache.hub.replay(subscriber, A, UA)
    assert stream.uris() == []


async def test_an_unwritten_update_of_an_unsubscribed_spelling_is_dropped_while_other_spellings_stay() -> None:
    # Review finding: a queued update was skipped only when the file's last spelling was unsubscribed; with another
    # spelling still subscribed, the unsubscribed one's update was still written after `resources/unsubscribe`
    # answered (over HTTP the update's stream and the response's are not ordered).
    link = "lsp-diagnostics:///link/A.lean"
    async with running(0) as cache:
        stream = Stream(hold=True)
        subscriber = Subscriber(stream)
        cache.hub.subscribe(subscriber, A, UA)
        cache.hub.subscribe(subscriber, A, link)
        cache.publish(A, document(1))
        await settle()
        assert len(stream.unflushed) == 2
        cache.hub.unsubscribe(subscriber, UA, lambda: A)
        stream.flush()
        assert stream.uris() == [link]
