"""The `lean-beam` command: every broker operation as a subcommand, plus `stats`, `daemon`, `doctor`, `completion`.

Owns: the top-level parser, running one operation (through the root's daemon when it answers, else in-process;
with the `update` step first when no `--version` is given), and the exit status of an operation. Subcommands and
their options are generated from `OPERATIONS` (`_cli.args`; `_cli.commands` caches what they need as plain data,
so a call through the daemon never loads the registry's models); positions are `_cli.position`'s; what is printed
is `_cli.render`'s, `_cli.human`'s and `_cli.progress`'s; the shared options, exit codes and event loop are
`_cli.common`'s; the daemon commands `_cli.daemon_commands`'. Nothing here decides what an operation does.

Exit codes (`_cli.common`): 0 success; 1 Lean reported errors in the file (sync/refresh not save-ready, save
refused for errors); 2 usage error or invalid input; 3 Lean or setup failure; 4 the broker refused the call
(stale version or handle, bad position); 130 interrupted. The Lean stack is imported only when Lean runs in this
process, and `doctor` and `completion` load only when used.

Secrets (the secret flags of the Lean command, secret-named environment variables) never reach the output: the
errors it prints and the log lines it (or the daemon it runs as) writes go through the configuration's redactor.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, NoReturn, TextIO, cast

from beam_lsp.command_line import EXIT_BROKEN_PIPE, PipeParser, did_you_mean, stdout_gone
from beam_lsp.redaction import Redactor

from .__about__ import __version__
from ._cli import args as cli_args
from ._cli import commands, daemon_client, daemon_commands
from ._cli.commands import VERSION, Command
from ._cli.common import (
    EXIT_INTERRUPTED,
    EXIT_LEAN_ERRORS,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_SETUP,
    EXIT_USAGE,
    PROG,
    Interrupted,
    Options,
    Output,
    exit_code,
    run,
    workspace_root,
)
from ._cli.human import View, error_lines, file_has_errors, refused_save, render, render_error
from ._cli.position import in_lean_terms
from ._cli.progress import Reporter, progress_mode
from ._cli.render import Sources, print_json, write_text
from ._outbound import RedactingFormatter
from .config import BrokerConfig
from .errors import BrokerError
from .events import BrokerEvent, CallContext

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_LEAN_ERRORS",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_SETUP",
    "EXIT_USAGE",
    "PROG",
    "Interrupted",
    "Options",
    "build_parser",
    "call",
    "exit_code",
    "main",
    "run",
    "workspace_root",
]

Answer = dict[str, Any]
Send = Callable[[str, Mapping[str, Any]], Awaitable[Answer]]

_DESCRIPTION: Final = """\
Work with a Lean 4 project from the shell: sync files and read their diagnostics, save checkpoints,
navigate, read goals, and run Lean text speculatively. Every operation of the Beam broker is a command."""

_EPILOG: Final = f"""\
positions:
  Commands that act at a position take it as Lean prints it: FILE:LINE:COL, the line counting from 1
  and the column from 0 in characters (lean-beam hover Demo/Proofs.lean:4:31). Without --version they
  read the file from disk first and answer for that version. --line/--character (LSP, 0-based) remain.

workspace:
  The project is the nearest directory upward from the current one with lean-toolchain, lakefile.toml
  or lakefile.lean, or --root DIR. A relative FILE is looked up in the current directory, then in the
  project root (so a path lean-beam printed pastes back from anywhere in the project); FILE must be a
  .lean file of the project. The Lean server command is --lean-cmd, then $BEAM_LEAN_SERVER_CMD, then the
  `lake serve` of the toolchain lean-toolchain names (when elan has it), then `lake serve` from PATH.
  `lean-beam doctor` checks the setup.

output:
  On a terminal: text (diagnostics, warnings included, as `lean` prints them: FILE:LINE:COL:
  error(NAME): message; goals, hover text, outlines) and one live progress line. Otherwise (or with
  --json): the result JSON on stdout (--compact: one line), progress and the file's errors as plain
  lines on stderr. --human forces text. -q drops progress (errors still reach stderr).

