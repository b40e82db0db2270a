"""The `lean-beam` CLI: a parser generated from the registry, inputs, output, exit codes (in-process calls).

Helpers here (`Cli`, `project`) are shared with test_daemon.py. Commands run as child processes
(`python -m beam_broker.cli`) with the lane's toolchain on PATH and a private `XDG_RUNTIME_DIR`, so no test
ever meets a daemon it did not start.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beam_broker import OPERATIONS, RUNTIME_SETUP, BrokerError
from beam_broker import cli as beam_cli
from beam_broker import errors as codes
from beam_broker._cli_args import Inputs, command_name, field_args, operation_arguments, resolve_cli_path
from beam_broker.operations import BY_NAME
from tests.support.fixtures import fake_cmd
from tests.support.toolchain import Toolchain

CLI = [sys.executable, "-m", "beam_broker.cli"]
TIMEOUT = 60


# ---- shared helpers -----------------------------------------------------------------------------------
@dataclasses.dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def error(self) -> dict[str, Any]:
        """The error JSON: the last `{`-block on stderr."""
        lines = self.stderr.splitlines()
        start = max(i for i, line in enumerate(lines) if line.startswith("{"))
        value: dict[str, Any] = json.loads("\n".join(lines[start:]))
        return value


@dataclasses.dataclass
class Cli:
    """Runs `lean-beam` as a child process with a fixed environment; remembers daemon pids to clean up."""

    env: dict[str, str]
    cwd: Path
    pids: list[int] = dataclasses.field(default_factory=list)

    def __call__(
        self, *args: str, cwd: Path | None = None, input: str | None = None, timeout: float = TIMEOUT
    ) -> Result:
        proc = subprocess.run(
            [*CLI, *args],
            cwd=cwd or self.cwd,
            env=self.env,
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
            check=False,
        )
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        if args[-2:] == ("daemon", "start") and result.code == 0:
            self.pids.append(result.json["pid"])
        return result

    def cleanup(self) -> None:
        """Kill every daemon this test started (stop is tested explicitly; teardown must not depend on it)."""
        for pid in self.pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A short private XDG_RUNTIME_DIR (unix socket paths are limited to about 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="beam-cli-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def cli_env(base: dict[str, str], state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k != "BEAM_LEAN_SERVER_CMD"}
    return {**env, "XDG_RUNTIME_DIR": str(state), **extra}


@pytest.fixture
def lean_cli(lean_toolchain: Toolchain, demo_root: Path, state_dir: Path) -> Iterator[Cli]:
    """`lean-beam` in the demo project with the lane's real Lean (`lake serve` from PATH)."""
    runner = Cli(cli_env(lean_toolchain.env(), state_dir), demo_root)
    yield runner
    runner.cleanup()


@pytest.fixture
def fake_cli(tmp_path: Path, state_dir: Path) -> Iterator[Cli]:
    """`lean-beam` in a small project served by the scripted fake Lean (`BEAM_LEAN_SERVER_CMD`)."""
    root = project(tmp_path / "proj")
    runner = Cli(cli_env(dict(os.environ), state_dir, BEAM_LEAN_SERVER_CMD=shlex.join(fake_cmd())), root)
    yield runner
    runner.cleanup()


