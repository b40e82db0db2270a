"""What every `lean-beam` command shares: the exit-code table, the output form, printing answers, the event loop."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from beam_broker import errors as codes
from beam_broker._cli import common
from beam_broker._cli.progress import Terminal


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_exit_code_table_maps_error_codes() -> None:
    assert (common.EXIT_OK, common.EXIT_LEAN_ERRORS, common.EXIT_USAGE, common.EXIT_SETUP, common.EXIT_REFUSED) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert common.exit_code(codes.INVALID_INPUT) == common.EXIT_USAGE
    for code in (codes.RUNTIME_SETUP, codes.WORKER_EXITED, codes.WORKER_CRASHED, codes.SYNC_BARRIER_INCOMPLETE,
                 codes.INTERNAL_ERROR, codes.SAVE_UNSUPPORTED_SETUP):  # fmt: skip
        assert common.exit_code(code) == common.EXIT_SETUP, code
    for code in (codes.CONTENT_MODIFIED, codes.INVALID_PARAMS, codes.SAVE_TARGET_NOT_MODULE, codes.SAVE_TRACE_STALE,
                 codes.SERVER_STARTING, codes.METHOD_NOT_FOUND, codes.RPC_NEEDS_RECONNECT, "aFutureCode"):  # fmt: skip
        assert common.exit_code(code) == common.EXIT_REFUSED, code


def test_output_is_for_a_person_on_a_terminal_unless_json_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")

    def human(stdout: io.StringIO, **args: object) -> bool:
        return common.Options.of(argparse.Namespace(**args), stdout).human

    assert human(Tty()) is True and human(io.StringIO()) is False
    assert human(Tty(), output="json") is False and human(io.StringIO(), output="human") is True
    monkeypatch.setenv("TERM", "dumb")
    assert human(Tty()) is False


def test_answers_print_as_json_or_text_and_errors_on_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    text = common.Output(common.Options(human=True), Terminal(out, err))
    assert text.finish({"result": {"a": 1}}, lambda v: [f"a is {v['a']}"]) == common.EXIT_OK
    assert text.finish({"error": {"code": codes.CONTENT_MODIFIED, "message": "stale"}}, list) == common.EXIT_REFUSED
    assert out.getvalue() == "a is 1\n" and err.getvalue() == "lean-beam: error: stale\n"
    out, err = io.StringIO(), io.StringIO()
    verbose = common.Output(common.Options(human=True, verbose=True), Terminal(out, err))
    assert verbose.finish({"error": {"code": codes.CONTENT_MODIFIED, "message": "stale"}}, list) == common.EXIT_REFUSED
    assert err.getvalue() == "lean-beam: error: stale [contentModified]\n"  # the code is for reports: -v
    out, err = io.StringIO(), io.StringIO()
    raw = common.Output(common.Options(compact=True), Terminal(out, err))
    assert raw.finish({"result": {"a": 1}}, list) == common.EXIT_OK
    assert raw.finish({"odd": True}, list) == common.EXIT_SETUP
    assert out.getvalue() == '{"a":1}\n'
    error = json.loads(err.getvalue())
    assert error["code"] == codes.INTERNAL_ERROR and "unexpected answer" in error["message"]


def test_the_root_is_the_option_or_the_project_around_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert common.workspace_root(common.Options(root="rel")) == str(Path.cwd() / "rel")
    (tmp_path / "lakefile.toml").write_text("", encoding="utf-8")
    (tmp_path / "Sub").mkdir()
    monkeypatch.chdir(tmp_path / "Sub")
    assert common.workspace_root(common.Options()) == str(tmp_path)


def test_a_background_task_runs_beside_the_call_until_it_returns() -> None:
    import anyio

    started = anyio.Event()
    seen: list[str] = []

    async def background() -> None:
        seen.append("background")
        started.set()
        await anyio.sleep_forever()

    async def fn() -> int:
        with anyio.fail_after(10):
            await started.wait()
        return 7

    assert common.run(fn, background) == 7 and seen == ["background"]


def test_notes_and_verbose_lines_never_run_into_the_live_line() -> None:
    # Finding: `-v` lines were printed straight to stderr and ran into the live line ("…0.1 sbeam: answered").
    clear = "\r\x1b[K"
    err = io.StringIO()
    options = common.Options(verbose=True, terminal=Terminal(io.StringIO(), err))
    options.terminal.status("beam: A.lean: 1/9 lines, 0.3 s")
    options.note("answered by the daemon")
    options.say("the daemon runs another Lean command")
    live = clear + "beam: A.lean: 1/9 lines, 0.3 s"
    assert err.getvalue() == (
        f"{live}{clear}beam: answered by the daemon\n{live}{clear}beam: the daemon runs another Lean command\n{live}"
    )
