"""JSON Schema projection: tool input and output schemas from pydantic models, compact, and results cut to them.

Input schemas are self-contained (references inlined, titles dropped; lengths, patterns, bounds, enums and defaults
kept) and closed. Output schemas validate exactly what the model's own schema does, in fewer bytes: no defaults or
descriptions below a result's own fields, `X | None` as a type list, string enums by `enum` alone, no `$schema`
(MCP's default dialect is 2020-12), and an object shape a schema repeats in its `$defs` (`shared_defs`, applied
once a surface has left its fields out). `conform` cuts a result to a listed output schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import BaseModel

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
X_MCP_HEADER: Final = "x-mcp-header"
"""The input-schema keyword that asks HTTP clients to mirror a property as an `Mcp-Param-{name}` header."""

# ---- schema projection --------------------------------------------------------------------------------------------
_FIRST: Final = ("type", "description", "enum")
_NULL: Final = {"type": "null"}
_DEF_MIN_BYTES: Final = 80
"""A shape repeated in one schema moves to `$defs` when its compact JSON is at least this long (a `$ref` and its
definition cost about 60 bytes more than one inline copy)."""


class _Projector:
    """Turns one pydantic JSON Schema into a compact one (no titles; pydantic's own `$defs` inlined).

    Inputs collapse `X | None` to `X` (an optional argument is omitted, never null) and close every object;
    outputs keep `null` alternatives (a result field may be null) and pydantic's own `additionalProperties`, but
    drop what does not change which results validate: defaults, model docstrings (a field's own description is
    kept), `additionalProperties: true` and empty `required`; `anyOf: [X, null]` becomes `X` with `"null"` among
    its types.
    """

    def __init__(self, defs: Mapping[str, Any], *, output: bool) -> None:
        self.defs = defs
        self.output = output

    def node(self, node: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any]
        if "$ref" in node:
            out = self.node(self.defs[node["$ref"].rsplit("/", 1)[-1]])
            # A model's docstring is not a field description: only the referencing field's own text is kept.
            out.pop("description", None)
            out.update({k: v for k, v in self._plain(node).items() if k != "$ref"})
        elif "anyOf" in node:
            options = [opt for opt in node["anyOf"] if opt != _NULL]
            nullable = self.output and len(options) < len(node["anyOf"])
            if len(options) == 1:
                out = self.node(options[0])
                if nullable and not _with_null(out):
                    out = {"anyOf": [out, _NULL]}
            else:
                out = {"anyOf": [self.node(opt) for opt in (node["anyOf"] if self.output else options)]}
            out.update({k: v for k, v in self._plain(node).items() if k != "anyOf"})
        else:
            out = self._plain(node)
            for key in ("oneOf", "allOf", "prefixItems"):
                if key in node:
                    out[key] = [self.node(sub) for sub in node[key]]
            if "items" in node and isinstance(node["items"], dict):
                out["items"] = self.node(node["items"])
            if isinstance(node.get("additionalProperties"), dict):
                out["additionalProperties"] = self.node(node["additionalProperties"])
            if "properties" in node:
                out["properties"] = {name: self.node(sub) for name, sub in node["properties"].items()}
                if node.get("required") or not self.output:
                    out["required"] = list(node.get("required", []))
                if not self.output:
                    out["additionalProperties"] = False
            elif node.get("required"):
                out["required"] = list(node["required"])
        if "const" in out:
            out["enum"] = [out.pop("const")]
        if not self.output and out.get("default", 0) is None:
            del out["default"]  # an omitted optional argument, not a null one
        return {key: out[key] for key in (*_FIRST, *(k for k in out if k not in _FIRST)) if key in out}

    def _plain(self, node: Mapping[str, Any]) -> dict[str, Any]:
        skip = {"title", "anyOf", "oneOf", "allOf", "prefixItems", "items", "properties", "required", "$defs"}
        if self.output:
            skip.add("default")  # an annotation: it does not change which results validate
        return {
            k: v
            for k, v in node.items()
            if k not in skip and not (k == "additionalProperties" and (isinstance(v, dict) or v is True))
        }


def _with_null(schema: dict[str, Any]) -> bool:
    """Make a single-typed schema also accept null (in place); False when it cannot be said by `type` alone."""
    kind = schema.get("type")
    if not isinstance(kind, str) or "$ref" in schema:
        return False
    schema["type"] = [kind, "null"]
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    return True


def shared_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """Move every object shape a schema repeats into `$defs` (referenced as `#/$defs/<name>`), in place.

    Only object schemas without an `x-mcp-header` move (HTTP clients find routing headers through `properties`
    alone). A shape is named after its first property names, so a name says what it holds.
    """
    counts: dict[str, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, dict):
            if _shareable(node):
                key = _canonical(node)
                counts[key] = counts.get(key, 0) + 1
            for value in node.values():
                count(value)
        elif isinstance(node, list):
            for value in node:
                count(value)

    count(schema)
    repeated = {key for key, n in counts.items() if n > 1 and len(key) >= _DEF_MIN_BYTES}
    if not repeated:
        return schema
    names: dict[str, str] = {}
    defs: dict[str, Any] = {}

    def share(node: Any) -> Any:
        if isinstance(node, list):
            return [share(value) for value in node]
        if not isinstance(node, dict):
            return node
        key = _canonical(node) if _shareable(node) else None
        inner = {k: share(v) for k, v in node.items()}
        if key not in repeated or key is None:
            return inner
        if key not in names:
            name = _def_name(inner, set(defs))
            names[key], defs[name] = name, inner
        return {"$ref": f"#/$defs/{names[key]}"}

    shared = {k: share(v) for k, v in schema.items()}
    schema.clear()
    schema.update(shared)
    schema["$defs"] = defs
    return schema


def _shareable(node: dict[str, Any]) -> bool:
    return "properties" in node and X_MCP_HEADER not in _canonical(node)


def _canonical(node: Any) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _def_name(node: dict[str, Any], taken: set[str]) -> str:
    base = "_".join(list(node["properties"])[:2]) or "object"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def input_schema(model: type[BaseModel], *, require: Iterable[str] = ()) -> dict[str, Any]:
    """The closed `inputSchema` of a tool whose arguments are `model`.

    Required fields keep the model's field order, with `workspace` last among them; `require` makes optional
    fields required (the feedback tool's workspace). It stays self-contained (no `$defs`): agents read input
    schemas on every turn, and HTTP clients find `x-mcp-header` through `properties` alone.
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
    """The `outputSchema` of a tool whose `structuredContent` is `model` (as serialized), its repeats not shared yet.

    It names no `$schema`: MCP's default dialect is 2020-12. Only the result's own fields keep their descriptions
    (an agent reads the result, not its schema, for the rest).
    """
    raw = model.model_json_schema(mode="serialization")
    schema = _Projector(raw.get("$defs", {}), output=True).node(raw)
    described = {name: sub["description"] for name, sub in schema.get("properties", {}).items() if "description" in sub}
    terse: dict[str, Any] = _terse(schema)
    for name, text in described.items():
        terse["properties"][name]["description"] = text
    return terse


def _terse(node: Any) -> Any:
    """A result schema without descriptions, and with string enums said by `enum` alone (the same instances)."""
    if isinstance(node, list):
        return [_terse(sub) for sub in node]
    if not isinstance(node, dict):
        return node
    out = {key: _terse(value) for key, value in node.items() if key != "description"}
    if "properties" in node:  # property names are not keywords
        out["properties"] = {name: _terse(sub) for name, sub in node["properties"].items()}
    kinds = out.get("type")
    enum = out.get("enum")
    if enum is not None and kinds in ("string", ["string", "null"]):
        if all(isinstance(v, str) or (v is None and kinds != "string") for v in enum):
            del out["type"]
    return out


def conform(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> Any:
    """`value` cut to a listed output schema: keys a closed object does not declare are left out, at any depth.

    An object schema with `properties` and `additionalProperties: false` keeps only its properties; `anyOf`
    descends into its one object alternative (a nullable field); arrays descend into `items`; a `$ref` is read in
    the root schema's `$defs`. Open objects and anything else are kept as they are.
    """
    defs = schema.get("$defs", {}) if defs is None else defs
    schema = _resolved(schema, defs)
    if isinstance(value, dict):
        alternatives = [_resolved(alt, defs) for alt in schema.get("anyOf", ()) if isinstance(alt, dict)]
        objects = [alt for alt in alternatives if "properties" in alt]
        if "properties" not in schema and len(objects) == 1:
            return conform(value, objects[0], defs)
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return value
        closed = schema.get("additionalProperties") is False
        return {
            k: conform(v, properties[k], defs) if k in properties else v
            for k, v in value.items()
            if k in properties or not closed
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [conform(v, schema["items"], defs) for v in value]
    return value


def _resolved(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The definition a local `$ref` names (`#/$defs/<name>`), else the schema itself."""
    ref = schema.get("$ref")
    return defs[ref.rsplit("/", 1)[-1]] if isinstance(ref, str) else schema
