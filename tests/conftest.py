"""Root test configuration: anyio backend, the toolchain lane, and a private cache directory."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend MCP clients and the SDK use)."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`lean-beam` caches its commands under `$XDG_CACHE_HOME`: the tests (and their subprocesses) use their own."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved
