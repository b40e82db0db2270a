"""Root test configuration: anyio backend and the toolchain lane."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (the backend MCP clients and the SDK use)."""
    return "asyncio"
