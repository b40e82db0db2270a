"""Diagnostics as MCP resources: URIs, list pages, reads, legacy subscriptions and modern listen streams.

Driven in-process against the fake broker's scripted diagnostics (`FakeBroker.publish` reports a change the way
the broker's cache does).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_mcp import McpServer, ServerConfig, _resources
from beam_mcp.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JsonRpcError

from .support import FakeBroker, Harness, harness, make_project, modern_meta

pytestmark = pytest.mark.anyio

SUB_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
FAMILIES = ["legacy", "modern"]


def diag(message: str, line: int = 0, severity: int = 1) -> dict[str, Any]:
    r = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 4}}
    return {"range": r, "fullRange": r, "severity": severity, "message": message, "source": "Lean 4"}


def snap(
    version: int | None = 1,
    elaboration: str | None = "complete",
    diagnostics: list[dict[str, Any]] | None = None,
    availability: str = "published",
    processing: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"availability": availability, "diagnostics": diagnostics or [], "version": version}
    if elaboration is not None:
        out["elaboration"] = elaboration
        out["processing"] = processing or []
    return out


def busy(version: int, line: int, diagnostics: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A processing-phase snapshot: Lean is at `line`."""
    r = {"start": {"line": line, "character": 0}, "end": {"line": 99, "character": 0}}
    return snap(version, "processing", diagnostics, processing=[r])


def uri(path: str | Path) -> str:
    return _resources.path_to_uri(str(path))


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    root = make_project(tmp_path / "proj")
    out = []
    for name in ("A.lean", "B.lean", "C.lean"):
        (root / name).write_text("", encoding="utf-8")
        out.append(str(root / name))
    return out


# ---- URIs -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/work/Main.lean", "lsp-diagnostics:///work/Main.lean"),
        ("/w/a b.lean", "lsp-diagnostics:///w/a%20b.lean"),
        ("/w/100%/x?.lean", "lsp-diagnostics:///w/100%25/x%3F.lean"),
        ("/w/#[a]^|`{b}\\.lean", "lsp-diagnostics:///w/%23%5Ba%5D%5E%7C%60%7Bb%7D%5C.lean"),
        ("/w/Ünï.lean", "lsp-diagnostics:///w/%C3%9Cn%C3%AF.lean"),
        ("/w/a'b(c)+d,e;f=g&h$i!j:k@l~m.lean", "lsp-diagnostics:///w/a'b(c)+d,e;f=g&h$i!j:k@l~m.lean"),
    ],
)
def test_paths_become_uris_with_an_empty_authority_and_round_trip(path: str, expected: str) -> None:
    assert _resources.path_to_uri(path) == expected
    assert _resources.uri_to_path(expected) == path


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("LSP-Diagnostics:///a.lean", "/a.lean"),  # schemes are case-insensitive
        ("lsp-diagnostics:///a%2fb.lean", "/a/b.lean"),
        ("lsp-diagnostics:///a b.lean", "/a b.lean"),  # lenient about unencoded characters a client left in
    ],
)
def test_uri_parsing_accepts(text: str, path: str) -> None:
    assert _resources.uri_to_path(text) == path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (3, "must be a string"),
        ("file:///a.lean", "unsupported resource URI"),
        ("lsp-diagnostic:///a.lean", "unsupported resource URI"),
        ("/a.lean", "unsupported resource URI"),
        ("lsp-diagnostics:/a.lean", "no authority part"),
        ("lsp-diagnostics:a.lean", "no authority part"),
        ("lsp-diagnostics://host/a.lean", "empty authority"),
        ("lsp-diagnostics://user@/a.lean", "empty authority"),
        ("lsp-diagnostics://:80/a.lean", "empty authority"),
        ("lsp-diagnostics://", "names no path"),
        ("lsp-diagnostics:///a.lean?x=1", "query or fragment"),
        ("lsp-diagnostics:///a.lean#L3", "query or fragment"),
        ("lsp-diagnostics:///a%zz.lean", "invalid percent escape"),
        ("lsp-diagnostics:///a%2.lean", "invalid percent escape"),
        ("lsp-diagnostics:///a%00.lean", "NUL"),
    ],
)
def test_uri_parsing_rejects_with_invalid_params(text: Any, fragment: str) -> None:
    with pytest.raises(JsonRpcError) as caught:
        _resources.uri_to_path(text)
    assert caught.value.code == INVALID_PARAMS and fragment in caught.value.message


