"""`--tools lean-lsp-mcp` without Lean: the listed surface, argument rules, presentation rules and the web tools.

The web tools run against a local stub server (loopback only) that records each request: the request shape, the
answer mapping, the rate limits and the error when the service is unreachable are checked there.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_mcp._compat import _args, _search, _text, _web, compat_tools, descriptors
from beam_mcp._compat._errors import CompatError
from beam_mcp._compat.projection import Ctx, Projection
from beam_mcp._tools import ToolSet
from beam_mcp.cli import main

SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "lean-lsp-mcp-0.32.0-tools.json"
"""The peer's tools/list as the project keeps it (beside the repository; absent elsewhere)."""


def test_the_surface_lists_lean_lsp_mcps_22_tools_exactly_as_it_does() -> None:
    tools = compat_tools({})
    assert len(tools) == 22
    shipped = [json.loads(json.dumps(d)) for d in descriptors()]
    if SPEC.exists():  # the shipped copy is the peer's own tools/list answer
        assert shipped == json.loads(SPEC.read_text(encoding="utf-8"))
    for tool, entry in zip(tools, shipped, strict=True):
        assert tool.descriptor == {
            k: entry[k] for k in ("name", "description", "inputSchema", "outputSchema", "annotations")
        }
        assert tool.answer is not None


def test_toolset_build_serves_only_the_compat_tools_on_the_lean_lsp_mcp_surface() -> None:
    toolset = ToolSet.build((), compat_tools({})[0], surface="lean-lsp-mcp")
    assert [t.name for t in toolset.tools] == [d["name"] for d in descriptors()]
    assert "lean_sync" not in toolset.by_name and "beam_version" not in toolset.by_name


def test_the_cli_refuses_an_unknown_surface_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEAN_BEAM_TOOLS", "lean-lsp")
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


def _schema(name: str) -> dict[str, Any]:
    return next(d["inputSchema"] for d in descriptors() if d["name"] == name)


def test_arguments_get_the_peers_defaults_and_ignore_undeclared_ones() -> None:
    got = _args.parse(_schema("lean_goal"), {"file_path": "A.lean", "line": 3, "extra": 1})
    assert got == {"file_path": "A.lean", "line": 3, "column": None, "format": "text", "timeout_s": None}
    assert _args.parse(_schema("lean_completions"), {"file_path": "A", "line": 1, "column": 2.0})["column"] == 2


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("lean_goal", {"line": 1}),
        ("lean_goal", {"file_path": "A", "line": 0}),
        ("lean_goal", {"file_path": "A", "line": True}),
        ("lean_goal", {"file_path": "A", "line": 1, "format": "json"}),
        ("lean_multi_attempt", {"file_path": "A", "line": 1, "snippets": ["a", 3]}),
        ("lean_minimal_hypotheses", {"file_path": "A", "theorem_name": "t", "inactivity_timeout": 1}),
    ],
)
def test_arguments_outside_the_schema_are_refused(tool: str, arguments: dict[str, Any]) -> None:
    with pytest.raises(_args.ArgumentError):
        _args.parse(_schema(tool), arguments)


def test_columns_are_code_points_and_lines_one_based() -> None:
    line = "/- 𝔸𝔹 é -/ theorem uni"
    assert _text.to_utf16(line, 5) == 7 and _text.from_utf16(line, 7) == 5
    assert _text.position(["x", line], {"line": 1, "character": 7}) == (2, 6)


def test_goals_render_as_lean_prints_them_and_split_into_structured_goals() -> None:
    goal = {
        "userName": "h",
        "hyps": [{"names": ["p", "q"], "type": "Prop"}, {"names": ["x"], "type": "Nat", "value": "1"}],
        "target": "p",
    }
    text = _text.goal_text(goal)
    assert text == "case h\np q : Prop\nx : Nat := 1\n⊢ p"
    assert _text.structured_goal("p q : Prop\nhp : p\n⊢ p") == {
        "context": [{"name": "p q", "type": "Prop"}, {"name": "hp", "type": "p"}],
        "goal": "p",
        "status": "open",
        "pretty": "p q : Prop\nhp : p\n⊢ p",
    }


