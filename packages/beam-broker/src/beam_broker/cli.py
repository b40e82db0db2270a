"""The `lean-beam` command: every broker operation as a subcommand, plus `stats` and `daemon`.

Owns: the top-level parser, workspace discovery, choosing the daemon or an in-process broker, and exit codes.
Subcommands and their options are generated from `OPERATIONS` (`_cli_args`); printing is `_render`'s; the
daemon lives in `_daemon` (server) and `_daemon_client` (protocol and client). Nothing here decides what an
operation does.

Exit codes: 0 success (Lean errors inside a result are a success); 1 a broker error; 2 usage error or
invalid input (`invalidInput`); 3 runtime setup failure (`runtimeSetup`: no Lean, a daemon that cannot
start); 130 interrupted. The Lean stack is imported only when a command runs.

Secrets (the secret flags of the Lean command, secret-named environment variables) never reach the output: the
errors it prints and the log lines it (or the daemon it runs as) writes go through the configuration's redactor.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from beam_lsp.project import PROJECT_MARKERS, find_project_root
from beam_lsp.redaction import Redactor

from . import _cli_args as cli_args
from . import _daemon_client as client
from .__about__ import __version__
from ._logging import RedactingFormatter
from ._render import EventPrinter, print_json
from .config import BrokerConfig, server_command
from .errors import INTERNAL_ERROR, INVALID_INPUT, RUNTIME_SETUP, BrokerError, invalid_input
from .operations import BY_NAME

T = TypeVar("T")

PROG: Final = "lean-beam"
EXIT_OK: Final = 0
"""The call succeeded (a result may still report Lean errors)."""
EXIT_ERROR: Final = 1
"""The broker answered with an error (its JSON is on stderr)."""
EXIT_USAGE: Final = 2
"""Bad command line or invalid input (`invalidInput`)."""
EXIT_SETUP: Final = 3
"""Runtime setup failure (`runtimeSetup`): no Lean server command, or the daemon could not start."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted (Ctrl-C, SIGTERM); the call was cancelled."""

DEFAULT_TIMEOUT: Final = 60.0

_DESCRIPTION: Final = """\
Work with a Lean 4 project from the shell: sync files and read their diagnostics, save checkpoints,
navigate, read goals, and run Lean text speculatively. Every operation of the Beam broker is a command."""

_EPILOG: Final = f"""\
workspace:
  The project is the nearest directory upward from the current one with lean-toolchain, lakefile.toml
  or lakefile.lean, or --root DIR. A relative PATH is relative to the current directory when that is
  inside the project, else to the project root. The Lean server command is --lean-cmd, then
  $BEAM_LEAN_SERVER_CMD, then `lake serve` from PATH.

output:
  The result is JSON on stdout (pretty; --compact for one line). Progress and Lean diagnostics are
  short lines on stderr (--quiet drops them); an error is its JSON ({{code, message, data?}}) on stderr.
  Lean failures are results, not errors: a file with errors or a probe with "success": false exits 0.

daemon:
  `lean-beam daemon start` keeps a broker with a warm Lean server for the project on a unix socket;
  commands use it when it answers (so handles survive between commands), else run Lean in this process.
  `daemon status` / `daemon stop` inspect and stop it. --no-daemon forces an in-process run.

exit codes:
  {EXIT_OK}    success (including Lean errors reported inside the result)
  {EXIT_ERROR}    broker error (contentModified, invalidParams, workerExited, syncBarrierIncomplete, ...)
  {EXIT_USAGE}    usage error or invalid input (invalidInput)
  {EXIT_SETUP}    runtime setup failure (runtimeSetup: no Lean found, the daemon could not start)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C cancels the call cleanly)

examples:
  lean-beam sync Demo/Proofs.lean
  lean-beam hover Demo/Proofs.lean --version 1 --line 3 --character 8
  lean-beam run-at Demo/Proofs.lean --version 1 --line 8 --character 5 --text '#check two'
  lean-beam --compact run-at-handle Main.lean --version 1 --line 9 --character 2 --text @probe.lean \\
      | jq .next_handle > h.json
  lean-beam run-with Main.lean --handle @h.json --text 'exact h'
  lean-beam daemon start && lean-beam stats"""


