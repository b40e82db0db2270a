"""Speculation cost: a probe on a declaration followed by 0 vs 300 declarations, and cold vs warm mirrors.

Probe mirrors truncate the source after the probe, so the cost should follow the enclosing declaration, not
the file: the 300-tail / 0-tail ratio should stay near 1. A cold probe opens a new mirror (a Lean worker that
loads the imports); a warm one rewrites an open mirror and Lean reuses its unchanged prefix. What comes before
the probe is not free: probes after the 300 declarations and before them, alternating on one document (each keeps
a warm mirror of its own), show what Lean's walk over the earlier declarations costs per mirror version.

The edit -> probe loop on a 1500-declaration file (`edit_then_probe`): an edit at the top, `update`, then a probe
before the declarations at once, or after a pause (an agent's think time, `THINK` s) with the source edit applied
to the probe's mirror `_mirrors.FOLLOW_DELAY` after `update` (`_mirrors.follow`, which gives way to a probe sent
sooner) and, in the same run, with that switched off; each against a probe of the settled file in the same round.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from tests.support import projects

from beam_broker import Broker, BrokerConfig
from beam_broker import _mirrors as mirrors
from bench._common import built_project, interleaved, report

THINK = 0.25
"""Seconds between an edit and the probe in the think-time rows."""
EDIT_ROUNDS = 8


async def main(rounds: int = 60, cold_rounds: int = 12) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tc, root = built_project(Path(tmp) / "demo")
        (root / "Demo/Zero.lean").write_text(projects.long_file(0))
        (root / "Demo/Tail.lean").write_text(projects.long_file(300))
        ratios: dict[str, float] = {}
        async with Broker.open(BrokerConfig(lean_cmd=tc.server_cmd(), env=tc.env())) as broker:
            ws = {"root": str(root)}
            for path in ("Demo/Zero.lean", "Demo/Tail.lean"):
                await broker.call("sync", {"workspace": ws, "path": path})

            def probe(path: str, i: list[int], line: int = 3) -> Callable[[], Awaitable[object]]:
                async def go() -> object:
                    i[0] += 1  # a fresh command each time: nothing is cached between probes but Lean's prefix
                    text = f"theorem probe{i[0]} (p : Prop) (hp : p) : p := target p hp"
                    args = {"workspace": ws, "path": path, "version": 1, "line": line, "character": 0, "text": text}
                    result = await broker.call("run_at", args)
                    assert result["success"], result
                    return result

                return go

            tail, zero = await interleaved(probe("Demo/Tail.lean", [0]), probe("Demo/Zero.lean", [0]), rounds)
            ratios["tail300_vs_tail0"] = report("run_at, 300 vs 0 declarations after", tail, zero, "tail 300", "tail 0")
            last = len(projects.long_file(300).splitlines())  # the empty line after the last declaration
            late, early = probe("Demo/Tail.lean", [0], last), probe("Demo/Tail.lean", [10**6])
            after, before = await interleaved(late, early, rounds)
            ratios["after300_vs_top"] = report(
                "run_at, after vs before 300 declarations", after, before, "after 300", "before"
            )
            cold: list[float] = []
            warm: list[float] = []
            for i in range(cold_rounds):
                path = f"Demo/Cold{i}.lean"
                (root / path).write_text(projects.long_file(0))
                await broker.call("update", {"workspace": ws, "path": path})
                args = {"workspace": ws, "path": path, "version": 1, "line": 3, "character": 0, "text": "#check target"}
                t0 = time.perf_counter()
                await broker.call("run_at", args)
                cold.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await broker.call("run_at", {**args, "text": "#check target\n#check target"})
                warm.append(time.perf_counter() - t0)
                await broker.call("close", {"workspace": ws, "path": path})
            ratios["cold_vs_warm"] = report("run_at, cold vs warm mirror", cold, warm, "cold", "warm")
            print(f"  (cold median {statistics.median(cold) * 1e3:.1f} ms includes opening a Lean worker)")
            ratios.update(await edit_then_probe(broker, root))
        return ratios


async def edit_then_probe(broker: Broker, root: Path) -> dict[str, float]:
    """First probe after an edit at the top of a 1500-declaration file: at once and after `THINK` s, each with
    and without `_mirrors.follow`; each against the settled probe of its round."""
    ws = {"root": str(root)}
    path = "Demo/Edited.lean"
    body = projects.long_file(1500)
    head = "prelude\nimport Demo.Basic\n\n"
    count = [0]

    def text(value: str) -> str:
        return f"{head}def edited : MyNat := {value}\n\n{body[len(head) :]}"

    async def probe(version: int) -> float:
        count[0] += 1
        args = {"workspace": ws, "path": path, "version": version, "line": 4, "character": 0}
        t0 = time.perf_counter()
        result = await broker.call("run_at", {**args, "text": f"theorem probe{count[0]} : MyTrue := myTrue"})
        elapsed = time.perf_counter() - t0
        assert result["success"], result
        return elapsed

    original = mirrors.follow

    async def not_followed(*args: object, **kwargs: object) -> int:
        return 0

    kinds = ("now", "now_nofollow", "think", "think_nofollow")
    samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in kinds}
    value = ["MyNat.zero"]
    (root / path).write_text(text(value[0]))
    for i in range(EDIT_ROUNDS * len(kinds) + 1):
        kind = kinds[i % len(kinds)]
        version = (await broker.call("sync", {"workspace": ws, "path": path}))["version"]
        settled = await probe(version)
        value[0] = "MyNat.one" if value[0] == "MyNat.zero" else "MyNat.zero"
        (root / path).write_text(text(value[0]))
        mirrors.follow = not_followed if kind.endswith("nofollow") else original  # type: ignore[assignment]
        try:
            version = (await broker.call("update", {"workspace": ws, "path": path}))["version"]
            if kind.startswith("think"):
                await anyio.sleep(THINK)
            first = await probe(version)
        finally:
            mirrors.follow = original
        if i >= 1:  # the first round opens the mirror
            samples[kind][0].append(first)
            samples[kind][1].append(settled)
    labels = {
        "now": "run_at at once after an edit at the top",
        "now_nofollow": "run_at at once after an edit at the top, edits not applied to mirrors",
        "think": f"run_at {THINK} s after an edit at the top",
        "think_nofollow": f"run_at {THINK} s after an edit at the top, edits not applied to mirrors",
    }
    return {
        f"edit_{kind}_vs_settled": report(labels[kind], after, settled, "after the edit", "settled")
        for kind, (after, settled) in samples.items()
    }
