"""beam_lsp._lean_requests: Lean's own requests, typed, against real Lean 4.35 (prelude fixtures).

What Lean answers empty here, and why: `widgets` (no `@[widget_module]` exists without `Init`, so no position has a
panel widget) and so `widget_source` has no hash to answer for (Lean answers an error, asserted below);
`interactive_goals` outside a tactic block (None, as `plain_goal`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from beam_lsp import (
    InteractiveGoals,
    LeanClient,
    LeanImport,
    LeanImportKind,
    LeanModule,
    Position,
    ResponseError,
    RpcNeedsReconnect,
    path_to_uri,
)
from tests.support.toolchain import Toolchain

pytestmark = [pytest.mark.anyio, pytest.mark.lean]

GOALS = """prelude
import Demo.Basic

theorem tactic (p : Prop) (hp : p) : p := by
  skip

theorem term (p : Prop) (hp : p) : p :=
  hp
"""


def P(line: int, character: int) -> Position:
    return Position(line=line, character=character)


@pytest.fixture
async def client(lean_toolchain: Toolchain, demo_root: Path) -> AsyncIterator[LeanClient]:
    async with LeanClient.start(lean_toolchain.server_cmd(), cwd=demo_root, env=lean_toolchain.env()) as c:
        yield c


async def opened(client: LeanClient, root: Path, rel: str = "Demo/Interactive.lean", text: str = GOALS) -> str:
    path = root / rel
    path.write_text(text, encoding="utf-8")
    uri = path_to_uri(path)
    await client.open(uri, text)
    return uri


async def test_real_plain_goals_and_the_waits(client: LeanClient, demo_root: Path) -> None:
    uri = await opened(client, demo_root)
    with anyio.fail_after(60):
        await client.wait_for_diagnostics(uri)  # returns once version 1's diagnostics are all out
        goal = await client.plain_goal(uri, P(4, 2))
        term = await client.plain_term_goal(uri, P(7, 2))
        outside = await client.plain_goal(uri, P(0, 0))
        await client.wait_for_ileans()
    assert goal is not None and goal.goals == ("p : Prop\nhp : p\n⊢ p",)
    assert term is not None and term.goal == "p : Prop\nhp : p\n⊢ p" and term.range.start == P(7, 2)
    assert outside is None
    assert client.cache.get(uri).version == 1


async def test_real_module_hierarchy_both_ways(client: LeanClient, demo_root: Path) -> None:
    uri = await opened(client, demo_root)
    basic = path_to_uri(demo_root / "Demo/Basic.lean")
    with anyio.fail_after(60):
        await client.sync(uri)  # Lean knows a document's imports once it has processed its header
        module = await client.prepare_module_hierarchy(uri)
        assert module is not None
        imports = await client.module_imports(module)
        importers = await client.module_imported_by(imports[0].module)
    assert module == LeanModule(name="Demo.Interactive", uri=uri)
    assert imports == [LeanImport(module=LeanModule(name="Demo.Basic", uri=basic), kind=LeanImportKind())]
    assert {"Demo.Interactive", "Demo.Proofs"} <= {i.module.name for i in importers}


async def test_real_interactive_goals_term_goals_and_diagnostics_are_rich_text(
    client: LeanClient, demo_root: Path
) -> None:
    uri = await opened(client, demo_root)
    with anyio.fail_after(60):
        await client.sync(uri)
        goals = await client.interactive_goals(uri, P(4, 2))
        none = await client.interactive_goals(uri, P(0, 0))
        term = await client.interactive_term_goal(uri, P(7, 2))
        diagnostics = await client.interactive_diagnostics(uri)
        first_lines = await client.interactive_diagnostics(uri, lines=(0, 4))
        assert goals is not None
        await client.release_refs(uri, [goals.goals[0].type.tag[0].info] if goals.goals[0].type.tag else [])
    assert isinstance(goals, InteractiveGoals) and [g.plain for g in goals.goals] == ["p : Prop\nhp : p\n⊢ p"]
    assert [h.names for h in goals.goals[0].hyps] == [("p",), ("hp",)] and goals.goals[0].hyps[0].isType
    assert none is None
    assert term is not None and term.type.plain == "p" and term.range is not None and term.range.start == P(7, 2)
    # Without `Init`, `skip` is no tactic: Lean reports it, and the goal it leaves unsolved.
    unknown, unsolved = sorted(diagnostics, key=lambda d: d.message.plain)
    assert unknown.message.plain == "unknown tactic" and unknown.range.start == P(4, 3)
    assert unsolved.message.plain == "unsolved goals\np : Prop\nhp : p\n⊢ p" and unsolved.leanTags == (1,)
    assert first_lines == [unsolved]  # only the error starting before line 4


async def test_real_widgets_none_without_init_and_an_unknown_widget_source_is_an_error(
    client: LeanClient, demo_root: Path
) -> None:
    uri = await opened(client, demo_root)
    with anyio.fail_after(60):
        await client.sync(uri)
        assert await client.widgets(uri, P(4, 2)) == []
        with pytest.raises(ResponseError):
            await client.widget_source(uri, P(4, 2), "12345")


async def test_real_rpc_sessions_are_reused_and_a_released_one_reconnects(client: LeanClient, demo_root: Path) -> None:
    uri = await opened(client, demo_root)
    with anyio.fail_after(60):
        await client.sync(uri)
        session = await client.rpc_connect(uri)
        await client.rpc_keep_alive(uri, session)
        raw = await client.rpc(
            uri,
            P(4, 2),
            "Lean.Widget.getInteractiveGoals",
            {
                "textDocument": {"uri": uri},
                "position": {"line": 4, "character": 2},
            },
        )
        with pytest.raises(RpcNeedsReconnect):
            await client.rpc_call(uri, "99999", P(4, 2), "Lean.Widget.getWidgets", {"line": 4, "character": 2})
    assert isinstance(raw, dict) and isinstance(raw["goals"], list)