# ---- parser -------------------------------------------------------------------------------------------
def _common_options() -> argparse.ArgumentParser:
    """Options accepted before or after the command (`lean-beam --root R sync X` = `lean-beam sync X --root R`)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("common options")
    s = argparse.SUPPRESS
    group.add_argument("--root", metavar="DIR", default=s, help="the Lean/Lake project root (default: discovered)")
    group.add_argument(
        "--lean-cmd",
        metavar="CMD",
        default=s,
        help='Lean server command, split like a shell would (e.g. "lake serve -- -Dserver.reportDelayMs=0")',
    )
    group.add_argument("--compact", action="store_true", default=s, help="print JSON on one line")
    group.add_argument("-q", "--quiet", action="store_true", default=s, help="no progress or diagnostics on stderr")
    group.add_argument("-v", "--verbose", action="store_true", default=s, help="say how the call runs (daemon or not)")
    group.add_argument(
        "--no-daemon",
        action="store_true",
        default=s,
        help="run Lean in this process even when a daemon runs",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The `lean-beam` parser: registry operations, `stats` and `daemon`."""
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    cli_args.add_operations(commands, [common])
    stats = commands.add_parser(
        "stats",
        parents=[common],
        help="the daemon's statistics: workspaces, Lean sessions, per-operation counts and latencies",
        description="Print the statistics of the daemon serving this project (sessions started, requests, "
        "per-operation latencies). Without a daemon there is nothing to report: an empty object is printed.",
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
    start = actions.add_parser(
        "start", parents=[common], help="start the daemon in the background and print its pid (JSON)"
    )
    start.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="wait this long for it")
    start.set_defaults(handler=_daemon_start)
    stop = actions.add_parser("stop", parents=[common], help="stop the daemon and wait until its Lean servers exit")
    stop.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="wait this long for it")
    stop.set_defaults(handler=_daemon_stop)
    status = actions.add_parser(
        "status", parents=[common], help="print root, pid, uptime and statistics (JSON); exit 1 when not running"
    )
    status.set_defaults(handler=_daemon_status)
    serve = actions.add_parser("serve", parents=[common], help="run the daemon in the foreground (logs on stderr)")
    serve.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--watch-interval", type=float, default=None, help=argparse.SUPPRESS)
    serve.set_defaults(handler=_daemon_serve)
    return parser


# ---- options and workspace ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Options:
    """The common options of one invocation."""

    root: str | None = None
    lean_cmd: list[str] | None = None
    compact: bool = False
    quiet: bool = False
    verbose: bool = False
    no_daemon: bool = False

    @classmethod
    def of(cls, args: argparse.Namespace) -> Options:
        """From parsed arguments.

        Raises:
            BrokerError: `invalidInput` for a `--lean-cmd` that does not split.
        """
        lean_cmd: list[str] | None = None
        raw = getattr(args, "lean_cmd", None)
        if raw is not None:
            try:
                lean_cmd = shlex.split(raw)
            except ValueError as exc:
                raise invalid_input(f"--lean-cmd: {exc}") from None
            if not lean_cmd:
                raise invalid_input("--lean-cmd must not be empty")
        return cls(
            root=getattr(args, "root", None),
            lean_cmd=lean_cmd,
            compact=getattr(args, "compact", False),
            quiet=getattr(args, "quiet", False),
            verbose=getattr(args, "verbose", False),
            no_daemon=getattr(args, "no_daemon", False),
        )

    def redactor(self) -> Redactor:
        """The redactor of this invocation: its environment and Lean command (`--lean-cmd` or the variable)."""
        return BrokerConfig(lean_cmd=self.lean_cmd).redactor(os.environ)

    def note(self, message: str) -> None:
        """A `--verbose` line on stderr."""
        if self.verbose:
            print(f"beam: {message}", file=sys.stderr, flush=True)


def workspace_root(options: Options) -> str:
    """`--root` (made absolute) or the discovered project root.

    Raises:
        BrokerError: `invalidInput` when no project contains the current directory.
    """
    if options.root is not None:
        return os.path.abspath(options.root)
    cwd = Path.cwd()
    found = find_project_root(cwd)
    if found is None:
        raise invalid_input(
            f"no Lean project contains {cwd} (looked for {', '.join(PROJECT_MARKERS)} upward); pass --root DIR"
        )
    return str(found)


