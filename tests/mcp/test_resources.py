"""Diagnostics as MCP resources (`_resources`): URIs, list pages, reads, legacy subscriptions, modern listen streams.

The module's pure functions are tested directly; the methods run through the server over the real broker, with
diagnostics published by syncing real files through the scripted fake Lean server (its markers: `ERROR_HERE`,
`WARN_HERE`, ...). Delivery rules that need exact timing (coalescing, throttling) are `test_subscriptions`'.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_mcp import McpServer, ServerConfig, _resources
from beam_mcp._jsonrpc import classify, loads
from beam_mcp.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JsonRpcError
from tests.broker.test_broker import startup_gate
from tests.support.fixtures import fake_cmd

from .support import INIT, SERVER_INFO_KEY, Collected, Harness, LeanGate, Sink, harness, modern_meta, structured

pytestmark = pytest.mark.anyio

SUB_ID = "io.modelcontextprotocol/subscriptionId"
FAMILIES = ["legacy", "modern"]
BROKEN = "theorem a : True := ERROR_HERE\n"
FIXED = "theorem a : True := trivial\n"


def uri(path: str | Path) -> str:
    return _resources.path_to_uri(str(path))


@pytest.fixture
def project(fake_project: Callable[..., Path]) -> Path:
    return fake_project("proj", {"A.lean": BROKEN, "B.lean": FIXED, "C.lean": FIXED})


@pytest.fixture
def files(project: Path) -> list[str]:
    return [str(project / name) for name in ("A.lean", "B.lean", "C.lean")]


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
    assert caught.value.data == ({"uri": text} if isinstance(text, str) else None)  # MCP: not found names the uri


# ---- list pages and read documents ----------------------------------------------------------------------------------
def test_list_pages_the_sorted_paths_by_hundreds() -> None:
    paths = [f"/w/F{i:03d}.lean" for i in range(250)]
    seen: list[str] = []
    cursors: list[str | None] = []
    params: dict[str, Any] = {}
    while True:
        page = _resources.list_page(paths, params)
        seen += [r["uri"] for r in page["resources"]]
        cursors.append(page.get("nextCursor"))
        if "nextCursor" not in page:
            break
        params = {"cursor": page["nextCursor"]}
    assert cursors == ["100", "200", None]
    assert seen == [f"lsp-diagnostics:///w/F{i:03d}.lean" for i in range(250)]
    assert _resources.list_page(paths, {"cursor": "7"})["resources"][0] == {
        "uri": "lsp-diagnostics:///w/F007.lean",
        "name": "F007.lean",
        "mimeType": "application/json",
        "description": "Lean diagnostics for this file",
    }
    for past in ("250", "1000", "9" * 40, "0" * 30 + "260"):
        page = _resources.list_page(paths, {"cursor": past})
        assert page["resources"] == [] and "nextCursor" not in page, past


def diag(message: str, line: int = 0, severity: int = 1) -> dict[str, Any]:
    r = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 4}}
    return {"range": r, "fullRange": r, "severity": severity, "message": message, "source": "Lean 4"}


@pytest.mark.parametrize(
    ("snapshot", "expected"),
    [
        (
            {"path": "/p/A.lean", "tracked": False, "availability": "pending", "diagnostics": []},
            {"tracked": False, "availability": "pending", "version": None, "elaboration": None, "processing": [],
             "open": False},
        ),
        (
            {"path": "/p/A.lean", "tracked": True, "availability": "published", "version": 3, "diagnostics": [],
             "open": True, "elaboration": "processing", "processing": [{"start": 1}]},
            {"open": True, "indexing_in_progress": True, "processing": [{"start": 1}], "version": 3},
        ),
        (
            {"path": "/p/A.lean", "tracked": True, "availability": "evicted", "diagnostics": []},
            {"tracked": True, "availability": "evicted", "version": None, "indexing_in_progress": False},
        ),
        (
            {"path": "/p/A.lean", "tracked": True, "availability": "published", "version": 2,
             "diagnostics": [diag("e")], "elaboration": "failed", "processing": [], "truncated": 4},
            {"elaboration": "failed", "indexing_in_progress": False, "truncated": 4, "diagnostics": [diag("e")]},
        ),
        (
            {"path": "/p/A.lean", "tracked": False, "availability": "pending", "diagnostics": [diag("stale")]},
            {"diagnostics": [], "push_notifications_degraded": False, "truncated": 0},
        ),
    ],
)  # fmt: skip
def test_read_documents_have_a_fixed_shape(snapshot: dict[str, Any], expected: dict[str, Any]) -> None:
    document = _resources.payload(snapshot)
    assert set(document) == {
        "path",
        "tracked",
        "version",
        "diagnostics",
        "availability",
        "open",
        "elaboration",
        "processing",
        "indexing_in_progress",
        "push_notifications_degraded",
        "truncated",
    }
    assert {k: document[k] for k in expected} == expected


# ---- helpers for the protocol tests --------------------------------------------------------------------------------
def ws(root: str | Path, **arguments: Any) -> dict[str, Any]:
    return {"workspace": {"root": str(root)}, **arguments}


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


async def sync(h: Harness, root: Path, name: str) -> dict[str, Any]:
    """Sync a file on the side (its diagnostics are published; updates reach the subscribers under test)."""
    response = await h.side("tools/call", {"name": "lean_sync", "arguments": ws(root, path=name)})
    out: dict[str, Any] = response["result"]["structuredContent"]
    assert "version" in out, out
    return out


async def until_read(
    h: Harness, w: Watcher, resource: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Read `resource` after each of its updates until `predicate` holds for the document."""
    with anyio.fail_after(10):
        while not predicate(document := await read(h, w.family, resource)):
            assert resource in w.check([await h.recv()])
    return document


