"""`lean-beam serve`, `status`, `stop` and `recover` (upstream Beam's daemon commands) as processes, on the fake Lean.

`serve` is the daemon in the foreground (`daemon serve`); `status` and `stop` are `daemon status|stop`; `recover`
clears what a dead daemon left (its socket and pid files) and, with `--force`, ends a daemon that runs or that holds
the project's lock without answering.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from beam_broker._cli import daemon_client as client

from .support import CLI, Cli, wait_dead

READY_TIMEOUT = 60


def _paths(cli: Cli) -> client.DaemonPaths:
    return client.paths_for(str(cli.cwd), {"XDG_RUNTIME_DIR": cli.env["XDG_RUNTIME_DIR"]})


def _ready(read_end: int) -> bytes:
    readable, _, _ = select.select([read_end], [], [], READY_TIMEOUT)
    assert readable, "the child never said it was ready"
    return os.read(read_end, 64)


@contextlib.contextmanager
def _child(argv: list[str], cli: Cli) -> Iterator[subprocess.Popen[bytes]]:
    """A child process this test started, killed (with its group) whatever happens."""
    proc = subprocess.Popen(
        argv, cwd=cli.cwd, env=cli.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        yield proc
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=READY_TIMEOUT)  # reaps it and closes its pipes


def _serving(cli: Cli) -> subprocess.Popen[bytes]:
    """`lean-beam serve` in the foreground, once it said it accepts connections (`--ready-fd`)."""
    read_end, write_end = os.pipe()
    argv = [*CLI, "--compact", "serve", "--ready-fd", str(write_end)]
    proc = subprocess.Popen(argv, cwd=cli.cwd, env=cli.env, pass_fds=(write_end,), start_new_session=True)
    cli.pids.append(proc.pid)
    os.close(write_end)
    try:
        assert _ready(read_end).startswith(b"ready")
    finally:
        os.close(read_end)
    return proc


def test_serve_runs_the_daemon_in_the_foreground_and_status_and_stop_drive_it(fake_cli: Cli) -> None:
    proc = _serving(fake_cli)
    paths = _paths(fake_cli)
    assert paths.pid.read_text().strip() == str(proc.pid), "the lock holder's pid is on record"
    status = fake_cli("--compact", "status")
    assert status.code == 0 and status.json["running"] is True and status.json["pid"] == proc.pid
    synced = fake_cli("-v", "--compact", "sync", "A.lean")
    assert synced.code == 0 and "answered by the daemon" in synced.stderr
    stopped = fake_cli("--compact", "stop")
    assert stopped.code == 0 and stopped.json == {"stopped": True, "pid": proc.pid, "root": str(fake_cli.cwd)}
    assert proc.wait(timeout=READY_TIMEOUT) == 0
    assert not paths.pid.exists() and not paths.socket.exists()
    # Finding: a foreground daemon logged on its stderr only, while `status` (and a client's error) named its log.
    assert status.json["log"] == str(paths.log) and "sync: ok in" in paths.log.read_text()
    gone = fake_cli("--compact", "status")
    assert gone.code == 1 and gone.json["running"] is False


def test_serve_replaces_a_plain_file_left_at_the_socket_path(fake_cli: Cli) -> None:
    # Finding: a regular file at the socket path (not a socket: a copy, a crash mid-write) made `serve` fail binding
    # with EADDRINUSE and a traceback; under the lock nothing else can be using that path.
    paths = _paths(fake_cli)
    client.ensure_private_dir(paths.directory)
    paths.socket.write_text("left over\n", encoding="utf-8")
    proc = _serving(fake_cli)
    assert paths.socket.is_socket()
    assert fake_cli("--compact", "stop").code == 0
    assert proc.wait(timeout=READY_TIMEOUT) == 0


def test_recover_removes_what_a_dead_daemon_left(fake_cli: Cli) -> None:
    started = fake_cli("--compact", "daemon", "start")
    assert started.code == 0, started.stderr
    paths = _paths(fake_cli)
    os.killpg(started.json["pid"], signal.SIGKILL)
    wait_dead(started.json["pid"])
    assert paths.socket.exists() and paths.pid.exists()
    recovered = fake_cli("--compact", "recover")
    assert recovered.code == 0, recovered.stderr
    assert recovered.json == {
        "recovered": True,
        "actions": [f"removed {paths.socket}", f"removed {paths.pid}"],
        "root": str(fake_cli.cwd),
    }
    assert fake_cli("--compact", "status").json["staleSocket"] is False
    again = fake_cli("--human", "recover")
    assert again.code == 0 and again.stdout == f"nothing to recover for {fake_cli.cwd}\n"


def test_recover_leaves_a_daemon_that_answers_unless_forced(fake_cli: Cli) -> None:
    started = fake_cli("--compact", "daemon", "start")
    assert started.code == 0, started.stderr
    pid = started.json["pid"]
    kept = fake_cli("--compact", "recover")
    assert kept.code == 0 and kept.json == {
        "recovered": False,
        "reason": "running",
        "pid": pid,
        "root": str(fake_cli.cwd),
    }
    assert fake_cli("--compact", "status").json["pid"] == pid
    forced = fake_cli("--compact", "recover", "--force")
    assert forced.code == 0, forced.stderr
    assert forced.json["actions"] == [f"stopped the daemon for {fake_cli.cwd} (pid {pid})"]
    wait_dead(pid)


HUNG = """\
import os, sys
from filelock import FileLock
lock = FileLock(sys.argv[1], timeout=0)
lock.acquire()
with open(sys.argv[2], "w") as pid:
    pid.write(f"{os.getpid()}\\n")
