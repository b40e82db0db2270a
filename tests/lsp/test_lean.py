"""beam_lsp.lean: Lean's extension models and the severity labels every package uses."""

from __future__ import annotations

from typing import Any

import pytest

from beam_lsp import (
    CodeWithInfos,
    DiagnosticSeverity,
    InteractiveMessage,
    LeanDiagnostic,
    LeanFileProgressParams,
    LeanTag,
    ModelError,
    Position,
    Range,
    RpcRef,
    severity_label,
)
from beam_lsp.lean import LeanFileProgressKind, PublishDiagnosticsParams

RNG = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}


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
    diagnostic = LeanDiagnostic.from_json(raw)
    assert diagnostic.wire() == raw
    assert diagnostic.fullRange is not None and diagnostic.fullRange.start == Position(line=1, character=2)


def test_only_visible_errors_are_errors() -> None:
    assert LeanDiagnostic.from_json(_diag(severity=1)).is_error
    assert not LeanDiagnostic.from_json(_diag(severity=1, isSilent=True)).is_error
    assert not LeanDiagnostic.from_json(_diag(severity=2)).is_error
    assert not LeanDiagnostic.from_json(_diag()).is_error


def test_absent_fields_are_omitted_on_the_wire() -> None:
    assert LeanDiagnostic.from_json(_diag()).wire() == _diag()


def test_file_progress_is_fatal_only_with_a_fatal_range() -> None:
    rng = _diag()["range"]

    def progress(*kinds: int) -> LeanFileProgressParams:
        processing = [{"range": rng, "kind": kind} for kind in kinds]
        doc = {"uri": "file:///a.lean", "version": 3}
        return LeanFileProgressParams.from_json({"textDocument": doc, "processing": processing})

    assert not progress().fatal and not progress(LeanFileProgressKind.PROCESSING).fatal
    assert progress(LeanFileProgressKind.PROCESSING, LeanFileProgressKind.FATAL_ERROR).fatal
    assert progress().textDocument.version == 3


def test_publish_params_validate_their_diagnostics() -> None:
    params = PublishDiagnosticsParams.from_json({"uri": "file:///a.lean", "version": 2, "diagnostics": [_diag()]})
    assert params.diagnostics[0].message == "m" and params.version == 2


def test_positions_are_never_negative() -> None:
    with pytest.raises(ValueError, match="natural number"):
        Position(line=-1, character=0)
    with pytest.raises(ModelError, match=r"^end: character must be a natural number"):
        Range.from_json({"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": -2}})


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"message": "m"}, "LeanDiagnostic: missing 'range'"),
        (
            {"range": {"start": {"line": 0, "character": "1"}, "end": {"line": 0, "character": 1}}, "message": "m"},
            "range.start.character: expected an int, got str",
        ),
        (
            {"range": {"start": {"line": True, "character": 0}, "end": {"line": 0, "character": 1}}, "message": "m"},
            "range.start.line: expected an int, got bool",
        ),
        ({"range": RNG, "message": None}, "message: expected a string, got null"),
        ({"range": RNG, "message": "m", "leanTags": [1, "x"]}, "leanTags[1]: expected an int, got str"),
        ({"range": RNG, "message": "m", "code": 1.5}, "code: expected"),
        ([1], "value: expected a LeanDiagnostic object, got list"),
    ],
)
def test_a_value_of_the_wrong_shape_is_a_model_error_naming_where(raw: object, where: str) -> None:
    with pytest.raises(ModelError) as info:
        LeanDiagnostic.from_json(raw)
    assert str(info.value).startswith(where)


def test_models_are_frozen_compared_by_value_and_written_back_as_lean_wrote_them() -> None:
    raw = {"range": RNG, "message": "m", "severity": 2, "leanTags": [1], "data": {"k": [None, 1.5]}, "new": {"x": 1}}
    diagnostic = LeanDiagnostic.from_json(raw)
    assert diagnostic.leanTags == (1,) and diagnostic.extra == {"new": {"x": 1}}
    assert diagnostic == LeanDiagnostic.from_json(raw) and diagnostic != LeanDiagnostic.from_json({**raw, "new": 2})
    assert diagnostic.wire() == raw
    with pytest.raises(AttributeError):
        diagnostic.message = "other"  # type: ignore[misc]
    assert Position(line=1, character=2) == Position.from_json({"line": 1, "character": 2})
    assert hash(Position(line=1, character=2)) == hash(Position(line=1, character=2))


def test_rich_text_renders_plain_however_deep_it_nests() -> None:
    deep: dict[str, object] = {"text": "x"}
    for _ in range(250):  # as deep as strict JSON allows (512 levels, two per node)
        deep = {"append": [{"text": "<"}, deep]}
    message = InteractiveMessage.from_json(deep)
    assert message.plain == "<" * 250 + "x"
    tagged = CodeWithInfos.from_json({"tag": [{"info": {"p": "1"}, "subexprPos": "/"}, {"text": "Nat"}]})
    assert tagged.plain == "Nat" and tagged.tag is not None and tagged.tag[0].info == RpcRef(p="1")
