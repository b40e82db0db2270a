"""Every tool on real Lean: each of the 24 answers a successful call with a result its outputSchema describes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from tests.support.toolchain import Toolchain

from .support import harness, structured
from .test_tools import UPSTREAM_ORDER

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

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
        await call("lean_workspace_symbols", query="myTrue")
        goals = {"path": "Demo/Goals.lean", "version": (await call("lean_sync", path="Demo/Goals.lean"))["version"]}
        await call("lean_goals", **goals, line=4, character=2, mode="before")
        todo = {"path": "Demo/Todo.lean", "version": (await call("lean_update", path="Demo/Todo.lean"))["version"]}
        items = (await call("lean_todo", **todo, start_line=0, start_character=0, end_line=11, end_character=0))[
            "items"
        ]
        action = next(item["code_action"] for item in items if item["kind"] == "code_action")
        await call("lean_code_action_resolve", **todo, code_action=action)
        await call("lean_run_at", **proofs, line=8, character=5, text="#check two")
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
    assert set(results) == set(UPSTREAM_ORDER) == set(schemas)
    for tool, out in results.items():
        jsonschema.validate(out, schemas[tool])
