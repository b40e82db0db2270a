"""`completions`: Lean's completions at a position of a named version, bounded, resolved, shaped."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from beam_broker import errors as codes
from beam_broker import models as m
from beam_broker._ops import models as om
from beam_broker._ops.completions import KINDS, _item, completions
from beam_broker.workspace import WorkspaceDescriptor
from beam_lsp import Position, TextDocument
from beam_lsp._convert import converter

from .support import call, error_of, fake_project, open_broker

pytestmark = pytest.mark.anyio
SOURCE = "theorem two : True := trivial\ndef helper := two\n"
WS = WorkspaceDescriptor(root="/r")


async def test_completions_answer_for_the_named_version_over_the_fake_server(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    async with open_broker() as broker:
        await call(broker, "update", root, path="A.lean")
        found = await call(broker, "completions", root, path="A.lean", version=1, line=1, character=17)
    assert found == {
        "workspace": {"root": str(root)},
        "version": 1,
        "is_incomplete": True,
        "total": 0,
        "dropped": 0,
        "items": [],
    }


async def test_stale_versions_and_positions_outside_the_text_are_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    async with open_broker() as broker:
        stale = await error_of(broker, "completions", root, path="A.lean", version=2, line=0, character=0)
        outside = await error_of(broker, "completions", root, path="A.lean", version=1, line=0, character=99)
        past_end = await error_of(broker, "completions", root, path="A.lean", version=1, line=9, character=0)
    assert stale.code == codes.CONTENT_MODIFIED
    assert stale.data is not None and stale.data["reason"] == "documentVersionMismatch"
    assert outside.code == past_end.code == codes.INVALID_PARAMS


# ---- the handler against a scripted client: limit, resolution, shapes --------------------------------------
@dataclasses.dataclass
class _Doc:
    uri: str = "file:///r/A.lean"
    version: int = 4


@dataclasses.dataclass
class _Client:
    items: list[dict[str, Any]]
    incomplete: bool = False
    resolved: list[types.CompletionItem] = dataclasses.field(default_factory=list)
    asked: list[Position] = dataclasses.field(default_factory=list)

    def document(self, uri: str) -> TextDocument:
        return TextDocument(uri, "def a := MyNat.\n", 4)

    async def completion(self, uri: str, position: Position) -> types.CompletionList:
        self.asked.append(position)
        listed = {"isIncomplete": self.incomplete, "items": self.items}
        result: types.CompletionList = converter().structure(listed, types.CompletionList)
        return result

    async def resolve_completion(self, item: types.CompletionItem) -> types.CompletionItem:
        self.resolved.append(item)
        return _with_detail(item)


def _with_detail(item: types.CompletionItem) -> types.CompletionItem:
    raw = converter().unstructure(item)
    resolved: types.CompletionItem = converter().structure(
        {**raw, "detail": f"type of {item.label}"}, types.CompletionItem
    )
    return resolved


@dataclasses.dataclass
class _Call:
    client: _Client
    workspace: WorkspaceDescriptor = WS

    async def checked(self, pin: m.PinnedInput) -> tuple[_Client, _Doc]:
        return self.client, _Doc()


def _inp(**fields: Any) -> om.CompletionsInput:
    base: dict[str, Any] = {"path": "A.lean", "version": 4, "line": 0, "character": 15, "workspace": WS}
    return om.CompletionsInput(**{**base, **fields})


async def test_only_the_first_limit_items_are_resolved_and_the_rest_are_counted_as_dropped() -> None:
    items = [{"label": f"c{i}", "kind": 4, "data": [i]} for i in range(5)]
    client = _Client(items)
    result = await completions(_Call(client), _inp(limit=2))  # type: ignore[arg-type]
    assert client.asked == [Position(line=0, character=15)]
    assert [item.label for item in client.resolved] == ["c0", "c1"], "only kept items are resolved, in order"
    assert converter().unstructure(client.resolved[0]) == items[0], "an item goes back to Lean as Lean sent it"
    assert result.dump() == {
        "workspace": {"root": "/r"},
        "version": 4,
        "is_incomplete": False,
        "total": 5,
        "dropped": 3,
        "items": [
            {"label": "c0", "kind": "constructor", "detail": "type of c0"},
            {"label": "c1", "kind": "constructor", "detail": "type of c1"},
        ],
    }


async def test_lean_s_order_is_kept() -> None:
    # A Lean that ranks its items with `sortText` is read as LSP clients read it (compared as text).
    ranked = [{"label": "a", "sortText": "1"}, {"label": "b", "sortText": "0"}, {"label": "c", "sortText": "10"}]
    client = _Client(ranked, incomplete=True)
    result = await completions(_Call(client), _inp(limit=2))  # type: ignore[arg-type]
    assert [(item.label, item.sort_text) for item in result.items] == [("b", "0"), ("a", "1")]
    assert (result.total, result.dropped, result.is_incomplete) == (3, 1, True)
    unranked = await completions(_Call(_Client([{"label": "b"}, {"label": "a"}])), _inp())  # type: ignore[arg-type]
    assert [item.label for item in unranked.items] == ["b", "a"], "no sortText (Lean 4.35): the array is the ranking"


async def test_resolve_bounds_how_many_of_the_kept_items_are_resolved() -> None:
    client = _Client([{"label": f"c{i}", "sortText": str(i)} for i in range(5)])
    result = await completions(_Call(client), _inp(limit=4, resolve=2))  # type: ignore[arg-type]
    assert [item.label for item in client.resolved] == ["c0", "c1"]
    assert [(item.label, item.detail) for item in result.items] == [
        ("c0", "type of c0"),
        ("c1", "type of c1"),
        ("c2", None),
        ("c3", None),
    ]


async def test_a_position_outside_beams_text_is_refused_before_lean_is_asked() -> None:
    from beam_lsp import InvalidPosition

    client = _Client([{"label": "x"}])
    with pytest.raises(InvalidPosition):
        await completions(_Call(client), _inp(character=16))  # type: ignore[arg-type]
    assert client.asked == []


@pytest.mark.parametrize(
    ("raw", "shaped"),
    [
        ({"label": "succ", "kind": 4}, {"label": "succ", "kind": "constructor"}),
        ({"label": "x", "kind": 1}, {"label": "x", "kind": "text"}),
        ({"label": "x", "kind": 25}, {"label": "x", "kind": "typeParameter"}),
        ({"label": "x", "kind": 26}, {"label": "x"}),
        ({"label": "x", "kind": 0}, {"label": "x"}),
        ({"label": "x", "kind": "4"}, {"label": "x"}),
        ({"label": "x", "detail": ""}, {"label": "x"}),
        ({"label": "x", "documentation": "Plain doc."}, {"label": "x", "documentation": "Plain doc."}),
        (
            {"label": "x", "documentation": {"kind": "markdown", "value": "*Doc.*"}},
            {"label": "x", "documentation": "*Doc.*"},
        ),
        ({"label": "x", "documentation": {"kind": "markdown"}}, {"label": "x"}),
        ({"label": "x", "insertText": "x"}, {"label": "x"}),
        ({"label": "x", "insertText": "x y"}, {"label": "x", "insert_text": "x y"}),
        ({"label": "x", "insertText": "no", "textEdit": {"newText": "«x»"}}, {"label": "x", "insert_text": "«x»"}),
        ({"label": "x", "textEdit": {"range": {}}}, {"label": "x"}),
        ({"kind": 3}, {"label": "", "kind": "function"}),
    ],
)
def test_items_keep_lean_s_label_kind_detail_documentation_and_insertion(
    raw: dict[str, Any], shaped: dict[str, Any]
) -> None:
    assert _item(raw).dump() == shaped


def test_kind_names_follow_the_lsp_numbering() -> None:
    assert len(KINDS) == 25 and KINDS[2] == "function" and KINDS[20] == "constant" and KINDS[21] == "struct"


# ---- real Lean -----------------------------------------------------------------------------------------------
DOTTED = "prelude\nimport Demo.Basic\n\ndef probe := MyNat.\n"


@pytest.mark.lean
async def test_real_completions_after_a_dot_come_resolved_and_bounded(broker: Any, demo_root: Path) -> None:
    (demo_root / "Demo" / "Dotted.lean").write_text(DOTTED, encoding="utf-8")
    version = (await call(broker, "update", demo_root, path="Demo/Dotted.lean"))["version"]
    at = {"path": "Demo/Dotted.lean", "version": version, "line": 3, "character": 19}
    every = await call(broker, "completions", demo_root, **at)
    one = await call(broker, "completions", demo_root, **at, limit=1)
    by_label = {item["label"]: item for item in every["items"]}
    assert {"zero", "succ", "one"} <= set(by_label) and every["dropped"] == 0
    assert by_label["succ"] == {"label": "succ", "kind": "constructor", "detail": "MyNat → MyNat"}
    assert by_label["one"]["detail"] == "MyNat"
    assert one["items"] == every["items"][:1] and one["total"] == every["total"] == len(every["items"])
    assert one["dropped"] == every["total"] - 1