def test_diagnostics_get_the_peers_category_hint_and_build_failures() -> None:
    assert _text.category("warning", "declaration uses 'sorry'") == "sorry"
    assert _text.category("warning", "unused variable `x`") == "linter"
    assert _text.category("information", "Try this: simp") == "suggestion"
    assert _text.hint("error", "failed to synthesize instance of type class\n  DecidableEq α") is not None
    items = [
        _text.message_item(["a"], 1, "error: A/B.lean:1:2: bad", {"line": 0, "character": 0}),
        _text.message_item(["a"], 2, "w", {"line": 0, "character": 0}),
        _text.message_item(["a"], 2, "w", {"line": 0, "character": 0}),
    ]
    result = _text.diagnostics_result(items, severity=None, success=False, raw_messages=[i["message"] for i in items])
    assert result["failed_dependencies"] == ["A/B.lean"]
    assert [i["message"] for i in result["items"]] == ["w"]


def test_long_goals_keep_their_end_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_text.MAX_OUTPUT_ENV, "100")
    out = _text.bound("h" * 500 + "⊢ target")
    assert out.endswith("⊢ target") and len(out) < 500


# ---- web tools against a stub ---------------------------------------------------------------------------------
class _Stub(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]
    answers: dict[str, Any]

    def _reply(self, body: bytes | None) -> None:
        self.requests.append(
            {"method": self.command, "path": self.path, "body": json.loads(body) if body else None,
             "agent": self.headers.get("User-Agent"), "key": self.headers.get("X-Key")}
        )  # fmt: skip
        answer = json.dumps(self.answers[self.path.split("?")[0]]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self) -> None:
        self._reply(None)

    def do_POST(self) -> None:
        self._reply(self.rfile.read(int(self.headers["Content-Length"])))

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    requests: list[dict[str, Any]] = []
    answers: dict[str, Any] = {}
    handler = type("Handler", (_Stub,), {"requests": requests, "answers": answers})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests, answers
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


pytestmark = pytest.mark.anyio


