"""The `lean-beam` CLI: the parser is the registry, options, workspace discovery, running calls, exit codes.

Most tests call `main()` in this process (the fake Lean from `BEAM_LEAN_SERVER_CMD`, a private
`XDG_RUNTIME_DIR`, so no test meets a daemon it did not start); Ctrl-C and the real-Lean lane run the command as
a child process (`Cli`). Captured stdout is not a terminal, so output is the result JSON unless `--human`; the
terminal itself (a pseudo-terminal) is `test_cli_terminal.py`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from beam_broker import OPERATIONS, RUNTIME_SETUP
from beam_broker import cli as beam_cli
from beam_broker import errors as codes
from beam_broker._cli.commands import command_name
from tests.support.fixtures import fake_cmd
from tests.support.projects import fake_project

from .support import CLI, Cli, cli_env, wait_dead

CLEAN = "theorem x : True := trivial\n"


@pytest.fixture
def in_project(tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory is a fake-lane project; Lean is the fake; daemons live in a private directory."""
    root = fake_project(tmp_path / "proj", {"A.lean": CLEAN, "Sub/B.lean": "def b := ERROR_HERE\n"})
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(state_dir))
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", shlex.join(fake_cmd()))
    return root


def main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = beam_cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- the parser is the registry -----------------------------------------------------------------------
def test_every_registry_operation_is_a_dashed_subcommand_besides_the_tool_commands() -> None:
    parser = beam_cli.build_parser()
    [action] = [a for a in parser._actions if a.dest == "command"]
    commands = list(action.choices)  # type: ignore[arg-type]
    assert commands == [
        *(spec.name.replace("_", "-") for spec in OPERATIONS),
        *("stats", "daemon", "serve", "status", "stop", "recover", "doctor", "completion"),
    ]
    assert "run-at-handle" in commands and "drop-workspace" in commands and "sync" in commands


