"""lean-lsp-mcp 0.32.0's tool list, each tool answered by `Projection`.

The tool list (names, descriptions, input and output schemas, annotations) is lean-lsp-mcp's own `tools/list`
answer, kept verbatim in `lean_lsp_mcp_0_32_0.json` so that a client configured for lean-lsp-mcp sees the same
surface. An answer is lean-lsp-mcp's: `structuredContent` plus the same JSON as text, or for a failure
`isError: true` with the text `Error executing tool <name>: <message>` and no structured content.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

from beam_broker.errors import BrokerError
from beam_mcp._protocol import tool_result
from beam_mcp._tools import Tool

from ._args import ArgumentError, parse
from ._errors import CompatError
from .projection import Ctx, Outdated, Projection

if TYPE_CHECKING:
    from beam_mcp._calls import CallRun, Calls

TOOLS_FILE: Final = "lean_lsp_mcp_0_32_0.json"
PEER_VERSION: Final = "0.32.0"

Method = Callable[[Projection, Ctx, dict[str, Any]], Awaitable[dict[str, Any]]]
METHODS: Final[dict[str, Method]] = {
    "lean_build": Projection.build,
    "lean_code_actions": Projection.code_actions,
    "lean_completions": Projection.completions,
    "lean_declaration_file": Projection.declaration_file,
    "lean_diagnostic_messages": Projection.diagnostic_messages,
    "lean_file_outline": Projection.file_outline,
    "lean_get_widget_source": Projection.get_widget_source,
    "lean_get_widgets": Projection.get_widgets,
    "lean_goal": Projection.goal,
    "lean_hammer_premise": Projection.hammer_premise,
    "lean_hover_info": Projection.hover_info,
    "lean_leanfinder": Projection.leanfinder,
    "lean_leansearch": Projection.leansearch,
    "lean_local_search": Projection.local_search,
    "lean_loogle": Projection.loogle,
    "lean_minimal_hypotheses": Projection.minimal_hypotheses,
    "lean_multi_attempt": Projection.multi_attempt,
    "lean_profile_proof": Projection.profile_proof,
    "lean_references": Projection.references,
    "lean_run_code": Projection.run_code,
    "lean_term_goal": Projection.term_goal,
    "lean_verify": Projection.verify,
}
"""The projection of each lean-lsp-mcp tool."""


@functools.cache
def descriptors() -> tuple[dict[str, Any], ...]:
    """lean-lsp-mcp 0.32.0's `tools/list` entries, in its order (read once; treat as read-only)."""
    text = resources.files(__package__).joinpath(TOOLS_FILE).read_text(encoding="utf-8")
    found: list[dict[str, Any]] = json.loads(text)
    return tuple(found)


def failure(tool: str, message: str) -> dict[str, Any]:
    """A failed call as lean-lsp-mcp answers it: the message as text, `isError: true`."""
    return {"content": [{"type": "text", "text": f"Error executing tool {tool}: {message}"}], "isError": True}


def _answer(
    projection: Projection, descriptor: dict[str, Any]
) -> Callable[[Calls, CallRun], Awaitable[dict[str, Any]]]:
    name: str = descriptor["name"]
    method = METHODS[name]
    schema = descriptor["inputSchema"]

    async def answer(calls: Calls, run: CallRun) -> dict[str, Any]:
        try:
            arguments = parse(schema, run.arguments)
        except ArgumentError as exc:
            return failure(name, f"invalid arguments: {exc}")
        await run.call.wait_turn()

        async def work() -> dict[str, Any]:
            try:
                return await method(projection, Ctx(calls, run), arguments)
            except Outdated:  # a file changed since Beam last reported its version: once more, asking for it
                return await method(projection, Ctx(calls, run, fresh=True), arguments)

        try:
            out = await calls._watched(run, work)
        except CompatError as exc:
            return failure(name, exc.message)
        except Exception as exc:
            if not isinstance(exc, BrokerError):
                raise
            return failure(name, str(getattr(exc, "message", exc)))
        return tool_result(out)

    return answer


def compat_tools(env: dict[str, str] | None = None) -> tuple[Tool, ...]:
    """The tools of the `lean-lsp-mcp` surface, sharing one `Projection` (one per server: its state is per server)."""
    projection = Projection(dict(os.environ) if env is None else env)
    tools = []
    for descriptor in descriptors():
        listed = {key: descriptor[key] for key in ("name", "description", "inputSchema", "outputSchema")}
        if "annotations" in descriptor:
            listed["annotations"] = descriptor["annotations"]
        tools.append(
            Tool(
                name=descriptor["name"],
                descriptor=listed,
                properties=frozenset(descriptor["inputSchema"].get("properties", {})),
                answer=_answer(projection, descriptor),
            )
        )
    return tuple(tools)
