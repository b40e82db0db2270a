"""`lean-beam` as a person and as a script see it: a child process on a pseudo-terminal, and the same piped.

On a terminal (stdout and stderr on a pty, as in a shell) the output is text and the progress one live line that
is cleared before anything else is written; `screen()` replays what the terminal shows at the end. Piped, the
output is the MCP tool's JSON and progress plain lines on stderr. The real-Lean lane checks each output form,
positions as `lean` prints them (compared with `lean` itself), the optional version in-process and through the
daemon, the exit codes, and `doctor`; the fake lane checks the same machinery, and that a warm call through the
daemon does not load the Lean client stack.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shlex
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.fixtures import fake_cmd
from tests.support.projects import fake_project
from tests.support.toolchain import Toolchain

from .support import CLI, CLI_TIMEOUT, Cli, Result, cli_env

CLEAR = "\r\x1b[K"
UNICODE = "prelude\nimport Demo.Basic\n\n/- 𝔸𝔹 é -/ def u : MyTrue := MyNat.zero\n"


# ---- a pseudo-terminal --------------------------------------------------------------------------------
def pty_run(args: list[str], cwd: Path, env: Mapping[str, str], timeout: float = CLI_TIMEOUT) -> Result:
    """Run `lean-beam ARGS` with stdin, stdout and stderr on a 120x40 pseudo-terminal; all it wrote, as text."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [*CLI, *args],
        cwd=cwd,
        env={**env, "TERM": "xterm"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while True:
            readable, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            assert readable, f"lean-beam {shlex.join(args)} wrote nothing for {timeout} s"
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has exited
                break
            if not chunk:
                break
            data += chunk
        code = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = data.decode("utf-8").replace("\r\n", "\n")
    return Result(code, text, "")


def screen(raw: str) -> list[str]:
    """The lines a terminal shows after `raw` (carriage returns and erase-line applied)."""
    lines, col, i = [""], 0, 0
    while i < len(raw):
        if raw.startswith("\x1b[K", i):
            lines[-1] = lines[-1][:col]
            i += 3
            continue
        ch = raw[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("")
            col = 0
        else:
            line = lines[-1].ljust(col)
            lines[-1] = line[:col] + ch + line[col + 1 :]
            col += 1
        i += 1
    return lines[:-1] if lines[-1] == "" else lines


def test_the_screen_replays_carriage_returns_and_erase_line() -> None:
    assert screen("beam: 1/9 lines" + CLEAR + "beam: 9/9" + CLEAR + "A.lean:1:0: error: x\nsummary\n") == [
        "A.lean:1:0: error: x",
        "summary",
    ]
    assert screen("abc\rX") == ["Xbc"]


# ---- the fake lane ------------------------------------------------------------------------------------
@pytest.fixture
def slow_cli(tmp_path: Path, state_dir: Path) -> Cli:
    """`lean-beam` over the fake Lean, which takes 300 ms to elaborate (so there is progress to show)."""
    root = fake_project(
        tmp_path / "proj", {"A.lean": "theorem x : True := by\n  trivial\n/- 𝔸 -/ def b := ERROR_HERE\n"}
    )
    cmd = shlex.join(fake_cmd({"elab_ms": 300}))
    return Cli(cli_env(dict(os.environ), state_dir, BEAM_LEAN_SERVER_CMD=cmd), root)


def test_on_a_terminal_sync_shows_live_progress_then_only_diagnostics_and_a_summary(slow_cli: Cli) -> None:
    result = pty_run(["sync", "A.lean"], slow_cli.cwd, slow_cli.env)
    assert result.code == 1, result.stdout  # Lean reported an error
    assert "lean_" not in result.stdout  # no MCP tool name on screen
    assert CLEAR + "beam: A.lean: 0/3 lines, " in result.stdout and CLEAR + "beam: A.lean: 3/3 lines, " in result.stdout
    assert screen(result.stdout) == [
        "A.lean:3:17: error: unknown identifier 'ERROR_HERE'",  # column 17 in code points (18 UTF-16 units)
        "A.lean (version 1): 1 error, not save-ready",
    ]
    quiet = pty_run(["-q", "sync", "A.lean"], slow_cli.cwd, slow_cli.env)
    assert CLEAR not in quiet.stdout and screen(quiet.stdout) == screen(result.stdout)


def test_in_a_pipe_sync_prints_the_json_and_plain_progress_lines(slow_cli: Cli) -> None:
    result = slow_cli("sync", "A.lean")
    assert result.code == 1 and result.json["diagnostics"]["counts"]["error"] == 1
    assert "items" not in result.json["diagnostics"]  # exactly what the MCP tool returns for these arguments
    assert result.stderr.splitlines() == [
        "beam: A.lean: preparing the Lean workspace",
        "beam: A.lean: elaborating lines 1-3",
        "A.lean:3:17: error: unknown identifier 'ERROR_HERE'",
        "beam: A.lean: elaborated",
    ]
    text = slow_cli("--human", "-q", "sync", "A.lean")
    assert text.code == 1 and text.stdout.splitlines()[-1] == "A.lean (version 1): 1 error, not save-ready"


def test_on_a_terminal_goals_at_a_lean_position_without_a_version(slow_cli: Cli) -> None:
    result = pty_run(["goals", "A.lean:1:20", "--mode", "before"], slow_cli.cwd, slow_cli.env)
    assert result.code == 0 and screen(result.stdout) == ["⊢ True"]
    piped = slow_cli("goals", "A.lean:1:20", "--mode", "before")
    assert piped.code == 0 and piped.json["goals"][0]["target"] == "True"
    usage = pty_run(["goals", "A.lean", "--mode", "before"], slow_cli.cwd, slow_cli.env)
    assert usage.code == 2
    assert screen(usage.stdout) == [
        "lean-beam: error: `lean-beam goals` needs FILE:LINE:COL (or --line N --character N)"
    ]


def test_a_warm_call_through_the_daemon_does_not_load_the_lean_client_stack(fake_cli: Cli) -> None:
    started = fake_cli("daemon", "start")
    assert started.code == 0, started.stderr
    probe = (
        "import sys\n"
        "from beam_broker import cli\n"
        "code = cli.main(['-v', 'hover', 'A.lean:1:8'])\n"
        "print(repr(code), file=sys.stderr)\n"
        "print('MODULES', ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=fake_cli.cwd,
        env=fake_cli.env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        check=False,
    )
    assert "answered by the daemon" in proc.stderr and "\n0\n" in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["contents"]["value"] == "```lean\nx\n```"
    modules = set(proc.stderr.split("MODULES ", 1)[1].split())
    heavy = {m for m in modules if m.split(".")[0] in ("lsprotocol", "cattrs", "filelock", "attrs")}
    heavy |= modules & {
        "beam_lsp.client",
        "beam_broker.broker",
        "beam_broker.runtime",
        "beam_broker._cli.daemon",
        "beam_broker._cli.doctor",
        "beam_broker._cli.completion",
    }
    assert heavy == set()


# ---- the real Lean lane -------------------------------------------------------------------------------
def lean_says(toolchain: Toolchain, root: Path, path: str) -> list[str]:
    """What `lean FILE` itself prints for a file of the built demo project."""
    env = {**toolchain.env(), "LEAN_PATH": str(root / ".lake" / "build" / "lib" / "lean")}
    proc = subprocess.run(
        [str(toolchain.lean), path], cwd=root, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False
    )
    return proc.stdout.splitlines()


@pytest.mark.lean
def test_a_terminal_shows_diagnostics_exactly_as_lean_prints_them(
    lean_cli: Cli, demo_root: Path, lean_toolchain: Toolchain
) -> None:
    (demo_root / "Demo" / "U.lean").write_text(UNICODE, encoding="utf-8")
    lean = lean_says(lean_toolchain, demo_root, "Demo/U.lean")
    assert lean[0] == "Demo/U.lean:4:29: error: Type mismatch"  # column 29: code points, from 0
    result = pty_run(["sync", "Demo/U.lean"], demo_root, lean_cli.env)
    assert result.code == 1 and CLEAR + "beam: Demo/U.lean: " in result.stdout
    assert screen(result.stdout) == [*lean, "Demo/U.lean (version 1): 1 error, not save-ready"]
    piped = lean_cli("sync", "Demo/U.lean")
    assert piped.code == 1 and piped.json["readiness"]["blocking_diagnostics"][0]["range"]["start"] == {
        "line": 3,
        "character": 31,  # the same place in LSP terms: UTF-16 units
    }
    assert lean[0] in piped.stderr.splitlines()
    clean = pty_run(["sync", "Demo/Proofs.lean"], demo_root, lean_cli.env)
    assert clean.code == 0 and screen(clean.stdout) == [
        "Demo/Proofs.lean (version 1): no errors or warnings, save-ready"
    ]


@pytest.mark.lean
def test_navigation_at_lean_positions_on_a_terminal_and_in_a_pipe(lean_cli: Cli, demo_root: Path) -> None:
    (demo_root / "Demo" / "U.lean").write_text(UNICODE, encoding="utf-8")
    hover = pty_run(["hover", "Demo/Proofs.lean:4:31"], demo_root, lean_cli.env)
    assert hover.code == 0 and screen(hover.stdout) == ["myTrue : MyTrue", "", "*import Demo.Basic*"]
    piped = lean_cli("hover", "Demo/Proofs.lean:4:31")
    assert piped.code == 0 and piped.json["range"]["start"] == {"line": 3, "character": 27}
    beyond = lean_cli("hover", "Demo/U.lean:4:29")  # where `lean` puts the error: after two astral characters
    assert beyond.code == 0 and "MyNat.zero" in beyond.json["contents"]["value"]
    assert beyond.json["range"]["start"] == {"line": 3, "character": 31}
    symbols = pty_run(["document-symbols", "Demo/Proofs.lean"], demo_root, lean_cli.env)
    assert screen(symbols.stdout) == ["theorem byTerm   4:8", "theorem idProof  6:8", "def two          9:4"]
    assert [s["name"] for s in lean_cli("document-symbols", "Demo/Proofs.lean").json["result"]] == [
        "byTerm",
        "idProof",
        "two",
    ]
    definition = pty_run(["definition", "Demo/Proofs.lean:4:31"], demo_root, lean_cli.env)
    assert screen(definition.stdout) == ["Demo/Basic.lean:13:8: theorem myTrue : MyTrue := MyTrue.intro"]


@pytest.mark.lean
def test_goals_and_probes_on_a_terminal_and_in_a_pipe(lean_cli: Cli, demo_root: Path) -> None:
    goals = pty_run(["goals", "Demo/Goals.lean:5:2", "--mode", "before"], demo_root, lean_cli.env)
    assert goals.code == 0 and screen(goals.stdout) == ["p : Prop", "hp : p", "⊢ p"]
    assert lean_cli("goals", "Demo/Goals.lean:5:2", "--mode", "before").json["goals"][0]["target"] == "p"
    check = pty_run(["run-at", "Demo/Proofs.lean:9:5", "--text", "#check two"], demo_root, lean_cli.env)
    assert check.code == 0 and screen(check.stdout) == ["two : MyNat"]
    failing = pty_run(["run-at", "Demo/Goals.lean:5:2", "--text", "skip"], demo_root, lean_cli.env)
    assert failing.code == 0  # a probe that does not elaborate is a successful call
    assert screen(failing.stdout) == ["error: unknown tactic", "", "p : Prop", "hp : p", "⊢ p"]
    piped = lean_cli("run-at", "Demo/Goals.lean:5:2", "--text", "skip")
    assert piped.json["success"] is False and piped.json["proof_state"]["goals"][0]["target"] == "p"


@pytest.mark.lean
def test_save_summaries_and_a_save_refused_for_errors(lean_cli: Cli, demo_root: Path) -> None:
    saved = pty_run(["save", "Demo/Proofs.lean"], demo_root, lean_cli.env)
    olean = demo_root / ".lake" / "build" / "lib" / "lean" / "Demo" / "Proofs.olean"
    assert saved.code == 0 and screen(saved.stdout)[-1] == f"Demo/Proofs.lean (version 1): saved Demo.Proofs to {olean}"
    refused = pty_run(["save", "Demo/Broken.lean"], demo_root, lean_cli.env)
    lines = screen(refused.stdout)
    assert refused.code == 1 and lines[0] == "Demo/Broken.lean:4:20: error: Type mismatch"
    assert lines[-2:] == [
        "Demo/Broken.lean (version 1): 1 error, not save-ready",
        "lean-beam: not saved: the file has errors",
    ]
    assert lines.count("Demo/Broken.lean:4:20: error: Type mismatch") == 1  # the live one and the verdict's: once
    piped = lean_cli("save", "Demo/Broken.lean")
    assert piped.code == 1 and piped.stdout == "" and piped.error["data"]["sync"]["readiness"]["save_ready"] is False


@pytest.mark.lean
def test_the_version_is_optional_in_the_daemon_and_checked_when_given(lean_cli: Cli, demo_root: Path) -> None:
    started = lean_cli("daemon", "start")
    assert started.code == 0, started.stderr
    first = pty_run(["-v", "hover", "Demo/Proofs.lean:4:31"], demo_root, lean_cli.env)
    assert first.code == 0 and "answered by the daemon" in first.stdout
    assert screen(first.stdout)[-3:] == ["myTrue : MyTrue", "", "*import Demo.Basic*"]
    version = lean_cli("update", "Demo/Proofs.lean").json["version"]
    explicit = lean_cli("hover", "Demo/Proofs.lean:4:31", "--version", str(version))
    assert explicit.code == 0 and explicit.json["range"]["start"] == {"line": 3, "character": 27}
    stale = pty_run(["hover", "Demo/Proofs.lean:4:31", "--version", str(version + 5)], demo_root, lean_cli.env)
    assert stale.code == 4 and screen(stale.stdout)[-1].startswith("lean-beam: error: document version mismatch")
    path = demo_root / "Demo" / "Proofs.lean"
    path.write_text(path.read_text(encoding="utf-8").replace("byTerm", "byTerm'"), encoding="utf-8")
    after = lean_cli("hover", "Demo/Proofs.lean:4:31")  # reads the edit first: a new version, answered for it
    assert after.code == 0 and "myTrue" in after.json["contents"]["value"]
    again = lean_cli("update", "Demo/Proofs.lean").json
    assert isinstance(again.pop("snapshot"), str)  # the opaque token beside the version
    assert again == {"workspace": {"root": str(demo_root)}, "version": version + 1, "changed": False}
    stopped = lean_cli("daemon", "stop")
    assert stopped.code == 0


@pytest.mark.lean
def test_doctor_on_a_terminal(lean_cli: Cli, demo_root: Path) -> None:
    result = pty_run(["doctor"], demo_root, lean_cli.env)
    lines = screen(result.stdout)
    assert result.code == 0 and lines[-1] == "all checks passed", lines
    assert [line.split()[0] for line in lines[:-1]] == ["ok"] * 7
