"""`lean-beam stats`, `lean-beam daemon start|stop|status|serve` and `serve|status|stop|recover`: the daemon's commands.

Owns their subparsers and handlers: starting a detached daemon (after checking that a Lean server command
exists), stopping it, reporting its status and statistics (JSON, or a few lines for a person), and recovering from
a daemon that died or stopped answering. `serve`, `status`, `stop` and `recover` are upstream Beam's spellings
(a foreground `lean-beam serve` owns the session); `daemon serve|status|stop` do the same. The server is
`daemon`'s and the protocol `daemon_client`'s; this module only drives them.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
from collections.abc import Mapping
from typing import Any, Final

from beam_broker.config import BrokerConfig, server_command
from beam_broker.errors import INTERNAL_ERROR, RUNTIME_SETUP, BrokerError, invalid_params
from beam_lsp import kill_tree

from . import daemon_client as client
from .common import EXIT_OK, Options, Output, run, workspace_root

DEFAULT_TIMEOUT: Final = 60.0
EXIT_NOT_RUNNING: Final = 1
"""`daemon status` when no daemon runs (its own meaning of 1, kept from before the exit-code table)."""
SERVE_HELP: Final = "run the daemon in the foreground (logs on stderr and in its log; Ctrl-C or `stop` ends it)"
STATUS_HELP: Final = "print root, pid, uptime and statistics; exit 1 when not running"
STOP_HELP: Final = "stop the daemon and wait until its Lean servers exit"


def add_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add `stats` and `daemon` (with its actions) to the `lean-beam` parser."""
    stats = commands.add_parser(
        "stats",
        parents=[common],
        help="the daemon's statistics: workspaces, Lean sessions, per-operation counts and latencies",
        description="Print the statistics of the daemon serving this project (sessions started, requests, "
        "per-operation latencies), as JSON. Without a daemon there is nothing to report: it says so on stderr "
        f"and exits {EXIT_NOT_RUNNING}.",
    )
    stats.set_defaults(handler=_stats)
    daemon = commands.add_parser(
        "daemon",
        parents=[common],
        help="start, stop or inspect the background broker of this project",
        description="A daemon keeps one broker (and its warm Lean server) for a project root on a unix socket "
        "in $XDG_RUNTIME_DIR/beam (or ~/.cache/beam). Commands use it when it answers. It exits on `daemon "
        "stop`, on SIGTERM, and when the project directory is removed. It keeps the environment and Lean "
        "command it was started with.",
    )
    actions = daemon.add_subparsers(dest="daemon_command", metavar="ACTION", title="actions", required=True)
    start = actions.add_parser("start", parents=[common], help="start the daemon in the background and print its pid")
    start.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="wait this long for it")
    start.set_defaults(handler=_daemon_start)
    stop = actions.add_parser("stop", parents=[common], help="stop the daemon and wait until its Lean servers exit")
    stop.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="wait this long for it")
    stop.set_defaults(handler=_daemon_stop)
    status = actions.add_parser("status", parents=[common], help=STATUS_HELP)
    status.set_defaults(handler=_daemon_status)
    _serve_parser(actions.add_parser("serve", parents=[common], help=SERVE_HELP))
    # upstream Beam's spellings: a foreground `lean-beam serve` owning the session, and its status/stop/recover
    _serve_parser(
        commands.add_parser(
            "serve",
            parents=[common],
            help=f"{SERVE_HELP} (as `daemon serve`)",
            description="Serve this project's broker (and its warm Lean server) on its unix socket in the "
            "foreground, as upstream Beam's `lean-beam serve` does: commands use it while it runs. Ctrl-C, SIGTERM "
            "or `lean-beam stop` ends it. `lean-beam daemon start` runs the same daemon in the background.",
        )
    )
    top_status = commands.add_parser("status", parents=[common], help=f"{STATUS_HELP} (as `daemon status`)")
    top_status.set_defaults(handler=_daemon_status)
    top_stop = commands.add_parser("stop", parents=[common], help=f"{STOP_HELP} (as `daemon stop`)")
    top_stop.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="wait this long for it")
    top_stop.set_defaults(handler=_daemon_stop)
    recover = commands.add_parser(
        "recover",
        parents=[common],
        help="clear what a dead or unresponsive daemon left behind (--force: also end a daemon that holds the "
        "project but does not answer, or one that runs)",
        description="Recover this project's daemon state. A daemon that died leaves its socket file: it is removed. "
        "A daemon that holds the project's lock but does not answer is ended only with --force (SIGTERM to it and "
        "its Lean servers), as is a healthy one. Prints what was done.",
    )
    recover.add_argument("--force", action="store_true", help="also end a daemon that runs or does not answer")
    recover.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="wait this long for it")
    recover.set_defaults(handler=_recover)


