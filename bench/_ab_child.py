"""The timing child of `bench ab`: run by the tree under test (its packages first on PYTHONPATH).

Uses only the broker's public entry point, so it runs on older commits too. Prints one JSON line: seconds per
call of each measured call.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from tests.support import projects, toolchain

from beam_broker import Broker, BrokerConfig


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tc = toolchain.from_env() or toolchain.lean435()
        root = projects.copy_project("demo", Path(tmp) / "demo")
        built = projects.lake_build(tc, root, "Demo.Basic", "Demo.Proofs")
        assert built.returncode == 0, built.stdout + built.stderr
        out: dict[str, list[float]] = {"sync_unchanged": [], "run_at_settled": []}
        async with Broker.open(BrokerConfig(lean_cmd=tc.server_cmd(), env=tc.env())) as broker:
            ws = {"root": str(root)}
            sync: dict[str, Any] = {"workspace": ws, "path": "Demo/Proofs.lean"}
            version = (await broker.call("sync", sync))["version"]
            count = 0

            async def run_at() -> None:
                nonlocal count
                count += 1
                text = f"theorem probe{count} : MyTrue := byTerm"
                at = {**sync, "version": version, "line": 9, "character": 0, "text": text}
                assert (await broker.call("run_at", at))["success"]

            for _ in range(20):
                await broker.call("sync", sync)
                await run_at()
            for _ in range(calls):
                t0 = time.perf_counter()
                await broker.call("sync", sync)
                out["sync_unchanged"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await run_at()
                out["run_at_settled"].append(time.perf_counter() - t0)
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]))
