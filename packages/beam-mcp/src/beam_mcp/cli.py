"""The `lean-beam-mcp` command: serve MCP on stdio or Streamable HTTP, print the version, or self-check.

Exit codes: 0 success (stdin closed normally, a server stopped by SIGTERM, or by SIGINT once it
serves, version printed, self-check passed); 1 self-check failed, the HTTP address cannot be bound, or `--http`
without the `http` extra installed; 2 usage error; 130 interrupted; 141 `--version` or `--help` into a pipe whose
reader went away.
Nothing but MCP messages is written to stdout while serving stdio; logs (and the HTTP endpoint URL) go to
stderr (`LEAN_BEAM_MCP_TRACE=1` turns on debug logs). Importing this module is cheap: the server and the
broker's registry load when the server starts, the Lean stack behind `Broker` in the background.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from beam_lsp.command_line import EXIT_BROKEN_PIPE as EXIT_BROKEN_PIPE  # the exit codes this module documents
from beam_lsp.command_line import PipeParser, stdout_gone

from .__about__ import __version__
from ._protocol import LEGACY_VERSION, MODERN_VERSION, SERVER_NAME

if TYPE_CHECKING:
    from ._http import HttpConfig
    from ._http.auth import BearerToken
    from ._tools import Contract, Surface
    from .server import ServerConfig

TRACE_ENV = "LEAN_BEAM_MCP_TRACE"
LOG_FORMAT_ENV = "LEAN_BEAM_MCP_LOG_FORMAT"
MEMORY_BUDGET_ENV = "LEAN_BEAM_MCP_MEMORY_BUDGET_MIB"
IDLE_TIMEOUT_ENV = "LEAN_BEAM_MCP_IDLE_TIMEOUT"
TOKEN_ENV = "LEAN_BEAM_MCP_TOKEN"
TOOLS_ENV = "LEAN_BEAM_TOOLS"
"""The tool surface when no `--tools` is given (`all`, `beam` or `lean-lsp-mcp`)."""
TOOL_SURFACES = ("all", "beam", "lean-lsp-mcp")
CONTRACTS = ("seed", "upstream-2026-11")
"""How Lean tools name a document state (`--contract`; `_tools.CONTRACTS`, listed here so `--help` loads no models)."""
"""The bearer token of `--http` when no `--http-token-file` is given (the same name as `_http.auth.TOKEN_ENV`)."""

_EPILOG = f"""\
Every workspace-bound tool call names its Lean project explicitly:
  {{"workspace": {{"root": "/absolute/path/to/project"}}, "path": "Main.lean"}}
There is no default workspace. The Lean server command is, in order: --lean-cmd, $BEAM_LEAN_SERVER_CMD,
then the project's own toolchain (the `lake serve` of the toolchain its lean-toolchain names, when elan has it
installed), then `lake serve` found on PATH (elan installs it).

MCP revisions: {MODERN_VERSION} (per-request metadata, preferred) and {LEGACY_VERSION} (initialize).
Close stdin (or send SIGTERM or SIGINT) to stop the stdio server. The HTTP server drains on SIGTERM (readiness
false, new calls refused with a retryable 503, calls in flight finish within --drain-timeout, then it stops, exit
0); SIGINT, or a second signal, stops it at once.

The HTTP endpoint authenticates clients only when given a bearer token (--http-token-file, or $LEAN_BEAM_MCP_TOKEN):
every request to /mcp must then send `Authorization: Bearer <token>` (/healthz stays open). Without one, keep it on
loopback (the default) or behind an authenticating proxy. There is no TLS.