# ---- helpers for the protocol tests --------------------------------------------------------------------------------
async def start(h: Harness, family: str) -> None:
    if family == "legacy":
        await h.initialize()


def params(family: str, **fields: Any) -> dict[str, Any]:
    return {**fields, "_meta": modern_meta()} if family == "modern" else fields


async def rpc(h: Harness, family: str, method: str, **fields: Any) -> dict[str, Any]:
    return await h.request(method, params(family, **fields))


async def read(h: Harness, family: str, resource: str) -> dict[str, Any]:
    response = await rpc(h, family, "resources/read", uri=resource)
    assert "result" in response, response
    [content] = response["result"]["contents"]
    assert content["uri"] == resource and content["mimeType"] == "application/json"
    document: dict[str, Any] = json.loads(content["text"])
    return document


async def quiet(h: Harness) -> list[dict[str, Any]]:
    """Everything the server sent once it has nothing more to do right now."""
    await anyio.wait_all_tasks_blocked()
    out, h.pending = h.pending, []
    return out + [json.loads(line) for line in h.raw_available()]


def updated(messages: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["uri"] for m in messages if m.get("method") == "notifications/resources/updated"]


class Watcher:
    """One subscriber in either family: legacy `resources/subscribe` or a modern `subscriptions/listen`."""

    def __init__(self, h: Harness, family: str, rid: Any = "listen-1") -> None:
        self.h = h
        self.family = family
        self.rid = rid

    async def subscribe(self, *uris: str) -> list[dict[str, Any]]:
        """Subscribe; returns what arrived up to quiescence (legacy: the responses are checked here)."""
        if self.family == "legacy":
            for resource in uris:
                response = await self.h.request("resources/subscribe", {"uri": resource})
                assert response["result"] == {}, response
        else:
            await self.h.send(listen(self.rid, list(uris)))
        return await quiet(self.h)

    def check(self, messages: list[dict[str, Any]]) -> list[str]:
        """The updated URIs in `messages`, checking the family's tagging."""
        for m in messages:
            assert m.get("method") == "notifications/resources/updated", m
            if self.family == "modern":
                assert m["params"]["_meta"] == {SUB_ID: self.rid}
            else:
                assert "_meta" not in m["params"]
        return updated(messages)

    async def updates(self) -> list[str]:
        return self.check(await quiet(self.h))


def listen(rid: Any, uris: list[str] | None = None, **flags: Any) -> dict[str, Any]:
    notifications: dict[str, Any] = dict(flags)
    if uris is not None:
        notifications["resourceSubscriptions"] = uris
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "subscriptions/listen",
        "params": {"notifications": notifications, "_meta": modern_meta()},
    }


@contextlib.asynccontextmanager
async def opened(broker: FakeBroker | None = None, **config: Any) -> AsyncIterator[Harness]:
    """A harness whose broker is already open (resource requests never wait for a loading one)."""
    async with harness(broker, **config) as h:
        await h.server.broker()
        yield h


# ---- resources/list -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
async def test_list_is_empty_before_any_workspace(family: str) -> None:
    async with opened() as h:
        await start(h, family)
        response = await rpc(h, family, "resources/list")
        assert response["result"]["resources"] == [] and "nextCursor" not in response["result"]
        assert h.broker.calls == []


@pytest.mark.parametrize("family", FAMILIES)
async def test_list_pages_the_sorted_open_documents_by_hundreds(family: str) -> None:
    async with opened() as h:
        await start(h, family)
        h.broker.open_docs = [f"/w/F{i:03d}.lean" for i in reversed(range(250))]
        seen: list[str] = []
        cursors: list[str | None] = []
        cursor: str | None = None
        while True:
            fields = {} if cursor is None else {"cursor": cursor}
            result = (await rpc(h, family, "resources/list", **fields))["result"]
            seen += [r["uri"] for r in result["resources"]]
            cursor = result.get("nextCursor")
            cursors.append(cursor)
            if cursor is None:
                break
        assert cursors == ["100", "200", None]
        assert seen == [f"lsp-diagnostics:///w/F{i:03d}.lean" for i in range(250)]
        first = (await rpc(h, family, "resources/list", cursor="7"))["result"]["resources"][0]
        assert first == {
            "uri": "lsp-diagnostics:///w/F007.lean",
            "name": "F007.lean",
            "mimeType": "application/json",
            "description": "Lean diagnostics for this file",
        }
        for past in ("250", "1000", "9" * 40, "0" * 30 + "260"):
            result = (await rpc(h, family, "resources/list", cursor=past))["result"]
            assert result["resources"] == [] and "nextCursor" not in result, past