async def test_the_web_tools_send_the_peers_requests_and_read_its_answers(
    stub: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    url, requests, answers = stub
    env = {
        "LEANSEARCH_URL": url,
        "LOOGLE_URL": url,
        "LOOGLE_HEADERS": '{"X-Key": "k"}',
        "LEAN_FINDER_URL": url + "/finder",
        "LEAN_HAMMER_URL": url,
    }
    answers["/search"] = [[{"result": {"name": ["Nat", "add_comm"], "module_name": ["Init"], "kind": "theorem"}}]]
    answers["/json"] = {"hits": [{"name": "Nat.add", "type": "Nat → Nat", "module": "Init"}, {"name": "x"}]}
    answers["/finder"] = {"results": [{"formal_name": "f", "path": "Mathlib/Data"}]}
    answers["/retrieve"] = [{"name": "add_comm"}]
    assert await _web.leansearch(env, "comm", 5) == {
        "items": [{"name": "Nat.add_comm", "module_name": "Init", "kind": "theorem", "type": None}]
    }
    assert (await _web.loogle(env, "Nat → Nat", 1))["items"] == [
        {"name": "Nat.add", "type": "Nat → Nat", "module": "Init"}
    ]
    finder = await _web.leanfinder(env, "q", 3, "v4.28.0")
    assert finder["items"][0]["path"] == "Mathlib.Data" and finder["items"][0]["informal_name"] == ""
    assert await _web.hammer_premise(env, "⊢ p", 4) == {"items": [{"name": "add_comm"}]}
    search, look, find, hammer = requests
    assert search["method"] == "POST" and search["body"] == {"num_results": "5", "query": ["comm"]}
    assert look["method"] == "GET" and look["path"] == "/json?q=Nat%20%E2%86%92%20Nat" and look["key"] == "k"
    assert find["body"] == {"inputs": "q", "top_k": 3, "version": "v4.28.0"}
    assert hammer["path"] == "/retrieve" and hammer["body"] == {"state": "⊢ p", "new_premises": [], "k": 4}
    assert {r["agent"] for r in requests} == {"lean-lsp-mcp/0.1"}


async def test_an_unreachable_service_is_a_clear_tool_error(
    stub: tuple[str, list[dict[str, Any]], dict[str, Any]],
) -> None:
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens there
    with pytest.raises(CompatError, match=r"Request to 127\.0\.0\.1:9 failed"):
        await _web.leansearch({"LEANSEARCH_URL": dead}, "q", 1)
    with pytest.raises(CompatError, match="loogle error"):
        await _web.loogle({"LOOGLE_URL": dead}, "q", 1)
    url, _, answers = stub
    answers["/json"] = {"error": "bad query", "suggestions": ["a", "b"]}
    with pytest.raises(CompatError, match="loogle query error: bad query Suggestions: a, b"):
        await _web.loogle({"LOOGLE_URL": url}, "(", 1)


def test_rate_limits_are_the_peers_per_window() -> None:
    now = [0.0]
    limits = _web.RateLimits(clock=lambda: now[0])
    for _ in range(3):
        limits.take("loogle", _web.LOOGLE_LIMIT)
    with pytest.raises(CompatError, match="3 requests per 30s"):
        limits.take("loogle", _web.LOOGLE_LIMIT)
    now[0] = 30.5
    limits.take("loogle", _web.LOOGLE_LIMIT)
    assert _web.custom({"LOOGLE_URL": "http://mine"}, "LOOGLE_URL")
    assert not _web.custom({"LOOGLE_URL": "https://loogle.lean-lang.org/"}, "LOOGLE_URL")


class _StillElaborating:
    """`Calls` whose `sync` never finishes, over a broker whose cache holds two diagnostics and a pending range."""

    def __init__(self) -> None:
        def diagnostic(line: int, message: str) -> dict[str, Any]:
            rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 3}}
            return {"severity": 1, "message": message, "range": rng, "fullRange": rng}

        self.cached = {
            "version": 1,
            "diagnostics": [diagnostic(0, "early"), diagnostic(5, "late")],
            "processing": [{"start": {"line": 6, "character": 0}, "end": {"line": 7, "character": 0}}],
        }

    async def broker_call(self, run: object, name: str, arguments: object) -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def broker(self) -> _StillElaborating:
        return self

    def diagnostics(self, path: str) -> dict[str, Any]:
        return self.cached


