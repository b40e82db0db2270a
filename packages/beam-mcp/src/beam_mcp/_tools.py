"""The MCP tool surface: descriptors with input and output schemas and annotations, derived from the registry.

This module owns how a broker `OperationSpec` becomes an MCP tool (`lean_<name>`, its `inputSchema` projected
from the closed input model, its `outputSchema` from the output model, the annotation matrix) and the three
process-level tools the MCP server implements itself (`beam_version`, `beam_stats`, `beam_feedback_report`), and
the tool surfaces a server can serve (`all`; `beam`: upstream Beam's 24 tools, without the later operations;
`lean-lsp-mcp`: lean-lsp-mcp 0.32.0's 22 tools, projected by `_compat`).
Schemas are pydantic's JSON Schema with references inlined and titles dropped; every other keyword (lengths,
patterns, bounds, enums, defaults) is kept. Every workspace-bound tool marks `workspace.root` with `x-mcp-header`
(MCP 2026-07-28), so HTTP clients mirror it as the `Mcp-Param-Workspace` routing header; `Tool.param_headers`
lists what a tool declares, for the transport to check. It must not hold Lean semantics: `ToolSet.build` receives
the registry and the feedback models from the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from beam_broker.operations import PROGRESS_SENTENCE

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from beam_broker import OperationSpec

    from ._calls import CallRun, Calls

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"

BEAM_VERSION: Final = "beam_version"
BEAM_STATS: Final = "beam_stats"
BEAM_FEEDBACK_REPORT: Final = "beam_feedback_report"

X_MCP_HEADER: Final = "x-mcp-header"
"""The input-schema keyword that asks HTTP clients to mirror a property as an `Mcp-Param-{name}` header."""
PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
WORKSPACE_HEADER: Final = "Workspace"
"""The `x-mcp-header` name of `workspace.root`: the routing key of every workspace-bound tool
(`Mcp-Param-Workspace`), on which a load balancer keeps a workspace on one replica."""

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


# ---- outputs of the process tools ---------------------------------------------------------------------------------
class VersionResult(BaseModel):
    """`beam_version`: the running server's identity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    mcp_protocol: str
    runtime_active: bool
    server_binary: str | None = None


