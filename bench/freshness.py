"""What knowing that imports are current costs a clean verdict: with the freshness check vs without it.

Before a `sync` reports a file, and before a probe runs, Beam checks every workspace module the file imports
(directly or not): its source against what its build was made from, and the build against what the file's worker
loaded (`beam_broker._freshness`). Nothing is stale here, so this is the price of the check alone: a `stat` per
source and `.olean` when Beam already knows the files, no file read, no Lake. The baseline is the same call with
the check switched off, interleaved in the same run: a settled `run_at` and a `sync` of an unchanged file over
an import chain (`Demo.Top` -> `Demo.Mid` -> `Demo.Basic`), and a `sync` of a file importing `WIDE` modules.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support import projects

from beam_broker import Broker, BrokerConfig
from beam_broker._freshness import Freshness
from beam_broker.runtime import WorkspaceRuntime
from bench._common import built_project, interleaved, report

WIDE = 40
"""Modules the wide file imports (each one import deep)."""
MID = "prelude\nimport Demo.Basic\n\ntheorem midTrue : MyTrue := myTrue\n"
TOP = "prelude\nimport Demo.Mid\n\ntheorem topTrue : MyTrue := midTrue\n"


@contextlib.contextmanager
def unchecked(runtime: WorkspaceRuntime) -> Iterator[None]:
    """The runtime with the freshness check switched off (what a verdict cost before it existed)."""
    fresh = runtime.freshness

    async def nothing_stale(*args: Any, **kwargs: Any) -> list[Any]:
        return []

    async def nothing_rebuilt() -> None:
        return None

    saved = fresh.stale, fresh.outdated, runtime.tell_rebuilt
    fresh.stale = nothing_stale  # type: ignore[method-assign]
    fresh.outdated = lambda *args: False  # type: ignore[method-assign]
    runtime.tell_rebuilt = nothing_rebuilt  # type: ignore[method-assign]
    try:
        yield
    finally:
        fresh.stale, fresh.outdated, runtime.tell_rebuilt = saved  # type: ignore[method-assign]


async def main(rounds: int = 200) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        (root / "Demo/Mid.lean").write_text(MID)
        (root / "Demo/Top.lean").write_text(TOP)
        for i in range(WIDE):
            (root / f"Demo/W{i}.lean").write_text(f"prelude\nimport Demo.Basic\n\ntheorem w{i} : MyTrue := myTrue\n")
        imports = "".join(f"import Demo.W{i}\n" for i in range(WIDE))
        (root / "Demo/Wide.lean").write_text(f"prelude\n{imports}\ntheorem wide : MyTrue := w0\n")
        modules = ["Demo.Top", *(f"Demo.W{i}" for i in range(WIDE))]
        out = projects.lake_build(tc, root, *modules)
        if out.returncode != 0:
            raise SystemExit(out.stdout + out.stderr)
        ratios: dict[str, float] = {}
        async with Broker.open(BrokerConfig(lean_cmd=tc.server_cmd(), env=tc.env())) as broker:
            ws = {"root": str(root)}
            for path in ("Demo/Top.lean", "Demo/Wide.lean", "Demo/Proofs.lean"):
                await broker.call("sync", {"workspace": ws, "path": path})
            runtime = broker.cached(str(root))
            assert runtime is not None and isinstance(runtime.freshness, Freshness)
            count = [0]

            def call(name: str, args: dict[str, Any], *, checked: bool) -> Any:
                async def go() -> object:
                    if checked:
                        return await broker.call(name, {"workspace": ws, **args})
                    with unchecked(runtime):
                        return await broker.call(name, {"workspace": ws, **args})

                return go

            def probe(*, checked: bool) -> Any:
                async def go() -> object:
                    count[0] += 1
                    text = f"theorem probe{count[0]} : MyTrue := byTerm"
                    args = {"path": "Demo/Proofs.lean", "version": 1, "line": 9, "character": 0, "text": text}
                    result = await call("run_at", args, checked=checked)()
                    assert result["success"], result
                    return result

                return go

            rows = [
                ("run_at_settled", "run_at (settled, Demo.Basic imported)", probe(checked=True), probe(checked=False)),
                (
                    "sync_unchanged_chain",
                    "sync of an unchanged file (2 modules imported)",
                    call("sync", {"path": "Demo/Top.lean"}, checked=True),
                    call("sync", {"path": "Demo/Top.lean"}, checked=False),
                ),
                (
                    "sync_unchanged_wide",
                    f"sync of an unchanged file ({WIDE + 1} modules imported)",
                    call("sync", {"path": "Demo/Wide.lean"}, checked=True),
                    call("sync", {"path": "Demo/Wide.lean"}, checked=False),
                ),
            ]
            for key, name, subject, baseline in rows:
                sub, base = await interleaved(subject, baseline, rounds)
                ratios[key] = report(name, sub, base, "checked", "unchecked")
            print(f"  (Lake was asked {runtime.freshness.lake_checks} times in all: once per module set, at first)")
        return ratios