@pytest.mark.parametrize("cursor", ["", "abc", "-1", " 1", "1.0", "²", 100, None, ["1"]])
@pytest.mark.parametrize("family", FAMILIES)
async def test_unparsable_list_cursors_are_invalid_params(family: str, cursor: Any) -> None:
    async with opened() as h:
        await start(h, family)
        response = await rpc(h, family, "resources/list", cursor=cursor)
        assert response["error"]["code"] == INVALID_PARAMS, response
        assert "cursor" in response["error"]["message"]


async def test_modern_lists_and_reads_are_private_short_lived_cache_results() -> None:
    async with opened() as h:
        h.broker.open_docs = ["/w/A.lean"]
        listed = (await rpc(h, "modern", "resources/list"))["result"]
        assert (listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == ("complete", 1000, "private")
        assert listed["_meta"][SERVER_INFO_KEY]["name"] == "lean-beam-mcp"
        read_result = (await rpc(h, "modern", "resources/read", uri="lsp-diagnostics:///w/A.lean"))["result"]
        assert (read_result["resultType"], read_result["ttlMs"], read_result["cacheScope"]) == (
            "complete",
            0,
            "private",
        )
        assert read_result["_meta"][SERVER_INFO_KEY]["name"] == "lean-beam-mcp"


async def test_legacy_lists_and_reads_carry_no_modern_fields() -> None:
    async with opened() as h:
        await h.initialize()
        h.broker.open_docs = ["/w/A.lean"]
        for method, fields in (("resources/list", {}), ("resources/read", {"uri": "lsp-diagnostics:///w/A.lean"})):
            result = (await h.request(method, fields))["result"]
            assert not {"resultType", "ttlMs", "cacheScope", "_meta"} & set(result), result


# ---- resources/read ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
async def test_read_returns_the_cached_diagnostics_with_lean_fields(family: str, files: list[str]) -> None:
    async with opened() as h:
        await start(h, family)
        error = {**diag("Type mismatch"), "leanTags": [1], "code": "lean.typeMismatch"}
        h.broker.documents[files[0]] = snap(3, "complete", [error])
        document = await read(h, family, uri(files[0]))
        assert document == {
            "path": files[0],
            "tracked": True,
            "version": 3,
            "diagnostics": [error],
            "availability": "published",
            "elaboration": "complete",
            "processing": [],
            "indexing_in_progress": False,
            "push_notifications_degraded": False,
            "truncated": 0,
        }
        assert h.broker.calls == []  # reads never start Lean


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        (None, {"tracked": False, "availability": "pending", "version": None, "elaboration": None}),
        (busy(2, 5), {"tracked": True, "indexing_in_progress": True, "elaboration": "processing"}),
        (snap(2, "failed"), {"elaboration": "failed", "indexing_in_progress": False}),
        (snap(None, None, availability="evicted"), {"availability": "evicted", "version": None}),
        ({**snap(1, "complete", [diag("e")]), "truncated": 4}, {"truncated": 4}),
    ],
)
async def test_read_shapes(files: list[str], snapshot: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    async with opened() as h:
        if snapshot is not None:
            h.broker.documents[files[0]] = snapshot
        document = await read(h, "modern", uri(files[0]))
        assert {k: document[k] for k in expected} == expected
        if not document["tracked"]:
            assert document["diagnostics"] == []
        if expected.get("indexing_in_progress"):
            assert document["processing"] == snapshot["processing"]  # type: ignore[index]


async def test_read_resolves_aliases_to_the_canonical_file_and_echoes_the_uri_asked(
    files: list[str], tmp_path: Path
) -> None:
    link = tmp_path / "link dir"
    link.symlink_to(Path(files[0]).parent)
    async with opened() as h:
        h.broker.documents[files[0]] = snap(1, "complete", [diag("boom")])
        asked = uri(link / "A.lean")
        assert "%20" in asked
        document = await read(h, "modern", asked)
        assert document["path"] == files[0] and document["diagnostics"][0]["message"] == "boom"


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({}, "requires a uri string"),
        ({"uri": 7}, "requires a uri string"),
        ({"uri": "file:///a.lean"}, "unsupported resource URI"),
        ({"uri": "lsp-diagnostics://host/a.lean"}, "empty authority"),
        ({"uri": "lsp-diagnostics:///a.lean", "extra": 1}, "undeclared"),
        ({"uri": "lsp-diagnostics:///a.lean", "requestState": "s"}, "input_required"),
        ({"uri": "lsp-diagnostics:///a.lean", "inputResponses": {}}, "input_required"),
    ],
)
@pytest.mark.parametrize("family", FAMILIES)
async def test_bad_reads_are_invalid_params(family: str, fields: dict[str, Any], fragment: str) -> None:
    async with opened() as h:
        await start(h, family)
        response = await rpc(h, family, "resources/read", **fields)
        assert response["error"]["code"] == INVALID_PARAMS and fragment in response["error"]["message"], response


