"""beam_lsp.lean: Lean's extension models and the severity labels every package uses."""

from __future__ import annotations

from typing import Any

import pytest

from beam_lsp import DiagnosticSeverity, LeanDiagnostic, LeanFileProgressParams, LeanTag, Position, severity_label
from beam_lsp.lean import LeanFileProgressKind, PublishDiagnosticsParams


@pytest.mark.parametrize(
    ("severity", "label"),
    [
        (DiagnosticSeverity.ERROR, "error"),
        (DiagnosticSeverity.WARNING, "warning"),
        (DiagnosticSeverity.INFORMATION, "information"),
        (DiagnosticSeverity.HINT, "hint"),
    ],
)
def test_each_severity_has_its_wire_label(severity: DiagnosticSeverity, label: str) -> None:
    assert severity.label == label
    assert severity_label(int(severity)) == label


@pytest.mark.parametrize("value", [None, 0, 5, -1])
def test_a_missing_or_unknown_severity_is_labelled_unknown(value: int | None) -> None:
    assert severity_label(value) == "unknown"


def _diag(**extra: Any) -> dict[str, Any]:
    rng = {"start": {"line": 1, "character": 2}, "end": {"line": 1, "character": 5}}
    return {"range": rng, "message": "m", **extra}


def test_unknown_fields_from_lean_survive_the_round_trip() -> None:
    raw = _diag(severity=1, fullRange=_diag()["range"], leanTags=[LeanTag.UNSOLVED_GOALS], futureField={"x": [1]})
    diagnostic = LeanDiagnostic.model_validate(raw)
    assert diagnostic.wire() == raw
    assert diagnostic.fullRange is not None and diagnostic.fullRange.start == Position(line=1, character=2)


def test_only_visible_errors_are_errors() -> None:
    assert LeanDiagnostic.model_validate(_diag(severity=1)).is_error
    assert not LeanDiagnostic.model_validate(_diag(severity=1, isSilent=True)).is_error
    assert not LeanDiagnostic.model_validate(_diag(severity=2)).is_error
    assert not LeanDiagnostic.model_validate(_diag()).is_error


def test_absent_fields_are_omitted_on_the_wire() -> None:
    assert LeanDiagnostic.model_validate(_diag()).wire() == _diag()


def test_file_progress_is_fatal_only_with_a_fatal_range() -> None:
    rng = _diag()["range"]

    def progress(*kinds: int) -> LeanFileProgressParams:
        processing = [{"range": rng, "kind": kind} for kind in kinds]
        doc = {"uri": "file:///a.lean", "version": 3}
        return LeanFileProgressParams.model_validate({"textDocument": doc, "processing": processing})

    assert not progress().fatal and not progress(LeanFileProgressKind.PROCESSING).fatal
    assert progress(LeanFileProgressKind.PROCESSING, LeanFileProgressKind.FATAL_ERROR).fatal
    assert progress().textDocument.version == 3


def test_publish_params_validate_their_diagnostics() -> None:
    params = PublishDiagnosticsParams.model_validate({"uri": "file:///a.lean", "version": 2, "diagnostics": [_diag()]})
    assert params.diagnostics[0].message == "m" and params.version == 2


def test_positions_are_never_negative() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Position(line=-1, character=0)
