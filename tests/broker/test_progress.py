"""What `lean-beam` shows while a call runs: the live line on a terminal, plain lines in a pipe, nothing when quiet."""

from __future__ import annotations

import io
import os
from pathlib import Path

import anyio
import pytest

from beam_broker import DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent
from beam_broker._cli import progress
from beam_broker._cli.progress import Mode, Reporter, Terminal, is_terminal, progress_mode
from beam_broker._cli.render import Sources
from tests.support.projects import fake_project

CLEAR = "\r\x1b[K"
ITEM = {"path": "A.lean", "severity": "error", "range": {"start": {"line": 2, "character": 4}}, "message": "boom"}


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


PREPARING = PreparationEvent(
    "lean_sync on A.lean: preparing the Lean workspace", "A.lean", "preparing the Lean workspace"
)


def reporter(
    tmp_path: Path, mode: Mode, *, human: bool, started: bool = True
) -> tuple[Reporter, io.StringIO, io.StringIO, Clock]:
    """A reporter on terminals; `started`: the call has already run for the live line's delay."""
    root = fake_project(tmp_path / "p", {"A.lean": "a\nb\nc\nd\ne\nf\ng\nh\ni\n"})
    out, err, clock = Tty(), Tty(), Clock()
    sources = Sources(str(root))
    report = Reporter(Terminal(out, err), mode=mode, human=human, sources=sources, clock=clock, starting="sync A.lean")
    if started:
        report.started -= progress.TICK_SECONDS
    return (
        report,
        out,
        err,
        clock,
    )


def test_the_mode_follows_stderr_and_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    assert progress_mode(Tty(), quiet=False) is Mode.LIVE
    assert progress_mode(io.StringIO(), quiet=False) is Mode.LINES
    assert progress_mode(Tty(), quiet=True) is Mode.OFF
    monkeypatch.setenv("TERM", "dumb")
    assert progress_mode(Tty(), quiet=False) is Mode.LINES
    closed = io.StringIO()
    closed.close()
    assert is_terminal(closed) is False


def test_on_a_terminal_one_line_is_replaced_in_place_and_cleared_at_the_end(tmp_path: Path) -> None:
    report, out, err, clock = reporter(tmp_path, Mode.LIVE, human=True, started=False)
    report(PREPARING)
    assert err.getvalue() == ""  # a warm call answers before the live line's delay: nothing flashes
    clock.now += progress.TICK_SECONDS
    report.redraw()
    clock.now += 0.25
    report(SetupEvent("✔ [1/2] Built Demo.Basic", "A.lean"))
    clock.now += 0.7
    report(FileProgressEvent("A.lean", {"updates": 1, "done": False, "range_start_line": 4, "range_end_line": 9}))
    report(FileProgressEvent("A.lean", {"updates": 2, "done": False}))  # no range: nothing new to show
    report(DiagnosticEvent(ITEM))
    clock.now += 0.3
    report.redraw()
    report(FileProgressEvent("A.lean", {"updates": 3, "done": True}))
    report.close()
    assert err.getvalue().split(CLEAR) == [
        "",
        "beam: A.lean: preparing the Lean workspace, 0.2 s",  # no MCP tool name on screen
        "beam: setup: ✔ [1/2] Built Demo.Basic, 0.5 s",
        "beam: A.lean: 3/9 lines, 1.2 s",
        "",  # cleared for the diagnostic on stdout...
        "beam: A.lean: 3/9 lines, 1.2 s",  # ... and drawn again
        "beam: A.lean: 3/9 lines, 1.5 s",
        "beam: A.lean: 9/9 lines, 1.5 s",
        "",
    ]
    assert out.getvalue() == "A.lean:3:4: error: boom\n"
    report(DiagnosticEvent(ITEM))  # printed once, also when the result lists it again
    assert out.getvalue() == "A.lean:3:4: error: boom\n"


def test_the_live_line_says_what_runs_from_the_first_moment_of_a_cold_start(tmp_path: Path) -> None:
    report, _, err, clock = reporter(tmp_path, Mode.LIVE, human=True, started=False)
    clock.now += 0.5
    report.redraw()  # the ticker, before the broker has said anything
    report(PreparationEvent("lean_sync on A.lean: preparing the Lean workspace", "A.lean"))  # an older daemon
    assert err.getvalue().split(CLEAR)[1:] == [
        "beam: sync A.lean, 0.5 s",
        "beam: lean_sync on A.lean: preparing the Lean workspace, 0.5 s",
    ]