async def test_reads_and_lists_do_not_wait_for_a_loading_broker(files: list[str]) -> None:
    release = anyio.Event()
    broker = FakeBroker()
    broker.documents[files[0]] = snap()

    @contextlib.asynccontextmanager
    async def slow_factory() -> AsyncIterator[FakeBroker]:
        await release.wait()
        yield broker

    sent: list[bytes] = []

    async def write(data: bytes) -> None:
        sent.append(data)

    async with McpServer.open(ServerConfig(broker_factory=slow_factory), write) as server:
        for params_ in ({"_meta": modern_meta()}, {"uri": uri(files[0]), "_meta": modern_meta()}):
            method = "resources/read" if "uri" in params_ else "resources/list"
            message = {"jsonrpc": "2.0", "id": method, "method": method, "params": params_}
            await server.receive(json.dumps(message).encode() + b"\n")
        await anyio.wait_all_tasks_blocked()
        listed, document = (json.loads(line) for line in sent)
        assert listed["result"]["resources"] == []
        assert json.loads(document["result"]["contents"][0]["text"])["tracked"] is False
        release.set()


# ---- family rules -----------------------------------------------------------------------------------------------
async def test_modern_resource_requests_select_the_modern_family() -> None:
    async with opened() as h:
        assert "result" in await rpc(h, "modern", "resources/list")
        assert (await h.request("initialize", INIT))["error"]["code"] == INVALID_REQUEST
        bare = await h.request("resources/subscribe", {"uri": "lsp-diagnostics:///a.lean"})
        assert bare["error"]["code"] == INVALID_PARAMS
        subscribe = await rpc(h, "modern", "resources/subscribe", uri="lsp-diagnostics:///a.lean")
        assert subscribe["error"] == {
            "code": METHOD_NOT_FOUND,
            "message": "resources/subscribe is not part of MCP 2026-07-28: use subscriptions/listen",
        }


async def test_a_legacy_session_rejects_listen_and_modern_resource_traffic() -> None:
    async with opened() as h:
        await h.initialize()
        legacy_listen = await h.request("subscriptions/listen", {"notifications": {}})
        assert legacy_listen["error"]["code"] == METHOD_NOT_FOUND
        for method in ("resources/list", "subscriptions/listen"):
            response = await rpc(h, "modern", method, notifications={})
            assert response["error"]["code"] == INVALID_REQUEST
            assert "already selected the legacy protocol family" in response["error"]["message"]


async def test_legacy_subscriptions_need_the_initialized_notification() -> None:
    async with opened() as h:
        await h.request("initialize", INIT)
        response = await h.request("resources/subscribe", {"uri": "lsp-diagnostics:///a.lean"})
        assert response["error"] == {
            "code": INVALID_REQUEST,
            "message": "notifications/initialized is required before MCP operation requests",
        }