async def settled(h: Harness) -> list[dict[str, Any]]:
    """What the server sent once every admitted call finished and nothing can make progress."""
    await h.fence()
    return await h.quiet()


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
        return await self.h.quiet()

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
        return self.check(await settled(self.h))


def message_of(obj: dict[str, Any]) -> Any:
    return classify(loads(json.dumps(obj)))


def message(rid: Any, method: str, params: Any = None) -> Any:
    """A request (or, without an id, a notification) for `McpServer.handle`."""
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        obj["id"] = rid
    if params is not None:
        obj["params"] = params
    return message_of(obj)


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


# ---- resources/list -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
async def test_list_is_empty_before_any_workspace_and_never_starts_one(family: str) -> None:
    async with harness() as h:
        await start(h, family)
        response = await rpc(h, family, "resources/list")
        assert response["result"]["resources"] == [] and "nextCursor" not in response["result"]
        assert (await h.stats())["workspaces"] == {}


@pytest.mark.parametrize("family", FAMILIES)
async def test_list_names_the_open_documents_of_every_workspace_sorted(
    family: str, project: Path, fake_project: Callable[..., Path]
) -> None:
    other = fake_project("other", {"Z.lean": FIXED})
    async with harness() as h:
        await start(h, family)
        for root, name in ((project, "C.lean"), (other, "Z.lean"), (project, "A.lean")):
            await h.side("tools/call", {"name": "lean_update", "arguments": ws(root, path=name)})
        result = (await rpc(h, family, "resources/list"))["result"]
        expected = sorted([str(project / "A.lean"), str(project / "C.lean"), str(other / "Z.lean")])
        assert [r["uri"] for r in result["resources"]] == [uri(p) for p in expected]
        assert result["resources"][0] == {
            "uri": uri(expected[0]),
            "name": Path(expected[0]).name,
            "mimeType": "application/json",
            "description": "Lean diagnostics for this file",
        }
        assert "nextCursor" not in result
        await h.side("tools/call", {"name": "lean_close", "arguments": ws(project, path="C.lean")})
        result = (await rpc(h, family, "resources/list"))["result"]
        assert str(project / "C.lean") not in [_resources.uri_to_path(r["uri"]) for r in result["resources"]]
        past = (await rpc(h, family, "resources/list", cursor="100"))["result"]
        assert past["resources"] == [] and "nextCursor" not in past


@pytest.mark.parametrize("cursor", ["", "abc", "-1", " 1", "1.0", "²", 100, None, ["1"]])
@pytest.mark.parametrize("family", FAMILIES)
async def test_unparsable_list_cursors_are_invalid_params(family: str, cursor: Any) -> None:
    async with harness() as h:
        await start(h, family)
        response = await rpc(h, family, "resources/list", cursor=cursor)
        assert response["error"]["code"] == INVALID_PARAMS, response


async def test_modern_lists_and_reads_are_private_short_lived_cache_results() -> None:
    async with harness() as h:
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
    async with harness() as h:
        await h.initialize()
        for method, fields in (("resources/list", {}), ("resources/read", {"uri": "lsp-diagnostics:///w/A.lean"})):
            result = (await h.request(method, fields))["result"]
            assert not {"resultType", "ttlMs", "cacheScope", "_meta"} & set(result), result