def _serve_parser(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--watch-interval", type=float, default=None, help=argparse.SUPPRESS)
    serve.set_defaults(handler=_daemon_serve)


def _stats(args: argparse.Namespace, options: Options) -> int:
    paths = client.paths_for(workspace_root(options))

    async def get() -> dict[str, Any] | None:
        try:
            return await client.request(paths, client.STATS)
        except client.DaemonUnavailable as exc:
            options.note(f"{exc}")
            return None

    answer = run(get)
    if answer is None:  # a broker made for the question would know nothing: say so instead of printing its zeros
        options.terminal.print_err(
            f"lean-beam: no daemon runs for {paths.root}: no statistics to show (`lean-beam daemon start` starts one)"
        )
        return EXIT_NOT_RUNNING
    return Output(options).finish(answer, lambda value: _json_lines(value))


def _json_lines(value: Mapping[str, Any]) -> list[str]:
    import json

    return json.dumps(value, ensure_ascii=False, indent=2).splitlines()


def _daemon_paths(options: Options) -> client.DaemonPaths:
    return client.paths_for(workspace_root(options))


def _summary(current: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    keys = ("pid", "root", "socket", "log")
    return {**extra, **{k: current.get(k) for k in keys}}


def _started_text(value: Mapping[str, Any]) -> list[str]:
    verb = "started a daemon" if value.get("started") else "a daemon already runs"
    return [f"{verb} for {value.get('root')} (pid {value.get('pid')})", f"log: {value.get('log')}"]


def _daemon_start(args: argparse.Namespace, options: Options) -> int:
    paths = _daemon_paths(options)
    out = Output(options)
    current = run(lambda: client.status(paths))
    if current is not None:
        options.note(f"a daemon already serves {paths.root}")
        out.value(_summary(current, started=False), _started_text)
        return EXIT_OK
    # Fail now rather than on every later call: the daemon would start, but never start Lean.
    server_command(BrokerConfig(lean_cmd=options.lean_cmd), os.environ)
    argv = [sys.executable, "-m", "beam_broker.cli", "--root", paths.root]
    if options.lean_cmd is not None:
        argv += ["--lean-cmd", shlex.join(options.lean_cmd)]
    argv += ["daemon", "serve"]
    options.say(f"starting a daemon for {paths.root} (log: {paths.log})")
    outcome, pid = client.spawn(paths, argv, timeout=args.timeout)
    current = run(lambda: client.status(paths))
    if current is None:
        raise BrokerError(
            RUNTIME_SETUP,
            f"the daemon for {paths.root} did not start ({outcome}); see {paths.log}",
            {"pid": pid, "log": str(paths.log), "logTail": options.redactor().redact(client.log_tail(paths))},
        )
    out.value(_summary(current, started=current.get("pid") == pid), _started_text)
    return EXIT_OK


def _stop(paths: client.DaemonPaths, timeout: float) -> dict[str, Any] | None:
    """Ask the daemon to stop and wait until its Lean servers exit: its answer, or None when none runs."""
    import anyio

    async def stop() -> dict[str, Any] | None:
        try:
            with anyio.fail_after(timeout):
                return await client.request(paths, client.SHUTDOWN, linger=True)
        except client.DaemonUnavailable:
            return None
        except TimeoutError:
            raise BrokerError(
                INTERNAL_ERROR, f"the daemon for {paths.root} did not stop within {timeout:g} s"
            ) from None

    return run(stop)


def _daemon_stop(args: argparse.Namespace, options: Options) -> int:
    paths = _daemon_paths(options)
    answer = _stop(paths, args.timeout)
    out = Output(options)
    if answer is None:
        value: dict[str, Any] = {"stopped": False, "reason": "notRunning", "root": paths.root}
        out.value(value, lambda v: [f"no daemon runs for {v['root']}"])
        return EXIT_OK
    result = answer.get("result") or {}
    value = {"stopped": True, "pid": result.get("pid"), "root": paths.root}
    out.value(value, lambda v: [f"stopped the daemon for {v['root']} (pid {v['pid']})"])
    return EXIT_OK


def _status_text(value: Mapping[str, Any]) -> list[str]:
    if not value.get("running"):
        stale = value.get("staleSocket")
        note = " (a stale socket file is left; the next `daemon start` replaces it)" if stale else ""
        return [f"no daemon runs for {value.get('root')}{note}"]
    seconds = int(value.get("uptimeMs", 0)) // 1000
    command = value.get("serverCmd")
    return [
        f"a daemon runs for {value.get('root')} (pid {value.get('pid')}, up {seconds // 60} min {seconds % 60} s)",
        f"Lean command: {shlex.join(command) if isinstance(command, list) else command}",
        f"socket: {value.get('socket')}",
        f"log: {value.get('log')}",
    ]


def _daemon_status(args: argparse.Namespace, options: Options) -> int:
    paths = _daemon_paths(options)
    current = run(lambda: client.status(paths))
    out = Output(options)
    if current is None:
        stale = paths.socket.exists()
        down = {"running": False, "root": paths.root, "socket": str(paths.socket), "staleSocket": stale}
        out.value(down, _status_text)
        return EXIT_NOT_RUNNING
    out.value(current, _status_text)
    return EXIT_OK


def _daemon_serve(args: argparse.Namespace, options: Options) -> int:
    from . import daemon as _daemon

    paths = _daemon_paths(options)
    if os.path.isdir(paths.root):
        os.chdir(paths.root)  # the daemon runs in its project, whoever started it and from where
    logging.getLogger().setLevel(logging.INFO)
    _log_to_file(paths)
    config = BrokerConfig(lean_cmd=options.lean_cmd)
    try:
        resolved: list[str] | None = server_command(config, os.environ)
    except BrokerError:
        resolved = None  # every call will report runtimeSetup
    # `__status__` shows the commands redacted; a client compares the digest (`cli.call`).
    info = {
        "leanCmd": options.lean_cmd,
        "leanCmdDigest": client.command_digest(options.lean_cmd),
        "serverCmd": resolved,
    }
    interval = args.watch_interval if args.watch_interval is not None else _daemon.ROOT_CHECK_SECONDS
    served = _daemon.run_foreground(paths, config, info=info, ready_fd=args.ready_fd, watch_interval=interval)
    return EXIT_OK if served else EXIT_NOT_RUNNING


def _log_to_file(paths: client.DaemonPaths) -> None:
    """Log to the root's log file as well, unless stderr is that file already (`daemon start` made it so).

    `status` names the log, a client's error points to it, and `daemon start` reads its end: a daemon served in
    the foreground writes it too, beside the stderr its user watches, in the same (redacted) format.
    """
    client.ensure_private_dir(paths.directory)
    fd = os.open(paths.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    log = os.fstat(fd)
    try:
        err = os.fstat(sys.stderr.fileno())
        spawned = (log.st_dev, log.st_ino) == (err.st_dev, err.st_ino)
    except (OSError, ValueError):  # no stderr file at all
        spawned = False
    if spawned:
        os.close(fd)
        return
    root = logging.getLogger()
    handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8"))
    handler.setFormatter(next((h.formatter for h in root.handlers if h.formatter is not None), None))
    root.addHandler(handler)


def _lock_free(paths: client.DaemonPaths, timeout: float = 0) -> bool:
    """Whether no process holds the root's daemon lock (waiting up to `timeout` seconds for it to be let go)."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(paths.lock), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        return False
    lock.release()
    return True


def _remove_leftovers(paths: client.DaemonPaths) -> list[str]:
    """Remove the socket and pid files a dead daemon left, holding the lock meanwhile; what was removed.

    Under the lock no daemon can start (take the lock, bind its socket, record its pid) between the check and the
    removal and lose both. Nothing is removed while a daemon holds it.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(paths.lock), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return []
    removed: list[str] = []
    try:
        for leftover in (paths.socket, paths.pid):
            if leftover.is_socket() or leftover.is_file() or leftover.is_symlink():
                leftover.unlink(missing_ok=True)
                removed.append(f"removed {leftover}")
    finally:
        lock.release()
    return removed


def _recorded_pid(paths: client.DaemonPaths) -> int | None:
    try:
        text = paths.pid.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _end(paths: client.DaemonPaths, pid: int, timeout: float) -> bool:
    """SIGTERM a daemon that holds the lock (and its Lean servers), then SIGKILL; whether the lock came free."""
    try:  # `daemon start` leads a session (and group) of its own; a foreground `serve` is in its shell's job,
        own_group = os.getsid(pid) == pid  # whose group it may lead with other programs (`serve | tee log`)
    except OSError:
        own_group = False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        kill_tree(pid, sig=sig, group=own_group)  # it (or its group) and every descendant (the Lean servers)
        if _lock_free(paths, timeout):
            return True
    return False


def _recovered_text(value: Mapping[str, Any]) -> list[str]:
    if value.get("reason") == "running":
        return [
            f"a daemon runs for {value.get('root')} (pid {value.get('pid')}) and answers: nothing to recover "
            "(--force stops it)"
        ]
    done = list(value.get("actions") or [])
    return done or [f"nothing to recover for {value.get('root')}"]


def _recover(args: argparse.Namespace, options: Options) -> int:
    """Recover the root's daemon state: stale files of a dead daemon; with --force, a daemon that runs or hangs."""
    paths = _daemon_paths(options)
    out = Output(options)
    actions: list[str] = []
    current = run(lambda: client.status(paths))
    if current is not None and not args.force:
        out.value(
            {"recovered": False, "reason": "running", "pid": current.get("pid"), "root": paths.root}, _recovered_text
        )
        return EXIT_OK
    if current is not None:
        pid = current.get("pid")
        try:
            _stop(paths, args.timeout)
        except BrokerError:  # it answers but does not stop in time: end it as one that does not answer
            if not isinstance(pid, int) or not _end(paths, pid, args.timeout):
                raise
            actions.append(f"ended the daemon for {paths.root} that did not stop within {args.timeout:g} s (pid {pid})")
        else:
            _lock_free(paths, args.timeout)  # the process lets the lock go as it exits, just after it answered
            actions.append(f"stopped the daemon for {paths.root} (pid {pid})")
    elif not _lock_free(paths):
        pid = _recorded_pid(paths)
        hung = {"reason": "daemonNotAnswering", "lock": str(paths.lock), "pid": pid, "root": paths.root}
        if not args.force:
            raise BrokerError(
                RUNTIME_SETUP,
                f"a daemon holds {paths.lock} (pid {pid}) but does not answer; `lean-beam recover --force` ends it",
                hung,
            )
        if pid is None or not _end(paths, pid, args.timeout):
            raise invalid_params(f"could not end the daemon holding {paths.lock} (pid {pid})", hung)
        actions.append(f"ended the daemon for {paths.root} that did not answer (pid {pid})")
    actions += _remove_leftovers(paths)
    out.value({"recovered": bool(actions), "actions": actions, "root": paths.root}, _recovered_text)
    return EXIT_OK
