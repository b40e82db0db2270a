"""Mirrors are invisible to MCP clients: the official SDK client against the installed `lean-beam-mcp` on real Lean.

After a mix of probes, every tool `tools/list` offers is called (`TOOLS`: the broker's table in
`tests/support/every_operation.py` plus the process tools), half of them with a progress token and half
without (those send the `beam.status` notice at once here); no result, progress message, log notification
(`lean.diagnostic`, `beam.status`), diagnostics resource or feedback bundle names a probe mirror.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import LoggingMessageNotificationParams

from beam_lsp import path_to_uri
from beam_mcp.server import STATUS_DELAY_ENV
from mcp import Client, StdioServerParameters
from tests.support.every_operation import CALLS, PROBES, PROOFS, REFUSED, Arguments, Demo, write_files
from tests.support.toolchain import Toolchain

from .support import server_binary
from .test_tools import ALL_TOOLS

pytestmark = pytest.mark.anyio

MARK = "_beamProbe"
TIMEOUT = 120
FEEDBACK = {"title": "t", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a", "bundle": "dir"}
TOOLS: dict[str, Arguments] = {
    "beam_version": lambda d: {},
    "beam_stats": lambda d: {},
    "beam_feedback_report": lambda d: dict(FEEDBACK),
    **{f"lean_{name}": arguments for name, arguments in CALLS.items()},
}
"""Every tool's arguments (but `workspace`), in run order: the process tools while the workspace is open."""
UNBOUND = ("beam_version", "beam_stats")
"""Tools without a workspace argument."""


def test_the_table_gives_arguments_to_every_tool() -> None:
    assert sorted(TOOLS) == sorted(ALL_TOOLS)


@pytest.mark.lean
async def test_after_probes_no_tool_result_notification_resource_or_bundle_names_a_mirror(
    lean_toolchain: Toolchain, demo_root: Path
) -> None:
    write_files(demo_root)
    params = StdioServerParameters(
        command=server_binary(),
        args=["--lean-cmd", shlex.join(lean_toolchain.server_cmd())],
        env={**lean_toolchain.env(), STATUS_DELAY_ENV: "0"},
    )
    heard: list[str] = []  # every log notification and every other server message, as JSON or repr

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        heard.append(params.model_dump_json())

    async def on_message(message: Any) -> None:
        heard.append(repr(message))

    ws = {"workspace": {"root": str(demo_root)}}
    demo = Demo()
    leaks: list[str] = []
    statuses = 0
    client = Client(params, mode="2026-07-28", log_level="debug", logging_callback=on_log, message_handler=on_message)
    async with client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        assert sorted(listed) == sorted(TOOLS)

        async def call(tool: str, arguments: dict[str, Any], token: bool) -> dict[str, Any]:
            updates: list[str] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                updates.append(message or "")

            before = len(heard)
            with anyio.fail_after(TIMEOUT):
                result = await client.call_tool(
                    tool,
                    arguments if tool in UNBOUND else {**ws, **arguments},
                    progress_callback=on_progress if token else None,
                )
            assert result.is_error is (tool.removeprefix("lean_") in REFUSED), (tool, result.structured_content)
            assert isinstance(result.structured_content, dict)
            answer: dict[str, Any] = result.structured_content
            said = [json.dumps(answer), *(c.model_dump_json() for c in result.content), *updates, *heard[before:]]
            leaks.extend(f"{tool}: {what}" for what in said if MARK in what)
            return answer

        for n, (name, arguments) in enumerate(PROBES):
            args = arguments(demo)
            demo.note(name, args, await call(f"lean_{name}", args, token=n % 2 == 0))
        for n, (tool, arguments) in enumerate(TOOLS.items()):
            if tool == "lean_drop_workspace":  # the resources of the open documents, before the workspace goes
                for resource in (await client.list_resources()).resources:
                    read = await client.read_resource(resource.uri)
                    leaks.extend(f"{resource.uri}: {c.model_dump_json()}" for c in read.contents if MARK in repr(c))
            args = arguments(demo)
            answer = await call(tool, args, token=n % 2 == 1)
            demo.note(tool.removeprefix("lean_"), args, answer)
            if tool == "beam_feedback_report":
                bundle = Path(answer["bundle_dir"])
                files = [p for p in bundle.rglob("*") if p.is_file()]
                assert files
                leaks.extend(f"bundle {p}" for p in files if MARK in p.read_text(encoding="utf-8", errors="replace"))
        statuses = sum('"beam.status"' in line for line in heard)
    assert leaks == []
    assert statuses > 0, "calls without a progress token sent their beam.status notice"
    assert "_private.Demo.Proofs.0.q" in json.dumps(demo.answers["run_at"])
    assert demo.answers["references"]["result"]
    symbols = demo.answers["workspace_symbols"]["result"]
    assert [s["location"]["uri"] for s in symbols if s["name"] == "byTerm"] == [path_to_uri(demo_root / PROOFS)]