print("ready", flush=True)
sys.stdin.read()  # holds the lock and never answers: a hung daemon
"""


def test_recover_force_ends_a_daemon_that_holds_the_lock_but_does_not_answer(fake_cli: Cli) -> None:
    paths = _paths(fake_cli)
    client.ensure_private_dir(paths.directory)
    paths.socket.touch()  # its socket file, on which nothing accepts
    argv = [sys.executable, "-c", HUNG, str(paths.lock), str(paths.pid)]
    with _child(argv, fake_cli) as hung:
        assert hung.stdout is not None and _ready(hung.stdout.fileno()).startswith(b"ready")
        refused = fake_cli("--compact", "recover")
        assert refused.code == 3, refused.stdout
        assert refused.error["data"]["reason"] == "daemonNotAnswering"
        forced = fake_cli("--compact", "recover", "--force")
        assert forced.code == 0, forced.stderr
        assert hung.wait(timeout=READY_TIMEOUT) == -signal.SIGTERM
    assert forced.json["actions"] == [
        f"ended the daemon for {fake_cli.cwd} that did not answer (pid {hung.pid})",
        f"removed {paths.socket}",
        f"removed {paths.pid}",
    ]


def test_recover_removes_leftovers_only_while_it_holds_the_lock(
    fake_cli: Cli, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Finding: recover let the lock go before it removed the socket and pid files, so a daemon that started in
    # between (took the lock, bound its socket, recorded its pid) lost both, and stopped on seeing its socket gone.
    from filelock import FileLock, Timeout

    from beam_broker import cli as beam_cli

    monkeypatch.setenv("XDG_RUNTIME_DIR", fake_cli.env["XDG_RUNTIME_DIR"])
    paths = _paths(fake_cli)
    client.ensure_private_dir(paths.directory)
    paths.socket.touch()  # what a killed daemon left
    paths.pid.write_text("1\n")
    held_at_unlink: dict[str, bool] = {}
    unlink = Path.unlink

    def watched(self: Path, missing_ok: bool = False) -> None:
        if self in (paths.socket, paths.pid):
            probe = FileLock(str(paths.lock), timeout=0)  # what a daemon starting now would try
            try:
                probe.acquire()
            except Timeout:
                held_at_unlink[self.name] = True
            else:
                held_at_unlink[self.name] = False
                probe.release()
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", watched)
    assert beam_cli.main(["--root", str(fake_cli.cwd), "--compact", "recover"]) == 0
    assert held_at_unlink == {paths.socket.name: True, paths.pid.name: True}
    assert json.loads(capsys.readouterr().out)["actions"] == [f"removed {paths.socket}", f"removed {paths.pid}"]


STUCK = """\
import json, os, socket, sys
from filelock import FileLock
lock = FileLock(sys.argv[1], timeout=0)
lock.acquire()
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[2])
server.listen()
print("ready", flush=True)
held = []
while True:  # answers __status__, takes __shutdown__ and never stops: a daemon stuck in its shutdown
    conn, _ = server.accept()
    op = json.loads(conn.makefile().readline())["op"]
    if op == "__status__":
        conn.sendall(json.dumps({"result": {"running": True, "pid": os.getpid()}}).encode() + b"\\n")
        conn.close()
    else:
        conn.sendall(json.dumps({"result": {"stopping": True, "pid": os.getpid()}}).encode() + b"\\n")
        held.append(conn)