examples:
  lean-beam-mcp                                   serve on stdio (what an MCP client runs)
  lean-beam-mcp --http 127.0.0.1:8765             serve Streamable HTTP at http://127.0.0.1:8765/mcp
  lean-beam-mcp --http 127.0.0.1:0                ... on a free port (the URL is printed on stderr)
  lean-beam-mcp --http 127.0.0.1:8765 --http-token-file ~/.config/beam/token
                                                  ... requiring that bearer token
  lean-beam-mcp --tools beam                      list only Beam's 24 specified tools
  lean-beam-mcp --contract upstream-2026-11       upstream Beam's current contract: its 24 tools, snapshot tokens
                                                  instead of document versions
  lean-beam-mcp --tools lean-lsp-mcp              serve lean-lsp-mcp 0.32.0's tools (a drop-in; the project is
                                                  $LEAN_PROJECT_PATH, else found from each file_path)
  lean-beam-mcp --self-check ~/proj/Main.lean     check that Beam can sync a file of your project
  lean-beam-mcp --lean-cmd "lake serve -- -Dserver.reportDelayMs=0"
                                                  use a specific Lean server command (keep the option:
                                                  without it Lean holds every report for 200 ms)
  lean-beam-mcp --http 0.0.0.0:8765 --http-token-file T --memory-budget-mib 8192 --idle-timeout 1800
                                                  one server shared by many agents and projects
