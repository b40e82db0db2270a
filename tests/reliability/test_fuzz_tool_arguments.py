"""Property-based fuzzing of every tool's arguments against a live server (real broker, fake Lean).

For each listed tool, hypothesis draws argument objects from the tool's own input schema: right and wrong types,
declared and undeclared fields, hostile strings (NUL, lone surrogates, `/dev/zero`, FIFOs, `..`, option-like
names). Whatever it draws, the answer is a tool result (success, validated against the tool's `outputSchema` by
the harness, or `isError` with `{code, message}`) or a `-32602`/`-32600` JSON-RPC error, never `-32603`, and the
server keeps serving. Count per CI run: 25 examples for each listed tool (26 tools: 650 calls).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_broker import OPERATIONS
from beam_feedback import FeedbackReport, FeedbackResult
from beam_mcp._tools import ToolSet, feedback_tool
from tests.reliability.support import LiveServer, live_server

TOOLS = ToolSet.build(OPERATIONS, feedback_tool(FeedbackReport, FeedbackResult))
HOSTILE = [
    "\x00",
    "A.lean\x00",
    "\ud800",
    "B\udfff.lean",
    "/dev/zero",
    "/dev/null",
    "../../../../etc/passwd",
    "--help.lean",
    "-",
    "",
    " ",
    "A.lean",
    "B.lean",
    "Missing.lean",
    "x" * 5000,
    "€𝔸",
]
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=6), st.sampled_from(HOSTILE)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


LIKELY: dict[str, st.SearchStrategy[Any]] = {
    # Values that get past validation often, so calls reach the broker and Lean, not only the validators.
    "path": st.sampled_from(["A.lean", "B.lean", "A.lean", "B.lean", "./A.lean"]),
    "version": st.sampled_from([1, 1, 1, 2]),
    "line": st.integers(0, 3),
    "character": st.integers(0, 12),
    "text": st.sampled_from(["trivial", "exact x", "#check a", "simp", "  rfl\n  done", "sorry"]),
    "query": st.sampled_from(["a", "b", "", "Nat"]),
}


def _value(schema: dict[str, Any], root: str, name: str = "") -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    right: st.SearchStrategy[Any]
    if name in LIKELY:
        right = st.one_of(LIKELY[name], LIKELY[name], LIKELY[name], _value(schema, root))
    elif "enum" in schema:
        right = st.sampled_from(schema["enum"])
    elif kind == "integer":
        right = st.integers(-2, 12)
    elif kind == "boolean":
        right = st.booleans()
    elif kind == "string":
        right = st.one_of(st.sampled_from(HOSTILE), st.sampled_from([os.path.join(root, "A.lean"), root]))
    elif kind == "array":
        right = st.lists(_value(schema.get("items", {}), root), max_size=3)
    elif kind == "object" and "root" in schema.get("properties", {}):
        right = st.one_of(
            *[st.just({"root": root})] * 6,
            st.fixed_dictionaries({"root": st.sampled_from([*HOSTILE, "/", "/nonexistent", root + "\x00"])}),
            st.just({"root": root, "alias": "x"}),
        )
    else:
        right = JSONISH
    # Mostly the declared type; sometimes a wrong one ("3" for 3, "true" for true, null, a list, ...).
    wrong = st.one_of(st.just("3"), st.just("true"), st.none(), st.just([1]), st.just({"a": 1}), st.floats(0, 1))
    return st.one_of(*[right] * 6, wrong)


@st.composite
def arguments(draw: st.DrawFn, schema: dict[str, Any], root: str) -> Any:
    if draw(st.integers(0, 30)) == 0:
        return draw(st.sampled_from([None, [], "x", 3]))  # not an object at all
    out: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        required = name in schema["required"]
        if (required and draw(st.integers(0, 19)) > 0) or (not required and draw(st.booleans())):
            out[name] = draw(_value(prop, root, name))
    if draw(st.integers(0, 8)) == 0:
        out[draw(st.sampled_from(["root", "workspaceId", "extra", "\x00", "\ud800"]))] = draw(JSONISH)
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("fuzz-tools")) as live:
        yield live


@pytest.mark.parametrize("tool", [t.name for t in TOOLS.tools])
def test_any_arguments_get_a_tool_result_or_an_invalid_params_error(server: LiveServer, tool: str) -> None:
    schema = TOOLS.by_name[tool].descriptor["inputSchema"]

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(arguments(schema, str(server.root)))
    def check(args: Any) -> None:
        response = server.call(tool, args)
        if "error" in response:
            assert response["error"]["code"] in (-32602, -32600), response
            return
        result = response["result"]
        assert isinstance(result["isError"], bool)
        if result["isError"]:
            error = result["structuredContent"]
            assert isinstance(error["code"], str) and isinstance(error["message"], str), error
            assert error["code"] != "internalError", error

    check()


def test_hostile_arguments_leave_nothing_outside_the_project(server: LiveServer, tmp_path: Path) -> None:
    beside = sorted(p.name for p in server.root.parent.iterdir())
    assert beside == ["proj"]
