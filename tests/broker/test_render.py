"""Printing for `lean-beam`: JSON on stdout, events as short lines on stderr, and streams that cannot encode."""

from __future__ import annotations

import io

from beam_broker import DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent
from beam_broker._render import EventPrinter, print_json


def ascii_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")


def text_of(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("ascii")


def test_event_lines_are_short_and_diagnostics_use_one_based_positions() -> None:
    sink = io.StringIO()
    printer = EventPrinter(sink)
    printer(PreparationEvent("lean_sync on A.lean: preparing the Lean workspace", "A.lean"))
    printer(SetupEvent("✔ [2/3] Built Demo.Basic", "A.lean"))
    for _ in range(2):
        printer(FileProgressEvent("A.lean", {"updates": 1, "done": False, "range_start_line": 2, "range_end_line": 5}))
    printer(FileProgressEvent("A.lean", {"updates": 2, "done": False, "range_start_line": 7, "range_end_line": 7}))
    printer(FileProgressEvent("A.lean", {"updates": 2, "done": False}))
    printer(FileProgressEvent("A.lean", {"updates": 3, "done": True}))
    item = {"path": "A.lean", "severity": "error", "range": {"start": {"line": 3, "character": 20}}, "message": "a\nb"}
    printer(DiagnosticEvent(item))
    printer(DiagnosticEvent({}))
    assert sink.getvalue().splitlines() == [
        "beam: lean_sync on A.lean: preparing the Lean workspace",
        "beam: setup: ✔ [2/3] Built Demo.Basic",
        "beam: A.lean: elaborating lines 2-5",
        "beam: A.lean: elaborating line 7",
        "beam: A.lean: elaborated",
        "A.lean:4:21: error: a",
        "  b",
        "?:1:1: unknown: ",
    ]
    quiet = io.StringIO()
    EventPrinter(quiet, quiet=True)(DiagnosticEvent(item))
    assert quiet.getvalue() == ""


def test_a_stream_that_cannot_encode_gets_escapes() -> None:
    events = ascii_stream()
    EventPrinter(events)(SetupEvent("✔ built", None))
    assert text_of(events) == "beam: setup: \\u2714 built\n"
    out = ascii_stream()
    print_json({"goal": "⊢ p"}, compact=True, stream=out)
    assert text_of(out) == '{"goal":"\\u22a2 p"}\n'


def test_json_is_pretty_unless_compact() -> None:
    out = io.StringIO()
    print_json({"a": [1]}, compact=False, stream=out)
    assert out.getvalue() == '{\n  "a": [\n    1\n  ]\n}\n'