daemon:
  `lean-beam daemon start` keeps a broker with a warm Lean server for the project on a unix socket;
  commands use it when it answers (so handles survive between commands), else run Lean in this process.
  `daemon status` / `daemon stop` inspect and stop it. --no-daemon forces an in-process run.
  Upstream Beam's spellings work too: `lean-beam serve` runs the daemon in the foreground, `status` / `stop`
  as above, and `recover` clears what a dead daemon left (--force: also ends one that does not answer).

exit codes:
  {EXIT_OK}    success (sync/save: the file has no errors; a failing probe is a success)
  {EXIT_LEAN_ERRORS}    Lean reported errors in the file (sync/refresh not save-ready, save refused)
  {EXIT_USAGE}    usage error or invalid input (invalidInput)
  {EXIT_SETUP}    Lean or setup failure (runtimeSetup, workerExited, syncBarrierIncomplete, internalError)
  {EXIT_REFUSED}    the broker refused the call (contentModified: stale version; invalidParams: bad position)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C cancels the call cleanly)
  {EXIT_BROKEN_PIPE}  stdout was closed early (lean-beam ... | head)

examples:
  lean-beam sync Demo/Proofs.lean
  lean-beam hover Demo/Proofs.lean:4:31
  lean-beam goals Demo/Goals.lean:5:2 --mode before
  lean-beam run-at Demo/Proofs.lean:9:5 --text '#check two'
  lean-beam --json run-at-handle Main.lean:10:2 --text @probe.lean | jq .next_handle > h.json
  lean-beam daemon start && lean-beam stats
  echo 'source <(lean-beam completion bash)' >> ~/.bashrc"""


# ---- parser -------------------------------------------------------------------------------------------
GROUPS: Final = (
    (
        "files and diagnostics",
        ("sync", "update", "refresh", "close", "todo", "code-action-resolve", "interactive-diagnostics", "outline",
         "document-symbols"),
    ),
    (
        "navigation",
        ("hover", "signature-help", "definition", "references", "workspace-symbols", "completions", "term-goal",
         "widgets", "widget-source"),
    ),
    (
        "goals and probes",
        ("goals", "run-at", "run-at-handle", "run-with", "run-with-linear", "release", "attempts", "axioms",
         "profile", "run-code"),
    ),
    ("save", ("save", "close-save")),
    (
        "daemon and setup",
        ("serve", "status", "stop", "recover", "daemon", "stats", "drop-workspace", "doctor", "completion"),
    ),
)  # fmt: skip
"""How `--help` lists the commands; a command of no group (a new operation) is listed under "other"."""


class _Parser(PipeParser):
    """argparse's parser that answers a mistyped command or option with the nearest ones ("did you mean")."""

    _given: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads; the signature is argparse's
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, remembering the words given (a subcommand's parser gets its own)."""
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """Print the usage and the error (with suggestions), then exit 2."""
        typo = re.match(r"argument (?:COMMAND|ACTION): invalid choice: '([^']*)'", message)
        if typo is not None:
            known = [name for action in self._actions if isinstance(action, argparse._SubParsersAction)
                     for name in action.choices]  # fmt: skip
            message = f"unknown command {typo[1]!r}" + _did_you_mean(typo[1], known)
        missing = re.match(r"the following arguments are required: (.*)", message)
        mistyped = self._mistyped_option() if missing is not None else None
        if missing is not None and mistyped is not None:
            # argparse checks required options before unknown ones: `--tex` reads as "--text is missing".
            message = f"unrecognized arguments: {mistyped}" + _did_you_mean(mistyped.split("=", 1)[0], self._known())
            message += f" ({missing[1]} {'is' if ',' not in missing[1] else 'are'} required)"
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown is not None and unknown[1].startswith("-") and mistyped is None:
            message += _did_you_mean(unknown[1], _option_strings(self))
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def write_message(self, stream: TextIO, message: str) -> None:
        """Write `--help`, `--version` and usage text as every other text of `lean-beam` is written."""
        write_text(stream, message)

    def _known(self) -> list[str]:
        return _option_strings(self)

    def _mistyped_option(self) -> str | None:
        """The first word given that looks like an option this parser does not have (`--tex`, `--tex=...`)."""
        known = set(self._known())
        for word in self._given:
            if word == "--":
                return None
            if word.startswith("--") and word.split("=", 1)[0] not in known:
                return word
        return None


def _did_you_mean(word: str, known: Sequence[str]) -> str:
    return did_you_mean(word, known) or f" (see {PROG} --help)"


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option of a parser and of its subcommands (an option may be given before or after the command)."""
    out: list[str] = []
    for action in parser._actions:
        out.extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.extend(_option_strings(sub))
    return sorted(set(out))


def _commands_help(parser: argparse.ArgumentParser) -> str:
    """The `commands` section of `--help`: the commands by group, each with its first sentence."""
    helps: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps.update({choice.dest: choice.help or "" for choice in action._choices_actions})
    grouped = {name for _, names in GROUPS for name in names}
    groups = [*GROUPS, ("other", tuple(name for name in helps if name not in grouped))]
    width = max(map(len, helps), default=0) + 2
    lines = ["commands:"]
    for title, names in groups:
        present = [name for name in names if name in helps]
        if present:
            lines.append(f"  {title}:")
            lines.extend(f"    {name.ljust(width)}{_short(helps[name], HELP_LINE - 4 - width)}" for name in present)
    return "\n".join(lines)


HELP_LINE: Final = 100
"""Width of a command's line in `--help` (its summary is cut to fit)."""


def _short(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: text.rfind(" ", 0, width - 1)].rstrip(",;:") + "…"


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
    group.add_argument(
        "--json", dest="output", action="store_const", const="json", default=s, help="print the result JSON"
    )
    group.add_argument(
        "--human", dest="output", action="store_const", const="human", default=s, help="print text, also into a pipe"
    )
    group.add_argument("--compact", action="store_true", default=s, help="print JSON on one line")
    group.add_argument("-q", "--quiet", action="store_true", default=s, help="no progress on stderr")
    group.add_argument("-v", "--verbose", action="store_true", default=s, help="say how the call runs (daemon or not)")
    group.add_argument(
        "--no-daemon", action="store_true", default=s, help="run Lean in this process even when a daemon runs"
    )
    return parent


def build_parser(found: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The `lean-beam` parser: the operations' commands, `stats`, `daemon`, `doctor` and `completion`.

    `found` is the operations' commands (default `commands.commands()`).
    """
    common = _common_options()
    parser = _Parser(
        prog=PROG,
        usage=f"{PROG} [options] COMMAND [ARGS] (see {PROG} COMMAND --help)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    # The commands are listed by group in the epilog (`_commands_help`), not in argparse's one long list.
    # Subcommand parsers are `_Parser`s too (argparse makes them of the parent's class): "did you mean" there too.
    subparsers = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog=PROG),
    )
    cli_args.add_operations(subparsers, [common], commands.commands() if found is None else found)
    daemon_commands.add_commands(subparsers, common)
    doctor = subparsers.add_parser(
        "doctor",
        parents=[common],
        help="check the setup: Lean and Lake, the project, a Lean server answering, the daemon directory",
        description="Check that lean-beam can work here: the Lean server command (lake/lean found, or the "
        "configured one), the project root and its toolchain, that a Lean server starts and answers for one "
        "file (FILE, or a scratch file with no imports), and that the daemon socket directory is usable. Each "
        f"check prints ok or fail with a hint; the exit status is {EXIT_OK} when all pass, else {EXIT_SETUP}.",
    )
    doctor.add_argument("file", nargs="?", metavar="FILE", help="a Lean file of the project to sync (optional)")
    doctor.add_argument("--timeout", type=float, default=120.0, metavar="S", help="bound for the Lean check")
    doctor.set_defaults(handler=_doctor)
    completion = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL, generated from the commands above. Install it with: "
        "bash: echo 'source <(lean-beam completion bash)' >> ~/.bashrc (or, with the bash-completion package: "
        "mkdir -p ~/.local/share/bash-completion/completions && lean-beam completion bash > "
        "~/.local/share/bash-completion/completions/lean-beam); "
        "zsh: mkdir -p ~/.zfunc && lean-beam completion zsh > ~/.zfunc/_lean-beam, with fpath=(~/.zfunc $fpath) "
        "before compinit in ~/.zshrc; "
        "fish: mkdir -p ~/.config/fish/completions && lean-beam completion fish > "
        "~/.config/fish/completions/lean-beam.fish.",
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")
    completion.set_defaults(handler=_completion)
    parser.epilog = f"{_commands_help(parser)}\n\n{_EPILOG}"
    return parser


def _doctor(args: argparse.Namespace, options: Options) -> int:
    from ._cli import doctor

    return doctor.main(args, options)


def _completion(args: argparse.Namespace, options: Options) -> int:
    from ._cli import completion

    sys.stdout.write(completion.script(build_parser(), args.shell))
    sys.stdout.flush()  # a closed pipe fails here, inside `main`, not at exit
    return EXIT_OK


# ---- running an operation -----------------------------------------------------------------------------
async def call(
    op: str,
    arguments: Mapping[str, Any],
    options: Options,
    root: str,
    emit: Callable[[BrokerEvent], None],
    *,
    fresh_version: bool = False,
) -> Answer:
    """Run one operation through the root's daemon if one answers, else in-process; the final message.

    With `fresh_version`, the `update` step runs first (same daemon or broker) and the operation answers for the
    version it returns.
    """

    async def steps(send: Send) -> Answer:
        args = dict(arguments)
        if fresh_version:
            first = await send("update", {"workspace": args["workspace"], "path": args["path"]})
            result = first.get("result")
            if not isinstance(result, Mapping):
                return first
            args[VERSION] = result[VERSION]
        return await send(op, args)

    if not options.no_daemon:
        paths = daemon_client.paths_for(root)
        try:
            if options.lean_cmd is not None:
                current = await daemon_client.status(paths)
                if current is not None and current.get("leanCmdDigest") != daemon_client.command_digest(
                    options.lean_cmd
                ):
                    options.say(
                        f"the daemon for {paths.root} runs another Lean command; running --lean-cmd in this process "
                        "(stop the daemon to change its command)"
                    )
                    raise daemon_client.DaemonUnavailable("the daemon runs another Lean command")
            started = time.perf_counter()
            answer = await steps(lambda name, args: daemon_client.request(paths, name, args, emit))
        except daemon_client.DaemonUnavailable as exc:
            options.note(f"{exc}")
        else:
            elapsed = (time.perf_counter() - started) * 1000
            options.note(f"answered by the daemon at {paths.socket} in {elapsed:.1f} ms")
            return answer
    options.note("running Lean in this process (cold start; `lean-beam daemon start` keeps it warm)")
    from .broker import Broker

    try:
        async with Broker.open(BrokerConfig(lean_cmd=options.lean_cmd)) as broker:

            async def send(name: str, args: Mapping[str, Any]) -> Answer:
                try:
                    return {"result": await broker.call(name, args, CallContext(emit=emit))}
                except BrokerError as exc:
                    return {"error": exc.wire()}

            return await steps(send)
    except BrokerError as exc:
        return {"error": exc.wire()}


def _file_argument(spec: Command, args: argparse.Namespace) -> str | None:
    """The file of the command's file argument as typed (None when it has none, or a malformed one)."""
    raw = next((vars(args).get(arg.dest) for arg in spec.args if arg.name == "path"), None)
    if not isinstance(raw, str):
        return None
    try:
        return cli_args.split_target(spec, raw).path
    except BrokerError:
        return None  # the position's own error comes once the project is known


def _operation(spec: Command, args: argparse.Namespace, options: Options) -> int:
    root = workspace_root(options, _file_argument(spec, args))
    arguments = cli_args.operation_arguments(spec, args, cli_args.Inputs())
    sources = Sources(root)
    form = spec.shape
    path: str | None = None
    if isinstance(arguments.get("path"), str):
        target = cli_args.split_target(spec, arguments["path"])
        path = arguments["path"] = cli_args.resolve_cli_path(target.path, root, os.getcwd())
        cli_args.check_file(target.path, path, root)
        cli_args.locate(spec, arguments, target, sources.get(path) if form.positions else None)
    arguments["workspace"] = {"root": root}
    if options.human and spec.takes("diagnostics_in_result"):
        arguments.setdefault("diagnostics_in_result", True)  # diagnostics a warm sync does not stream again
    if options.human and spec.takes("diagnostic_scope"):
        arguments.setdefault("diagnostic_scope", "all")  # warnings too, as `lean` prints them (errors decide the exit)
    fresh = form.versioned and VERSION not in arguments and "snapshot" not in arguments

    terminal = options.terminal
    mode = progress_mode(terminal.err, quiet=options.quiet)
    shown = commands.command_name(spec) + (f" {path}" if path is not None else "")
    reporter = Reporter(terminal, mode=mode, human=options.human, sources=sources, starting=shown)
    held = path if arguments.get("rebuild_imports") is True else None
    if held is not None:
        reporter.hold(held)  # what Lean says before the imports are rebuilt may not hold after
    try:
        answer = run(lambda: call(spec.name, arguments, options, root, reporter, fresh_version=fresh), reporter.tick)
    finally:
        reporter.close()
    if held is not None:
        reporter.release(current=not _against_stale_imports(answer))
    out = Output(options, terminal)
    text = arguments.get("text")
    view = View(sources, path, reporter.printed, text if isinstance(text, str) else None)
    result = answer.get("result")
    if isinstance(result, Mapping):
        out.value(result, lambda value: render(spec.output, value, view))
        if not file_has_errors(result):
            return EXIT_OK
        if not options.human:  # stderr carries the errors in every mode (what did not stream, e.g. a warm sync)
            for line in error_lines(result, view):
                terminal.print_err(line)
        return EXIT_LEAN_ERRORS
    error = answer.get("error")
    if isinstance(error, Mapping) and refused_save(error) is not None:
        if options.human:
            lines, notes = render_error(error, view)
            out.lines(lines)
            for note in notes:
                terminal.print_err(note)
        else:
            print_json(options.redactor().redact_json(dict(error)), compact=options.compact, stream=sys.stderr)
        return EXIT_LEAN_ERRORS
    if isinstance(error, Mapping) and path is not None and isinstance(error.get("message"), str):
        answer = {"error": {**error, "message": in_lean_terms(error["message"], sources.get(path))}}
    return out.finish(answer, lambda value: [])


def _against_stale_imports(answer: Mapping[str, Any]) -> bool:
    """Whether the file was checked against stale imports before this answer.

    That is: the imports were rebuilt first (`rebuilt_imports`), or they are stale and could not be
    (`staleDirectDeps` in the error).
    """
    result, error = answer.get("result"), answer.get("error")
    if isinstance(result, Mapping):
        return result.get("rebuilt_imports") is not None
    data = error.get("data") if isinstance(error, Mapping) else None
    return isinstance(data, Mapping) and "staleDirectDeps" in data


# ---- main ---------------------------------------------------------------------------------------------
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
    found = commands.commands()
    parser = build_parser(found)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return _exit_status(exc.code)
    except BrokenPipeError:
        return stdout_gone()
    if args.command is None:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: a command is required (see {PROG} --help)", file=sys.stderr)
        return EXIT_USAGE
    options = Options(compact=bool(getattr(args, "compact", False)), human=getattr(args, "output", None) == "human")
    redactor = Redactor()
    try:
        options = Options.of(args)
        redactor = options.redactor()
        _log_to_stderr(redactor)
        operation = getattr(args, "operation", None)
        if operation is not None:
            [spec] = [command for command in found if command.name == operation]
            return _operation(spec, args, options)
        handler: Callable[[argparse.Namespace, Options], int] = args.handler
        return handler(args, options)
    except BrokerError as exc:
        return Output(options).error(exc.redacted(redactor).wire())
    except (Interrupted, KeyboardInterrupt):
        print("beam: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return stdout_gone()


if __name__ == "__main__":
    sys.exit(main())
