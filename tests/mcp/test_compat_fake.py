"""`--tools lean-lsp-mcp` on the scripted fake Lean: every tool answers through the server, in the peer's shapes.

The harness checks every successful result against the tool's listed outputSchema (lean-lsp-mcp's own). The
fake server's diagnostics come from markers in the files (`tests/support/fake_lean.py`), so this checks the
projection's plumbing and conversions, not Lean's answers (the real-lane parity test does that).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker.broker import Broker
from beam_mcp._compat._project import startup_root

from .support import harness, modern_meta

pytestmark = pytest.mark.anyio

FILES = {
    "A.lean": "theorem t (p : Prop) (hp : p) : p := by\n  exact ERROR_HERE\n\ndef 𝔸x := WARN_HERE\n",
    "B.lean": "theorem ok : True := trivial\nlocal instance foo : X := y\n",
}


def compat_project(fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Lake project of `FILES` that `LEAN_PROJECT_PATH` names, as lean-lsp-mcp's README configures one."""
    root = fake_project("proj", FILES)
    (root / "lakefile.toml").write_text('name = "proj"\n', encoding="utf-8")
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(root))
    return root


WIDGET: dict[str, Any] = {"id": "w", "javascriptHash": "42", "props": {}}


def _text(response: dict[str, Any]) -> str:
    return "".join(c["text"] for c in response["result"]["content"])


