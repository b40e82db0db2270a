"""Broker round trips vs raw beam-lsp requests on the same Lean server, and sync of an unchanged file.

`broker.call("hover" | "goals")` does the whole broker path (input validation, descriptor resolution, the disk
read and hash that keeps answers tied to the caller's version, metrics, JSON projection); the baseline is the
same request through the runtime's own `LeanClient`. Subject and baseline alternate in one run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from beam_broker import Broker, BrokerConfig
from beam_lsp import Position, path_to_uri
from bench._common import built_project, interleaved, report


async def main(rounds: int = 200) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        ratios: dict[str, float] = {}
        async with Broker.open(BrokerConfig(lean_cmd=tc.server_cmd(), env=tc.env())) as broker:
            ws = {"root": str(root)}
            await broker.call("sync", {"workspace": ws, "path": "Demo/Goals.lean"})
            await broker.call("sync", {"workspace": ws, "path": "Demo/Proofs.lean"})
            runtime = broker.cached(str(root))
            assert runtime is not None
            client = await runtime.client()
            proofs, goals = path_to_uri(root / "Demo/Proofs.lean"), path_to_uri(root / "Demo/Goals.lean")
            hover_args = {"workspace": ws, "path": "Demo/Proofs.lean", "version": 1, "line": 3, "character": 29}
            goal_args = {
                "workspace": ws,
                "path": "Demo/Goals.lean",
                "version": 1,
                "line": 4,
                "character": 2,
                "mode": "before",
            }

            async def broker_hover() -> object:
                return await broker.call("hover", hover_args)

            async def raw_hover() -> object:
                return await client.hover(proofs, Position(line=3, character=29))

            async def broker_goals() -> object:
                return await broker.call("goals", goal_args)

            async def raw_goals() -> object:
                return await client.interactive_goals(goals, Position(line=4, character=2))

            async def broker_sync() -> object:
                return await broker.call("sync", {"workspace": ws, "path": "Demo/Proofs.lean"})

            sub, base = await interleaved(broker_hover, raw_hover, rounds)
            ratios["hover"] = report("broker hover", sub, base, "broker", "beam-lsp")
            sub, base = await interleaved(broker_goals, raw_goals, rounds)
            ratios["goals"] = report("broker goals", sub, base, "broker", "beam-lsp")
            sub, base = await interleaved(broker_sync, raw_hover, rounds)
            ratios["sync_unchanged_vs_hover"] = report(
                "broker sync (unchanged file)", sub, base, "sync", "beam-lsp hover"
            )
        return ratios