async def test_the_template_names_a_file_by_its_absolute_path() -> None:
    async with harness() as h:
        result = (await rpc(h, "modern", "resources/templates/list"))["result"]
        [template] = result["resourceTemplates"]
        assert template["uriTemplate"] == "lsp-diagnostics:///{+path}" and template["mimeType"] == "application/json"
        assert result["resultType"] == "complete"


# ---- resources/read ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
async def test_read_returns_the_cached_diagnostics_with_lean_fields(family: str, project: Path) -> None:
    error = {"line": 0, "message": "Type mismatch", "severity": 1, "code": "lean.typeMismatch", "leanTags": [1]}
    async with harness({"diagnostics": {"A.lean": [error]}}) as h:
        await start(h, family)
        before = await read(h, family, uri(project / "A.lean"))  # reads never start Lean
        assert (before["tracked"], before["availability"], before["version"], before["open"]) == (
            False,
            "pending",
            None,
            False,
        )
        assert (await h.stats())["workspaces"] == {}
        await sync(h, project, "A.lean")
        document = await read(h, family, uri(project / "A.lean"))
        line = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": len(BROKEN) - 1}}
        assert document == {
            "path": str(project / "A.lean"),
            "tracked": True,
            "version": 1,
            "diagnostics": [
                {
                    "range": line,
                    "fullRange": line,
                    "severity": 1,
                    "message": "Type mismatch",
                    "source": "Lean 4",
                    "code": "lean.typeMismatch",
                    "leanTags": [1],
                }
            ],
            "availability": "published",
            "open": True,
            "elaboration": "complete",
            "processing": [],
            "indexing_in_progress": False,
            "push_notifications_degraded": False,
            "truncated": 0,
        }


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_closed_file_reads_what_lean_said_while_it_was_open(family: str, project: Path) -> None:
    a = uri(project / "A.lean")
    async with harness() as h:
        await start(h, family)
        await sync(h, project, "A.lean")
        while_open = await read(h, family, a)
        await h.side("tools/call", {"name": "lean_close", "arguments": ws(project, path="A.lean")})
        await h.fence()
        closed = await read(h, family, a)
        assert (while_open["open"], closed["open"]) == (True, False)
        # Frozen at the close, never a false clean (Lean's own empty publish for a closed file is not taken).
        assert closed["diagnostics"] == while_open["diagnostics"] != []
        assert (closed["availability"], closed["version"]) == ("published", 1)
        assert (await rpc(h, family, "resources/list"))["result"]["resources"] == []  # listed while open only


async def test_a_file_lean_is_still_elaborating_reads_as_processing(project: Path) -> None:
    a = uri(project / "A.lean")
    async with harness({"elab_ms": 600000}) as h:
        w = Watcher(h, "modern")
        await w.subscribe(a)
        await h.side("tools/call", {"name": "lean_update", "arguments": ws(project, path="A.lean")})
        document = await until_read(h, w, a, lambda d: d["elaboration"] == "processing")
        assert (document["tracked"], document["indexing_in_progress"]) == (True, True)
        whole = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
        assert document["processing"] == [whole]


async def test_a_crashed_file_worker_reads_as_failed(project: Path) -> None:
    a = uri(project / "A.lean")
    async with harness({"worker_crash_on": "textDocument/documentSymbol"}, update_interval=0) as h:
        synced = await sync(h, project, "A.lean")
        w = Watcher(h, "modern")
        await w.subscribe(a)
        arguments = ws(project, path="A.lean", version=synced["version"])
        response = await h.side("tools/call", {"name": "lean_document_symbols", "arguments": arguments})
        assert response["result"]["isError"] is True
        document = await until_read(h, w, a, lambda d: d["elaboration"] == "failed")
        assert document["indexing_in_progress"] is False


async def test_read_resolves_aliases_to_the_canonical_file_and_echoes_the_uri_asked(
    project: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link dir"
    link.symlink_to(project)
    async with harness() as h:
        await sync(h, project, "A.lean")
        asked = uri(link / "A.lean")
        assert "%20" in asked
        document = await read(h, "modern", asked)
        assert document["path"] == str(project / "A.lean")
        assert [d["message"] for d in document["diagnostics"]] == ["unknown identifier 'ERROR_HERE'"]


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"uri": 7},
        {"uri": "file:///a.lean"},
        {"uri": "lsp-diagnostics://host/a.lean"},
        {"uri": "lsp-diagnostics:///a.lean?x=1"},
        {"uri": "lsp-diagnostics:///a.lean", "extra": 1},
    ],
)
@pytest.mark.parametrize("family", FAMILIES)
async def test_bad_reads_are_invalid_params(family: str, fields: dict[str, Any]) -> None:
    async with harness() as h:
        await start(h, family)
        response = await rpc(h, family, "resources/read", **fields)
        assert response["error"]["code"] == INVALID_PARAMS, response
        if str(fields.get("uri", "")).startswith(("file:", "lsp-")) and "extra" not in fields:
            assert response["error"]["data"] == {"uri": fields["uri"]}, response  # not found: the uri it names


