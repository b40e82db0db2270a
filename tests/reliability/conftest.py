"""The reliability suite: fuzzing, the abuse table of issue 10, and fault injection (fake lane; `lean` subset)."""

from __future__ import annotations

from tests.support.fixtures import built_demo, demo_root, lean_toolchain

__all__ = ["built_demo", "demo_root", "lean_toolchain"]
