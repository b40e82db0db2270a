"""`lean-beam-mcp --self-check FILE` (`_selfcheck`): a child server syncs FILE over stdio; every phase is bounded.

The check runs in-process (it starts `python -m beam_mcp` as its child, as an MCP client would) against the fake
Lean server; the last tests run the whole command as a process.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from beam_mcp import _selfcheck
from beam_mcp.errors import SelfCheckError
from tests.support.fixtures import fake_cmd
from tests.support.projects import fake_project

SERVER = [sys.executable, "-m", "beam_mcp"]

pytestmark = pytest.mark.anyio


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return fake_project(tmp_path / "proj", {"A.lean": "theorem t : True := trivial\n-- WARN_HERE\n"}) / "A.lean"


def test_a_working_server_passes_with_a_summary(target: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _selfcheck.run(str(target), fake_cmd()) == 0
    out = capsys.readouterr().out
    assert out.startswith("lean-beam-mcp self-check: ok (")
    assert f"workspace: {target.parent}" in out
    assert "A.lean version 1: 0 error(s), 1 warning(s), save_ready=true" in out
    assert "server: lean-beam-mcp " in out and "progress notifications: " in out


def test_a_file_in_a_subdirectory_uses_the_nearest_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fake_project(tmp_path / "proj", {"Sub/Dir/B.lean": "def b := 1\n"})
    assert _selfcheck.run(str(root / "Sub" / "Dir" / "B.lean"), fake_cmd()) == 0
    assert f"workspace: {root}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ("missing", "not a file"),
        ("outside", "not inside a Lean/Lake project"),
        ("not lean", "lakefile.toml is not a Lean source file (a `.lean` file of the project)"),
    ],
)
def test_a_bad_file_is_a_usage_error(
    tmp_path: Path, setup: str, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nope.lean"
    if setup == "outside":
        target = tmp_path / "loose" / "A.lean"
        target.parent.mkdir()
        target.write_text("", encoding="utf-8")
    if setup == "not lean":  # a newcomer's first guess at "a file of the project"
        target = fake_project(tmp_path / "proj", {"lakefile.toml": 'name = "proj"\n'}) / "lakefile.toml"
    assert _selfcheck.run(str(target), fake_cmd()) == 2
    assert fragment in capsys.readouterr().err


def test_a_server_that_cannot_start_lean_fails_the_check(
    target: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _selfcheck.run(str(target), [str(tmp_path / "no-such-lean")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("lean-beam-mcp self-check failed: lean_sync: JSON-RPC error -32600")
    assert "could not set up Lean Beam MCP runtime" in err


def test_a_tool_error_fails_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = fake_project(tmp_path / "proj")
    (root / "Bad.lean").write_bytes(b"\xff\xfe not utf-8\n")
    assert _selfcheck.run(str(root / "Bad.lean"), fake_cmd()) == 1
    assert "lean_sync: tool error invalidParams" in capsys.readouterr().err


async def test_a_sync_that_never_answers_times_out_with_the_phase_named(target: Path) -> None:
    # The sync stalls for good: the bound only has to leave the server time to start (slow on a loaded machine).
    lean = fake_cmd({"stall": ["textDocument/waitForDiagnostics"]})
    with pytest.raises(SelfCheckError, match=r"^lean_sync: no answer within 5 s"):
        await _selfcheck.check(target, target.parent, lean, 5.0)


WORKER = """
import os, subprocess, sys
# Like Lean's watchdog, start a file worker in a session of its own (outside the server's process group), then
# become the (fake) Lean server. The worker is busy (it waits for a signal): only a kill ends it.
worker = subprocess.Popen(
    [sys.executable, "-c", "import signal; signal.pause()"], start_new_session=True, stdin=subprocess.DEVNULL
)
with open(sys.argv[1], "w") as f:
    f.write(str(worker.pid))
