"""Mirrors are invisible (`_outbound`): what Lean says about probe mirrors never names one in an answer.

The rule on its own (location-like entries in a mirror dropped, a mirror's name in other text mapped to its
source's), then at the broker's boundary on the fake lane: probe messages, events, errors, hover text, the
diagnostics resource of a mirror's path, and log lines. The real lane (`test_invisible_real.py`) reproduces the
leaks with Lean's own watchdog.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from beam_broker import OPERATIONS, CallContext, DiagnosticEvent, FileProgressEvent, SetupEvent
from beam_broker import _lake as lake
from beam_broker import _outbound as outbound
from beam_broker._outbound import RedactingFormatter, log_failure
from beam_lsp import Redactor
from tests.support.every_operation import CALLS

from .support import call, error_of, fake_project, open_broker

pytestmark = pytest.mark.anyio

ROOT = "/w/demo"
SOURCE = f"file://{ROOT}/Demo/Proofs.lean"
MIRROR = f"file://{ROOT}/Demo/Proofs_beamProbe1.lean"
RANGE = {"start": {"line": 3, "character": 8}, "end": {"line": 3, "character": 14}}
SETUP = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}, "severity": 3}


def located(uri: str) -> dict[str, Any]:
    return {"uri": uri, "range": RANGE}


# ---- the rule -------------------------------------------------------------------------------------------
def test_a_mirror_name_in_text_becomes_its_sources_name_of_the_same_kind() -> None:
    said = (
        f"_private.«external:{MIRROR}».0.pv : MyTrue; in Demo.Proofs_beamProbe2.x, {MIRROR}, "
        "Demo/Proofs_beamProbe12.lean:4:2 and _private._beamScratch_beamProbe1.0.q"
    )
    assert outbound.text(said, ROOT) == (
        f"_private.Demo.Proofs.0.pv : MyTrue; in Demo.Proofs.x, {SOURCE}, "
        "Demo/Proofs.lean:4:2 and _private._beamScratch.0.q"
    )


def test_a_mirror_of_a_source_whose_stem_ends_in_a_name_character_that_is_no_word_character_is_mapped() -> None:
    said = "Demo/Foo'_beamProbe1.lean:2:0, Demo.Foo'_beamProbe1.x, Demo/Is?_beamProbe2.lean, Demo/Go!_beamProbe3.lean"
    assert outbound.text(said, ROOT) == "Demo/Foo'.lean:2:0, Demo.Foo'.x, Demo/Is?.lean, Demo/Go!.lean"


def test_without_a_root_or_outside_it_leans_external_name_keeps_its_form_with_the_sources_uri() -> None:
    external = f"_private.«external:{MIRROR}».0.pv"
    assert outbound.text(external) == f"_private.«external:{SOURCE}».0.pv"
    assert outbound.text(external, "/elsewhere") == f"_private.«external:{SOURCE}».0.pv"


def test_leans_external_name_of_a_mirror_becomes_the_module_under_the_lakefiles_src_dir(tmp_path: Path) -> None:
    """Lean names `src/Demo/Proofs.lean` `Demo.Proofs` when the lakefile says `srcDir = "src"`; the mirror's
    `«external:…»` name maps to that, not to `src.Demo.Proofs`, a module that does not exist."""
    (tmp_path / "lakefile.toml").write_text('name = "demo"\nsrcDir = "src"\n[[lean_lib]]\nname = "Demo"\n')
    mirror = f"file://{tmp_path}/src/Demo/Proofs_beamProbe1.lean"
    assert outbound.text(f"_private.«external:{mirror}».0.pv", str(tmp_path)) == "_private.Demo.Proofs.0.pv"
    scratch = f"file://{tmp_path}/_beamScratch_beamProbe1.lean"  # outside the source directory: no module
    assert (
        outbound.text(f"«external:{scratch}».x", str(tmp_path)) == f"«external:file://{tmp_path}/_beamScratch.lean».x"
    )


def test_text_without_a_mirror_is_returned_as_it_is() -> None:
    said = "x_beamProbe is a user's name; so is _beamProbe1 alone"
    assert outbound.text(said, ROOT) == said


def test_location_like_entries_in_a_mirror_are_dropped_and_the_rest_kept() -> None:
    result = [
        located(MIRROR),
        located(SOURCE),
        {"targetUri": MIRROR, "targetRange": RANGE, "targetSelectionRange": RANGE},
        {"name": "probeOnly", "kind": 14, "location": located(MIRROR)},
        {"name": "onlyUri", "kind": 14, "location": {"uri": MIRROR}},
        {"name": "byTerm", "kind": 14, "location": located(SOURCE)},
        {"textDocument": {"uri": MIRROR, "version": 2}, "edits": []},
        {"path": "Demo/Proofs_beamProbe1.lean", "needsSave": False},
    ]
    assert outbound.scrub({"result": result}, ROOT) == {
        "result": [located(SOURCE), {"name": "byTerm", "kind": 14, "location": located(SOURCE)}]
    }


def test_related_information_and_edits_keyed_by_a_mirror_are_dropped() -> None:
    diagnostic = {
        "message": "see Demo.Proofs_beamProbe1",
        "relatedInformation": [{"location": located(MIRROR), "message": "here"}],
    }
    edit = {"changes": {MIRROR: [{"range": RANGE, "newText": "x"}], SOURCE: []}}
    assert outbound.scrub([diagnostic, edit], ROOT) == [
        {"message": "see Demo.Proofs", "relatedInformation": []},
        {"changes": {SOURCE: []}},
    ]


def test_an_answer_without_a_mirror_is_the_same_object() -> None:
    answer = {"result": [located(SOURCE)], "messages": [{"text": "fine"}], "n": 3, "ok": True, "none": None}
    assert outbound.scrub(answer, ROOT) is answer


def test_events_are_mapped_dropped_or_passed_as_they_are() -> None:
    seen: list[Any] = []
    ctx = outbound.context(CallContext(emit=seen.append, request_id=7), ROOT)
    progress = FileProgressEvent("Demo/Proofs.lean", {"done": True})
    ctx.emit(progress)
    ctx.emit(SetupEvent("✔ [1/2] Built Demo.Proofs_beamProbe1", "Demo/Proofs_beamProbe1.lean"))
    ctx.emit(DiagnosticEvent({"uri": MIRROR, "path": "Demo/Proofs_beamProbe1.lean", "message": "x"}))
    assert ctx.request_id == 7
    assert seen == [progress, SetupEvent("✔ [1/2] Built Demo.Proofs", "Demo/Proofs.lean")]
    assert seen[0] is progress


def test_log_lines_and_failures_name_no_mirror(caplog: pytest.LogCaptureFixture) -> None:
    formatter = RedactingFormatter(Redactor(), "%(message)s")
    record = logging.LogRecord("beam_lsp", logging.ERROR, __file__, 1, "worker of %s crashed", (MIRROR,), None)
    assert formatter.format(record) == f"worker of {SOURCE} crashed"
    with caplog.at_level(logging.ERROR, logger="beam_broker"):
        try:
            raise RuntimeError(f"Lean said: Demo.Proofs_beamProbe1 in {MIRROR}")
        except RuntimeError as exc:
            log_failure(logging.getLogger("beam_broker"), Redactor(), exc, "probe of %s failed", MIRROR)
    assert caplog.text and "_beamProbe" not in caplog.text
    assert f"probe of {SOURCE} failed" in caplog.text and "Lean said: Demo.Proofs in" in caplog.text


def test_a_text_reads_the_lakefile_once_however_many_external_names_it_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each `«external:…»` name read and parsed the lakefile again; a workspace's layout follows its stat."""
    reads: list[str] = []
    real = lake.read_layout

    def counted(root: str | Path) -> lake.Layout:
        reads.append(str(root))
        return real(root)

    monkeypatch.setattr(lake, "read_layout", counted)
    (tmp_path / "lakefile.toml").write_text('name = "demo"\nsrcDir = "src"\n[[lean_lib]]\nname = "Demo"\n')
    mirror = f"file://{tmp_path}/src/Demo/Proofs_beamProbe1.lean"
    said = f"_private.«external:{mirror}».0.a, _private.«external:{mirror}».0.b, _private.«external:{mirror}».0.c"
    mapped = "_private.Demo.Proofs.0.a, _private.Demo.Proofs.0.b, _private.Demo.Proofs.0.c"
    assert outbound.text(said, str(tmp_path)) == mapped and len(reads) == 1
    layout = lake.Layouts(tmp_path).get
    assert outbound.text(said, layout) == mapped
    assert outbound.scrub([said, {"k": said}], layout) == [mapped, {"k": mapped}]
    assert len(reads) == 2  # one read for the workspace, until its lakefile changes
    (tmp_path / "lakefile.toml").write_text('name = "demo"\n[[lean_lib]]\nname = "Demo"\n')
    assert outbound.text(said, layout) == mapped.replace("Demo.Proofs", "src.Demo.Proofs") and len(reads) == 3


# ---- at the broker's boundary (fake lane) ---------------------------------------------------------------
def test_the_real_lane_table_gives_arguments_to_every_registry_operation() -> None:
    """`test_invisible_real` calls every operation: an operation added later must get a row there."""
    assert sorted(CALLS) == sorted(spec.name for spec in OPERATIONS)


async def test_probe_messages_name_the_source_and_never_its_mirror(tmp_path: Path) -> None:
    root = Path(os.path.realpath(fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n\ndef y := 2\n"})))
    mirror = f"file://{root}/A_beamProbe1.lean"
    said = [
        {**SETUP, "message": "✔ [1/2] Built A_beamProbe1"},
        {"line": 2, "message": f"private def _private.«external:{mirror}».0.q : Nat", "severity": 3},
        {"line": 2, "message": f"[Meta.debug] in A_beamProbe1 at {mirror}", "severity": 3},
    ]
    events: list[Any] = []
    async with open_broker({"diagnostics": {"_beamProbe1.lean": said}}) as broker:
        await call(broker, "update", root, path="A.lean")
        ctx = CallContext(emit=events.append)
        result = await call(broker, "run_at", root, ctx=ctx, path="A.lean", version=1, line=0, character=0, text="#x")
    assert result["messages"] == [{"severity": "information", "text": "private def _private.A.0.q : Nat"}]
    assert result["traces"] == [f"[Meta.debug] in A at file://{root}/A.lean"]
    assert SetupEvent("✔ [1/2] Built A", "A.lean") in events
    assert "_beamProbe" not in repr(events)


async def test_an_error_and_a_hover_naming_a_mirror_name_the_source(tmp_path: Path) -> None:
    root = Path(os.path.realpath(fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})))
    mirror = f"file://{root}/A_beamProbe1.lean"
    lean = {
        "errors": {"workspace/symbol": {"code": -32603, "message": f"no index for {mirror}", "data": {"uri": mirror}}},
        "hover": {"x": f"```lean\n_private.«external:{mirror}».0.x : Nat\n```"},
    }
    async with open_broker(lean) as broker:
        await call(broker, "update", root, path="A.lean")
        failed = await error_of(broker, "workspace_symbols", root, query="x")
        hover = await call(broker, "hover", root, path="A.lean", version=1, line=0, character=4)
    assert "_beamProbe" not in failed.message and f"{root}/A.lean" in failed.message
    assert "_beamProbe" not in repr(failed.data)
    assert hover["contents"]["value"] == "```lean\n_private.A.0.x : Nat\n```"