def project(path: Path, text: str = "theorem x : True := trivial\n") -> Path:
    path.mkdir(parents=True)
    (path / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n", encoding="utf-8")
    (path / "A.lean").write_text(text, encoding="utf-8")
    return path.resolve()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def action_for(parser: argparse.ArgumentParser, dest: str) -> argparse.Action:
    [action] = [a for a in parser._actions if a.dest == dest]
    return action


# ---- the parser is the registry -----------------------------------------------------------------------
def test_every_registry_operation_is_a_dashed_subcommand_besides_stats_and_daemon() -> None:
    commands = subcommands(beam_cli.build_parser())
    assert list(commands) == [*(spec.name.replace("_", "-") for spec in OPERATIONS), "stats", "daemon"]
    assert "run-at-handle" in commands and "drop-workspace" in commands and "sync" in commands


def test_each_input_field_becomes_an_argument_with_its_requiredness_and_choices() -> None:
    commands = subcommands(beam_cli.build_parser())
    for spec in OPERATIONS:
        parser = commands[command_name(spec)]
        fields = spec.input_model.model_fields
        assert not [a for a in parser._actions if a.dest == "field_workspace"]
        for arg in field_args(spec):
            action = action_for(parser, arg.dest)
            if arg.name == "path":
                assert action.option_strings == []  # positional
                continue
            assert action.option_strings[0] == "--" + arg.name.replace("_", "-")
            assert action.required == (fields[arg.name].is_required() and arg.kind != "bool")
            if arg.kind == "choice":
                assert action.choices == arg.choices
    goals = commands["goals"]
    assert action_for(goals, "field_mode").choices == ("before", "after")
    assert action_for(goals, "field_mode").required is True
    assert action_for(commands["todo"], "field_suggest").choices == ("none", "basic")
    assert action_for(commands["sync"], "field_diagnostic_scope").choices == ("errors", "all")
    assert "--no-include-declaration" in action_for(commands["references"], "field_include_declaration").option_strings
    assert action_for(commands["sync"], "field_diagnostics_in_result").option_strings == ["--diagnostics-in-result"]


def test_a_missing_required_option_or_a_bad_choice_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert beam_cli.main(["hover", "A.lean", "--version", "1", "--line", "0"]) == 2
    assert "--character" in capsys.readouterr().err
    assert beam_cli.main(["goals", "A.lean", "--version", "1", "--line", "0", "--character", "0", "--mode", "x"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert beam_cli.main([]) == 2
    assert "a command is required" in capsys.readouterr().err


def test_help_explains_commands_exit_codes_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert beam_cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for text in ("run-at-handle", "exit codes:", "130", "runtimeSetup", "invalidInput", "examples:", "daemon"):
        assert text in out
    for spec in OPERATIONS:
        assert beam_cli.main([command_name(spec), "--help"]) == 0
        sub = capsys.readouterr().out
        assert "tools/call" not in sub and "lean_" not in sub.replace("lean_toolchain", "")
    assert beam_cli.main(["daemon", "--help"]) == 0
    assert "stop" in capsys.readouterr().out


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from beam_broker import __version__

    assert beam_cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lean-beam {__version__}"


# ---- option values ------------------------------------------------------------------------------------
def parse(*argv: str, stdin: str = "") -> dict[str, Any]:
    args = beam_cli.build_parser().parse_args(argv)
    return operation_arguments(BY_NAME[args.operation], args, Inputs(stdin=io.StringIO(stdin)))


def test_omitted_options_are_left_to_the_model_defaults_and_flags_map_to_booleans() -> None:
    assert parse("sync", "A.lean") == {"path": "A.lean"}
    assert parse("sync", "A.lean", "--diagnostics-in-result", "--diagnostic-scope", "all") == {
        "path": "A.lean",
        "diagnostics_in_result": True,
        "diagnostic_scope": "all",
    }
    refs = parse("references", "A.lean", "--version", "2", "--line", "0", "--character", "1")
    assert refs == {"path": "A.lean", "version": 2, "line": 0, "character": 1}
    no_decl = parse(
        "references", "A.lean", "--version", "2", "--line", "0", "--character", "1", "--no-include-declaration"
    )
    assert no_decl["include_declaration"] is False
    todo = parse("todo", "A.lean", "--version", "1", *("--start-line", "0", "--start-character", "0"),
                 *("--end-line", "9", "--end-character", "0", "--kinds", "sorry, hole"))  # fmt: skip
    assert todo["kinds"] == ["sorry", "hole"]
    assert parse("workspace-symbols", "--query", "MyNat") == {"query": "MyNat"}
    assert parse("drop-workspace") == {}


def test_text_and_json_values_come_inline_from_a_file_or_from_stdin(tmp_path: Path) -> None:
    (tmp_path / "probe.lean").write_text("#check two\n", encoding="utf-8")
    (tmp_path / "h.json").write_text('{"raw": {"value": "x"}}', encoding="utf-8")
    at = ("run-at", "A.lean", "--version", "1", "--line", "3", "--character", "0")
    assert parse(*at, "--text", "#check x")["text"] == "#check x"
    assert parse(*at, "--text", f"@{tmp_path / 'probe.lean'}")["text"] == "#check two\n"
    assert parse(*at, "--text", "-", stdin="exact h\n")["text"] == "exact h\n"
    assert parse(*at, "--text", "@@[simp] theorem t : True := trivial")["text"] == "@[simp] theorem t : True := trivial"
    h = parse("run-with", "A.lean", "--handle", f"@{tmp_path / 'h.json'}", "--text", "-", stdin="simp")
    assert h == {"path": "A.lean", "handle": {"raw": {"value": "x"}}, "text": "simp"}
    assert parse("release", "A.lean", "--handle", "-", stdin='{"a": 1}')["handle"] == {"a": 1}
    assert parse("release", "A.lean", "--handle", '{"a": [1]}')["handle"] == {"a": [1]}


@pytest.mark.parametrize(
    ("argv", "stdin", "fragment"),
    [
        (("release", "A.lean", "--handle", "{nope"), "", "not valid JSON"),
        (("release", "A.lean", "--handle", "[1]"), "", "expected a JSON object"),
        (("release", "A.lean", "--handle", '{"a": 1, "a": 2}'), "", "duplicate key"),
        (("release", "A.lean", "--handle", "@/nonexistent/h.json"), "", "cannot read"),
        (("run-with", "A.lean", "--handle", "-", "--text", "-"), "{}", "already read for --handle"),
        (("run-at", "A.lean", *("--version", "1", "--line", "0", "--character", "0"), "--text", "@[simp]"), "", "'@@'"),
    ],
)
def test_unreadable_or_malformed_values_are_invalid_input(argv: tuple[str, ...], stdin: str, fragment: str) -> None:
    with pytest.raises(BrokerError) as info:
        parse(*argv, stdin=stdin)
    assert info.value.code == codes.INVALID_INPUT and fragment in info.value.message


def test_relative_paths_follow_the_current_directory_inside_the_project(tmp_path: Path) -> None:
    root = project(tmp_path / "p")
    (root / "Sub").mkdir()
    assert resolve_cli_path("A.lean", str(root), str(root)) == "A.lean"
    assert resolve_cli_path("B.lean", str(root), str(root / "Sub")) == "Sub/B.lean"
    assert resolve_cli_path("../A.lean", str(root), str(root / "Sub")) == "A.lean"
    assert resolve_cli_path("Sub/B.lean", str(root), str(tmp_path)) == "Sub/B.lean"  # outside: root-relative
    assert resolve_cli_path("/abs/X.lean", str(root), str(root / "Sub")) == "/abs/X.lean"
    assert beam_cli.find_root(root / "Sub") == root
    assert beam_cli.find_root(Path("/")) is None


# ---- exit codes without Lean --------------------------------------------------------------------------
def test_invalid_input_exits_2_with_the_error_json_on_stderr(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path / "p")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(state_dir))
    code = beam_cli.main(["--root", str(root), "hover", "A.lean", "--version", "-1", "--line", "0", "--character", "0"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    error = json.loads(captured.err)
    assert error["code"] == codes.INVALID_INPUT and "version" in error["message"]
    assert beam_cli.main(["--root", str(tmp_path / "missing"), "sync", "A.lean"]) == 2
    assert json.loads(capsys.readouterr().err)["code"] == codes.INVALID_INPUT


def test_without_a_project_around_the_current_directory_the_root_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert beam_cli.main(["--compact", "sync", "A.lean"]) == 2
    error = json.loads(capsys.readouterr().err)
    assert error["code"] == codes.INVALID_INPUT and "pass --root" in error["message"]


def test_a_missing_lean_exits_3_with_runtime_setup(tmp_path: Path, state_dir: Path) -> None:
    root = project(tmp_path / "p")
    env = cli_env({"PATH": ""}, state_dir)
    result = Cli(env, root)("sync", "A.lean")
    assert result.code == 3 and result.stdout == ""
    assert result.error["code"] == RUNTIME_SETUP == "runtimeSetup"
    assert "lake" in result.error["message"]


def test_the_exit_code_table_maps_error_codes() -> None:
    assert beam_cli.exit_code(codes.INVALID_INPUT) == beam_cli.EXIT_USAGE == 2
    assert beam_cli.exit_code("runtimeSetup") == beam_cli.EXIT_SETUP == 3
    for code in (codes.CONTENT_MODIFIED, codes.INVALID_PARAMS, codes.WORKER_EXITED, codes.SYNC_BARRIER_INCOMPLETE):
        assert beam_cli.exit_code(code) == beam_cli.EXIT_ERROR == 1


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
        assert "lean_hover on A.lean" in first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and out == ""
    assert err.strip().endswith("beam: interrupted")


def test_event_lines_are_short_and_diagnostics_use_one_based_positions() -> None:
    from beam_broker import DiagnosticEvent, FileProgressEvent, PreparationEvent, SetupEvent

    sink = io.StringIO()
    printer = beam_cli.EventPrinter(sink)
    printer(PreparationEvent("lean_sync on A.lean: preparing the Lean workspace", "A.lean"))
    printer(SetupEvent("✔ [2/3] Built Demo.Basic", "A.lean"))
    for _ in range(2):
        printer(FileProgressEvent("A.lean", {"updates": 1, "done": False, "range_start_line": 2, "range_end_line": 5}))
    printer(FileProgressEvent("A.lean", {"updates": 3, "done": True}))
    item = {"path": "A.lean", "severity": "error", "range": {"start": {"line": 3, "character": 20}}, "message": "a\nb"}
    printer(DiagnosticEvent(item))
    assert sink.getvalue().splitlines() == [
        "beam: lean_sync on A.lean: preparing the Lean workspace",
        "beam: setup: ✔ [2/3] Built Demo.Basic",
        "beam: A.lean: elaborating lines 2-5",
        "beam: A.lean: elaborated",
        "A.lean:4:21: error: a",
        "  b",
    ]
    quiet = io.StringIO()
    beam_cli.EventPrinter(quiet, quiet=True)(DiagnosticEvent(item))
    assert quiet.getvalue() == ""


# ---- the real Lean lane -------------------------------------------------------------------------------
@pytest.mark.lean
def test_sync_of_a_clean_and_a_broken_file_both_exit_0_with_json_and_stderr_lines(lean_cli: Cli) -> None:
    clean = lean_cli("sync", "Demo/Proofs.lean")
    assert clean.code == 0, clean.stderr
    assert clean.json["path"] == "Demo/Proofs.lean" and clean.json["readiness"]["save_ready"] is True
    assert clean.stdout.startswith("{\n  ")  # pretty by default
    assert "beam: lean_sync on Demo/Proofs.lean: preparing the Lean workspace" in clean.stderr
    assert "beam: Demo/Proofs.lean: elaborated" in clean.stderr
    broken = lean_cli("--compact", "sync", "Demo/Broken.lean", "--diagnostics-in-result")
    assert broken.code == 0, broken.stderr
    assert len(broken.stdout.splitlines()) == 1
    assert broken.json["diagnostics"]["counts"]["error"] == 1 and broken.json["readiness"]["save_ready"] is False
    assert "Demo/Broken.lean:4:21: error: Type mismatch" in broken.stderr.splitlines()
    quiet = lean_cli("-q", "sync", "Demo/Broken.lean")
    assert quiet.code == 0 and quiet.stderr == ""


@pytest.mark.lean
def test_a_stale_version_exits_1_with_content_modified(lean_cli: Cli) -> None:
    result = lean_cli("hover", "Demo/Proofs.lean", "--version", "7", "--line", "3", "--character", "8")
    assert result.code == 1 and result.stdout == ""
    error = result.error
    assert error["code"] == codes.CONTENT_MODIFIED
    assert error["data"]["reason"] == "documentVersionMismatch" and error["data"]["expectedVersion"] == 7


@pytest.mark.lean
def test_the_root_is_discovered_from_a_subdirectory_and_paths_follow_the_cwd(lean_cli: Cli, demo_root: Path) -> None:
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


def test_the_commands_table_in_docs_is_generated_from_the_registry() -> None:
    from beam_broker._cli_args import commands_table

    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page.split("<!-- commands:start", 1)[1].split("-->", 1)[1].split("<!-- commands:end -->", 1)[0]
    assert section.lstrip("\n") == commands_table(), "regenerate: python -m beam_broker._cli_args"