async def test_reads_and_lists_are_answered_while_the_broker_still_loads(files: list[str]) -> None:
    sent: list[bytes] = []

    async def write(data: bytes) -> None:
        sent.append(data)

    async with McpServer.open(ServerConfig(lean_cmd=fake_cmd()), write) as server:
        # Sent before the server's background load of the broker could get anywhere (it needs worker threads).
        for params_ in ({"_meta": modern_meta()}, {"uri": uri(files[0]), "_meta": modern_meta()}):
            method = "resources/read" if "uri" in params_ else "resources/list"
            message = {"jsonrpc": "2.0", "id": method, "method": method, "params": params_}
            await server.receive(json.dumps(message).encode() + b"\n")
        await anyio.wait_all_tasks_blocked()
        listed, document = (json.loads(line) for line in sent[:2])
        assert listed["result"]["resources"] == []
        assert json.loads(document["result"]["contents"][0]["text"])["tracked"] is False


# ---- family rules -----------------------------------------------------------------------------------------------
async def test_modern_resource_requests_select_the_modern_family() -> None:
    async with harness() as h:
        assert "result" in await rpc(h, "modern", "resources/list")
        assert (await h.request("initialize", INIT))["error"]["code"] == INVALID_REQUEST
        bare = await h.request("resources/subscribe", {"uri": "lsp-diagnostics:///a.lean"})
        assert bare["error"]["code"] == INVALID_PARAMS
        subscribe = await rpc(h, "modern", "resources/subscribe", uri="lsp-diagnostics:///a.lean")
        assert subscribe["error"]["code"] == METHOD_NOT_FOUND
        assert "subscriptions/listen" in subscribe["error"]["message"]


async def test_a_legacy_session_rejects_listen_and_modern_resource_traffic() -> None:
    async with harness() as h:
        await h.initialize()
        legacy_listen = await h.request("subscriptions/listen", {"notifications": {}})
        assert legacy_listen["error"]["code"] == METHOD_NOT_FOUND
        for method in ("resources/list", "subscriptions/listen"):
            response = await rpc(h, "modern", method, notifications={})
            assert response["error"]["code"] == INVALID_REQUEST
            assert "already selected the legacy protocol family" in response["error"]["message"]


async def test_legacy_subscriptions_need_the_initialized_notification() -> None:
    async with harness() as h:
        await h.request("initialize", INIT)
        response = await h.request("resources/subscribe", {"uri": "lsp-diagnostics:///a.lean"})
        assert response["error"] == {
            "code": INVALID_REQUEST,
            "message": "notifications/initialized is required before MCP operation requests",
        }


# ---- subscriptions: shared behaviour of both families -------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
async def test_subscribing_records_first_then_replays_a_cached_snapshot(
    family: str, files: list[str], fake_project: Callable[..., Path]
) -> None:
    held = fake_project("held", {"B.lean": FIXED})
    async with harness(update_interval=60.0) as h, LeanGate.install(held) as gate:
        await start(h, family)
        await sync(h, Path(files[0]).parent, "A.lean")
        # B.lean is open but Lean has said nothing about it yet (its server is busy).
        await h.side("tools/call", {"name": "lean_update", "arguments": ws(held, path="B.lean")})
        with anyio.fail_after(10):
            await gate.reached()
        targets = [files[0], str(held / "B.lean"), files[2]]
        w = Watcher(h, family)
        messages = await w.subscribe(*(uri(t) for t in targets))
        if family == "modern":
            ack, *messages = messages
            assert ack == {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "notifications": {"resourceSubscriptions": [uri(t) for t in targets]},
                    "_meta": {SUB_ID: "listen-1"},
                },
            }
        # Only the file Lean has reported on is replayed (not the open-but-pending one, not the unknown one).
        assert w.check(messages) == [uri(files[0])]
        gate.open()  # Lean reports on B.lean now: a change after subscribing is never lost
        await until_read(h, w, uri(held / "B.lean"), lambda d: d["elaboration"] == "complete")
        assert set(await w.updates()) <= {uri(held / "B.lean")}
        await sync(h, Path(files[2]).parent, "C.lean")
        assert set(await w.updates()) == {uri(files[2])}


