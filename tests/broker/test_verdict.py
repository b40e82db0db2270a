"""Verdicts from Lean's diagnostics and progress: severities, counts, readiness, scope, setup lines, progress."""

from __future__ import annotations

from typing import Any

from beam_broker import _verdict as verdict
from beam_lsp import LeanDiagnostic, LeanFileProgressParams, TextDocument


def diag(message: str, severity: int | None = 1, **kw: object) -> LeanDiagnostic:
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    return LeanDiagnostic.from_json({"range": rng, "message": message, "severity": severity, **kw})


def test_counts_use_effective_severity_and_silent_messages_are_dropped() -> None:
    diags = verdict.visible(
        [
            diag("e"),
            diag("w", 2),
            diag("i", 3),
            diag("h", 4),
            diag("?", 0),
            diag("Goals accomplished!", 3, isSilent=True),
            diag("Imports are out of date and should be rebuilt; use the Restart File command", 3),
        ]
    )
    c = verdict.counts(diags)
    assert (c.error, c.warning, c.information, c.hint, c.unknown, c.total) == (2, 1, 1, 1, 1, 6)
    assert verdict.effective_severity(diag("no severity", None)) == "unknown"


def test_readiness_blocks_on_errors_and_never_on_warnings() -> None:
    assert verdict.readiness([diag("w", 2)], elaborated=True).save_ready
    blocked = verdict.readiness([diag("bad\nmore"), diag("w", 2)], elaborated=True)
    assert (blocked.save_ready, blocked.reason, blocked.blocking_error_count) == (False, "documentErrors", 1)
    assert blocked.blocking_diagnostics[0].message == "bad\nmore" and blocked.blocking_diagnostics[0].save_blocking
    failed = verdict.readiness([], elaborated=False)
    assert (failed.save_ready, failed.reason, failed.blocking_error_count) == (
        False,
        "documentDidNotElaborateSuccessfully",
        1,
    )


def test_the_save_blocked_message_previews_three_errors_one_based() -> None:
    ready = verdict.readiness([diag(f"e{i}") for i in range(5)], elaborated=True)
    message = verdict.save_blocked_message(ready, TextDocument("file:///A.lean", "x\n", 1))
    assert message.startswith("cannot save artifacts for a document with errors; diagnostics: 1:1: e0 | 1:1: e1")
    assert message.endswith("(and 2 more)")


def test_the_save_blocked_message_counts_columns_in_code_points_as_lean_does() -> None:
    # `nope` is at UTF-16 character 21 (LSP) and code point 20 (Lean): 𝔸 is two UTF-16 units; 1-based: 1:21.
    text = TextDocument("file:///A.lean", "def x : Nat := /-𝔸-/ nope\n", 1)
    rng = {"start": {"line": 0, "character": 21}, "end": {"line": 0, "character": 25}}
    ready = verdict.readiness([diag("Unknown identifier `nope`", range=rng)], elaborated=True)
    message = verdict.save_blocked_message(ready, text)
    assert message.endswith("diagnostics: 1:21: Unknown identifier `nope`")


def test_lake_setup_lines_are_recognized_only_in_their_exact_shape() -> None:
    assert verdict.is_setup_line(diag("✔ [2/5] Built Demo.Basic", 3))
    assert not verdict.is_setup_line(diag("✔ [2/5] Built Demo.Basic", 1))
    assert not verdict.is_setup_line(diag("Built something", 3))


def test_the_errors_scope_prefers_completion_blocking_diagnostics() -> None:
    stale = diag("Imports are out of date and should be rebuilt", 3)
    err, warn = diag("e"), diag("w", 2)
    assert [verdict.in_scope(d, "errors", [err, warn]) for d in (err, warn)] == [True, False]
    assert [verdict.in_scope(d, "errors", [stale, err]) for d in (stale, err)] == [True, False]
    assert verdict.in_scope(warn, "all", [warn])


