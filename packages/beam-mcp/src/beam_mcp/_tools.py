"""The MCP tool surface: descriptors, closed input schemas and annotations, derived from the broker registry.

This module owns how a broker `OperationSpec` becomes an MCP tool (`lean_<name>`, its inputSchema projected
from the operation's closed pydantic model, the annotation matrix) and the three process-level tools the
MCP server implements itself (`beam_version`, `beam_stats`, `beam_feedback_report`). It must not list an
operation the broker did not report as implemented, and it must not hold Lean semantics.

Importing it is cheap; the pydantic models are only touched when a tool set is built.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pydantic import BaseModel

    from beam_broker import OperationSpec

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

BEAM_VERSION: Final = "beam_version"
BEAM_STATS: Final = "beam_stats"
BEAM_FEEDBACK_REPORT: Final = "beam_feedback_report"
DROP_WORKSPACE: Final = "lean_drop_workspace"
LOCAL_TOOLS: Final = (BEAM_VERSION, BEAM_STATS, BEAM_FEEDBACK_REPORT)

PROGRESS_SENTENCE: Final = (
    "Pass tools/call params._meta.progressToken for live progress; without one, a slow call emits at most "
    "one status log."
)

VERSION_DESCRIPTION: Final = (
    "Identity of the running lean-beam-mcp server: name, version, preferred MCP revision (mcp_protocol) and "
    "whether a Lean runtime is active. Process-wide: takes no workspace descriptor and never starts a Lean "
    "runtime."
)
STATS_DESCRIPTION: Final = (
    "Debug statistics of every Lean workspace runtime cached in this server process (sessions, operation "
    "counts and latencies). Process-wide: takes no workspace descriptor. Do not use it to establish context "
    "for a later call; pass an explicit workspace descriptor instead."
)
FEEDBACK_DESCRIPTION: Final = (
    "Beam does not upload or submit feedback. Build a feedback report about Beam for this workspace: "
    "paste-ready Markdown, metadata and local debug context (redacted by default; collecting it never starts "
    "Lean), returned to you so you can review it before posting it anywhere. Write title, summary, "
    "reproduction, expected and actual yourself and retain caller-authored narrative as given: Beam adds "
    "context but never rewrites it. confidential: true collects no project-derived context and does not echo "
    "the workspace. bundle 'dir' or 'zip' also writes a local evidence bundle under <root>/.beam/feedback. "
    f"{PROGRESS_SENTENCE}"
)

# Descriptions of the feedback input fields (the beam-feedback models carry none of their own).
_FEEDBACK_FIELDS: Final[Mapping[str, str]] = {
    "title": "One-line title of the problem.",
    "summary": "What happened, in a few sentences.",
    "reproduction": "Steps or the tool call sequence that reproduces it.",
    "expected": "What you expected.",
    "actual": "What happened instead.",
    "kind": "What kind of feedback this is.",
    "severity": "How much the problem hurts.",
    "impact": "Who or what it affects.",
    "workaround": "A workaround, if you found one.",
    "tags": "Free-form tags.",
    "client_request_id": "Your id for the failing request, if any.",
    "request": "The tool call that failed (a JSON object).",
    "response": "The answer it got (a JSON object).",
    "evidence": "Evidence entries: {name, content} (any JSON) or {name, path} (a file inside the workspace).",
    "bundle": "Also write a local evidence bundle: 'none' (default), 'dir' or 'zip'.",
    "redact": "Redact secrets and the home directory (default true; required when confidential).",
    "confidential": "Collect nothing project-derived and do not echo the workspace (default false).",
    "include_collected": "Return the collected context as 'collected' and show it in the Markdown (default false).",
    "workspace": 'Workspace descriptor: {"root": absolute Lean/Lake project root path}.',
}
_EVIDENCE_FIELDS: Final[Mapping[str, str]] = {
    "name": "Simple file name of the evidence (unique in the report).",
    "content": "Inline evidence: any JSON value (a string stays text).",
    "path": "A file inside the workspace root to attach (up to 1 MiB).",
}


# ---- schema projection --------------------------------------------------------------------------------
_KEY_ORDER: Final = (
    "type",
    "description",
    "enum",
    "minimum",
    "items",
    "properties",
    "required",
    "additionalProperties",
    "default",
)


def _project(node: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """One pydantic JSON-schema node in upstream's shape.

    Refs are inlined, nullable unions collapsed, objects with properties closed, titles dropped.
    """
    own_description = node.get("description")
    own_default = node.get("default")
    if "$ref" in node:
        # A model's docstring is not a field description: only the referencing field's own text is kept.
        base = _project(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        base.pop("description", None)
    elif "anyOf" in node:
        options = [opt for opt in node["anyOf"] if opt != {"type": "null"}]
        base = _project(options[0], defs) if len(options) == 1 else {"anyOf": [_project(o, defs) for o in options]}
    else:
        base = {}
        for key in ("type", "enum", "minimum", "description"):
            if key in node:
                base[key] = node[key]
        if "const" in node:
            base["enum"] = [node["const"]]
        if "items" in node:
            base["items"] = _project(node["items"], defs)
        if "properties" in node:
            base["properties"] = {name: _project(sub, defs) for name, sub in node["properties"].items()}
            base["required"] = list(node.get("required", []))
            base["additionalProperties"] = False
    if own_description is not None:
        base["description"] = own_description
    if own_default is not None:
        base["default"] = own_default
    return {key: base[key] for key in (*_KEY_ORDER, "anyOf") if key in base}


def input_schema(
    model: type[BaseModel],
    *,
    require: Iterable[str] = (),
    descriptions: Mapping[str, str] | None = None,
    nested_descriptions: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The closed inputSchema of a tool whose arguments are `model`.

    Required fields keep the model's field order, with `workspace` last among them; `require` makes
    optional fields required (the feedback tool's workspace).
    """
    raw = model.model_json_schema(mode="validation")
    defs: Mapping[str, Any] = raw.get("$defs", {})
    properties: dict[str, Any] = {}
    for name, node in raw.get("properties", {}).items():
        prop = _project(node, defs)
        if descriptions and name in descriptions:
            prop = {"description": descriptions[name], **{k: v for k, v in prop.items() if k != "description"}}
            prop = {key: prop[key] for key in (*_KEY_ORDER, "anyOf") if key in prop}
        if nested_descriptions and name in nested_descriptions:
            target = prop.get("items", prop)
            for sub, text in nested_descriptions[name].items():
                target["properties"][sub] = {**target["properties"][sub], "description": text}
        properties[name] = prop
    extra_required = set(require)
    required = [name for name in properties if name in raw.get("required", []) or name in extra_required]
    if "workspace" in required:
        required = [name for name in required if name != "workspace"] + ["workspace"]
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _empty_schema() -> dict[str, Any]:
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def tool_annotations(spec: OperationSpec) -> dict[str, bool] | None:
    """The annotation matrix: read-only tools say so; other non-default hints are advertised; else none."""
    if spec.read_only:
        return {"readOnlyHint": True}
    out: dict[str, bool] = {}
    if spec.destructive is False:
        out["destructiveHint"] = False
    if spec.idempotent:
        out["idempotentHint"] = True
    return out or None