async def test_every_tool_answers_in_the_peers_shape_on_the_fake_lane(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = compat_project(fake_project, monkeypatch)
    monkeypatch.setenv("LEANSEARCH_URL", "http://127.0.0.1:9")
    a = str(root / "A.lean")
    lean = {"rpc": True, "term_goal": "p : Prop\n⊢ p", "widgets": [WIDGET], "widget_sources": {"42": "export {}"}}
    async with harness(lean, tools="lean-lsp-mcp") as h:

        async def call(tool: str, **arguments: Any) -> tuple[bool, Any]:
            response, _ = await h.call(tool, arguments)
            result = response["result"]
            return bool(result["isError"]), result.get("structuredContent") or _text(response)

        _, diags = await call("lean_diagnostic_messages", file_path="A.lean")
        items = diags["result"]["items"]
        assert {(i["severity"], i["line"], i["column"]) for i in items} == {
            ("error", 2, 9),
            ("warning", 4, 11),
        }  # code points (UTF-16: 12)
        assert diags["result"]["success"] is False
        _, only = await call("lean_diagnostic_messages", file_path=a, start_line=4, end_line=4, severity="warning")
        assert [i["line"] for i in only["result"]["items"]] == [4]
        failed, text = await call("lean_diagnostic_messages", file_path="Nope.lean")
        assert failed and "not found in any Lean project" in text
        _, interactive = await call("lean_diagnostic_messages", file_path=a, interactive=True)
        messages = [(d["range"]["start"]["line"], d["message"]) for d in interactive["result"]["diagnostics"]]
        assert messages[0] == (1, {"text": "unknown identifier 'ERROR_HERE'"})  # Lean's TaggedText, as Lean sent it
        assert [line for line, _ in messages] == [1, 3]
        _, ranged = await call("lean_diagnostic_messages", file_path=a, interactive=True, start_line=4, end_line=4)
        assert [d["range"]["start"]["line"] for d in ranged["result"]["diagnostics"]] == [3]
        _, goal = await call("lean_goal", file_path=a, line=1)
        assert goal["line_context"].startswith("theorem t") and goal["goals_before"] == ["⊢ True"]
        _, at = await call("lean_goal", file_path=a, line=1, column=3, format="structured")
        assert at["status"] == "goals" and at["goals"][0]["goal"] == "True"
        _, none = await call("lean_goal", file_path=a, line=2, column=3)
        assert none["status"] == "no_goal_at_position"
        failed, text = await call("lean_goal", file_path=a, line=99)
        assert failed and "Line 99 out of range (file has 4 lines)" in text
        _, hover = await call("lean_hover_info", file_path=a, line=2, column=9)
        assert hover["symbol"] == "ERROR_HERE" and hover["info"] == "ERROR_HERE"
        assert [d["message"] for d in hover["diagnostics"]] == ["unknown identifier 'ERROR_HERE'"]
        failed, _ = await call("lean_hover_info", file_path=a, line=3, column=1)
        assert failed
        _, completions = await call("lean_completions", file_path=a, line=2, column=9)
        assert completions == {"items": []}
        _, outline = await call("lean_file_outline", file_path=a, max_declarations=1)
        assert outline["total_declarations"] in (None, 2)
        _, refs = await call("lean_references", file_path=a, line=1, column=9)
        assert refs == {"items": [], "total": 0}
        failed, text = await call("lean_declaration_file", file_path=a, symbol="ERROR_HERE")
        assert failed and "No declaration available" in text
        failed, text = await call("lean_declaration_file", file_path=a, symbol="absent")
        assert failed and "not found in file" in text
        _, actions = await call("lean_code_actions", file_path=a, line=2)
        assert actions == {"actions": []}
        _, attempts = await call("lean_multi_attempt", file_path=a, line=2, snippets=["exact hp", "rfl"])
        assert [i["snippet"] for i in attempts["items"]] == ["exact hp", "rfl"]
        failed, text = await call("lean_multi_attempt", file_path=a, line=2, column=40, snippets=["x"])
        assert failed and "Column 40 out of range" in text
        _, run = await call("lean_run_code", code="def x := ERROR_HERE")
        assert run["success"] is False and run["diagnostics"][0]["line"] == 1
        failed, text = await call("lean_verify", file_path=a, theorem_name="t t")
        assert failed and "Invalid theorem name" in text
        failed, _ = await call("lean_verify", file_path=str(root / "B.lean"), theorem_name="ok")
        _, hyps = await call("lean_minimal_hypotheses", file_path=a, theorem_name="t")
        assert [v["binder"] for v in hyps["verdicts"]] == ["(p : Prop)", "(hp : p)"]
        _, search = await call("lean_local_search", query="ok")
        assert search["items"][0] == {"name": "ok", "kind": "theorem", "file": "B.lean"}
        assert search["index"] in ("consulted", "error")
        _, built = await call("lean_build")
        assert built["success"] is True and "synced A.lean" in built["output"]
        failed, text = await call("lean_build", clean=True)
        assert failed and "lake clean" in text
        _, term = await call("lean_term_goal", file_path=a, line=2, column=9)
        assert term == {"line_context": "  exact ERROR_HERE", "expected_type": "p : Prop\n⊢ p"}
        _, end = await call("lean_term_goal", file_path=a, line=3)  # an empty line: no term
        assert end == {"line_context": "", "expected_type": None}
        _, widgets = await call("lean_get_widgets", file_path=a, line=1, column=1)
        assert widgets == {"widgets": [WIDGET]}
        _, source = await call("lean_get_widget_source", file_path=a, javascript_hash="42")
        assert source == {"source": {"sourcetext": "export {}"}}
        failed, text = await call("lean_get_widget_source", file_path=a, javascript_hash="7")
        assert failed and text == "Error executing tool lean_get_widget_source: No widget module with hash 7 registered"
        failed, text = await call("lean_leansearch", query="q")
        assert failed and "Request to 127.0.0.1:9 failed" in text
        failed, text = await call("lean_goal", file_path=a)
        assert failed and "invalid arguments: line: field required" in text
        _, profile = await call("lean_profile_proof", file_path=a, line=1, top_n=1)
        assert set(profile) == {"ms", "lines", "categories"} and len(profile["lines"]) <= 1


async def test_a_file_is_read_into_beam_once_and_again_only_after_it_changed(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project("proj", {"A.lean": "def one := 1\n"})
    (root / "lakefile.toml").write_text('name = "proj"\n', encoding="utf-8")
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(root))
    async with harness(tools="lean-lsp-mcp") as h:

        async def hover() -> str:
            response, _ = await h.call("lean_hover_info", {"file_path": "A.lean", "line": 1, "column": 6})
            assert response["result"]["isError"] is False, response
            symbol: str = response["result"]["structuredContent"]["symbol"]
            return symbol

        assert [await hover(), await hover()] == ["one", "one"]
        first = await h.ops(root)
        (root / "A.lean").write_text("def two := 2\n", encoding="utf-8")  # the agent edits the file
        assert await hover() == "two", "answered at the new text"
        after = await h.ops(root)
    # The version Beam reported is used until an operation says the file changed: then asked for once more.
    assert (first["update_file"]["count"], first["hover"]["count"]) == (1, 2)
    assert (after["update_file"]["count"], after["hover"]["count"], after["hover"]["errorCount"]) == (2, 4, 1)


async def test_the_project_known_at_start_gets_its_lean_started_before_the_first_call(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = compat_project(fake_project, monkeypatch)
    async with harness({}, tools="lean-lsp-mcp") as h:
        with anyio.fail_after(30):
            await h.server._host.prewarmed.wait()

        async def lean() -> dict[str, Any]:
            workspace = (await h.stats())["workspaces"][f"local:{root}"]
            return {"active": workspace["sessions"]["lean"]["active"], **workspace["byBackend"]["lean"]}

        assert (await lean())["active"] and (await lean())["sessionStarts"] == 1  # before any call
        response, _ = await h.call("lean_diagnostic_messages", {"file_path": "A.lean"})
        assert response["result"]["isError"] is False
        assert (await lean())["sessionStarts"] == 1  # the call used the Lean started ahead


async def test_initialize_on_the_lean_lsp_mcp_surface_answers_once_the_projects_lean_answered_its_handshake(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A call sent right after the handshake must not wait for the Lean stack's import and Lean's start (the MCP
    # handshake is where lean-lsp-mcp pays for its own start-up work).
    root = compat_project(fake_project, monkeypatch)
    async with harness({}, tools="lean-lsp-mcp") as h:
        with anyio.fail_after(30):
            await h.initialize()
        broker = h.server._host.current()
        assert broker is not None  # the broker opened before the answer
        workspace = broker.stats()["workspaces"][f"local:{root}"]
        assert workspace["sessions"]["lean"]["active"] and workspace["byBackend"]["lean"]["sessionStarts"] == 1


async def test_initialize_waits_for_a_lean_that_does_not_answer_its_handshake_only_initialize_wait_seconds(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    compat_project(fake_project, monkeypatch)
    silent = ["sleep", "3600"]  # a server that never answers its handshake
    async with harness(tools="lean-lsp-mcp", lean_cmd=silent, initialize_wait=0.2) as h:
        with anyio.fail_after(30):
            await h.initialize()
        assert not h.server._host.prewarmed.is_set()  # Lean still starts: the handshake did not wait for it


@pytest.mark.parametrize("tools", ["all", "beam"])
async def test_initialize_on_beams_own_surfaces_neither_starts_nor_waits_for_lean(
    tools: str, fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beam's surfaces start a workspace with its first call (the seed's lazy first use): nothing to wait for.
    compat_project(fake_project, monkeypatch)
    async with harness(tools=tools, lean_cmd=["sleep", "3600"], initialize_wait=3600) as h:
        with anyio.fail_after(30):
            await h.initialize()
        broker = h.server._host.current()
        assert broker is None or not broker.stats()["workspaces"]


async def test_lean_mcp_prewarm_files_are_elaborated_at_start_up_and_a_bad_one_is_only_logged(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = compat_project(fake_project, monkeypatch)
    monkeypatch.setenv("LEAN_MCP_PREWARM_FILES", " A.lean, ,Missing.lean")  # lean-lsp-mcp's setting, as it splits it
    async with harness({}, tools="lean-lsp-mcp") as h:
        with anyio.fail_after(30):
            await h.server._host.prewarmed.wait()
        before = await h.ops(root)
        response, _ = await h.call("lean_diagnostic_messages", {"file_path": "A.lean"})
        assert response["result"]["isError"] is False
    assert (before["sync_file"]["count"], before["sync_file"]["errorCount"]) == (2, 1)  # A.lean elaborated, not Missing
    assert any("Missing.lean" in record.getMessage() for record in caplog.records if record.levelname == "WARNING")


async def test_a_lean_that_cannot_start_at_start_up_still_lists_tools_and_fails_the_first_call_as_a_tool_error(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    compat_project(fake_project, monkeypatch)
    async with harness(tools="lean-lsp-mcp", lean_cmd=[str(tmp_path / "no-such-lean")]) as h:
        with anyio.fail_after(30):
            await h.server._host.prewarmed.wait()
        assert h.server.workspace_count() == 1  # the prewarm opened the workspace, and its Lean failed to start
        listed = await h.request("tools/list", {"_meta": modern_meta()})
        assert len(listed["result"]["tools"]) == 22
        response, _ = await h.call("lean_diagnostic_messages", {"file_path": "A.lean"})
        assert response["result"]["isError"] is True
        assert "could not start the Lean server" in _text(response)


def test_the_project_known_at_start_is_lean_project_path_else_the_working_directory(
    fake_project: Callable[..., Path], tmp_path: Path
) -> None:
    root = fake_project("proj", FILES)
    (root / "lakefile.toml").write_text('name = "proj"\n', encoding="utf-8")
    assert startup_root({"LEAN_PROJECT_PATH": str(root)}, tmp_path) == root
    assert startup_root({}, root) == root
    assert startup_root({}, tmp_path) is None  # not a project: nothing starts before a file names one
    assert startup_root({"LEAN_PROJECT_PATH": str(tmp_path)}, root) is None  # the configured one wins


async def test_diagnostics_read_from_the_sync_result_still_fail_success_on_an_error(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    compat_project(fake_project, monkeypatch)
    # Beam's cache holds another version than the one `sync` answered (the file changed in between): the
    # projection falls back on the `sync` items, whose severities are Beam's names, not LSP's numbers.
    monkeypatch.setattr(Broker, "diagnostics", lambda self, path: {"version": -1, "diagnostics": []})
    async with harness(tools="lean-lsp-mcp") as h:
        response, _ = await h.call("lean_diagnostic_messages", {"file_path": "A.lean"})
    result = response["result"]["structuredContent"]["result"]
    assert [(i["severity"], i["line"]) for i in result["items"]] == [("error", 2), ("warning", 4)]
    assert result["success"] is False, "an error is listed: the file is not clean"


async def test_code_actions_of_a_line_past_the_end_are_none_as_the_peer_answers(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    compat_project(fake_project, monkeypatch)
    async with harness(tools="lean-lsp-mcp") as h:
        response, _ = await h.call("lean_code_actions", {"file_path": "A.lean", "line": 99})
    # lean-lsp-mcp finds no diagnostic and no text on such a line, so no action (never Beam's 0-based line number)
    assert response["result"]["isError"] is False, response
    assert response["result"]["structuredContent"] == {"actions": []}


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        # Lean fuzzy-scored the items (a partial name before the cursor): lean-lsp-mcp keeps Lean's sortText order.
        ([{"label": "barfoo", "sortText": "0"}, {"label": "foo", "sortText": "1"}], ["barfoo", "foo"]),
        # No sortText (Lean 4.35): lean-lsp-mcp ranks by the text before the cursor, then by label.
        ([{"label": "barfoo"}, {"label": "Foo"}, {"label": "fob"}], ["fob", "Foo"]),
        # More than 500 items and no prefix: lean-lsp-mcp sorts all of them by label before cutting (m0001, m0002);
        # Beam ranks Lean's first 500 (the broker's bound on an answer), the difference docs/mcp-clients.md lists.
        ([{"label": f"m{n:04}"} for n in range(600, 0, -1)], ["m0101", "m0102"]),
    ],
    ids=["sortText", "prefix", "over-500"],
)
async def test_completions_are_ranked_as_lean_lsp_mcp_ranks_them(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, items: list[Any], expected: list[str]
) -> None:
    root = fake_project("proj", {"A.lean": "def x := fo\ndef y := x.\n"})
    (root / "lakefile.toml").write_text('name = "proj"\n', encoding="utf-8")
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(root))
    line, column = (2, 12) if len(items) > 500 else (1, 12)  # after `x.` (no prefix), or after `fo`
    async with harness({"completions": items}, tools="lean-lsp-mcp") as h:
        response, _ = await h.call(
            "lean_completions", {"file_path": "A.lean", "line": line, "column": column, "max_completions": 2}
        )
    assert [i["label"] for i in response["result"]["structuredContent"]["items"]] == expected


async def test_a_file_of_a_nested_project_keeps_lean_project_path_the_current_project(
    fake_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(
        "proj", {"A.lean": "def rootA := 1\n", "sub/A.lean": "def subA := 1\n", "sub/B.lean": "def b := 1\n"}
    )
    for project in (root, root / "sub"):
        (project / "lakefile.toml").write_text('name = "p"\n', encoding="utf-8")
        (project / "lean-toolchain").write_text((root / "lean-toolchain").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("LEAN_PROJECT_PATH", str(root))
    async with harness(tools="lean-lsp-mcp") as h:

        async def symbol(file_path: str) -> str:
            response, _ = await h.call("lean_hover_info", {"file_path": file_path, "line": 1, "column": 5})
            assert response["result"]["isError"] is False, response
            found: str = response["result"]["structuredContent"]["symbol"]
            return found

        assert await symbol("sub/B.lean") == "b"
        # lean-lsp-mcp keeps the configured project while it holds the file: `A.lean` is still the root's
        assert await symbol("A.lean") == "rootA"