# ---- subscriptions: shared behaviour of both families -------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
async def test_subscribing_records_first_then_replays_a_cached_snapshot(family: str, files: list[str]) -> None:
    async with opened(update_interval=60.0) as h:
        await start(h, family)
        h.broker.documents[files[0]] = snap(1, "complete", [diag("e")])
        h.broker.open_docs = [files[1]]
        h.broker.documents[files[1]] = snap(None, None, availability="pending")
        w = Watcher(h, family)
        messages = await w.subscribe(uri(files[0]), uri(files[1]), uri(files[2]))
        if family == "modern":
            ack, *messages = messages
            assert ack == {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "notifications": {"resourceSubscriptions": [uri(f) for f in files]},
                    "_meta": {SUB_ID: "listen-1"},
                },
            }
        # Only the file Lean has reported on is replayed (not the open-but-pending one, not the unknown one).
        assert w.check(messages) == [uri(files[0])]
        h.broker.publish(files[2], snap(1, "complete", []))  # a change after subscribing is never lost
        assert await w.updates() == [uri(files[2])]


async def test_the_legacy_replay_follows_the_subscribe_response(files: list[str]) -> None:
    async with opened() as h:
        await h.initialize()
        h.broker.documents[files[0]] = snap()
        await h.send({"jsonrpc": "2.0", "id": "s", "method": "resources/subscribe", "params": {"uri": uri(files[0])}})
        first, second = await h.recv(), await h.recv()
        assert first == {"jsonrpc": "2.0", "id": "s", "result": {}}
        assert second == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": uri(files[0])},
        }


@pytest.mark.parametrize("family", FAMILIES)
async def test_updates_follow_changes_and_skip_identical_republishes(family: str, files: list[str]) -> None:
    async with opened(update_interval=60.0) as h:
        await start(h, family)
        w = Watcher(h, family)
        await w.subscribe(uri(files[0]))
        h.broker.publish(files[1], snap())  # not subscribed
        assert await w.updates() == []
        h.broker.publish(files[0], snap(1, "complete", [diag("e")]))
        assert await w.updates() == [uri(files[0])]
        h.broker.publish(files[0], snap(1, "complete", [diag("e")]))  # the same view again
        assert await w.updates() == []
        h.broker.publish(files[0], snap(1, "complete", [diag("e"), diag("f", 2)]))
        assert await w.updates() == [uri(files[0])]
        h.broker.publish(files[0], snap(None, None, availability="evicted"))
        assert await w.updates() == [uri(files[0])]
        h.broker.publish(files[0])  # a server restart forgets everything: pending again
        assert await w.updates() == [uri(files[0])]