def test_a_missing_required_option_or_a_bad_choice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert beam_cli.main(["run-at", "A.lean:1:0"]) == 2
    assert "--text" in capsys.readouterr().err
    assert beam_cli.main(["goals", "A.lean:1:0", "--mode", "x"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert beam_cli.main([]) == 2
    assert "a command is required" in capsys.readouterr().err


def test_a_position_command_without_a_position_or_with_half_of_one_is_a_usage_error(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["hover", "A.lean"], ["hover", "A.lean", "--line", "0"], ["hover", "A.lean:1:8", "--line", "0"]):
        code, out, err = main(capsys, "--compact", *argv)
        assert code == beam_cli.EXIT_USAGE and out == ""
        error = json.loads(err)
        assert (
            error["code"] == codes.INVALID_INPUT
            and "needs FILE:LINE:COL (or --line N --character N)" in error["message"]
        )
    code, _, err = main(capsys, "--compact", "hover", "A.lean:0:8")
    assert code == 2 and "lines count from 1" in json.loads(err)["message"]
    code, _, err = main(capsys, "--compact", "hover", "A.lean:1:0-1:4")
    assert code == 2 and "takes one position FILE:LINE:COL, not a range" in json.loads(err)["message"]
    code, _, err = main(capsys, "--compact", "todo", "A.lean:1:0")
    assert code == 2 and "takes a range FILE:LINE:COL-LINE:COL, or FILE for all of it" in json.loads(err)["message"]


def test_help_explains_commands_exit_codes_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert beam_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for text in ("run-at-handle", "exit codes:", "130", "runtimeSetup", "invalidInput", "examples:", "daemon",
                 "positions:", "FILE:LINE:COL", "contentModified", "doctor", "completion"):  # fmt: skip
        assert text in out
    for spec in OPERATIONS:
        assert beam_cli.main([command_name(spec), "--help"]) == 0
        sub = capsys.readouterr().out
        assert "tools/call" not in sub and "lean_" not in sub.replace("lean_toolchain", "")
    assert beam_cli.main(["daemon", "--help"]) == 0
    assert "stop" in capsys.readouterr().out


def test_help_lists_the_commands_by_group_and_a_typo_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert beam_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = out[out.index("commands:\n") : out.index("\n\npositions:")].splitlines()
    titles = [line.strip() for line in listed if line.startswith("  ") and not line.startswith("    ")]
    assert titles == ["files and diagnostics:", "navigation:", "goals and probes:", "save:", "daemon and setup:"]
    assert all(len(line) <= beam_cli.HELP_LINE for line in listed)
    assert {line.split()[0] for line in listed[1:] if line.startswith("    ")} == {
        *(command_name(spec) for spec in OPERATIONS),
        "daemon",
        "serve",
        "status",
        "stop",
        "recover",
        "stats",
        "doctor",
        "completion",
    }  # every command, in one group each ("other" stays empty)
    assert beam_cli.main(["synch", "A.lean"]) == beam_cli.EXIT_USAGE
    assert capsys.readouterr().err.endswith("lean-beam: error: unknown command 'synch'; did you mean 'sync'?\n")
    assert beam_cli.main(["sync", "--jsn", "A.lean"]) == beam_cli.EXIT_USAGE
    assert capsys.readouterr().err.endswith("unrecognized arguments: --jsn; did you mean '--json'?\n")
    assert beam_cli.main(["daemon", "strat"]) == beam_cli.EXIT_USAGE
    assert capsys.readouterr().err.endswith("did you mean 'start' or 'status'?\n")
    # A mistyped required option: argparse says the option is missing; the typo is what to fix.
    assert beam_cli.main(["run-at", "A.lean:1:0", "--tex", "#check x"]) == beam_cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.endswith("unrecognized arguments: --tex; did you mean '--text'? (--text is required)\n"), err
    assert beam_cli.main(["run-at", "A.lean:1:0", "--tex=#check x"]) == beam_cli.EXIT_USAGE
    assert "unrecognized arguments: --tex=#check x; did you mean '--text'?" in capsys.readouterr().err
    assert beam_cli.main(["run-at", "A.lean:1:0"]) == beam_cli.EXIT_USAGE  # no typo: argparse's own message
    assert capsys.readouterr().err.endswith("error: the following arguments are required: --text\n")


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from beam_broker import __version__

    assert beam_cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lean-beam {__version__}"


# ---- running in this process on the fake Lean ---------------------------------------------------------
def test_sync_prints_json_on_stdout_and_events_on_stderr(in_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main(capsys, "sync", "A.lean")
    assert code == 0 and out.startswith("{\n  ")  # pretty by default
    result = json.loads(out)
    assert result["workspace"] == {"root": str(in_project)} and result["readiness"]["save_ready"] is True
    assert "beam: A.lean: preparing the Lean workspace" in err and "beam: A.lean: elaborated" in err
    code, out, err = main(capsys, "--compact", "-q", "--no-daemon", "sync", "Sub/B.lean")
    assert code == beam_cli.EXIT_LEAN_ERRORS == 1  # Lean reported errors: the JSON says which, the status that
    assert len(out.splitlines()) == 1 and err == "Sub/B.lean:1:9: error: unknown identifier 'ERROR_HERE'\n"
    assert json.loads(out)["diagnostics"]["counts"]["error"] == 1


def test_a_save_refused_for_errors_exits_1_with_the_errors(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = main(capsys, "--compact", "-q", "save", "Sub/B.lean")
    assert code == beam_cli.EXIT_LEAN_ERRORS and out == ""
    error = json.loads(err)
    assert error["code"] == codes.INVALID_PARAMS and error["data"]["sync"]["readiness"]["save_ready"] is False
    code, out, err = main(capsys, "--human", "-q", "save", "Sub/B.lean")
    assert code == 1 and out.splitlines() == [
        "Sub/B.lean:1:9: error: unknown identifier 'ERROR_HERE'",
        "Sub/B.lean (version 1): 1 error, not save-ready",
    ]
    assert err == "lean-beam: not saved: the file has errors\n"


def test_the_root_is_discovered_from_a_subdirectory_and_paths_follow_the_cwd(
    in_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(in_project / "Sub")
    code, out, err = main(capsys, "--compact", "-v", "update", "B.lean")
    assert code == 0, err
    answer = json.loads(out)
    assert isinstance(answer.pop("snapshot"), str)
    assert answer == {"workspace": {"root": str(in_project)}, "version": 1, "changed": True}
    assert "no daemon socket" in err and "running Lean in this process" in err


def test_a_path_beam_printed_pastes_back_from_a_subdirectory(
    in_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Finding: output paths are root-relative, input paths were cwd-relative: `Sub/B.lean` from Sub was not found.
    monkeypatch.chdir(in_project / "Sub")
    code, out, err = main(capsys, "--compact", "update", "Sub/B.lean")
    assert code == 0, err
    assert json.loads(out)["version"] == 1


def test_a_file_that_is_no_lean_source_or_lies_outside_the_project_exits_2_in_one_line(
    in_project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (in_project / "notes.txt").write_text("hello\n", encoding="utf-8")
    (tmp_path / "Other.lean").write_text(CLEAN, encoding="utf-8")
    code, out, err = main(capsys, "--human", "sync", "notes.txt")
    assert (code, out) == (beam_cli.EXIT_USAGE, "")
    assert err == "lean-beam: error: notes.txt: not a Lean source file (Beam works only on `.lean` files)\n"
    code, out, err = main(capsys, "--human", "hover", str(tmp_path / "Other.lean:1:8"))
    assert (code, out) == (beam_cli.EXIT_USAGE, "")
    assert err == (
        f"lean-beam: error: {tmp_path / 'Other.lean'}: outside the project {in_project}; run lean-beam from the "
        "file's own project, or pass --root DIR\n"
    )


def test_a_file_of_a_project_named_from_outside_any_project_names_that_project(
    in_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    (tmp_path / "Loose.lean").write_text(CLEAN, encoding="utf-8")
    code, out, err = main(capsys, "--human", "hover", str(in_project / "A.lean:1:4"))
    assert (code, out) == (beam_cli.EXIT_USAGE, "")
    assert err == (
        f"lean-beam: error: no Lean project contains {outside} (looked for lean-toolchain, lakefile.toml, "
        f"lakefile.lean upward); {in_project / 'A.lean'} is in the Lean project {in_project}: run lean-beam there, "
        f"or pass --root {in_project}\n"
    )
    code, out, err = main(capsys, "--human", "sync", str(tmp_path / "Loose.lean"))  # in no project: as before
    assert (code, out) == (beam_cli.EXIT_USAGE, "")
    assert err.endswith("lakefile.lean upward); pass --root DIR\n")


def test_stderr_carries_the_errors_of_a_json_sync_in_every_mode_once(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding: a warm sync in a pipe (nothing streamed) exited 1 with nothing on stderr.
    error = "Sub/B.lean:1:9: error: unknown identifier 'ERROR_HERE'"
    code, out, err = main(capsys, "-q", "sync", "Sub/B.lean")
    assert code == beam_cli.EXIT_LEAN_ERRORS and json.loads(out)["readiness"]["save_ready"] is False
    assert err.splitlines() == [error]
    code, out, err = main(capsys, "sync", "Sub/B.lean")  # streamed as it came: not printed again
    assert code == beam_cli.EXIT_LEAN_ERRORS and err.splitlines().count(error) == 1


def test_an_error_about_a_position_says_it_as_the_user_typed_it(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = main(capsys, "--human", "hover", "A.lean:99:0")
    assert (code, out) == (beam_cli.EXIT_REFUSED, "")
    last = err.splitlines()[-1]
    assert last == "lean-beam: error: line 99 is past the end of the file (it has 1 line)"


def test_the_protocol_code_of_an_error_is_shown_only_with_verbose_or_in_json(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding: every human error line ended with ` [invalidParams]`, noise for a person; -v is how to ask for it.
    code, _, err = main(capsys, "--human", "-v", "hover", "A.lean:99:0")
    assert code == beam_cli.EXIT_REFUSED
    last = "lean-beam: error: line 99 is past the end of the file (it has 1 line) [invalidParams]"
    assert err.splitlines()[-1] == last
    code, _, err = main(capsys, "--human", "hover", "A.lean:99:0")
    assert code == beam_cli.EXIT_REFUSED and not err.splitlines()[-1].endswith("]")
    code, _, err = main(capsys, "--json", "hover", "A.lean:99:0")
    assert code == beam_cli.EXIT_REFUSED and json.loads(err[err.index("{") :])["code"] == codes.INVALID_PARAMS


def test_a_refused_call_exits_4_with_its_json_on_stderr(in_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main(capsys, "hover", "A.lean", "--version", "7", "--line", "0", "--character", "8")
    assert code == beam_cli.EXIT_REFUSED == 4 and out == ""
    error = json.loads(err[err.index("{") :])
    assert error["code"] == codes.CONTENT_MODIFIED
    assert error["data"]["reason"] == "documentVersionMismatch" and error["data"]["expectedVersion"] == 7


def test_invalid_input_exits_2_with_the_error_json_on_stderr(
    tmp_path: Path, in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = main(capsys, "--root", str(in_project), "hover", "A.lean", *("--version", "-1"), "--line", "0",
                          "--character", "0")  # fmt: skip
    assert code == 2 and out == ""
    error = json.loads(err)
    assert error["code"] == codes.INVALID_INPUT and "version" in error["message"]
    assert beam_cli.main(["--root", str(tmp_path / "missing"), "sync", "A.lean"]) == 2
    assert json.loads(capsys.readouterr().err)["code"] == codes.INVALID_INPUT


@pytest.mark.parametrize(
    ("lean_cmd", "needle"),
    [('"unclosed', "--lean-cmd does not split like a shell command: No closing quotation"), ("", "empty")],
)
def test_a_lean_command_that_does_not_split_is_invalid_input(
    in_project: Path, capsys: pytest.CaptureFixture[str], lean_cmd: str, needle: str
) -> None:
    code, _, err = main(capsys, "--compact", "--lean-cmd", lean_cmd, "sync", "A.lean")
    assert code == 2 and needle in json.loads(err)["message"]


def test_without_a_project_around_the_current_directory_the_root_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert beam_cli.main(["--compact", "sync", "A.lean"]) == 2
    error = json.loads(capsys.readouterr().err)
    assert error["code"] == codes.INVALID_INPUT and "pass --root" in error["message"]


def test_a_missing_lean_exits_3_with_runtime_setup(
    in_project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BEAM_LEAN_SERVER_CMD")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out, err = main(capsys, "sync", "A.lean")
    assert code == 3 and out == ""
    error = json.loads(err[err.index("{") :])
    assert error["code"] == RUNTIME_SETUP == "runtimeSetup" and "lake" in error["message"]
    code, _, err = main(capsys, "daemon", "start")
    assert code == 3 and json.loads(err)["code"] == RUNTIME_SETUP
    assert not list(Path(os.environ["XDG_RUNTIME_DIR"]).glob("beam/*.sock"))


def test_without_a_daemon_stats_and_status_exit_1_and_stop_has_nothing_to_stop(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = main(capsys, "--compact", "stats")
    assert (code, out) == (1, "")  # not the zeros of a broker made for the question
    assert (
        err
        == f"lean-beam: no daemon runs for {in_project}: no statistics to show (`lean-beam daemon start` starts one)\n"
    )
    code, out, _ = main(capsys, "--compact", "daemon", "status")
    assert code == 1
    assert json.loads(out)["running"] is False and json.loads(out)["staleSocket"] is False
    code, out, _ = main(capsys, "--compact", "daemon", "stop")
    assert code == 0 and json.loads(out) == {"stopped": False, "reason": "notRunning", "root": str(in_project)}


def test_a_daemon_started_from_here_serves_commands_until_stopped(
    in_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = main(capsys, "--compact", "daemon", "start")
    assert code == 0, err
    started = json.loads(out)
    try:
        assert started["started"] is True and started["root"] == str(in_project)
        assert "beam: starting a daemon" in err
        code, out, _ = main(capsys, "--compact", "daemon", "start")
        assert json.loads(out) == {**started, "started": False}
        code, out, err = main(capsys, "--compact", "-v", "update", "A.lean")
        assert code == 0 and "answered by the daemon" in err and json.loads(out)["version"] == 1
        code, out, err = main(capsys, "--compact", "--lean-cmd", shlex.join(fake_cmd()), "update", "A.lean")
        assert code == 0 and "runs another Lean command" in err and json.loads(out)["changed"] is True
        code, out, _ = main(capsys, "--compact", "stats")
        assert json.loads(out)["workspaces"][f"local:{in_project}"]["byBackend"]["lean"]["requestCount"] == 1
        code, out, _ = main(capsys, "--compact", "daemon", "status")
        status = json.loads(out)
        assert code == 0 and status["pid"] == started["pid"] and status["leanCmd"] is None
        assert status["serverCmd"] == fake_cmd()
        code, out, _ = main(capsys, "--compact", "daemon", "stop")
        assert code == 0 and json.loads(out) == {"stopped": True, "pid": started["pid"], "root": str(in_project)}
        wait_dead(started["pid"])
    finally:
        with contextlib.suppress(OSError):  # a failed test must not leave the daemon behind
            os.killpg(started["pid"], signal.SIGKILL)


def test_interrupting_a_run_cancels_it_and_raises_interrupted() -> None:
    async def wait_for_the_signal() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        await anyio.sleep_forever()

    with pytest.raises(beam_cli.Interrupted):
        beam_cli.run(wait_for_the_signal)
    assert beam_cli.run(lambda: _answer(42)) == 42


async def _answer(value: Any) -> Any:
    return value


# ---- child processes ----------------------------------------------------------------------------------
def test_ctrl_c_cancels_a_call_in_flight_and_exits_130(fake_cli: Cli) -> None:
    cmd = shlex.join(fake_cmd({"stall": ["textDocument/hover"]}))
    proc = subprocess.Popen(
        [*CLI, "--lean-cmd", cmd, "hover", "A.lean", "--version", "1", "--line", "0", "--character", "8"],
        cwd=fake_cli.cwd,
        env=fake_cli.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the call has started once its preparation line is out
        assert first == "beam: A.lean: preparing the Lean workspace\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and out == ""
    assert err.strip().endswith("beam: interrupted")


@pytest.mark.parametrize("argv", [["completion", "bash"], ["--help"], ["--version"], ["sync", "--help"]])
def test_a_reader_that_goes_away_ends_the_command_with_141(argv: list[str], fake_cli: Cli) -> None:
    # Finding: argparse swallowed the broken pipe of `lean-beam --help | head -1` (exit 0).
    with subprocess.Popen(
        [*CLI, *argv], cwd=fake_cli.cwd, env=fake_cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the child has written anything: its write fails with EPIPE
        err = proc.stderr.read()
        assert proc.wait(timeout=30) == beam_cli.EXIT_BROKEN_PIPE == 141 and err == b""


@pytest.mark.parametrize(
    "argv",
    [
        ["sync", "{tmp}/nowhere/X.lean"],  # invalidInput: no Lean project holds the file
        ["--tols"],  # a usage error: it exited 141, argparse's usage text taking the broken-pipe path of `--help`
    ],
)
def test_an_error_on_a_stderr_nobody_reads_keeps_its_exit_status(
    argv: list[str], tmp_path: Path, fake_cli: Cli
) -> None:
    # Finding: `lean-beam sync X 2>&1 | true` exited 1 with a BrokenPipeError instead of the error's own 2.
    read, write = os.pipe()
    os.close(read)  # the reader went away before the child writes anything: its write fails with EPIPE
    try:
        done = subprocess.run(
            [*CLI, *(arg.format(tmp=tmp_path) for arg in argv)],
            cwd=fake_cli.cwd,
            env=fake_cli.env,
            stdout=write,
            stderr=write,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == 2


def test_a_missing_lean_exits_3_as_a_process(tmp_path: Path, state_dir: Path) -> None:
    root = fake_project(tmp_path / "p", {"A.lean": CLEAN})
    result = Cli(cli_env({"PATH": ""}, state_dir), root)("sync", "A.lean")
    assert result.code == 3 and result.stdout == ""
    assert result.error["code"] == RUNTIME_SETUP and "lake" in result.error["message"]


# ---- the real Lean lane -------------------------------------------------------------------------------
@pytest.mark.lean
def test_sync_of_a_clean_and_a_broken_file_both_exit_0_with_json_and_stderr_lines(lean_cli: Cli) -> None:
    clean = lean_cli("sync", "Demo/Proofs.lean")
    assert clean.code == 0, clean.stderr
    assert clean.json["path"] == "Demo/Proofs.lean" and clean.json["readiness"]["save_ready"] is True
    assert clean.stdout.startswith("{\n  ")  # pretty by default
    assert "beam: Demo/Proofs.lean: preparing the Lean workspace" in clean.stderr
    assert "beam: Demo/Proofs.lean: elaborated" in clean.stderr
    broken = lean_cli("--compact", "sync", "Demo/Broken.lean", "--diagnostics-in-result")
    assert broken.code == 1, broken.stderr  # Lean reported errors
    assert len(broken.stdout.splitlines()) == 1
    assert broken.json["diagnostics"]["counts"]["error"] == 1 and broken.json["readiness"]["save_ready"] is False
    assert "Demo/Broken.lean:4:20: error: Type mismatch" in broken.stderr.splitlines()  # as `lean` prints it
    quiet = lean_cli("-q", "sync", "Demo/Broken.lean")
    assert quiet.code == 1 and "beam:" not in quiet.stderr  # no progress, but the errors, whole, as Lean prints them
    assert quiet.stderr.startswith("Demo/Broken.lean:4:20: error: Type mismatch\n  MyNat.zero\nhas type\n")


@pytest.mark.lean
def test_a_stale_version_exits_4_with_content_modified(lean_cli: Cli) -> None:
    result = lean_cli("hover", "Demo/Proofs.lean", "--version", "7", "--line", "3", "--character", "8")
    assert result.code == 4 and result.stdout == ""
    error = result.error
    assert error["code"] == codes.CONTENT_MODIFIED
    assert error["data"]["reason"] == "documentVersionMismatch" and error["data"]["expectedVersion"] == 7


@pytest.mark.lean
def test_the_root_is_discovered_from_a_subdirectory_on_real_lean(lean_cli: Cli, demo_root: Path) -> None:
    result = lean_cli("--compact", "sync", "Proofs.lean", cwd=demo_root / "Demo")
    assert result.code == 0, result.stderr
    assert result.json["workspace"] == {"root": str(demo_root)} and result.json["path"] == "Demo/Proofs.lean"


@pytest.mark.lean
def test_probe_text_from_a_file_and_from_stdin(lean_cli: Cli, tmp_path: Path) -> None:
    probe = tmp_path / "probe.lean"
    probe.write_text("#check two", encoding="utf-8")
    at = ("run-at", "Demo/Proofs.lean", "--version", "1", "--line", "8", "--character", "5")
    from_file = lean_cli(*at, "--text", f"@{probe}")
    assert from_file.code == 0, from_file.stderr
    assert from_file.json["success"] is True
    assert from_file.json["messages"] == [{"severity": "information", "text": "two : MyNat"}]
    failing = lean_cli(*at, "--text", "-", input="#check nope")
    assert failing.code == 0, failing.stderr  # a failing probe is a successful call
    assert failing.json["success"] is False and failing.json["messages"][0]["severity"] == "error"


@pytest.mark.lean
def test_attempts_take_one_text_option_per_alternative_commas_and_all(lean_cli: Cli, tmp_path: Path) -> None:
    spliced = tmp_path / "alt.lean"
    spliced.write_text("theorem viaFile : MyTrue := byTerm", encoding="utf-8")
    texts = ("theorem c1 : MyTrue := byTerm -- first, second", "theorem bad : MyTrue := MyNat.zero", f"@{spliced}")
    result = lean_cli("attempts", "Demo/Proofs.lean:9:0", *(a for t in texts for a in ("--text", t)))
    assert result.code == 0, result.stderr
    attempts = result.json["attempts"]
    assert [a["success"] for a in attempts] == [True, False, True]  # three texts: the comma split nothing
    assert "MyNat.zero" in attempts[1]["messages"][0]["text"]
    abbreviated = lean_cli("attempts", "Demo/Proofs.lean:9:0", "--tex", "theorem t : MyTrue := byTerm")
    assert abbreviated.code == 2  # no option is read from a prefix of its name


@pytest.mark.lean
def test_axioms_by_name_need_no_position_and_by_position_name_the_declaration(lean_cli: Cli) -> None:
    by_name = lean_cli("axioms", "Demo/Proofs.lean", "--name", "byTerm")
    assert by_name.code == 0, by_name.stderr
    assert by_name.json["name"] == "byTerm" and by_name.json["axioms"] == []
    at = lean_cli("axioms", "Demo/Proofs.lean:4:10")
    assert at.code == 0, at.stderr
    assert at.json["axioms"] == [] and at.json["uses_sorry"] is False


@pytest.mark.lean
def test_text_shows_warnings_and_lean_error_names_and_json_items_keep_the_names(lean_cli: Cli, demo_root: Path) -> None:
    unknown = demo_root / "Demo" / "Unknown.lean"
    unknown.write_text("prelude\nimport Demo.Basic\n\ndef oops : MyTrue := notThere\n", encoding="utf-8")
    warn = lean_cli("--human", "sync", "Warn.lean", cwd=demo_root / "Demo")
    assert warn.code == 0, warn.stderr  # a warning is shown, errors alone decide the exit status
    assert warn.stdout.startswith("Demo/Warn.lean:5:8: warning: Variable name `x` is not explicitly referenced.")
    assert warn.stdout.splitlines()[-1] == "Demo/Warn.lean (version 1): 1 warning, save-ready"
    named = lean_cli("--human", "sync", "Demo/Unknown.lean", cwd=demo_root / "Demo")  # a printed path, pasted
    assert named.code == 1, named.stderr
    assert named.stdout.splitlines() == [
        "Demo/Unknown.lean:4:21: error(lean.unknownIdentifier): Unknown identifier `notThere`",  # as `lean` prints it
        "Demo/Unknown.lean (version 1): 1 error, not save-ready",
    ]
    items = lean_cli("--compact", "sync", "Demo/Unknown.lean", "--diagnostics-in-result")
    assert items.json["diagnostics"]["items"][0]["code"] == "lean.unknownIdentifier"
    assert items.json["readiness"]["blocking_diagnostics"][0]["code"] == "lean.unknownIdentifier"


@pytest.mark.lean
def test_probes_and_interactive_diagnostics_show_lean_error_names_as_sync_does(lean_cli: Cli, demo_root: Path) -> None:
    # Finding: `sync` printed `error(lean.unknownIdentifier): ...` but `run-at` and `interactive-diagnostics` dropped
    # the name, and run_at's JSON messages had no `code` (lean_sync's items do).
    unknown = demo_root / "Demo" / "Unknown.lean"
    unknown.write_text("prelude\nimport Demo.Basic\n\ndef oops : MyTrue := notThere\n", encoding="utf-8")
    named = "error(lean.unknownIdentifier): Unknown identifier `notThere`"
    probe = ("Demo/Proofs.lean:9:0", "--text", "theorem probe : MyTrue := notThere")
    ran = lean_cli("--human", "run-at", *probe)
    assert ran.code == 0, ran.stderr
    assert ran.stdout.splitlines()[0] == named
    assert lean_cli("--compact", "run-at", *probe).json["messages"][0]["code"] == "lean.unknownIdentifier"
    found = lean_cli("--human", "interactive-diagnostics", "Demo/Unknown.lean")
    assert found.code == 0, found.stderr
    assert found.stdout.splitlines() == [f"Demo/Unknown.lean:4:21: {named}"]
    scratch = lean_cli("--human", "run-code", "--text", "prelude\ndef oops := notThere")
    assert scratch.stdout.splitlines()[0] == f"<scratch>:2:12: {named}", scratch.stderr


@pytest.mark.lean
def test_a_sync_that_rebuilds_its_imports_prints_only_what_holds_after(lean_cli: Cli, demo_root: Path) -> None:
    # Finding: `sync --rebuild-imports` printed Lean's complaint about the unbuilt import, then the clean verdict.
    (demo_root / "Demo/Mid.lean").write_text("prelude\nimport Demo.Basic\n\ntheorem midTrue : MyTrue := myTrue\n")
    (demo_root / "Demo/Top.lean").write_text("prelude\nimport Demo.Mid\n\ntheorem topTrue : MyTrue := midTrue\n")
    rebuilt = lean_cli("--human", "sync", "Demo/Top.lean", "--rebuild-imports")
    assert rebuilt.code == 0, rebuilt.stderr
    assert rebuilt.stdout.splitlines() == [
        "Demo/Top.lean: saved its stale imports first: Demo/Mid.lean",
        "Demo/Top.lean (version 1): no errors or warnings, save-ready",
    ]