# ---- the tool set -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Tool:
    """One listed tool and what the server needs to run it.

    Attributes:
        name: MCP tool name.
        descriptor: The `tools/list` entry.
        properties: Declared top-level input fields (anything else is rejected as undeclared).
        spec: The broker operation, for Lean tools; None for the process-level tools.
    """

    name: str
    descriptor: dict[str, Any]
    properties: frozenset[str]
    spec: OperationSpec | None = None

    @property
    def cancellable(self) -> bool:
        """Whether `notifications/cancelled` may abort it (drop is not: eviction cannot be rolled back)."""
        return self.spec is None or self.spec.cancellable


def _tool(name: str, description: str, schema: dict[str, Any], ann: dict[str, bool] | None, spec: Any) -> Tool:
    descriptor: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
    if ann:
        descriptor["annotations"] = ann
    return Tool(name, descriptor, frozenset(schema["properties"]), spec)


@functools.cache
def local_tools() -> tuple[Tool, ...]:
    """`beam_version`, `beam_stats` and `beam_feedback_report` (imports beam-feedback's model)."""
    from beam_feedback import FeedbackReport

    feedback_schema = input_schema(
        FeedbackReport,
        require=("workspace",),
        descriptions=_FEEDBACK_FIELDS,
        nested_descriptions={"evidence": _EVIDENCE_FIELDS},
    )
    read_only = {"readOnlyHint": True}
    return (
        _tool(BEAM_VERSION, VERSION_DESCRIPTION, _empty_schema(), read_only, None),
        _tool(BEAM_STATS, STATS_DESCRIPTION, _empty_schema(), read_only, None),
        _tool(BEAM_FEEDBACK_REPORT, FEEDBACK_DESCRIPTION, feedback_schema, None, None),
    )


def operation_tool(spec: OperationSpec) -> Tool:
    """The MCP tool of one broker operation."""
    return _tool(spec.tool, spec.description, input_schema(spec.input_model), tool_annotations(spec), spec)


@dataclasses.dataclass(frozen=True)
class ToolSet:
    """The listed tools in public order, by name."""

    tools: tuple[Tool, ...]
    by_name: Mapping[str, Tool]

    @classmethod
    def build(cls, operations: Iterable[OperationSpec]) -> ToolSet:
        """The process tools, then one tool per implemented broker operation in registry order.

        `drop_workspace` is always listed: eviction is the broker's own method (`Broker.call` handles it
        before dispatching to a runtime), so a broker that derives "implemented" from its runtime operations
        may leave it out.
        """
        from beam_broker import OPERATIONS

        implemented = {spec.name for spec in operations} | {"drop_workspace"}
        specs = [spec for spec in OPERATIONS if spec.name in implemented]
        tools = (*local_tools(), *(operation_tool(spec) for spec in specs))
        return cls(tools, {tool.name: tool for tool in tools})

    def descriptors(self) -> list[dict[str, Any]]:
        """The `tools` array of a `tools/list` result."""
        return [tool.descriptor for tool in self.tools]
