"""The one error of the lean-lsp-mcp surface: a tool failure whose message the agent reads."""

from __future__ import annotations


class CompatError(Exception):
    """A lean-lsp-mcp tool fails: answered as `isError: true` with `Error executing tool <name>: <message>`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
