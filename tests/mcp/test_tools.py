"""The tool surface: order, annotation matrix, closed schemas and description contract sentences."""

from __future__ import annotations

import json
from typing import Any

import pytest

from beam_broker import OPERATIONS
from beam_mcp._tools import JSON_SCHEMA_DIALECT, ToolSet

from .support import FakeBroker, harness, modern_meta

pytestmark = pytest.mark.anyio

UPSTREAM_ORDER = [
    "beam_version",
    "beam_stats",
    "beam_feedback_report",
    "lean_drop_workspace",
    "lean_run_at",
    "lean_run_at_handle",
    "lean_hover",
    "lean_signature_help",
    "lean_definition",
    "lean_references",
    "lean_document_symbols",
    "lean_workspace_symbols",
    "lean_goals",
    "lean_todo",
    "lean_code_action_resolve",
    "lean_run_with",
    "lean_run_with_linear",
    "lean_release",
    "lean_update",
    "lean_sync",
    "lean_refresh",
    "lean_save",
    "lean_close_save",
    "lean_close",
]
READ_ONLY = {
    "beam_version",
    "beam_stats",
    "lean_run_at",
    "lean_hover",
    "lean_signature_help",
    "lean_definition",
    "lean_references",
    "lean_document_symbols",
    "lean_workspace_symbols",
    "lean_goals",
    "lean_todo",
    "lean_code_action_resolve",
}
FORBIDDEN_PROPERTIES = {
    "root",
    "workspace_id",
    "workspaceId",
    "includeDeclaration",
    "startLine",
    "startCharacter",
    "endLine",
    "endCharacter",
    "codeAction",
    "diagnosticScope",
    "diagnosticsInResult",
    "full_diagnostics",
    "include_diagnostics",
}
NO_SOURCE_EDITS = "Beam never applies source edits to `.lean` files on disk; the client applies source edits."
EXECUTION = ("lean_run_at", "lean_run_at_handle", "lean_run_with", "lean_run_with_linear")


def _keywords(node: Any) -> set[str]:
    """Schema keywords used anywhere (property names excluded)."""
    if not isinstance(node, dict):
        return set()
    found = set(node) - {"properties"}
    for key, value in node.items():
        if key == "properties":
            for sub in value.values():
                found |= _keywords(sub)
        elif isinstance(value, dict):
            found |= _keywords(value)
    return found


@pytest.fixture(scope="module")
def full() -> dict[str, dict[str, Any]]:
    """Every tool, as if the broker implemented the whole registry."""
    return {t.name: t.descriptor for t in ToolSet.build(OPERATIONS).tools}


def test_the_full_registry_projects_to_upstreams_24_tools_in_order(full: dict[str, dict[str, Any]]) -> None:
    assert list(full) == UPSTREAM_ORDER


def test_the_annotation_matrix_is_exact(full: dict[str, dict[str, Any]]) -> None:
    for name, tool in full.items():
        if name in READ_ONLY:
            assert tool["annotations"] == {"readOnlyHint": True}, name
        elif name in ("lean_run_at_handle", "lean_run_with"):
            assert tool["annotations"] == {"destructiveHint": False}, name
        elif name in ("lean_drop_workspace", "lean_close"):
            assert tool["annotations"] == {"idempotentHint": True}, name
        else:
            assert "annotations" not in tool, name
        assert set(tool) <= {"name", "description", "inputSchema", "annotations"}


def test_every_input_schema_is_closed_and_self_contained(full: dict[str, dict[str, Any]]) -> None:
    for name, tool in full.items():
        schema = tool["inputSchema"]
        assert schema["$schema"] == JSON_SCHEMA_DIALECT
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert set(schema["required"]) <= set(schema["properties"]), name
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text, name
        assert not _keywords(schema) & {"title", "anyOf", "$ref", "$defs"}, name
        assert not FORBIDDEN_PROPERTIES & set(schema["properties"]), name


