"""Request-scoped notifications (`_notify`): the progress, `beam.status` and `lean.diagnostic` rules of one call.

The notifier is fed broker events directly here, in volumes and orders the fake Lean server does not produce
(many file-progress reports, many setup lines); `test_calls` checks the same rules end to end through the broker.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from beam_broker import DiagnosticEvent, FileProgressEvent, PreparationEvent, Progress, SetupEvent
from beam_mcp._jsonrpc import RequestId
from beam_mcp._notify import CallNotifier, file_progress_message, setup_message

EVERYTHING = Progress.PREPARATION | Progress.SETUP | Progress.FILE


def notifier(
    sent: list[dict[str, Any]],
    *,
    token: Any = None,
    kinds: Progress = EVERYTHING,
    level: str | None = "debug",
    status: bool = True,
    path: str | None = "A.lean",
) -> CallNotifier:
    return CallNotifier(
        send=lambda data: sent.append(json.loads(data)),
        tool="lean_sync",
        request_id=RequestId(("n", 4), 4),
        token=token,
        path=path,
        kinds=kinds,
        log_level=lambda: level,
        status=status,
    )


def messages(sent: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["message"] for m in sent if m["method"] == "notifications/progress"]


def test_progress_is_one_preparation_then_throttled_file_progress_with_one_done() -> None:
    sent: list[dict[str, Any]] = []
    n = notifier(sent, token=7)
    n.on_event(PreparationEvent("lean_sync on A.lean: preparing the Lean workspace", "A.lean"))
    n.on_event(PreparationEvent("lean_sync on A.lean: preparing again"))  # later ones are dropped
    for k in range(1, 61):
        progress = {"updates": k, "done": False, "range_start_line": 1, "range_end_line": k}
        n.on_event(FileProgressEvent("A.lean", progress))
    n.on_event(FileProgressEvent("A.lean", {"updates": 61, "done": True}))
    n.on_event(FileProgressEvent("A.lean", {"updates": 62, "done": True}))  # at most one terminal update
    assert [m["params"]["progress"] for m in sent] == list(range(1, len(sent) + 1))
    assert all(m["params"]["progressToken"] == 7 and "total" not in m["params"] for m in sent)
    assert messages(sent) == [
        "lean_sync on A.lean: preparing the Lean workspace",
        "lean_sync: processing A.lean (range=1..1 updates=1 done=false)",
        "lean_sync: processing A.lean (range=1..26 updates=26 done=false)",
        "lean_sync: processing A.lean (range=1..51 updates=51 done=false)",
        "lean_sync: processed A.lean (updates=61 done=true)",
    ]


def test_setup_lines_give_the_first_and_every_tenth_progress_update() -> None:
    sent: list[dict[str, Any]] = []
    n = notifier(sent, token="s")
    for k in range(1, 21):
        n.on_event(SetupEvent(f"  ✔ [{k}/20] Built   Dep{k}  ", "A.lean"))
    assert messages(sent) == [
        "lean_sync on A.lean: preparing Lean dependencies — ✔ [1/20] Built Dep1",
        "lean_sync on A.lean: preparing Lean dependencies — ✔ [10/20] Built Dep10",
        "lean_sync on A.lean: preparing Lean dependencies — ✔ [20/20] Built Dep20",
    ]


def test_tools_without_setup_or_file_progress_ignore_those_events() -> None:
    sent: list[dict[str, Any]] = []
    n = notifier(sent, token=1.5, kinds=Progress.PREPARATION)
    n.on_event(PreparationEvent("lean_update on A.lean: preparing the Lean workspace"))
    n.on_event(SetupEvent("building", "A.lean"))
    n.on_event(FileProgressEvent("A.lean", {"updates": 1, "done": True}))
    n.on_event(object())  # an unknown event kind
    assert [(m["params"]["progressToken"], m["params"]["message"]) for m in sent] == [
        (1.5, "lean_update on A.lean: preparing the Lean workspace")
    ]


def test_a_tool_without_a_preparation_kind_sends_no_preparation() -> None:
    sent: list[dict[str, Any]] = []
    notifier(sent, token=1, kinds=Progress.NONE).preparation("nothing")
    assert sent == []


def test_without_a_token_nothing_but_the_status_notice_and_logs_is_sent() -> None:
    sent: list[dict[str, Any]] = []
    n = notifier(sent)
    n.preparation("lean_sync on A.lean: preparing the Lean workspace")
    n.file_progress({"updates": 1, "done": True})
    assert sent == []
    n.setup("Building Dep")  # the first setup line is the status notice instead
    n.setup("Building Dep2")
    n.status()  # at most one notice per call
    [status] = sent
    assert status["params"]["data"] == {
        "requestId": 4,
        "tool": "lean_sync",
        "state": "preparing_dependencies",
        "message": "lean_sync on A.lean: preparing Lean dependencies — Building Dep",
        "path": "A.lean",
        "progressHint": "For detailed live updates, pass tools/call params._meta.progressToken.",
    }


@pytest.mark.parametrize(
    ("level", "shown"), [(None, False), ("debug", True), ("notice", True), ("warning", False), ("error", False)]
)
def test_the_status_notice_is_a_notice_level_log(level: str | None, shown: bool) -> None:
    sent: list[dict[str, Any]] = []
    n = notifier(sent, level=level, path=None)
    n.status()
    assert len(sent) == int(shown)
    if shown:
        assert sent[0]["params"]["level"] == "notice" and sent[0]["params"]["logger"] == "beam.status"
        assert sent[0]["params"]["data"]["message"] == "lean_sync is still working."
        assert "path" not in sent[0]["params"]["data"]


def test_a_token_or_a_tool_without_status_suppresses_the_notice() -> None:
    sent: list[dict[str, Any]] = []
    notifier(sent, token="t").status()
    notifier(sent, status=False).status()
    assert sent == []


@pytest.mark.parametrize(
    ("severity", "level"),
    [("error", "error"), ("warning", "warning"), ("information", "info"), ("hint", "debug"), ("unknown", "info")],
)
def test_diagnostics_are_logged_at_their_severitys_level_without_save_blocking(severity: str, level: str) -> None:
    sent: list[dict[str, Any]] = []
    item = {"path": "A.lean", "severity": severity, "message": "m", "save_blocking": True}
    notifier(sent).on_event(DiagnosticEvent(item))
    [log] = sent
    assert log["params"] == {
        "level": level,
        "logger": "lean.diagnostic",
        "data": {"path": "A.lean", "severity": severity, "message": "m"},
    }


def test_nothing_is_sent_after_close() -> None:
    sent: list[dict[str, Any]] = []
    n = notifier(sent, token=1)
    n.close()
    n.preparation("p")
    n.file_progress({"updates": 1, "done": True})
    n.setup("Building")
    n.diagnostic({"severity": "error", "message": "m"})
    n.status()
    assert sent == []


@pytest.mark.parametrize(
    ("progress", "expected"),
    [
        ({"updates": 3, "done": False, "range_start_line": 2, "range_end_line": 9}, "processing A.lean (range=2..9 "),
        ({"updates": 3, "done": False, "range_start_line": 2}, "processing A.lean (rangeStartLine=2 "),
        ({"updates": 3, "done": True, "range_end_line": 9}, "processed A.lean (rangeEndLine=9 "),
        ({"done": False}, "processing A.lean (updates=0 done=false)"),
    ],
)
def test_file_progress_messages_name_the_range_they_know(progress: dict[str, Any], expected: str) -> None:
    assert expected in file_progress_message("lean_sync", "A.lean", progress)
    assert "the Lean file" in file_progress_message("lean_sync", None, progress)


def test_setup_messages_are_trimmed_to_200_characters() -> None:
    text = setup_message("lean_sync", None, "x" * 500)
    assert text.startswith("lean_sync: preparing Lean dependencies — ")
    assert text.endswith("…") and len(text.split(" — ", 1)[1]) == 200
