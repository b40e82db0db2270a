"""Report input validation and the result shape (mirrors beam_feedback/models.py and parsing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beam_feedback import (
    INVALID_INPUT,
    REPORT_SCHEMA,
    FeedbackReport,
    FeedbackResult,
    InvalidReportError,
    ReportMetadata,
    WorkspaceRef,
    load_report,
    parse_report,
)
from tests.feedback.helpers import minimal_input


def _error(data: object) -> InvalidReportError:
    with pytest.raises(InvalidReportError) as caught:
        parse_report(data)  # type: ignore[arg-type]
    assert caught.value.code == INVALID_INPUT
    return caught.value


def test_a_minimal_report_gets_the_documented_defaults() -> None:
    report = parse_report(minimal_input())
    assert report.kind is None
    assert report.severity is None
    assert report.tags == []
    assert report.evidence == []
    assert report.bundle == "none"
    assert report.redact is True
    assert report.confidential is False
    assert report.include_collected is False
    assert report.workspace is None


def test_a_misspelled_field_is_rejected_by_name() -> None:
    error = _error(minimal_input(confidental=True, extra=1))
    assert error.message == "feedback input accepts no undeclared fields: confidental, extra"


def test_a_missing_required_field_is_named() -> None:
    data = minimal_input()
    del data["title"]
    assert _error(data).message == "missing required string field 'title'"


def test_a_blank_required_field_is_rejected() -> None:
    assert _error(minimal_input(actual="   ")).message == "required string field 'actual' is empty"


def test_a_wrongly_typed_field_is_rejected_without_coercion() -> None:
    assert _error(minimal_input(title=5)).message.startswith("title:")
    assert _error(minimal_input(redact="false")).message.startswith("redact:")


def test_an_unknown_kind_is_rejected() -> None:
    assert _error(minimal_input(kind="feature")).message.startswith("kind:")


def test_confidential_without_redaction_is_rejected() -> None:
    error = _error(minimal_input(confidential=True, redact=False))
    assert error.message == "'confidential' requires redaction; remove 'redact': false"


def test_request_and_response_must_be_objects() -> None:
    assert _error(minimal_input(request=[1, 2])).message.startswith("request:")
    assert parse_report(minimal_input(response={"a": [1, {"b": None}]})).response == {"a": [1, {"b": None}]}


def test_blank_tags_are_dropped_and_the_rest_trimmed() -> None:
    assert parse_report(minimal_input(tags=[" perf ", "", "  ", "lsp"])).tags == ["perf", "lsp"]


def test_evidence_needs_exactly_one_source() -> None:
    both = _error(minimal_input(evidence=[{"name": "a.txt", "content": "x", "path": "a.txt"}]))
    assert both.message == "evidence[0]: evidence 'a.txt' needs exactly one of 'content' or 'path'"
    neither = _error(minimal_input(evidence=[{"name": "a.txt"}]))
    assert "needs exactly one" in neither.message


def test_evidence_content_may_be_any_json_including_null() -> None:
    report = parse_report(minimal_input(evidence=[{"name": "n.json", "content": None}]))
    assert report.evidence[0].content is None


@pytest.mark.parametrize("name", ["a/b.txt", "a\\b.txt", "..", "x..y", ".", "", " "])
def test_evidence_names_must_be_simple_file_names(name: str) -> None:
    error = _error(minimal_input(evidence=[{"name": name, "content": "x"}]))
    assert error.message.startswith("evidence[0].name:")


def test_evidence_entries_are_closed() -> None:
    error = _error(minimal_input(evidence=[{"name": "a.txt", "content": "x", "mime": "text/plain"}]))
    assert error.message == "evidence[0] accepts no undeclared fields: mime"


def test_evidence_names_must_be_unique() -> None:
    entries = [{"name": "a.txt", "content": "x"}, {"name": "a.txt", "content": "y"}]
    assert _error(minimal_input(evidence=entries)).message == "evidence names must be unique: a.txt"


def test_several_problems_are_reported_together() -> None:
    data = minimal_input(kind="nope", typo=1)
    del data["summary"]
    message = _error(data).message
    assert message.startswith("feedback input accepts no undeclared fields: typo; ")
    assert "missing required string field 'summary'" in message
    assert "kind:" in message


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"title": "hover\x00"}, "title"),
        ({"tags": ["ok", "\ud800"]}, "tags[1]"),
        ({"evidence": [{"name": "a", "content": "x"}, {"name": "b\x00", "content": "y"}]}, "evidence[1].name"),
        ({"evidence": [{"name": "a", "content": {"k": ["\udfff"]}}]}, "evidence[0].content.k[0]"),
        ({"evidence": [{"name": "a", "path": "logs/\x00.log"}]}, "evidence[0].path"),
        ({"request": {"bad\x00key": 1}}, 'request["bad\\u0000key"]'),
        ({"workspace": {"root": "/proj\x00"}}, "workspace.root"),
    ],
)
def test_nul_characters_and_lone_surrogates_are_refused_naming_the_field(extra: dict[str, object], field: str) -> None:
    message = _error(minimal_input(**extra)).message
    assert message.startswith(f"feedback input field '{field}' ")
    assert ("NUL character" in message) != ("lone surrogate" in message)
    message.encode("utf-8")  # the message itself can always be sent


def test_escaped_nul_and_surrogates_in_json_text_are_refused_too() -> None:
    text = json.dumps(minimal_input(summary="\ud800", request={"a": "\x00"}))
    assert _error(text).message == "feedback input field 'summary' contains a lone surrogate (U+D800)"


def test_json_text_with_a_repeated_key_is_rejected() -> None:
    text = '{"title": "a", "title": "b", "summary": "s", "reproduction": "r", "expected": "e", "actual": "a"}'
    assert _error(text).message == "feedback input repeats the key 'title'"


def test_non_object_input_is_rejected() -> None:
    assert _error("[1, 2]").message == "feedback input must be a JSON object"
    assert _error([1, 2]).message == "feedback input must be a JSON object"


def test_invalid_json_and_toml_text_is_reported() -> None:
    assert _error("{not json").message.startswith("feedback input is not valid JSON")
    assert _error("title = ").message.startswith("feedback input is not valid TOML")


def test_toml_text_with_the_report_fields_is_accepted() -> None:
    text = """