def test_workspace_is_required_last_exactly_on_workspace_bound_tools(full: dict[str, dict[str, Any]]) -> None:
    for name, tool in full.items():
        schema = tool["inputSchema"]
        bound = name == "beam_feedback_report" or name.startswith("lean_")
        assert ("workspace" in schema["required"]) == bound, name
        if bound:
            assert schema["required"][-1] == "workspace"
            assert schema["properties"]["workspace"] == {
                "type": "object",
                "description": 'Workspace descriptor: {"root": absolute Lean/Lake project root path}.',
                "properties": {"root": {"type": "string", "description": "Absolute Lean/Lake project root path."}},
                "required": ["root"],
                "additionalProperties": False,
            }
        assert ("handle" in schema["properties"]) == (name in ("lean_run_with", "lean_run_with_linear", "lean_release"))


@pytest.mark.parametrize(
    ("tool", "required", "optional"),
    [
        ("beam_version", [], []),
        ("beam_stats", [], []),
        ("lean_drop_workspace", ["workspace"], []),
        ("lean_run_at", ["path", "version", "line", "character", "text", "workspace"], []),
        ("lean_hover", ["path", "version", "line", "character", "workspace"], []),
        ("lean_references", ["path", "version", "line", "character", "workspace"], ["include_declaration"]),
        ("lean_document_symbols", ["path", "version", "workspace"], []),
        ("lean_workspace_symbols", ["query", "workspace"], []),
        ("lean_goals", ["path", "version", "line", "character", "mode", "workspace"], []),
        (
            "lean_todo",
            ["path", "version", "start_line", "start_character", "end_line", "end_character", "workspace"],
            ["kinds", "suggest"],
        ),
        ("lean_code_action_resolve", ["path", "version", "code_action", "workspace"], []),
        ("lean_run_with", ["path", "handle", "text", "workspace"], []),
        ("lean_release", ["path", "handle", "workspace"], []),
        ("lean_update", ["path", "workspace"], []),
        ("lean_sync", ["path", "workspace"], ["diagnostic_scope", "diagnostics_in_result"]),
        ("lean_refresh", ["path", "workspace"], ["diagnostic_scope", "diagnostics_in_result"]),
        ("lean_save", ["path", "workspace"], ["diagnostic_scope"]),
        ("lean_close_save", ["path", "workspace"], ["diagnostic_scope"]),
        ("lean_close", ["path", "workspace"], []),
        (
            "beam_feedback_report",
            ["title", "summary", "reproduction", "expected", "actual", "workspace"],
            [
                "kind",
                "severity",
                "impact",
                "workaround",
                "tags",
                "client_request_id",
                "request",
                "response",
                "evidence",
                "bundle",
                "redact",
                "confidential",
                "include_collected",
            ],
        ),
    ],
)
def test_per_tool_inputs_match_upstream(
    full: dict[str, dict[str, Any]], tool: str, required: list[str], optional: list[str]
) -> None:
    schema = full[tool]["inputSchema"]
    assert schema["required"] == required
    assert sorted(set(schema["properties"]) - set(required)) == sorted(optional)


def test_field_shapes_follow_the_helper_conventions(full: dict[str, dict[str, Any]]) -> None:
    hover = full["lean_hover"]["inputSchema"]["properties"]
    assert hover["version"]["type"] == "integer" and hover["version"]["minimum"] == 0
    assert hover["line"]["minimum"] == 0 and hover["character"]["minimum"] == 0
    goals = full["lean_goals"]["inputSchema"]["properties"]["mode"]
    assert goals["type"] == "string" and goals["enum"] == ["before", "after"]
    todo = full["lean_todo"]["inputSchema"]["properties"]
    assert todo["kinds"]["type"] == "array"
    assert todo["kinds"]["items"]["enum"] == ["sorry", "hole", "diagnostic", "code_action", "incomplete_proof"]
    assert todo["suggest"]["enum"] == ["none", "basic"] and todo["suggest"]["default"] == "basic"
    assert full["lean_run_with"]["inputSchema"]["properties"]["handle"]["type"] == "object"
    assert full["lean_sync"]["inputSchema"]["properties"]["diagnostic_scope"]["enum"] == ["errors", "all"]
    evidence = full["beam_feedback_report"]["inputSchema"]["properties"]["evidence"]["items"]
    assert evidence["required"] == ["name"] and evidence["additionalProperties"] is False
    assert set(evidence["properties"]) == {"name", "content", "path"}
    feedback = full["beam_feedback_report"]["inputSchema"]["properties"]
    assert feedback["kind"]["enum"] == ["bug", "ux", "perf", "docs", "question"]
    assert feedback["bundle"]["enum"] == ["none", "dir", "zip"]


