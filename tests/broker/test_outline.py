"""`outline`: a version's imports and declarations from Lean's symbols, module hierarchy, tokens and hovers."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from beam_broker import CallContext
from beam_broker import errors as codes
from beam_broker._ops import models as om
from beam_broker._ops.outline import (
    NAMESPACE_KIND,
    Token,
    _entry,
    _flatten,
    _imports,
    gather,
    hover_parts,
    imports_of,
    keyword_tokens,
)
from beam_broker.events import FileProgressEvent, PreparationEvent
from beam_lsp import LeanImport, LeanModule, ResponseError, SemanticToken, TextDocument
from beam_lsp import errors as lsp

from .support import call, error_of, fake_project, open_broker, spy

pytestmark = pytest.mark.anyio
SOURCE = "theorem two : True := trivial\n\ndef helper := two\n"
HOVERS = {
    "two": "```lean\ntwo : True\n```\n***\nThe number two.\n***\n*import Other*",
    "helper": "```lean\nhelper : True\n```",
}


def _rng(line: int, start: int, end: int, end_line: int | None = None) -> dict[str, Any]:
    return {
        "start": {"line": line, "character": start},
        "end": {"line": line if end_line is None else end_line, "character": end},
    }


async def test_the_outline_of_a_version_lists_declarations_with_lean_s_signatures(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    events: list[Any] = []
    # The outline opens the file itself (version 1), so Lean elaborates it under the call's watch whatever the
    # scheduling: its progress streams to the caller.
    async with open_broker({"hover": HOVERS}) as broker:
        found = await call(broker, "outline", root, ctx=CallContext(emit=events.append), path="A.lean", version=1)
    assert found == {
        "workspace": {"root": str(root)},
        "version": 1,
        "imports": None,  # the fake server, like Lean before its module hierarchy, has no $/lean/prepareModuleHierarchy
        "declarations": [
            {
                "name": "two",
                "kind": None,  # the fake server reports no semantic tokens
                "signature": "two : True",
                "range": _rng(0, 0, 29),
                "selection_range": _rng(0, 8, 11),
                "modifiers": [],
                "container": [],
                "docstring": "The number two.",
            },
            {
                "name": "helper",
                "kind": None,
                "signature": "helper : True",
                "range": _rng(2, 0, 17),
                "selection_range": _rng(2, 4, 10),
                "modifiers": [],
                "container": [],
            },
        ],
    }
    assert isinstance(events[0], PreparationEvent)
    progress = [event for event in events if isinstance(event, FileProgressEvent)]
    assert progress and progress[0].path == "A.lean", "the file's progress streams while Lean elaborates it"


async def test_a_stale_version_is_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    async with open_broker() as broker:
        stale = await error_of(broker, "outline", root, path="A.lean", version=7)
    assert stale.code == codes.CONTENT_MODIFIED
    assert stale.data is not None and stale.data["reason"] == "documentVersionMismatch"


async def test_a_module_hierarchy_failure_other_than_a_missing_method_is_an_error(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    failing = {"errors": {"$/lean/prepareModuleHierarchy": {"code": -32603, "message": "no header"}}}
    async with open_broker(failing) as broker:
        error = await error_of(broker, "outline", root, path="A.lean", version=1)
    assert error.code == codes.INTERNAL_ERROR and error.message == "no header"
    assert error.data == {"lspCode": -32603}


async def test_a_server_dying_while_declarations_are_hovered_is_worker_exited(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "".join(f"def d{i} := {i}\n" for i in range(30))})
    async with open_broker({"crash_on": {"method": "textDocument/hover"}}) as broker:
        error = await error_of(broker, "outline", root, path="A.lean", version=1)
    assert error.code == codes.WORKER_EXITED


# ---- imports ---------------------------------------------------------------------------------------------------
IMPORTS = [  # Lean 4.35's answer for `import Demo.Basic` (real lane capture)
    {
        "kind": {"isAll": False, "isPrivate": False, "metaKind": "nonMeta"},
        "module": {"name": "Demo.Basic", "uri": "file:///r/Demo/Basic.lean"},
    },
    {"module": {"name": "Other", "uri": "file:///r/Other.lean"}},
]


def test_lean_s_imports_keep_their_order_uri_and_kind() -> None:
    assert [i.dump() for i in imports_of([LeanImport.from_json(raw) for raw in IMPORTS])] == [
        {
            "module": "Demo.Basic",
            "uri": "file:///r/Demo/Basic.lean",
            "kind": {"isAll": False, "isPrivate": False, "metaKind": "nonMeta"},
        },
        {
            "module": "Other",
            "uri": "file:///r/Other.lean",
            "kind": {"isAll": False, "isPrivate": False, "metaKind": "nonMeta"},
        },
    ]
    assert imports_of([]) == []


@dataclasses.dataclass
class _Hierarchy:
    """A client answering the module hierarchy requests from a table (an exception is raised)."""

    answers: dict[str, Any]
    sent: list[tuple[str, Any]] = dataclasses.field(default_factory=list)

    def _answer(self, method: str, argument: Any) -> Any:
        self.sent.append((method, argument))
        answer = self.answers[method]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def prepare_module_hierarchy(self, uri: str) -> LeanModule | None:
        found = self._answer("$/lean/prepareModuleHierarchy", uri)
        return None if found is None else LeanModule.from_json(found)

    async def module_imports(self, module: LeanModule) -> list[LeanImport]:
        return [LeanImport.from_json(i) for i in self._answer("$/lean/moduleHierarchy/imports", module)]


async def test_imports_come_from_the_module_lean_prepared() -> None:
    module = {"name": "Demo.A", "uri": "file:///r/Demo/A.lean"}
    client = _Hierarchy({"$/lean/prepareModuleHierarchy": module, "$/lean/moduleHierarchy/imports": IMPORTS[:1]})
    found = await _imports(client, "file:///r/Demo/A.lean")  # type: ignore[arg-type]
    assert [i.module for i in found or []] == ["Demo.Basic"]
    assert client.sent == [
        ("$/lean/prepareModuleHierarchy", "file:///r/Demo/A.lean"),
        ("$/lean/moduleHierarchy/imports", LeanModule.from_json(module)),
    ]


async def test_a_document_lean_has_no_module_for_imports_nothing_and_an_old_lean_is_unknown() -> None:
    none = _Hierarchy({"$/lean/prepareModuleHierarchy": None})
    assert await _imports(none, "file:///r/A.lean") == []  # type: ignore[arg-type]
    missing = lsp.response_error(lsp.METHOD_NOT_FOUND, "No request handler found")
    old = _Hierarchy({"$/lean/prepareModuleHierarchy": missing})
    assert await _imports(old, "file:///r/A.lean") is None  # type: ignore[arg-type]
    module = {"name": "A", "uri": "file:///r/A.lean"}
    other = _Hierarchy({"$/lean/prepareModuleHierarchy": module, "$/lean/moduleHierarchy/imports": missing})
    assert await _imports(other, "file:///r/A.lean") is None  # type: ignore[arg-type]
    broken = _Hierarchy({"$/lean/prepareModuleHierarchy": lsp.response_error(lsp.INTERNAL_ERROR, "x")})
    with pytest.raises(ResponseError):
        await _imports(broken, "file:///r/A.lean")  # type: ignore[arg-type]


# ---- keywords, hovers, entries ---------------------------------------------------------------------------------
OUTLINE_TEXT = "prelude\n@[reducible] private def three := 3\nnamespace Foo\n/- 𝔸 -/ example : True := trivial\n"


def test_semantic_tokens_are_decoded_to_keywords_with_their_text() -> None:
    text = TextDocument("file:///r/A.lean", OUTLINE_TEXT, 1)
    tokens = [
        SemanticToken(0, 0, 7, "keyword", ()),  # prelude
        SemanticToken(1, 13, 7, "keyword", ()),  # private
        SemanticToken(1, 21, 3, "keyword", ()),  # def
        SemanticToken(1, 25, 5, "function", ()),  # three: a function, not a keyword
        SemanticToken(2, 0, 9, "keyword", ()),  # namespace
        SemanticToken(3, 9, 7, "keyword", ()),  # example (after a surrogate pair: UTF-16 columns)
        SemanticToken(8, 0, 3, "keyword", ()),  # beyond the text: skipped
    ]
    assert keyword_tokens(tokens, text) == [
        Token(0, 0, "prelude"),
        Token(1, 13, "private"),
        Token(1, 21, "def"),
        Token(2, 0, "namespace"),
        Token(3, 9, "example"),
    ]


@pytest.mark.parametrize(
    ("hover", "parts"),
    [
        ({"contents": {"kind": "markdown", "value": "```lean\nf (n : Nat) : Nat\n```"}}, ("f (n : Nat) : Nat", None)),
        (
            {"contents": {"value": "```lean\nf : Nat\n```\n***\nDoc one.\n\nMore. \n***\n*import Mathlib.A*"}},
            ("f : Nat", "Doc one.\n\nMore."),
        ),
        ({"contents": "```lean\nf : Nat\n```\n***\n*import A*"}, ("f : Nat", None)),
        ({"contents": "```\ng : Nat\n```"}, ("g : Nat", None)),
        ({"contents": "`namespace <id>` opens a section"}, (None, None)),
        ({"contents": ["```lean\nf\n```"]}, (None, None)),
        (None, (None, None)),
        ({"contents": "```lean\n\n```"}, (None, None)),
    ],
)
def test_hovers_split_into_signature_and_docstring(hover: Any, parts: tuple[str | None, str | None]) -> None:
    assert hover_parts(hover) == parts


SYMBOLS = [
    {
        "name": "Foo",
        "kind": NAMESPACE_KIND,
        "range": _rng(2, 0, 7, 9),
        "selectionRange": _rng(2, 10, 13),
        "children": [
            {"name": "three", "kind": 6, "range": _rng(3, 0, 30), "selectionRange": _rng(3, 25, 30)},
            {"name": "<section>", "kind": NAMESPACE_KIND, "range": _rng(4, 0, 3, 6), "selectionRange": _rng(4, 0, 7),
             "children": [{"name": "ex", "kind": 6, "range": _rng(5, 0, 9), "selectionRange": _rng(5, 0, 7)}]},
        ],
    },
    {"name": "instance : Inhabited Nat ", "kind": 6, "range": _rng(8, 0, 30), "selectionRange": _rng(8, 9, 26)},
]  # fmt: skip
KEYWORDS = [
    Token(2, 0, "namespace"),
    Token(3, 13, "private"),
    Token(3, 21, "def"),
    Token(3, 33, "where"),  # after the name: not part of the head
    Token(4, 0, "section"),
    Token(5, 0, "example"),
    Token(8, 0, "instance"),
]


def test_flattening_keeps_document_order_and_names_the_containers() -> None:
    flat = [(symbol["name"], container) for symbol, container in _flatten(SYMBOLS)]
    assert flat == [
        ("Foo", ()),
        ("three", ("Foo",)),
        ("<section>", ("Foo",)),
        ("ex", ("Foo", "<section>")),
        ("instance : Inhabited Nat ", ()),
    ]


def test_an_entry_s_kind_is_its_last_keyword_up_to_its_name_and_the_others_are_modifiers() -> None:
    entries = {
        symbol["name"]: _entry(symbol, container, KEYWORDS, None).dump() for symbol, container in _flatten(SYMBOLS)
    }
    assert {name: (e["kind"], e["modifiers"]) for name, e in entries.items()} == {
        "Foo": ("namespace", []),
        "three": ("def", ["private"]),
        "<section>": ("section", []),  # Lean's selection of an anonymous section is its keyword
        "ex": ("example", []),
        "instance : Inhabited Nat ": ("instance", []),
    }
    assert entries["ex"]["container"] == ["Foo", "<section>"] and entries["ex"]["selection_range"] == _rng(5, 0, 7)
    assert _entry(SYMBOLS[1], (), [], None).kind is None, "no tokens, no kind"
    hovered = _entry(SYMBOLS[1], (), [], {"contents": "```lean\ninstInhabitedNat : Inhabited Nat\n```"})
    assert hovered.signature == "instInhabitedNat : Inhabited Nat" and hovered.docstring is None


# ---- gather --------------------------------------------------------------------------------------------------------
async def test_gather_keeps_order_and_bounds_the_jobs_in_flight() -> None:
    running = peak = 0

    def job(n: int) -> Any:
        async def run() -> int:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await anyio.lowlevel.checkpoint()
            running -= 1
            return n * n

        return run

    assert await gather([job(n) for n in range(10)], 3) == [n * n for n in range(10)]
    assert peak == 3
    assert await gather([], 3) == []


async def test_gather_raises_the_first_failure_alone_and_cancels_the_rest() -> None:
    started: list[int] = []
    gate = anyio.Event()

    async def fails() -> None:
        raise lsp.ServerExited("gone")

    async def waits() -> None:
        started.append(1)
        await gate.wait()

    with pytest.raises(lsp.ServerExited):
        await gather([waits, fails, fails, waits], 4)
    assert started == [1, 1] and not gate.is_set()


# ---- real Lean -------------------------------------------------------------------------------------------------
OUTLINED = """prelude
import Demo.Basic

