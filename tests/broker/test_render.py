"""Printing for `lean-beam`: JSON, progress events as plain lines, diagnostics as Lean prints them."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path

from beam_broker import FileProgressEvent, PreparationEvent, SetupEvent
from beam_broker._cli.render import (
    Sources,
    diagnostic_key,
    diagnostic_line,
    display,
    print_json,
    progress_line,
    severity_word,
    write_text,
)
from tests.support.projects import fake_project


def ascii_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")


def text_of(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("ascii")


def test_progress_events_become_short_plain_lines() -> None:
    def line(event: object) -> str | None:
        return progress_line(event)  # type: ignore[arg-type]

    prepared = PreparationEvent(
        "lean_sync on A.lean: preparing the Lean workspace", "A.lean", "preparing the Lean workspace"
    )
    assert line(prepared) == "beam: A.lean: preparing the Lean workspace"  # a person reads no MCP tool name
    assert line(dataclasses.replace(prepared, path=None)) == "beam: preparing the Lean workspace"
    older = PreparationEvent("lean_sync on A.lean: preparing the Lean workspace", "A.lean")  # from an older daemon
    assert line(older) == "beam: lean_sync on A.lean: preparing the Lean workspace"
    assert line(SetupEvent("✔ [2/3] Built Demo.Basic", "A.lean")) == "beam: setup: ✔ [2/3] Built Demo.Basic"
    progress = {"updates": 1, "done": False, "range_start_line": 2, "range_end_line": 5}
    assert line(FileProgressEvent("A.lean", progress)) == "beam: A.lean: elaborating lines 2-5"
    progress = {"updates": 2, "done": False, "range_start_line": 7, "range_end_line": 7}
    assert line(FileProgressEvent("A.lean", progress)) == "beam: A.lean: elaborating line 7"
    assert line(FileProgressEvent("A.lean", {"updates": 2, "done": False})) is None
    assert line(FileProgressEvent("A.lean", {"updates": 3, "done": True})) == "beam: A.lean: elaborated"


def test_diagnostics_print_as_lean_does_line_from_1_column_from_0_in_code_points(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "prelude\n/- 𝔸𝔹 é -/ def u : MyTrue := MyNat.zero\n"})
    sources = Sources(str(root))
    # Lean 4.35 prints this error of the file as `A.lean:2:29: error: ...`: LSP puts it at UTF-16 character 31.
    item = {
        "path": "A.lean",
        "severity": "error",
        "range": {"start": {"line": 1, "character": 31}},
        "message": "Type mismatch\n  MyNat.zero\nhas type",
    }
    assert diagnostic_line(item, sources) == "A.lean:2:29: error: Type mismatch\n  MyNat.zero\nhas type"
    # Without the project's files the diagnostic's own file gives the line (the column was printed unconverted).
    with_uri = {**item, "uri": (root / "A.lean").as_uri()}
    assert diagnostic_line(with_uri, None) == "A.lean:2:29: error: Type mismatch\n  MyNat.zero\nhas type"
    assert diagnostic_line(item, None) == "A.lean:2:31: error: Type mismatch\n  MyNat.zero\nhas type"  # no text
    info = {**item, "severity": "information", "message": "two : MyNat"}
    assert diagnostic_line(info, sources) == "A.lean:2:29: info: two : MyNat"
    assert diagnostic_line({}, None) == "?:1:0: unknown: "
    missing = {"path": "Gone.lean", "severity": "warning", "range": {"start": {"line": 4, "character": 3}}}
    assert diagnostic_line(missing, sources) == "Gone.lean:5:3: warning: "  # no text: the column as it is
    assert severity_word("information") == "info" and severity_word("hint") == "hint"
    # Lean's error names are kept, as `lean` prints them.
    named = {**item, "code": "lean.unknownIdentifier", "message": "Unknown identifier `x`"}
    assert diagnostic_line(named, sources) == "A.lean:2:29: error(lean.unknownIdentifier): Unknown identifier `x`"
    assert diagnostic_key(item) == diagnostic_key({**item, "version": 3, "uri": "file:///x"})
    assert diagnostic_key(item) == diagnostic_key({**item, "message": "Type mismatch"})  # a save's blocking line
    assert diagnostic_key(item) != diagnostic_key({**item, "range": {"start": {"line": 1, "character": 0}}})


def test_sources_read_project_files_and_file_uris_once(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": "x\n"})
    sources = Sources(str(root))
    assert sources.file("A.lean") == root / "A.lean"
    assert sources.file(f"file://{root}/A%20B.lean") == root / "A B.lean"
    first = sources.get("A.lean")
    (root / "A.lean").write_text("changed\n", encoding="utf-8")
    assert sources.get("A.lean") is first and first is not None and first.lines == ("x", "")
    assert sources.get("Missing.lean") is None
    assert sources.where("A.lean", {"line": 0, "character": 1}) == "A.lean:1:1"
    assert sources.where("A.lean", None) == "A.lean:1:0"
    assert display(f"file://{root}/A.lean") == f"{root}/A.lean"


def test_a_stream_that_cannot_encode_gets_escapes() -> None:
    events = ascii_stream()
    write_text(events, "beam: setup: ✔ built\n")
    assert text_of(events) == "beam: setup: \\u2714 built\n"
    out = ascii_stream()
    print_json({"goal": "⊢ p"}, compact=True, stream=out)
    assert text_of(out) == '{"goal":"\\u22a2 p"}\n'


def test_json_is_pretty_unless_compact() -> None:
    out = io.StringIO()
    print_json({"a": [1]}, compact=False, stream=out)
    assert out.getvalue() == '{\n  "a": [\n    1\n  ]\n}\n'


_WRITE_BIG_JSON = """
import sys
from beam_broker._cli.render import print_json
try:
    print_json({"items": ["x" * 100] * 20_000}, compact=False)  # 2 MB; the pipe holds 64 KiB
except BrokenPipeError:
    sys.exit(141)
"""


def test_json_into_a_pipe_whose_reader_leaves_midway_raises_broken_pipe() -> None:
    # Finding: `lean-beam --json ... | head` exited 0: the reader left during one large write, the pipe took part
    # of it, and Python's buffered writer reported success for the whole.
    with subprocess.Popen([sys.executable, "-c", _WRITE_BIG_JSON], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"{\n"  # the write has started
        proc.stdout.close()
        assert proc.wait(timeout=60) == 141
