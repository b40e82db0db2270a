"""The tool surface (`_tools`): order, annotations, closed input schemas, output schemas, description sentences.

The surface is read from `tools/list` of a server over the real broker (which implements every registry
operation), and every tool is called once over the fake Lean server to check its result against its outputSchema.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import jsonschema  # type: ignore[import-untyped]
import pytest
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

from beam_broker.operations import REGISTRY
from beam_feedback import FeedbackResult
from beam_mcp import ServerConfig
from beam_mcp._tools import StatsResult, VersionResult
from tests.support.fixtures import fake_lake

from .support import Harness, harness, modern_meta, structured

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
ADDED = [
    "lean_completions", "lean_outline", "lean_attempts", "lean_axioms", "lean_profile", "lean_run_code",
    "lean_term_goal", "lean_widgets", "lean_widget_source", "lean_interactive_diagnostics",
]  # fmt: skip
"""The tools beyond the seed's surface, after it in this order (`--tools beam` leaves them out)."""
ALL_TOOLS = [*UPSTREAM_ORDER, *ADDED]
READ_ONLY = {
    "lean_term_goal",
    "lean_widgets",
    "lean_widget_source",
    "lean_interactive_diagnostics",
    "lean_completions",
    "lean_outline",
    "lean_axioms",
    "lean_profile",
    "lean_run_code",
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
PINNED = [{"required": ["version"]}, {"required": ["snapshot"]}]
"""The `oneOf` of a tool bound to a document state (a version or a snapshot)."""
EXECUTION = ("lean_run_at", "lean_run_at_handle", "lean_run_with", "lean_run_with_linear", "lean_attempts")


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


JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@pytest.fixture(scope="module")
def full() -> dict[str, dict[str, Any]]:
    """Every listed tool's descriptor, by name."""

    async def listed() -> dict[str, Any]:
        async with harness() as h:
            return await h.side("tools/list")

    response = anyio.run(listed, backend="asyncio")
    return {tool["name"]: tool for tool in response["result"]["tools"]}


def test_tools_list_has_upstreams_24_tools_in_order_then_the_added_ones(full: dict[str, dict[str, Any]]) -> None:
    assert list(full)[:24] == UPSTREAM_ORDER
    assert list(full) == ALL_TOOLS


def test_a_server_serves_one_of_the_known_tool_surfaces() -> None:
    assert ServerConfig().tools == "all" and ServerConfig(tools="beam").tools == "beam"
    assert ServerConfig(tools="lean-lsp-mcp").tools == "lean-lsp-mcp"
    with pytest.raises(ValueError, match=r"ServerConfig\.tools must be one of all, beam, lean-lsp-mcp, not 'seed'"):
        ServerConfig(tools="seed")  # type: ignore[arg-type]


async def test_the_beam_surface_lists_and_serves_exactly_upstreams_24_tools(
    full: dict[str, dict[str, Any]], fake_project: Callable[..., Path]
) -> None:
    root = fake_project("proj", {"Main.lean": SOURCE})
    async with harness(tools="beam") as h:
        listed = await h.side("tools/list")
        assert [tool["name"] for tool in listed["result"]["tools"]] == UPSTREAM_ORDER
        beam = {tool["name"]: tool for tool in listed["result"]["tools"]}
        for name in UPSTREAM_ORDER:
            assert beam[name] == _seed(full[name]), name
        for name in ("lean_sync", "lean_refresh"):  # rebuild_imports / rebuilt_imports are beyond the seed
            assert set(full[name]["inputSchema"]["properties"]) - set(beam[name]["inputSchema"]["properties"]) == {
                "rebuild_imports"
            }
            assert set(full[name]["outputSchema"]["properties"]) - set(beam[name]["outputSchema"]["properties"]) == {
                "rebuilt_imports",
                "snapshot",
            }
        for name in ("lean_hover", "lean_todo", "lean_run_at"):  # the seed's own: a required version, no snapshot
            schema = beam[name]["inputSchema"]
            assert "snapshot" not in schema["properties"] and "oneOf" not in schema
            assert schema["required"][:2] == ["path", "version"]
        await h.initialize()
        legacy = await h.request("tools/list")
        assert [tool["name"] for tool in legacy["result"]["tools"]] == UPSTREAM_ORDER
        arguments = {"workspace": {"root": str(root)}, "path": "Main.lean", "version": 1}
        for tool in ADDED:
            refused, _ = await h.call(tool, arguments, modern=False)
            assert refused["error"]["code"] == -32602 and refused["error"]["message"] == f"Unknown tool: {tool}"
        synced, _ = await h.call("lean_sync", {"workspace": {"root": str(root)}, "path": "Main.lean"}, modern=False)
        assert structured(synced)["version"] == 1
        assert "snapshot" not in structured(synced), "results are cut to the seed's outputSchema"
        pinned = {"workspace": {"root": str(root)}, "path": "Main.lean", "snapshot": "s/1"}
        refused, _ = await h.call("lean_document_symbols", pinned, modern=False)
        assert structured(refused)["code"] == "invalidInput" and structured(refused)["data"]["fields"] == ["snapshot"]
        extra = {"workspace": {"root": str(root)}, "path": "Main.lean", "rebuild_imports": True}
        refused, _ = await h.call("lean_sync", extra, modern=False)
        assert structured(refused)["code"] == "invalidInput" and structured(refused)["data"]["fields"] == [
            "rebuild_imports"
        ]
        assert (await h.ops(root)).keys() == {"sync_file"}, "a refused tool never reached the broker"


SEED_LESS = {"exact", "rebuild_imports", "rebuilt_imports", "snapshot"}
"""Fields beyond the seed's surface (`OperationSpec.extension_fields`)."""


def _seed(descriptor: dict[str, Any]) -> dict[str, Any]:
    """A descriptor of the full surface as the seed has it: no field beyond it, and a version where one is pinned."""

    def cut(node: Any) -> Any:
        if isinstance(node, list):
            return [cut(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {key: cut(value) for key, value in node.items() if key != "oneOf"}
        if isinstance(node.get("properties"), dict):
            out["properties"] = {k: cut(v) for k, v in node["properties"].items() if k not in SEED_LESS}
            required = [k for k in node.get("required", []) if k not in SEED_LESS]
            if node.get("oneOf") == PINNED:
                required = [k for k in out["properties"] if k in {*required, "version"}]
                required = [k for k in required if k != "workspace"] + ["workspace"]
            if "required" in node or node.get("oneOf") == PINNED:  # a result schema omits an empty one
                out["required"] = required
        return out

    return {
        **descriptor,
        "inputSchema": cut(descriptor["inputSchema"]),
        "outputSchema": cut(descriptor["outputSchema"]),
    }


def test_the_annotation_matrix_is_exact(full: dict[str, dict[str, Any]]) -> None:
    for name, tool in full.items():
        if name in READ_ONLY:
            assert tool["annotations"] == {"readOnlyHint": True}, name
        elif name in ("lean_run_at_handle", "lean_run_with", "lean_attempts"):
            assert tool["annotations"] == {"destructiveHint": False}, name
        elif name in ("lean_drop_workspace", "lean_close"):
            assert tool["annotations"] == {"idempotentHint": True}, name
        else:
            assert "annotations" not in tool, name
        assert set(tool) <= {"name", "description", "inputSchema", "outputSchema", "annotations"}


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
    descriptors = set()
    for name, tool in full.items():
        schema = tool["inputSchema"]
        bound = name == "beam_feedback_report" or name.startswith("lean_")
        assert ("workspace" in schema["required"]) == bound, name
        if bound:
            assert schema["required"][-1] == "workspace"
            workspace = schema["properties"]["workspace"]
            descriptors.add(json.dumps(workspace, sort_keys=True))
            root = workspace["properties"]["root"]
            assert {k: v for k, v in workspace.items() if k != "properties"} == {
                "type": "object",
                "required": ["root"],
                "additionalProperties": False,
            }
            assert set(workspace["properties"]) == {"root"}
            assert (root["type"], root["description"]) == ("string", "Absolute Lean/Lake project root path.")
            assert root["x-mcp-header"] == "Workspace", name
        assert ("handle" in schema["properties"]) == (name in ("lean_run_with", "lean_run_with_linear", "lean_release"))
    assert len(descriptors) == 1, "every tool advertises the one workspace descriptor"


def test_workspace_bound_tools_declare_the_root_as_the_mcp_param_workspace_routing_header(
    full: dict[str, dict[str, Any]],
) -> None:
    for name, tool in full.items():
        schema = tool["inputSchema"]
        assert find_invalid_x_mcp_header(schema) is None, name  # the SDK's check: no client drops the tool
        routed = {("workspace", "root"): "Workspace"} if "workspace" in schema["properties"] else {}
        assert x_mcp_header_map(schema) == routed, name
    assert set(full) - {"beam_version", "beam_stats"} == {
        name for name, tool in full.items() if x_mcp_header_map(tool["inputSchema"])
    }


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
        ("lean_goals", ["path", "version", "line", "character", "mode", "workspace"], ["exact"]),
        (
            "lean_todo",
            ["path", "version", "start_line", "start_character", "end_line", "end_character", "workspace"],
            ["kinds", "suggest"],
        ),
        ("lean_code_action_resolve", ["path", "version", "code_action", "workspace"], []),
        ("lean_run_with", ["path", "handle", "text", "workspace"], []),
        ("lean_release", ["path", "handle", "workspace"], []),
        ("lean_update", ["path", "workspace"], []),
        ("lean_sync", ["path", "workspace"], ["diagnostic_scope", "diagnostics_in_result", "rebuild_imports"]),
        ("lean_refresh", ["path", "workspace"], ["diagnostic_scope", "diagnostics_in_result", "rebuild_imports"]),
        ("lean_save", ["path", "workspace"], ["diagnostic_scope"]),
        ("lean_close_save", ["path", "workspace"], ["diagnostic_scope"]),
        ("lean_close", ["path", "workspace"], []),
        ("lean_completions", ["path", "version", "line", "character", "workspace"], ["limit", "resolve"]),
        ("lean_outline", ["path", "version", "workspace"], []),
        ("lean_attempts", ["path", "version", "line", "character", "texts", "workspace"], ["handles"]),
        ("lean_axioms", ["path", "version", "workspace"], ["character", "line", "name"]),
        ("lean_profile", ["path", "version", "line", "character", "workspace"], ["threshold_ms"]),
        ("lean_run_code", ["text", "workspace"], []),
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
    properties = set(schema["properties"])
    if "version" in required:  # a document state: the seed's version or upstream's snapshot, exactly one
        assert schema["oneOf"] == PINNED
        required = [name for name in required if name != "version"]
        properties -= {"version", "snapshot"}
    else:
        assert "oneOf" not in schema
    assert schema["required"] == required
    assert sorted(properties - set(required)) == sorted(optional)


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
    limit = full["lean_completions"]["inputSchema"]["properties"]["limit"]
    assert (limit["type"], limit["minimum"], limit["maximum"], limit["default"]) == ("integer", 1, 500, 50)
    texts = full["lean_attempts"]["inputSchema"]["properties"]["texts"]
    assert (texts["type"], texts["items"]["type"], texts["minItems"], texts["maxItems"]) == ("array", "string", 1, 32)
    name = full["lean_axioms"]["inputSchema"]["properties"]["name"]
    assert name["type"] == "string" and name["pattern"].startswith("^") and name["minLength"] == 1
    threshold = full["lean_profile"]["inputSchema"]["properties"]["threshold_ms"]
    assert (threshold["minimum"], threshold["maximum"], threshold["default"]) == (0, 60_000, 10)


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


def _refs(node: Any) -> set[str]:
    """Every `$ref` value anywhere in a schema."""
    if isinstance(node, list):
        return set().union(*(_refs(sub) for sub in node))
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
    return found.union(*(_refs(sub) for sub in node.values()))


def test_every_tool_has_an_output_schema_that_refers_only_to_its_own_defs(full: dict[str, dict[str, Any]]) -> None:
    for name, tool in full.items():
        schema = tool["outputSchema"]
        assert schema.get("$schema", JSON_SCHEMA_DIALECT) == JSON_SCHEMA_DIALECT and schema["type"] == "object", name
        assert "title" not in _keywords(schema), name
        defs = schema.get("$defs", {})
        assert _refs(schema) == {f"#/$defs/{n}" for n in defs}, name  # every definition used, none missing
        jsonschema.Draft202012Validator.check_schema(schema)
    assert set(full["lean_sync"]["outputSchema"]["required"]) >= {"workspace", "path", "version", "diagnostics"}
    assert "workspace" in full["lean_drop_workspace"]["outputSchema"]["properties"]
    assert set(full["beam_version"]["outputSchema"]["properties"]) >= {"name", "version", "mcp_protocol"}
    assert full["lean_hover"]["outputSchema"]["$defs"], "a shape repeated in one schema is shared"


LIST_BUDGET = {"all": 75_000, "beam": 50_000}
"""Bytes of the whole compact `tools/list` result per surface, closed output schemas included (issue 22: 101 KB and
67 KB before the schemas were compacted; a regression pin, not the agent's cost)."""
MODEL_BUDGET = {"all": 45_000, "beam": 30_000}
"""Bytes of what an agent's model reads of each tool on every turn (issue 22's budget): name, description and input
schema. Clients keep `outputSchema` to validate `structuredContent` and do not show it to the model (Claude Code
presents `{name, description, input_schema}`: anthropics/claude-code#54197, #90150)."""


def _compact_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


@pytest.mark.parametrize("surface", ["all", "beam"])
async def test_tools_list_stays_within_its_budget(surface: Literal["all", "beam"]) -> None:
    async with harness(tools=surface) as h:
        listed = (await h.side("tools/list"))["result"]
    tools = listed["tools"]
    assert _compact_size({"tools": tools}) <= LIST_BUDGET[surface], (surface, _compact_size({"tools": tools}))
    seen = [{key: tool[key] for key in ("name", "description", "inputSchema")} for tool in tools]
    assert _compact_size({"tools": seen}) <= MODEL_BUDGET[surface], (surface, _compact_size({"tools": seen}))
    assert all("outputSchema" in tool for tool in tools if tool["name"].startswith("lean_")), surface


def _mutants(value: Any) -> Iterator[Any]:
    """Results that differ from `value` in one place: an undeclared key, a null, a number, a string or a bad item."""
    if isinstance(value, dict):
        yield {**value, "undeclared": 1}
        for key, sub in value.items():
            for changed in _mutants(sub):
                yield {**value, key: changed}
            yield {k: v for k, v in value.items() if k != key}
    elif isinstance(value, list):
        yield [*value, "zz"]
        for i, sub in enumerate(value):
            for changed in _mutants(sub):
                yield [*value[:i], changed, *value[i + 1 :]]
    for other in (None, 7, "zz", True):
        if other != value or type(other) is not type(value):
            yield other


async def test_compact_output_schemas_accept_and_reject_exactly_what_the_models_schemas_do(
    fake_project: Callable[..., Path], tmp_path: Path
) -> None:
    root = fake_project("proj", {"Main.lean": SOURCE})
    widget = {"id": "w", "javascriptHash": "1"}
    lean = {"rpc": True, "term_goal": "⊢ Nat", "widgets": [widget], "widget_sources": {"1": "export {}"}}
    async with harness(lean, env=fake_lake(tmp_path / "bin")) as h:
        schemas = await h.schemas()
        results = await _every_tool(h, root)
    models = {spec.tool: spec.output_model for spec in REGISTRY.operations}
    models |= {"beam_version": VersionResult, "beam_stats": StatsResult, "beam_feedback_report": FeedbackResult}
    checked = 0
    for tool, result in results.items():
        compact = jsonschema.Draft202012Validator(schemas[tool])
        reference = jsonschema.Draft202012Validator(models[tool].model_json_schema(mode="serialization"))
        for candidate in [result, *_mutants(result)]:
            assert compact.is_valid(candidate) == reference.is_valid(candidate), (tool, candidate)
            checked += 1
    assert checked > 1000


async def test_the_listing_is_the_same_in_both_families(full: dict[str, dict[str, Any]]) -> None:
    async with harness() as h:
        await h.initialize()
        legacy = await h.request("tools/list")
        modern = await h.side("tools/list")
        assert legacy["result"]["tools"] == modern["result"]["tools"] == list(full.values())


SOURCE = "theorem t : True := by\n  trivial\n\ndef d : Nat := 1\n"


async def _every_tool(h: Harness, root: Path) -> dict[str, dict[str, Any]]:
    """Call every tool once, successfully; returns each tool's structuredContent."""
    results: dict[str, dict[str, Any]] = {}
    ws = {"workspace": {"root": str(root)}}

    async def call(tool: str, **arguments: Any) -> dict[str, Any]:
        response, _ = await h.call(
            tool, {**ws, **arguments} if tool != "beam_version" and tool != "beam_stats" else arguments
        )
        out: dict[str, Any] = structured(response)
        assert response["result"]["isError"] is False, (tool, out)
        results[tool] = out
        return out

    synced = await call("lean_sync", path="Main.lean", diagnostics_in_result=True, diagnostic_scope="all")
    version = synced["version"]
    at = {"path": "Main.lean", "version": version}
    await call("beam_version")
    await call("beam_stats")
    await call("beam_feedback_report", title="t", summary="s", reproduction="r", expected="e", actual="a",
               include_collected=True)  # fmt: skip
    await call("lean_update", path="Main.lean")
    await call("lean_refresh", path="Main.lean")
    version = results["lean_refresh"]["version"]
    at = {"path": "Main.lean", "version": version}
    await call("lean_hover", **at, line=0, character=9)
    await call("lean_signature_help", **at, line=0, character=9)
    await call("lean_definition", **at, line=0, character=9)
    await call("lean_references", **at, line=0, character=9, include_declaration=True)
    await call("lean_document_symbols", **at)
    await call("lean_completions", **at, line=3, character=15, limit=5)
    await call("lean_outline", **at)
    attempted = await call("lean_attempts", **at, line=3, character=0, texts=["#check d", "ERROR_HERE"], handles=True)
    assert [a["success"] for a in attempted["attempts"]] == [True, False]
    await call("lean_axioms", **at, line=3, character=0)
    await call("lean_profile", **at, line=0, character=0)
    await call("lean_run_code", text="def e : Nat := 2\n")
    await call("lean_term_goal", **at, line=0, character=9)
    await call("lean_widgets", **at, line=0, character=9)
    await call("lean_widget_source", **at, javascript_hash="1")
    await call("lean_interactive_diagnostics", **at, start_line=0, end_line=2)
    await call("lean_workspace_symbols", query="t")
    await call("lean_goals", **at, line=0, character=21, mode="before")
    await call("lean_todo", **at, start_line=0, start_character=0, end_line=3, end_character=0)
    action = {"title": "fix", "data": {"params": {"textDocument": {"uri": (root / "Main.lean").as_uri()}}}}
    await call("lean_code_action_resolve", **at, code_action=action)
    await call("lean_run_at", **at, line=1, character=9, text="skip")
    handle = (await call("lean_run_at_handle", **at, line=1, character=9, text="skip"))["next_handle"]
    assert handle is not None
    continued = await call("lean_run_with", path="Main.lean", handle=handle, text="skip")
    await call("lean_run_with_linear", path="Main.lean", handle=continued["next_handle"] or handle, text="skip")
    await call("lean_release", path="Main.lean", handle=handle)
    await call("lean_save", path="Main.lean")
    await call("lean_close_save", path="Main.lean")
    await call("lean_close", path="Main.lean")
    await call("lean_drop_workspace")
    return results


async def test_every_tool_answers_with_results_its_output_schema_describes(
    fake_project: Callable[..., Path], tmp_path: Path
) -> None:
    root = fake_project("proj", {"Main.lean": SOURCE})
    widget = {"id": "w", "javascriptHash": "1"}
    lean = {"rpc": True, "term_goal": "⊢ Nat", "widgets": [widget], "widget_sources": {"1": "export {}"}}
    async with harness(lean, env=fake_lake(tmp_path / "bin")) as h:
        schemas = await h.schemas()
        assert set(schemas) == set(ALL_TOOLS)
        results = await _every_tool(h, root)
        assert set(results) == set(ALL_TOOLS)
        for tool, out in results.items():
            jsonschema.validate(out, schemas[tool])
        assert h.checked == len(results)  # the harness checked each one as it arrived too


async def test_modern_tools_list_is_a_public_cacheable_result() -> None:
    async with harness() as h:
        listed = await h.request("tools/list", {"_meta": modern_meta()})
        assert (listed["result"]["ttlMs"], listed["result"]["cacheScope"]) == (3600000, "public")


def _versions_beside_snapshots(node: Any) -> list[str]:
    """Objects of a schema that declare both `version` and `snapshot` (by their property names)."""
    if isinstance(node, list):
        return [found for item in node for found in _versions_beside_snapshots(item)]
    if not isinstance(node, dict):
        return []
    found = [f"{sorted(node['properties'])}"] if {"version", "snapshot"} <= set(node.get("properties", {})) else []
    return found + [f for value in node.values() for f in _versions_beside_snapshots(value)]


async def test_the_upstream_contract_lists_upstreams_24_tools_with_snapshots_only(
    full: dict[str, dict[str, Any]],
) -> None:
    async with harness(contract="upstream-2026-11") as h:
        listed = await h.side("tools/list")
    upstream = {tool["name"]: tool for tool in listed["result"]["tools"]}
    assert list(upstream) == UPSTREAM_ORDER
    for name, tool in upstream.items():
        schema = tool["inputSchema"]
        assert "version" not in schema["properties"] and "oneOf" not in schema, name
        assert "rebuild_imports" not in schema["properties"], name
        assert _versions_beside_snapshots(tool["outputSchema"]) == [], name
        assert tool.get("annotations") == full[name].get("annotations"), "upstream's annotations are the seed's"
        if "snapshot" in full[name]["inputSchema"]["properties"]:
            assert schema["required"][:2] == ["path", "snapshot"], name
    assert "(version" not in upstream["lean_refresh"]["description"]
    assert "document snapshot" in upstream["lean_hover"]["description"]
    update = upstream["lean_update"]["outputSchema"]
    assert update["required"] == ["workspace", "snapshot", "changed"]
    sync = upstream["lean_save"]["outputSchema"]["properties"]["sync"]
    assert "snapshot" in sync["required"] and "version" not in sync["properties"]
    items = sync["properties"]["diagnostics"]["properties"]["items"]["items"]  # a nullable array: type [array, null]
    assert "version" in items["properties"], "a diagnostic keeps the version Lean published it for"


def test_the_upstream_contract_is_for_upstreams_tools_only() -> None:
    assert ServerConfig().contract == "seed"
    with pytest.raises(ValueError, match=r"ServerConfig\.contract must be one of seed, upstream-2026-11, not 'x'"):
        ServerConfig(contract="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not lean-lsp-mcp's"):
        ServerConfig(tools="lean-lsp-mcp", contract="upstream-2026-11")


async def test_the_upstream_contract_answers_snapshots_without_versions(fake_project: Callable[..., Path]) -> None:
    root = fake_project("proj", {"Main.lean": SOURCE})
    ws = {"workspace": {"root": str(root)}, "path": "Main.lean"}
    async with harness(contract="upstream-2026-11") as h:
        await h.initialize()
        updated, _ = await h.call("lean_update", ws, modern=False)
        synced, _ = await h.call("lean_sync", ws, modern=False)
        token = structured(updated)["snapshot"]
        assert structured(updated) == {"workspace": {"root": str(root)}, "snapshot": token, "changed": True}
        assert structured(synced)["snapshot"] == token and "version" not in structured(synced)
        listed, _ = await h.call("lean_document_symbols", {**ws, "snapshot": token}, modern=False)
        assert [symbol["name"] for symbol in structured(listed)["result"]] == ["t", "d"]
        stale, _ = await h.call("lean_document_symbols", {**ws, "snapshot": token + "0"}, modern=False)
        assert structured(stale)["code"] == "contentModified"
        assert structured(stale)["data"]["reason"] == "snapshotMismatch"
        assert structured(stale)["data"]["currentSnapshot"] == token
