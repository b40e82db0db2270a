from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from beam_broker import Broker, BrokerConfig
from tests.support.fixtures import built_demo, demo_root, lean_toolchain
from tests.support.toolchain import Toolchain

__all__ = ["broker", "built_demo", "demo_root", "lean_toolchain"]


@pytest.fixture
async def broker(lean_toolchain: Toolchain) -> AsyncIterator[Broker]:
    """A broker whose workspaces run the lane's real Lean (`lake serve` with no report delay)."""
    config = BrokerConfig(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env())
    async with Broker.open(config) as b:
        yield b
