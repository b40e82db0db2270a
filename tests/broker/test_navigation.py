"""Navigation: hover, signature help, definition, references, document and workspace symbols."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker
from beam_broker import errors as codes
from beam_broker._ops.navigation import lsp_json
from beam_lsp import Position
from tests.support import projects

from .support import call, error_of, fake_project, open_broker, spy

pytestmark = pytest.mark.anyio
SOURCE = "theorem two : True := trivial\ndef helper := two\n"


async def test_lean_answers_pass_through_for_the_named_version(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    at: dict[str, Any] = {"path": "A.lean", "version": 1, "line": 1, "character": 15}
    ws = {"root": str(root)}
    async with open_broker({"hover": {"two": "two : True"}}) as broker:
        await call(broker, "update", root, path="A.lean")
        hover = await call(broker, "hover", root, **at)
        nothing = await call(broker, "hover", root, **{**at, "character": 13})
        signature = await call(broker, "signature_help", root, **at)
        definition = await call(broker, "definition", root, **at)
        references = await call(broker, "references", root, **at, include_declaration=False)
        symbols = await call(broker, "document_symbols", root, path="A.lean", version=1)
        found = await call(broker, "workspace_symbols", root, query="two")
    assert hover == {
        "workspace": ws,
        "contents": {"kind": "markdown", "value": "two : True"},
        "range": {"start": {"line": 1, "character": 14}, "end": {"line": 1, "character": 17}},
    }
    assert nothing == signature == {"workspace": ws, "result": None}
    assert definition == references == found == {"workspace": ws, "result": []}
    assert [s["name"] for s in symbols["result"]] == ["two", "helper"] and symbols["workspace"] == ws


async def test_stale_versions_and_bad_positions_are_refused_before_lean_is_asked(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    async with open_broker() as broker:
        stale = await error_of(broker, "hover", root, path="A.lean", version=3, line=0, character=0)
        bad = await error_of(broker, "definition", root, path="A.lean", version=1, line=99, character=0)
        symbols = await error_of(broker, "document_symbols", root, path="A.lean", version=2)
    assert stale.code == symbols.code == codes.CONTENT_MODIFIED
    assert stale.data is not None and stale.data["reason"] == "documentVersionMismatch"
    assert (stale.data["expectedVersion"], stale.data["acceptedVersion"], stale.data["currentVersion"]) == (3, 1, 1)
    assert bad.code == codes.INVALID_PARAMS


async def test_a_hover_is_not_blocked_by_a_slow_sync(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE, "Long.lean": SOURCE})
    async with open_broker({"elab_ms": 60_000}) as broker:
        await call(broker, "update", root, path="A.lean")
        order: list[str] = []
        async with anyio.create_task_group() as tg:

            async def slow() -> None:
                await call(broker, "sync", root, path="Long.lean")
                order.append("sync")

            tg.start_soon(slow)
            await anyio.wait_all_tasks_blocked()
            await call(broker, "hover", root, path="A.lean", version=1, line=0, character=9)
            order.append("hover")
            tg.cancel_scope.cancel()
    assert order == ["hover"]


def test_lsp_values_become_plain_json() -> None:
    from lsprotocol import types

    hover = types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="x"))
    assert lsp_json(hover) == {"contents": {"kind": "markdown", "value": "x"}}
    assert lsp_json([Position(line=1, character=2)]) == [{"line": 1, "character": 2}]
    assert lsp_json(None) is None


# ---- real Lean lane -----------------------------------------------------------------------------------
@pytest.mark.lean
async def test_navigation_answers_for_the_named_version(broker: Broker, demo_root: Path) -> None:
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    at: dict[str, Any] = {"path": "Demo/Proofs.lean", "version": 1, "line": 3, "character": 29}
    hover = await call(broker, "hover", demo_root, **at)
    assert hover["contents"]["kind"] == "markdown" and "myTrue : MyTrue" in hover["contents"]["value"]
    none = await call(broker, "hover", demo_root, **{**at, "line": 2, "character": 0})
    assert none["result"] is None
    definition = await call(broker, "definition", demo_root, **at)
    assert definition["result"][0]["targetUri"].endswith("/Demo/Basic.lean")
    refs = await call(broker, "references", demo_root, **at, include_declaration=False)
    assert all(r["uri"].startswith("file://") for r in refs["result"]) and refs["result"]
    symbols = await call(broker, "document_symbols", demo_root, path="Demo/Proofs.lean", version=1)
    assert [s["name"] for s in symbols["result"]] == ["byTerm", "idProof", "two"]
    found = await call(broker, "workspace_symbols", demo_root, query="idPro")
    assert [s["name"] for s in found["result"]] == ["idProof"]
    sig = await call(broker, "signature_help", demo_root, **{**at, "line": 6, "character": 3})
    assert sig == {"workspace": {"root": str(demo_root)}, "result": None}
    bad = await error_of(broker, "hover", demo_root, **{**at, "line": 99})
    assert bad.code == codes.INVALID_PARAMS


@pytest.mark.lean
async def test_a_hover_is_not_blocked_by_a_slow_sync_on_real_lean(broker: Broker, demo_root: Path) -> None:
    (demo_root / "Demo/Long.lean").write_text(projects.long_file(1500))
    await call(broker, "sync", demo_root, path="Demo/Proofs.lean")
    order: list[str] = []
    async with anyio.create_task_group() as tg:

        async def slow() -> None:
            await call(broker, "sync", demo_root, path="Demo/Long.lean")
            order.append("sync")

        tg.start_soon(slow)
        await anyio.wait_all_tasks_blocked()
        await call(broker, "hover", demo_root, path="Demo/Proofs.lean", version=1, line=3, character=29)
        order.append("hover")
    assert order == ["hover", "sync"]


async def test_hover_and_signature_help_come_from_a_mirror_while_the_document_elaborates_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    asked = spy(monkeypatch, "hover", "signature_help", "definition")
    at: dict[str, Any] = {"path": "A.lean", "line": 1, "character": 15}
    async with open_broker({"hover": {"two": "two : True"}, "elab_ms": 60_000}) as broker:
        await call(broker, "update", root, path="A.lean")
        settled = await call(broker, "hover", root, version=1, **at)
        (root / "A.lean").write_text(SOURCE + "def more := helper\n")
        await call(broker, "update", root, path="A.lean")
        hover = await call(broker, "hover", root, version=2, **at)
        again = await call(broker, "hover", root, version=2, **at)
        signature = await call(broker, "signature_help", root, version=2, **at)
        definition = await call(broker, "definition", root, version=2, **at)
        bad = await error_of(broker, "hover", root, version=2, **{**at, "line": 9})
    assert hover == again == settled and settled["contents"]["value"] == "two : True"
    assert signature["result"] is None and definition["result"] == []
    assert asked == [
        ("hover", "A.lean"),
        ("hover", "A_beamProbe1.lean"),
        ("hover", "A_beamProbe1.lean"),
        ("signature_help", "A_beamProbe1.lean"),
        ("definition", "A.lean"),  # the watchdog's index answers for the document itself
    ]
    assert bad.code == codes.INVALID_PARAMS


async def test_a_mirror_whose_request_failed_gets_its_text_again_next_time(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    lean = {"elab_ms": 60_000, "errors": {"textDocument/hover": {"code": -32603, "message": "boom"}}}
    async with open_broker(lean) as broker:
        await call(broker, "update", root, path="A.lean")
        (root / "A.lean").write_text(SOURCE + "def more := helper\n")
        await call(broker, "update", root, path="A.lean")
        failed = await error_of(broker, "hover", root, path="A.lean", version=2, line=1, character=15)
        runtime = broker.cached(str(root))
        assert runtime is not None
        [mirror] = next(iter(runtime.pools.values())).mirrors
    assert failed.code != codes.INVALID_PARAMS and "boom" in failed.message
    assert mirror.opened and mirror.text is None
