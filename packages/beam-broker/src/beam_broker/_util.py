"""Small helpers shared by broker modules."""

from __future__ import annotations

from beam_lsp.errors import unwrap_group as single_errors

__all__ = ["single_errors"]