async def test_the_legacy_replay_follows_the_subscribe_response(project: Path) -> None:
    async with harness() as h:
        await h.initialize()
        await sync(h, project, "A.lean")
        await h.fence()
        resource = uri(project / "A.lean")
        await h.send({"jsonrpc": "2.0", "id": "s", "method": "resources/subscribe", "params": {"uri": resource}})
        first, second = await h.recv(), await h.recv()
        assert first == {"jsonrpc": "2.0", "id": "s", "result": {}}
        assert second == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": resource}}


@pytest.mark.parametrize("family", FAMILIES)
async def test_updates_follow_changes_of_subscribed_files_only(family: str, project: Path) -> None:
    async with harness(update_interval=60.0) as h:
        await start(h, family)
        a = uri(project / "A.lean")
        w = Watcher(h, family)
        assert (
            w.check([m for m in await w.subscribe(a) if m.get("method") != "notifications/subscriptions/acknowledged"])
            == []
        )
        await sync(h, project, "B.lean")  # not subscribed
        assert await w.updates() == []
        await sync(h, project, "A.lean")
        updates = await w.updates()
        assert updates and set(updates) == {a}
        assert (await read(h, family, a))["elaboration"] == "complete"
        await sync(h, project, "A.lean")  # nothing changed on disk: Lean reports nothing new
        assert await w.updates() == []
        (project / "A.lean").write_text(FIXED, encoding="utf-8")
        await sync(h, project, "A.lean")
        updates = await w.updates()
        assert updates and set(updates) == {a}
        document = await read(h, family, a)
        assert (document["version"], document["diagnostics"]) == (2, [])


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_processing_update_waits_for_the_interval_and_completion_is_immediate(
    family: str, project: Path
) -> None:
    async with harness(update_interval=60.0) as h:
        await start(h, family)
        await sync(h, project, "A.lean")
        w = Watcher(h, family)
        a = uri(project / "A.lean")
        await w.subscribe(a)  # the replay counts as the last update
        (project / "A.lean").write_text(FIXED, encoding="utf-8")
        await sync(h, project, "A.lean")
        # Lean reported processing, then completion: the processing state waited, the completion did not.
        assert await w.updates() == [a]
        assert (await read(h, family, a))["elaboration"] == "complete"


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_throttled_processing_update_is_delivered_when_the_interval_ends(family: str, project: Path) -> None:
    interval = 0.5
    a = uri(project / "A.lean")
    async with harness({"elab_ms": 600000}, update_interval=interval) as h:
        await start(h, family)
        w = Watcher(h, family)
        await w.subscribe(a)
        await h.side("tools/call", {"name": "lean_update", "arguments": ws(project, path="A.lean")})
        await until_read(h, w, a, lambda d: d["elaboration"] == "processing")  # the first one is not delayed
        started = anyio.current_time()
        (project / "A.lean").write_text(FIXED, encoding="utf-8")
        await h.side("tools/call", {"name": "lean_update", "arguments": ws(project, path="A.lean")})
        assert await w.updates() == []  # Lean is processing version 2: that waits for the interval
        with anyio.fail_after(10):
            message = await h.recv()
        assert w.check([message]) == [a]
        assert anyio.current_time() - started >= interval * 0.9
        assert (await read(h, family, a))["version"] == 2
        assert await w.updates() == []  # one deferred update for the whole burst