def test_the_live_line_is_cut_to_the_terminal_width(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report, _, err, _ = reporter(tmp_path, Mode.LIVE, human=True)
    monkeypatch.setattr(Terminal, "width", lambda self: 30)
    report(PreparationEvent("x" * 100, "A.lean"))
    assert err.getvalue() == CLEAR + "beam: " + "x" * 23


def test_without_a_source_the_total_is_where_lean_says_the_file_ends(tmp_path: Path) -> None:
    report, _, err, _ = reporter(tmp_path, Mode.LIVE, human=False)
    report(FileProgressEvent("Gone.lean", {"updates": 1, "done": False, "range_start_line": 2, "range_end_line": 5}))
    report(FileProgressEvent("Gone.lean", {"updates": 1, "done": True, "range_end_line": 5}))
    report(FileProgressEvent("None.lean", {"updates": 1, "done": False, "range_start_line": 2}))
    report(FileProgressEvent("None.lean", {"updates": 1, "done": True}))
    assert err.getvalue().split(CLEAR)[1:] == [
        "beam: Gone.lean: 1/5 lines, 0.2 s",
        "beam: Gone.lean: 5/5 lines, 0.2 s",
        "beam: None.lean: line 2, 0.2 s",
        "beam: None.lean: elaborated, 0.2 s",
    ]


def test_in_a_pipe_progress_is_plain_lines_and_diagnostics_go_to_stderr_for_json(tmp_path: Path) -> None:
    report, out, err, _ = reporter(tmp_path, Mode.LINES, human=False)
    report(PREPARING)
    for _ in range(2):
        report(FileProgressEvent("A.lean", {"updates": 1, "done": False, "range_start_line": 2, "range_end_line": 9}))
    report(DiagnosticEvent(ITEM))
    report(FileProgressEvent("A.lean", {"updates": 3, "done": True}))
    report.close()
    assert out.getvalue() == ""
    assert err.getvalue().splitlines() == [
        "beam: A.lean: preparing the Lean workspace",
        "beam: A.lean: elaborating lines 2-9",
        "A.lean:3:4: error: boom",
        "beam: A.lean: elaborated",
    ]


def test_quiet_drops_progress_but_human_output_keeps_the_diagnostics(tmp_path: Path) -> None:
    report, out, err, _ = reporter(tmp_path, Mode.OFF, human=True)
    report(PreparationEvent("lean_sync on A.lean: preparing", "A.lean"))
    report(DiagnosticEvent(ITEM))
    report.close()
    assert (out.getvalue(), err.getvalue()) == ("A.lean:3:4: error: boom\n", "")
    report, out, err, _ = reporter(tmp_path / "q", Mode.OFF, human=False)
    report(DiagnosticEvent(ITEM))
    assert (out.getvalue(), err.getvalue()) == ("", "")


def test_held_diagnostics_of_a_file_print_only_if_they_turn_out_current(tmp_path: Path) -> None:
    # Finding: `sync --rebuild-imports` printed what Lean said against the stale imports before the clean verdict.
    other = {**ITEM, "path": "B.lean", "message": "in an import"}
    for current, shown in ((False, []), (True, ["A.lean:3:4: error: boom"])):
        report, out, _, _ = reporter(tmp_path / str(current), Mode.OFF, human=True)
        report.hold("A.lean")
        report(DiagnosticEvent(ITEM))
        report(DiagnosticEvent(other))  # an import's own errors (it could not be saved) are current: shown live
        assert out.getvalue().splitlines() == ["B.lean:3:4: error: in an import"]
        report.release(current=current)
        assert out.getvalue().splitlines()[1:] == shown
        report(DiagnosticEvent({**ITEM, "message": "after"}))  # held no more
        assert out.getvalue().splitlines()[-1] == "A.lean:3:4: error: after"


def test_a_terminal_without_a_size_is_80_columns_wide() -> None:
    assert Terminal(io.StringIO(), io.StringIO()).width() == 80
    read, write = os.pipe()
    try:
        with os.fdopen(write, "w") as pipe:
            assert Terminal(io.StringIO(), pipe).width() == 80
    finally:
        os.close(read)


@pytest.mark.anyio
async def test_the_ticker_moves_the_elapsed_time_while_lean_is_silent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report, _, err, clock = reporter(tmp_path, Mode.LIVE, human=True)
    report(PreparationEvent("lean_hover on A.lean: preparing the Lean workspace", "A.lean"))
    drawn = anyio.Event()
    redraw = report.redraw

    def counted() -> None:
        clock.now += 1
        redraw()
        drawn.set()

    monkeypatch.setattr(report, "redraw", counted)
    monkeypatch.setattr(progress, "TICK_SECONDS", 0)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(report.tick)
            await drawn.wait()
            tg.cancel_scope.cancel()
    assert "preparing the Lean workspace, 1.2 s" in err.getvalue()
    quiet, _, _, _ = reporter(tmp_path / "q", Mode.LINES, human=True)
    with anyio.fail_after(10):
        await quiet.tick()  # nothing to tick outside a terminal: returns at once