class StatsResult(BaseModel):
    """`beam_stats`: uptime and every cached workspace's sessions and metrics (the broker's own shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    uptimeMs: int = Field(ge=0)
    workspaces: dict[str, dict[str, Any]]


# ---- schema projection --------------------------------------------------------------------------------------------
_FIRST: Final = ("type", "description", "enum")
_NULL: Final = {"type": "null"}


class _Projector:
    """Turns one pydantic JSON Schema into a self-contained one (no `$ref`, no titles).

    Inputs collapse `X | None` to `X` (an optional argument is omitted, never null) and close every object;
    outputs keep `null` alternatives (a result field may be null) and pydantic's own `additionalProperties`.
    """

    def __init__(self, defs: Mapping[str, Any], *, output: bool) -> None:
        self.defs = defs
        self.output = output

    def node(self, node: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any]
        if "$ref" in node:
            out = self.node(self.defs[node["$ref"].rsplit("/", 1)[-1]])
            if not self.output:
                # A model's docstring is not a field description: only the referencing field's own text is kept.
                out.pop("description", None)
            out.update({k: v for k, v in self._plain(node).items() if k != "$ref"})
        elif "anyOf" in node and not self.output:
            options = [opt for opt in node["anyOf"] if opt != _NULL]
            if len(options) == 1:
                out = self.node(options[0])
            else:
                out = {"anyOf": [self.node(opt) for opt in options]}
            out.update({k: v for k, v in self._plain(node).items() if k != "anyOf"})
        else:
            out = self._plain(node)
            for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                if key in node:
                    out[key] = [self.node(sub) for sub in node[key]]
            if "items" in node and isinstance(node["items"], dict):
                out["items"] = self.node(node["items"])
            if isinstance(node.get("additionalProperties"), dict):
                out["additionalProperties"] = self.node(node["additionalProperties"])
            if "properties" in node:
                out["properties"] = {name: self.node(sub) for name, sub in node["properties"].items()}
                out["required"] = list(node.get("required", []))
                if not self.output:
                    out["additionalProperties"] = False
            elif "required" in node:
                out["required"] = list(node["required"])
        if "const" in out:
            out["enum"] = [out.pop("const")]
        if not self.output and out.get("default", 0) is None:
            del out["default"]  # an omitted optional argument, not a null one
        return {key: out[key] for key in (*_FIRST, *(k for k in out if k not in _FIRST)) if key in out}

    @staticmethod
    def _plain(node: Mapping[str, Any]) -> dict[str, Any]:
        skip = {"title", "anyOf", "oneOf", "allOf", "prefixItems", "items", "properties", "required", "$defs"}
        return {
            k: v for k, v in node.items() if k not in skip and not (k == "additionalProperties" and isinstance(v, dict))
        }


def input_schema(model: type[BaseModel], *, require: Iterable[str] = ()) -> dict[str, Any]:
    """The closed `inputSchema` of a tool whose arguments are `model`.

    Required fields keep the model's field order, with `workspace` last among them; `require` makes optional
    fields required (the feedback tool's workspace).
    """
    raw = model.model_json_schema(mode="validation")
    projector = _Projector(raw.get("$defs", {}), output=False)
    properties: dict[str, Any] = {}
    for name, node in raw.get("properties", {}).items():
        properties[name] = projector.node(node)
    extra_required = set(require)
    required = [name for name in properties if name in raw.get("required", []) or name in extra_required]
    if "workspace" in required:
        required = [name for name in required if name != "workspace"] + ["workspace"]
    schema: dict[str, Any] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if "oneOf" in raw:  # alternatives of required fields (a version or a snapshot), as the model declares them
        schema["oneOf"] = [dict(alt) for alt in raw["oneOf"]]
    return schema


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The `outputSchema` of a tool whose `structuredContent` is `model` (as serialized)."""
    raw = model.model_json_schema(mode="serialization")
    schema = _Projector(raw.get("$defs", {}), output=True).node(raw)
    schema.pop("description", None)
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


def _empty_schema() -> dict[str, Any]:
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def tool_annotations(spec: OperationSpec[BaseModel, BaseModel]) -> dict[str, bool] | None:
    """The annotation matrix: read-only tools say so; other non-default hints are advertised; else none."""
    if spec.read_only:
        return {"readOnlyHint": True}
    out: dict[str, bool] = {}
    if spec.destructive is False:
        out["destructiveHint"] = False
    if spec.idempotent:
        out["idempotentHint"] = True
    return out or None


# ---- routing headers (MCP 2026-07-28 `x-mcp-header`) --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ParamHeader:
    """An input property that HTTP clients mirror as an `Mcp-Param-{name}` header.

    Attributes:
        path: The chain of `properties` keys from the schema root to the property (`("workspace", "root")`).
        name: The `x-mcp-header` value; the header is `Mcp-Param-{name}`.
        type: The property's JSON Schema type (`string`, `integer` or `boolean`).
    """

    path: tuple[str, ...]
    name: str
    type: str

    @property
    def header(self) -> str:
        """The HTTP header name."""
        return f"{PARAM_HEADER_PREFIX}{self.name}"


def route_by_workspace(schema: dict[str, Any]) -> dict[str, Any]:
    """Mark `workspace.root` of an input schema as the `Mcp-Param-Workspace` routing header (in place).

    The spec mirrors only primitive values reachable through `properties` alone, so the marker goes on the root
    path string, not on the descriptor object. A schema without a workspace descriptor is returned unchanged.
    """
    workspace = schema.get("properties", {}).get("workspace")
    root = workspace.get("properties", {}).get("root") if isinstance(workspace, dict) else None
    if isinstance(root, dict) and root.get("type") == "string":
        root[X_MCP_HEADER] = WORKSPACE_HEADER
    return schema


def param_headers(schema: dict[str, Any], path: tuple[str, ...] = ()) -> tuple[ParamHeader, ...]:
    """Every `x-mcp-header` of an input schema, on its chain of `properties` keys (schema order)."""
    found: list[ParamHeader] = []
    for name, sub in schema.get("properties", {}).items():
        if not isinstance(sub, dict):
            continue
        if isinstance(sub.get(X_MCP_HEADER), str):
            found.append(ParamHeader((*path, name), sub[X_MCP_HEADER], str(sub.get("type"))))
        found.extend(param_headers(sub, (*path, name)))
    return tuple(found)


# ---- the tool set -------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Tool:
    """One listed tool and what the server needs to run it.

    Attributes:
        name: MCP tool name.
        descriptor: The `tools/list` entry.
        properties: Declared top-level input fields (anything else is rejected as undeclared).
        spec: The broker operation, for Lean tools; None for the process-level tools.
        cancellable: Whether `notifications/cancelled` may abort it.
        fence: Whether it is a stream-order fence (earlier calls drain first, later ones wait for it).
        param_headers: The inputs HTTP clients mirror as `Mcp-Param-*` headers (`workspace.root`, if bound).
        answer: For a tool of another server's surface (`_compat`): what answers the whole `CallToolResult`
            (the runners of `_calls` answer only its `structuredContent`).
        conform: Results are cut to the listed `outputSchema` (`conform`): it leaves out fields the operation
            answers (`--tools beam`, the upstream contract).
    """

    name: str
    descriptor: dict[str, Any]
    properties: frozenset[str]
    spec: OperationSpec[BaseModel, BaseModel] | None = None
    cancellable: bool = True
    fence: bool = False
    param_headers: tuple[ParamHeader, ...] = ()
    answer: Callable[[Calls, CallRun], Awaitable[dict[str, Any]]] | None = None
    conform: bool = False
    """Its listed output schema leaves out fields the operation answers: results are cut to it (`conform`)."""


def _tool(
    name: str,
    description: str,
    schema: dict[str, Any],
    output: dict[str, Any],
    annotations: dict[str, bool] | None,
    spec: OperationSpec[BaseModel, BaseModel] | None = None,
) -> Tool:
    schema = route_by_workspace(schema)
    descriptor: dict[str, Any] = {
        "name": name,
        "description": description,
        "inputSchema": schema,
        "outputSchema": output,
    }
    if annotations:
        descriptor["annotations"] = annotations
    cancellable = spec.cancellable if spec is not None else True
    fence = spec.fence if spec is not None else False
    return Tool(name, descriptor, frozenset(schema["properties"]), spec, cancellable, fence, param_headers(schema))


_READ_ONLY: Final = {"readOnlyHint": True}
PROCESS_TOOLS: Final = frozenset({BEAM_VERSION, BEAM_STATS})
"""The tools that need neither the broker nor beam-feedback (they answer even when the broker cannot open)."""


def process_tools() -> tuple[Tool, Tool]:
    """`beam_version` and `beam_stats` (their schemas are built when a tool set is)."""
    version = _tool(BEAM_VERSION, VERSION_DESCRIPTION, _empty_schema(), output_schema(VersionResult), _READ_ONLY)
    stats = _tool(BEAM_STATS, STATS_DESCRIPTION, _empty_schema(), output_schema(StatsResult), _READ_ONLY)
    return version, stats


def feedback_tool(report: type[BaseModel], result: type[BaseModel]) -> Tool:
    """`beam_feedback_report`, from beam-feedback's input and result models."""
    schema = input_schema(report, require=("workspace",))  # the models describe their own fields
    return _tool(BEAM_FEEDBACK_REPORT, FEEDBACK_DESCRIPTION, schema, output_schema(result), None)


Contract = Literal["seed", "upstream-2026-11"]
"""How Lean tools name a document state: `seed`, by numeric `version` (Beam for Python also takes and returns
`snapshot` tokens beside it, except on the `beam` surface, which keeps upstream's original schemas); `upstream-2026-11`,
upstream Beam's current contract: upstream's 24 tools, `snapshot` only (a `version` argument is undeclared, and
results carry no `version` where they carry a `snapshot`)."""
CONTRACTS: Final[tuple[Contract, ...]] = ("seed", "upstream-2026-11")
UPSTREAM_CONTRACT: Final = "upstream-2026-11"
_UPSTREAM_WORDS: Final = (
    ("(version 1)", "(a fresh snapshot)"),
    ("document version", "document snapshot"),
    ("that version", "that snapshot"),
)
"""The `beam` surface's descriptions reworded for the upstream contract (its tools name document snapshots)."""

Surface = Literal["all", "beam", "lean-lsp-mcp"]
"""Which tools a server lists and serves: `all`; `beam`, upstream Beam's exact 24; `lean-lsp-mcp`, lean-lsp-mcp
0.32.0's 22 tools (`_compat`)."""
SURFACES: Final[tuple[Surface, ...]] = ("all", "beam", "lean-lsp-mcp")


def operation_tool(
    spec: OperationSpec[BaseModel, BaseModel], *, surface: Surface = "all", contract: Contract = "seed"
) -> Tool:
    """The MCP tool of one broker operation.

    On the `beam` surface it has none of its `extension_fields`; under the upstream contract it has none of them
    but `snapshot`, and no `version` beside a `snapshot` (in the input, and in every object of the output).
    Either way its results are cut to the listed output schema (`Tool.conform`).
    """
    inputs, outputs = input_schema(spec.input_model), output_schema(spec.output_model)
    description = spec.description
    conform = False
    if contract == UPSTREAM_CONTRACT:
        dropped = spec.extension_fields - {"snapshot"}
        inputs, outputs = _retire(_without(inputs, dropped)), _retire(_without(outputs, dropped))
        for seed, upstream in _UPSTREAM_WORDS:
            description = description.replace(seed, upstream)
        conform = bool(spec.extension_fields)
    elif surface == "beam" and spec.extension_fields:
        inputs, outputs = _without(inputs, spec.extension_fields), _without(outputs, spec.extension_fields)
        conform = True
    return dataclasses.replace(
        _tool(spec.tool, description, inputs, outputs, tool_annotations(spec), spec), conform=conform
    )


def _without(schema: dict[str, Any], fields: frozenset[str], *, deep: bool = True) -> dict[str, Any]:
    """A schema without some properties, in every object it describes (a save result nests its sync result).

    A `oneOf` of required fields loses the alternatives that name a dropped field; when one is left, its fields
    are simply required (the original schemas: `version` required, no `snapshot`). With `deep=False` only the
    schema's own object loses them.
    """
    if not fields:
        return schema
    out = dict(schema)

    def inner(sub: dict[str, Any]) -> dict[str, Any]:
        return _without(sub, fields) if deep else sub

    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: inner(v) for k, v in schema["properties"].items() if k not in fields}
    if "required" in schema:
        out["required"] = [k for k in schema["required"] if k not in fields]
    for key in ("anyOf", "allOf"):
        if key in schema:
            out[key] = [inner(sub) for sub in schema[key]]
    if isinstance(schema.get("items"), dict):
        out["items"] = inner(schema["items"])
    if "oneOf" in schema:
        kept = [alt for alt in schema["oneOf"] if not set(alt.get("required", ())) & fields]
        if len(kept) == 1 and set(kept[0]) == {"required"}:
            del out["oneOf"]
            wanted = set(out.get("required", ())) | set(kept[0]["required"])
            out["required"] = [k for k in out["properties"] if k in wanted]
            if "workspace" in out["required"]:
                out["required"] = [k for k in out["required"] if k != "workspace"] + ["workspace"]
        else:
            out["oneOf"] = [_without(alt, fields) for alt in kept]
    return out


