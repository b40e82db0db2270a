"""Arguments of lean-lsp-mcp's tools, checked against the tool's own `inputSchema` and completed with its defaults.

lean-lsp-mcp validates arguments with pydantic in lax mode and ignores undeclared ones; this module keeps those
rules for the shapes its schemas use (string, integer, number, boolean, arrays of strings, `anyOf` with null,
`enum`, `minimum`, `maximum`), so the listed schema is the only statement of what a tool takes. Like the MCP SDK
that lean-lsp-mcp runs on, a text value of an argument that is not a plain string is first read as JSON when it is
an array, an object or null (clients send `'["a", "b"]'` for an array), and lax mode reads scalars from text
(`"3"` for an integer, `"true"` for a boolean).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

_INTEGER_TEXT: Final = re.compile(r"\s*[+-]?\d+(?:\.0*)?\s*")
_NUMBER_TEXT: Final = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")
_TRUE_TEXT: Final = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_TEXT: Final = frozenset({"0", "off", "f", "false", "n", "no"})


class ArgumentError(ValueError):
    """An argument does not fit the tool's input schema (the message names it)."""


def _fits(value: Any, node: Mapping[str, Any]) -> tuple[bool, Any]:
    """Whether `value` fits one schema node, and the value as the tool sees it (an int where a number is)."""
    if "anyOf" in node:
        for option in node["anyOf"]:
            ok, out = _fits(value, option)
            if ok:
                return True, out
        return False, value
    kind = node.get("type")
    if kind == "null":
        return value is None, value
    if kind == "boolean":
        if isinstance(value, str) and value.strip().lower() in _TRUE_TEXT | _FALSE_TEXT:
            return True, value.strip().lower() in _TRUE_TEXT
        if type(value) is int and value in (0, 1):
            return True, bool(value)
        return isinstance(value, bool), value
    if kind == "integer":
        if isinstance(value, bool):
            return False, value
        if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
            value = int(value.strip().split(".")[0])
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            return False, value
    elif kind == "number":
        if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, value
        value = float(value)
    elif kind == "string":
        if not isinstance(value, str):
            return False, value
    elif kind == "array":
        if not isinstance(value, list):
            return False, value
        items = node.get("items", {})
        out = []
        for element in value:
            ok, converted = _fits(element, items)
            if not ok:
                return False, value
            out.append(converted)
        value = out
    if "enum" in node and value not in node["enum"]:
        return False, value
    if "minimum" in node and isinstance(value, (int, float)) and value < node["minimum"]:
        return False, value
    if "maximum" in node and isinstance(value, (int, float)) and value > node["maximum"]:
        return False, value
    return True, value


def _pre_parsed(value: Any, node: Mapping[str, Any]) -> Any:
    """The MCP SDK's reading of a text value for an argument that is not a plain string (JSON arrays, objects, null)."""
    if not isinstance(value, str) or (node.get("type") == "string" and "enum" not in node):
        return value
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return value
    return value if isinstance(parsed, (str, int, float)) else parsed


def _expected(node: Mapping[str, Any]) -> str:
    if "anyOf" in node:
        return " or ".join(_expected(option) for option in node["anyOf"])
    out = str(node.get("type", "a value"))
    if "enum" in node:
        out += f" in {node['enum']}"
    if "minimum" in node:
        out += f" >= {node['minimum']}"
    if "maximum" in node:
        out += f" <= {node['maximum']}"
    return out


def parse(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a tool runs with: each declared one checked (or its default), undeclared ones ignored.

    Raises:
        ArgumentError: A required argument is missing or a value does not fit its schema.
    """
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    out: dict[str, Any] = {}
    for name, node in properties.items():
        if name not in arguments:
            if name in required:
                raise ArgumentError(f"{name}: field required")
            out[name] = node.get("default")
            continue
        value = _pre_parsed(arguments[name], node)
        if value is None and name not in required and "default" in node and node["default"] is None:
            out[name] = None
            continue
        ok, converted = _fits(value, node)
        if not ok:
            raise ArgumentError(f"{name}: expected {_expected(node)}, got {value!r}")
        out[name] = converted
    return out