@pytest.mark.anyio
async def test_a_partial_diagnostics_answer_keeps_the_line_filter(tmp_path: Path) -> None:
    (tmp_path / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n", encoding="utf-8")
    (tmp_path / "lakefile.toml").write_text('name = "proj"\n', encoding="utf-8")
    (tmp_path / "A.lean").write_text("".join(f"def d{n} := {n}\n" for n in range(8)), encoding="utf-8")
    projection = Projection({"LEAN_PROJECT_PATH": str(tmp_path)})
    cx = Ctx(_StillElaborating(), object())  # type: ignore[arg-type]
    arguments = _args.parse(_schema("lean_diagnostic_messages"), {"file_path": "A.lean", "start_line": 4})
    arguments["timeout_s"] = 0.01  # below the schema's minimum: the test need not wait a second
    with anyio.fail_after(10):
        out = await projection.diagnostic_messages(cx, arguments)
    result = out["result"]
    assert (result["partial"], result["still_elaborating_lines"]) == (True, [[7, 8]])
    assert [i["message"] for i in result["items"]] == ["late"], "lines 4 and on only, as when elaboration finished"


def test_arguments_sent_as_text_are_read_as_the_peers_sdk_and_pydantic_read_them() -> None:
    # MCP clients (Claude Desktop among them) send arrays as JSON text and numbers as strings; lean-lsp-mcp's SDK
    # parses such JSON text and pydantic's lax mode converts the scalars, so the peer runs these calls.
    attempt = _args.parse(_schema("lean_multi_attempt"), {"file_path": "A", "line": "3", "snippets": '["a", "b"]'})
    assert (attempt["line"], attempt["snippets"], attempt["column"]) == (3, ["a", "b"], None)
    goal = _args.parse(_schema("lean_goal"), {"file_path": "A", "line": " 2 ", "column": "null", "timeout_s": "1.5"})
    assert (goal["line"], goal["column"], goal["timeout_s"]) == (2, None, 1.5)
    declaration = _args.parse(_schema("lean_declaration_file"), {"file_path": "A", "symbol": "1", "full_file": "true"})
    assert (declaration["symbol"], declaration["full_file"]) == ("1", True)
    for tool, arguments in [
        ("lean_goal", {"file_path": "A", "line": "2.5"}),
        ("lean_goal", {"file_path": "A", "line": "two"}),
        ("lean_goal", {"file_path": "A", "line": "0"}),
        ("lean_declaration_file", {"file_path": "A", "symbol": "s", "full_file": "maybe"}),
    ]:
        with pytest.raises(_args.ArgumentError):
            _args.parse(_schema(tool), arguments)


# ---- review of the web tools and local search (each test pins a divergence from the peer that was fixed) -------
@pytest.fixture
def raw_server() -> Iterator[Callable[[bytes], str]]:
    """A loopback TCP server answering every connection with one canned byte string (not necessarily HTTP)."""
    sockets: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(payload: bytes) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        sockets.append(listener)

        def serve() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:  # closed by the fixture
                    return
                with conn:
                    conn.recv(65536)
                    conn.sendall(payload)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        threads.append(thread)
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for listener in sockets:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (closing alone does not, on Linux)
        listener.close()
    for thread in threads:
        thread.join(timeout=5)


def _http(body: bytes, *, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (size, body)


async def _web_call(tool: str, url: str) -> dict[str, Any]:
    env = {"LEANSEARCH_URL": url, "LOOGLE_URL": url, "LEAN_FINDER_URL": url, "LEAN_HAMMER_URL": url}
    with anyio.fail_after(30):
        if tool == "leansearch":
            return await _web.leansearch(env, "q", 3)
        if tool == "loogle":
            return await _web.loogle(env, "q", 3)
        if tool == "leanfinder":
            return await _web.leanfinder(env, "q", 3, "v4.28.0")
        return await _web.hammer_premise(env, "⊢ p", 3)


WEB_TOOLS = ("leansearch", "loogle", "leanfinder", "hammer_premise")


@pytest.mark.parametrize("tool", WEB_TOOLS)
@pytest.mark.parametrize(
    "answer",
    [b"hello, this is not HTTP\r\n\r\n", _http(b"[[1, 2", length=100)],
    ids=["not-http", "truncated-body"],
)
async def test_a_service_answering_garbage_is_a_clear_tool_error(
    raw_server: Callable[[bytes], str], tool: str, answer: bytes
) -> None:
    # http.client raises BadStatusLine / IncompleteRead (HTTPException, neither OSError nor ValueError): before the
    # fix they escaped as a JSON-RPC internal error instead of the tool error the peer's SDK answers.
    url = raw_server(answer)
    with pytest.raises(CompatError, match=r"127\.0\.0\.1"):
        await _web_call(tool, url)


@pytest.mark.parametrize(
    ("tool", "answer"),
    [
        ("leansearch", [[{"no_result": 1}]]),
        ("leansearch", [[{"result": {"name": "Nat.add", "module_name": ["Init"]}}]]),
        ("loogle", {"hits": [1]}),
        ("leanfinder", {"results": [1]}),
        ("leanfinder", {"results": 3}),
        ("hammer_premise", [1]),
        ("hammer_premise", [{"no_name": "x"}]),
    ],
)
async def test_an_answer_of_another_shape_is_a_clear_tool_error(
    raw_server: Callable[[bytes], str], tool: str, answer: Any
) -> None:
    # The peer's SDK turns any exception of a tool into `isError: true`; Beam's surface answers only CompatError
    # that way, so a KeyError/TypeError/AttributeError from an unexpected answer became a JSON-RPC error.
    url = raw_server(_http(json.dumps(answer).encode()))
    with pytest.raises(CompatError, match="unexpected answer"):
        await _web_call(tool, url)


async def test_credentials_in_a_service_url_never_reach_the_error_message() -> None:
    for url in ("http://alice:s3cr3t@127.0.0.1:9", "http://tok3n@127.0.0.1:9", "http://bob:pw0rd@127.0.0.1"):
        for tool in WEB_TOOLS:
            with pytest.raises(CompatError) as exc:
                await _web_call(tool, url)
            assert not any(secret in exc.value.message for secret in ("s3cr3t", "tok3n", "pw0rd", "alice", "bob"))
            assert "127.0.0.1" in exc.value.message


def _lean_project(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n", encoding="utf-8")
    (root / "lakefile.toml").write_text('name = "proj"\n', encoding="utf-8")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _no_stdlib(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))  # no `lean`: the search reads the project only


def test_local_search_matches_case_as_the_peers_ripgrep_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The peer's pattern holds `[A-Za-z0-9_'.]`, whose uppercase bounds make ripgrep's --smart-case search case
    # sensitively for every query (checked against ripgrep and lean-lsp-mcp 0.32.0 itself).
    _no_stdlib(monkeypatch, tmp_path)
    text = "namespace Foo\ntheorem Add_foo : True := trivial\ntheorem add_foo : True := trivial\nend Foo\n"
    root = _lean_project(tmp_path / "proj", {"A.lean": text})
    assert _search.search(root, "add_foo", 10) == [{"name": "Foo.add_foo", "kind": "theorem", "file": "A.lean"}]
    assert [m["name"] for m in _search.search(root, "Foo.add_foo", 10)] == ["Foo.add_foo"]
    assert [m["name"] for m in _search.search(root, "Add", 10)] == ["Foo.Add_foo"]


def test_local_search_follows_no_symlink_as_the_peers_ripgrep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # ripgrep without --follow skips symlinked directories and files; following them made a link back up the tree
    # list every declaration once per level until the kernel's ELOOP (40 levels; two such links: 2^40 walks, so
    # the test has one).
    _no_stdlib(monkeypatch, tmp_path)
    root = _lean_project(tmp_path / "proj", {"A.lean": "theorem add_foo : True := trivial\n"})
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "O.lean").write_text("theorem add_outside : True := trivial\n", encoding="utf-8")
    (root / "Sub").mkdir()
    (root / "Sub" / "up").symlink_to("..")
    (root / "Sub" / "outside").symlink_to(tmp_path / "outside")
    (root / "Sub" / "alias.lean").symlink_to(root / "A.lean")
    found = _search.search(root, "add", 50)
    assert found == [{"name": "add_foo", "kind": "theorem", "file": "A.lean"}]


def test_local_search_shows_stdlib_files_as_the_peer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The peer's stdlib root is `<lean --print-prefix>/src`, shown as `.lean-stdlib/<path under src>`.
    prefix = _fake_toolchain(tmp_path / "toolchain", monkeypatch)
    (prefix / "src" / "lean" / "Init").mkdir(parents=True)
    (prefix / "src" / "lean" / "Init" / "S.lean").write_text("theorem add_std : True := trivial\n", encoding="utf-8")
    root = _lean_project(tmp_path / "proj", {"A.lean": "theorem add_foo : True := trivial\n"})
    assert _search.search(root, "add_std", 5) == [
        {"name": "add_std", "kind": "theorem", "file": ".lean-stdlib/lean/Init/S.lean"}
    ]


class _SymbolIndex:
    """`Calls` over a broker whose project Lean runs and whose `workspace_symbols` answers `symbols`."""

    def __init__(self, symbols: list[dict[str, Any]]) -> None:
        self.symbols = symbols

    async def broker_call(self, run: object, name: str, arguments: object) -> dict[str, Any]:
        assert name == "workspace_symbols"
        return {"result": self.symbols}

    async def broker(self) -> _SymbolIndex:
        return self

    def cached(self, root: str) -> object:
        return object()


def _fake_toolchain(prefix: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A toolchain prefix whose `bin/lean` is alone on PATH (its sources go under `src/lean`); returns the prefix."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "lean").write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    (prefix / "bin" / "lean").chmod(0o755)
    monkeypatch.setenv("PATH", str(prefix / "bin"))
    return prefix


async def test_local_search_keeps_the_index_matches_the_peer_keeps(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # lean-lsp-mcp drops compiler helpers (unless asked for by name) and symbols outside the project, its packages
    # and the stdlib, shows package and stdlib files under `.lake/packages/<name>/` and `.lean-stdlib/`, and keeps
    # one entry per name; Beam kept them all, with absolute paths.
    prefix = _fake_toolchain(tmp_path / "toolchain", monkeypatch)
    (prefix / "src" / "lean" / "Init").mkdir(parents=True)
    root = _lean_project(tmp_path / "proj", {"A.lean": "def other := 1\n"})
    dep = tmp_path / "dep"  # a package checked out elsewhere, linked into .lake/packages
    (dep / "Dep").mkdir(parents=True)
    (root / ".lake" / "packages").mkdir(parents=True)
    (root / ".lake" / "packages" / "dep").symlink_to(dep)

    def symbol(name: str, path: Path) -> dict[str, Any]:
        return {"name": name, "kind": 12, "location": {"uri": path.as_uri(), "range": {}}}

    symbols = [
        symbol("Foo.addA", root / "A.lean"),
        symbol("Foo.addA", root / "B.lean"),
        symbol("Dep.addD", dep / "Dep" / "D.lean"),
        symbol("Nat.addS", prefix / "src" / "lean" / "Init" / "S.lean"),
        symbol("addElsewhere", tmp_path / "elsewhere" / "E.lean"),
        symbol("_private.A.0._aux_A___macroRules_addM_1", root / "A.lean"),
        symbol("addH._@.A._hygCtx._hyg.3", root / "A.lean"),
    ]
    projection = Projection({"LEAN_PROJECT_PATH": str(root)})
    cx = Ctx(_SymbolIndex(symbols), object())  # type: ignore[arg-type]
    arguments = _args.parse(_schema("lean_local_search"), {"query": "add", "limit": 20})
    with anyio.fail_after(30):
        out = await projection.local_search(cx, arguments)
    assert out["index"] == "consulted"
    assert sorted((m["name"], m["file"]) for m in out["items"]) == [
        ("Dep.addD", ".lake/packages/dep/Dep/D.lean"),
        ("Foo.addA", "A.lean"),
        ("Nat.addS", ".lean-stdlib/lean/Init/S.lean"),
    ]
    helper = "addH._@.A._hygCtx._hyg.3"
    arguments = _args.parse(_schema("lean_local_search"), {"query": helper})
    with anyio.fail_after(30):
        named = await projection.local_search(cx, arguments)
    assert named["items"][0]["name"] == helper, "a helper asked for by name is kept (and ranks first)"


class _Goals:
    """`Calls` whose `goals` answers one goal at the position itself (`exact`) and another before its tactic."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    async def broker_call(self, run: object, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name == "update":
            return {"version": 1}
        assert name == "goals"
        self.asked.append(arguments)
        target = "at the position" if arguments.get("exact") else "before the tactic"
        return {"goals": [{"userName": None, "hyps": [], "target": target}]}


async def test_hammer_premise_sends_the_goal_at_the_position_as_the_peer(
    stub: tuple[str, list[dict[str, Any]], dict[str, Any]], tmp_path: Path
) -> None:
    # lean-lsp-mcp asks `$/lean/plainGoal` at (line, column) - what `lean_goal` with a column answers, Beam's
    # `goals` with `exact` - and sends its first goal; Beam sent the goal before the tactic at the position.
    url, requests, answers = stub
    answers["/retrieve"] = [{"name": "p"}]
    root = _lean_project(tmp_path / "proj", {"A.lean": "theorem t : True := by\n  simp\n"})
    projection = Projection({"LEAN_PROJECT_PATH": str(root), "LEAN_HAMMER_URL": url})
    calls = _Goals()
    cx = Ctx(calls, object())  # type: ignore[arg-type]
    arguments = _args.parse(_schema("lean_hammer_premise"), {"file_path": "A.lean", "line": 2, "column": 7})
    with anyio.fail_after(30):
        out = await projection.hammer_premise(cx, arguments)
    assert out == {"items": [{"name": "p"}]}
    assert requests[-1]["body"]["state"] == "⊢ at the position"
    assert (calls.asked[0]["line"], calls.asked[0]["character"]) == (1, 6)


class _Navigation:
    """`Calls` whose `definition` and `references` answer the given LSP locations."""

    def __init__(self, definition: list[dict[str, Any]], references: list[dict[str, Any]]) -> None:
        self.answers = {"definition": definition, "references": references}

    async def broker_call(self, run: object, name: str, arguments: object) -> dict[str, Any]:
        if name == "update":
            return {"version": 1}
        return {"result": self.answers[name]}


async def test_navigation_shows_stdlib_files_and_leaves_out_others_as_the_peer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # lean-lsp-mcp shows every path through its path policy: the toolchain's sources as `.lean-stdlib/...`; a
    # reference elsewhere is left out (still counted in `total`), a declaration elsewhere is a tool error. Beam
    # answered absolute paths.
    prefix = _fake_toolchain(tmp_path / "toolchain", monkeypatch)
    std = prefix / "src" / "lean" / "Init" / "S.lean"
    std.parent.mkdir(parents=True)
    std.write_text("theorem add_std : True := trivial\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere" / "E.lean"
    elsewhere.parent.mkdir()
    elsewhere.write_text("theorem add_std' : True := trivial\n", encoding="utf-8")
    root = _lean_project(tmp_path / "proj", {"A.lean": "example : True := add_std\n"})
    rng = {"start": {"line": 0, "character": 8}, "end": {"line": 0, "character": 15}}

    def at(path: Path) -> dict[str, Any]:
        return {"uri": path.as_uri(), "range": rng}

    projection = Projection({"LEAN_PROJECT_PATH": str(root)})
    found = _Navigation(
        [{"targetUri": std.as_uri(), "targetRange": rng}], [at(root / "A.lean"), at(std), at(elsewhere)]
    )
    cx = Ctx(found, object())  # type: ignore[arg-type]
    declaration = _args.parse(_schema("lean_declaration_file"), {"file_path": "A.lean", "symbol": "add_std"})
    references = _args.parse(_schema("lean_references"), {"file_path": "A.lean", "line": 1, "column": 19})
    with anyio.fail_after(30):
        shown = await projection.declaration_file(cx, declaration)
        refs = await projection.references(cx, references)
    assert shown["file_path"] == ".lean-stdlib/lean/Init/S.lean"
    assert [r["file_path"] for r in refs["items"]] == ["A.lean", ".lean-stdlib/lean/Init/S.lean"]
    assert refs["total"] == 3
    away = Ctx(_Navigation([{"targetUri": elsewhere.as_uri(), "targetRange": rng}], []), object())  # type: ignore[arg-type]
    with anyio.fail_after(30), pytest.raises(CompatError, match="outside the active Lean project"):
        await projection.declaration_file(away, declaration)


async def test_a_cancelled_web_call_does_not_wait_for_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # The request runs in a worker thread; the peer's asyncio.to_thread leaves it behind on cancellation. Beam's
    # anyio.to_thread.run_sync waited for the thread, so a cancelled call (or the server's shutdown) waited as long
    # as the service held the request: up to the socket timeout per read, for ever for one that drips bytes.
    # Longer than the bound below, so that without the fix the call ends (late) and the bound fails the test.
    monkeypatch.setattr(_web, "TIMEOUT", 40.0)
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    accepted = threading.Event()

    def hold() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        held.append(conn)  # never answered; closed by the test
        accepted.set()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_web.leansearch, {"LEANSEARCH_URL": url}, "q", 1)
                await anyio.to_thread.run_sync(accepted.wait)
                tg.cancel_scope.cancel()
    finally:
        for conn in held:
            conn.close()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=5)


class _NoLean:
    """`Calls` over a broker with no Lean running for any project (local search reads sources only)."""

    async def broker_call(self, run: object, name: str, arguments: object) -> dict[str, Any]:
        raise AssertionError(f"unexpected operation {name}")

    async def broker(self) -> _NoLean:
        return self

    def cached(self, root: str) -> None:
        return None


async def test_a_directory_that_is_no_lean_project_is_refused_and_the_project_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # lean-lsp-mcp checks `project_root` / `lean_project_path` (a `lean-toolchain` and a lakefile) before it binds
    # it; Beam bound any directory first, so one bad argument left the server without a project.
    _no_stdlib(monkeypatch, tmp_path)
    root = _lean_project(tmp_path / "proj", {"A.lean": "theorem add_foo : True := trivial\n"})
    plain = tmp_path / "plain"
    plain.mkdir()
    projection = Projection({"LEAN_PROJECT_PATH": str(root)})
    cx = Ctx(_NoLean(), object())  # type: ignore[arg-type]
    search = _args.parse(_schema("lean_local_search"), {"query": "add_foo"})
    with anyio.fail_after(30):
        with pytest.raises(CompatError, match=r"Invalid project root .*must contain `lean-toolchain`"):
            await projection.local_search(cx, {**search, "project_root": str(plain)})
        assert [m["name"] for m in (await projection.local_search(cx, search))["items"]] == ["add_foo"]
        build = _args.parse(_schema("lean_build"), {"lean_project_path": str(plain)})
        with pytest.raises(CompatError, match=r"must contain `lean-toolchain`"):
            await projection.build(cx, build)
        assert [m["name"] for m in (await projection.local_search(cx, search))["items"]] == ["add_foo"]


async def test_the_web_tools_send_the_peers_request_bodies_byte_for_byte() -> None:
    # lean-lsp-mcp encodes bodies with orjson: compact, UTF-8 (no `\\u` escapes). Beam sent `json.dumps` defaults.
    seen: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for _ in range(3):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:"))[15:])
                while len(body) < length:
                    body += conn.recv(65536)
                seen.append(body)
                conn.sendall(_http(b"[]") if len(seen) != 2 else _http(b"{}"))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    env = {"LEANSEARCH_URL": url, "LEAN_FINDER_URL": url, "LEAN_HAMMER_URL": url}
    try:
        with anyio.fail_after(30):
            await _web.leansearch(env, "∀ x, x = x", 5)
            await _web.leanfinder(env, "∀ x", 3, "v4.28.0")
            await _web.hammer_premise(env, "⊢ p ∧ q", 4)
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=5)
    assert seen == [
        '{"num_results":"5","query":["∀ x, x = x"]}'.encode(),
        '{"inputs":"∀ x","top_k":3,"version":"v4.28.0"}'.encode(),
        '{"state":"⊢ p ∧ q","new_premises":[],"k":4}'.encode(),
    ]