@pytest.mark.parametrize("family", FAMILIES)
async def test_each_spelling_of_a_file_gets_its_update(family: str, project: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(project)
    spellings = [uri(project / "A.lean"), uri(link / "A.lean"), uri(project / "A.lean").replace("A.lean", "./A.lean")]
    async with harness(update_interval=60.0) as h:
        await start(h, family)
        w = Watcher(h, family)
        await w.subscribe(*spellings)
        await sync(h, project, "A.lean")
        counts = collections.Counter(await w.updates())
        assert set(counts) == set(spellings) and len(set(counts.values())) == 1


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_dropped_workspace_updates_its_subscribed_files(family: str, project: Path) -> None:
    async with harness(update_interval=60.0) as h:
        await start(h, family)
        await sync(h, project, "A.lean")
        w = Watcher(h, family, rid="w")
        a, b = uri(project / "A.lean"), uri(project / "B.lean")
        await w.subscribe(a, b)
        response, seen = await h.call("lean_drop_workspace", ws(project), modern=family == "modern")
        assert structured(response)["dropped"] is True
        assert w.check(seen + await settled(h)) == [a]  # B.lean was never known: unchanged, no update
        assert (await read(h, family, a))["tracked"] is False


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_lean_restart_makes_known_files_pending_again(family: str, project: Path) -> None:
    async with harness({"crash_on": {"method": "textDocument/hover"}}, update_interval=60.0) as h:
        await start(h, family)
        synced = await sync(h, project, "A.lean")
        w = Watcher(h, family)
        a = uri(project / "A.lean")
        await w.subscribe(a)
        arguments = ws(project, path="A.lean", version=synced["version"], line=0, character=0)
        crashed = await h.side("tools/call", {"name": "lean_hover", "arguments": arguments})
        assert crashed["result"]["structuredContent"]["code"] == "workerExited"
        await sync(h, project, "B.lean")  # the next call starts a new Lean server
        updates = await w.updates()
        assert updates and set(updates) == {a}
        document = await read(h, family, a)
        assert (document["availability"], document["diagnostics"]) == ("pending", [])


@pytest.mark.parametrize("family", FAMILIES)
async def test_a_subscription_made_while_lean_starts_hears_once_when_the_start_fails(
    family: str, project: Path
) -> None:
    # Review finding: a failed start reported only the files its workspace knew (and the one the call named), so
    # a subscriber of another file of that workspace, subscribed while Lean was starting, was never told that its
    # read now fails (mcpls: "the subscriber receives one resources/updated if startup then fails").
    async with startup_gate() as gate, harness(lean_cmd=gate.cmd(fake_cmd()), update_interval=60.0) as h:
        await start(h, family)
        failed: list[dict[str, Any]] = []
        b = uri(project / "B.lean")  # never opened: not known to the workspace, not named by the call
        async with anyio.create_task_group() as tg:

            async def first_call() -> None:
                arguments = ws(project, path="A.lean")
                failed.append(await h.side("tools/call", {"name": "lean_sync", "arguments": arguments}))

            tg.start_soon(first_call)
            conn = await gate.arrived()
            w = Watcher(h, family)
            w.check([m for m in await w.subscribe(b) if m.get("method") != "notifications/subscriptions/acknowledged"])
            async with conn:
                await conn.send(b"0")  # the start fails
        assert "error" in failed[0] or failed[0]["result"].get("isError"), failed
        assert await w.updates() == [b]
        response = await rpc(h, family, "resources/read", uri=b)
        assert "error" in response, response  # ... and a re-read fails with the start's error


async def test_a_failed_resubscribe_keeps_the_subscription_it_repeats(project: Path) -> None:
    # Review finding: a `resources/subscribe` answered with the failed start's error rolled back the URI it named,
    # so repeating a subscription the session already held silently ended it.
    async with startup_gate() as gate, harness(lean_cmd=gate.cmd(fake_cmd()), update_interval=60.0) as h:
        await h.initialize()
        a = uri(project / "A.lean")
        w = Watcher(h, "legacy")
        await w.subscribe(a)
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate.answer_next, b"0")  # the start fails
            failed = await h.side("tools/call", {"name": "lean_sync", "arguments": ws(project, path="A.lean")})
        assert "error" in failed, failed
        await settled(h)
        again = await h.request("resources/subscribe", {"uri": a})
        assert "error" in again, again  # subscribing into a failed start is an error (mcpls) ...
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate.answer_next, b"1")  # a later start succeeds
            await sync(h, project, "A.lean")
        assert a in await w.updates()  # ... but the subscription it repeated still stands


# ---- legacy subscribe / unsubscribe ----------------------------------------------------------------------------
async def test_unsubscribe_by_the_spelling_used_works_after_the_symlink_moves(project: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(project)
    async with harness(update_interval=60.0) as h:
        await h.initialize()
        via_link = uri(link / "A.lean")
        w = Watcher(h, "legacy")
        await w.subscribe(via_link, uri(project / "B.lean"))
        link.unlink()
        link.symlink_to(tmp_path)  # the alias now resolves elsewhere
        assert (await h.request("resources/unsubscribe", {"uri": via_link}))["result"] == {}
        await sync(h, project, "A.lean")
        assert await w.updates() == []
        await sync(h, project, "B.lean")
        assert set(await w.updates()) == {uri(project / "B.lean")}


async def test_unsubscribe_by_another_spelling_drops_every_spelling_of_that_file(project: Path) -> None:
    async with harness(update_interval=60.0) as h:
        await h.initialize()
        w = Watcher(h, "legacy")
        a = uri(project / "A.lean")
        await w.subscribe(a, a.replace("A.lean", "./A.lean"))
        third = a.replace("/A.lean", f"/../{project.name}/A.lean")
        assert (await h.request("resources/unsubscribe", {"uri": third}))["result"] == {}
        await sync(h, project, "A.lean")
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
    async with harness() as h:
        await h.initialize()
        if subscribed:
            await Watcher(h, "legacy").subscribe(uri(files[0]))
        response = await h.request("resources/unsubscribe", fields)
        if code is None:
            assert response["result"] == {}
        else:
            assert response["error"]["code"] == code


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"uri": "file:///a.lean"},
        {"uri": "lsp-diagnostics://h/a.lean"},
        {"uri": "lsp-diagnostics:///a.lean", "x": 1},
    ],
)
async def test_bad_subscribes_are_invalid_params_and_record_nothing(fields: dict[str, Any], project: Path) -> None:
    async with harness() as h:
        await h.initialize()
        response = await h.request("resources/subscribe", fields)
        assert response["error"]["code"] == INVALID_PARAMS
        await sync(h, project, "A.lean")
        assert await settled(h) == []