"""


def _parser() -> argparse.ArgumentParser:
    parser = PipeParser(
        prog=SERVER_NAME,
        description="Beam MCP server for Lean 4: serves MCP over stdin/stdout for agents and MCP clients.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print version information and exit")
    parser.add_argument(
        "--lean-cmd",
        metavar="CMD",
        help="Lean language server command for every workspace, split like a shell would "
        '(e.g. "lake serve -- -Dserver.reportDelayMs=0")',
    )
    parser.add_argument(
        "--max-open-documents",
        metavar="N",
        type=_positive,
        help="open source documents per workspace; beyond it the least recently used are closed in Lean "
        "(each is a Lean file worker; default 64)",
    )
    parser.add_argument(
        "--max-source-mib",
        metavar="N",
        type=_positive,
        help="largest Lean source file read from disk, in MiB (default 16)",
    )
    parser.add_argument(
        "--memory-budget-mib",
        metavar="N",
        type=_positive,
        default=_env_number(MEMORY_BUDGET_ENV, int),
        help="resident memory all Lean processes together may use, in MiB; beyond it the least recently used idle "
        "documents are closed, then idle workspaces shut down (they restart on their next call) "
        f"(default: ${MEMORY_BUDGET_ENV}, else no budget)",
    )
    parser.add_argument(
        "--idle-timeout",
        metavar="SECONDS",
        type=_seconds,
        default=_env_number(IDLE_TIMEOUT_ENV, float),
        help=f"shut down a workspace's Lean after this long without a call (default: ${IDLE_TIMEOUT_ENV}, else never)",
    )
    parser.add_argument("--max-calls", metavar="N", type=_positive, help="cheap calls in flight in all (default 64)")
    parser.add_argument(
        "--max-workspace-calls", metavar="N", type=_positive, help="cheap calls in flight per workspace (default 16)"
    )
    parser.add_argument(
        "--max-heavy-calls",
        metavar="N",
        type=_positive,
        help="heavy calls (sync, refresh, save, attempts, outline, profile, run_code) in flight in all (default 8)",
    )
    parser.add_argument(
        "--max-workspace-heavy-calls", metavar="N", type=_positive, help="heavy calls per workspace (default 2)"
    )
    parser.add_argument(
        "--admission-wait",
        metavar="SECONDS",
        type=_seconds,
        help="how long a call waits for a free slot before it fails with the `busy` tool error (default 2)",
    )
    parser.add_argument(
        "--no-project-toolchains",
        action="store_true",
        help="without --lean-cmd or $BEAM_LEAN_SERVER_CMD, run `lake serve` from PATH even for a project whose "
        "lean-toolchain names a toolchain installed in $ELAN_HOME/toolchains (an explicit command always wins)",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=os.environ.get(LOG_FORMAT_ENV) if os.environ.get(LOG_FORMAT_ENV) in ("text", "json") else "text",
        help=f"log lines on stderr: text (default) or json, one object per line (default: ${LOG_FORMAT_ENV})",
    )
    parser.add_argument(
        "--drain-timeout",
        metavar="SECONDS",
        type=_seconds,
        help="with --http: how long a SIGTERM lets calls in flight finish before it cancels them (default 30)",
    )
    parser.add_argument(
        "--drain-linger",
        metavar="SECONDS",
        type=_seconds,
        help="with --http: once calls in flight finished, a drain keeps refusing (retryable 503) until no request "
        "came for this long, so the balancer has taken the replica out before its socket closes (default 1)",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve MCP over Streamable HTTP at http://HOST:PORT/mcp instead of stdio (PORT 0 picks a free port; "
        "HOST defaults to 127.0.0.1, write IPv6 as [::1]:PORT)",
    )
    parser.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[],
        help="with --http: also accept this Host header (NAME for any port, NAME:PORT for one); loopback names "
        "and the bound address are always accepted; repeatable",
    )
    parser.add_argument(
        "--allowed-origin",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="with --http: also accept this Origin (scheme://host:port); loopback origins on the bound port are "
        "always accepted; repeatable",
    )
    parser.add_argument(
        "--http-token-file",
        metavar="PATH",
        help=f"with --http: require `Authorization: Bearer <token>` on every request to /mcp, the token being the "
        f"text of PATH (surrounding whitespace removed); default: ${TOKEN_ENV} when set, else no authentication",
    )
    parser.add_argument(
        "--tools",
        choices=TOOL_SURFACES,
        default=None,
        help="which tools to serve: all (default); beam: exactly the 24 tools of Beam's specified surface "
        "(upstream's tool list), without the later additions; lean-lsp-mcp: lean-lsp-mcp 0.32.0's 22 tools, "
        f"names, arguments and results (a drop-in replacement); default: ${TOOLS_ENV} when set, else all",
    )
    parser.add_argument(
        "--contract",
        choices=CONTRACTS,
        default="seed",
        help="how Lean tools name a document state: seed (default): numeric version arguments, with opaque snapshot "
        "tokens accepted and returned beside them (except with --tools beam, which keeps the seed's schemas "
        "exactly); upstream-2026-11: upstream Beam's current contract, its 24 tools taking and returning snapshot "
        "tokens only (not with --tools lean-lsp-mcp)",
    )
    parser.add_argument(
        "--self-check",
        metavar="FILE",
        help="start a server as a child process, sync FILE (a .lean file inside a Lean/Lake project) through "
        "it, and report whether that worked",
    )
    return parser


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}")
    return seconds


def _env_number(name: str, kind: type[int] | type[float]) -> int | float | str | None:
    """A number from the environment for a default; 0 or less is none.

    A malformed value is returned as it is: argparse runs its type check on a string default (only those), so
    the operator hears of the typo rather than running without the setting.
    """
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        return raw
    return value if value > 0 else None


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return int(value)


def version_lines(server_binary: str | None = None) -> list[str]:
    """What `--version` prints."""
    lines = [f"{SERVER_NAME} {__version__}", f"mcp protocol: {MODERN_VERSION} (also {LEGACY_VERSION})"]
    if server_binary:
        lines.append(f"server binary: {server_binary}")
    lines.append(f"python: {sys.executable}")
    return lines


def parse_address(value: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` as (host, port); the host defaults to 127.0.0.1.

    Raises:
        ValueError: Not an address with a port in 0..65535.
    """
    host, colon, port = value.rpartition(":")
    if not colon:
        host, port = "", value
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"write IPv6 addresses in brackets: [{host}]:{port}")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} has no valid port (0..65535)")
    return host or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback name or address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _serve_http(config: ServerConfig, http_config: HttpConfig) -> str | None:
    """Serve HTTP until SIGTERM (drain, then stop) or SIGINT (stop now); the error when it cannot listen.

    A second signal during a drain stops at once.
    """
    import anyio
    import anyio.abc

    from ._http import serve_http

    drain = anyio.Event()
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:

            async def serve(*, task_status: anyio.abc.TaskStatus[str]) -> None:
                await serve_http(config, http_config, drain=drain, task_status=task_status)
                tg.cancel_scope.cancel()  # drained and stopped

            try:
                url = await tg.start(serve)
            except OSError as exc:
                return str(exc)
            print(f"{SERVER_NAME}: serving MCP over Streamable HTTP at {url}", file=sys.stderr, flush=True)
            async for signum in signals:
                if signum == signal.SIGTERM and not drain.is_set():
                    print(f"{SERVER_NAME}: SIGTERM: draining", file=sys.stderr, flush=True)
                    drain.set()
                    continue
                break
            tg.cancel_scope.cancel()
    return None


