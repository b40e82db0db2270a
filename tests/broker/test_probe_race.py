"""Concurrent probes on one document, each answer checked, on real Lean (the load lane's wrong answers).

`lean_attempts` runs a batch over the mirror it checked out and the spare ones free at once; a mirror done with
its share helps a group still running elsewhere, and the slower of the two runs is cancelled
(`_probes/attempts.run_all`). A help run cancelled inside `LeanClient.change` while another task held the JSON-RPC
write lock (several agents probing: Lean's stdin is busy) left the client's copy of its mirror a version ahead of
Lean's, so the next probe there sent a range edit Lean spliced into its older text: "Unknown identifier
`load0e`" for `example : MyTrue := load0`, a lost success in a batch (docs/deploy.md, the load lane's last run;
tests/lsp/test_cancelled_change.py shows the splice alone). Helping at once (`HELP_AFTER = 0`), room for four
mirrors and alternatives that cannot share a version make that cancellation happen every few calls here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker, BrokerConfig
from beam_broker._probes import attempts as attempts_module
from tests.load.harness import LOAD_FILE, source
from tests.support.toolchain import Toolchain

pytestmark = pytest.mark.anyio

AGENTS = 3
CALLS = 40
"""Calls per agent: without the fix about one in twenty answers was wrong (a run takes about 6 s)."""
TEXTS = [
    "example : MyTrue := load0",
    "example : MyTrue := nope",
    "set_option maxHeartbeats 1000 in theorem again0 : MyTrue := myTrue",  # shared state: one version each
]


@pytest.mark.lean
async def test_concurrent_probes_on_one_document_each_get_their_own_answer(
    lean_toolchain: Toolchain, demo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (demo_root / LOAD_FILE).write_text(source(0), encoding="utf-8")
    monkeypatch.setattr(attempts_module, "HELP_AFTER", 0.0)
    config = BrokerConfig(lean_cmd=lean_toolchain.server_cmd(), env=lean_toolchain.env(), mirrors_per_document=4)
    at: dict[str, Any] = {"workspace": {"root": str(demo_root)}, "path": LOAD_FILE, "version": 1, "line": 4}
    wrong: list[str] = []

    async def agent(k: int) -> None:
        for n in range(CALLS):
            if (k + n) % 2:
                out = await broker.call("run_at", {**at, "character": 0, "text": "example : MyTrue := load0\n"})
                if out["success"] is not True or out["messages"] != []:
                    wrong.append(f"run_at: {out['messages']}")
            else:
                out = await broker.call("attempts", {**at, "character": 0, "texts": TEXTS})
                got = [(a["success"], [m["text"] for m in a["messages"]]) for a in out["attempts"]]
                if got != [(True, []), (False, ["Unknown identifier `nope`"]), (True, [])]:
                    wrong.append(f"attempts: {got}")

    with anyio.fail_after(60):
        async with Broker.open(config) as broker:
            await broker.call("sync", {"workspace": {"root": str(demo_root)}, "path": LOAD_FILE})
            async with anyio.create_task_group() as tg:
                for k in range(AGENTS):
                    tg.start_soon(agent, k)
    assert wrong == []
