"""Every tool on real Lean: each answers a successful call with a result its outputSchema describes.

The harness calls every tool (the seed's 24 and the added ones); the official MCP SDK client, driving the installed
`lean-beam-mcp` over stdio, exercises the added tools end to end (each result checked against the listed
outputSchema) and `--tools beam`.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped]
import pytest
from mcp.shared.exceptions import MCPError

from mcp import Client, StdioServerParameters
from tests.support.toolchain import Toolchain

from .support import harness, server_binary, structured
from .test_tools import ALL_TOOLS, UPSTREAM_ORDER

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

DOTTED = "prelude\nimport Demo.Basic\n\ndef probe := MyNat.\n"
TODO = (
    "prelude\nimport Demo.Basic\n\n-- sorry in a comment\ntheorem a (p : Prop) (hp : p) : p := by\n  sorry\n\n"
    "def h : MyNat := _\n\ntheorem unusedVar (p : Prop) (hp : p) : MyTrue :=\n  (fun (x : p) => myTrue) hp\n"
)


async def test_every_tool_result_on_real_lean_validates_against_its_output_schema(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    (demo_root / "Demo" / "Todo.lean").write_text(TODO, encoding="utf-8")
    results: dict[str, dict[str, Any]] = {}
    async with harness(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env()) as h:
        ws = {"workspace": {"root": str(demo_root)}}

        async def call(tool: str, **arguments: Any) -> dict[str, Any]:
            response, _ = await h.call(
                tool, arguments if tool in ("beam_version", "beam_stats") else {**ws, **arguments}
            )
            out: dict[str, Any] = structured(response)
            assert response["result"]["isError"] is False, (tool, out)
            results[tool] = out
            return out

        proofs = {"path": "Demo/Proofs.lean", "version": (await call("lean_sync", path="Demo/Proofs.lean"))["version"]}
        await call("beam_version")
        await call("beam_stats")
        await call("beam_feedback_report", title="t", summary="s", reproduction="r", expected="e", actual="a")
        await call("lean_update", path="Demo/Proofs.lean")
        await call("lean_refresh", path="Demo/Proofs.lean", diagnostics_in_result=True, diagnostic_scope="all")
        proofs["version"] = results["lean_refresh"]["version"]
        await call("lean_hover", **proofs, line=3, character=29)
        await call("lean_signature_help", **proofs, line=3, character=29)
        await call("lean_definition", **proofs, line=3, character=29)
        await call("lean_references", **proofs, line=3, character=29, include_declaration=True)
        await call("lean_document_symbols", **proofs)
        await call("lean_outline", **proofs)
        await call("lean_term_goal", **proofs, line=3, character=29)
        await call("lean_widgets", **proofs, line=3, character=29)
        await call("lean_interactive_diagnostics", **proofs)
        # The prelude fixtures define no widget: Lean knows no hash, and says so (a tool error, in the schema).
        refused, _ = await h.call("lean_widget_source", {**ws, **proofs, "javascript_hash": "0"})
        assert refused["result"]["isError"] is True and structured(refused)["code"] == "invalidParams"
        await call("lean_workspace_symbols", query="myTrue")
        (demo_root / "Demo" / "Dotted.lean").write_text(DOTTED, encoding="utf-8")
        dotted = (await call("lean_update", path="Demo/Dotted.lean"))["version"]
        await call("lean_completions", path="Demo/Dotted.lean", version=dotted, line=3, character=19)
        goals = {"path": "Demo/Goals.lean", "version": (await call("lean_sync", path="Demo/Goals.lean"))["version"]}
        await call("lean_goals", **goals, line=4, character=2, mode="before")
        todo = {"path": "Demo/Todo.lean", "version": (await call("lean_update", path="Demo/Todo.lean"))["version"]}
        items = (await call("lean_todo", **todo, start_line=0, start_character=0, end_line=11, end_character=0))[
            "items"
        ]
        action = next(item["code_action"] for item in items if item["kind"] == "code_action")
        await call("lean_code_action_resolve", **todo, code_action=action)
        await call("lean_run_at", **proofs, line=8, character=5, text="#check two")
        await call("lean_attempts", **proofs, line=3, character=0, texts=["#check byTerm", "#check nope"], handles=True)
        await call("lean_axioms", **proofs, line=3, character=0)
        await call("lean_profile", **proofs, line=5, character=0)
        await call("lean_run_code", text="prelude\nimport Demo.Basic\n#check myTrue\n")
        handle = (await call("lean_run_at_handle", **proofs, line=3, character=0, text="def a1 : MyNat := MyNat.one"))[
            "next_handle"
        ]
        await call("lean_run_with", path="Demo/Proofs.lean", handle=handle, text="#check a1")
        await call("lean_run_with_linear", path="Demo/Proofs.lean", handle=handle, text="#check a1")
        other = (await call("lean_run_at_handle", **proofs, line=3, character=0, text="def b : MyNat := MyNat.one"))[
            "next_handle"
        ]
        await call("lean_release", path="Demo/Proofs.lean", handle=other)
        await call("lean_close_save", path="Demo/Proofs.lean")
        await call("lean_save", path="Demo/Basic.lean")
        await call("lean_close", path="Demo/Goals.lean")
        await call("lean_drop_workspace")
        schemas = await h.schemas()
    assert set(results) | {"lean_widget_source"} == set(ALL_TOOLS) == set(schemas)
    for tool, out in results.items():
        jsonschema.validate(out, schemas[tool])


@asynccontextmanager
async def sdk(tc: Toolchain, *flags: str) -> AsyncIterator[Client]:
    """The official SDK client (auto mode) on the installed `lean-beam-mcp` over stdio, on this lane's Lean."""
    params = StdioServerParameters(
        command=server_binary(), args=["--lean-cmd", shlex.join(tc.server_cmd()), *flags], env=tc.env()
    )
    async with Client(params) as client:
        yield client