# ---- output -------------------------------------------------------------------------------------------
def exit_code(code: str) -> int:
    """The exit status for a broker error code."""
    if code == INVALID_INPUT:
        return EXIT_USAGE
    if code == RUNTIME_SETUP:
        return EXIT_SETUP
    return EXIT_ERROR


def finish(answer: dict[str, Any], options: Options) -> int:
    """Print a final `{"result"}` (stdout) or `{"error"}` (stderr) and return the exit status."""
    if "result" in answer:
        print_json(answer["result"], compact=options.compact)
        return EXIT_OK
    error = answer.get("error")
    if not isinstance(error, dict):
        error = {"code": INTERNAL_ERROR, "message": f"unexpected answer: {answer!r}"}
    print_json(options.redactor().redact_json(error), compact=options.compact, stream=sys.stderr)
    return exit_code(str(error.get("code")))


# ---- running ------------------------------------------------------------------------------------------
class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; the running call was cancelled."""


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run `fn` on an event loop; SIGINT/SIGTERM cancel it and raise `Interrupted`."""
    import anyio
    import anyio.abc

    from ._util import single_errors

    async def main() -> T:
        interrupted = False
        result: T
        with single_errors():
            async with anyio.create_task_group() as tg:
                if threading.current_thread() is threading.main_thread():

                    async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
                        nonlocal interrupted
                        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                            task_status.started()  # the handlers are in place before `fn` starts
                            async for _ in signals:
                                interrupted = True
                                tg.cancel_scope.cancel()
                                return

                    await tg.start(watch)
                result = await fn()
                tg.cancel_scope.cancel()
        if interrupted:
            raise Interrupted
        return result

    return anyio.run(main)


async def call(op: str, arguments: dict[str, Any], options: Options, root: str, emit: EventPrinter) -> dict[str, Any]:
    """Run one operation through the root's daemon if one answers, else in-process; the final message."""
    if not options.no_daemon:
        paths = client.paths_for(root)
        try:
            if options.lean_cmd is not None:
                current = await client.status(paths)
                if current is not None and current.get("leanCmdDigest") != client.command_digest(options.lean_cmd):
                    if not options.quiet:
                        print(
                            f"beam: the daemon for {paths.root} runs another Lean command; running --lean-cmd in "
                            "this process (stop the daemon to change its command)",
                            file=sys.stderr,
                            flush=True,
                        )
                    raise client.DaemonUnavailable("the daemon runs another Lean command")
            answer = await client.request(paths, op, arguments, emit)
        except client.DaemonUnavailable as exc:
            options.note(f"{exc}")
        else:
            options.note(f"answered by the daemon at {paths.socket}")
            return answer
    options.note("running Lean in this process (cold start; `lean-beam daemon start` keeps it warm)")
    from .broker import Broker  # the Lean stack loads only for an in-process call
    from .events import CallContext

    try:
        async with Broker.open(BrokerConfig(lean_cmd=options.lean_cmd)) as broker:
            return {"result": await broker.call(op, arguments, CallContext(emit=emit))}
    except BrokerError as exc:
        return {"error": exc.wire()}


def _operation(args: argparse.Namespace, options: Options) -> int:
    spec = BY_NAME[args.operation]
    root = workspace_root(options)
    arguments = cli_args.operation_arguments(spec, args, cli_args.Inputs())
    if isinstance(arguments.get("path"), str):
        arguments["path"] = cli_args.resolve_cli_path(arguments["path"], root, os.getcwd())
    arguments["workspace"] = {"root": root}
    printer = EventPrinter(quiet=options.quiet)
    answer = run(lambda: call(spec.name, arguments, options, root, printer))
    return finish(answer, options)


def _stats(args: argparse.Namespace, options: Options) -> int:
    paths = client.paths_for(workspace_root(options))

    async def get() -> dict[str, Any]:
        try:
            return await client.request(paths, client.STATS)
        except client.DaemonUnavailable as exc:
            options.note(f"{exc}: a fresh broker has nothing to report")
            from .broker import Broker

            async with Broker.open() as broker:
                return {"result": broker.stats()}

    return finish(run(get), options)


def _daemon_paths(options: Options) -> client.DaemonPaths:
    return client.paths_for(workspace_root(options))


def _summary(current: dict[str, Any], **extra: Any) -> dict[str, Any]:
    keys = ("pid", "root", "socket", "log")
    return {**extra, **{k: current.get(k) for k in keys}}