async def test_the_broker_reads_a_workspaces_lakefile_once_for_its_answers_external_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(os.path.realpath(fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})))
    mirror = f"file://{root}/A_beamProbe1.lean"
    named = f"_private.«external:{mirror}».0.x, _private.«external:{mirror}».0.y"
    async with open_broker({"hover": {"x": named}}) as b:
        await call(b, "update", root, path="A.lean")
        reads: list[str] = []
        real = lake.read_layout

        def counted(root: str | Path) -> lake.Layout:
            reads.append(str(root))
            return real(root)

        monkeypatch.setattr(lake, "read_layout", counted)
        for _ in range(3):
            hover = await call(b, "hover", root, path="A.lean", version=1, line=0, character=4)
            assert hover["contents"]["value"] == "_private.A.0.x, _private.A.0.y"
    assert len(reads) <= 1  # the runtime's layout: read when first needed, then only when its lakefile changes


async def test_a_mirrors_path_is_an_untracked_file_for_diagnostics_readers(tmp_path: Path) -> None:
    root = Path(os.path.realpath(fake_project(tmp_path / "proj", {"A.lean": "def x := 1\n"})))
    said = [{"line": 1, "message": "x : Nat", "severity": 3}]
    async with open_broker({"diagnostics": {"_beamProbe1.lean": said}}) as broker:
        await call(broker, "update", root, path="A.lean")
        await call(broker, "run_at", root, path="A.lean", version=1, line=0, character=0, text="#check x")
        mirror = broker.diagnostics(str(root / "A_beamProbe1.lean"))
        source = broker.diagnostics(str(root / "A.lean"))
        stats = broker.stats()
        snapshot = await broker.runtime_snapshot(str(root))
    assert mirror == {
        "path": str(root / "A_beamProbe1.lean"),
        "tracked": False,
        "availability": "pending",
        "diagnostics": [],
    }
    assert source["tracked"] is True
    assert "_beamProbe" not in repr(stats) + repr(snapshot)
