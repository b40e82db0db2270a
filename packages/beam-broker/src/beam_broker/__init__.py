"""beam-broker (in development: its public API lands with its issue)."""

from __future__ import annotations

from .__about__ import __version__

__all__ = ["__version__"]
