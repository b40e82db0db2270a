"""The `lean-beam-mcp` command (`cli`): arguments, exit codes, `--version`, and what it imports.

`main` runs in-process where it returns (version, usage errors, self-check dispatch); `python -m beam_mcp` runs as
a child for what only a real process shows (the console entry point, `--help`, a cheap import).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from beam_mcp import cli
from tests.support.fixtures import fake_cmd
from tests.support.projects import fake_project

SERVER = [sys.executable, "-m", "beam_mcp"]


def test_version_names_the_server_the_protocols_and_the_interpreter(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("lean-beam-mcp ")
    assert out[1] == "mcp protocol: 2026-07-28 (also 2025-11-25)"
    assert out[-1] == f"python: {sys.executable}"


def test_version_lines_name_the_server_binary_when_known() -> None:
    assert "server binary: /opt/bin/lean-beam-mcp" in cli.version_lines("/opt/bin/lean-beam-mcp")
    assert not any(line.startswith("server binary") for line in cli.version_lines(None))


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--nope"], "unrecognized arguments"),
        (["--tols", "beam"], "unrecognized arguments: --tols beam; did you mean '--tools'?"),
        (["--self-chek=A.lean"], "unrecognized arguments: --self-chek=A.lean; did you mean '--self-check'?"),
        (["--lean-cmd", ""], "--lean-cmd must not be empty"),
        (["--lean-cmd", "'unclosed"], "--lean-cmd"),
        (["--http", "127.0.0.1:1", "--self-check", "A.lean"], "cannot be combined"),
        (["--allowed-host", "example.org"], "need --http"),
        (["--allowed-origin", "http://x:1"], "need --http"),
        (["--http-token-file", "/x"], "need --http"),
        (["--drain-timeout", "5"], "need --http"),
        (["--drain-linger", "2"], "need --http"),
        (["--http", "127.0.0.1:0", "--drain-linger", "-1"], "expected a number of seconds"),
        (["--tools", "seed"], "invalid choice: 'seed'"),
        (["--contract", "upstream"], "invalid choice: 'upstream'"),
        (["--contract", "upstream-2026-11", "--tools", "lean-lsp-mcp"], "not --tools lean-lsp-mcp"),
        (["--http", "127.0.0.1:99999"], "--http"),
        (["--http", "::1:80"], "brackets"),
        (["--max-open-documents", "0"], "positive whole number"),
        (["--max-source-mib", "x"], "positive whole number"),
    ],
)
def test_usage_errors_exit_2_and_say_why(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        (cli.MEMORY_BUDGET_ENV, "2GiB", "positive whole number, got '2GiB'"),
        (cli.MEMORY_BUDGET_ENV, "1.5", "positive whole number, got '1.5'"),
        (cli.IDLE_TIMEOUT_ENV, "10m", "number of seconds, got '10m'"),
    ],
)
def test_a_malformed_setting_in_the_environment_is_a_usage_error_not_silently_none(
    name: str, value: str, fragment: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator who sets a budget must get it or be told: a typo meant no budget at all, and no word of it."""
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        cli._parser().parse_args([])
    assert exited.value.code == 2
    assert fragment in capsys.readouterr().err


def test_settings_from_the_environment_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cli.MEMORY_BUDGET_ENV, "2048")
    monkeypatch.setenv(cli.IDLE_TIMEOUT_ENV, "600")
    args = cli._parser().parse_args([])
    assert args.memory_budget_mib == 2048 and args.idle_timeout == 600.0


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        (":0", ("127.0.0.1", 0)),
        ("8765", ("127.0.0.1", 8765)),
        ("[::1]:80", ("::1", 80)),
        ("example.org:65535", ("example.org", 65535)),
    ],
)
def test_addresses_default_to_loopback(value: str, address: tuple[str, int]) -> None:
    assert cli.parse_address(value) == address


@pytest.mark.parametrize("value", ["host:", "host:http", "host:65536", "::1:80", ""])
def test_bad_addresses_are_value_errors(value: str) -> None:
    with pytest.raises(ValueError, match=r"port|brackets"):
        cli.parse_address(value)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("localhost", True), ("LOCALHOST", True), ("127.0.0.1", True), ("127.9.9.9", True), ("::1", True),
     ("0.0.0.0", False), ("example.org", False), ("10.0.0.1", False)],
)  # fmt: skip
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert cli.is_loopback(host) is loopback


def test_the_self_check_is_dispatched_with_the_lean_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem t : True := trivial\n"})
    lean = shlex.join(fake_cmd())
    assert cli.main(["--lean-cmd", lean, "--self-check", str(root / "A.lean")]) == 0
    assert "self-check: ok" in capsys.readouterr().out