def _daemon_start(args: argparse.Namespace, options: Options) -> int:
    paths = _daemon_paths(options)
    current = run(lambda: client.status(paths))
    if current is not None:
        options.note(f"a daemon already serves {paths.root}")
        print_json(_summary(current, started=False), compact=options.compact)
        return EXIT_OK
    # Fail now rather than on every later call: the daemon would start, but never start Lean.
    server_command(BrokerConfig(lean_cmd=options.lean_cmd), os.environ)
    argv = [sys.executable, "-m", "beam_broker.cli", "--root", paths.root]
    if options.lean_cmd is not None:
        argv += ["--lean-cmd", shlex.join(options.lean_cmd)]
    argv += ["daemon", "serve"]
    if not options.quiet:
        print(f"beam: starting a daemon for {paths.root} (log: {paths.log})", file=sys.stderr, flush=True)
    outcome, pid = client.spawn(paths, argv, timeout=args.timeout)
    current = run(lambda: client.status(paths))
    if current is None:
        raise BrokerError(
            RUNTIME_SETUP,
            f"the daemon for {paths.root} did not start ({outcome}); see {paths.log}",
            {"pid": pid, "log": str(paths.log), "logTail": options.redactor().redact(client.log_tail(paths))},
        )
    print_json(_summary(current, started=current.get("pid") == pid), compact=options.compact)
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
    if answer is None:
        print_json({"stopped": False, "reason": "notRunning", "root": paths.root}, compact=options.compact)
        return EXIT_OK
    result = answer.get("result") or {}
    print_json({"stopped": True, "pid": result.get("pid"), "root": paths.root}, compact=options.compact)
    return EXIT_OK


def _daemon_status(args: argparse.Namespace, options: Options) -> int:
    paths = _daemon_paths(options)
    current = run(lambda: client.status(paths))
    if current is None:
        stale = paths.socket.exists()
        print_json(
            {"running": False, "root": paths.root, "socket": str(paths.socket), "staleSocket": stale},
            compact=options.compact,
        )
        return EXIT_ERROR
    print_json(current, compact=options.compact)
    return EXIT_OK


def _daemon_serve(args: argparse.Namespace, options: Options) -> int:
    from . import _daemon

    paths = _daemon_paths(options)
    if os.path.isdir(paths.root):
        os.chdir(paths.root)  # the daemon runs in its project, whoever started it and from where
    logging.getLogger().setLevel(logging.INFO)
    config = BrokerConfig(lean_cmd=options.lean_cmd)
    try:
        resolved: list[str] | None = server_command(config, os.environ)
    except BrokerError:
        resolved = None  # every call will report runtimeSetup
    # `__status__` shows the commands redacted; a client compares the digest (`call`).
    info = {
        "leanCmd": options.lean_cmd,
        "leanCmdDigest": client.command_digest(options.lean_cmd),
        "serverCmd": resolved,
    }
    interval = args.watch_interval if args.watch_interval is not None else _daemon.ROOT_CHECK_SECONDS
    served = _daemon.run_foreground(paths, config, info=info, ready_fd=args.ready_fd, watch_interval=interval)
    return EXIT_OK if served else EXIT_ERROR


def _log_to_stderr(redactor: Redactor) -> None:
    """Log warnings (the daemon: information) to stderr, redacted, unless the embedding program set logging up."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(redactor, "%(asctime)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def _exit_status(code: object) -> int:
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run `lean-beam`; returns the exit status (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return _exit_status(exc.code)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: a command is required (see {PROG} --help)", file=sys.stderr)
        return EXIT_USAGE
    compact = bool(getattr(args, "compact", False))
    redactor = Redactor()
    try:
        options = Options.of(args)
        redactor = options.redactor()
        _log_to_stderr(redactor)
        if getattr(args, "operation", None) is not None:
            return _operation(args, options)
        handler: Callable[[argparse.Namespace, Options], int] = args.handler
        return handler(args, options)
    except BrokerError as exc:
        print_json(exc.redacted(redactor).wire(), compact=compact, stream=sys.stderr)
        return exit_code(exc.code)
    except (Interrupted, KeyboardInterrupt):
        print("beam: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (e.g. `| head`); stop writing to it.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
