"""Verdicts from Lean's diagnostics and progress: severities, counts, readiness, scope, setup lines, progress."""

from __future__ import annotations

from beam_broker import _verdict as verdict
from beam_lsp import LeanDiagnostic, LeanFileProgressParams


def diag(message: str, severity: int | None = 1, **kw: object) -> LeanDiagnostic:
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
    return LeanDiagnostic.model_validate({"range": rng, "message": message, "severity": severity, **kw})


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
    assert blocked.blocking_diagnostics[0].message == "bad" and blocked.blocking_diagnostics[0].save_blocking
    failed = verdict.readiness([], elaborated=False)
    assert (failed.save_ready, failed.reason, failed.blocking_error_count) == (
        False,
        "documentDidNotElaborateSuccessfully",
        1,
    )


def test_the_save_blocked_message_previews_three_errors_one_based() -> None:
    ready = verdict.readiness([diag(f"e{i}") for i in range(5)], elaborated=True)
    message = verdict.save_blocked_message(ready)
    assert message.startswith("cannot save artifacts for a document with errors; diagnostics: 1:1: e0 | 1:1: e1")
    assert message.endswith("(and 2 more)")


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
            LeanFileProgressParams.model_validate(
                {"textDocument": {"uri": uri, "version": 1}, "processing": processing}
            )
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