async def test_a_session_holds_at_most_1000_subscriptions(tmp_path: Path) -> None:
    async with harness() as h:
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


async def test_eof_ends_legacy_subscriptions_quietly(project: Path) -> None:
    a = uri(project / "A.lean")
    async with harness() as h:
        await sync(h, project, "A.lean")
        await h.fence()
        session_updates = Collected()
        legacy = h.server.channel(notify=session_updates)
        for rid, method, fields in (
            (1, "initialize", INIT),
            (None, "notifications/initialized", None),
            (2, "resources/subscribe", {"uri": a}),
        ):
            await h.server.handle(legacy, message(rid, method, fields), Sink())
        await h.quiet()
        assert len(session_updates.messages) == 1  # the replay
        with anyio.fail_after(10):
            await h.server.shutdown()
        await anyio.wait_all_tasks_blocked()
        assert len(session_updates.messages) == 1


# ---- modern subscriptions/listen -------------------------------------------------------------------------------
@pytest.mark.parametrize("rid", ["listen-1", 7])
async def test_listen_acknowledges_the_honoured_subset_then_tags_updates_and_never_answers(
    rid: Any, project: Path
) -> None:
    a, b = uri(project / "A.lean"), uri(project / "B.lean")
    async with harness(update_interval=60.0) as h:
        await sync(h, project, "B.lean")
        await h.fence()
        flags = {"toolsListChanged": True, "promptsListChanged": False, "resourcesListChanged": True, "taskIds": ["t"]}
        await h.send(listen(rid, [a, b, a], **flags))
        ack, replay = await h.quiet()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"] == {"notifications": {"resourceSubscriptions": [a, b]}, "_meta": {SUB_ID: rid}}
        assert replay["params"] == {"uri": b, "_meta": {SUB_ID: rid}}
        await sync(h, project, "A.lean")
        updates = await settled(h)
        assert updates and all(u["params"] == {"uri": a, "_meta": {SUB_ID: rid}} for u in updates)
        assert [m for m in await h.quiet() if "id" in m] == []  # the listen request is still open


@pytest.mark.parametrize(
    "notifications",
    [{}, {"resourceSubscriptions": []}, {"toolsListChanged": True, "resourcesListChanged": True}],
)
async def test_a_listen_that_honours_nothing_is_closed_gracefully_at_once(notifications: dict[str, Any]) -> None:
    async with harness() as h:
        await h.send(listen("l", **notifications))
        ack, final = await h.quiet()
        assert ack["params"] == {"notifications": {}, "_meta": {SUB_ID: "l"}}
        assert final["id"] == "l"
        assert final["result"]["_meta"][SUB_ID] == "l" and final["result"]["resultType"] == "complete"
        assert SERVER_INFO_KEY in final["result"]["_meta"]
        assert "result" in await h.request("tools/list", {"_meta": modern_meta()}, rid="l")  # the id is free


@pytest.mark.parametrize(
    "notifications",
    [
        {"resourceSubscriptions": ["lsp-diagnostics:///a.lean", "file:///b.lean"]},
        {"resourceSubscriptions": ["lsp-diagnostics://host/a.lean"]},
        {"resourceSubscriptions": [f"lsp-diagnostics:///F{n}.lean" for n in range(1001)]},
    ],
)
async def test_bad_listens_are_invalid_params_without_an_acknowledgement(notifications: Any) -> None:
    async with harness() as h:
        response = await h.request("subscriptions/listen", {"notifications": notifications, "_meta": modern_meta()})
        assert response["error"]["code"] == INVALID_PARAMS, response
        assert await h.quiet() == []


