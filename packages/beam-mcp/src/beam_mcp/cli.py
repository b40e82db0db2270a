"""The `lean-beam-mcp` command: serve MCP on stdio, print the version, or self-check an installation.

Exit codes: 0 success (stdin closed normally, version printed, self-check passed); 1 self-check failed;
2 usage error; 130 interrupted. Nothing but MCP messages is written to stdout while serving; logs go to
stderr (`LEAN_BEAM_MCP_TRACE=1` turns on debug logs). Importing this module is cheap: the Lean stack is
imported by the server in the background.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Sequence

from .__about__ import __version__
from ._protocol import LEGACY_VERSION, MODERN_VERSION, SERVER_NAME

TRACE_ENV = "LEAN_BEAM_MCP_TRACE"

_EPILOG = f"""\
Every workspace-bound tool call names its Lean project explicitly:
  {{"workspace": {{"root": "/absolute/path/to/project"}}, "path": "Main.lean"}}
There is no default workspace. The Lean server command is, in order: --lean-cmd, $BEAM_LEAN_SERVER_CMD,
then `lake serve` found on PATH (elan installs it).

MCP revisions: {MODERN_VERSION} (per-request metadata, preferred) and {LEGACY_VERSION} (initialize).
Close stdin to stop the server.

examples:
  lean-beam-mcp                                   serve on stdio (what an MCP client runs)
  lean-beam-mcp --self-check ~/proj/Main.lean     check that Beam can sync a file of your project
  lean-beam-mcp --lean-cmd "lake serve"           use a specific Lean server command
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
        "--self-check",
        metavar="FILE",
        help="start a server as a child process, sync FILE (a .lean file inside a Lean/Lake project) through "
        "it, and report whether that worked",
    )
    return parser


def version_lines(server_binary: str | None = None) -> list[str]:
    """What `--version` prints."""
    lines = [f"{SERVER_NAME} {__version__}", f"mcp protocol: {MODERN_VERSION} (also {LEGACY_VERSION})"]
    if server_binary:
        lines.append(f"server binary: {server_binary}")
    lines.append(f"python: {sys.executable}")
    return lines


def _server_binary() -> str | None:
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and os.path.basename(argv0) not in ("-c", "__main__.py") and os.path.exists(argv0):
        return os.path.abspath(argv0)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    binary = _server_binary()
    if args.version:
        print("\n".join(version_lines(binary)))
        return 0
    lean_cmd: list[str] | None = None
    if args.lean_cmd is not None:
        try:
            lean_cmd = shlex.split(args.lean_cmd)
        except ValueError as exc:
            parser.error(f"--lean-cmd: {exc}")
        if not lean_cmd:
            parser.error("--lean-cmd must not be empty")
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if os.environ.get(TRACE_ENV) else logging.WARNING,
        format="lean-beam-mcp: %(levelname)s %(name)s: %(message)s",
    )
    import anyio

    if args.self_check is not None:
        from ._selfcheck import run

        return run(args.self_check, lean_cmd)

    from ._stdio import serve
    from .server import ServerConfig

    try:
        anyio.run(serve, ServerConfig(lean_cmd=lean_cmd, server_binary=binary))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
