"""The tutorial of docs/lsp.md as one script: open a project, sync, ask goals, run a probe document, cancel.

Usage: `python examples/tutorial.py ROOT [SERVER...]` (default server: `lake serve -- -Dserver.reportDelayMs=0`),
ROOT a Lake project with the demo's files (tests/fixtures/demo: `Demo/Proofs.lean`, `Demo/Goals.lean`), whose
`Demo.Basic` is built or built by the server (docs/lsp.md#tutorial).
"""

from __future__ import annotations

import sys

import anyio

from beam_lsp import LeanClient, Point1

DEFAULT_SERVER = ["lake", "serve", "--", "-Dserver.reportDelayMs=0"]
PROBE_HEADER = "prelude\nimport Demo.Basic\n\n"


async def main(root: str, server: list[str]) -> None:
    """Open, sync, goals, a probe document, a cancelled request (the tutorial's five steps)."""
    # 1. Open a project: one Lean server for the project root, shut down when the block ends.
    async with LeanClient.start(server, cwd=root) as client:
        # 2. Sync: open a file and wait until Lean has elaborated it; the result never reads clean too early.
        proofs = client.file("Demo/Proofs.lean")
        await proofs.open()
        result = await proofs.sync(timeout=120)
        print(f"Proofs.lean v{result.version}: {result.elaboration.value}, {len(result.diagnostics)} diagnostics")

        # 3. Goals: as text, and structured (hypotheses with names and types).
        goals = client.file("Demo/Goals.lean")
        await goals.open()
        plain = await goals.plain_goal(Point1(5, 3))
        print("plain goal:", plain.goals if plain else None)
        interactive = await goals.interactive_goals(Point1(5, 3))
        for goal in interactive.goals if interactive else ():
            print("hypotheses:", [(" ".join(h.names), h.type.plain) for h in goal.hyps], "target:", goal.type.plain)

        # 4. A probe document: text that exists only in Lean's memory, changed and checked again and again.
        probe = client.file("Demo/Probe.lean")
        await probe.open(PROBE_HEADER + "theorem attempt : MyTrue := myTrue\n")
        print("first attempt errors:", [d.message for d in (await probe.sync()).errors])
        await probe.change(PROBE_HEADER + "theorem attempt : MyTrue := MyNat.zero\n")
        print("second attempt errors:", [d.message for d in (await probe.sync()).errors])
        await probe.close()

        # 5. Cancel: a deadline (anyio's cancel scopes) abandons a request; Lean gets $/cancelRequest.
        slow = client.file("Demo/Slow.lean")
        body = "".join(f"theorem t{i} (p : Prop) (hp : p) : p := hp\n" for i in range(400))
        await slow.open(PROBE_HEADER + body)
        with anyio.move_on_after(0.01) as scope:
            await slow.document_symbols()  # Lean answers once the whole file is elaborated
        print("cancelled:", scope.cancelled_caught, "cancellations sent:", client.stats().cancellations_sent)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2:] or DEFAULT_SERVER)