async def test_cancelling_a_listen_stops_it_silently_and_frees_its_id(project: Path) -> None:
    a, b = uri(project / "A.lean"), uri(project / "B.lean")
    async with harness(update_interval=0) as h:
        await h.send(listen("l", [a]))
        await h.quiet()
        gate = h.pause_output()
        await h.send({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {"_meta": modern_meta()}})
        await anyio.wait_all_tasks_blocked()  # the writer is stuck on this answer
        await sync(h, project, "A.lean")  # its updates are queued behind it when the cancel arrives
        await h.fence()
        await anyio.wait_all_tasks_blocked()
        await h.notify("notifications/cancelled", {"requestId": "l", "reason": "done"})
        gate.set()
        [listed] = await h.quiet()  # no result for the stream, and not its queued update either
        assert listed["id"] == 1
        (project / "A.lean").write_text(FIXED, encoding="utf-8")
        await sync(h, project, "A.lean")
        assert await settled(h) == []
        await h.send(listen("l", [b]))  # the id is reusable at once
        [ack] = await h.quiet()
        assert ack["params"]["_meta"] == {SUB_ID: "l"}
        (project / "A.lean").write_text(BROKEN, encoding="utf-8")
        await sync(h, project, "A.lean")
        assert await settled(h) == []


async def test_at_most_100_listens_are_open_at_once(project: Path) -> None:
    a = uri(project / "A.lean")
    async with harness(update_interval=60.0) as h:
        for n in range(100):
            await h.send(listen(n, [a]))
        await h.quiet()
        response = await h.request("subscriptions/listen", listen(100, [a])["params"], rid=100)
        assert response["error"] == {
            "code": INVALID_REQUEST,
            "message": "subscriptions/listen: at most 100 streams may be open; cancel one first",
            "data": {"limit": 100},
        }
        assert await h.quiet() == []
        await h.notify("notifications/cancelled", {"requestId": 5})
        await h.send(listen(100, [a]))
        [ack] = await h.quiet()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        await sync(h, project, "A.lean")
        streams = {u["params"]["_meta"][SUB_ID] for u in await settled(h)}
        assert streams == set(range(101)) - {5}


async def test_listens_never_block_calls_or_the_drop_fence(project: Path) -> None:
    a = uri(project / "A.lean")
    async with harness(update_interval=60.0) as h:
        await h.send(listen("l", [a]))
        await h.quiet()
        dropped, _ = await h.call("lean_drop_workspace", ws(project))
        assert "result" in dropped
        synced, seen = await h.call("lean_sync", ws(project, path="A.lean"))
        assert structured(synced)["version"] == 1
        listed = await h.request("resources/list", {"_meta": modern_meta()})
        assert "result" in listed
        await h.send({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": {"_meta": modern_meta()}})
        messages = seen + await settled(h)  # the id is owned by the open stream: the request is ignored
        assert [m for m in messages if "id" in m] == []
        assert updated(messages) and set(updated(messages)) == {a}


async def test_eof_ends_listens_without_a_result(project: Path) -> None:
    async with harness() as h:
        stream = Sink()
        await h.server.handle(
            h.server.channel(family="modern"), message_of(listen("l", [uri(project / "A.lean")])), stream
        )
        with anyio.fail_after(10):
            await h.server.shutdown()
        assert stream.abandoned and stream.response is None
        assert [m["method"] for m in stream.messages] == ["notifications/subscriptions/acknowledged"]


async def test_closing_a_channel_ends_its_listens_and_its_session_subscriptions(project: Path) -> None:
    a = uri(project / "A.lean")
    async with harness(update_interval=0) as h:
        channel, stream = h.server.channel(family="modern"), Sink()
        await h.server.handle(channel, message_of(listen("l", [a])), stream)
        session_updates = Collected()
        legacy = h.server.channel(notify=session_updates)
        for rid, method, fields in ((1, "initialize", INIT), (None, "notifications/initialized", None)):
            await h.server.handle(legacy, message(rid, method, fields), Sink())
        subscribed = Sink()
        await h.server.handle(legacy, message(2, "resources/subscribe", {"uri": a}), subscribed)
        assert subscribed.response == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await sync(h, project, "A.lean")
        await settled(h)
        assert len(stream.messages) > 1 and session_updates.messages
        h.server.close_channel(channel)
        h.server.close_channel(legacy)
        assert stream.abandoned and stream.response is None
        before = (len(stream.messages), len(session_updates.messages))
        (project / "A.lean").write_text(FIXED, encoding="utf-8")
        await sync(h, project, "A.lean")
        await settled(h)
        assert (len(stream.messages), len(session_updates.messages)) == before