def _load_lean_stack() -> None:
    """Start importing the broker's Lean stack and lsprotocol on a thread, while this one imports the MCP layer.

    The server answers `initialize` and `tools/list` without them, and its first Lean call waits for them (about
    1.5 s of CPU at import): started here, that import overlaps the MCP layer's own and the client's handshake
    instead of following them. Importing on two threads at once is safe (no import cycle in the packages:
    `tests/test_layout.py`); a failure is left to the broker host, which imports the same modules and reports it.
    """

    def load() -> None:
        try:
            from beam_broker import broker
            from beam_lsp import load_lsp_types

            assert broker.Broker is not None
            load_lsp_types()
        except Exception:
            logging.getLogger("beam_mcp").debug("loading the Lean stack ahead failed", exc_info=True)

    threading.Thread(target=load, name="beam-mcp-load", daemon=True).start()


def _warn_report_delay(lean_cmd: list[str] | None) -> None:
    """Warn when the Lean server command lacks `-Dserver.reportDelayMs=0` (every probe would wait 200 ms)."""
    from beam_broker.config import BrokerConfig, server_command, slow_reports
    from beam_broker.errors import BrokerError

    try:
        cmd = server_command(BrokerConfig(lean_cmd=lean_cmd), os.environ)
    except BrokerError:
        return  # no command: the first Lean call says so
    slow = slow_reports(cmd)
    if slow is not None:
        logging.getLogger("beam_mcp").warning("%s", slow)


def _warn_exposure(host: str, token: BearerToken | None, token_file: str | None) -> None:
    """Warn about what an HTTP endpoint exposes (no message names the token).

    Off loopback: no authentication, or a token crossing the network in clear text. A token file others can read.
    """
    log = logging.getLogger("beam_mcp")
    if not is_loopback(host):
        if token is None:
            log.warning(
                "serving on %s, which is not a loopback address: the MCP endpoint has no authentication, so "
                "anyone who can reach it can run Lean on this machine; pass --http-token-file or put it behind "
                "an authenticating proxy",
                host,
            )
        else:
            log.warning(
                "serving on %s, which is not a loopback address, without TLS: the bearer token crosses the "
                "network in clear text; put a TLS-terminating proxy in front",
                host,
            )
    if token_file is not None:
        from ._http.auth import readable_by_others

        if readable_by_others(token_file):
            log.warning("the token file %s can be read by other users (chmod 600 it)", token_file)


def _server_binary() -> str | None:
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and os.path.basename(argv0) not in ("-c", "__main__.py") and os.path.exists(argv0):
        return os.path.abspath(argv0)
    return None