def test_items_carry_the_full_range_and_effective_severity() -> None:
    full = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 1}}
    item = verdict.item(diag("e", fullRange=full), path="A.lean", uri="file:///A.lean", version=2, save_blocking=True)
    assert item.dump() == {
        "path": "A.lean",
        "uri": "file:///A.lean",
        "severity": "error",
        "range": full,
        "message": "e",
        "completion_blocking": False,
        "save_blocking": True,
        "version": 2,
    }


def test_document_progress_uses_one_based_bounds_and_keeps_the_end_when_done() -> None:
    tracker = verdict.ProgressTracker()
    uri = "file:///x.lean"

    def feed(processing: list[dict[str, object]]) -> None:
        tracker.feed(
            LeanFileProgressParams.from_json({"textDocument": {"uri": uri, "version": 1}, "processing": processing})
        )

    def rng(a: int, b: int, c: int, d: int) -> dict[str, object]:
        return {"range": {"start": {"line": a, "character": b}, "end": {"line": c, "character": d}}, "kind": 1}

    feed([rng(0, 0, 1, 0)])
    assert tracker.snapshot().dump() == {"updates": 1, "done": False, "range_start_line": 1, "range_end_line": 1}
    feed([rng(4, 0, 9, 0), rng(2, 0, 3, 5)])
    assert (tracker.range_start_line, tracker.range_end_line) == (3, 9)
    copy = tracker.copy()
    feed([])
    assert tracker.snapshot().dump() == {"updates": 3, "done": True, "range_end_line": 9}
    assert copy.updates == 2 and not copy.done


def _event(version: int, *starts: int, fatal: bool = False) -> Any:
    from beam_lsp import ProgressEvent
    from beam_lsp._progress import FileProgress

    kind = 2 if fatal else 1
    rng = [{"start": {"line": s, "character": 0}, "end": {"line": 99, "character": 0}} for s in starts]
    params: dict[str, Any] = {"textDocument": {"uri": "file:///x.lean", "version": version}, "processing": []}
    params["processing"] = [{"range": r, "kind": kind} for r in rng]
    return ProgressEvent(FileProgress.from_params(params))


def test_a_tracker_streams_the_first_every_25th_and_the_final_report_and_reads_ranges_only_for_those() -> None:
    tracker = verdict.ProgressTracker()
    events = [_event(1, 10 + k) for k in range(60)]
    due = [k for k, e in enumerate(events) if tracker.track(e)]
    assert due == [0, 25, 50] and tracker.updates == 60
    read = [k for k, e in enumerate(events) if "params" in e.report.__dict__]
    assert read == due, "the ranges of a report are decoded only when it is streamed"
    assert (tracker.done, tracker.range_start_line, tracker.range_end_line) == (False, 61, 99)
    final = _event(1)
    assert tracker.track(final) and "params" not in final.report.__dict__  # done: no ranges to read
    assert tracker.snapshot().dump() == {"updates": 61, "done": True, "range_end_line": 99}
    copy = tracker.copy()
    assert copy.track(_event(2, 3)) and copy.range_start_line == 4, "a copy streams its first report afresh"


def test_a_fatal_report_is_always_streamed_with_its_range() -> None:
    tracker = verdict.ProgressTracker()
    assert tracker.track(_event(1, 5))
    assert not tracker.track(_event(1, 6))
    assert tracker.track(_event(1, 0, fatal=True))
    assert (tracker.done, tracker.range_start_line) == (False, 1)


def test_the_scope_filter_can_be_told_whether_any_diagnostic_is_completion_blocking() -> None:
    stale = diag("Imports are out of date and should be rebuilt", 3)
    error = diag("e")
    assert verdict.scoped(error, "errors", any_blocking=False)
    assert not verdict.scoped(error, "errors", any_blocking=True) and verdict.scoped(stale, "errors", any_blocking=True)
    assert verdict.scoped(diag("w", 2), "all", any_blocking=True)
    assert verdict.in_scope(error, "errors", [error, stale]) is False
