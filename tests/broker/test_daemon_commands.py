"""`lean-beam stats` and `daemon start|status|stop` for a person: short sentences instead of JSON (the JSON forms and
the daemon processes themselves are `test_daemon.py`'s)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
from pathlib import Path

import pytest

from beam_broker import cli as beam_cli
from beam_broker._cli.daemon_commands import _started_text, _status_text
from tests.support.fixtures import fake_cmd
from tests.support.projects import fake_project

from .support import wait_dead


@pytest.fixture
def in_project(tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = fake_project(tmp_path / "proj", {"A.lean": "theorem x : True := trivial\n"})
    monkeypatch.chdir(root)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(state_dir))
    monkeypatch.setenv("BEAM_LEAN_SERVER_CMD", shlex.join(fake_cmd()))
    return root


def human(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = beam_cli.main(["--human", *argv])
    return code, capsys.readouterr().out.splitlines()


def test_start_status_and_stop_read_as_sentences(in_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = human(capsys, "daemon", "status")
    assert code == 1 and lines == [f"no daemon runs for {in_project}"]
    code, lines = human(capsys, "daemon", "start")
    assert code == 0, lines
    pid = int(lines[0].split("(pid ")[1].rstrip(")"))
    try:
        assert lines[0] == f"started a daemon for {in_project} (pid {pid})" and lines[1].startswith("log: ")
        code, lines = human(capsys, "daemon", "start")
        assert lines[0] == f"a daemon already runs for {in_project} (pid {pid})"
        code, lines = human(capsys, "daemon", "status")
        assert code == 0 and lines[0].startswith(f"a daemon runs for {in_project} (pid {pid}, up 0 min ")
        assert lines[1] == f"Lean command: {shlex.join(fake_cmd())}"
        code, lines = human(capsys, "stats")
        assert code == 0 and json.loads("\n".join(lines))["workspaces"] == {}  # stats stay JSON: a dump to read
        code, lines = human(capsys, "daemon", "stop")
        assert code == 0 and lines == [f"stopped the daemon for {in_project} (pid {pid})"]
        wait_dead(pid)
        code, lines = human(capsys, "daemon", "stop")
        assert code == 0 and lines == [f"no daemon runs for {in_project}"]
    finally:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def test_a_stale_socket_is_mentioned() -> None:
    down = {"running": False, "root": "/p", "staleSocket": True}
    assert _status_text(down) == [
        "no daemon runs for /p (a stale socket file is left; the next `daemon start` replaces it)"
    ]
    assert _started_text({"started": False, "root": "/p", "pid": 3, "log": "/l"}) == [
        "a daemon already runs for /p (pid 3)",
        "log: /l",
    ]
    running = {
        "running": True,
        "root": "/p",
        "pid": 3,
        "uptimeMs": 125_000,
        "serverCmd": None,
        "socket": "s",
        "log": "l",
    }
    assert _status_text(running)[:2] == ["a daemon runs for /p (pid 3, up 2 min 5 s)", "Lean command: None"]
