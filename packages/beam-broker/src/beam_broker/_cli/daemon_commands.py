"""`lean-beam stats` and `lean-beam daemon start|stop|status|serve`: the commands around the daemon.

Owns their subparsers and handlers: starting a detached daemon (after checking that a Lean server command
exists), stopping it, reporting its status and statistics (JSON, or a few lines for a person). The server is
`daemon`'s and the protocol `daemon_client`'s; this module only drives them.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Mapping
from typing import Any, Final

from beam_broker.config import BrokerConfig, server_command
from beam_broker.errors import INTERNAL_ERROR, RUNTIME_SETUP, BrokerError

from . import daemon_client as client
from .common import EXIT_OK, Options, Output, run, workspace_root

DEFAULT_TIMEOUT: Final = 60.0
EXIT_NOT_RUNNING: Final = 1
"""`daemon status` when no daemon runs (its own meaning of 1, kept from before the exit-code table)."""


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
    status = actions.add_parser(
        "status", parents=[common], help="print root, pid, uptime and statistics; exit 1 when not running"
    )
    status.set_defaults(handler=_daemon_status)
    serve = actions.add_parser("serve", parents=[common], help="run the daemon in the foreground (logs on stderr)")
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


def _daemon_stop(args: argparse.Namespace, options: Options) -> int:
    import anyio

    paths = _daemon_paths(options)

    async def stop() -> dict[str, Any] | None:
        try:
            with anyio.fail_after(args.timeout):
                return await client.request(paths, client.SHUTDOWN, linger=True)
        except client.DaemonUnavailable:
            return None
        except TimeoutError:
            raise BrokerError(
                INTERNAL_ERROR, f"the daemon for {paths.root} did not stop within {args.timeout:g} s"
            ) from None

    answer = run(stop)
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
