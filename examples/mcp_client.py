"""An MCP client in Python (the official `mcp` SDK) driving lean-beam-mcp: sync a file, then hover in that version.

Usage: `python examples/mcp_client.py ROOT [SERVER...]`: ROOT the demo project (tests/fixtures/demo, its
`Demo.Basic` built or built by the server: docs/lsp.md#tutorial), SERVER the server command (default:
`lean-beam-mcp` on PATH; give a client its absolute path). Needs the SDK: `pip install mcp`.
"""

import sys

import anyio

from mcp import Client, StdioServerParameters


async def main(root: str, server: list[str]) -> int:
    """Every call names the project (`workspace`); positions are LSP's: line and UTF-16 column from 0."""
    at = {"workspace": {"root": root}, "path": "Demo/Proofs.lean"}
    async with Client(StdioServerParameters(command=server[0], args=server[1:])) as client:
        result = await client.call_tool("lean_sync", at)
        synced = result.structured_content or {}
        if result.is_error:  # a tool error: {code, message, data}, e.g. an import to save first
            print(f"lean_sync: {synced['code']}: {synced['message']}", file=sys.stderr)
            return 1
        print("sync:", synced["version"], synced["diagnostics"]["counts"], synced["readiness"]["save_ready"])
        # `myTrue` in `theorem byTerm : MyTrue := myTrue`: Lean's 4:30 is line 3, character 30 here.
        hover = await client.call_tool("lean_hover", {**at, "version": synced["version"], "line": 3, "character": 30})
        print("hover:", (hover.structured_content or {})["contents"]["value"].splitlines()[1])
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2:] or ["lean-beam-mcp"]))