"""


def test_recover_force_ends_a_daemon_that_answers_but_does_not_stop_in_time(fake_cli: Cli) -> None:
    # Finding: `recover --force` asked a daemon that answers to stop, and when it did not stop within --timeout
    # failed with internalError and left it running, although --force is documented to end it.
    paths = _paths(fake_cli)
    client.ensure_private_dir(paths.directory)
    argv = [sys.executable, "-c", STUCK, str(paths.lock), str(paths.socket)]
    with _child(argv, fake_cli) as stuck:
        assert stuck.stdout is not None and _ready(stuck.stdout.fileno()).startswith(b"ready")
        forced = fake_cli("--compact", "recover", "--force", "--timeout", "2")
        assert forced.code == 0, forced.stdout + forced.stderr
        assert stuck.wait(timeout=READY_TIMEOUT) == -signal.SIGTERM
    assert forced.json["actions"] == [
        f"ended the daemon for {fake_cli.cwd} that did not stop within 2 s (pid {stuck.pid})",
        f"removed {paths.socket}",
    ]


def test_recover_force_spares_the_other_programs_of_a_foreground_serve_s_process_group(fake_cli: Cli) -> None:
    # Finding: `recover --force` signalled the process group of the daemon's pid. A foreground `serve` in a shell
    # pipeline (`lean-beam serve | tee log`) leads its job's group without leading a session, so `tee` died too.
    paths = _paths(fake_cli)
    client.ensure_private_dir(paths.directory)
    argv = [sys.executable, "-c", STUCK, str(paths.lock), str(paths.socket)]
    # A group of its own (as a shell's job), not a session (`process_group=` needs Python 3.11).
    stuck = subprocess.Popen(
        argv, cwd=fake_cli.cwd, env=fake_cli.env, stdout=subprocess.PIPE, preexec_fn=lambda: os.setpgid(0, 0)
    )
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    sibling = subprocess.Popen(sleeper, preexec_fn=lambda: os.setpgid(0, stuck.pid))
    try:
        assert stuck.stdout is not None and _ready(stuck.stdout.fileno()).startswith(b"ready")
        forced = fake_cli("--compact", "recover", "--force", "--timeout", "2")
        assert forced.code == 0, forced.stdout + forced.stderr
        assert stuck.wait(timeout=READY_TIMEOUT) == -signal.SIGTERM
        assert sibling.poll() is None, "a program of the serve's shell job was killed"
    finally:
        for proc in (stuck, sibling):
            with contextlib.suppress(OSError):
                proc.kill()
            proc.communicate(timeout=READY_TIMEOUT)