os.execv(sys.argv[2], sys.argv[2:])
"""


async def test_a_failed_check_leaves_no_lean_process_running(tmp_path: Path) -> None:
    # The child server starts Lean in a session of its own, and Lean its workers in sessions of their own: killing
    # the child's process group reached neither, and a worker kept running after the check had failed.
    root = fake_project(tmp_path / "proj")
    (root / "Bad.lean").write_bytes(b"\xff\xfe not utf-8\n")  # Lean starts, then the read fails: a tool error
    pid_file = tmp_path / "worker.pid"
    lean = [sys.executable, "-c", WORKER, str(pid_file), *fake_cmd()]
    try:
        with pytest.raises(SelfCheckError, match="lean_sync: tool error invalidParams"):
            await _selfcheck.check(root / "Bad.lean", root, lean, 60.0)
        handle = os.pidfd_open(int(pid_file.read_text(encoding="utf-8")))  # readable once the worker has exited
        try:
            with anyio.fail_after(10):
                await anyio.wait_readable(handle)
        finally:
            os.close(handle)
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text(encoding="utf-8")), signal.SIGKILL)


def test_the_check_is_bounded_by_its_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_selfcheck.TIMEOUT_ENV, raising=False)
    assert _selfcheck.phase_timeout() == _selfcheck.DEFAULT_TIMEOUT
    monkeypatch.setenv(_selfcheck.TIMEOUT_ENV, "2500")
    assert _selfcheck.phase_timeout() == 2.5
    for bad in ("0", "-1", "soon", ""):
        monkeypatch.setenv(_selfcheck.TIMEOUT_ENV, bad)
        with pytest.raises(SelfCheckError, match=_selfcheck.TIMEOUT_ENV):
            _selfcheck.phase_timeout()


def test_a_bad_timeout_setting_fails_the_check(
    target: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(_selfcheck.TIMEOUT_ENV, "soon")
    assert _selfcheck.run(str(target), fake_cmd()) == 1
    assert _selfcheck.TIMEOUT_ENV in capsys.readouterr().err


DISCOVERED = '{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"resultType":"complete"}}'
SYNCED = (
    '{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","isError":false,"structuredContent":'
    '{"path":"A.lean","version":1,"document_progress":{"done":true}}}}'
)
NOT_COMPLETE = SYNCED.replace('"resultType":"complete",', "")
NO_PROGRESS = SYNCED.replace("document_progress", "other")


def peer(synced: str, then: str = "cat >/dev/null") -> str:
    """A scripted server: answers discovery, then the sync with `synced`, then does `then`."""
    return f"read l; echo '{DISCOVERED}'; read l; echo '{synced}'; {then}"


@pytest.mark.parametrize(
    ("script", "fragment"),
    [
        ("exit 3", "the server closed its"),  # before it read anything
        ("read l; exit 3", "the server closed its output before answering"),
        ("read l; echo hello; cat >/dev/null", "the server wrote a line that is not JSON"),
        (
            """read l; echo '{"jsonrpc":"2.0","id":1,"result":{}}'; cat >/dev/null""",
            "server/discover: unexpected answer",
        ),
        ("cat >/dev/null", "server/discover: no answer within 2 s"),
        (peer(NOT_COMPLETE), "lean_sync: result has no resultType 'complete'"),
        (peer(NO_PROGRESS), "lean_sync: result has no document_progress"),
        (peer(SYNCED, "cat >/dev/null; exit 5"), "shutdown: the server exited with status 5"),
        (peer(SYNCED, "exec tail -f /dev/null"), "shutdown: the server did not exit within 2 s of EOF"),
    ],
)
async def test_each_phase_names_what_went_wrong(
    script: str, fragment: str, target: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = tmp_path / "server"
    server.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    server.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(server))  # the self-check starts `<python> -m beam_mcp`: this script
    with pytest.raises(SelfCheckError, match=fragment):
        await _selfcheck.check(target, target.parent, None, 2.0)


async def test_a_server_that_cannot_be_started_fails_the_check(
    target: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with pytest.raises(SelfCheckError, match="could not start the server"):
        await _selfcheck.check(target, target.parent, None, 2.0)


# ---- as a process -----------------------------------------------------------------------------------------------
def test_self_check_passes_with_a_working_server(target: Path) -> None:
    done = subprocess.run(
        [*SERVER, "--lean-cmd", shlex.join(fake_cmd()), "--self-check", str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "self-check: ok" in done.stdout and "A.lean version 1: 0 error(s)" in done.stdout


@pytest.mark.parametrize(
    ("setup", "code", "fragment"),
    [
        ("missing", 2, "not a file"),
        ("outside", 2, "not inside a Lean/Lake project"),
        ("badcmd", 1, "could not set up Lean Beam MCP runtime"),
    ],
)
def test_self_check_failures_are_clear(tmp_path: Path, setup: str, code: int, fragment: str) -> None:
    args = [*SERVER]
    if setup == "missing":
        target = tmp_path / "nope.lean"
    elif setup == "outside":
        target = tmp_path / "loose" / "A.lean"
        target.parent.mkdir()
        target.write_text("", encoding="utf-8")
    else:
        target = fake_project(tmp_path / "proj", {"A.lean": ""}) / "A.lean"
        args += ["--lean-cmd", str(tmp_path / "no-such-lean")]
    env = {**os.environ, "LEAN_BEAM_MCP_SELF_CHECK_TIMEOUT_MS": "60000"}
    done = subprocess.run(
        [*args, "--self-check", str(target)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == code
    assert fragment in done.stderr
    assert done.stderr.startswith("lean-beam-mcp") and "Traceback" not in done.stderr  # one clear line
