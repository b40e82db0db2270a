"""Navigation with beam-lsp: hover, definitions, references, call hierarchy, tokens, imports, and a rename applied.

Usage: `python examples/navigate.py ROOT [SERVER...]` on the demo project (tests/fixtures/demo, its `Demo.Basic`
built or built by the server: docs/lsp.md#tutorial). Nothing is written to disk: the rename changes the client's
copy of the document only.
"""

from __future__ import annotations

import sys

import anyio

from beam_lsp import LeanClient, Point1

DEFAULT_SERVER = ["lake", "serve", "--", "-Dserver.reportDelayMs=0"]


async def main(root: str, server: list[str]) -> None:
    """Hover, definitions, references, tokens, imports, the call hierarchy and a rename of the demo's proofs."""
    async with LeanClient.start(server, cwd=root) as client:
        proofs = client.file("Demo/Proofs.lean")
        await proofs.open()
        await proofs.sync(timeout=120)
        at = Point1(4, 30)  # `myTrue` in `theorem byTerm : MyTrue := myTrue`
        hover = await proofs.hover(at)
        print("hover:", hover.contents if hover else None)
        for target in await proofs.definition(at):
            print("defined in:", getattr(target, "target_uri", getattr(target, "uri", None)))
        print("references:", [(r.uri.rsplit("/", 1)[-1], r.range.start.line) for r in await proofs.references(at)])
        keywords = [t for t in await proofs.semantic_tokens() if t.type == "keyword"]
        print("keywords:", len(keywords), "first at", proofs.point1(keywords[0]) if keywords else None)
        module = await proofs.module()
        if module is not None:
            print("imports:", [i.module.name for i in await client.module_imports(module)])
        [item] = await proofs.prepare_call_hierarchy(Point1(9, 5))  # `def two : MyNat := MyNat.succ MyNat.one`
        print("two uses:", sorted(call.to.name for call in await client.outgoing_calls(item)))
        edit = await proofs.rename(Point1(6, 9), "idProof2")
        if edit is not None:
            print("renamed, versions:", await client.apply_edit(edit))
            print(proofs.document.text.splitlines()[5])


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2:] or DEFAULT_SERVER)
