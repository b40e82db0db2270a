"""The main job: start Lean on the demo workspace and show what Beam sees (`tox -e demo`).

Builds the real Lean 4.35.0 toolchain if needed (tests/support/toolchain.py), copies the demo project to a
temporary directory, builds `Demo.Basic`, then drives the language server through beam-lsp: diagnostics
barrier on a clean, a broken, a warning and a goals file, plus hover, goals and definition.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import projects, toolchain  # noqa: E402

from beam_lsp import LeanClient, Position, path_to_uri  # noqa: E402


async def main() -> int:
    tc = toolchain.from_env() or toolchain.lean435()
    with tempfile.TemporaryDirectory() as tmp:
        root = projects.copy_project("demo", Path(tmp) / "demo")
        build = projects.lake_build(tc, root, "Demo.Basic")
        if build.returncode != 0:
            print(build.stdout, build.stderr, file=sys.stderr)
            return 1
        async with LeanClient.start(tc.server_cmd(), cwd=root, env=tc.env()) as client:
            print(f"server: {client.server_info}")
            for name in ("Proofs", "Broken", "Warn", "Goals"):
                path = root / "Demo" / f"{name}.lean"
                uri = path_to_uri(path)
                await client.open(uri, path.read_text(encoding="utf-8"))
                with anyio.fail_after(120):
                    result = await client.sync(uri)
                print(
                    f"\n{path.relative_to(root)} v{result.version}: {result.elaboration.value}, "
                    f"{len(result.errors)} error(s), {len(result.diagnostics)} diagnostic(s)"
                )
                for d in result.diagnostics:
                    first = d.message.splitlines()[0]
                    print(f"  {d.range.start.line + 1}:{d.range.start.character + 1} severity {d.severity}: {first}")
            proofs = path_to_uri(root / "Demo/Proofs.lean")
            hover = await client.hover(proofs, Position(line=3, character=29))
            print(f"\nhover Demo/Proofs.lean 4:30 -> {hover.contents.value if hover else None!r}")  # type: ignore[union-attr]
            goals = await client.plain_goal(path_to_uri(root / "Demo/Goals.lean"), Position(line=4, character=2))
            print(f"goals Demo/Goals.lean 5:3 -> {goals.goals if goals else None}")
            target = await client.definition(proofs, Position(line=3, character=29))
            print(f"definition of myTrue -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