@pytest.mark.parametrize("family", FAMILIES)
async def test_processing_updates_are_throttled_and_completion_is_immediate(family: str, files: list[str]) -> None:
    async with opened(update_interval=60.0) as h:
        await start(h, family)
        w = Watcher(h, family)
        h.broker.documents[files[0]] = snap(1, "complete")
        await w.subscribe(uri(files[0]))  # the replay counts as the last update
        await quiet(h)
        h.broker.publish(files[0], busy(2, 0))
        assert await w.updates() == []  # the replay was just sent: the processing update waits
        h.broker.publish(files[0], snap(2, "complete", [diag("e")]))
        assert await w.updates() == [uri(files[0])]
        # Lean republishes many times per elaboration: a burst of processing changes yields no update within the
        # interval, and the completion is sent at once.
        for line in range(1, 40):
            h.broker.publish(files[0], busy(3, line, [diag(f"e{i}", i) for i in range(line // 10)]))
        assert await w.updates() == []
        h.broker.publish(files[0], snap(3, "failed", [diag("fatal")]))
        assert await w.updates() == [uri(files[0])]


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_throttled_processing_update_is_delivered_when_the_interval_ends(family: str, files: list[str]) -> None:
    async with opened(update_interval=1.0) as h:
        await start(h, family)
        w = Watcher(h, family)
        await w.subscribe(uri(files[0]))
        started = anyio.current_time()
        h.broker.publish(files[0], busy(1, 0))
        assert await w.updates() == [uri(files[0])]  # the first processing update is not delayed
        with anyio.fail_after(5):
            for line in range(1, 30):
                h.broker.publish(files[0], busy(1, line))
            assert await w.updates() == []
            message = await h.recv()
            assert w.check([message]) == [uri(files[0])]
            assert anyio.current_time() - started >= 0.99
        assert await w.updates() == []  # one deferred update for the whole burst


@pytest.mark.parametrize("family", FAMILIES)
async def test_an_unwritten_update_absorbs_later_changes(family: str, files: list[str]) -> None:
    async with opened(update_interval=0) as h:
        await start(h, family)
        w = Watcher(h, family)
        await w.subscribe(uri(files[0]))
        gate = h.pause_output()  # a client that is not reading
        for n in range(10):
            h.broker.publish(files[0], snap(1, "complete", [diag(f"e{n}")]))
            await anyio.wait_all_tasks_blocked()
        gate.set()
        assert await w.updates() == [uri(files[0])] * 2  # the one in flight, then the latest state once


@pytest.mark.parametrize("family", FAMILIES)
async def test_each_spelling_of_a_file_gets_its_update(family: str, files: list[str], tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(Path(files[0]).parent)
    spellings = [uri(files[0]), uri(link / "A.lean"), uri(files[0]).replace("A.lean", "./A.lean")]
    async with opened(update_interval=60.0) as h:
        await start(h, family)
        w = Watcher(h, family)
        await w.subscribe(*spellings)
        h.broker.publish(files[0], snap())
        assert await w.updates() == spellings


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_dropped_workspace_updates_its_subscribed_files(family: str, files: list[str]) -> None:
    async def drop(arguments: Any, ctx: Any) -> dict[str, Any]:
        h.broker.documents.clear()  # like the broker: the runtime's cache is gone, and no listener hears of it
        return {}

    async with opened(update_interval=60.0) as h:
        await start(h, family)
        h.broker.handlers["drop_workspace"] = drop
        h.broker.documents[files[0]] = snap()
        w = Watcher(h, family, rid="w")
        await w.subscribe(uri(files[0]), uri(files[1]))
        await quiet(h)
        drop_args = {"workspace": {"root": str(Path(files[0]).parent)}}
        response, _ = await h.call("lean_drop_workspace", drop_args, modern=family == "modern")
        assert "result" in response
        assert await w.updates() == [uri(files[0])]  # B.lean was never known: unchanged, no update


# ---- legacy subscribe / unsubscribe ----------------------------------------------------------------------------
async def test_unsubscribe_by_the_spelling_used_works_after_the_symlink_moves(files: list[str], tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(Path(files[0]).parent)
    async with opened(update_interval=60.0) as h:
        await h.initialize()
        via_link = uri(link / "A.lean")
        w = Watcher(h, "legacy")
        await w.subscribe(via_link, uri(files[1]))
        link.unlink()
        link.symlink_to(tmp_path)  # the alias now resolves elsewhere
        assert (await h.request("resources/unsubscribe", {"uri": via_link}))["result"] == {}
        h.broker.publish(files[0], snap())
        assert await w.updates() == []
        h.broker.publish(files[1], snap())
        assert await w.updates() == [uri(files[1])]


async def test_unsubscribe_by_another_spelling_drops_every_spelling_of_that_file(files: list[str]) -> None:
    async with opened(update_interval=60.0) as h:
        await h.initialize()
        w = Watcher(h, "legacy")
        other = uri(files[0]).replace("A.lean", "./A.lean")
        await w.subscribe(uri(files[0]), other)
        third = uri(files[0]).replace("/A.lean", "/../proj/A.lean")
        assert (await h.request("resources/unsubscribe", {"uri": third}))["result"] == {}
        h.broker.publish(files[0], snap())
        assert await w.updates() == []


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"uri": "lsp-diagnostics:///nowhere.lean"}, None),  # not subscribed: fine
        ({"uri": "file:///a.lean"}, INVALID_PARAMS),
        ({"uri": "lsp-diagnostics://h/a.lean"}, INVALID_PARAMS),
        ({}, INVALID_PARAMS),
        ({"uri": "lsp-diagnostics:///a.lean", "x": 1}, INVALID_PARAMS),
    ],
)
@pytest.mark.parametrize("subscribed", [False, True])
async def test_unsubscribe_errors_only_for_malformed_requests(
    fields: dict[str, Any], code: int | None, subscribed: bool, files: list[str]
) -> None:
    async with opened() as h:
        await h.initialize()
        if subscribed:
            await Watcher(h, "legacy").subscribe(uri(files[0]))
        response = await h.request("resources/unsubscribe", fields)
        if code is None:
            assert response["result"] == {}
        else:
            assert response["error"]["code"] == code


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({}, "requires a uri string"),
        ({"uri": "file:///a.lean"}, "unsupported resource URI"),
        ({"uri": "lsp-diagnostics://h/a.lean"}, "empty authority"),
        ({"uri": "lsp-diagnostics:///a.lean", "x": 1}, "undeclared"),
    ],
)
async def test_bad_subscribes_are_invalid_params_and_record_nothing(
    fields: dict[str, Any], fragment: str, files: list[str]
) -> None:
    async with opened() as h:
        await h.initialize()
        response = await h.request("resources/subscribe", fields)
        assert response["error"]["code"] == INVALID_PARAMS and fragment in response["error"]["message"]
        h.broker.publish("/a.lean", snap())
        assert await quiet(h) == []


