from tests.support.fixtures import built_demo, demo_root, fake_project, lean_toolchain

__all__ = ["built_demo", "demo_root", "fake_project", "lean_toolchain"]