/-- The identity proof. -/
private theorem idProof (p : Prop) (hp : p) : p :=
  hp

namespace Foo
noncomputable def three (n : MyNat) : MyNat := MyNat.succ n
example : MyTrue := myTrue
end Foo

section
theorem inSec (q : Prop) (hq : q) : q := hq
end
"""


@pytest.mark.lean
async def test_real_outline_gives_imports_kinds_signatures_docstrings_and_containers(
    broker: Any, demo_root: Path
) -> None:
    (demo_root / "Demo" / "Outlined.lean").write_text(OUTLINED, encoding="utf-8")
    version = (await call(broker, "update", demo_root, path="Demo/Outlined.lean"))["version"]
    found = await call(broker, "outline", demo_root, path="Demo/Outlined.lean", version=version)
    om.OutlineResult.model_validate(found)
    [basic] = found["imports"]
    assert basic["module"] == "Demo.Basic" and basic["uri"] == (demo_root / "Demo" / "Basic.lean").as_uri()
    assert basic["kind"]["isPrivate"] is False
    rows = [
        (e["name"], e["kind"], e["modifiers"], e["container"], e["signature"], e.get("docstring"))
        for e in found["declarations"]
    ]
    assert rows == [
        ("idProof", "theorem", ["private"], [], "idProof (p : Prop) (hp : p) : p", "The identity proof."),
        ("Foo", "namespace", [], [], None, None),
        ("three", "def", ["noncomputable"], ["Foo"], "Foo.three (n : MyNat) : MyNat", None),
        ("example", "example", [], ["Foo"], "Foo._example : MyTrue", None),
        ("<section>", "section", [], [], None, None),
        ("inSec", "theorem", [], ["<section>"], "inSec (q : Prop) (hq : q) : q", None),
    ]
    idproof = found["declarations"][0]
    assert idproof["range"]["start"] == {"line": 3, "character": 0}, "the range includes the docstring"
    assert idproof["selection_range"] == _rng(4, 16, 23)


async def test_an_unchanged_version_s_outline_is_answered_again_without_asking_lean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": SOURCE})
    asked = spy(monkeypatch, "document_symbols", "hover")
    async with open_broker({"hover": HOVERS}) as broker:
        await call(broker, "update", root, path="A.lean")
        first = await call(broker, "outline", root, path="A.lean", version=1)
        again = await call(broker, "outline", root, path="A.lean", version=1)
        once = list(asked)
        (root / "A.lean").write_text(SOURCE + "\ndef three := two\n", encoding="utf-8")
        await call(broker, "update", root, path="A.lean")
        changed = await call(broker, "outline", root, path="A.lean", version=2)
    assert again == first and once == [("document_symbols", "A.lean"), ("hover", "A.lean"), ("hover", "A.lean")]
    assert [d["name"] for d in changed["declarations"]] == ["two", "helper", "three"]
    assert len(asked) == 2 * len(once) + 1, "a new version asks Lean again"