async def test_the_sdk_client_gets_completions_and_an_outline_from_real_lean(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    (demo_root / "Demo" / "Dotted.lean").write_text(DOTTED, encoding="utf-8")
    ws = {"workspace": {"root": str(demo_root)}}
    async with sdk(lean_toolchain) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(tools) == ALL_TOOLS
        for name in ("lean_completions", "lean_outline"):
            annotations = tools[name].annotations
            assert annotations is not None and annotations.read_only_hint is True
        with anyio.fail_after(120):
            updated = await client.call_tool("lean_update", {**ws, "path": "Demo/Dotted.lean"})
            assert isinstance(updated.structured_content, dict)
            at = {**ws, "path": "Demo/Dotted.lean", "version": updated.structured_content["version"]}
            completed = await client.call_tool("lean_completions", {**at, "line": 3, "character": 19, "limit": 2})
            updates: list[str] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                updates.append(message or "")

            outlined = await client.call_tool("lean_outline", at, progress_callback=on_progress)
    assert completed.is_error is False and isinstance(completed.structured_content, dict)
    found = completed.structured_content
    assert len(found["items"]) == 2 and found["dropped"] == found["total"] - 2 and found["total"] >= 3
    assert all(item["detail"].startswith("MyNat") for item in found["items"])
    assert {item["kind"] for item in found["items"]} <= {"constructor", "constant"}
    assert outlined.is_error is False and isinstance(outlined.structured_content, dict)
    outline = outlined.structured_content
    assert [i["module"] for i in outline["imports"]] == ["Demo.Basic"]
    [probe] = outline["declarations"]
    assert (probe["name"], probe["kind"]) == ("probe", "def")
    assert updates[0] == "lean_outline on Demo/Dotted.lean: preparing the Lean workspace"


AXIOMS = (
    "prelude\nimport Demo.Basic\n\ntheorem clean : MyTrue := myTrue\n\nuniverse u\naxiom sorryAx (α : Sort u) : α\n"
    "theorem usesSorry : MyTrue := sorryAx MyTrue\n"
)
"""Without Init, `sorry` cannot elaborate: the fixture declares Lean's `sorryAx` (what a `sorry` elaborates to)."""


async def test_the_sdk_client_runs_attempts_axioms_a_profile_and_a_scratch_run_on_real_lean(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    (demo_root / "Demo" / "Ax.lean").write_text(AXIOMS, encoding="utf-8")
    ws = {"workspace": {"root": str(demo_root)}}
    before = sorted(p.relative_to(demo_root) for p in demo_root.rglob("*"))
    results: dict[str, dict[str, Any]] = {}
    async with sdk(lean_toolchain) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        for name in ("lean_axioms", "lean_profile", "lean_run_code"):
            annotations = tools[name].annotations
            assert annotations is not None and annotations.read_only_hint is True, name
        annotations = tools["lean_attempts"].annotations
        assert annotations is not None and annotations.destructive_hint is False and not annotations.read_only_hint

        async def call(tool: str, **arguments: Any) -> dict[str, Any]:
            result = await client.call_tool(tool, {**ws, **arguments})
            assert result.is_error is False and isinstance(result.structured_content, dict), (tool, result)
            jsonschema.validate(result.structured_content, tools[tool].output_schema)
            results[tool] = result.structured_content
            return result.structured_content

        with anyio.fail_after(120):
            version = (await call("lean_sync", path="Demo/Ax.lean"))["version"]
            at = {"path": "Demo/Ax.lean", "version": version}
            texts = ["#check clean", "theorem z : MyTrue := nope", "theorem w : MyTrue := clean"]
            attempted = await call("lean_attempts", **at, line=3, character=0, texts=texts)
            clean = await call("lean_axioms", **at, line=3, character=0)
            sorry = await call("lean_axioms", **at, name="usesSorry")
            profiled = await call("lean_profile", **at, line=7, character=0)
            scratch = await call("lean_run_code", text="prelude\nimport Demo.Basic\n#check myTrue\n")
            synced = await call("lean_sync", path="Demo/Ax.lean")
    assert attempted["mode"] == "command"
    assert [a["success"] for a in attempted["attempts"]] == [True, False, True]
    assert attempted["attempts"][0]["messages"] == [{"severity": "information", "text": "clean : MyTrue"}]
    assert (clean["name"], clean["axioms"], clean["uses_sorry"]) == ("clean", [], False)
    assert (sorry["name"], sorry["axioms"], sorry["uses_sorry"]) == ("usesSorry", ["sorryAx"], True)
    assert profiled["name"] == "usesSorry" and profiled["total_ms"] > 0
    assert any(c["category"] == "elaboration" and c["ms"] > 0 for c in profiled["categories"])
    assert scratch["success"] is True
    assert [(m["text"], m["range"]["start"]["line"]) for m in scratch["messages"]] == [("myTrue : MyTrue", 2)]
    assert synced["version"] == version and (demo_root / "Demo" / "Ax.lean").read_text() == AXIOMS
    assert sorted(p.relative_to(demo_root) for p in demo_root.rglob("*")) == before, "no file is written"


async def test_the_beam_surface_over_the_sdk_is_upstreams_24_tools(lean_toolchain: Toolchain, demo_root: Path) -> None:
    async with sdk(lean_toolchain, "--tools", "beam") as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == UPSTREAM_ORDER
        with anyio.fail_after(120), pytest.raises(MCPError) as refused:
            await client.call_tool(
                "lean_outline", {"workspace": {"root": str(demo_root)}, "path": "Demo/Proofs.lean", "version": 1}
            )
    assert refused.value.error.code == -32602 and refused.value.error.message == "Unknown tool: lean_outline"