title = "t"
summary = "s"
reproduction = "r"
expected = "e"
actual = "a"
kind = "perf"
tags = ["x"]

[request]
method = "hover"

[[evidence]]
name = "log.txt"
content = "line"
"""
    report = parse_report(text)
    assert report.kind == "perf"
    assert report.request == {"method": "hover"}
    assert report.evidence[0].content == "line"


def test_load_report_picks_the_format_from_the_suffix(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(json.dumps(minimal_input(kind="ux")), encoding="utf-8")
    (tmp_path / "r.toml").write_text(
        'title="t"\nsummary="s"\nreproduction="r"\nexpected="e"\nactual="a"\n', encoding="utf-8"
    )
    assert load_report(tmp_path / "r.json").kind == "ux"
    assert load_report(tmp_path / "r.toml").title == "t"


def test_an_unreadable_input_file_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidReportError, match="cannot read feedback input"):
        load_report(tmp_path / "missing.json")


def test_the_model_mirrors_the_mcp_tool_input_including_workspace() -> None:
    report = parse_report(minimal_input(workspace={"root": "/abs/proj"}, include_collected=True))
    assert report.workspace == WorkspaceRef(root="/abs/proj")
    assert set(FeedbackReport.model_fields) == {
        "title",
        "summary",
        "reproduction",
        "expected",
        "actual",
        "kind",
        "severity",
        "impact",
        "workaround",
        "tags",
        "client_request_id",
        "request",
        "response",
        "evidence",
        "bundle",
        "redact",
        "confidential",
        "include_collected",
        "workspace",
    }


def test_result_json_omits_absent_optional_members_but_keeps_metadata_nulls() -> None:
    metadata = ReportMetadata(
        title="t",
        kind=None,
        severity=None,
        generated_at="2024-01-02T03:04:05Z",
        active_root=None,
        tags=[],
        bundle="none",
        redacted=True,
        confidential=True,
        client_request_id=None,
    )
    result = FeedbackResult(markdown="# t\n", metadata=metadata, collection_warnings=[])
    assert result.to_json() == {
        "markdown": "# t\n",
        "metadata": {
            "schema": REPORT_SCHEMA,
            "title": "t",
            "kind": None,
            "severity": None,
            "generated_at": "2024-01-02T03:04:05Z",
            "active_root": None,
            "tags": [],
            "bundle": "none",
            "redacted": True,
            "confidential": True,
            "client_request_id": None,
        },
        "collection_warnings": [],
    }
