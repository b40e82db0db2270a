"""beam_lsp._progress: Lean's file progress reports, summarised at once and decoded only when their ranges are read."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from beam_lsp import LeanFileProgressParams, Position, Range
from beam_lsp._progress import FileProgress, compact_report

URI = "file:///p/Demo/Long%20File.lean"


def ranges(*lines: int, kind: int = 1) -> list[dict[str, Any]]:
    return [
        {"kind": kind, "range": {"end": {"character": 0, "line": n}, "start": {"character": 0, "line": n}}}
        for n in lines
    ]


def lean_body(processing: list[dict[str, Any]], version: int | None = 3, uri: str = URI) -> bytes:
    """A report serialised as Lean does: compact JSON with sorted keys."""
    document: dict[str, Any] = {"uri": uri} if version is None else {"uri": uri, "version": version}
    message = {
        "jsonrpc": "2.0",
        "method": "$/lean/fileProgress",
        "params": {"processing": processing, "textDocument": document},
    }
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_still_elaborating_report_in_lean_spelling_is_summarised_without_decoding_its_ranges() -> None:
    report = compact_report(lean_body(ranges(9, 12, 15)))
    assert report is not None
    assert (report.uri, report.version, report.done, report.fatal) == (URI, 3, False, False)
    assert "params" not in vars(report) and "processing" not in vars(report)  # nothing decoded yet
    assert [r.start.line for r in report.processing] == [9, 12, 15]
    assert report.params.textDocument.uri == URI and len(report.params.processing) == 3


@pytest.mark.parametrize(
    "body",
    [
        lean_body([]),  # done: always decoded at once
        lean_body(ranges(0, kind=2)),  # fatal: always decoded at once
        lean_body(ranges(1) + ranges(2, kind=2)),  # a fatal range anywhere
        lean_body(ranges(1), version=None),  # no version
        json.dumps({"jsonrpc": "2.0", "method": "$/lean/fileProgress", "params": {}}).encode(),  # other spelling
        b'{"jsonrpc":"2.0","method":"textDocument/publishDiagnostics","params":{}}',
        lean_body(ranges(1))[:-1],  # cut short
        lean_body(ranges(1)).replace(b'"uri":"', b'"uri":"\\x'),  # an invalid URI string
    ],
)
def test_anything_but_a_plain_still_elaborating_report_is_left_to_the_strict_decoder(body: bytes) -> None:
    assert compact_report(body) is None


def test_an_escaped_uri_is_decoded_like_json() -> None:
    report = compact_report(lean_body(ranges(1), uri='file:///p/"quoted"/ü.lean'))
    assert report is not None and report.uri == 'file:///p/"quoted"/ü.lean'


def test_a_deferred_report_whose_ranges_are_invalid_reads_as_processing_with_unknown_ranges(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = lean_body(ranges(4)).replace(b'"line":4', b'"line":"four"')
    report = compact_report(body)
    assert report is not None
    with caplog.at_level(logging.WARNING, logger="beam_lsp"):
        unknown = report.processing
    assert unknown == (Range(start=Position(line=0, character=0), end=Position(line=0, character=0)),)
    assert not report.done and "ranges are unknown" in caplog.text


def test_decoded_params_are_summarised_and_validated_lazily() -> None:
    params = {"processing": ranges(7), "textDocument": {"uri": URI, "version": 2}}
    report = FileProgress.from_params(params)
    assert (report.done, report.fatal, report.version) == (False, False, 2)
    assert report.processing[0].start.line == 7
    assert FileProgress.from_params({"processing": ranges(0, kind=2), "textDocument": {"uri": URI}}).fatal
    done = FileProgress.from_params({"processing": [], "textDocument": {"uri": URI, "version": 5}})
    assert done.done and done.processing == () and "done" in repr(done)


@pytest.mark.parametrize(
    "params",
    [
        None,
        {"processing": []},
        {"processing": [], "textDocument": {"uri": 1}},
        {"processing": [], "textDocument": {"uri": URI, "version": "2"}},
        {"processing": [], "textDocument": {"uri": URI, "version": True}},
        {"processing": {}, "textDocument": {"uri": URI}},
        {"processing": [1], "textDocument": {"uri": URI}},
    ],
)
def test_params_that_are_not_a_report_are_refused(params: Any) -> None:
    with pytest.raises(ValueError):
        FileProgress.from_params(params)


def test_a_report_from_a_model_keeps_the_model() -> None:
    model = LeanFileProgressParams.from_json(
        {"processing": ranges(1, kind=2), "textDocument": {"uri": URI, "version": 4}}
    )
    report = FileProgress.from_model(model)
    assert report.params is model and report.fatal and not report.done and "fatal" in repr(report)


def test_the_extent_of_a_compact_report_is_scanned_from_its_bytes_without_decoding_them() -> None:
    wide = {"kind": 1, "range": {"end": {"character": 4, "line": 40}, "start": {"character": 2, "line": 7}}}
    processing = [*ranges(9, 12), wide]
    report = compact_report(lean_body(processing))
    assert report is not None
    assert report.extent == Range(start=Position(line=7, character=2), end=Position(line=40, character=4))
    assert "params" not in vars(report), "the extent needs no decoding"
    decoded = FileProgress.from_params(json.loads(lean_body(processing))["params"])
    assert decoded.extent == report.extent


def test_a_report_whose_ranges_are_spelled_otherwise_gets_its_extent_from_the_decoded_ranges() -> None:
    spaced = lean_body(ranges(5, 3)).replace(
        b'"range":{"end":{"character":0,"line":3}', b'"range":{"end":{"line":3,"character":0}'
    )
    report = compact_report(spaced)
    assert report is not None
    assert report.extent == Range(start=Position(line=3, character=0), end=Position(line=5, character=0))
    assert "params" in vars(report)
    done = FileProgress.from_params({"textDocument": {"uri": URI, "version": 1}, "processing": []})
    assert done.extent is None