def test_a_self_check_of_a_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--self-check", str(tmp_path / "nope.lean")]) == 2
    assert "not a file" in capsys.readouterr().err


def test_an_interrupted_server_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(anyio, "run", interrupted)
    assert cli.main([]) == 130


# ---- as a process -----------------------------------------------------------------------------------------------
def test_version_and_help_as_a_process() -> None:
    version = subprocess.run([*SERVER, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.startswith("lean-beam-mcp ") and "mcp protocol: 2026-07-28" in version.stdout
    helped = subprocess.run([*SERVER, "--help"], capture_output=True, text=True, timeout=60, check=True)
    for flag in ("--version", "--lean-cmd", "--self-check", "--http", "workspace"):
        assert flag in helped.stdout
    bad = subprocess.run([*SERVER, "--nope"], capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "usage: lean-beam-mcp" in bad.stderr


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_into_a_pipe_whose_reader_went_away_exit_141_quietly(flag: str) -> None:
    # Finding: `lean-beam-mcp --version | head -1` ended in a BrokenPipeError traceback.
    with subprocess.Popen([*SERVER, flag], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the child has written anything: its write fails with EPIPE
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == cli.EXIT_BROKEN_PIPE == 141 and err == b""


def test_a_usage_error_into_a_pipe_whose_reader_went_away_keeps_status_2() -> None:
    # `lean-beam-mcp --tols 2>&1 | true` exited 141: the usage text took the broken-pipe path of `--help`.
    with subprocess.Popen([*SERVER, "--tols"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        proc.stdout.close()  # before the child has written anything: its write fails with EPIPE
        assert proc.wait(timeout=60) == 2


def test_importing_the_cli_does_not_import_the_lean_stack() -> None:
    # The broker's and beam-feedback's errors are light (the one exception boundary imports them); models, the
    # registry and the Lean client are not.
    heavy = (
        "('beam_broker.operations', 'beam_broker.models', 'beam_broker.broker', 'beam_lsp.client', "
        "'beam_feedback.models', 'beam_feedback.report', 'pydantic', 'lsprotocol')"
    )
    code = f"import sys, beam_mcp.cli; print(sorted(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_limit_flags_reach_the_broker(tmp_path: Path) -> None:
    root = fake_project(tmp_path / "p", {"Big.lean": "-- " + "x" * (2 * 1024 * 1024) + "\n"})
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    call = {"name": "lean_sync", "arguments": {"workspace": {"root": str(root)}, "path": "Big.lean"}, "_meta": meta}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}) + "\n"
    command = [*SERVER, "--lean-cmd", shlex.join(fake_cmd()), "--max-source-mib", "1", "--max-open-documents", "3"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line)
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())  # EOF only after the answer: EOF cancels pending calls
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    error = answer["result"]["structuredContent"]
    assert answer["result"]["isError"] is True and error["code"] == "invalidParams"
    assert error["data"]["limitBytes"] == 1024 * 1024, error


@pytest.mark.parametrize(
    ("flags", "count"),
    [([], 34), (["--tools", "all"], 34), (["--tools", "beam"], 24), (["--contract", "upstream-2026-11"], 24)],
)
def test_the_tools_flag_picks_the_listed_surface(flags: list[str], count: int) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}) + "\n"
    done = subprocess.run([*SERVER, *flags], input=line, capture_output=True, text=True, timeout=60, check=True)
    listed = {tool["name"]: tool for tool in json.loads(done.stdout)["result"]["tools"]}
    tools = list(listed)
    assert len(tools) == count and tools[23] == "lean_close"
    assert ("lean_outline" in tools) is ("lean_run_code" in tools) is (count == 34)
    hover = listed["lean_hover"]["inputSchema"]["properties"]
    assert ("version" in hover, "snapshot" in hover) == {
        (): (True, True),
        ("--tools", "all"): (True, True),
        ("--tools", "beam"): (True, False),
        ("--contract", "upstream-2026-11"): (False, True),
    }[tuple(flags)]


@pytest.mark.parametrize(
    ("lean_cmd", "warned"),
    [("/opt/lean-server --stdio", True), ("/opt/lake serve -- -Dserver.reportDelayMs=0", False)],
)
def test_a_lean_command_without_report_delay_zero_is_warned_about_at_start(lean_cmd: str, warned: bool) -> None:
    done = subprocess.run(
        [*SERVER, "--lean-cmd", lean_cmd], input="", capture_output=True, text=True, timeout=60, check=True
    )
    assert ("lacks -Dserver.reportDelayMs=0" in done.stderr) is warned, done.stderr
    assert done.stdout == ""  # logs go to stderr, never to the MCP stream