def _stop_starting(signum: int, frame: object) -> None:
    raise SystemExit(0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    parser = _parser()
    binary = _server_binary()
    try:
        args = parser.parse_args(argv)
        if args.version:
            sys.stdout.write("\n".join(version_lines(binary)) + "\n")
            sys.stdout.flush()  # a reader that went away fails here, not at exit
            return 0
    except BrokenPipeError:  # `--version | head -1`, `--help | head -1`: exit as `lean-beam` does
        return stdout_gone()
    if args.self_check is None:
        # A server asked to stop while it starts (before its event loop handles signals) stops there, as it would
        # a moment later: exit 0, no traceback (the default action would end it with -15). Nothing to clean up
        # yet: Lean starts once the server handles signals.
        signal.signal(signal.SIGTERM, _stop_starting)
    lean_cmd: list[str] | None = None
    if args.lean_cmd is not None:
        from beam_broker.config import split_command

        try:
            lean_cmd = split_command(args.lean_cmd)
        except ValueError as exc:
            parser.error(f"--lean-cmd {exc}")
    address: tuple[str, int] | None = None
    if args.http is not None:
        if args.self_check is not None:
            parser.error("--http and --self-check cannot be combined")
        try:
            address = parse_address(args.http)
        except ValueError as exc:
            parser.error(f"--http: {exc}")
    elif (
        args.allowed_host
        or args.allowed_origin
        or args.http_token_file is not None
        or args.drain_timeout is not None
        or args.drain_linger is not None
    ):
        parser.error(
            "--allowed-host, --allowed-origin, --http-token-file, --drain-timeout and --drain-linger need --http"
        )
    token: BearerToken | None = None
    if address is not None:
        from ._http.auth import BearerToken, TokenError

        try:
            if args.http_token_file is not None:
                token = BearerToken.from_file(args.http_token_file)
            else:
                token = BearerToken.from_env(os.environ)
        except TokenError as exc:
            parser.error(f"--http-token-file: {exc}" if args.http_token_file is not None else str(exc))
    from beam_broker.config import BrokerConfig

    from ._logs import configure

    level = logging.DEBUG if os.environ.get(TRACE_ENV) else logging.WARNING
    configure(level, args.log_format, BrokerConfig(lean_cmd=lean_cmd).redactor(os.environ))
    _warn_report_delay(lean_cmd)
    import anyio

    if args.self_check is not None:
        from ._selfcheck import run

        return run(args.self_check, lean_cmd)

    _load_lean_stack()
    from .server import ServerConfig

    broker: dict[str, Any] = {}
    if args.max_open_documents is not None:
        broker["max_open_documents"] = args.max_open_documents
    if args.max_source_mib is not None:
        broker["max_source_bytes"] = args.max_source_mib * 1024 * 1024
    for name in (
        "memory_budget_mib",
        "idle_timeout",
        "max_calls",
        "max_workspace_calls",
        "max_heavy_calls",
        "max_workspace_heavy_calls",
        "admission_wait",
    ):
        if getattr(args, name) is not None:
            broker[name] = getattr(args, name)
    if args.no_project_toolchains:
        broker["project_toolchains"] = False
    tools = args.tools or os.environ.get(TOOLS_ENV) or "all"
    if tools not in TOOL_SURFACES:
        parser.error(f"${TOOLS_ENV} must be one of {', '.join(TOOL_SURFACES)}, not {tools!r}")
    if args.contract != "seed" and tools == "lean-lsp-mcp":
        parser.error(f"--contract {args.contract} serves upstream Beam's tools, not --tools lean-lsp-mcp")
    config = ServerConfig(
        lean_cmd=lean_cmd,
        server_binary=binary,
        broker=broker,
        tools=cast("Surface", tools),
        contract=cast("Contract", args.contract),
    )
    try:
        if address is not None:
            from ._http import HttpConfig, require_extra

            try:
                require_extra()
            except ImportError as exc:
                print(f"{SERVER_NAME}: --http: {exc}", file=sys.stderr)
                return 1
            host, port = address
            _warn_exposure(host, token, args.http_token_file)
            http_config = HttpConfig(
                host=host,
                port=port,
                token=token,
                allowed_hosts=tuple(args.allowed_host),
                allowed_origins=tuple(args.allowed_origin),
                **({"drain_deadline": args.drain_timeout} if args.drain_timeout is not None else {}),
                **({"drain_linger": args.drain_linger} if args.drain_linger is not None else {}),
            )
            error = anyio.run(_serve_http, config, http_config)
            if error is not None:
                print(f"{SERVER_NAME}: cannot serve HTTP on {args.http}: {error}", file=sys.stderr)
                return 1
        else:
            from ._stdio import serve_stdio

            anyio.run(lambda: serve_stdio(config, signals=True))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