def test_descriptions_carry_the_contract_sentences(full: dict[str, dict[str, Any]]) -> None:
    d = {name: tool["description"] for name, tool in full.items()}
    lean_ops = [n for n in d if n.startswith("lean_") and n != "lean_drop_workspace"]
    for name in lean_ops:
        assert d[name].endswith(NO_SOURCE_EDITS), name
    for name in EXECUTION:
        for phrase in ("not persisted as source", "first edit and save the Lean file", "only then call lean_sync",
                       "not an OS sandbox", "may perform IO"):  # fmt: skip
            assert phrase in d[name], (name, phrase)
    assert "successful result may include next_handle" in d["lean_run_at_handle"]
    assert "Read the current on-disk Lean source" in d["lean_sync"]
    assert "never applies or recovers speculative text" in d["lean_sync"]
    for name in ("lean_update", "lean_refresh"):
        assert "current on-disk Lean source" in d[name]
    for name in ("lean_save", "lean_close_save"):
        assert "Lean/Lake build artifacts" in d[name]
    assert "LSP WorkspaceEdit" in d["lean_code_action_resolve"]
    assert "client must apply it" in d["lean_code_action_resolve"]
    for name in [*lean_ops, "beam_feedback_report", "lean_drop_workspace"]:
        assert "_meta.progressToken" in d[name] and "one status log" in d[name], name
    for name in ("beam_version", "beam_stats"):
        assert "progressToken" not in d[name]
    feedback = d["beam_feedback_report"]
    assert feedback.startswith("Beam does not upload or submit feedback.")
    assert "review it before posting" in feedback and "retain caller-authored narrative" in feedback


async def test_tools_list_lists_only_what_the_broker_implements() -> None:
    broker = FakeBroker()
    async with harness(broker) as h:
        listed = await h.request("tools/list", {"_meta": modern_meta()})
        names = [tool["name"] for tool in listed["result"]["tools"]]
        implemented = {spec.tool for spec in broker.ops}
        assert names == [n for n in UPSTREAM_ORDER if n in implemented or n.startswith("beam_")]
        assert "lean_run_at" not in names and "lean_release" not in names


async def test_tools_list_with_a_full_registry_has_24_tools() -> None:
    async with harness(FakeBroker(OPERATIONS)) as h:
        listed = await h.request("tools/list", {"_meta": modern_meta()})
        assert [tool["name"] for tool in listed["result"]["tools"]] == UPSTREAM_ORDER


async def test_drop_workspace_is_listed_even_when_the_broker_leaves_it_out() -> None:
    ops = tuple(spec for spec in FakeBroker().ops if spec.name != "drop_workspace")
    async with harness(FakeBroker(ops)) as h:
        listed = await h.request("tools/list", {"_meta": modern_meta()})
        assert [tool["name"] for tool in listed["result"]["tools"]][3] == "lean_drop_workspace"


def test_the_tool_reference_page_is_generated_from_the_registry() -> None:
    from pathlib import Path

    from beam_mcp._reference import render

    page = Path(__file__).resolve().parents[2] / "docs" / "mcp-tools.md"
    assert page.read_text(encoding="utf-8") == render(), "regenerate: python -m beam_mcp._reference > docs/mcp-tools.md"