def _retire(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema without `version` wherever `snapshot` stands beside it (upstream Beam's current contract).

    Only there: a diagnostic item keeps the `version` Lean published it for.
    """
    out = dict(schema)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        if "snapshot" in properties and "version" in properties:
            out = _without(out, frozenset({"version"}), deep=False)
            properties = out["properties"]
        out["properties"] = {k: _retire(v) for k, v in properties.items()}
    for key in ("anyOf", "allOf"):
        if key in out:
            out[key] = [_retire(sub) for sub in out[key]]
    if isinstance(out.get("items"), dict):
        out["items"] = _retire(out["items"])
    return out


def conform(value: Any, schema: Mapping[str, Any]) -> Any:
    """`value` cut to a listed output schema: keys a closed object does not declare are left out, at any depth.

    An object schema with `properties` and `additionalProperties: false` keeps only its properties; `anyOf`
    descends into its one object alternative (a nullable field); arrays descend into `items`. Open objects and
    anything else are kept as they are.
    """
    if isinstance(value, dict):
        objects = [alt for alt in schema.get("anyOf", ()) if isinstance(alt, dict) and "properties" in alt]
        if "properties" not in schema and len(objects) == 1:
            return conform(value, objects[0])
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return value
        closed = schema.get("additionalProperties") is False
        return {
            k: conform(v, properties[k]) if k in properties else v
            for k, v in value.items()
            if k in properties or not closed
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [conform(v, schema["items"]) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class ToolSet:
    """The listed tools in public order, by name."""

    tools: tuple[Tool, ...]
    by_name: Mapping[str, Tool]

    @classmethod
    def build(
        cls,
        operations: Iterable[OperationSpec[BaseModel, BaseModel]],
        feedback: Tool,
        *,
        surface: Surface = "all",
        contract: Contract = "seed",
    ) -> ToolSet:
        """The process tools and the feedback tool, then one tool per broker operation in registry order.

        `surface="beam"` leaves out the operations beyond upstream Beam's (`OperationSpec.extension`), so the
        list is exactly upstream Beam's 24 tools, and calling another tool is an unknown tool. `surface="lean-lsp-mcp"`
        lists lean-lsp-mcp 0.32.0's tools only, each answered by a projection of the operations (`_compat`).
        `contract="upstream-2026-11"` lists upstream Beam's 24 tools in its current contract (`Contract`), whatever
        the surface says.
        """
        if contract == UPSTREAM_CONTRACT:
            surface = "beam"
        elif surface == "lean-lsp-mcp":
            from ._compat import compat_tools

            compat = compat_tools()
            return cls(compat, {tool.name: tool for tool in compat})
        specs = [spec for spec in operations if surface == "all" or not spec.extension]
        made = (operation_tool(spec, surface=surface, contract=contract) for spec in specs)
        tools = (*process_tools(), feedback, *made)
        return cls(tools, {tool.name: tool for tool in tools})

    def descriptors(self) -> list[dict[str, Any]]:
        """The `tools` array of a `tools/list` result."""
        return [tool.descriptor for tool in self.tools]
