"""Scratch runs: a standalone text checked in a workspace, in a private document that is never on disk.

The fake lane scripts what Lean says of the scratch mirror (`_beamScratch_beamProbe<k>.lean`) and checks the
answer (every message with its range in the text, success), the size bound, the mirror's lifecycle (never a
document, never on disk, never reported to diagnostics listeners, closed when idle). The real lane runs Lean 4.35
on prelude snippets that import the demo project's modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import Broker
from beam_broker import errors as codes
from beam_broker._mirrors import SCRATCH, is_mirror_path

from .support import call, error_of, fake_project, open_broker

pytestmark = pytest.mark.anyio
MIRROR = "_beamScratch_beamProbe1.lean"


def line_range(line: int, start: int, end: int) -> dict[str, Any]:
    return {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}}


# ---- fake lane ------------------------------------------------------------------------------------------
async def test_every_message_comes_back_with_its_range_in_the_text(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})
    said = [
        {"line": 1, "message": "x : Nat", "severity": 3},
        {"line": 2, "message": "unused variable `y`", "severity": 2},
    ]
    heard: list[str] = []
    async with open_broker({"diagnostics": {MIRROR: said}}) as broker:
        broker.add_diagnostics_listener(heard.append)
        result = await call(broker, "run_code", root, text="import A\n#check x\ndef z (y : Nat) := 2")
        assert broker.open_documents() == []
    assert result == {
        "workspace": {"root": str(root)},
        "success": True,
        "messages": [
            {"severity": "information", "text": "x : Nat", "range": line_range(1, 0, 8)},
            {"severity": "warning", "text": "unused variable `y`", "range": line_range(2, 0, 20)},
        ],
    }
    assert not [path for path in heard if "_beamScratch" in path], "the scratch never reaches the listeners"
    assert not list(root.rglob("_beamScratch*")), "nothing is written to the project"


async def test_an_error_or_a_stale_import_makes_the_run_unsuccessful(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj")
    stale = [{"line": 0, "message": "Imports are out of date and should be rebuilt", "severity": 3}]
    async with open_broker() as broker:
        failed = await call(broker, "run_code", root, text="def e := ERROR_HERE\n")
    async with open_broker({"diagnostics": {MIRROR: stale}}) as broker:
        blocked = await call(broker, "run_code", root, text="import A\n")
    assert failed["success"] is False
    assert failed["messages"] == [
        {"severity": "error", "text": "unknown identifier 'ERROR_HERE'", "range": line_range(0, 9, 19)}
    ]
    assert blocked["success"] is False and blocked["messages"][0]["severity"] == "error"


async def test_a_text_lean_did_not_finish_is_reported_as_such(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj")
    async with open_broker({"worker_crash_on": {"method": "textDocument/waitForDiagnostics", "times": 2}}) as broker:
        result = await call(broker, "run_code", root, text="def e := 1\n")
    assert result["success"] is False
    assert result["messages"][-1] == {
        "severity": "error",
        "text": "Lean did not finish elaborating the text",
        "range": line_range(0, 0, 0),
    }


async def test_a_text_over_the_source_size_limit_is_refused_before_lean_sees_it(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj")
    async with open_broker(max_source_bytes=64) as broker:
        fits = await call(broker, "run_code", root, text="-- " + "é" * 30 + "\n")  # 64 bytes
        err = await error_of(broker, "run_code", root, text="-- " + "é" * 31 + "\n")
        runtime = broker.cached(str(root))
        assert runtime is not None
        assert list(runtime.pools) == [(root / SCRATCH).as_uri()]
    assert fits["success"] is True
    assert err.code == codes.INVALID_PARAMS and err.data == {"reason": "sourceTooLarge", "limitBytes": 64}
    assert "66 bytes" in err.message


async def test_the_scratch_mirror_is_closed_when_idle_and_never_on_disk(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj")
    async with open_broker(mirror_idle_seconds=0.05) as broker:
        await call(broker, "run_code", root, text="def e := 1\n")
        runtime = broker.cached(str(root))
        assert runtime is not None
        client = await runtime.client()
        [mirror] = runtime.pools[(root / SCRATCH).as_uri()].mirrors
        assert is_mirror_path(mirror.uri) and client.is_open(mirror.uri)
        assert not Path(mirror.uri.removeprefix("file://")).exists()
        closed = anyio.Event()
        runtime.cache.add_listener(lambda path: closed.set() if not client.is_open(mirror.uri) else None)
        with anyio.fail_after(10):
            await closed.wait()
        assert runtime.pools[(root / SCRATCH).as_uri()].mirrors == []


@pytest.mark.parametrize("warm", [True, False])
async def test_warm_scratch_opens_the_scratch_with_the_first_documents_imports_and_run_code_keeps_it(
    tmp_path: Path, warm: bool
) -> None:
    # lean-lsp-mcp's drop-in sets warm_scratch: a run_code text importing what the project's files import finds
    # its worker started (a change of an open document keeps the worker; a new header is a new one).
    header = "import A\n"
    root = fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n", "B.lean": header + "def y := x\n"})
    async with open_broker(warm_scratch=warm) as broker:
        await call(broker, "update", root, path="B.lean")
        await anyio.wait_all_tasks_blocked()  # the background start, if any, has sent its didOpen
        runtime = broker.cached(str(root))
        assert runtime is not None
        pool = runtime.pools.get((root / SCRATCH).as_uri())
        if not warm:
            assert pool is None
            return
        assert pool is not None
        [mirror] = pool.mirrors
        client = await runtime.client()
        assert client.is_open(mirror.uri) and mirror.text == header and mirror.writes == 1
        result = await call(broker, "run_code", root, text=header + "#check x\n")
        assert result["success"] is True
        assert pool.mirrors == [mirror] and mirror.header == header and mirror.writes == 2


async def test_a_text_that_is_not_a_string_or_has_company_is_refused(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "proj")
    async with open_broker() as broker:
        number = await error_of(broker, "run_code", root, text=3)
        extra = await error_of(broker, "run_code", root, text="def e := 1", path="A.lean")
    assert number.code == extra.code == codes.INVALID_INPUT and extra.data == {"fields": ["path"]}


# ---- real Lean lane -----------------------------------------------------------------------------------
SNIPPET = """\
prelude
import Demo.Basic
#check myTrue
#print MyNat.one
def x : MyNat := MyNat.one
#check x
#print axioms myTrue
"""


@pytest.mark.lean
async def test_real_lean_checks_a_snippet_with_the_workspace_s_imports_and_writes_nothing(
    broker: Broker, demo_root: Path
) -> None:
    before = sorted(p.relative_to(demo_root) for p in demo_root.rglob("*"))
    result = await call(broker, "run_code", demo_root, text=SNIPPET)
    assert result["success"] is True, [(m["severity"], m["text"]) for m in result["messages"]]
    assert [(m["severity"], m["text"], m["range"]["start"]["line"]) for m in result["messages"]] == [
        ("information", "myTrue : MyTrue", 2),
        ("information", "def MyNat.one : MyNat :=\nMyNat.zero.succ", 3),
        ("information", "x : MyNat", 5),
        ("information", "'myTrue' does not depend on any axioms", 6),
    ]
    again = await call(broker, "run_code", demo_root, text="prelude\nimport Demo.Basic\n#check x\n#eval myTrue\n")
    assert again["success"] is False, "each run is on its own: x is gone"
    errors = [(m["range"]["start"]["line"], m["text"]) for m in again["messages"] if m["severity"] == "error"]
    assert errors[0] == (2, "Unknown identifier `x`") and errors[1][0] == 3, errors
    assert sorted(p.relative_to(demo_root) for p in demo_root.rglob("*")) == before, "nothing is written"
    assert broker.open_documents() == []
