"""`lean-beam-mcp --tools lean-lsp-mcp`: lean-lsp-mcp 0.32.0's tool surface as a projection of Beam's operations.

Owns the drop-in for agents configured for lean-lsp-mcp: its tool list (`_surface`), its argument rules
(`_args`), its presentation (`_text`: 1-based lines, code-point columns, goal text, diagnostic items), the
projection of each tool onto broker operations (`projection`), local declaration search (`_search`) and the
four web-search tools (`_web`). It must not contain Lean semantics (the broker answers every Lean question) and
keeps its state (project root, document versions, rate limits) per server, never in the broker.
"""

from __future__ import annotations

from ._surface import PEER_VERSION, compat_tools, descriptors

__all__ = ["PEER_VERSION", "compat_tools", "descriptors"]
