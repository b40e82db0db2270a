"""The MCP tool surface: descriptors with input and output schemas and annotations, derived from the registry.

This module owns how a broker `OperationSpec` becomes an MCP tool (`lean_<name>`, its `inputSchema` projected
from the closed input model, its `outputSchema` from the output model, the annotation matrix) and the three
process-level tools the MCP server implements itself (`beam_version`, `beam_stats`, `beam_feedback_report`), and
the tool surfaces a server can serve (`all`; `beam`: upstream Beam's 24 tools, without the later operations;
`lean-lsp-mcp`: lean-lsp-mcp 0.32.0's 22 tools, projected by `_compat`).
The schemas are `_schemas`' compact projections of the models (a result schema shares the shapes it repeats once
the surface has left its fields out); `tools/list` stays within a budget a test pins.
Every workspace-bound tool marks `workspace.root` with `x-mcp-header` (MCP 2026-07-28), so HTTP clients mirror
it as the `Mcp-Param-Workspace` routing header; `Tool.param_headers` lists what a tool declares, for the
transport to check. It must not hold Lean semantics: `ToolSet.build` receives the registry and the feedback
models from the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from beam_broker.operations import PROGRESS_SENTENCE

from ._schemas import JSON_SCHEMA_DIALECT, X_MCP_HEADER, input_schema, output_schema, shared_defs

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from beam_broker import OperationSpec

    from ._calls import CallRun, Calls


BEAM_VERSION: Final = "beam_version"
BEAM_STATS: Final = "beam_stats"
BEAM_FEEDBACK_REPORT: Final = "beam_feedback_report"

PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
WORKSPACE_HEADER: Final = "Workspace"
"""The `x-mcp-header` name of `workspace.root`: the routing key of every workspace-bound tool
(`Mcp-Param-Workspace`), on which a load balancer keeps a workspace on one replica."""

VERSION_DESCRIPTION: Final = (
    "This server's name, version, MCP revision and whether a Lean runtime is active; never starts Lean."
)
STATS_DESCRIPTION: Final = (
    "Debug statistics of every cached Lean workspace runtime (sessions, operation counts, latencies). It selects "
    "nothing for later calls."
)
FEEDBACK_DESCRIPTION: Final = (
    "Beam does not upload or submit feedback. Build a redacted feedback report about Beam for this workspace "
    "(Markdown plus local context; never starts Lean) for you to review it before posting anywhere; write the "
    "narrative fields yourself: Beam adds context and will retain caller-authored narrative as given. "
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
        "outputSchema": shared_defs(dict(output)),  # after the surface left fields out: only what it lists
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
