"""Root test configuration: anyio backend, the toolchain lane, and a private cache directory."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support import toolchain


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend MCP clients and the SDK use)."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`lean-beam` caches its commands under `$XDG_CACHE_HOME`: the tests (and their subprocesses) use their own.

    The real Lean built for the tests stays in the machine's cache (`toolchain.cache_dir`, resolved before the
    switch): otherwise every session would download the wheel and build Lean again.
    """
    saved = {name: os.environ.get(name) for name in ("XDG_CACHE_HOME", "BEAM_TEST_CACHE")}
    os.environ["BEAM_TEST_CACHE"] = str(toolchain.cache_dir())
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