async def test_a_session_holds_at_most_1000_subscriptions(tmp_path: Path) -> None:
    async with opened() as h:
        await h.initialize()
        for n in range(1000):
            response = await h.request("resources/subscribe", {"uri": uri(tmp_path / f"F{n}.lean")})
            assert response["result"] == {}
        again = await h.request("resources/subscribe", {"uri": uri(tmp_path / "F7.lean")})
        assert again["result"] == {}  # an existing subscription is not a new one
        over = await h.request("resources/subscribe", {"uri": uri(tmp_path / "F1000.lean")})
        assert over["error"] == {
            "code": INVALID_REQUEST,
            "message": "resources/subscribe: a session holds at most 1000 subscriptions",
            "data": {"limit": 1000},
        }
        await h.request("resources/unsubscribe", {"uri": uri(tmp_path / "F0.lean")})
        assert "result" in await h.request("resources/subscribe", {"uri": uri(tmp_path / "F1000.lean")})


async def test_eof_ends_legacy_subscriptions_quietly(files: list[str]) -> None:
    broker = FakeBroker()
    async with opened(broker) as h:
        await h.initialize()
        await Watcher(h, "legacy").subscribe(uri(files[0]))
        await h.server.shutdown()
        broker.publish(files[0], snap())
        await anyio.wait_all_tasks_blocked()
        assert h.raw_available() == []
    assert broker.listeners == []


# ---- modern subscriptions/listen -------------------------------------------------------------------------------
@pytest.mark.parametrize("rid", ["listen-1", 7])
async def test_listen_acknowledges_the_honoured_subset_then_tags_updates_and_never_answers(
    rid: Any, files: list[str]
) -> None:
    async with opened(update_interval=60.0) as h:
        h.broker.documents[files[1]] = snap()
        flags = {"toolsListChanged": True, "promptsListChanged": False, "resourcesListChanged": True, "taskIds": ["t"]}
        request = listen(rid, [uri(files[0]), uri(files[1]), uri(files[0])], **flags)
        await h.send(request)
        ack, replay = await quiet(h)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"] == {
            "notifications": {"resourceSubscriptions": [uri(files[0]), uri(files[1])]},
            "_meta": {SUB_ID: rid},
        }
        assert replay["params"] == {"uri": uri(files[1]), "_meta": {SUB_ID: rid}}
        h.broker.publish(files[0], snap())
        [update] = await quiet(h)
        assert update["params"] == {"uri": uri(files[0]), "_meta": {SUB_ID: rid}}
        assert [m for m in await quiet(h) if "id" in m] == []  # the listen request is still open


@pytest.mark.parametrize(
    "notifications",
    [{}, {"resourceSubscriptions": []}, {"toolsListChanged": True, "resourcesListChanged": True}],
)
async def test_a_listen_that_honours_nothing_is_closed_gracefully_at_once(notifications: dict[str, Any]) -> None:
    async with opened() as h:
        message = listen("l", **notifications)
        await h.send(message)
        ack, final = await quiet(h)
        assert ack["params"] == {"notifications": {}, "_meta": {SUB_ID: "l"}}
        assert final["id"] == "l"
        assert final["result"]["_meta"][SUB_ID] == "l" and final["result"]["resultType"] == "complete"
        assert SERVER_INFO_KEY in final["result"]["_meta"]
        assert "result" in await h.request("tools/list", {"_meta": modern_meta()}, rid="l")  # the id is free


@pytest.mark.parametrize(
    ("notifications", "fragment"),
    [
        (None, "requires a notifications object"),
        ([], "requires a notifications object"),
        ({"toolsListChanged": "yes"}, "must be a boolean"),
        ({"resourceSubscriptions": "lsp-diagnostics:///a.lean"}, "array of URIs"),
        ({"resourceSubscriptions": [1]}, "array of URIs"),
        ({"resourceSubscriptions": ["lsp-diagnostics:///a.lean", "file:///b.lean"]}, "unsupported resource URI"),
        ({"resourceSubscriptions": ["lsp-diagnostics://host/a.lean"]}, "empty authority"),
        ({"resourceSubscriptions": [f"lsp-diagnostics:///F{n}.lean" for n in range(1001)]}, "at most 1000"),
    ],
)
async def test_bad_listens_are_invalid_params_without_an_acknowledgement(notifications: Any, fragment: str) -> None:
    async with opened() as h:
        fields: dict[str, Any] = {"_meta": modern_meta()}
        if notifications is not None:
            fields["notifications"] = notifications
        response = await h.request("subscriptions/listen", fields)
        assert response["error"]["code"] == INVALID_PARAMS and fragment in response["error"]["message"], response
        assert await quiet(h) == []
        extra = await h.request("subscriptions/listen", {**fields, "notifications": {}, "x": 1})
        assert "undeclared" in extra["error"]["message"]


async def test_cancelling_a_listen_stops_it_silently_and_frees_its_id(files: list[str]) -> None:
    async with opened(update_interval=60.0) as h:
        await h.send(listen("l", [uri(files[0])]))
        await quiet(h)
        gate = h.pause_output()
        await h.send({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": modern_meta()}})
        await anyio.wait_all_tasks_blocked()  # the writer is stuck on this answer
        h.broker.publish(files[0], snap())  # queued behind it when the cancel arrives
        await anyio.wait_all_tasks_blocked()
        await h.notify("notifications/cancelled", {"requestId": "l", "reason": "done"})
        gate.set()
        [listed] = await quiet(h)  # no result for the stream, and not its queued update either
        assert listed["id"] == 1
        h.broker.publish(files[0], snap(2))
        assert await quiet(h) == []
        await h.send(listen("l", [uri(files[1])]))  # the id is reusable at once
        [ack] = await quiet(h)
        assert ack["params"]["_meta"] == {SUB_ID: "l"}
        h.broker.publish(files[0], snap(3))
        assert await quiet(h) == []


async def test_at_most_100_listens_are_open_at_once(files: list[str]) -> None:
    async with opened() as h:
        for n in range(100):
            await h.send(listen(n, [uri(files[0])]))
        await quiet(h)
        response = await h.request("subscriptions/listen", listen(100, [uri(files[0])])["params"], rid=100)
        assert response["error"] == {
            "code": INVALID_REQUEST,
            "message": "subscriptions/listen: at most 100 streams may be open; cancel one first",
            "data": {"limit": 100},
        }
        assert await quiet(h) == []
        await h.notify("notifications/cancelled", {"requestId": 5})
        await h.send(listen(100, [uri(files[0])]))
        [ack] = await quiet(h)
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        h.broker.publish(files[0], snap())
        assert len(updated(await quiet(h))) == 100


async def test_listens_never_block_calls_or_the_drop_fence(files: list[str]) -> None:
    async with opened(update_interval=60.0) as h:
        await h.send(listen("l", [uri(files[0])]))
        await quiet(h)
        root = str(Path(files[0]).parent)
        dropped, _ = await h.call("lean_drop_workspace", {"workspace": {"root": root}})
        assert "result" in dropped
        synced, _ = await h.call("lean_sync", {"workspace": {"root": root}, "path": "A.lean"})
        assert "result" in synced
        listed = await h.request("resources/list", {"_meta": modern_meta()})
        assert "result" in listed
        await h.send({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": modern_meta()}})
        assert await quiet(h) == []  # the id is owned by the open stream: ignored, as for any active id
        h.broker.publish(files[0], snap())
        assert updated(await quiet(h)) == [uri(files[0])]


async def test_eof_ends_listens_without_a_result(files: list[str]) -> None:
    broker = FakeBroker()
    outputs: list[dict[str, Any]] = []
    async with opened(broker) as h:
        await h.send(listen("l", [uri(files[0])]))
        await quiet(h)
        with anyio.fail_after(5):
            await h.server.shutdown()
        broker.publish(files[0], snap())
        await anyio.wait_all_tasks_blocked()
        outputs = [json.loads(line) for line in h.raw_available()]
    assert outputs == [] and broker.listeners == [] and broker.closed
