from tests.support.fixtures import built_demo, demo_root, lean_toolchain

__all__ = ["built_demo", "demo_root", "lean_toolchain"]
