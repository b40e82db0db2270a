from __future__ import annotations

from tests.support.fixtures import built_demo, lean_toolchain

__all__ = ["built_demo", "lean_toolchain"]
